//! Write routes: write, forget, restore, ingest, members, conflict dismissal. Each parses its body and
//! calls the hub's use case of the same name (the rules are there); the
//! reply comes after the journal line is fsync'd and indexed.

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated};
use super::{AppState, note, reply};
use crate::api::{
    AcceptConflictBody, DismissConflictBody, ForgetBody, IngestBody, MembersBody,
    RestoreVersionBody, WriteBody,
};

/// `POST /v1/write`.
pub(crate) async fn write(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<WriteBody>,
) -> Result<Response, ApiError> {
    let (out, behind) = st.call_behind(&caller, |hub, c| hub.write(c, body)).await?;
    Ok(with_behind(
        reply(&out, note(&caller, [out.id.clone()])),
        behind,
    ))
}

/// `POST /v1/forget`: appends a tombstone for a memory the token may write.
pub(crate) async fn forget(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ForgetBody>,
) -> Result<Response, ApiError> {
    let (out, behind) = st
        .call_behind(&caller, |hub, c| hub.forget(c, body))
        .await?;
    Ok(with_behind(
        reply(&out, note(&caller, [out.id.clone()])),
        behind,
    ))
}

/// `POST /v1/conflicts/dismiss`: ends (or restores) a conflict link.
pub(crate) async fn dismiss_conflict(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<DismissConflictBody>,
) -> Result<Response, ApiError> {
    let out = st
        .call(&caller, |hub, c| hub.dismiss_conflict(c, body))
        .await?;
    Ok(reply(
        &out,
        note(&caller, [out.id.clone(), out.other.clone()]),
    ))
}

/// `POST /v1/conflicts/accept`: the newer memory of a conflict supersedes the older.
pub(crate) async fn accept_conflict(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AcceptConflictBody>,
) -> Result<Response, ApiError> {
    let out = st
        .call(&caller, |hub, c| hub.accept_conflict(c, body))
        .await?;
    Ok(reply(
        &out,
        note(&caller, [out.by.clone(), out.superseded.clone()]),
    ))
}

/// `POST /v1/restore`: undoes a forget, or makes an older version current again.
pub(crate) async fn restore(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RestoreVersionBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.restore(c, body)).await?;
    Ok(reply(
        &out,
        note(&caller, [out.restored.clone(), out.id.clone()]),
    ))
}

/// `POST /v1/ingest`.
pub(crate) async fn ingest(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<IngestBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.ingest(c, body)).await?;
    Ok(reply(&out, note(&caller, out.id.clone())))
}

/// `POST /v1/members`: membership events of a group (the group's own token, or `*`).
pub(crate) async fn members(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<MembersBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.members(c, body)).await?;
    Ok(reply(&out, note(&caller, [])))
}

/// `res` with the lag its handler read ([`super::KnownBehind`]).
fn with_behind(mut res: Response, behind: super::KnownBehind) -> Response {
    res.extensions_mut().insert(behind);
    res
}
