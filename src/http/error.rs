//! The HTTP side of errors: one table from stable code to status, and the
//! `{error:{code,message,retryable}}` envelope on every failure.
//!
//! 5xx bodies say little ("see the server log"); the cause is logged once,
//! here, where the error becomes a response.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::{Error, ErrorCode};

/// The HTTP status of each stable code, from the one table in
/// [`ErrorCode::http_status`].
pub fn status_of(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.http_status()).expect("the table holds valid statuses")
}

/// An error on its way to becoming a response.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    /// Stable code.
    pub(crate) code: ErrorCode,
    /// What the caller sees.
    pub(crate) message: String,
    /// Seconds to wait before retrying (`Retry-After`), when the error says.
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    /// An error with this code and message.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 INVALID_INPUT.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    /// 401 UNAUTHORIZED.
    pub(crate) fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "missing or unknown token: send Authorization: Bearer <token>",
        )
    }

    /// 403 FORBIDDEN.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// 404 NOT_FOUND for a path that is not a route.
    pub(crate) fn no_route() -> Self {
        Self::new(
            ErrorCode::NotFound,
            "no such route; see GET /v1/capabilities",
        )
    }

    /// The JSON envelope.
    pub(crate) fn envelope(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "code": self.code.as_str(),
                "message": self.message,
                "retryable": self.code.retryable(),
            }
        })
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let code = e.code();
        let message = match code {
            ErrorCode::Storage => {
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), "storage error while serving a request");
                "storage error; see the server log".to_string()
            }
            ErrorCode::StorageFull => {
                // Every request meets it while the disk is full: once a minute, counted.
                if let Some(repeats) = crate::base::repeat::global().admit("http.storage_full") {
                    tracing::error!(error = %e, repeated = repeats, "disk full while serving a request");
                }
                "the disk holding the memory root is full (or below the space memd keeps free \
                 there); nothing was stored. Free some space and retry: writes resume by themselves"
                    .to_string()
            }
            ErrorCode::Internal => {
                tracing::error!(error = %e, "internal error while serving a request");
                "internal error; see the server log".to_string()
            }
            _ => e.to_string(),
        };
        ApiError {
            code,
            message,
            retry_after: e.retry_after(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (status_of(self.code), Json(self.envelope())).into_response();
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        for (code, status) in [
            (ErrorCode::InvalidInput, 400),
            (ErrorCode::Unauthorized, 401),
            (ErrorCode::Forbidden, 403),
            (ErrorCode::NotFound, 404),
            (ErrorCode::Conflict, 409),
            (ErrorCode::RootLocked, 503),
            (ErrorCode::EmbeddingUnavailable, 503),
            (ErrorCode::RateLimited, 429),
            (ErrorCode::Storage, 500),
            (ErrorCode::StorageFull, 507),
            (ErrorCode::Unavailable, 503),
            (ErrorCode::UpstreamInvalid, 502),
            (ErrorCode::Internal, 500),
        ] {
            assert_eq!(status_of(code).as_u16(), status, "{code:?}");
        }
        let e = ApiError::from(Error::Internal("secret detail".into()));
        assert!(!e.message.contains("secret detail"));
        let e = ApiError::from(Error::StorageFull("cannot append to /srv/root/x".into()));
        assert_eq!(e.code, ErrorCode::StorageFull);
        assert!(!e.message.contains("/srv/root"), "{}", e.message);
        assert!(e.envelope()["error"]["retryable"].as_bool().unwrap());
        let res = ApiError::from(Error::RateLimited {
            message: "token \"busy\" has 16 searches waiting".into(),
            retry_after: 3,
        })
        .into_response();
        assert_eq!(res.status().as_u16(), 429);
        assert_eq!(res.headers()[axum::http::header::RETRY_AFTER], "3");
    }
}
