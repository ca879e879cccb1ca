//! Consolidation as the hub's use cases reach it: the implementation of
//! [`crate::hub::Consolidation`] that `memd serve` installs, so the
//! consolidation routes of `/v1` run the same code as the scheduler and
//! `memd consolidate` without the HTTP layer knowing this module.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};

use super::rollback::{self, Target};
use super::{RunOptions, Window, report};
use crate::error::Result;
use crate::hub::consolidation::{Done, RollbackTarget};
use crate::hub::{Consolidation, Hub};

/// The consolidation of this crate, for [`Hub::install_consolidation`].
pub fn service() -> Arc<dyn Consolidation> {
    Arc::new(Service)
}

struct Service;

fn json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("reports serialise")
}

impl Consolidation for Service {
    fn runs(&self, hub: &Hub) -> Result<serde_json::Value> {
        Ok(json(&report::list(hub.layout())?))
    }

    fn report(&self, hub: &Hub, run: &str) -> Result<serde_json::Value> {
        Ok(json(&report::load(hub.layout(), run)?))
    }

    fn run(
        &self,
        hub: &Hub,
        date: Option<NaiveDate>,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> Result<Done> {
        let cfg = hub.config().sleep.clone();
        let window = match date {
            Some(d) => Window::day(d),
            None => Window::ending(cfg.period, now),
        };
        let opts = RunOptions {
            window,
            dry_run,
            now,
        };
        let report = super::run(hub, &cfg, &opts)?;
        Ok(Done {
            ids: report.written.clone(),
            report: json(&report),
        })
    }

    fn rollback(&self, hub: &Hub, target: RollbackTarget, dry_run: bool) -> Result<Done> {
        let target = match target {
            RollbackTarget::Run(run) => Target::Run(run),
            RollbackTarget::SourceSince { source, since } => Target::SourceSince { source, since },
        };
        let done = rollback::rollback(hub, &target, dry_run)?;
        Ok(Done {
            ids: done
                .forgotten
                .iter()
                .chain(&done.restored)
                .cloned()
                .collect(),
            report: json(&done),
        })
    }

    fn status(&self, hub: &Hub, now: DateTime<Utc>) -> serde_json::Value {
        json(&super::status(hub, &hub.config().sleep, now))
    }
}
