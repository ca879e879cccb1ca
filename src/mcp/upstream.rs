//! Where the MCP tools send their requests: the `/v1` API, reached either
//! over loopback HTTP (`memd mcp`, a separate process next to `memd serve`)
//! or in-process through the daemon's own router (`/mcp` inside `memd serve`).
//!
//! Both paths carry the caller's bearer token and go through the same
//! authentication, privacy filters and audit as any other `/v1` client, so
//! MCP can never do more than that token could do over HTTP.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tower::ServiceExt;

use crate::error::ErrorCode;

/// Largest response body read from the API, in bytes.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// How long one loopback call may take before it is reported as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A failed `/v1` call: the stable code and the message of its error envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// Stable code, e.g. `INVALID_INPUT`.
    pub code: String,
    /// What went wrong, for the model to read.
    pub(crate) message: String,
}

impl CallError {
    /// An error with one of the stable codes.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CallError {
            code: code.as_str().to_string(),
            message: message.into(),
        }
    }

    /// `INVALID_INPUT`.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Brings the daemon back after a refused connection; true when it answers again.
pub(crate) type Revive = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// The `/v1` API as the MCP tools see it.
#[derive(Clone)]
pub enum Upstream {
    /// A running `memd serve` on loopback, e.g. `http://127.0.0.1:8787`.
    Loopback {
        /// HTTP/1 client (a fresh loopback connection per call).
        client: Client<HttpConnector, Body>,
        /// Base URL without a trailing slash.
        base: String,
        /// Called when the daemon refuses connections (it was stopped or
        /// crashed); the request is then sent once more. A refused connection
        /// means the request never reached a server, so resending is safe.
        revive: Option<Revive>,
    },
    /// The daemon's own `/v1` router, called without a socket.
    InProcess(Router),
}

impl Upstream {
    /// A loopback upstream at `base` (`http://host:port`).
    pub fn loopback(base: impl Into<String>) -> Self {
        // No idle connections: a stopped daemon then shows up as a refused
        // connection (safe to resend after reviving it) rather than as a
        // broken pooled one, which a crash mid-request also produces.
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http();
        Upstream::Loopback {
            client,
            base: base.into().trim_end_matches('/').to_string(),
            revive: None,
        }
    }

    /// Sets what to do when a loopback daemon refuses connections.
    pub(crate) fn with_revive(mut self, hook: Revive) -> Self {
        if let Upstream::Loopback { revive, .. } = &mut self {
            *revive = Some(hook);
        }
        self
    }

    /// The base URL of a loopback upstream.
    pub(crate) fn base(&self) -> Option<&str> {
        match self {
            Upstream::Loopback { base, .. } => Some(base),
            Upstream::InProcess(_) => None,
        }
    }

    /// Calls `method path` with `body` (JSON) and the bearer `token`; returns
    /// the JSON body of a 2xx answer, else the error envelope's code and message.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, CallError> {
        let bytes = match body {
            Some(v) => serde_json::to_vec(v).map_err(|e| {
                CallError::new(ErrorCode::Internal, format!("cannot encode body: {e}"))
            })?,
            None => Vec::new(),
        };
        let uri = match self {
            Upstream::Loopback { base, .. } => format!("{base}{path}"),
            Upstream::InProcess(_) => path.to_string(),
        };
        let request = || {
            let mut req = Request::builder()
                .method(method)
                .uri(&uri)
                .header(header::CONTENT_TYPE, "application/json");
            if let Some(t) = token {
                req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
            }
            req.body(Body::from(bytes.clone()))
                .map_err(|e| CallError::invalid(format!("bad route {path:?}: {e}")))
        };
        let (status, body) = match self {
            Upstream::Loopback {
                client,
                base,
                revive,
            } => {
                let unreachable = |e: &dyn std::fmt::Display| {
                    CallError::new(
                        ErrorCode::Unavailable,
                        format!("the memd daemon at {base} did not answer: {e}"),
                    )
                };
                let mut sent = tokio::time::timeout(CALL_TIMEOUT, client.request(request()?))
                    .await
                    .map_err(|e| unreachable(&e))?;
                if let (Err(e), Some(revive)) = (&sent, revive)
                    && e.is_connect()
                {
                    tracing::warn!(error = %e, "the memd daemon is gone; starting it again");
                    if revive().await {
                        sent = tokio::time::timeout(CALL_TIMEOUT, client.request(request()?))
                            .await
                            .map_err(|e| unreachable(&e))?;
                    }
                }
                let res = sent.map_err(|e| unreachable(&e))?;
                let status = res.status().as_u16();
                let body = axum::body::to_bytes(Body::new(res.into_body()), MAX_RESPONSE_BYTES)
                    .await
                    .map_err(|e| {
                        CallError::new(
                            ErrorCode::UpstreamInvalid,
                            format!(
                                "the memd daemon at {base} sent an unreadable answer \
                                 (over {MAX_RESPONSE_BYTES} bytes, or cut short): {e}"
                            ),
                        )
                    })?;
                (status, body)
            }
            Upstream::InProcess(router) => {
                let res = router
                    .clone()
                    .oneshot(request()?)
                    .await
                    .unwrap_or_else(|never| match never {});
                let status = res.status().as_u16();
                let body = axum::body::to_bytes(res.into_body(), MAX_RESPONSE_BYTES)
                    .await
                    .map_err(|e| {
                        CallError::new(ErrorCode::Internal, format!("cannot read reply: {e}"))
                    })?;
                (status, body)
            }
        };
        decode(status, &body)
    }
}

/// A 2xx body as JSON, anything else as its error envelope.
fn decode(status: u16, body: &[u8]) -> Result<Value, CallError> {
    let value: Option<Value> = if body.is_empty() {
        Some(Value::Null)
    } else {
        serde_json::from_slice(body).ok()
    };
    if (200..300).contains(&status) {
        return value
            .ok_or_else(|| CallError::new(ErrorCode::Internal, "the API answered with non-JSON"));
    }
    let envelope = value.as_ref().and_then(|v| v.get("error"));
    let code = envelope
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .unwrap_or(ErrorCode::from_status(status).as_str());
    let message = envelope
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("HTTP status {status}"));
    Err(CallError {
        code: code.to_string(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_envelopes() {
        assert_eq!(decode(200, b"{\"a\":1}").unwrap()["a"], 1);
        let e = decode(
            400,
            br#"{"error":{"code":"INVALID_INPUT","message":"text must not be empty","retryable":false}}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "INVALID_INPUT: text must not be empty");
        assert_eq!(decode(403, b"").unwrap_err().code, "FORBIDDEN");
        assert_eq!(decode(500, b"<html>").unwrap_err().code, "INTERNAL");
        assert_eq!(decode(502, b"<html>").unwrap_err().code, "UPSTREAM_INVALID");
        assert_eq!(decode(503, b"").unwrap_err().code, "UNAVAILABLE");
        assert_eq!(decode(507, b"").unwrap_err().code, "STORAGE_FULL");
    }
}
