//! `POST /v1/categories`: list, get, set and delete categories, the
//! always-injected policy slots stored as `memories/categories/<name>.md`.
//!
//! Reading uses the caller's read filter like every read route; `set` and
//! `delete` need the `write` scope in the category's scene (an existing
//! category must be one the token could forget).

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use super::error::ApiError;
use super::extract::{ApiJson, Caller};
use super::{AppState, AuditNote, reply};
use crate::api::{CategoriesBody, CategoryAction};
use crate::auth::policy::{self, ReadOptions};
use crate::hub::categories::Category;
use crate::model::Privacy;

#[derive(Serialize)]
struct Listing {
    categories: Vec<Category>,
}

#[derive(Serialize)]
struct Deleted {
    ok: bool,
    name: String,
}

/// `POST /v1/categories`.
pub(crate) async fn categories(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<CategoriesBody>,
) -> Result<Response, ApiError> {
    let grant = &caller.0;
    let scene = policy::resolve_scene(grant, body.scene.as_deref())?;
    let note = |hits: Vec<String>| AuditNote {
        scene: Some(scene.to_string()),
        hits,
        extra: Some(serde_json::json!({"action": body.action.as_str()})),
    };
    let name = || {
        body.name.clone().ok_or_else(|| {
            ApiError::invalid(format!("action {:?} needs a name", body.action.as_str()))
        })
    };
    match body.action {
        CategoryAction::List | CategoryAction::Get => {
            let filter = policy::read_filter(grant, &ReadOptions::default(), st.now())?;
            if body.action == CategoryAction::List {
                let categories = st.run(move |hub| hub.categories(&filter)).await?;
                let ids = categories.iter().map(|c| c.doc_id.clone()).collect();
                Ok(reply(&Listing { categories }, note(ids)))
            } else {
                let name = name()?;
                let c = st.run(move |hub| hub.category(&name, &filter)).await?;
                let ids = vec![c.doc_id.clone()];
                Ok(reply(&c, note(ids)))
            }
        }
        CategoryAction::Set => {
            // Categories are injected into every session: standing policy is
            // set by the owner's full-rights token only.
            policy::require(grant, crate::auth::scope::ALL)?;
            policy::check_write(grant, Privacy::Normal)?;
            let writable = policy::forget_filter(grant)?;
            let name = name()?;
            let slot = body.slot.clone().unwrap_or_else(|| "custom".into());
            let content = body
                .content
                .clone()
                .ok_or_else(|| ApiError::invalid("action \"set\" needs content"))?;
            let at = scene.clone();
            let c = st
                .run(move |hub| hub.set_category(&name, &slot, &at, &content, &writable))
                .await?;
            let ids = vec![c.doc_id.clone()];
            Ok(reply(&c, note(ids)))
        }
        CategoryAction::Delete => {
            policy::require(grant, crate::auth::scope::ALL)?;
            let writable = policy::forget_filter(grant)?;
            let name = name()?;
            let n = name.clone();
            st.run(move |hub| hub.delete_category(&n, &writable))
                .await?;
            Ok(reply(&Deleted { ok: true, name }, note(Vec::new())))
        }
    }
}
