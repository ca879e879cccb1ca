//! Lifecycle routes: tag and importance edits, categories, and the archive of
//! expired memories (search and restore).
//!
//! Editing tags needs `write` in the memory's scene (what the token may
//! forget, it may edit). Categories are read with the caller's visibility;
//! setting one, searching expired memories and restoring one need `*`; the
//! archive routes also apply the token's privacy scopes inside the query, as
//! search does (a memory the token may not read is `NOT_FOUND`).

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Caller};
use super::{AppState, AuditNote, reply};
use crate::api::{ArchiveReply, ArchiveSearchBody, EditAction, RestoreBody, TagsBody, TagsReply};
use crate::auth::policy;
use crate::auth::scope;
use crate::hub::EditRequest;

fn note(ids: impl IntoIterator<Item = String>) -> AuditNote {
    AuditNote {
        scene: None,
        hits: ids.into_iter().collect(),
        extra: None,
    }
}

/// `POST /v1/tags`: adds/removes tags and sets importance (a new `put` line, same id).
pub(crate) async fn tags(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<TagsBody>,
) -> Result<Response, ApiError> {
    let mut filter = policy::forget_filter(&caller.0)?;
    let now = st.now();
    for s in &mut filter.any_of {
        s.unexpired_at = Some(now);
    }
    let req = EditRequest {
        add_tags: body.add,
        remove_tags: body.remove,
        importance: body.importance,
    };
    let id = body.id;
    let out = st.run(move |hub| hub.edit(&id, &req, &filter)).await?;
    let m = {
        let id = out.id.clone();
        st.run(move |hub| hub.get(&id, &crate::index::filter::Filter::all()))
            .await?
    };
    Ok(reply(
        &TagsReply {
            id: out.id.clone(),
            // An edit that succeeds rewrites the fact in place.
            action: EditAction::Update,
            tags: m.tags,
            importance: m.importance,
        },
        note([out.id.clone()]),
    ))
}

/// `POST /v1/archive/search` (`*` and `read`): expired memories the journal
/// still holds, within the token's privacy scopes (part of the query).
pub(crate) async fn archive_search(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ArchiveSearchBody>,
) -> Result<Response, ApiError> {
    policy::require(&caller.0, scope::ALL)?;
    let filter = policy::archive_filter(&caller.0, false, st.now())?;
    let limit = body.limit.unwrap_or(20);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::invalid("limit must be between 1 and 100"));
    }
    let items = st
        .run(move |hub| hub.search_expired(&body.query, limit, &filter))
        .await?;
    let ids: Vec<String> = items.iter().map(|m| m.id.clone()).collect();
    Ok(reply(&ArchiveReply { items }, note(ids)))
}

/// `POST /v1/archive/restore` (`*`, `read` and `write`): brings an expired
/// memory the token may read and write back for another tier lifetime.
pub(crate) async fn archive_restore(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RestoreBody>,
) -> Result<Response, ApiError> {
    policy::require(&caller.0, scope::ALL)?;
    let filter = policy::archive_filter(&caller.0, true, st.now())?;
    let m = st
        .run(move |hub| hub.restore_expired(&body.id, &filter))
        .await?;
    let id = m.id.clone();
    Ok(reply(&m, note([id])))
}
