//! Consolidation routes (need the `admin` scope, i.e. a root token): the list
//! of runs and one run's full report.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{ApiJson, Caller};
use super::{AppState, AuditNote, reply};
use crate::auth::{policy, scope};
use crate::consolidate::report;

fn admin(caller: &Caller) -> Result<(), ApiError> {
    policy::require(&caller.0, scope::ADMIN).map_err(ApiError::from)
}

/// `GET /v1/consolidation/runs`: every saved run, newest first.
pub async fn runs(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    admin(&caller)?;
    let runs = st.run(|hub| report::list(hub.layout())).await?;
    Ok(reply(
        &serde_json::json!({ "runs": runs }),
        AuditNote::default(),
    ))
}

/// Body of `POST /v1/consolidation/report`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportBody {
    /// Run id.
    run: String,
}

/// `POST /v1/consolidation/report`: one run's full report.
pub async fn run_report(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ReportBody>,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let run = body.run;
    let report = st.run(move |hub| report::load(hub.layout(), &run)).await?;
    Ok(reply(&report, AuditNote::default()))
}
