//! The `/v1` HTTP API: routes, authentication, audit, and the launch function.
//!
//! This module owns the wire format and nothing else. A handler parses the
//! JSON body into its [`crate::api`] request, calls one use case of the
//! synchronous [`Hub`] with the request's [`Caller`] on the blocking pool
//! (`spawn_blocking`), and turns the reply into JSON (plus its audit note);
//! every rule (scene rights, defaults, filters) is the use case's. Handlers
//! never touch the index, the store, consolidation or the embedder (the
//! layering test forbids it). Every route is listed once, in the list behind
//! [`route_table`]: the router is built from it and a test checks
//! `openapi.yaml` against it.
//!
//! A middleware authenticates every route but `/v1/health` (Bearer token,
//! compared by hash in constant time, re-read when `tokens.json` changes),
//! builds the request's [`Caller`] (its `now` from the hub's one clock) and
//! writes one audit line per request with the token's name (never its
//! secret) and the scene the use case acted in. A request it refuses
//! (`401`, `429` past the rate limit) has its body read first, so the
//! connection stays usable and the client reads the refusal instead of a
//! closed connection; `429` says when to retry (`Retry-After`).
//!
//! While the index is behind the journal (catching up after a full disk, a
//! device's file just copied in), every answer to a caller who may read
//! says how many journal lines it could read are not in the index yet, in
//! the `x-memd-index-behind` header (search and recall also in their body), so
//! an empty result is never mistaken for "no such memory".
//!
//! secret) and the scene the use case acted in. The local credential of
//! `memd serve` ([`AppState::with_operator_secret`], recorded in
//! `ROOT/.memd.addr` for the CLI) authenticates as the local operator
//! ([`Hub::operator`], token name `cli`, not rate limited, as in process),
//! and only from a loopback peer: from any other peer it is an unknown token.
//!
//! [`serve`] runs its own accept loop over hyper so that every connection has
//! a header-read timeout, which also closes idle keep-alive connections
//! ([`HEADER_TIMEOUT`]). On a loopback listener every request's `Host` must
//! name the loopback address and port (`127.0.0.1:PORT`, `localhost:PORT`,
//! `[::1]:PORT`), else `403 FORBIDDEN`: a web page cannot reach the API by
//! rebinding its own domain name to 127.0.0.1.

mod admin;
mod categories;
mod consolidation;
mod documents;
pub mod error;
pub mod extract;
mod lifecycle;
pub mod metrics;
mod operator;
mod read;
mod write;

pub(crate) use read::LIMIT_CLAMPED;

use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::Serialize;

use crate::audit::{AuditEntry, AuditLog};
use crate::auth::TokenStore;
use crate::hub::{Caller, Clock, Hub};
use error::ApiError;
use extract::MAX_BODY_BYTES;

/// The header that says how many journal lines the caller could read are
/// not in the index yet (absent when none).
pub(crate) const INDEX_BEHIND: &str = "x-memd-index-behind";

/// Shared state of the HTTP server.
#[derive(Clone)]
pub struct AppState {
    hub: Arc<Hub>,
    tokens: Arc<TokenStore>,
    audit: Arc<AuditLog>,
    metrics: Arc<metrics::Metrics>,
    /// The local credential of `memd serve`: the operator, from loopback peers.
    operator_secret: Option<crate::auth::OperatorSecret>,
}

/// The address of the peer a request came from (put in place by the accept
/// loop; absent for requests that did not come over a socket).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) std::net::SocketAddr);

/// Who a bearer secret stands for.
enum Bearer {
    /// An issued token.
    Token(crate::auth::Grant),
    /// The local credential, from a loopback peer.
    Operator,
}

impl AppState {
    /// State over an open hub: tokens from `ROOT/tokens.json`, audit to `data/audit.jsonl`.
    pub fn new(hub: Arc<Hub>) -> Self {
        let layout = hub.layout().clone();
        AppState {
            tokens: Arc::new(TokenStore::new(layout.tokens())),
            audit: Arc::new(AuditLog::new(layout.audit())),
            metrics: Arc::new(metrics::Metrics::default()),
            operator_secret: None,
            hub,
        }
    }

    /// Accepts `secret` as the local operator from loopback peers (the local
    /// credential `memd serve` records for the CLI in `ROOT/.memd.addr`).
    pub fn with_operator_secret(mut self, secret: &str) -> Self {
        self.operator_secret = Some(crate::auth::OperatorSecret::new(secret));
        self
    }

    /// Whether `secret` is the local credential and the request came from a
    /// loopback peer.
    fn is_operator(&self, secret: &str, extensions: &axum::http::Extensions) -> bool {
        let Some(local) = &self.operator_secret else {
            return false;
        };
        let loopback = extensions
            .get::<Peer>()
            .is_some_and(|p| p.0.ip().is_loopback());
        loopback && local.matches(secret)
    }

    /// Who the request's bearer secret stands for: `None` without one or
    /// for an unknown or revoked token.
    fn bearer_of(
        &self,
        headers: &HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Option<Bearer>, ApiError> {
        match bearer(headers) {
            None => Ok(None),
            Some(secret) if self.is_operator(secret, extensions) => Ok(Some(Bearer::Operator)),
            Some(secret) => Ok(self
                .tokens
                .authenticate(secret)
                .map_err(ApiError::from)?
                .map(Bearer::Token)),
        }
    }

    /// The caller the request's bearer secret stands for (`None`: no
    /// secret, or an unknown one), for the routes open without a token.
    pub(crate) fn caller_of(
        &self,
        headers: &HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Option<Caller>, ApiError> {
        Ok(self.bearer_of(headers, extensions)?.map(|b| match b {
            Bearer::Token(g) => self.hub.caller(g),
            Bearer::Operator => self.hub.operator(),
        }))
    }

    /// Replaces the hub's clock, the one every request reads (tests).
    pub fn with_clock(self, clock: Clock) -> Self {
        self.hub.set_clock(clock);
        self
    }

    /// The hub.
    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// The grant of the request's bearer token: `None` without a token or for
    /// an unknown or revoked one (used by `/mcp`, which shares the tokens).
    pub(crate) fn grant(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<crate::auth::Grant>, ApiError> {
        match bearer(headers) {
            None => Ok(None),
            Some(secret) => self.tokens.authenticate(secret).map_err(ApiError::from),
        }
    }

    /// Runs a hub call on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Hub) -> crate::Result<T> + Send + 'static,
    {
        let hub = self.hub.clone();
        tokio::task::spawn_blocking(move || f(&hub))
            .await
            .map_err(|e| ApiError::from(crate::Error::Internal(format!("worker failed: {e}"))))?
            .map_err(ApiError::from)
    }

    /// Runs a use case for `caller` on the blocking pool; afterwards
    /// `caller` knows the scene it acted in (clones share it).
    async fn call<T, F>(&self, caller: &Caller, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Hub, &Caller) -> crate::Result<T> + Send + 'static,
    {
        let c = caller.clone();
        self.run(move |hub| hub.on_behalf_of(&c, || f(hub, &c)))
            .await
    }

    /// [`AppState::call`], and then, on the same blocking thread, the
    /// journal lines `caller` could read that the index has not applied
    /// (the reply's [`INDEX_BEHIND`]), so that no second hop reads them.
    async fn call_behind<T, F>(&self, caller: &Caller, f: F) -> Result<(T, KnownBehind), ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Hub, &Caller) -> crate::Result<T> + Send + 'static,
    {
        self.call(caller, move |hub, c| {
            let out = f(hub, c)?;
            Ok((out, KnownBehind(hub.index_behind_for(c).ok().flatten())))
        })
        .await
    }
}

/// One entry of the route table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// Full path, e.g. `/v1/search`.
    pub path: &'static str,
    /// Whether a token is required.
    pub auth: bool,
}

/// What a handler tells the audit log besides status and timing.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditNote {
    /// Scene acted in.
    pub(crate) scene: Option<String>,
    /// Ids returned or changed.
    pub(crate) hits: Vec<String>,
    /// Route-specific facts.
    pub(crate) extra: Option<serde_json::Value>,
}

/// A reply's [`INDEX_BEHIND`] for its caller, known by its handler: a
/// search or recall that found the index caught up with the whole journal
/// (`None`: no reader is behind), or a write whose lag was read on the
/// thread that wrote ([`AppState::call_behind`]). The middleware then does
/// not check the lag again on another thread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KnownBehind(pub(crate) Option<u64>);

/// The audit note of `caller`'s request: the scene its use case acted in
/// and the ids it returned or changed.
pub(crate) fn note(caller: &Caller, hits: impl IntoIterator<Item = String>) -> AuditNote {
    AuditNote {
        scene: caller.acted_in().map(|s| s.to_string()),
        hits: hits.into_iter().collect(),
        extra: None,
    }
}

/// A JSON response carrying its audit note.
pub(crate) fn reply<T: Serialize>(value: &T, note: AuditNote) -> Response {
    let mut res = axum::Json(value).into_response();
    res.extensions_mut().insert(note);
    res
}

fn routes() -> Vec<(Route, MethodRouter<AppState>)> {
    let r = |method: &'static str, path: &'static str, auth: bool| Route { method, path, auth };
    vec![
        (r("GET", "/metrics", true), get(admin::metrics)),
        (r("GET", "/v1/health", false), get(admin::health)),
        (r("GET", "/v1/capabilities", true), get(admin::capabilities)),
        (
            r("GET", "/v1/config-schema", true),
            get(admin::config_schema),
        ),
        (r("GET", "/v1/config-state", true), get(admin::config_state)),
        (r("POST", "/v1/config", true), post(admin::set_config)),
        (r("GET", "/v1/tokens", true), get(admin::tokens)),
        (r("POST", "/v1/tokens/revoke", true), post(admin::revoke)),
        (r("POST", "/v1/bootstrap", true), post(read::bootstrap)),
        (r("POST", "/v1/search", true), post(read::search)),
        (r("POST", "/v1/get", true), post(read::get)),
        (r("POST", "/v1/recent", true), post(read::recent)),
        (r("POST", "/v1/recall", true), post(read::recall)),
        (r("POST", "/v1/timeline", true), post(read::timeline)),
        (r("POST", "/v1/disclose", true), post(read::disclose)),
        (r("POST", "/v1/audience", true), post(read::audience)),
        (r("POST", "/v1/documents", true), post(documents::documents)),
        (r("POST", "/v1/document", true), post(documents::document)),
        (r("POST", "/v1/forgotten", true), post(read::forgotten)),
        (r("POST", "/v1/write", true), post(write::write)),
        (r("POST", "/v1/forget", true), post(write::forget)),
        (r("POST", "/v1/restore", true), post(write::restore)),
        (
            r("POST", "/v1/conflicts/dismiss", true),
            post(write::dismiss_conflict),
        ),
        (
            r("POST", "/v1/conflicts/accept", true),
            post(write::accept_conflict),
        ),
        (r("POST", "/v1/ingest", true), post(write::ingest)),
        (r("POST", "/v1/members", true), post(write::members)),
        (r("POST", "/v1/tags", true), post(lifecycle::tags)),
        (
            r("POST", "/v1/archive/search", true),
            post(lifecycle::archive_search),
        ),
        (
            r("POST", "/v1/archive/restore", true),
            post(lifecycle::archive_restore),
        ),
        (
            r("POST", "/v1/categories", true),
            post(categories::categories),
        ),
        (
            r("GET", "/v1/consolidation/runs", true),
            get(consolidation::runs),
        ),
        (
            r("POST", "/v1/consolidation/report", true),
            post(consolidation::run_report),
        ),
        (
            r("POST", "/v1/consolidation/run", true),
            post(consolidation::run_now),
        ),
        (
            r("POST", "/v1/consolidation/rollback", true),
            post(consolidation::rollback),
        ),
        (r("POST", "/v1/reindex", true), post(admin::reindex)),
        // The operator's routes (`operator.rs`).
        (r("POST", "/v1/list", true), post(operator::list)),
        (r("POST", "/v1/tier", true), post(operator::tier)),
        (r("POST", "/v1/gc", true), post(operator::gc)),
        (r("POST", "/v1/audit", true), post(operator::audit)),
        (r("GET", "/v1/scenes", true), get(operator::scenes)),
        (r("POST", "/v1/profile", true), post(operator::profile)),
        (
            r("GET", "/v1/health/history", true),
            get(operator::health_history),
        ),
    ]
}

/// Every route the router serves, in declaration order.
pub fn route_table() -> &'static [Route] {
    static TABLE: LazyLock<Vec<Route>> =
        LazyLock::new(|| routes().into_iter().map(|(r, _)| r).collect());
    &TABLE
}

/// The `/v1` router over `state`.
pub fn router(state: AppState) -> Router {
    let mut router = Router::new();
    for (route, handler) in routes() {
        router = router.route(route.path, handler);
    }
    router
        .fallback(|| async { ApiError::no_route() })
        .method_not_allowed_fallback(|| async {
            // 405, as HTTP wants; the body keeps the one envelope and code table.
            let e = ApiError::invalid("method not allowed on this route; see GET /v1/capabilities");
            (
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                axum::Json(e.envelope()),
            )
        })
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// The token of an `Authorization: Bearer …` header (also used by `/mcp`).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    bearer(headers)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Authenticates (except health and unknown paths), runs the handler, audits.
async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let ts = state.hub.now();
    let route = format!("{} {}", req.method(), req.uri().path());
    let known = route_table().iter().find(|r| {
        r.path == req.uri().path()
            && Method::from_bytes(r.method.as_bytes()).ok().as_ref() == Some(req.method())
    });
    let Some(known) = known else {
        return next.run(req).await;
    };
    if !known.auth {
        let res = next.run(req).await;
        state.metrics.record(
            &route,
            res.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
        return res;
    }
    let who = match state.bearer_of(req.headers(), req.extensions()) {
        Ok(who) => who,
        Err(e) => return e.into_response(),
    };
    let operator = matches!(who, Some(Bearer::Operator));
    let caller = who.map(|b| match b {
        Bearer::Token(g) => state.hub.caller(g),
        Bearer::Operator => state.hub.operator(),
    });
    let token = caller.as_ref().map(|c| c.name().to_string());
    let per_minute = state.hub.config().http.rate_limit_per_minute;
    // Shares the scene the use case acts in, for the audit line of a refusal too.
    let mut acted: Option<Caller> = None;
    let mut res = match caller {
        None => {
            drain(req).await;
            ApiError::unauthorized().into_response()
        }
        // The local operator is not rate limited, as in process.
        Some(c)
            if !operator
                && !state
                    .metrics
                    .allow(c.name(), ts.timestamp().div_euclid(60), per_minute) =>
        {
            drain(req).await;
            rate_limited(c.name(), per_minute, ts.timestamp())
        }
        Some(caller) => {
            acted = Some(caller.clone());
            run_as(&state, caller, req, next).await
        }
    };
    if let Some(caller) = acted.clone() {
        index_behind_header(&state, caller, &mut res).await;
    }
    let mut note = res
        .extensions()
        .get::<AuditNote>()
        .cloned()
        .unwrap_or_default();
    if note.scene.is_none() {
        note.scene = acted.and_then(|c| c.acted_in()).map(|s| s.to_string());
    }
    let status = res.status().as_u16();
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    state
        .metrics
        .record(&route, status, started.elapsed().as_secs_f64());
    state
        .hub
        .note_request(&route, started.elapsed().as_secs_f64());
    tracing::info!(
        http.route = %route,
        http.status = status,
        token.name = token.as_deref().unwrap_or("-"),
        hits.count = note.hits.len(),
        duration_ms,
        "request"
    );
    state.audit.record(&AuditEntry {
        ts,
        route,
        token,
        scene: note.scene,
        hits: note.hits,
        denied: u32::from(status == 401 || status == 403),
        status,
        duration_ms,
        extra: note.extra,
    });
    res
}

/// Sets [`INDEX_BEHIND`] on a successful reply to `caller`: what its
/// handler knew ([`KnownBehind`]), else read on the blocking pool.
async fn index_behind_header(state: &AppState, caller: Caller, res: &mut Response) {
    if !res.status().is_success() {
        return;
    }
    let behind = match res.extensions().get::<KnownBehind>() {
        Some(known) => known.0,
        None => state
            .run(move |hub| hub.index_behind_for(&caller))
            .await
            .ok()
            .flatten(),
    };
    if let Some(n) = behind {
        res.headers_mut().insert(INDEX_BEHIND, n.into());
    }
}

/// Runs the handler for `caller`. A `429` it answers counts as rate
/// limited: past the per-minute limit (answered before the handler), only
/// the search gate answers it, for a token whose own queue of searches is
/// full.
async fn run_as(state: &AppState, caller: Caller, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(caller);
    let res = next.run(req).await;
    if res.status() == axum::http::StatusCode::TOO_MANY_REQUESTS {
        state.metrics.count_rate_limited();
    }
    res
}

/// `429` for token `name` past `per_minute` requests, saying when the
/// minute that began before `now` (seconds) ends (`Retry-After`).
fn rate_limited(name: &str, per_minute: u32, now: i64) -> Response {
    let mut res = ApiError::new(
        crate::error::ErrorCode::RateLimited,
        format!(
            "token {name:?} sent more than {per_minute} requests this minute; retry in a minute"
        ),
    )
    .into_response();
    let wait = 60 - now.rem_euclid(60);
    res.headers_mut()
        .insert(axum::http::header::RETRY_AFTER, wait.into());
    res
}

/// Reads and drops a request's body (at most [`MAX_BODY_BYTES`]) before a
/// refusal. A body left unread makes hyper close the connection once the
/// reply is written, and a client still sending it, or sending its next
/// request on that connection, then sees the connection closed instead of
/// the refusal.
async fn drain(req: Request) {
    let _ = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await;
}

/// How long in-flight requests get to finish after shutdown is asked for.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a client may take to send a request's headers, and how long an
/// idle keep-alive connection stays open waiting for the next request.
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How the server treats connections.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// See [`SHUTDOWN_GRACE`].
    pub grace: std::time::Duration,
    /// See [`HEADER_TIMEOUT`]: a connection that has not sent a whole request
    /// head within it (a half-sent request, or an idle keep-alive) is closed.
    pub header_timeout: std::time::Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            grace: SHUTDOWN_GRACE,
            header_timeout: HEADER_TIMEOUT,
        }
    }
}

/// Serves `state` on `listener` until `shutdown` completes, then lets
/// in-flight requests finish (for at most [`SHUTDOWN_GRACE`]) and fsyncs the
/// audit log. Every acknowledged write is already durable in the journal (it
/// is fsync'd before the reply), so giving up on a stuck client loses nothing
/// that was acknowledged.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, Router::new(), shutdown).await
}

/// [`serve`] with more routes beside `/v1` (the MCP endpoint `/mcp`).
pub(crate) async fn serve_with(
    listener: tokio::net::TcpListener,
    state: AppState,
    extra: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run(listener, state, extra, shutdown, ServeOptions::default()).await
}

/// [`serve`] with a chosen grace period (tests use a short one).
pub async fn serve_with_grace(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let options = ServeOptions {
        grace,
        ..ServeOptions::default()
    };
    run(listener, state, Router::new(), shutdown, options).await
}

/// [`serve`] with chosen [`ServeOptions`] (tests use short timeouts).
pub async fn serve_with_options(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    run(listener, state, Router::new(), shutdown, options).await
}

/// The `Host` values a loopback listener on `local` answers to: the address
/// itself, `127.0.0.1`, `localhost` and `[::1]`, each with the port (and
/// without it on port 80). Anything else is a browser that was pointed at
/// this port under another name (DNS rebinding), and gets `FORBIDDEN`.
fn loopback_hosts(local: std::net::SocketAddr) -> Vec<String> {
    let port = local.port();
    let ip = match local.ip() {
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        std::net::IpAddr::V4(v4) => v4.to_string(),
    };
    let mut names = vec![ip, "127.0.0.1".into(), "localhost".into(), "[::1]".into()];
    names.dedup();
    let mut out: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    if port == 80 {
        out.extend(names);
    }
    out
}

/// Refuses requests whose `Host` (or request-target authority) is not one of
/// `allowed`. Every name the request carries must be allowed: an absolute-form
/// target (`GET http://127.0.0.1:PORT/…`) with a foreign `Host` is refused, and
/// so is a request with more than one `Host` header.
async fn check_host(allowed: Arc<Vec<String>>, req: Request, next: Next) -> Response {
    let mut names: Vec<String> = req
        .headers()
        .get_all(axum::http::header::HOST)
        .iter()
        .map(|h| h.to_str().unwrap_or("\u{fffd}").to_string())
        .collect();
    if names.len() > 1 {
        return ApiError::forbidden("more than one Host header").into_response();
    }
    if let Some(a) = req.uri().authority() {
        names.push(a.as_str().to_string());
    }
    if names.is_empty() {
        return ApiError::forbidden("a Host header is required").into_response();
    }
    match names
        .iter()
        .find(|h| !allowed.iter().any(|a| a.eq_ignore_ascii_case(h.trim())))
    {
        None => next.run(req).await,
        Some(h) => ApiError::forbidden(format!(
            "Host {h:?} is not this server's loopback address; use http://{}",
            allowed.first().map_or("127.0.0.1", String::as_str)
        ))
        .into_response(),
    }
}

async fn run(
    listener: tokio::net::TcpListener,
    state: AppState,
    extra: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let audit = state.audit.clone();
    let local = listener.local_addr()?;
    let mut app = extra.merge(router(state));
    if local.ip().is_loopback() {
        let allowed = Arc::new(loopback_hosts(local));
        app = app.layer(middleware::from_fn(move |req: Request, next: Next| {
            check_host(allowed.clone(), req, next)
        }));
    }
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout)
        .keep_alive(true);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let shutdown = shutdown;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(Peer(peer));
            tower::ServiceExt::oneshot(app.clone(), req)
        });
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // Timeouts and clients that hang up end here; nothing to report.
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(options.grace) => {
            tracing::warn!(grace_ms = options.grace.as_millis(), "requests still running after the grace period; stopping anyway");
        }
    }
    audit.sync();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET /v1/capabilities` with `secret`, from `peer` (none: not over a socket).
    async fn capabilities_from(
        app: &Router,
        secret: &str,
        peer: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let mut req = axum::http::Request::builder()
            .uri("/v1/capabilities")
            .header("authorization", format!("Bearer {secret}"))
            .body(axum::body::Body::empty())
            .unwrap();
        if let Some(p) = peer {
            req.extensions_mut().insert(Peer(p.parse().unwrap()));
        }
        let res = tower::ServiceExt::oneshot(app.clone(), req).await.unwrap();
        let status = res.status().as_u16();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[tokio::test]
    async fn the_local_credential_is_the_operator_from_loopback_peers_only() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::for_tests(dir.path());
        let secret = "mdl_0123456789abcdef";
        let app = router(AppState::new(Arc::new(hub)).with_operator_secret(secret));
        let (status, caps) = capabilities_from(&app, secret, Some("127.0.0.1:40000")).await;
        assert_eq!(status, 200);
        assert_eq!(caps["token"]["name"], "cli");
        let (status, _) = capabilities_from(&app, secret, Some("[::1]:40000")).await;
        assert_eq!(status, 200);
        // From another machine, or from nowhere known, it is an unknown token.
        for peer in [Some("192.168.1.20:40000"), Some("[2001:db8::1]:1"), None] {
            let (status, body) = capabilities_from(&app, secret, peer).await;
            assert_eq!(status, 401, "{peer:?}");
            assert_eq!(body["error"]["code"], "UNAUTHORIZED");
        }
        let (status, _) = capabilities_from(&app, "mdl_wrong", Some("127.0.0.1:1")).await;
        assert_eq!(status, 401);
    }

    #[test]
    fn loopback_hosts_name_the_port() {
        let v4 = loopback_hosts("127.0.0.1:8787".parse().unwrap());
        assert_eq!(v4, ["127.0.0.1:8787", "localhost:8787", "[::1]:8787"]);
        let v6 = loopback_hosts("[::1]:80".parse().unwrap());
        assert!(v6.contains(&"[::1]:80".to_string()) && v6.contains(&"localhost".to_string()));
        let other = loopback_hosts("127.0.0.2:9".parse().unwrap());
        assert_eq!(other[0], "127.0.0.2:9");
    }
}
