//! `POST /v1/categories`: list, get, set and delete categories; the rules
//! are the hub's ([`crate::hub::categories`]).

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated};
use super::{AppState, note, reply};
use crate::api::CategoriesBody;

/// `POST /v1/categories`.
pub(crate) async fn categories(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<CategoriesBody>,
) -> Result<Response, ApiError> {
    let action = body.action.as_str();
    let out = st.call(&caller, |hub, c| hub.categories(c, body)).await?;
    let mut note = note(&caller, out.doc_ids());
    note.extra = Some(serde_json::json!({ "action": action }));
    Ok(reply(&out, note))
}
