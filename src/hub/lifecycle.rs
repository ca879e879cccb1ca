//! The hub's side of the memory lifecycle: the injected clock, access
//! tracking (batched into `touch` journal lines), tag and importance edits, tier counts for health, and bringing an expired
//! memory back.
//!
//! Access tracking never writes on the read path: a retrieval only adds ids
//! to an in-memory buffer. The buffer becomes one [`Record::Touch`] line on
//! the next write, or when [`Hub::flush_accesses`] finds it older than
//! `ACCESS_WINDOW` (the server's scheduler calls it every second), or when
//! the hub closes. Replaying those lines gives the same counts, tiers and
//! expiry as the live index (see `index::lifecycle`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::writer::{Op, OpOutcome};
use super::{Hub, WriteOutcome};
use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::lifecycle::expiring_soon;
use crate::model::{Fact, JOURNAL_VERSION, Memory, Origin, Record, Stage, Tier, parse_tags};

/// What "now" is for the hub (tests drive it).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The system clock.
pub(crate) fn system_clock() -> Clock {
    Arc::new(Utc::now)
}

/// Longest time an access waits in memory before it is journaled.
pub(crate) const ACCESS_WINDOW: StdDuration = StdDuration::from_secs(4);

/// Retrievals not yet journaled.
#[derive(Default)]
pub(super) struct AccessBuffer {
    ids: BTreeSet<String>,
    since: Option<Instant>,
    last_ts: Option<DateTime<Utc>>,
}

/// A tag and importance edit of one fact.
#[derive(Debug, Clone, Default)]
pub struct EditRequest {
    /// Tags to add.
    pub add_tags: Vec<String>,
    /// Tags to remove.
    pub remove_tags: Vec<String>,
    /// New importance (0–1).
    pub importance: Option<f32>,
}

/// Active long-term facts of one tier.
#[derive(Debug, Clone, Serialize)]
pub struct TierCount {
    /// The tier.
    pub tier: Tier,
    /// Searchable (unexpired, not superseded) memories.
    pub count: u64,
    /// Expired ones still in the journal (restorable).
    pub expired: u64,
    /// Ones expiring within `lifecycle.expiringSoonDays`.
    pub(crate) expiring_soon: u64,
    /// The configured budget.
    pub(crate) budget: u64,
    /// Whether `count` exceeds the budget.
    pub(crate) over_budget: bool,
}

/// Counts per tier, for health.
#[derive(Debug, Clone, Serialize)]
pub struct TierReport {
    /// T0..T3.
    pub tiers: Vec<TierCount>,
    /// Whether some tier is over its budget.
    pub(crate) over_capacity: bool,
}

impl Hub {
    /// Now, by the hub's clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        (self.clock.read().expect("clock poisoned"))()
    }

    /// Replaces the clock (tests; the HTTP layer passes its own "now" to filters).
    pub fn set_clock(&self, clock: Clock) {
        *self.clock.write().expect("clock poisoned") = clock;
    }

    /// Turns access tracking on (the server and MCP do; operator reads from
    /// the CLI do not count and never write to the journal).
    pub fn set_access_tracking(&self, on: bool) {
        self.track_accesses
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts one retrieval of each long-term fact among `memories` (no IO).
    pub(crate) fn note_access<'a>(&self, memories: impl IntoIterator<Item = &'a Memory>) {
        if !self.is_writer()
            || !self
                .track_accesses
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let now = self.now();
        let mut buf = self.accesses.lock().expect("access buffer poisoned");
        for m in memories {
            // Reading an expired memory (the operator's view) is not a retrieval.
            if m.origin == Origin::Fact
                && m.stage == Stage::Long
                && m.tier.is_some()
                && m.expires_at.is_none_or(|e| e > now)
            {
                buf.ids.insert(m.id.clone());
            }
        }
        if !buf.ids.is_empty() && buf.since.is_none() {
            buf.since = Some(Instant::now());
        }
    }

    /// Drains the access buffer into a `touch` record (strictly later than the last one).
    pub(super) fn take_touch_record(&self) -> Option<Record> {
        let mut buf = self.accesses.lock().expect("access buffer poisoned");
        if buf.ids.is_empty() {
            return None;
        }
        let mut ts = self.now();
        if let Some(last) = buf.last_ts
            && ts <= last
        {
            ts = last + Duration::milliseconds(1);
        }
        buf.last_ts = Some(ts);
        buf.since = None;
        let ids = std::mem::take(&mut buf.ids).into_iter().collect();
        Some(Record::Touch {
            v: JOURNAL_VERSION,
            ids,
            ts,
        })
    }

    /// Journals buffered accesses if the oldest waited `ACCESS_WINDOW` (4 s)
    /// (or always, with `force`). Returns how many ids were written.
    pub fn flush_accesses(&self, force: bool) -> Result<usize> {
        let due = {
            let buf = self.accesses.lock().expect("access buffer poisoned");
            buf.since
                .is_some_and(|s| force || s.elapsed() >= ACCESS_WINDOW)
        };
        if !due || !self.is_writer() {
            return Ok(0);
        }
        let Some(record) = self.take_touch_record() else {
            return Ok(0);
        };
        let n = match &record {
            Record::Touch { ids, .. } => ids.len(),
            _ => 0,
        };
        self.submit(Op::Touch(record))?;
        Ok(n)
    }

    /// Marks hits that expire within the warning window.
    pub fn is_expiring_soon(&self, m: &Memory) -> bool {
        expiring_soon(m.expires_at, self.now(), &self.config().lifecycle)
    }

    /// Counts of long-term facts per tier against the configured budgets.
    pub fn tier_report(&self) -> Result<TierReport> {
        let cfg = &self.config().lifecycle;
        let now = self.now();
        let soon = now + Duration::days(i64::from(cfg.expiring_soon_days));
        let rows = self
            .index
            .meta
            .with_reader(|c| crate::index::lifecycle::tier_counts(c, now, soon))?;
        let tiers: Vec<TierCount> = Tier::ALL
            .iter()
            .map(|&tier| {
                let (total, active, soon) = rows
                    .iter()
                    .find(|r| r.0 == tier.as_str())
                    .map_or((0, 0, 0), |r| (r.1, r.2, r.3));
                let budget = cfg.budget(tier);
                TierCount {
                    tier,
                    count: active,
                    expired: total - active,
                    expiring_soon: soon,
                    budget,
                    over_budget: active > budget,
                }
            })
            .collect();
        Ok(TierReport {
            over_capacity: tiers.iter().any(|t| t.over_budget),
            tiers,
        })
    }

    /// The fact with this id as a full record (active, expired or not).
    fn current_fact(&self, id: &str, filter: &Filter) -> Result<Fact> {
        let m = self
            .index
            .meta
            .get_many(&[id.to_string()], filter)?
            .remove(id)
            .filter(|m| m.origin == Origin::Fact)
            .ok_or_else(|| Error::not_found("memory", id))?;
        let extras = self
            .index
            .meta
            .fact_extras(id)?
            .ok_or_else(|| Error::not_found("memory", id))?;
        // An edit is recorded by this device and is not part of the run that wrote the fact.
        Ok(super::fact_from_row(m, extras, self.device.clone()))
    }

    fn rewrite(&self, fact: Fact) -> Result<WriteOutcome> {
        match self.submit(Op::Rewrite(Box::new(fact)))? {
            OpOutcome::Written(w) => Ok(w),
            _ => Err(Error::Internal("rewrite answered as another op".into())),
        }
    }

    /// Adds and removes tags and sets importance of a fact visible (and
    /// unexpired) under `filter`: a new `put` line with the same id.
    pub fn edit(&self, id: &str, req: &EditRequest, filter: &Filter) -> Result<WriteOutcome> {
        if crate::ids::is_doc_id(id) {
            return Err(Error::invalid(format!(
                "{id} is a Markdown document; edit its front matter instead"
            )));
        }
        let mut fact = self.current_fact(id, filter)?;
        let add = parse_tags(&req.add_tags)?;
        let remove = parse_tags(&req.remove_tags)?;
        let mut tags: Vec<String> = fact
            .tags
            .iter()
            .filter(|t| !remove.contains(t))
            .cloned()
            .collect();
        tags.extend(add);
        fact.tags = parse_tags(&tags)?;
        if fact.privacy != crate::model::Privacy::Secret
            && let Some((_, what)) = crate::content::detect_credential_in("", None, &fact.tags)
        {
            return Err(crate::content::credential_refusal("tags", what));
        }
        if let Some(i) = req.importance {
            if !i.is_finite() || !(0.0..=1.0).contains(&i) {
                return Err(Error::invalid("importance must be between 0 and 1"));
            }
            fact.importance = i;
        }
        self.rewrite(fact)
    }

    /// Brings an expired fact visible under `filter` back into the index: a
    /// new `put` line with its expiry moved to now + its tier's days
    /// (short-term: + `ingest.ttlHours`).
    pub fn restore_expired(&self, id: &str, filter: &Filter) -> Result<Memory> {
        let now = self.now();
        let mut fact = self.current_fact(id, filter)?;
        if fact.expires_at.is_none_or(|e| e > now) {
            return Err(Error::invalid(format!("{id} has not expired")));
        }
        fact.expires_at = match (fact.stage, fact.tier) {
            (Stage::Short, _) => {
                Some(now + Duration::hours(i64::from(self.config().ingest.ttl_hours)))
            }
            (Stage::Long, Some(t)) => self.config().lifecycle.expiry(t, now),
            (Stage::Long, None) => None,
        };
        self.rewrite(fact)?;
        self.get(id, filter)
    }

    /// Expired facts (journal still holds them) whose text or title contains
    /// `query`, newest first, visible under `filter` (inside the query): what
    /// `restore_expired` can bring back.
    pub fn search_expired(
        &self,
        query: &str,
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Memory>> {
        let now = self.now();
        let q = query.trim();
        if q.is_empty() {
            return Err(Error::invalid("query must not be empty"));
        }
        self.index.meta.with_reader(|c| {
            crate::index::meta_read::expired_matching(c, q, now, limit.clamp(1, 100), filter)
        })
    }
}

/// One month moved into the archive.
#[derive(Debug, Clone, Serialize)]
pub struct ArchivedMonth {
    /// The journal file: `<device>/YYYY-MM.jsonl`, or `YYYY-MM.jsonl` (legacy).
    pub month: String,
    /// Lines compressed.
    pub(crate) lines: u64,
}

impl Hub {
    /// Compresses journal months older than `older_than_months` whole months
    /// before now (default `lifecycle.archiveAfterMonths`; 0 = nothing) into
    /// `memories/facts/archive/`. The current month is never archived.
    /// Readers see no difference; the index keeps its cursors.
    pub fn archive_journal(&self, older_than_months: Option<u32>) -> Result<Vec<ArchivedMonth>> {
        use chrono::Datelike;
        let months = older_than_months.unwrap_or(self.config().lifecycle.archive_after_months);
        if months == 0 {
            return Ok(Vec::new());
        }
        let now = self.now();
        let index = now.year() * 12 + now.month0() as i32 - months as i32;
        let cutoff = format!(
            "{:04}-{:02}.jsonl",
            index.div_euclid(12),
            index.rem_euclid(12) + 1
        );
        let current = crate::store::journal::file_name_for(now);
        let dir = self.layout.facts();
        let mut state = self.writer_state()?;
        let mut out = Vec::new();
        // Only this device's months and the legacy flat ones: other devices archive their own.
        for file in state.journal.owned_files()? {
            let month = crate::store::journal::month_of(&file);
            if *month >= *cutoff || *month >= *current {
                continue;
            }
            let lines = crate::store::archive::archive_month(&dir, &file)?;
            if lines > 0 {
                out.push(ArchivedMonth { month: file, lines });
            }
        }
        if !out.is_empty() {
            // Appends must not go to a file handle of a month that moved.
            state.journal.reopen()?;
        }
        Ok(out)
    }
}
