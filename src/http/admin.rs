//! Service routes: health, capabilities, metrics, configuration and token
//! management. The rules (who sees what, which keys may change) are the
//! hub's ([`crate::hub::admin`], [`crate::hub::settings`]); this file adds
//! what only HTTP knows: the route list, the body limit and the Prometheus
//! text format.

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated, MAX_BODY_BYTES, RequiredJson};
use super::{AppState, AuditNote, reply, route_table};
use crate::api::{ReindexBody, RevokeBody};

/// `GET /v1/health`: without a token (or with a token lacking `admin`), the
/// status and each component's state; with an admin token (or the local
/// credential of the CLI) also counts (by stage, scene, privacy, tier),
/// pending vectors, scheduled jobs and consolidation. An unknown token is `UNAUTHORIZED`, not a quiet downgrade.
pub(crate) async fn health(
    State(st): State<AppState>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let caller = st.caller_of(req.headers(), req.extensions())?;
    if caller.is_none()
        && req
            .headers()
            .contains_key(axum::http::header::AUTHORIZATION)
    {
        return Err(ApiError::unauthorized());
    }
    let view = st.run(move |hub| hub.health_view(caller.as_ref())).await?;
    Ok(reply(&view, AuditNote::default()))
}

/// `GET /metrics` (admin): Prometheus text.
pub(crate) async fn metrics(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<Response, ApiError> {
    let stats = st.call(&caller, |hub, c| hub.admin_stats(c)).await?;
    let gate = st.hub.search_gate_load();
    let text = st.metrics.render(&[
        (
            "memd_memories",
            "Searchable memories.",
            stats.counts.memories,
        ),
        (
            "memd_facts",
            "Facts that are not forgotten.",
            stats.counts.facts,
        ),
        ("memd_vectors", "Stored vectors.", stats.vectors),
        (
            "memd_sqlite_heap_bytes",
            "Bytes SQLite holds: page caches, statements, schemas.",
            st.hub.sqlite_heap_bytes(),
        ),
        (
            "memd_vectors_pending",
            "Memories waiting for their vector.",
            stats.pending_vectors,
        ),
        (
            "memd_journal_bytes",
            "Bytes in the fact journal.",
            stats.journal_bytes,
        ),
        (
            "memd_search_gate_running",
            "Searches holding the search gate.",
            gate.0 as u64,
        ),
        (
            "memd_search_gate_waiting",
            "Searches waiting at the search gate (all tokens).",
            gate.1 as u64,
        ),
        (
            "memd_uptime_seconds",
            "Seconds since the server started.",
            st.hub.uptime().as_secs(),
        ),
    ]);
    let mut res = (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    )
        .into_response();
    res.extensions_mut().insert(AuditNote::default());
    Ok(res)
}

/// `GET /v1/capabilities`: routes, limits, features and the caller's own rights.
pub(crate) async fn capabilities(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Response {
    let mut body = st.hub.capabilities(&caller);
    let routes: Vec<String> = route_table()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    body["routes"] = serde_json::json!(routes);
    body["limits"]["maxBodyBytes"] = serde_json::json!(MAX_BODY_BYTES);
    reply(&body, AuditNote::default())
}

/// `GET /v1/config-schema`: the JSON Schema of `config.json`, with the keys
/// that `POST /v1/config` may change in `x-editable`.
pub(crate) async fn config_schema(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Response {
    reply(&st.hub.config_schema(&caller), AuditNote::default())
}

/// `GET /v1/config-state` (admin): the editable keys and their values.
pub(crate) async fn config_state(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<Response, ApiError> {
    let values = st.call(&caller, |hub, c| hub.config_state(c)).await?;
    Ok(reply(&values, AuditNote::default()))
}

/// `POST /v1/config` (admin): `{ "<dotted key>": value, … }` for whitelisted keys.
pub(crate) async fn set_config(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Response, ApiError> {
    let values = st.call(&caller, |hub, c| hub.set_config(c, body)).await?;
    Ok(reply(&values, AuditNote::default()))
}

/// `GET /v1/tokens` (admin): token metadata, never hashes or secrets.
pub(crate) async fn tokens(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<Response, ApiError> {
    let list = st.call(&caller, |hub, c| hub.tokens(c)).await?;
    Ok(reply(&list, AuditNote::default()))
}

/// `POST /v1/tokens/revoke` (admin): revokes a token from the next request on.
pub(crate) async fn revoke(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RevokeBody>,
) -> Result<Response, ApiError> {
    let info = st.call(&caller, |hub, c| hub.revoke_token(c, body)).await?;
    Ok(reply(&info, AuditNote::default()))
}

/// `POST /v1/reindex` (admin): rebuilds the index from the files in this
/// daemon, the root's only writer (what `memd reindex` asks for next to a
/// running daemon); writes wait for it.
pub(crate) async fn reindex(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    RequiredJson(body): RequiredJson<ReindexBody>,
) -> Result<Response, ApiError> {
    let done = st
        .call(&caller, |hub, c| hub.rebuild_index(c, body))
        .await?;
    Ok(reply(&done, AuditNote::default()))
}
