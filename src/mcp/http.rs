//! `/mcp`: the MCP tools over streamable HTTP inside `memd serve`.
//!
//! Every request needs a valid bearer token (the `/v1` tokens); a missing or
//! unknown one gets the usual `401 UNAUTHORIZED` envelope before the MCP
//! layer sees it. Tools then call the daemon's own `/v1` router in-process
//! with the token of the HTTP request that carried the tool call, so a
//! revoked token stops working mid-session and rights are exactly the
//! token's.
//!
//! Sessions (the `initialize` handshake of protocol versions before
//! 2026-07-28) belong to the token that opened them: the session id of every
//! `initialize` answer is recorded with the sha256 of its bearer token, and a
//! later request naming that `Mcp-Session-Id` (POST, GET stream, DELETE)
//! with any other token gets `404 NOT_FOUND`, the same answer as for a
//! session that does not exist. `initialize` is limited per token and
//! minute (`mcp.initializePerMinute`), open sessions per token and in all
//! (`mcp.maxSessionsPerToken`, `mcp.maxSessions`): beyond them it is
//! `429 RATE_LIMITED`. Sessions idle for `mcp.idleMinutes` are closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{MemoryServer, Upstream};
use crate::config::McpConfig;
use crate::error::ErrorCode;
use crate::http::AppState;
use crate::http::error::ApiError;

/// The path the MCP service is mounted at.
pub const PATH: &str = "/mcp";

/// The session header of streamable HTTP.
const SESSION_HEADER: &str = "mcp-session-id";

/// Largest MCP request body read to look for `initialize` (rmcp's own limit).
const MAX_MCP_BODY: usize = 4 * 1024 * 1024;

/// A router serving MCP at [`PATH`] over `state`. Cancelling `shutdown`
/// closes every MCP session and open event stream, so a graceful shutdown of
/// the HTTP server does not wait for idle clients.
pub fn router(state: AppState, shutdown: CancellationToken) -> Router {
    let limits = state.hub().config().mcp.clone();
    router_with(state, shutdown, limits)
}

/// [`router`] with explicit session limits instead of the config's `mcp` section.
pub fn router_with(state: AppState, shutdown: CancellationToken, limits: McpConfig) -> Router {
    let upstream = Arc::new(Upstream::InProcess(crate::http::router(state.clone())));
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(shutdown);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(Duration::from_secs(
        u64::from(limits.idle_minutes.max(1)) * 60,
    ));
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(
        move || Ok(MemoryServer::new(upstream.clone(), None)),
        manager.clone(),
        config,
    );
    let guard = Arc::new(Guard {
        state,
        limits,
        manager,
        table: Mutex::new(Table::default()),
    });
    Router::new()
        .nest_service(PATH, service)
        .layer(middleware::from_fn_with_state(guard, guard_sessions))
}

/// Who owns which session, and how many `initialize` calls each token made.
#[derive(Default)]
struct Table {
    /// Session id → sha256 of the bearer token that opened it.
    owners: HashMap<String, String>,
    /// Token hash → `initialize` requests in flight (slots held while the session is created).
    pending: HashMap<String, usize>,
    /// Token hash → (minute since the epoch, `initialize` requests in it).
    inits: HashMap<String, (i64, u32)>,
}

struct Guard {
    state: AppState,
    limits: McpConfig,
    manager: Arc<LocalSessionManager>,
    table: Mutex<Table>,
}

impl Guard {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().expect("MCP session table poisoned")
    }

    /// Drops owners of sessions rmcp has closed (idle timeout, worker exit).
    async fn prune(&self) {
        let live: Vec<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        self.table().owners.retain(|id, _| live.contains(id));
    }

    /// Takes an `initialize` slot for `token`, or says why not.
    async fn admit(&self, token: &str, name: &str) -> Result<(), ApiError> {
        self.prune().await;
        let minute = self.state.hub().now().timestamp().div_euclid(60);
        let l = &self.limits;
        let mut t = self.table();
        let limited = |msg: String| Err(ApiError::new(ErrorCode::RateLimited, msg));
        let window = t.inits.entry(token.to_string()).or_insert((minute, 0));
        if window.0 != minute {
            *window = (minute, 0);
        }
        // Only admitted requests count against the allowance.
        if l.initialize_per_minute > 0 && window.1 >= l.initialize_per_minute {
            return limited(format!(
                "token {name:?} sent more than {} MCP initialize requests this minute; \
                 reuse a session or retry in a minute",
                l.initialize_per_minute
            ));
        }
        let pending: usize = t.pending.values().sum();
        let mine = t.owners.values().filter(|o| *o == token).count()
            + t.pending.get(token).copied().unwrap_or(0);
        if l.max_sessions_per_token > 0 && mine >= l.max_sessions_per_token {
            return limited(format!(
                "token {name:?} has {mine} open MCP sessions (mcp.maxSessionsPerToken); \
                 close one with DELETE /mcp or wait {} minutes for idle ones to expire",
                l.idle_minutes
            ));
        }
        if l.max_sessions > 0 && t.owners.len() + pending >= l.max_sessions {
            return limited(format!(
                "the server has {} open MCP sessions (mcp.maxSessions); retry later",
                l.max_sessions
            ));
        }
        if let Some(window) = t.inits.get_mut(token) {
            window.1 += 1;
        }
        *t.pending.entry(token.to_string()).or_default() += 1;
        Ok(())
    }

    /// Releases the slot of an `initialize` and records the session it opened.
    fn settle(&self, token: &str, session: Option<String>) {
        let mut t = self.table();
        if let Some(n) = t.pending.get_mut(token) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.pending.remove(token);
            }
        }
        if let Some(id) = session {
            t.owners.insert(id, token.to_string());
        }
    }

    fn owned_by(&self, session: &str, token: &str) -> bool {
        self.table().owners.get(session).is_some_and(|o| o == token)
    }
}

/// Whether a JSON-RPC body (one message or a batch) holds an `initialize` request.
fn is_initialize(body: &[u8]) -> bool {
    let is_init = |v: &serde_json::Value| v["method"] == "initialize";
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(items)) => items.iter().any(is_init),
        Ok(v) => is_init(&v),
        Err(_) => false,
    }
}

fn no_session() -> Response {
    ApiError::new(
        ErrorCode::NotFound,
        "no MCP session with this Mcp-Session-Id for this token; send initialize to open one",
    )
    .into_response()
}

/// Bearer check, session ownership, `initialize` limits.
async fn guard_sessions(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let grant = match g.state.grant(req.headers()) {
        Ok(Some(grant)) => grant,
        Ok(None) => return ApiError::unauthorized().into_response(),
        Err(e) => return e.into_response(),
    };
    let token = crate::auth::hash_secret(crate::http::bearer_token(req.headers()).unwrap_or(""));
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{0}").to_string());
    if let Some(session) = session {
        if !g.owned_by(&session, &token) {
            return no_session();
        }
        let delete = req.method() == Method::DELETE;
        let res = next.run(req).await;
        if delete && res.status().is_success() {
            g.table().owners.remove(&session);
        }
        return res;
    }
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_MCP_BODY).await else {
        return ApiError::invalid(format!(
            "MCP request body is larger than {MAX_MCP_BODY} bytes"
        ))
        .into_response();
    };
    let init = is_initialize(&bytes);
    if init && let Err(e) = g.admit(&token, &grant.name).await {
        return e.into_response();
    }
    let res = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if init {
        let opened = res
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        g.settle(&token, opened);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_initialize_in_messages_and_batches() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#
        ));
        assert!(is_initialize(
            br#"[{"method":"ping"},{"method":"initialize"}]"#
        ));
        assert!(!is_initialize(br#"{"method":"tools/list"}"#));
        assert!(!is_initialize(b"not json"));
    }
}
