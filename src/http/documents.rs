//! Document routes: the list of documents a token may read and one whole
//! document (`POST /v1/documents`, `POST /v1/document`). Each parses its
//! body and calls the hub's use case ([`crate::hub::documents`]), which
//! runs the query with the caller's read filter inside it.

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated};
use super::{AppState, note, reply};
use crate::api::{DocumentBody, DocumentsBody};

/// `POST /v1/documents`.
pub(crate) async fn documents(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<DocumentsBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.documents(c, body)).await?;
    let ids = out.documents.iter().map(|d| d.id.clone());
    Ok(reply(&out, note(&caller, ids)))
}

/// `POST /v1/document`.
pub(crate) async fn document(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<DocumentBody>,
) -> Result<Response, ApiError> {
    let out = st.call(&caller, |hub, c| hub.document(c, body)).await?;
    Ok(reply(&out, note(&caller, [out.summary.id.clone()])))
}
