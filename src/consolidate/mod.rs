//! Nightly ("sleep") consolidation: turns a period's short-term chat into
//! long-term memory, and undoes it on request.
//!
//! A run reads the journal (the source of truth), plans with a deterministic
//! pass that needs no model ([`deterministic`]), optionally asks a model for
//! more operations ([`model_pass`]), validates every operation, and applies
//! them through the normal write path with `source: "sleep"` and the run id on
//! every fact it writes (`Fact::run`). What it did is kept in
//! `data/consolidation/<run>.json` ([`report`]); [`rollback`] undoes a run by
//! appending compensating lines, so the journal stays append-only.
//!
//! Without a model (the default), the deterministic pass also promotes what
//! a person would expect to be kept — explicit cues and personal facts —
//! judged by [`salience`] (rules plus the local embedder). Every promotion is
//! rewritten as the statement the person meant ([`statement`]): no cue
//! words or closing particles, the speaker named, relative dates made
//! absolute against when the message was said (in the text and its `time`),
//! and a kind (fact, preference, event) instead of `chat`.
//!
//! Folds are applied: every folded short-term line gets a tombstone naming
//! the run (rollback restores it) and is listed in the report's `forgotten`.
//!
//! Design of a promotion: the new long-term fact gets a fresh `sleep-…` id and
//! names the short-term chat line it came from in `supersedes` (so the
//! timeline links both ways); its idempotency key `sleep:<short id>` makes a
//! second run over the same chat a no-op. The short-term line is left alone and
//! expires on its own TTL.
//!
//! The same code runs from the scheduler of `memd serve` ([`crate::scheduler::sleep_job`]) and
//! from `memd consolidate`.

pub mod deterministic;
pub mod model_pass;
pub mod report;
pub mod rollback;
pub mod salience;
pub mod service;
pub mod statement;

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Duration, Local, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hub::{Hub, WriteRequest};
use crate::model::{Fact, Record};
use crate::store::journal::{self, Cursor};
use crate::timetable::{self, Period};

pub use crate::config::{ModelConfig, ModelKind, SleepConfig};
pub use report::{RunReport, RunSummary};

/// The scheduler name of the consolidation job (key in `data/scheduler.json`).
pub(crate) const JOB_NAME: &str = crate::hub::consolidation::SLEEP_JOB;

/// The `source` of everything consolidation writes or forgets.
pub(crate) const SOURCE: &str = "sleep";

/// The time range whose short-term chat a run consolidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Inclusive start.
    pub from: DateTime<Utc>,
    /// Exclusive end.
    pub to: DateTime<Utc>,
}

impl Window {
    /// One local calendar day.
    pub(crate) fn day(date: NaiveDate) -> Window {
        let start = |d: NaiveDate| {
            let naive = d.and_hms_opt(0, 0, 0).expect("midnight exists");
            Local
                .from_local_datetime(&naive)
                .earliest()
                .unwrap_or_else(|| Local.from_utc_datetime(&naive))
                .with_timezone(&Utc)
        };
        Window {
            from: start(date),
            to: start(date + chrono::Days::new(1)),
        }
    }

    /// The period that ends at `now` (the last day, week, month or year).
    pub(crate) fn ending(period: Period, now: DateTime<Utc>) -> Window {
        let days = match period {
            Period::Day => 1,
            Period::Week => 7,
            Period::Month => 31,
            Period::Year => 366,
        };
        Window {
            from: now - Duration::days(days),
            to: now,
        }
    }

    /// The period ending at `now`, reaching back to `last_success` if that is
    /// earlier (the daemon was down), but never more than the longest
    /// short-term lifetime further: older chat cannot still be live.
    pub(crate) fn since_last_run(
        period: Period,
        last_success: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Window {
        let base = Window::ending(period, now);
        let floor = base.from - Duration::hours(crate::hub::MAX_SHORT_TTL_HOURS);
        match last_success {
            Some(t) if t < base.from => Window {
                from: t.max(floor),
                to: now,
            },
            _ => base,
        }
    }

    /// Whether `ts` falls inside.
    pub(crate) fn contains(&self, ts: DateTime<Utc>) -> bool {
        ts >= self.from && ts < self.to
    }
}

/// How a run is asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Which chat to consolidate.
    pub window: Window,
    /// Plan and report, change nothing (no journal line, no report file).
    pub dry_run: bool,
    /// "Now", for stale detection and the run id.
    pub now: DateTime<Utc>,
}

/// Everything the journal says about one fact id.
#[derive(Debug, Clone)]
pub(crate) struct History {
    /// The first `put`.
    pub(crate) first: Fact,
    /// The latest `put`.
    pub(crate) last: Fact,
    /// How many `put` lines.
    pub(crate) puts: u32,
    /// Whether the latest record is a tombstone.
    pub(crate) forgotten: bool,
}

impl History {
    /// A short-term line whose expiry was pushed out later (a recall extends its TTL).
    pub(crate) fn recalled(&self) -> bool {
        self.puts > 1
            && match (self.first.expires_at, self.last.expires_at) {
                (Some(a), Some(b)) => b > a,
                (None, _) => false,
                (Some(_), None) => true,
            }
    }
}

/// The journal replayed into per-id histories, in first-seen order.
#[derive(Debug, Default)]
pub(crate) struct JournalView {
    pub(crate) order: Vec<String>,
    pub(crate) facts: HashMap<String, History>,
    /// Tombstones in file order: (the record, the last `put` before it).
    pub(crate) forgets: Vec<(Record, Option<Fact>)>,
}

impl JournalView {
    /// Reads every journal file of the root, compressed months included, so
    /// that a rollback finds a run's lines after they were archived (bad
    /// lines are skipped; the index reports them).
    pub(crate) fn read(facts_dir: &Path) -> Result<JournalView> {
        JournalView::replay(facts_dir, false)
    }

    /// [`JournalView::read`] keeping only what is live at the end: a
    /// forgotten id's history is dropped when its tombstone is read, and no
    /// tombstone is kept (a line put again after a forget starts a new
    /// history). What a run plans from ([`JournalView::live`]) is the same;
    /// its memory follows the live set instead of everything ever written.
    pub(crate) fn read_live(facts_dir: &Path) -> Result<JournalView> {
        JournalView::replay(facts_dir, true)
    }

    fn replay(facts_dir: &Path, live_only: bool) -> Result<JournalView> {
        let mut view = JournalView::default();
        if !facts_dir.exists() {
            return Ok(view);
        }
        for file in journal::list_all(facts_dir)? {
            journal::scan_file(facts_dir, &file, Cursor::default(), |item| {
                match item.entry {
                    Ok(Record::Forget { id, .. }) if live_only => {
                        view.facts.remove(&id);
                    }
                    Ok(record) => view.apply(record),
                    Err(_) => {}
                }
                Ok(())
            })?;
        }
        if live_only {
            let facts = &view.facts;
            let mut seen = std::collections::HashSet::new();
            view.order
                .retain(|id| facts.contains_key(id) && seen.insert(id.clone()));
        }
        Ok(view)
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Put { fact, .. } => match self.facts.get_mut(&fact.id) {
                Some(h) => {
                    h.last = fact;
                    h.puts += 1;
                    h.forgotten = false;
                }
                None => {
                    self.order.push(fact.id.clone());
                    self.facts.insert(
                        fact.id.clone(),
                        History {
                            first: fact.clone(),
                            last: fact,
                            puts: 1,
                            forgotten: false,
                        },
                    );
                }
            },
            // Access records and links change no content.
            Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. } => {}
            Record::Forget { ref id, .. } => {
                let before = self.facts.get_mut(id).map(|h| {
                    h.forgotten = true;
                    h.last.clone()
                });
                self.forgets.push((record, before));
            }
        }
    }

    /// Live histories in first-seen order.
    pub(crate) fn live(&self) -> impl Iterator<Item = &History> {
        self.order
            .iter()
            .filter_map(|id| self.facts.get(id))
            .filter(|h| !h.forgotten)
    }
}

/// A new run id: `run-<UTC yyyymmddThhmmss>-<4 hex>`.
pub(crate) fn new_run_id(now: DateTime<Utc>) -> String {
    let rand4: u16 = rand::Rng::random(&mut rand::rng());
    format!("run-{}-{rand4:04x}", now.format("%Y%m%dT%H%M%S"))
}

/// Runs one consolidation over `opts.window` and returns its report (saved
/// under `data/consolidation/` unless dry-run).
pub fn run(hub: &Hub, cfg: &SleepConfig, opts: &RunOptions) -> Result<RunReport> {
    cfg.validate()?;
    let run_id = new_run_id(opts.now);
    let view = JournalView::read_live(&hub.layout().facts())?;
    let mut report = RunReport::new(&run_id, opts);
    // Offline salience stands in for the model: with a model configured, the
    // model decides what else to keep (no second, differently worded copy).
    let salient = if cfg.model.kind == ModelKind::None {
        judge_salience(hub, &view, opts)
    } else {
        HashMap::new()
    };
    let plan = deterministic::plan(&view, cfg, opts, &run_id, &salient);
    report.folded = plan.folded.clone();
    report.stale = plan.stale.clone();
    report.expiring = plan.expiring;
    report.promoted = plan
        .promotions
        .iter()
        .map(|p| report::Promotion {
            from: p.from.clone(),
            id: None,
            text: p.request.text.clone(),
            scene: p.request.scene.to_string(),
            reason: p.reason.clone(),
        })
        .collect();
    report.skipped = plan.skipped.clone();
    if !opts.dry_run {
        let reqs: Vec<WriteRequest> = plan.promotions.iter().map(|p| p.request.clone()).collect();
        let outcomes = hub.append_batch(reqs)?;
        for (promotion, outcome) in report.promoted.iter_mut().zip(outcomes) {
            match outcome {
                Ok(w) if w.action == crate::hub::WriteAction::Add => {
                    promotion.id = Some(w.id.clone());
                    report.written.push(w.id);
                }
                Ok(w) => {
                    report.skipped.push(report::Skipped {
                        id: promotion.from.clone(),
                        reason: format!("already promoted as {}", w.id),
                    });
                }
                Err(e) => report.rejected.push(report::Rejected {
                    operation: serde_json::json!({ "op": "promote", "from": promotion.from }),
                    reason: e.to_string(),
                }),
            }
        }
        report.promoted.retain(|p| p.id.is_some());
        apply_folds(hub, &view, &run_id, &mut report)?;
    }
    let model = if cfg.model.kind == ModelKind::None {
        Ok(())
    } else {
        model_pass::run(hub, cfg, opts, &view, &run_id, &mut report)
    };
    if let Err(e) = &model {
        report.model_error = Some(e.to_string());
    }
    propose_conflicts(hub, opts, &mut report)?;
    report.finished = hub.now();
    if !opts.dry_run {
        report::save(hub.layout(), &report)?;
    }
    // A failed model pass fails the run so the scheduler retries; the retry's
    // deterministic pass finds its promotions already done (idempotency keys).
    model.map(|()| report)
}

/// Likely contradictions between the long-term memories written in the
/// window (or by this run) and the live memories of their scene and
/// subject: linked unless a dry run, and proposed in the report as a
/// supersede of the older by the newer for the owner to accept.
fn propose_conflicts(hub: &Hub, opts: &RunOptions, report: &mut RunReport) -> Result<()> {
    let to = hub.now().max(opts.window.to) + Duration::milliseconds(1);
    let found = hub.find_conflicts(opts.window.from, to)?;
    if !opts.dry_run {
        hub.link_conflicts(&found)?;
    }
    report.conflicts = found
        .into_iter()
        .map(|c| report::ConflictProposal {
            accept: serde_json::json!({ "older": c.older, "newer": c.newer }),
            older: c.older,
            newer: c.newer,
            older_text: c.older_text,
            newer_text: c.newer_text,
            reason: c.reason.to_string(),
        })
        .collect();
    Ok(())
}

/// Makes the reported folds true: every folded short-term line gets a
/// tombstone naming the run (so [`rollback`] brings it back), and goes into
/// `report.forgotten` with its content. The line it folded into survives (as
/// the promoted memory's source, the long-term memory it matched, or a
/// short-term line left to expire). A fold into a promotion that failed is
/// left alone, so nothing is lost with it.
fn apply_folds(hub: &Hub, view: &JournalView, run_id: &str, report: &mut RunReport) -> Result<()> {
    let failed: Vec<String> = report
        .rejected
        .iter()
        .filter_map(|r| r.operation.get("from").and_then(|v| v.as_str()))
        .map(String::from)
        .collect();
    let mut kept = Vec::new();
    for fold in std::mem::take(&mut report.folded) {
        if failed.contains(&fold.into) {
            continue;
        }
        let why = format!("folded into {}", fold.into);
        for id in &fold.ids {
            let Some(h) = view.facts.get(id) else {
                continue;
            };
            match hub.tombstone(
                id,
                Some(rollback::forget_reason(run_id, Some(&why))),
                SOURCE,
                &crate::index::filter::Filter::all(),
            ) {
                Ok(()) => report.forgotten.push(report::Forgotten {
                    id: id.clone(),
                    reason: Some(why.clone()),
                    before: h.last.clone(),
                }),
                // Forgotten or expired meanwhile: nothing left to fold.
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        kept.push(fold);
    }
    report.folded = kept;
    Ok(())
}

/// The offline salience verdict of every candidate line. The embedder's
/// margin counts only for the model the calibration was tuned on
/// (multilingual-e5-small); any other embedder, or none, means rules only.
fn judge_salience(
    hub: &Hub,
    view: &JournalView,
    opts: &RunOptions,
) -> HashMap<String, salience::Verdict> {
    let lines = deterministic::candidates(view, opts);
    if lines.is_empty() {
        return HashMap::new();
    }
    let embedder = hub
        .embedder()
        .ok()
        .filter(|e| salience::calibrated_for(e.model_id()));
    let texts: Vec<&str> = lines.iter().map(|h| h.last.text.as_str()).collect();
    let signals = salience::signals(&texts, embedder.as_deref());
    lines
        .iter()
        .zip(signals)
        .map(|(h, s)| {
            let cal = salience::shipped(s.margin.is_some());
            (h.last.id.clone(), salience::judge(&s, cal))
        })
        .collect()
}

/// What `/v1/health` says about consolidation.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Whether the scheduler runs it.
    pub(crate) enabled: bool,
    /// Last attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) last_run: Option<DateTime<Utc>>,
    /// `ok` or `error` (details: `GET /v1/consolidation/runs`, `data/scheduler.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'static str>,
    /// Failures since the last success.
    pub(crate) failures: u32,
    /// When it runs next (absent when disabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run: Option<DateTime<Utc>>,
}

/// Consolidation status of a hub's root at `now`.
pub fn status(hub: &Hub, cfg: &SleepConfig, now: DateTime<Utc>) -> Status {
    let states = timetable::load_states(&timetable::state_path(hub.layout()));
    let state = states.get(JOB_NAME).cloned().unwrap_or_default();
    // Health needs no token, so it says only whether the last run worked.
    let result = if state.failures > 0 {
        Some("error")
    } else {
        state.last_success.map(|_| "ok")
    };
    let next_run = cfg
        .enabled
        .then(|| cfg.schedule().ok())
        .flatten()
        .map(|s| timetable::next_run(&s, &state, now).max(now));
    Status {
        enabled: cfg.enabled,
        last_run: state.last_attempt,
        result,
        failures: state.failures,
        next_run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_reach_back_to_the_last_success_within_reason() {
        let now = Utc::now();
        let day = Window::ending(Period::Day, now);
        assert_eq!(day.from, now - Duration::days(1));
        assert_eq!(Window::since_last_run(Period::Day, None, now), day);
        let recent = now - Duration::hours(3);
        assert_eq!(Window::since_last_run(Period::Day, Some(recent), now), day);
        let three_days = now - Duration::days(3);
        assert_eq!(
            Window::since_last_run(Period::Day, Some(three_days), now).from,
            three_days
        );
        let long_ago = now - Duration::days(30);
        assert_eq!(
            Window::since_last_run(Period::Day, Some(long_ago), now).from,
            now - Duration::days(8)
        );
    }

    #[test]
    fn config_checks() {
        let mut cfg = SleepConfig::default();
        cfg.validate().unwrap();
        cfg.at = "3am".into();
        assert!(cfg.validate().is_err());
        cfg = SleepConfig::default();
        cfg.model.kind = ModelKind::Openai;
        cfg.model.base_url = "https://example.invalid/v1".into();
        cfg.validate().unwrap();
        cfg.model.base_url = "ftp://example.invalid/v1".into();
        assert!(cfg.validate().unwrap_err().to_string().contains("https://"));
        // Red team: credentials in the URL end up in logs and run reports.
        for url in [
            "http://user:pa55word@127.0.0.1:8080/v1",
            "https://h.invalid/v1?key=SECRET",
            "https://h.invalid/v1#frag",
        ] {
            cfg.model.base_url = url.into();
            let e = cfg.validate().unwrap_err().to_string();
            assert!(
                e.contains("apiKeyEnv") && !e.contains("pa55word"),
                "{url}: {e}"
            );
        }
        cfg.model.base_url = "http://127.0.0.1:8080/v1/path@x".into();
        cfg.validate().unwrap();
        cfg.model.kind = ModelKind::Command;
        assert!(cfg.validate().is_err());
    }
}
