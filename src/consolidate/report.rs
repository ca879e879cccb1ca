//! Run reports: what a consolidation run promoted, folded, wrote, forgot and
//! rejected, kept as `data/consolidation/<run>.json` (derived data: the facts
//! themselves carry the run id, so a rollback works without the report too).

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{RunOptions, Window};
use crate::base::durable::write_atomic;
use crate::error::{Error, IoContext, Result};
use crate::layout::Layout;
use crate::model::Fact;

/// A short-term line promoted to long-term memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    /// The short-term id it came from (its `supersedes`).
    pub from: String,
    /// The new long-term id (absent in a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Scene.
    pub(crate) scene: String,
    /// Text.
    pub(crate) text: String,
    /// recalled, important, salient (with its category), or several.
    pub reason: String,
}

/// Near-duplicate short-term lines folded into one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fold {
    /// The line kept (promoted, or already in long-term memory).
    pub into: String,
    /// The lines folded into it.
    pub ids: Vec<String>,
}

/// A long-term memory untouched for long, reported (never changed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stale {
    /// Fact id.
    pub id: String,
    /// Last written or rewritten.
    pub(crate) last_touched: DateTime<Utc>,
    /// Importance.
    pub(crate) importance: f32,
}

/// Something left alone, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Skipped {
    /// Fact id.
    pub(crate) id: String,
    /// Why.
    pub(crate) reason: String,
}

/// An operation refused by validation or by the write path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    /// The operation as proposed.
    pub(crate) operation: serde_json::Value,
    /// Why it was refused.
    pub reason: String,
}

/// A fact the run forgot, with its content before (for rollback).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forgotten {
    /// Fact id.
    pub(crate) id: String,
    /// Why the model forgot it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The fact as it was.
    pub before: Fact,
}

/// A fact the run superseded with a new one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Superseded {
    /// The replaced id (left in place; the new fact names it in `supersedes`).
    pub old: String,
    /// The new id.
    pub(crate) new: String,
}

/// Two live memories that likely contradict each other, found among the
/// window's long-term memories: linked (`conflicts_with`) and proposed to
/// the owner, never merged or hidden by the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConflictProposal {
    /// The older memory.
    pub older: String,
    /// The newer memory.
    pub newer: String,
    /// The older memory's text.
    pub(crate) older_text: String,
    /// The newer memory's text.
    pub(crate) newer_text: String,
    /// Why they likely contradict each other.
    pub reason: String,
    /// The proposal: supersede the older by the newer. Accepting it is
    /// `POST /v1/conflicts/accept` with this body (`memd conflict accept
    /// <older> <newer>`); `memd conflict dismiss` ends the link instead.
    pub accept: serde_json::Value,
}

/// Everything one run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Run id (also on every fact the run wrote).
    pub run: String,
    /// When it started.
    pub started: DateTime<Utc>,
    /// When it finished.
    pub(crate) finished: DateTime<Utc>,
    /// Which chat it looked at.
    pub(crate) window: Window,
    /// Nothing was changed.
    pub(crate) dry_run: bool,
    /// Short-term lines promoted.
    pub promoted: Vec<Promotion>,
    /// Near-duplicates folded.
    pub folded: Vec<Fold>,
    /// Short-term lines left to expire.
    pub expiring: usize,
    /// Every id the run wrote (promotions and model writes).
    pub written: Vec<String>,
    /// Model supersedes.
    #[serde(default)]
    pub superseded: Vec<Superseded>,
    /// Model forgets, with the content before.
    #[serde(default)]
    pub forgotten: Vec<Forgotten>,
    /// Operations refused.
    pub rejected: Vec<Rejected>,
    /// Left alone, and why.
    pub(crate) skipped: Vec<Skipped>,
    /// Long-term memories that look stale (reported only).
    pub stale: Vec<Stale>,
    /// Operations proposed by the model pass (also in a dry run).
    #[serde(default)]
    pub proposed: usize,
    /// Model operations that passed validation (applied unless a dry run).
    #[serde(default)]
    pub accepted: Vec<serde_json::Value>,
    /// Why the model pass failed, if it did (the deterministic pass still counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model_error: Option<String>,
    /// Set once the run was rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<DateTime<Utc>>,
    /// Likely contradictions among the window's memories, proposed to the owner.
    #[serde(default)]
    pub conflicts: Vec<ConflictProposal>,
}

/// One line of the run list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Run id.
    pub(crate) run: String,
    /// Started.
    pub(crate) started: DateTime<Utc>,
    /// Counts.
    pub promoted: usize,
    /// Folds.
    pub(crate) folded: usize,
    /// Facts written.
    pub written: usize,
    /// Facts forgotten.
    pub(crate) forgotten: usize,
    /// Operations rejected.
    pub(crate) rejected: usize,
    /// Stale candidates.
    pub(crate) stale: usize,
    /// When it was rolled back, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rolled_back: Option<DateTime<Utc>>,
}

impl RunReport {
    /// An empty report for a run starting now.
    pub(crate) fn new(run: &str, opts: &RunOptions) -> RunReport {
        RunReport {
            run: run.to_string(),
            started: opts.now,
            finished: opts.now,
            window: opts.window,
            dry_run: opts.dry_run,
            promoted: Vec::new(),
            folded: Vec::new(),
            expiring: 0,
            written: Vec::new(),
            superseded: Vec::new(),
            forgotten: Vec::new(),
            rejected: Vec::new(),
            skipped: Vec::new(),
            stale: Vec::new(),
            proposed: 0,
            accepted: Vec::new(),
            model_error: None,
            rolled_back: None,
            conflicts: Vec::new(),
        }
    }

    /// Counts only.
    pub(crate) fn summary(&self) -> RunSummary {
        RunSummary {
            run: self.run.clone(),
            started: self.started,
            promoted: self.promoted.len(),
            folded: self.folded.len(),
            written: self.written.len(),
            forgotten: self.forgotten.len(),
            rejected: self.rejected.len(),
            stale: self.stale.len(),
            rolled_back: self.rolled_back,
        }
    }

    /// One line for logs and the scheduler state.
    pub(crate) fn summary_line(&self) -> String {
        format!(
            "{}: {} promoted, {} folded, {} written, {} forgotten, {} rejected, {} stale",
            self.run,
            self.promoted.len(),
            self.folded.len(),
            self.written.len(),
            self.forgotten.len(),
            self.rejected.len(),
            self.stale.len()
        )
    }
}

/// `data/consolidation/`.
pub(crate) fn dir(layout: &Layout) -> PathBuf {
    layout.data().join("consolidation")
}

fn check_run_id(run: &str) -> Result<()> {
    let ok = !run.is_empty()
        && run.len() <= 64
        && run
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!("{run:?} is not a run id")))
    }
}

/// Writes `data/consolidation/<run>.json` atomically.
pub(crate) fn save(layout: &Layout, report: &RunReport) -> Result<()> {
    check_run_id(&report.run)?;
    let dir = dir(layout);
    std::fs::create_dir_all(&dir).ctx("cannot create directory", &dir)?;
    let text = serde_json::to_vec_pretty(report).expect("reports serialise");
    write_atomic(&dir.join(format!("{}.json", report.run)), &text)
}

/// Reads one report.
pub fn load(layout: &Layout, run: &str) -> Result<RunReport> {
    check_run_id(run)?;
    let path = dir(layout).join(format!("{run}.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::not_found("consolidation run", run.to_string()));
        }
        Err(e) => return Err(e).ctx("cannot read", &path),
    };
    serde_json::from_str(&text)
        .map_err(|e| Error::Internal(format!("{}: unreadable report: {e}", path.display())))
}

/// Every saved run, newest first.
pub fn list(layout: &Layout) -> Result<Vec<RunSummary>> {
    let dir = dir(layout);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(run) = name.strip_suffix(".json")
            && let Ok(report) = load(layout, run)
        {
            out.push(report.summary());
        }
    }
    out.sort_by(|a, b| b.started.cmp(&a.started).then(b.run.cmp(&a.run)));
    Ok(out)
}
