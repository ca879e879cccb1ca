//! The operator's routes: paged lists, tiers, the cleanup, the audit log,
//! the scenes a token may use, the bootstrap interview's profile and the
//! health history. Each parses its body and calls the hub's use case of the
//! same name ([`crate::hub::list`], [`crate::hub::tiers`],
//! [`crate::hub::gc`], [`crate::hub::audit`], [`crate::hub::scenes`],
//! [`crate::hub::profile`], [`crate::hub::history`]), which decides what the
//! caller may see and do.

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated};
use super::{AppState, note, reply};
use crate::api::{AuditBody, GcBody, ListBody, ProfileBody, TierBody};

/// `POST /v1/list`: one page, newest first.
pub(crate) async fn list(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ListBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.list(c, body)).await?;
    let ids = out.items.iter().map(|m| m.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/tier`: a memory's retention, or a new tier.
pub(crate) async fn tier(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<TierBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.tier(c, body)).await?;
    Ok(reply(&out, note(&caller, [out.id.clone()])))
}

/// `POST /v1/gc`: the cleanup, now.
pub(crate) async fn gc(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<GcBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.gc(c, body)).await?;
    Ok(reply(&out, note(&caller, [])))
}

/// `POST /v1/audit`: recent audit lines.
pub(crate) async fn audit(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AuditBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.audit(c, body)).await?;
    Ok(reply(&out, note(&caller, [])))
}

/// `GET /v1/scenes`: the scenes the token may use.
pub(crate) async fn scenes(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.scenes(c)).await?;
    Ok(reply(&out, note(&caller, [])))
}

/// `POST /v1/profile`: store the bootstrap interview's answers.
pub(crate) async fn profile(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ProfileBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.profile(c, body)).await?;
    let ids = out.items.iter().map(|i| i.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `GET /v1/health/history`: the rolling health history.
pub(crate) async fn health_history(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.health_history(c)).await?;
    Ok(reply(&out, note(&caller, [])))
}
