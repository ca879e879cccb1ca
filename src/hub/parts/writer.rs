//! The writer part: the commit queue, group commit and the write rules.
//!
//! Writes from any number of threads are queued; whichever thread takes the
//! writer mutex drains the whole queue, checks every operation against the
//! index (and against the others in the same group), appends every line and
//! fsyncs once, then applies the new lines to the index by the same catch-up
//! path that runs on open ([`super::catchup`]). Every caller gets its own answer.
//!
//! The write rules:
//! - Every fact that enters, whatever the path (write, ingest, import,
//!   consolidation, a rewrite), meets [`Fact::validate`]; replay applies the
//!   same check to lines it reads from disk.
//! - Content is normalised, and every record the group takes meets the one
//!   credential check over all of its fields ([`crate::content::in_record`]):
//!   a `secret` memory may hold a credential in its text, title and tags,
//!   nothing else anywhere. A write is checked before any answer, so a
//!   credential is refused even where the write would answer `NOOP`.
//!   Sensitive and secret memories stay in the audiences they are pinned to.
//! - Dedup is exact only: a long-term write with the same scene, kind,
//!   normalised text, privacy and subject as a live memory answers `NOOP` with
//!   its id, and so does a repeated idempotency key (the caller's use case
//!   namespaces keys: writes by token and scene, ingest by scene and message).
//!   Near-duplicates are never merged or dropped on write: two different
//!   statements are two memories; folding them is consolidation's job
//!   (reported, rollbackable).
//! - A new version of a memory ([`WriteRequest::supersedes`]) needs the old
//!   one active, and visible under the filter the supersede use case hands
//!   in, checked in the same group as the append. Versions form a line: only
//!   the newest version can be superseded or edited; an older one answers
//!   `CONFLICT` naming the newest (when the caller may see it).
//! - A restore ([`RestoreOp`]) brings a version back: the same id put again
//!   when no later version of its line is live (undoing a forget), else a
//!   new version with its content at the head of the line.
//! - Consolidation (a write with a run id) pins nothing (kind `category`,
//!   tier `t0`) from evidence outside the owner's audiences
//!   (`privacy.sensitiveAudiences`); a tier rule that would make such a
//!   memory `t0` gives `t1` instead.
//! - Only short-term memories carry an expiry unless `lifecycle.tierExpiry`
//!   opts into tier expiry.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, mpsc};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::ctx::Ctx;
use super::{Core, pins};
use crate::content;
use crate::error::{Error, Result};
use crate::ids;
use crate::index::filter::Filter;
use crate::model::{
    Fact, JOURNAL_VERSION, MAX_FIELD_BYTES, MAX_TEXT_BYTES, Privacy, Record, Scene, Stage, Subject,
    Tier,
};
use crate::store::journal::{self, JournalWriter};
use crate::store::lock::WriterLock;

/// A new memory to write. Build with [`WriteRequest::new`] and set what differs.
///
/// This is the writer's own request: the caller's rules (scene rights,
/// defaults, the pin permission) are already applied by the use case that
/// built it, or do not apply (internal drivers: consolidation, import).
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// How it entered: `fact` (write), `chat` (ingest), `sleep`, `import`. First part of the id.
    pub origin: String,
    /// Audience.
    pub scene: Scene,
    /// The memory.
    pub text: String,
    /// Kind word.
    pub kind: String,
    /// short or long.
    pub stage: Stage,
    /// Optional title.
    pub title: Option<String>,
    /// Tags (validated).
    pub tags: Vec<String>,
    /// Sensitivity.
    pub privacy: Privacy,
    /// Whose memory it is.
    pub subject: Subject,
    /// Who writes it.
    pub(crate) source: String,
    /// 0–1.
    pub importance: f32,
    /// Retention tier.
    pub tier: Option<Tier>,
    /// The id it replaces.
    pub supersedes: Option<String>,
    /// What the writer of a new version may see: the memory it replaces
    /// must be visible under it (`None`: any active memory).
    pub(crate) supersede_filter: Option<Filter>,
    /// When it stops being searchable: short-term memories only, unless
    /// `lifecycle.tierExpiry` is on (a long-term write with an expiry is
    /// refused otherwise, since it would replay as non-expiring).
    pub expires_at: Option<DateTime<Utc>>,
    /// Ingest key.
    pub(crate) source_message_id: Option<String>,
    /// Client idempotency key, already namespaced by the use case (writes
    /// use `w|<token>|<scene>|<key>`), so one caller can never answer for another.
    pub idempotency_key: Option<String>,
    /// When it happened, for imports of older memories; `None` means now.
    pub ts: Option<DateTime<Utc>>,
    /// The consolidation run writing it, if any.
    pub(crate) run: Option<String>,
    /// Event time, session and speaker (see [`crate::model::Setting`]).
    pub setting: crate::model::Setting,
    /// A restore of an older version: `supersedes` may name a forgotten
    /// head, and no exact duplicate answers for it (the content is the old
    /// version's on purpose).
    pub(crate) restoring: bool,
}

impl WriteRequest {
    /// A long-term `note` with normal privacy about the owner, written by `source`.
    pub fn new(scene: Scene, text: impl Into<String>, source: impl Into<String>) -> Self {
        WriteRequest {
            origin: "fact".into(),
            scene,
            text: text.into(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            tags: Vec::new(),
            privacy: Privacy::Normal,
            subject: Subject::Owner,
            source: source.into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            supersede_filter: None,
            expires_at: None,
            source_message_id: None,
            idempotency_key: None,
            ts: None,
            run: None,
            setting: Default::default(),
            restoring: false,
        }
    }
}

/// A restore of one fact's version (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct RestoreOp {
    /// The fact to bring back.
    pub(crate) id: String,
    /// What the restorer may write: the fact (and the head it replaces) must
    /// be visible under it, forgotten or not.
    pub(crate) filter: Filter,
    /// The source of a new version, if one is written.
    pub(crate) source: String,
    /// Only put the same id again; never write a new version.
    pub(crate) same_id_only: bool,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restored {
    /// The same id was put again and is current.
    Same,
    /// A new version with the fact's content was written at the head of its line.
    NewVersion(String),
    /// The fact is current already; nothing was appended.
    Current,
    /// Only the same id could be put again, and a later version is live.
    Skipped,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WriteAction {
    /// A new fact was appended.
    Add,
    /// An existing fact was rewritten in place (tag and importance edits).
    Update,
    /// An identical earlier write (same content key or idempotency key) was
    /// found; nothing was appended.
    Noop,
}

/// The result of a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct WriteOutcome {
    /// The fact id (new or existing).
    pub id: String,
    /// What happened.
    pub action: WriteAction,
}

/// One operation in the commit queue.
pub(crate) enum Op {
    Write(Box<WriteRequest>),
    /// Rewrite an existing fact (tags, importance, expiry): a new `put` with
    /// the same id. The filter is what the editor may see (a refusal names
    /// the newest version only if it is visible under it).
    Rewrite(Box<Fact>, Filter),
    /// Retrieval counts, appended as they are.
    Touch(Record),
    Forget {
        id: String,
        reason: Option<String>,
        source: String,
        filter: Filter,
    },
    /// A record from another root, appended as it is unless its id is known.
    Import(Record),
    /// A version brought back.
    Restore(Box<RestoreOp>),
    /// A `link` or `unlink` line, appended as it is once it meets the rules.
    Link(Record),
}

/// What an operation did.
pub(crate) enum OpOutcome {
    Written(WriteOutcome),
    Forgotten,
    Imported(bool),
    Restored(Restored),
}

struct Pending {
    op: Op,
    reply: mpsc::Sender<Result<OpOutcome>>,
}

/// The journal appender and the root's writer lock, held together.
pub(crate) struct WriterState {
    pub(crate) journal: JournalWriter,
    pub(crate) _lock: WriterLock,
}

/// The writer part (see the module docs). Without a [`WriterState`] (a
/// read-only hub) every write answers `ROOT_LOCKED`.
pub(crate) struct Writer {
    state: Option<Mutex<WriterState>>,
    queue: Mutex<Vec<Pending>>,
}

/// One month moved into the archive.
#[derive(Debug, Clone, Serialize)]
pub struct ArchivedMonth {
    /// The journal file: `<device>/YYYY-MM.jsonl`, or `YYYY-MM.jsonl` (legacy).
    pub month: String,
    /// Lines compressed.
    pub(crate) lines: u64,
}

impl Writer {
    pub(crate) fn new(state: Option<WriterState>) -> Writer {
        Writer {
            state: state.map(Mutex::new),
            queue: Mutex::new(Vec::new()),
        }
    }

    /// Holds the writer (waiting for it), or `ROOT_LOCKED` on a read-only hub.
    pub(crate) fn hold(&self, core: &Core) -> Result<MutexGuard<'_, WriterState>> {
        let w = self.state.as_ref().ok_or_else(|| core.locked_error())?;
        Ok(w.lock().expect("writer state poisoned"))
    }

    /// Holds the writer if nobody does right now.
    pub(crate) fn try_hold(&self) -> Option<MutexGuard<'_, WriterState>> {
        self.state.as_ref()?.try_lock().ok()
    }

    /// Writes one memory; returns after its journal line is fsync'd and indexed.
    pub(crate) fn write(&self, cx: Ctx<'_>, req: WriteRequest) -> Result<WriteOutcome> {
        match self.submit(cx, Op::Write(Box::new(req)))? {
            OpOutcome::Written(w) => Ok(w),
            _ => Err(Error::Internal("write answered as another op".into())),
        }
    }

    /// Writes many memories as one group: one fsync, one index update.
    pub(crate) fn write_batch(
        &self,
        cx: Ctx<'_>,
        reqs: Vec<WriteRequest>,
    ) -> Result<Vec<Result<WriteOutcome>>> {
        let ops = reqs.into_iter().map(|r| Op::Write(Box::new(r))).collect();
        Ok(self
            .submit_many(cx, ops)?
            .into_iter()
            .map(|r| match r? {
                OpOutcome::Written(w) => Ok(w),
                _ => Err(Error::Internal("write answered as another op".into())),
            })
            .collect())
    }

    /// Rewrites an existing, active fact in place (a new `put` with its id);
    /// `filter` is what the editor may see.
    pub(crate) fn rewrite(&self, cx: Ctx<'_>, fact: Fact, filter: &Filter) -> Result<WriteOutcome> {
        match self.submit(cx, Op::Rewrite(Box::new(fact), filter.clone()))? {
            OpOutcome::Written(w) => Ok(w),
            _ => Err(Error::Internal("rewrite answered as another op".into())),
        }
    }

    /// Appends a tombstone for a fact visible under `filter`.
    pub(crate) fn forget(
        &self,
        cx: Ctx<'_>,
        id: &str,
        reason: Option<String>,
        source: &str,
        filter: &Filter,
    ) -> Result<()> {
        self.submit(
            cx,
            Op::Forget {
                id: id.to_string(),
                reason,
                source: source.to_string(),
                filter: filter.clone(),
            },
        )
        .map(|_| ())
    }

    /// Restores versions (see [`RestoreOp`]), each on its own, in one group.
    pub(crate) fn restore(
        &self,
        cx: Ctx<'_>,
        ops: Vec<RestoreOp>,
    ) -> Result<Vec<Result<Restored>>> {
        let ops = ops.into_iter().map(|o| Op::Restore(Box::new(o))).collect();
        Ok(self
            .submit_many(cx, ops)?
            .into_iter()
            .map(|r| match r? {
                OpOutcome::Restored(done) => Ok(done),
                _ => Err(Error::Internal("restore answered as another op".into())),
            })
            .collect())
    }

    /// Appends `link` and `unlink` lines (each checked on its own) in one group.
    pub(crate) fn link(&self, cx: Ctx<'_>, records: Vec<Record>) -> Result<()> {
        let ops = records.into_iter().map(Op::Link).collect();
        for outcome in self.submit_many(cx, ops)? {
            outcome?;
        }
        Ok(())
    }

    /// Appends records taken from another root's journal, keeping their ids
    /// and times; see [`crate::hub::Hub::import_records`].
    pub(crate) fn import_records(
        &self,
        cx: Ctx<'_>,
        records: Vec<Record>,
    ) -> Result<Vec<Result<bool>>> {
        let ops = records.into_iter().map(Op::Import).collect();
        Ok(self
            .submit_many(cx, ops)?
            .into_iter()
            .map(|r| match r? {
                OpOutcome::Imported(appended) => Ok(appended),
                _ => Err(Error::Internal("import answered as another op".into())),
            })
            .collect())
    }

    /// Queues `op`; the thread that gets the writer commits everything queued.
    pub(crate) fn submit(&self, cx: Ctx<'_>, op: Op) -> Result<OpOutcome> {
        self.submit_many(cx, vec![op])?
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no answer for a queued operation".into())))
    }

    /// Queues `ops` together; they are committed in the same group.
    fn submit_many(&self, cx: Ctx<'_>, ops: Vec<Op>) -> Result<Vec<Result<OpOutcome>>> {
        if self.state.is_none() {
            return Err(cx.core.locked_error());
        }
        let mut replies = Vec::with_capacity(ops.len());
        {
            let mut queue = self.queue.lock().expect("queue poisoned");
            for op in ops {
                let (tx, rx) = mpsc::channel();
                queue.push(Pending { op, reply: tx });
                replies.push(rx);
            }
        }
        {
            let mut state = self.hold(cx.core)?;
            let batch = std::mem::take(&mut *self.queue.lock().expect("queue poisoned"));
            if !batch.is_empty() {
                self.commit(cx, &mut state, batch);
            }
        }
        Ok(replies
            .into_iter()
            .map(|rx| {
                rx.recv()
                    .map_err(|_| Error::Internal("writer dropped a queued operation".into()))?
            })
            .collect())
    }

    /// Validates, appends with one fsync, indexes, then answers every pending op.
    fn commit(&self, cx: Ctx<'_>, state: &mut WriterState, batch: Vec<Pending>) {
        let mut group = Group::new(cx.core);
        if let Some(touch) = cx.lifecycle.take_touch(cx.core) {
            group.records.push(touch);
        }
        let mut answers = Vec::with_capacity(batch.len());
        for Pending { op, reply } in batch {
            answers.push((reply, group.take(op)));
        }
        let durable = if group.records.is_empty() {
            Ok(())
        } else {
            append_and_index(cx, state, &group.records)
        };
        for (reply, outcome) in answers {
            let answer = match (&durable, outcome) {
                (Err(e), Ok(_)) => Err(e.for_caller()),
                (_, outcome) => outcome,
            };
            // A caller that went away does not need its answer.
            let _ = reply.send(answer);
        }
    }

    /// Compresses journal months older than `older_than_months` whole months
    /// before now (default `lifecycle.archiveAfterMonths`; 0 = nothing) into
    /// `memories/facts/archive/`. The current month is never archived.
    /// Readers see no difference; the index keeps its cursors.
    pub(crate) fn archive_months(
        &self,
        core: &Core,
        older_than_months: Option<u32>,
        dry_run: bool,
    ) -> Result<Vec<ArchivedMonth>> {
        use chrono::Datelike;
        let months = older_than_months.unwrap_or(core.config().lifecycle.archive_after_months);
        if months == 0 {
            return Ok(Vec::new());
        }
        let now = core.now();
        let index = now.year() * 12 + now.month0() as i32 - months as i32;
        let cutoff = format!(
            "{:04}-{:02}.jsonl",
            index.div_euclid(12),
            index.rem_euclid(12) + 1
        );
        let current = journal::file_name_for(now);
        let dir = core.layout.facts();
        let mut state = self.hold(core)?;
        let mut out = Vec::new();
        // Only this device's months and the legacy flat ones: other devices archive their own.
        for file in state.journal.owned_files()? {
            let month = journal::month_of(&file);
            if *month >= *cutoff || *month >= *current {
                continue;
            }
            if dry_run {
                out.push(ArchivedMonth {
                    month: file,
                    lines: 0,
                });
                continue;
            }
            let lines = crate::store::archive::archive_month(&dir, &file)?;
            if lines > 0 {
                out.push(ArchivedMonth { month: file, lines });
            }
        }
        if !out.is_empty() && !dry_run {
            // Appends must not go to a file handle of a month that moved.
            state.journal.reopen()?;
        }
        Ok(out)
    }

    /// Appends `records` (`put` lines of existing ids) whose id is active and
    /// current (not an older version) at the moment of the append, under the
    /// writer: a forget committed since they were read must win, since a
    /// `put` after it would bring the memory back. Returns how many were
    /// appended.
    pub(crate) fn append_if_active(&self, cx: Ctx<'_>, records: Vec<Record>) -> Result<usize> {
        if records.is_empty() {
            return Ok(0);
        }
        let mut state = self.hold(cx.core)?;
        let mut keep = Vec::with_capacity(records.len());
        for r in records {
            if let Some(hit) = content::in_record(&r) {
                tracing::warn!(fact.id = %r.id(), field = hit.field, what = hit.what, "not appended: holds a credential");
                continue;
            }
            // An older version is not put again: a put after the forget of
            // the version that replaced it would restore it.
            if cx.core.index.meta.fact_state(r.id())? == Some(true)
                && cx
                    .core
                    .index
                    .meta
                    .supersede_marks(&[r.id().to_string()])?
                    .is_empty()
            {
                keep.push(r);
            }
        }
        if !keep.is_empty() {
            append_and_index(cx, &mut state, &keep)?;
        }
        Ok(keep.len())
    }

    /// Re-appends `facts` (each an earlier `put` of its id) whose id is
    /// forgotten at the moment of the append, for rollbacks of consolidation
    /// runs. Returns the ids restored.
    ///
    /// The journal files a line by its `ts` month and a replay reads months
    /// in order, so a fact restored in a later month than it was written
    /// keeps its id and content but takes the restore time as `ts`: otherwise
    /// its line would land in an older file than its tombstone, and a reindex
    /// would forget it again.
    pub(crate) fn restore_forgotten(&self, cx: Ctx<'_>, facts: Vec<Fact>) -> Result<Vec<String>> {
        if facts.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.hold(cx.core)?;
        let mut records = Vec::new();
        let now = cx.core.now();
        let config = cx.core.config();
        for mut fact in facts {
            if journal::file_name_for(fact.ts) != journal::file_name_for(now) {
                fact.ts = now;
            }
            if let Err(e) = fact.validate(&pins(&config)) {
                tracing::warn!(fact.id = %fact.id, error = %e, "not restored: breaks the write rules");
                continue;
            }
            if let Some(hit) = content::in_fact(&fact) {
                tracing::warn!(fact.id = %fact.id, field = hit.field, what = hit.what, "not restored: holds a credential");
                continue;
            }
            let twice = records.iter().any(|r: &Record| r.id() == fact.id);
            if !twice && cx.core.index.meta.fact_state(&fact.id)? == Some(false) {
                records.push(Record::Put {
                    v: JOURNAL_VERSION,
                    at: None,
                    fact,
                });
            }
        }
        if !records.is_empty() {
            append_and_index(cx, &mut state, &records)?;
        }
        Ok(records.iter().map(|r| r.id().to_string()).collect())
    }
}

/// Appends `records` (rolled back whole on failure) and indexes them by the
/// replay that runs at startup. The caller holds the writer.
fn append_and_index(cx: Ctx<'_>, state: &mut WriterState, records: &[Record]) -> Result<()> {
    let records = stamp(cx.core, records)?;
    // Nothing is acknowledged that the index could not take (a full disk):
    // refused before the journal is touched.
    let bytes = records
        .iter()
        .map(|r| serde_json::to_vec(r).map_or(0, |v| v.len() as u64 + 20))
        .sum();
    cx.catchup.admit_writes(cx.core, bytes)?;
    // A failed append is rolled back by the journal: nothing of the group is stored.
    let ends = state.journal.append(&records)?;
    // The lines are durable from here on; indexing them is the same replay
    // that runs at startup. If it fails (a full disk), the index is marked
    // behind and catches up on the next commit or flush.
    let indexed = if cx.core.index.behind().is_some() {
        cx.catchup.recover(cx.core)
    } else {
        let touched: Vec<String> = ends.into_keys().collect();
        cx.catchup
            .catch_up_files(cx.core, &touched, &mut |_| {})
            .map(|_| ())
    };
    if let Err(e) = indexed
        && let Some(repeats) = crate::base::repeat::global().admit("index.after_append")
    {
        tracing::error!(error = %e, repeated = repeats, "indexing after append failed; the index catches up once storage works again");
    }
    Ok(())
}

/// Stamps records for the merge rules ([`crate::index::merge`]): a `put`
/// gets `at` = now, but at least one millisecond after the newest put or
/// forget of its id this device knows (in the index or earlier in the
/// group); a `forget` gets a `ts` no earlier than that. A clock that went
/// backwards cannot make a line lose to one its device wrote before.
fn stamp(core: &Core, records: &[Record]) -> Result<Vec<Record>> {
    let mut floors: HashMap<String, i64> = HashMap::new();
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let mut r = r.clone();
        if matches!(
            r,
            Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. }
        ) {
            out.push(r);
            continue;
        }
        let floor = match floors.get(r.id()) {
            Some(f) => Some(*f),
            None => core
                .index
                .meta
                .with_reader(|c| crate::index::merge::floor(c, r.id()))?,
        };
        match &mut r {
            Record::Put { at, fact, .. } => {
                // Milliseconds, as the index compares them.
                let mut ms = core.now().timestamp_millis();
                if let Some(f) = floor {
                    ms = ms.max(f + 1);
                }
                let when = DateTime::from_timestamp_millis(ms).unwrap_or_else(|| core.now());
                floors.insert(fact.id.clone(), when.timestamp_millis());
                *at = Some(when);
            }
            Record::Forget { id, ts, .. } => {
                if let Some(f) = floor
                    && ts.timestamp_millis() < f
                    && let Some(next) = DateTime::from_timestamp_millis(f)
                {
                    *ts = next;
                }
                floors.insert(id.clone(), ts.timestamp_millis());
            }
            Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. } => {}
        }
        out.push(r);
    }
    Ok(out)
}

/// A credential in any field of a write request (the fields its fact will
/// have; see [`content::in_record`]), `text` being the normalised text.
fn request_credential(req: &WriteRequest, text: &str) -> Option<content::CredentialHit> {
    use content::FieldKind::{Id, Prose};
    let joined = req.tags.join(" ");
    let s = &req.setting;
    let optional = [
        ("time", Prose, s.time.as_deref()),
        ("speaker", Prose, s.speaker.as_deref()),
        ("session", Id, s.session.as_deref()),
        ("supersedes", Id, req.supersedes.as_deref()),
        ("source_message_id", Id, req.source_message_id.as_deref()),
        ("idempotency_key", Id, req.idempotency_key.as_deref()),
        ("run", Id, req.run.as_deref()),
    ];
    content::scan(
        content::content_fields(req.privacy, text, req.title.as_deref(), &req.tags, &joined)
            .into_iter()
            .chain([
                ("scene", Id, req.scene.as_str()),
                ("kind", Id, req.kind.as_str()),
                ("source", Id, req.source.as_str()),
            ])
            .chain(
                optional
                    .into_iter()
                    .filter_map(|(f, k, v)| v.map(|v| (f, k, v))),
            ),
    )
}

/// One commit group in the making: the records to append and what the
/// operations before this one in the group did.
struct Group<'a> {
    core: &'a Core,
    config: std::sync::Arc<crate::config::Config>,
    records: Vec<Record>,
    keys: HashMap<String, String>,
    hashes: HashMap<String, String>,
    written: HashSet<String>,
    forgotten: HashSet<String>,
    /// Old versions superseded earlier in the group, and the new version of each.
    replaced: HashMap<String, String>,
}

enum Prepared {
    Existing(String),
    Record(Record),
}

impl<'a> Group<'a> {
    fn new(core: &'a Core) -> Group<'a> {
        Group {
            core,
            config: core.config(),
            records: Vec::new(),
            keys: HashMap::new(),
            hashes: HashMap::new(),
            written: HashSet::new(),
            forgotten: HashSet::new(),
            replaced: HashMap::new(),
        }
    }

    /// Checks `op` against the index and the group, and adds its records,
    /// after the one credential check over every field of each of them
    /// ([`content::in_record`]): whatever the operation, nothing that holds
    /// a credential reaches the journal.
    fn take(&mut self, op: Op) -> Result<OpOutcome> {
        let start = self.records.len();
        let outcome = self.take_op(op)?;
        if let Some(hit) = self.records[start..].iter().find_map(content::in_record) {
            self.drop_from(start);
            return Err(hit.refusal());
        }
        Ok(outcome)
    }

    /// Takes back the records from `start` on, and what the group noted of them.
    fn drop_from(&mut self, start: usize) {
        for record in self.records.drain(start..) {
            match record {
                Record::Put { fact, .. } => {
                    let id = fact.id;
                    self.written.remove(&id);
                    self.keys.retain(|_, v| *v != id);
                    self.hashes.retain(|_, v| *v != id);
                    self.replaced.retain(|_, v| *v != id);
                }
                Record::Forget { id, .. } => {
                    self.forgotten.remove(&id);
                }
                Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. } => {}
            }
        }
    }

    fn take_op(&mut self, op: Op) -> Result<OpOutcome> {
        match op {
            Op::Touch(record) => {
                self.records.push(record);
                Ok(OpOutcome::Imported(true))
            }
            Op::Rewrite(fact, filter) => self.rewrite(*fact, &filter),
            Op::Write(req) => self.write(*req),
            Op::Forget {
                id,
                reason,
                source,
                filter,
            } => {
                let record = Record::Forget {
                    v: JOURNAL_VERSION,
                    id,
                    ts: self.core.now(),
                    reason,
                    source,
                };
                // Before `NOT_FOUND`, which would name the id.
                if let Some(hit) = content::in_record(&record) {
                    return Err(hit.refusal());
                }
                let id = record.id().to_string();
                self.check_forget(&id, &filter)?;
                self.forgotten.insert(id);
                self.records.push(record);
                Ok(OpOutcome::Forgotten)
            }
            Op::Restore(op) => self.restore(*op).map(OpOutcome::Restored),
            Op::Link(record) => {
                record.validate(&pins(&self.config))?;
                self.records.push(record);
                Ok(OpOutcome::Imported(true))
            }
            Op::Import(record) => {
                let append = self.check_import(&record)?;
                if append {
                    match &record {
                        Record::Put { fact, .. } => self.written.insert(fact.id.clone()),
                        Record::Forget { id, .. } => self.forgotten.insert(id.clone()),
                        Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. } => false,
                    };
                    self.records.push(record);
                }
                Ok(OpOutcome::Imported(append))
            }
        }
    }

    fn rewrite(&mut self, fact: Fact, filter: &Filter) -> Result<OpOutcome> {
        if self.forgotten.contains(&fact.id)
            || self.core.index.meta.fact_state(&fact.id).ok().flatten() != Some(true)
        {
            return Err(Error::not_found("memory", fact.id.clone()));
        }
        // Only the newest version is edited: a put of an older one would
        // also restore it once the newer one is forgotten.
        let next = match self.replaced.get(&fact.id) {
            Some(n) => Some(n.clone()),
            None => self
                .core
                .index
                .meta
                .supersede_marks(std::slice::from_ref(&fact.id))?
                .remove(&fact.id),
        };
        if let Some(next) = next {
            return Err(self.older_version(&fact.id, &next, filter, "edit")?);
        }
        fact.validate(&pins(&self.config))?;
        self.written.insert(fact.id.clone());
        let id = fact.id.clone();
        self.records.push(Record::Put {
            v: JOURNAL_VERSION,
            at: None,
            fact,
        });
        Ok(OpOutcome::Written(WriteOutcome {
            id,
            action: WriteAction::Update,
        }))
    }

    fn write(&mut self, req: WriteRequest) -> Result<OpOutcome> {
        let (id, action) = match self.prepare_write(req)? {
            Prepared::Existing(id) => (id, WriteAction::Noop),
            Prepared::Record(record) => {
                let id = record.id().to_string();
                if let Record::Put { fact, .. } = &record
                    && let Some(k) = &fact.idempotency_key
                {
                    self.keys.insert(k.clone(), id.clone());
                }
                if let Record::Put { fact, .. } = &record
                    && let Some(old) = &fact.supersedes
                {
                    self.replaced.insert(old.clone(), id.clone());
                }
                self.written.insert(id.clone());
                self.records.push(record);
                (id, WriteAction::Add)
            }
        };
        Ok(OpOutcome::Written(WriteOutcome { id, action }))
    }

    fn prepare_write(&mut self, req: WriteRequest) -> Result<Prepared> {
        let text = self.check_content(&req)?;
        self.check_consolidation_pin(&req)?;
        if let Some(id) = self.repeated_key(&req)? {
            return Ok(Prepared::Existing(id));
        }
        self.check_supersede(&req)?;
        let now = self.core.now();
        // Exact duplicates of a live long-term memory reuse its id (NOOP).
        let hash = (req.stage == Stage::Long).then(|| {
            crate::lifecycle::content_hash(&req.scene, &req.kind, &text, req.privacy, req.subject)
        });
        if let Some(h) = &hash
            && !req.restoring
            && let Some(id) = self.duplicate(h, now)?
        {
            return Ok(Prepared::Existing(id));
        }
        let fact = self.new_fact(req, text, now)?;
        fact.validate(&pins(&self.config))?;
        if let Some(h) = hash {
            self.hashes.insert(h, fact.id.clone());
        }
        Ok(Prepared::Record(Record::Put {
            v: JOURNAL_VERSION,
            at: None,
            fact,
        }))
    }

    /// The normalised text, after the content, importance, pin and expiry rules.
    fn check_content(&self, req: &WriteRequest) -> Result<String> {
        let text = content::normalize_content(&req.text);
        if text.is_empty() {
            return Err(Error::invalid("text must not be empty"));
        }
        // Refused before any answer (a `NOOP` included) and before the
        // group takes the record; a secret memory may hold one in its
        // content on purpose (needs secret:write).
        if let Some(hit) = request_credential(req, &text) {
            return Err(hit.refusal());
        }
        if text.len() > MAX_TEXT_BYTES {
            return Err(Error::invalid(format!(
                "text is {} bytes; the limit is {MAX_TEXT_BYTES}",
                text.len()
            )));
        }
        if !req.importance.is_finite() || !(0.0..=1.0).contains(&req.importance) {
            return Err(Error::invalid("importance must be between 0 and 1"));
        }
        pins(&self.config).check(req.privacy, &req.scene)?;
        if req.stage == Stage::Long
            && req.expires_at.is_some()
            && !self.config.lifecycle.tier_expiry
        {
            return Err(Error::invalid(
                "long-term memories do not expire (lifecycle.tierExpiry is off); \
                 write a short-term memory (stage short) for something that should expire",
            ));
        }
        Ok(text)
    }

    /// The id an earlier write with the same idempotency key got, if any.
    fn repeated_key(&self, req: &WriteRequest) -> Result<Option<String>> {
        let Some(key) = &req.idempotency_key else {
            return Ok(None);
        };
        if key.is_empty() || key.len() > MAX_FIELD_BYTES {
            return Err(Error::invalid(format!(
                "idempotency_key must be 1-{MAX_FIELD_BYTES} bytes"
            )));
        }
        if let Some(id) = self.keys.get(key) {
            return Ok(Some(id.clone()));
        }
        self.core.index.meta.find_idempotent(key)
    }

    /// The memory a new version replaces must be active (a restore may
    /// replace a forgotten one), and visible under the supersede filter when
    /// one is given, else `NOT_FOUND`; and it must be the newest version of
    /// its line, else `CONFLICT` naming the newest.
    fn check_supersede(&self, req: &WriteRequest) -> Result<()> {
        let Some(old) = &req.supersedes else {
            return Ok(());
        };
        let filter = req.supersede_filter.clone().unwrap_or_else(Filter::all);
        let Some(row) = self.core.index.meta.version_row(old, &filter)? else {
            return Err(Error::not_found("memory", old.clone()));
        };
        let forgotten = row.forgotten || self.forgotten.contains(old);
        if forgotten && !req.restoring {
            return Err(Error::not_found("memory", old.clone()));
        }
        if let Some(next) = self.replaced.get(old).or(row.superseded_by.as_ref()) {
            return Err(self.older_version(old, next, &filter, "supersede")?);
        }
        Ok(())
    }

    /// The `CONFLICT` for an attempt to `verb` `old`, an older version that
    /// `next` replaced: it names the newest version of the line when it is
    /// visible under `filter`, and says how to bring a forgotten one back.
    fn older_version(&self, old: &str, next: &str, filter: &Filter, verb: &str) -> Result<Error> {
        let meta = &self.core.index.meta;
        let head = meta.head_of(next)?;
        let message = match meta.version_row(&head, filter)? {
            // Replaced in this very commit group, by a request that may not be
            // the caller's: named only once it is indexed and visible.
            _ if self.written.contains(&head) => format!(
                "{old} is an older version: a newer version replaced it just now; read it again"
            ),
            Some(row) if row.forgotten || self.forgotten.contains(&head) => format!(
                "{old} is an older version: {head} replaced it and was forgotten; bring a \
                 version back with POST /v1/restore (`memd restore`) instead"
            ),
            Some(_) => format!(
                "{old} is an older version; the newest version is {head}: {verb} {head} instead"
            ),
            None => format!(
                "{old} is an older version, replaced by a newer one this token may not change"
            ),
        };
        Ok(Error::Conflict(message))
    }

    /// Consolidation pins nothing from evidence outside the owner's audiences.
    fn check_consolidation_pin(&self, req: &WriteRequest) -> Result<()> {
        if req.run.is_none() || self.owner_audience(&req.scene) {
            return Ok(());
        }
        if req.kind == "category" || req.tier == Some(Tier::T0) {
            return Err(Error::Forbidden(format!(
                "consolidation may not pin a memory (kind category or tier t0) from evidence \
                 in {}, which is not one of the owner's audiences (privacy.sensitiveAudiences)",
                req.scene
            )));
        }
        Ok(())
    }

    /// One of the owner's own audiences (`privacy.sensitiveAudiences`).
    fn owner_audience(&self, scene: &Scene) -> bool {
        pins(&self.config).sensitive.contains(scene)
    }

    /// Restores a version (see [`RestoreOp`]).
    fn restore(&mut self, op: RestoreOp) -> Result<Restored> {
        let RestoreOp {
            id,
            filter,
            source,
            same_id_only,
        } = op;
        if ids::is_doc_id(&id) {
            return Err(Error::invalid(format!(
                "{id} is a Markdown document; its file under memories/ is the memory"
            )));
        }
        let meta = &self.core.index.meta;
        let Some(row) = meta.version_row(&id, &filter)? else {
            return Err(Error::not_found("memory", id));
        };
        if self.written.contains(&id) || self.replaced.contains_key(&id) {
            return Err(Error::Conflict(format!(
                "{id} changed in a write committed at the same moment; read it again and retry"
            )));
        }
        let forgotten = row.forgotten || self.forgotten.contains(&id);
        if !forgotten && row.superseded_by.is_none() {
            return Ok(Restored::Current);
        }
        if !meta.has_live_successor(&id)? {
            // Nothing later in its line is live: the same id is put again
            // (a forget undone, or every later version forgotten before).
            let extras = meta
                .fact_extras(&id)?
                .ok_or_else(|| Error::not_found("memory", id.clone()))?;
            let mut fact =
                super::lifecycle::fact_from_row(row.memory, extras, self.core.device.clone());
            // The journal files a line by its `ts` month: a restore in a
            // later month takes the restore time, as a rollback's does.
            let now = self.core.now();
            if journal::file_name_for(fact.ts) != journal::file_name_for(now) {
                fact.ts = now;
            }
            fact.validate(&pins(&self.config))?;
            self.written.insert(id);
            self.records.push(Record::Put {
                v: JOURNAL_VERSION,
                at: None,
                fact,
            });
            return Ok(Restored::Same);
        }
        if same_id_only {
            return Ok(Restored::Skipped);
        }
        // A later version is live: the old content becomes the newest version,
        // which needs the right to replace the newest (never named otherwise).
        let head = meta.head_of(&id)?;
        if meta.version_row(&head, &filter)?.is_none() {
            return Err(Error::Conflict(format!(
                "{id} was replaced by a newer version this token may not change"
            )));
        }
        let m = row.memory;
        let mut req = WriteRequest::new(m.scene, m.text, source);
        req.kind = m.kind;
        req.stage = m.stage;
        req.title = m.title;
        req.tags = m.tags;
        req.privacy = m.privacy;
        req.subject = m.subject;
        req.importance = m.importance;
        req.tier = m.tier;
        req.setting = m.setting;
        if req.stage == Stage::Short {
            let ttl = i64::from(self.config.ingest.ttl_hours);
            req.expires_at = Some(self.core.now() + chrono::Duration::hours(ttl));
        }
        req.supersedes = Some(head);
        req.supersede_filter = Some(filter);
        req.restoring = true;
        match self.write(req)? {
            OpOutcome::Written(w) => Ok(Restored::NewVersion(w.id)),
            _ => Err(Error::Internal("a restore answered as another op".into())),
        }
    }

    /// A live long-term memory (or one earlier in the group) with this content hash.
    fn duplicate(&self, hash: &str, now: DateTime<Utc>) -> Result<Option<String>> {
        if let Some(id) = self.hashes.get(hash) {
            return Ok(Some(id.clone()));
        }
        let found = self
            .core
            .index
            .meta
            .with_reader(|c| crate::index::lifecycle::find_by_content(c, hash, now))?;
        Ok(found.filter(|id| !self.forgotten.contains(id)))
    }

    /// The fact a write appends: tier, expiry and a fresh id.
    fn new_fact(&self, req: WriteRequest, text: String, now: DateTime<Utc>) -> Result<Fact> {
        let tier = match req.stage {
            Stage::Long => Some(content::assign_tier(content::TierInput {
                explicit: req.tier,
                category: false,
                source: &req.source,
                kind: &req.kind,
                text: &text,
                tags: &req.tags,
            })),
            Stage::Short => None,
        }
        // What consolidation writes from evidence outside the owner's
        // audiences is never pinned, whatever the words say.
        .map(|t| {
            if t == Tier::T0 && req.run.is_some() && !self.owner_audience(&req.scene) {
                Tier::T1
            } else {
                t
            }
        });
        let ts = req.ts.unwrap_or(now);
        // With tier expiry opted in, a long-term memory lives its tier's days
        // from when it is written; by default only short-term memories expire.
        let expires_at = match (req.expires_at, tier) {
            (Some(e), _) => Some(e),
            (None, Some(t)) => self.config.lifecycle.expiry(t, now),
            (None, None) => None,
        };
        // Ids carry 16 random bits per millisecond, so a large group commit
        // can draw the same one twice: draw again until it is unused.
        let mut id = ids::fact_id(&req.origin, &req.scene, ts);
        while self.written.contains(&id) || self.core.index.meta.fact_state(&id)?.is_some() {
            id = ids::fact_id(&req.origin, &req.scene, ts);
        }
        Ok(Fact {
            id,
            ts,
            scene: req.scene,
            kind: req.kind,
            stage: req.stage,
            text,
            title: req
                .title
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty()),
            tags: req.tags,
            privacy: req.privacy,
            subject: req.subject,
            source: req.source,
            importance: req.importance,
            tier,
            supersedes: req.supersedes,
            expires_at,
            source_message_id: req.source_message_id,
            idempotency_key: req.idempotency_key,
            device: self.core.device.clone(),
            accesses: 0,
            run: req.run,
            setting: req.setting,
        })
    }

    fn check_forget(&self, id: &str, filter: &Filter) -> Result<()> {
        if ids::is_doc_id(id) {
            return Err(Error::invalid(format!(
                "{id} is a Markdown document; edit or delete its file under memories/ instead"
            )));
        }
        if self.forgotten.contains(id) {
            return Err(Error::not_found("memory", id));
        }
        if self.written.contains(id) {
            return Ok(());
        }
        let visible = self.core.index.meta.get_many(&[id.to_string()], filter)?;
        if visible.is_empty() {
            return Err(Error::not_found("memory", id));
        }
        Ok(())
    }

    fn check_import(&self, record: &Record) -> Result<bool> {
        // Refused even when the id is known already (nothing would be appended).
        if let Some(hit) = content::in_record(record) {
            return Err(Error::invalid(format!(
                "{}: {}",
                hit.shown_id(record.id()),
                hit.refusal()
            )));
        }
        match record {
            Record::Put { fact, .. } => {
                fact.validate(&pins(&self.config))?;
                Ok(!self.written.contains(&fact.id)
                    && self.core.index.meta.fact_state(&fact.id)?.is_none())
            }
            Record::Forget { id, .. } => Ok(record.validate(&pins(&self.config)).is_ok()
                && !self.forgotten.contains(id)
                && (self.written.contains(id)
                    || self.core.index.meta.fact_state(id)? == Some(true))),
            // Access counts belong to the root they were counted in, and
            // links to the memories they were found among.
            Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. } => Ok(false),
        }
    }
}
