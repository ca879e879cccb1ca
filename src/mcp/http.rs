//! `/mcp`: the MCP tools over streamable HTTP inside `memd serve`.
//!
//! Every request needs a valid bearer token (the `/v1` tokens); a missing or
//! unknown one gets the usual `401 UNAUTHORIZED` envelope before the MCP
//! layer sees it. Tools then call the daemon's own `/v1` router in-process
//! with the token of the HTTP request that carried the tool call, so a
//! revoked token stops working mid-session and rights are exactly the
//! token's.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{MemoryServer, Upstream};
use crate::http::AppState;
use crate::http::error::ApiError;

/// The path the MCP service is mounted at.
pub const PATH: &str = "/mcp";

/// A router serving MCP at [`PATH`] over `state`. Cancelling `shutdown`
/// closes every MCP session and open event stream, so a graceful shutdown of
/// the HTTP server does not wait for idle clients.
pub fn router(state: AppState, shutdown: CancellationToken) -> Router {
    let upstream = Arc::new(Upstream::InProcess(crate::http::router(state.clone())));
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(shutdown);
    let service = StreamableHttpService::new(
        move || Ok(MemoryServer::new(upstream.clone(), None)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service(PATH, service)
        .layer(middleware::from_fn_with_state(state, require_token))
}

/// Refuses requests without a valid bearer token.
async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match state.grant(req.headers()) {
        Ok(Some(_)) => next.run(req).await,
        Ok(None) => ApiError::unauthorized().into_response(),
        Err(e) => e.into_response(),
    }
}
