//! The lifecycle part: access tracking (batched into `touch` journal lines),
//! tier counts against their budgets, expiring-soon marks, sliding expiry of
//! recalled chat, tag and importance edits, and bringing an expired memory
//! back. This part decides what a lifecycle change is; the writer appends it.
//!
//! Access tracking never writes on the read path: a retrieval (an agent's
//! recall, or a read asked with `touch`; looking alone is none) only adds ids
//! to an in-memory buffer. The buffer becomes one [`Record::Touch`] line on
//! the next commit, or when the scheduler's flush finds it older than
//! [`ACCESS_WINDOW`], or when the hub closes. Replaying those lines gives the
//! same counts, tiers and expiry as the live index (see `index::lifecycle`).
//!
//! Sliding expiry: recalling a short-term chat line keeps it alive for
//! another TTL, up to [`MAX_SHORT_TTL_HOURS`] from when it was written. An
//! extension is a new `put` line for the same id with a later `expires_at`.
//! The first recall of a line always writes one, however young the line (a
//! recall at any age counts, and consolidation reads it from the journal);
//! later ones only when they are worth a line (more than an hour).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::Core;
use crate::error::{Error, Result};
use crate::index::filter::{Filter, Scope};
use crate::index::meta::FactExtras;
use crate::lifecycle::expiring_soon;
use crate::model::{Fact, JOURNAL_VERSION, Memory, Origin, Record, Stage, Tier, parse_tags};

/// Longest time an access waits in memory before it is journaled.
pub(crate) const ACCESS_WINDOW: StdDuration = StdDuration::from_secs(4);

/// Longest a short-term memory lives, in hours from when it was written.
pub const MAX_SHORT_TTL_HOURS: i64 = 168;

/// Smallest extension worth a journal line for a short-term memory already
/// recalled once (the first recall always counts).
const MIN_EXTENSION: Duration = Duration::hours(1);

/// Retrievals not yet journaled.
#[derive(Default)]
struct AccessBuffer {
    ids: BTreeSet<String>,
    since: Option<Instant>,
    last_ts: Option<DateTime<Utc>>,
}

thread_local! {
    /// Set while this thread runs a request of the local operator (see
    /// [`untracked`]).
    static UNTRACKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with access tracking off on this thread: the local operator's
/// reads (the CLI, whether in process or through the daemon) are a person
/// browsing, not an agent's retrieval, and never write `touch` lines.
pub(crate) fn untracked<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            UNTRACKED.with(|u| u.set(self.0));
        }
    }
    let _restore = Restore(UNTRACKED.with(|u| u.replace(true)));
    f()
}

/// The lifecycle part (see the module docs).
#[derive(Default)]
pub(crate) struct Lifecycle {
    accesses: Mutex<AccessBuffer>,
    track: AtomicBool,
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
    /// Ones inside their tier's warning window (see [`crate::lifecycle::tier_windows`]).
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

impl Lifecycle {
    /// Turns access tracking on or off.
    pub(crate) fn set_tracking(&self, on: bool) {
        self.track.store(on, Ordering::Relaxed);
    }

    /// Counts one retrieval of each long-term fact among `memories` (no IO).
    pub(crate) fn note_access<'a>(
        &self,
        core: &Core,
        memories: impl IntoIterator<Item = &'a Memory>,
    ) {
        if !core.writable || !self.track.load(Ordering::Relaxed) || UNTRACKED.with(|u| u.get()) {
            return;
        }
        let now = core.now();
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
    pub(crate) fn take_touch(&self, core: &Core) -> Option<Record> {
        let mut buf = self.accesses.lock().expect("access buffer poisoned");
        if buf.ids.is_empty() {
            return None;
        }
        let mut ts = core.now();
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

    /// The `touch` record to journal now: when the oldest buffered access
    /// waited [`ACCESS_WINDOW`] (or always, with `force`).
    pub(crate) fn due_touch(&self, core: &Core, force: bool) -> Option<Record> {
        let due = {
            let buf = self.accesses.lock().expect("access buffer poisoned");
            buf.since
                .is_some_and(|s| force || s.elapsed() >= ACCESS_WINDOW)
        };
        if !due || !core.writable {
            return None;
        }
        self.take_touch(core)
    }

    /// Whether a hit expires within its warning window (relative to its
    /// lifetime, see [`expiring_soon`]).
    pub(crate) fn is_expiring_soon(&self, core: &Core, m: &Memory) -> bool {
        expiring_soon(
            m.ts,
            m.tier,
            m.expires_at,
            core.now(),
            &core.config().lifecycle,
        )
    }

    /// Counts of long-term facts per tier against the configured budgets.
    pub(crate) fn tier_report(&self, core: &Core) -> Result<TierReport> {
        let config = core.config();
        let cfg = &config.lifecycle;
        let now = core.now();
        let warning = crate::lifecycle::Warning::at(now, cfg);
        let rows = core
            .index
            .meta
            .with_reader(|c| crate::index::lifecycle::tier_counts(c, &warning))?;
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

    /// The fact with this id as a full record (active, expired or not),
    /// recorded as this device's line.
    pub(crate) fn current_fact(&self, core: &Core, id: &str, filter: &Filter) -> Result<Fact> {
        let m = core
            .index
            .meta
            .get_many(&[id.to_string()], filter)?
            .remove(id)
            .filter(|m| m.origin == Origin::Fact)
            .ok_or_else(|| Error::not_found("memory", id))?;
        let extras = core
            .index
            .meta
            .fact_extras(id)?
            .ok_or_else(|| Error::not_found("memory", id))?;
        // An edit is recorded by this device and is not part of the run that wrote the fact.
        Ok(fact_from_row(m, extras, core.device.clone()))
    }

    /// The fact visible under `filter` with `req`'s tags and importance: the
    /// new `put` line an edit appends (same id).
    pub(crate) fn edited(
        &self,
        core: &Core,
        id: &str,
        req: &EditRequest,
        filter: &Filter,
    ) -> Result<Fact> {
        if crate::ids::is_doc_id(id) {
            return Err(Error::invalid(format!(
                "{id} is a Markdown document; edit its front matter instead"
            )));
        }
        let mut fact = self.current_fact(core, id, filter)?;
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
        if let Some(hit) = crate::content::in_fact(&fact) {
            return Err(hit.refusal());
        }
        if let Some(i) = req.importance {
            if !i.is_finite() || !(0.0..=1.0).contains(&i) {
                return Err(Error::invalid("importance must be between 0 and 1"));
            }
            fact.importance = i;
        }
        Ok(fact)
    }

    /// The long-term fact visible under `filter` moved to `tier`: the new
    /// `put` line (same id) that re-tiers it. Its expiry follows the new
    /// tier's lifetime from now (none unless `tierExpiry` is on, never for T0).
    pub(crate) fn retiered(
        &self,
        core: &Core,
        id: &str,
        tier: Tier,
        filter: &Filter,
    ) -> Result<Fact> {
        if crate::ids::is_doc_id(id) {
            return Err(Error::invalid(format!(
                "{id} is a Markdown document; set `tier` in its front matter instead"
            )));
        }
        let mut fact = self.current_fact(core, id, filter)?;
        if fact.stage != Stage::Long {
            return Err(Error::invalid(format!(
                "{id} is short-term chat; only long-term memories have a tier"
            )));
        }
        fact.tier = Some(tier);
        fact.expires_at = core.config().lifecycle.expiry(tier, core.now());
        Ok(fact)
    }

    /// The expired fact visible under `filter`, with its expiry moved to now
    /// + its tier's days (short-term: + `ingest.ttlHours`): the `put` line
    ///   that restores it.
    pub(crate) fn restored(&self, core: &Core, id: &str, filter: &Filter) -> Result<Fact> {
        let now = core.now();
        let mut fact = self.current_fact(core, id, filter)?;
        if fact.expires_at.is_none_or(|e| e > now) {
            return Err(Error::invalid(format!("{id} has not expired")));
        }
        let config = core.config();
        fact.expires_at = match (fact.stage, fact.tier) {
            (Stage::Short, _) => Some(now + Duration::hours(i64::from(config.ingest.ttl_hours))),
            (Stage::Long, Some(t)) => config.lifecycle.expiry(t, now),
            (Stage::Long, None) => None,
        };
        Ok(fact)
    }

    /// Expired facts (the journal still holds them) whose text or title
    /// contains `query`, newest first, visible under `filter` (inside the
    /// query): what a restore can bring back.
    pub(crate) fn search_expired(
        &self,
        core: &Core,
        query: &str,
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Memory>> {
        let now = core.now();
        let q = query.trim();
        if q.is_empty() {
            return Err(Error::invalid("query must not be empty"));
        }
        core.index.meta.with_reader(|c| {
            crate::index::meta_read::expired_matching(c, q, now, limit.clamp(1, 100), filter)
        })
    }

    /// The `put` lines that extend the given short-term facts to `now + ttl`
    /// (capped at [`MAX_SHORT_TTL_HOURS`] after they were written). Ids that
    /// are not live short-term facts, and extensions not worth a line, are left out.
    pub(crate) fn ttl_extensions(
        &self,
        core: &Core,
        ids: &[String],
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<Record>> {
        if !core.writable || ids.is_empty() {
            return Ok(Vec::new());
        }
        let live_short = Filter::scope(Scope {
            stages: vec![Stage::Short],
            origins: vec![Origin::Fact],
            unexpired_at: Some(now),
            ..Scope::default()
        });
        let mut records = Vec::new();
        for m in core.index.meta.get_many(ids, &live_short)?.into_values() {
            let Some(current) = m.expires_at else {
                continue;
            };
            let target = (now + ttl).min(m.ts + Duration::hours(MAX_SHORT_TTL_HOURS));
            // Not yet extended past its first lifetime: any extension is its first recall.
            let recalled_before = current > m.ts + ttl;
            let worth = if recalled_before {
                MIN_EXTENSION
            } else {
                Duration::zero()
            };
            if target <= current + worth {
                continue;
            }
            let Some(extras) = core.index.meta.fact_extras(&m.id)? else {
                continue;
            };
            let device = extras.device.clone();
            records.push(Record::Put {
                v: JOURNAL_VERSION,
                at: None,
                fact: Fact {
                    expires_at: Some(target),
                    // The extension keeps the device that wrote the message.
                    ..fact_from_row(m, extras, device)
                },
            });
        }
        Ok(records)
    }
}

/// A fact rebuilt from its index row, to be written again with the same id
/// (an edit or a TTL extension). `device` is the one recorded on the new line;
/// the new line belongs to no consolidation run.
pub(crate) fn fact_from_row(m: Memory, extras: FactExtras, device: String) -> Fact {
    Fact {
        id: m.id,
        ts: m.ts,
        scene: m.scene,
        kind: m.kind,
        stage: m.stage,
        text: m.text,
        title: m.title,
        tags: m.tags,
        privacy: m.privacy,
        subject: m.subject,
        source: m.source,
        importance: m.importance,
        tier: m.tier,
        supersedes: m.supersedes,
        expires_at: m.expires_at,
        source_message_id: extras.source_message_id,
        idempotency_key: extras.idempotency_key,
        device,
        accesses: extras.accesses,
        run: None,
        setting: m.setting,
    }
}
