//! Where the MCP tools send their requests: the `/v1` API, reached either
//! over loopback HTTP (`memd mcp`, a separate process next to `memd serve`)
//! or in-process through the daemon's own router (`/mcp` inside `memd serve`).
//!
//! Both paths carry the caller's bearer token and go through the same
//! authentication, privacy filters and audit as any other `/v1` client, so
//! MCP can never do more than that token could do over HTTP. The loopback
//! path is the crate's one outbound HTTP client ([`crate::client`], blocking,
//! run on tokio's blocking pool); the in-process path is a call of the router
//! as a service, no HTTP client at all.
//!
//! A failed call carries the stable [`ErrorCode`] of the daemon's error
//! envelope. A code this build does not know (a newer daemon) falls back to
//! the code of the reply's HTTP status, and the code as sent is kept for the
//! message the model reads.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use serde_json::Value;
use tower::ServiceExt;

use crate::client;
use crate::error::{ErrorCode, ReplyEnvelope};

/// Largest response body read from the API, in bytes.
const MAX_RESPONSE_BYTES: usize = client::LOOPBACK_BODY_LIMIT as usize;

/// How long one loopback call may take before it is reported as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A failed `/v1` call: the stable code and the message of its error envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// Stable code, e.g. [`ErrorCode::InvalidInput`].
    pub code: ErrorCode,
    /// The code the daemon sent when this build does not know it; `code` is
    /// then the one the reply's HTTP status stands for.
    pub(crate) unknown_code: Option<String>,
    /// What went wrong, for the model to read.
    pub(crate) message: String,
}

impl CallError {
    /// An error with one of the stable codes.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CallError {
            code,
            unknown_code: None,
            message: message.into(),
        }
    }

    /// `INVALID_INPUT`.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }
}

impl From<crate::Error> for CallError {
    fn from(e: crate::Error) -> Self {
        CallError::new(e.code(), e.to_string())
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.unknown_code.as_deref().unwrap_or(self.code.as_str());
        write!(f, "{code}: {}", self.message)
    }
}

/// Brings the daemon back after a refused connection; true when it answers again.
pub(crate) type Revive = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// The `/v1` API as the MCP tools see it.
#[derive(Clone)]
pub enum Upstream {
    /// A running `memd serve` on loopback, e.g. `http://127.0.0.1:8787`.
    Loopback {
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

/// One call, owned so that it can move to the blocking pool.
struct Call {
    url: String,
    method: String,
    token: Option<String>,
    body: Option<Vec<u8>>,
}

impl Call {
    /// Sends the call with [`client::send`] (a fresh connection each time: a
    /// stopped daemon then shows up as a refused connection, safe to resend
    /// after reviving it, rather than as a broken pooled one, which a crash
    /// mid-request also produces).
    async fn send(self: Arc<Self>, service: &str) -> crate::Result<client::Response> {
        let service = service.to_string();
        tokio::task::spawn_blocking(move || {
            let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|a| ("Authorization", a))
                .into_iter()
                .collect();
            client::send(&client::Request {
                service: &service,
                method: &self.method,
                url: &self.url,
                headers: &headers,
                json: self.body.as_deref(),
                timeout: CALL_TIMEOUT,
                body_limit: client::LOOPBACK_BODY_LIMIT,
            })
        })
        .await
        .map_err(|e| crate::Error::Internal(format!("the loopback call did not finish: {e}")))?
    }
}

impl Upstream {
    /// A loopback upstream at `base` (`http://host:port`).
    pub fn loopback(base: impl Into<String>) -> Self {
        Upstream::Loopback {
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
        let bytes = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| CallError::new(ErrorCode::Internal, format!("cannot encode body: {e}")))?;
        let (status, body) = match self {
            Upstream::Loopback { base, revive } => {
                let call = Arc::new(Call {
                    url: format!("{base}{path}"),
                    method: method.to_string(),
                    token: token.map(str::to_string),
                    body: bytes,
                });
                let service = format!("the memd daemon at {base}");
                let mut sent = Arc::clone(&call).send(&service).await;
                if let (Err(e), Some(revive)) = (&sent, revive)
                    && client::is_refused(e)
                {
                    tracing::warn!(error = %e, "the memd daemon is gone; starting it again");
                    if revive().await {
                        sent = call.send(&service).await;
                    }
                }
                let res = sent?;
                (res.status, res.body.into_bytes())
            }
            Upstream::InProcess(router) => in_process(router, method, path, token, bytes).await?,
        };
        decode(status, &body)
    }
}

/// Calls the daemon's own router as a service: the status and body of its answer.
async fn in_process(
    router: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
) -> Result<(u16, Vec<u8>), CallError> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Body::from(body.unwrap_or_default()))
        .map_err(|e| CallError::invalid(format!("bad route {path:?}: {e}")))?;
    let res = router
        .clone()
        .oneshot(req)
        .await
        .unwrap_or_else(|never| match never {});
    let status = res.status().as_u16();
    let body = axum::body::to_bytes(res.into_body(), MAX_RESPONSE_BYTES)
        .await
        .map_err(|e| CallError::new(ErrorCode::Internal, format!("cannot read reply: {e}")))?;
    Ok((status, body.to_vec()))
}

/// A 2xx body as JSON, anything else as its error envelope.
fn decode(status: u16, body: &[u8]) -> Result<Value, CallError> {
    if (200..300).contains(&status) {
        if body.is_empty() {
            return Ok(Value::Null);
        }
        return serde_json::from_slice(body)
            .map_err(|_| CallError::new(ErrorCode::Internal, "the API answered with non-JSON"));
    }
    let reply = ReplyEnvelope::read(status, body);
    Err(CallError {
        code: reply.code,
        unknown_code: reply.unknown_code,
        message: reply.message,
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
        for (status, code) in [
            (403, ErrorCode::Forbidden),
            (500, ErrorCode::Internal),
            (502, ErrorCode::UpstreamInvalid),
            (503, ErrorCode::Unavailable),
            (507, ErrorCode::StorageFull),
        ] {
            let e = decode(status, b"<html>").unwrap_err();
            assert_eq!((e.code, e.unknown_code), (code, None), "{status}");
        }
        // A newer daemon's code: typed as what its status stands for, shown as sent.
        let newer = decode(
            418,
            br#"{"error":{"code":"EDIT_CONFLICT","message":"reload and retry"}}"#,
        )
        .unwrap_err();
        assert_eq!(newer.code, ErrorCode::Internal);
        assert_eq!(newer.to_string(), "EDIT_CONFLICT: reload and retry");
    }
}
