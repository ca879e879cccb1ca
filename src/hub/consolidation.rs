//! Use cases: consolidation runs (`GET /v1/consolidation/runs`,
//! `POST /v1/consolidation/report|run|rollback`), for admin tokens only.
//!
//! Consolidation itself lives above the hub ([`crate::consolidate`] drives
//! the hub's writer like any internal driver), so the hub reaches it through
//! the [`Consolidation`] trait, which the process that serves installs
//! ([`Hub::install_consolidation`]; `memd serve` does). The rules of the
//! route live here: the `admin` scope, how a date or a rollback target is
//! read. Without an installed implementation these use cases answer
//! `UNAVAILABLE`, and health shows no consolidation status.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};

use super::{Caller, Hub};
use crate::api::{ReportBody, RollbackBody, RunBody};
use crate::auth::scope;
use crate::error::{Error, Result};

/// The name of the consolidation job in `data/scheduler.json`.
pub(crate) const SLEEP_JOB: &str = "sleep";

/// What a rollback undoes.
#[derive(Debug, Clone)]
pub enum RollbackTarget {
    /// One run, by id.
    Run(String),
    /// Everything `source` wrote or forgot since `since`.
    SourceSince {
        /// The source, e.g. `sleep`.
        source: String,
        /// RFC 3339.
        since: DateTime<Utc>,
    },
}

/// What a run or a rollback did: its report, and the ids it changed.
#[derive(Debug, Clone)]
pub struct Done {
    /// The report as the API shows it.
    pub report: serde_json::Value,
    /// Memories written, forgotten or restored.
    pub ids: Vec<String>,
}

/// Nightly consolidation as the hub's use cases reach it (implemented by
/// [`crate::consolidate`]).
pub trait Consolidation: Send + Sync {
    /// Every saved run, newest first.
    fn runs(&self, hub: &Hub) -> Result<serde_json::Value>;
    /// One run's full report.
    fn report(&self, hub: &Hub, run: &str) -> Result<serde_json::Value>;
    /// Runs consolidation over the local day `date`, or over the configured
    /// period ending `now`; `dry_run` plans and reports only.
    fn run(
        &self,
        hub: &Hub,
        date: Option<NaiveDate>,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> Result<Done>;
    /// Undoes `target` by appending compensating lines.
    fn rollback(&self, hub: &Hub, target: RollbackTarget, dry_run: bool) -> Result<Done>;
    /// What health says about the job at `now`.
    fn status(&self, hub: &Hub, now: DateTime<Utc>) -> serde_json::Value;
}

impl Hub {
    /// Installs consolidation (once; later calls change nothing).
    pub fn install_consolidation(&self, service: Arc<dyn Consolidation>) {
        let _ = self.consolidation.set(service);
    }

    /// Every saved consolidation run, newest first (`admin`).
    pub fn consolidation_runs(&self, caller: &Caller) -> Result<serde_json::Value> {
        caller.require(scope::ADMIN)?;
        let runs = consolidation(self)?.runs(self)?;
        Ok(serde_json::json!({ "runs": runs }))
    }

    /// One run's full report (`admin`).
    pub fn consolidation_report(
        &self,
        caller: &Caller,
        body: ReportBody,
    ) -> Result<serde_json::Value> {
        caller.require(scope::ADMIN)?;
        consolidation(self)?.report(self, &body.run)
    }

    /// Runs consolidation now (`admin`): what the scheduler does nightly,
    /// for when the daemon holds the writer lock.
    pub fn consolidate(&self, caller: &Caller, body: RunBody) -> Result<Done> {
        caller.require(scope::ADMIN)?;
        let date = body
            .date
            .as_deref()
            .map(|d| {
                NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| {
                    Error::invalid(format!("date must look like 2026-11-30; got {d:?}"))
                })
            })
            .transpose()?;
        consolidation(self)?.run(self, date, body.dry_run, caller.now())
    }

    /// Undoes a run, or what a source did since an instant (`admin`).
    pub fn rollback(&self, caller: &Caller, body: RollbackBody) -> Result<Done> {
        caller.require(scope::ADMIN)?;
        let target = match (body.run, body.source, body.since) {
            (Some(run), None, None) => RollbackTarget::Run(run),
            (None, Some(source), Some(since)) => RollbackTarget::SourceSince { source, since },
            _ => return Err(Error::invalid("give `run`, or `source` and `since`")),
        };
        consolidation(self)?.rollback(self, target, body.dry_run)
    }
}

/// The installed consolidation, or `UNAVAILABLE`.
fn consolidation(hub: &Hub) -> Result<&Arc<dyn Consolidation>> {
    hub.consolidation.get().ok_or_else(|| Error::Unavailable {
        service: "consolidation".into(),
        reason: "not installed in this process (memd serve installs it)".into(),
        source: None,
    })
}

/// What health says about consolidation, when it is installed.
pub(crate) fn consolidation_status(hub: &Hub, now: DateTime<Utc>) -> Option<serde_json::Value> {
    hub.consolidation.get().map(|c| c.status(hub, now))
}
