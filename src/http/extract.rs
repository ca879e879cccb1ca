//! Request extractors: a JSON body whose every failure is `INVALID_INPUT`,
//! and the authenticated [`Caller`] the auth middleware put in place.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::hub::Caller;

/// Largest accepted request body, in bytes.
pub(crate) const MAX_BODY_BYTES: usize = 256 * 1024;

/// A JSON body. Malformed JSON, wrong types, unknown fields and oversized
/// bodies all become `400 INVALID_INPUT` envelopes. The content type is not
/// checked, so `curl -d` works as is.
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await?;
        let body: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        parse(body).map(ApiJson)
    }
}

/// A JSON body that must be present: an empty body is `400 INVALID_INPUT`
/// rather than `{}`. For routes that change state on their defaults (running
/// consolidation), where a stray empty POST must do nothing.
#[derive(Debug)]
pub(crate) struct RequiredJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for RequiredJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::invalid(
                "this route needs a JSON body (e.g. {\"dry_run\": true}); an empty request does nothing",
            ));
        }
        parse(&bytes).map(RequiredJson)
    }
}

/// How long a client may take to send a request body once its headers are in.
/// A body that trickles in (or never comes) would otherwise hold its
/// connection and a task for as long as the client likes.
pub(crate) const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, Bytes::from_request(req, state))
        .await
        .map_err(|_| {
            ApiError::invalid(format!(
                "request body not received within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ))
        })?;
    read.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::invalid(format!(
                "request body is larger than {MAX_BODY_BYTES} bytes"
            ))
        } else {
            ApiError::invalid(format!("cannot read request body: {e}"))
        }
    })
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))?;
    normalise(&mut value);
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
}

/// Reads a body as clients of the JSON Schema in `openapi.yaml` (and of the
/// Node memory-hub) write it: a number with no fraction (`40.0`) is an
/// integer, and a field set to `null` is a field left out.
fn normalise(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::Object(fields) => {
            fields.retain(|_, v| !v.is_null());
            fields.values_mut().for_each(normalise);
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// The authenticated caller, put in place by the auth middleware.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .map(Authenticated)
            .ok_or_else(ApiError::unauthorized)
    }
}
