//! Consolidation routes (admin): the list of runs, one run's full report,
//! and running or rolling back while the daemon holds the writer lock; the
//! rules are the hub's ([`crate::hub::consolidation`]).

use axum::extract::State;
use axum::response::Response;

use super::error::ApiError;
use super::extract::{ApiJson, Authenticated, RequiredJson};
use super::{AppState, AuditNote, reply};
use crate::api::{ReportBody, RollbackBody, RunBody};

/// `GET /v1/consolidation/runs`: every saved run, newest first.
pub(crate) async fn runs(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<Response, ApiError> {
    let runs = st.call(&caller, |hub, c| hub.consolidation_runs(c)).await?;
    Ok(reply(&runs, AuditNote::default()))
}

/// `POST /v1/consolidation/report`: one run's full report.
pub(crate) async fn run_report(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ReportBody>,
) -> Result<Response, ApiError> {
    let report = st
        .call(&caller, |hub, c| hub.consolidation_report(c, body))
        .await?;
    Ok(reply(&report, AuditNote::default()))
}

/// `POST /v1/consolidation/run`: run consolidation now (what `memd consolidate`
/// does, for when the daemon holds the writer lock).
pub(crate) async fn run_now(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    RequiredJson(body): RequiredJson<RunBody>,
) -> Result<Response, ApiError> {
    let done = st.call(&caller, |hub, c| hub.consolidate(c, body)).await?;
    let note = AuditNote {
        hits: done.ids,
        ..AuditNote::default()
    };
    Ok(reply(&done.report, note))
}

/// `POST /v1/consolidation/rollback`: what `memd rollback` does, while the
/// daemon holds the writer lock.
pub(crate) async fn rollback(
    State(st): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RollbackBody>,
) -> Result<Response, ApiError> {
    let done = st.call(&caller, |hub, c| hub.rollback(c, body)).await?;
    let note = AuditNote {
        hits: done.ids,
        ..AuditNote::default()
    };
    Ok(reply(&done.report, note))
}
