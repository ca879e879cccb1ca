//! Undoing consolidation: by run id, or everything one source did since an
//! instant. The journal stays append-only: what the run wrote gets a
//! tombstone, what it forgot gets its last `put` line appended again (same
//! id, same content), and what it replaced with a new version is restored
//! explicitly (`Hub::reinstate`: forgetting a newer version never brings
//! an older one back by itself). The journal itself says what to undo (facts carry
//! their run id, tombstones name the run in their reason), so a rollback works
//! even when the run report is gone.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{JournalView, SOURCE, report};
use crate::error::{Error, Result};
use crate::hub::Hub;
use crate::index::filter::Filter;
use crate::model::{Fact, Record};

/// The source recorded on rollback tombstones.
pub(crate) const ROLLBACK_SOURCE: &str = "rollback";

/// What to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One consolidation run.
    Run(String),
    /// Everything `source` wrote or forgot at or after `since`.
    SourceSince {
        /// e.g. `sleep`.
        source: String,
        /// Inclusive.
        since: DateTime<Utc>,
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Run(run) => write!(f, "run {run}"),
            Target::SourceSince { source, since } => {
                write!(f, "source {source} since {}", since.to_rfc3339())
            }
        }
    }
}

/// The reason written on a tombstone made by run `run`.
pub(crate) fn forget_reason(run: &str, why: Option<&str>) -> String {
    match why {
        Some(w) if !w.trim().is_empty() => format!("{SOURCE} {run}: {}", w.trim()),
        _ => format!("{SOURCE} {run}"),
    }
}

fn reason_names_run(reason: Option<&str>, run: &str) -> bool {
    reason.is_some_and(|r| {
        r.strip_prefix(SOURCE)
            .and_then(|r| r.strip_prefix(' '))
            .and_then(|r| r.strip_prefix(run))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    })
}

/// What a rollback did (or would do).
#[derive(Debug, Clone, Serialize)]
pub struct RollbackReport {
    /// What was undone.
    pub(crate) target: String,
    /// Nothing was changed.
    pub(crate) dry_run: bool,
    /// Ids the run wrote, now forgotten.
    pub forgotten: Vec<String>,
    /// Ids the run forgot, now back with their earlier content.
    pub restored: Vec<String>,
}

/// Undoes `target`; with `dry_run`, only says what it would do.
pub fn rollback(hub: &Hub, target: &Target, dry_run: bool) -> Result<RollbackReport> {
    let view = JournalView::read(&hub.layout().facts())?;
    let wrote = |f: &Fact| match target {
        Target::Run(run) => f.run.as_deref() == Some(run.as_str()),
        Target::SourceSince { source, since } => f.source == *source && f.ts >= *since,
    };
    let forgot = |r: &Record| match (target, r) {
        (Target::Run(run), Record::Forget { reason, source, .. }) => {
            source == SOURCE && reason_names_run(reason.as_deref(), run)
        }
        (Target::SourceSince { source: s, since }, Record::Forget { source, ts, .. }) => {
            source == s && ts >= since
        }
        _ => false,
    };
    let to_forget: Vec<String> = view
        .live()
        .filter(|h| wrote(&h.first))
        .map(|h| h.first.id.clone())
        .collect();
    let written: HashSet<&str> = to_forget.iter().map(String::as_str).collect();
    // What the run's new versions replaced (and the run did not write itself).
    let mut replaced: Vec<String> = Vec::new();
    for id in &to_forget {
        if let Some(old) = view.facts.get(id).and_then(|h| h.last.supersedes.clone())
            && !written.contains(old.as_str())
            && !replaced.contains(&old)
        {
            replaced.push(old);
        }
    }
    let mut to_restore: Vec<Fact> = Vec::new();
    for (record, before) in &view.forgets {
        if !forgot(record) {
            continue;
        }
        let Some(before) = before else { continue };
        let still_forgotten = view.facts.get(&before.id).is_some_and(|h| h.forgotten);
        if still_forgotten
            && !written.contains(before.id.as_str())
            && !to_restore.iter().any(|f| f.id == before.id)
        {
            to_restore.push(before.clone());
        }
    }
    if let Target::Run(run) = target
        && to_forget.is_empty()
        && to_restore.is_empty()
        && report::load(hub.layout(), run).is_err()
    {
        return Err(Error::not_found("consolidation run", run.to_string()));
    }
    let mut out = RollbackReport {
        target: target.to_string(),
        dry_run,
        forgotten: Vec::new(),
        restored: Vec::new(),
    };
    if dry_run {
        out.forgotten = to_forget;
        out.restored = to_restore.into_iter().map(|f| f.id).collect();
        out.restored.extend(replaced);
        return Ok(out);
    }
    let reason = format!("rollback of {target}");
    for id in to_forget {
        match hub.tombstone(&id, Some(reason.clone()), ROLLBACK_SOURCE, &Filter::all()) {
            Ok(()) => out.forgotten.push(id),
            // Forgotten meanwhile by someone else: nothing left to undo.
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    out.restored = hub.restore_forgotten(to_restore)?;
    out.restored
        .extend(hub.reinstate(replaced, ROLLBACK_SOURCE)?);
    if let Target::Run(run) = target
        && let Ok(mut r) = report::load(hub.layout(), run)
    {
        r.rolled_back = Some(hub.now());
        report::save(hub.layout(), &r)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_their_run() {
        let r = forget_reason("run-1", Some("duplicate"));
        assert!(reason_names_run(Some(&r), "run-1"));
        assert!(!reason_names_run(Some(&r), "run-"));
        assert!(reason_names_run(
            Some(&forget_reason("run-1", None)),
            "run-1"
        ));
        assert!(!reason_names_run(Some("by hand"), "run-1"));
        assert!(!reason_names_run(None, "run-1"));
    }
}
