//! Consolidation routes (need the `admin` scope, i.e. a root token): the list
//! of runs, one run's full report, and running or rolling back while the
//! daemon holds the writer lock.

use axum::extract::State;
use axum::response::Response;
use chrono::NaiveDate;

use super::error::ApiError;
use super::extract::{ApiJson, Caller, RequiredJson};
use super::{AppState, AuditNote, reply};
use crate::api::{ReportBody, RollbackBody, RunBody};
use crate::auth::{policy, scope};
use crate::consolidate::rollback::{self, Target};
use crate::consolidate::{self, RunOptions, Window, report};
use crate::error::Error;

fn admin(caller: &Caller) -> Result<(), ApiError> {
    policy::require(&caller.0, scope::ADMIN).map_err(ApiError::from)
}

/// `GET /v1/consolidation/runs`: every saved run, newest first.
pub(crate) async fn runs(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    admin(&caller)?;
    let runs = st.run(|hub| report::list(hub.layout())).await?;
    Ok(reply(
        &serde_json::json!({ "runs": runs }),
        AuditNote::default(),
    ))
}

/// `POST /v1/consolidation/report`: one run's full report.
pub(crate) async fn run_report(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ReportBody>,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let run = body.run;
    let report = st.run(move |hub| report::load(hub.layout(), &run)).await?;
    Ok(reply(&report, AuditNote::default()))
}

/// `POST /v1/consolidation/run`: run consolidation now (what `memd consolidate`
/// does, for when the daemon holds the writer lock).
pub(crate) async fn run_now(
    State(st): State<AppState>,
    caller: Caller,
    RequiredJson(body): RequiredJson<RunBody>,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let cfg = st.settings().sleep.clone();
    let now = st.now();
    let window =
        match &body.date {
            Some(d) => Window::day(NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| {
                Error::invalid(format!("date must look like 2026-11-30; got {d:?}"))
            })?),
            None => Window::ending(cfg.period, now),
        };
    let opts = RunOptions {
        window,
        dry_run: body.dry_run,
        now,
    };
    let report = st
        .run(move |hub| consolidate::run(hub, &cfg, &opts))
        .await?;
    let note = AuditNote {
        hits: report.written.clone(),
        ..AuditNote::default()
    };
    Ok(reply(&report, note))
}

/// `POST /v1/consolidation/rollback`: what `memd rollback` does, while the
/// daemon holds the writer lock.
pub(crate) async fn rollback(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RollbackBody>,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let target = match (body.run, body.source, body.since) {
        (Some(run), None, None) => Target::Run(run),
        (None, Some(source), Some(since)) => Target::SourceSince { source, since },
        _ => {
            return Err(Error::invalid("give `run`, or `source` and `since`").into());
        }
    };
    let dry_run = body.dry_run;
    let done = st
        .run(move |hub| rollback::rollback(hub, &target, dry_run))
        .await?;
    let note = AuditNote {
        hits: done
            .forgotten
            .iter()
            .chain(&done.restored)
            .cloned()
            .collect(),
        ..AuditNote::default()
    };
    Ok(reply(&done, note))
}
