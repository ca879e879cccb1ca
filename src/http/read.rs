//! Read routes: search, get, recent, recall, timeline, bootstrap, audience,
//! disclose, forgotten. Each parses its body and calls the hub's use case of the same
//! name, which resolves the caller's scene and filter and runs the query
//! with that filter inside it.

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated};
use super::{AppState, AuditNote, KnownBehind, note, reply};
use crate::api::{
    AudienceBody, BootstrapBody, DiscloseBody, ForgottenBody, GetBody, RecallBody, RecentBody,
    SearchBody, TimelineBody,
};
use crate::hub::Limited;

/// The header that says a `limit` was lowered to `search.maxLimit`.
pub(crate) const LIMIT_CLAMPED: &str = "x-memd-limit-clamped";

/// A reply whose limit may have been lowered: the [`LIMIT_CLAMPED`] header says so.
fn limited<T: serde::Serialize>(out: &Limited<T>, note: AuditNote) -> Response {
    let mut res = reply(&out.body, note);
    if let Some(v) = &out.clamped
        && let Ok(v) = axum::http::HeaderValue::from_str(v)
    {
        res.headers_mut().insert(LIMIT_CLAMPED, v);
    }
    res
}

/// `POST /v1/search`.
pub(crate) async fn search(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<SearchBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.search(c, body)).await?;
    let ids = out.body.hits.iter().map(|h| h.memory.id.clone());
    let note = note(&caller, ids);
    let paged = Limited {
        body: Paged {
            results: &out.body,
            next_offset: out.next_offset,
        },
        clamped: out.clamped.clone(),
        next_offset: out.next_offset,
    };
    Ok(caught_up(limited(&paged, note), out.body.caught_up))
}

/// `res`, marked [`KnownBehind`] (nothing) when its use case found the
/// index caught up with the whole journal, so that the middleware does not
/// check again.
fn caught_up(mut res: Response, caught_up: bool) -> Response {
    if caught_up {
        res.extensions_mut().insert(KnownBehind(None));
    }
    res
}

/// A search reply with the offset of its next page (a paged search only).
#[derive(serde::Serialize)]
struct Paged<'a, T> {
    #[serde(flatten)]
    results: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<usize>,
}

/// `POST /v1/get`.
pub(crate) async fn get(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<GetBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.get(c, body)).await?;
    Ok(reply(&out, note(&caller, [out.memory.id.clone()])))
}

/// `POST /v1/recent`.
pub(crate) async fn recent(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RecentBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.recent(c, body)).await?;
    let ids = out.items.iter().map(|m| m.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/recall`.
pub(crate) async fn recall(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RecallBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.recall(c, body)).await?;
    let ids = out.body.ids();
    Ok(caught_up(
        limited(&out, note(&caller, ids)),
        out.body.caught_up,
    ))
}

/// `POST /v1/timeline`.
pub(crate) async fn timeline(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<TimelineBody>,
) -> Result<Response, ApiError> {
    let page = st.call(&caller, |hub, c| hub.timeline(c, body)).await?;
    let ids: Vec<String> = page
        .months
        .iter()
        .flat_map(|m| m.items.iter().map(|i| i.memory.id.clone()))
        .collect();
    Ok(reply(&page, note(&caller, ids)))
}

/// `POST /v1/forgotten`.
pub(crate) async fn forgotten(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ForgottenBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.forgotten(c, body)).await?;
    let ids = out.items.iter().map(|i| i.memory.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/bootstrap`.
pub(crate) async fn bootstrap(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<BootstrapBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.bootstrap(c, body)).await?;
    let ids = out.ids();
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/audience`.
pub(crate) async fn audience(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AudienceBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.audience(c, body)).await?;
    let ids = out.card.iter().map(|m| m.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/disclose`: one group's recent chat and notes, for a known
/// member only. Every attempt is audited with the group and the asker.
pub(crate) async fn disclose(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<DiscloseBody>,
) -> Response {
    let extra = serde_json::json!({"group": body.group, "asker": body.asker});
    match st.call(&caller, |hub, c| hub.disclose(c, body)).await {
        Ok(out) => {
            let ids = out.items.iter().map(|m| m.id.clone());
            let mut note = note(&caller, ids);
            note.extra = Some(extra);
            reply(&out, note)
        }
        Err(e) => {
            let mut res = e.into_response();
            let mut note = note(&caller, []);
            note.extra = Some(extra);
            res.extensions_mut().insert(note);
            res
        }
    }
}
