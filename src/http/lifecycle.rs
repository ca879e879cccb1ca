//! Lifecycle routes: tag and importance edits, and the archive of expired
//! memories (search and restore); the rules are the hub's ([`crate::hub::tags`]).

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated};
use super::{AppState, note, reply};
use crate::api::{ArchiveSearchBody, RestoreBody, TagsBody};

/// `POST /v1/tags`: adds/removes tags and sets importance (a new `put` line, same id).
pub(crate) async fn tags(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<TagsBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.tags(c, body)).await?;
    Ok(reply(&out, note(&caller, [out.id.clone()])))
}

/// `POST /v1/archive/search`: expired memories the journal still holds.
pub(crate) async fn archive_search(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ArchiveSearchBody>,
) -> Result<Response, ApiError> {
    let out = st
        .call(&caller, |hub, c| hub.archive_search(c, body))
        .await?;
    let ids = out.items.iter().map(|m| m.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/archive/restore`: brings an expired memory back.
pub(crate) async fn archive_restore(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RestoreBody>,
) -> Result<Response, ApiError> {
    let m = st
        .call(&caller, |hub, c| hub.archive_restore(c, body))
        .await?;
    Ok(reply(&m, note(&caller, [m.id.clone()])))
}
