//! The single writer: the commit queue, group commit and the write rules.
//!
//! Writes from any number of threads are queued; whichever thread takes the
//! writer mutex drains the whole queue, checks every operation against the
//! index (and against the others in the same group), appends every line and
//! fsyncs once, then applies the new lines to the index by the same catch-up
//! path that runs on open ([`super::replay`]). Every caller gets its own answer.
//!
//! The write rules:
//! - Every fact that enters, whatever the path (write, ingest, import,
//!   consolidation, a rewrite), meets [`Fact::validate`]; replay applies the
//!   same check to lines it reads from disk.
//! - Dedup is exact only: a long-term write with the same scene, kind,
//!   normalised text, privacy and subject as a live memory answers `NOOP` with
//!   its id, and so does a repeated idempotency key (callers namespace keys:
//!   HTTP by token and scene, ingest by scene and message). Near-duplicates
//!   are never merged or dropped on write: two different statements are two
//!   memories; folding them is consolidation's job (reported, rollbackable).
//! - Only short-term memories carry an expiry unless `lifecycle.tierExpiry`
//!   opts into tier expiry.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Hub;
use crate::content;
use crate::error::{Error, Result};
use crate::ids;
use crate::index::filter::Filter;
use crate::model::{
    Fact, JOURNAL_VERSION, MAX_FIELD_BYTES, MAX_TEXT_BYTES, Pins, Privacy, Record, Scene, Stage,
    Subject, Tier,
};
use crate::store::journal::JournalWriter;
use crate::store::lock::WriterLock;

/// A new memory to write. Build with [`WriteRequest::new`] and set what differs.
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
    /// When it stops being searchable: short-term memories only, unless
    /// `lifecycle.tierExpiry` is on (a long-term write with an expiry is
    /// refused otherwise, since it would replay as non-expiring).
    pub expires_at: Option<DateTime<Utc>>,
    /// Ingest key.
    pub(crate) source_message_id: Option<String>,
    /// Client idempotency key, already namespaced by the caller (HTTP uses
    /// `w|<token>|<scene>|<key>`), so one caller can never answer for another.
    pub idempotency_key: Option<String>,
    /// When it happened, for imports of older memories; `None` means now.
    pub ts: Option<DateTime<Utc>>,
    /// The consolidation run writing it, if any.
    pub(crate) run: Option<String>,
    /// Event time, session and speaker (see [`crate::model::Setting`]).
    pub setting: crate::model::Setting,
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
            expires_at: None,
            source_message_id: None,
            idempotency_key: None,
            ts: None,
            run: None,
            setting: Default::default(),
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteOutcome {
    /// The fact id (new or existing).
    pub id: String,
    /// What happened.
    pub action: WriteAction,
}

pub(super) enum Op {
    Write(Box<WriteRequest>),
    /// Rewrite an existing fact (tags, importance): a new `put` with the same id.
    Rewrite(Box<Fact>),
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
}

pub(super) enum OpOutcome {
    Written(WriteOutcome),
    Forgotten,
    Imported(bool),
}

pub(super) struct Pending {
    op: Op,
    reply: mpsc::Sender<Result<OpOutcome>>,
}

pub(super) struct WriterState {
    pub(super) journal: JournalWriter,
    pub(super) _lock: WriterLock,
}

impl Hub {
    pub(super) fn locked_error(&self) -> Error {
        Error::RootLocked {
            root: self.layout.root.clone(),
            pid: std::fs::read_to_string(self.layout.lock())
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }

    pub(super) fn writer_state(&self) -> Result<std::sync::MutexGuard<'_, WriterState>> {
        let w = self.writer.as_ref().ok_or_else(|| self.locked_error())?;
        Ok(w.lock().expect("writer state poisoned"))
    }

    /// Writes one memory. Returns after its journal line is fsync'd and indexed.
    ///
    /// Dedup is exact only (see the module docs): an exact duplicate of a
    /// live long-term memory or a repeated idempotency key answers `NOOP` with
    /// the existing id; anything else is a new memory (`ADD`), however similar.
    pub fn write(&self, req: WriteRequest) -> Result<WriteOutcome> {
        match self.submit(Op::Write(Box::new(req)))? {
            OpOutcome::Written(w) => Ok(w),
            _ => Err(Error::Internal("write answered as another op".into())),
        }
    }

    /// Where sensitive and secret memories may live under `config` (a
    /// snapshot from [`Hub::config`]).
    pub(super) fn pins(config: &crate::config::Config) -> Pins<'_> {
        Pins {
            sensitive: &config.privacy.sensitive_audiences,
            secret: &config.privacy.secret_audiences,
        }
    }

    /// Forgets a fact visible under `filter` by appending a tombstone.
    pub fn forget(
        &self,
        id: &str,
        reason: Option<String>,
        source: &str,
        filter: &Filter,
    ) -> Result<()> {
        self.submit(Op::Forget {
            id: id.to_string(),
            reason,
            source: source.to_string(),
            filter: filter.clone(),
        })
        .map(|_| ())
    }

    /// Writes many memories as one group: one fsync, one index update.
    /// Each request succeeds or fails on its own.
    pub fn write_batch(&self, reqs: Vec<WriteRequest>) -> Result<Vec<Result<WriteOutcome>>> {
        let ops = reqs.into_iter().map(|r| Op::Write(Box::new(r))).collect();
        Ok(self
            .submit_many(ops)?
            .into_iter()
            .map(|r| match r? {
                OpOutcome::Written(w) => Ok(w),
                _ => Err(Error::Internal("write answered as another op".into())),
            })
            .collect())
    }

    /// Appends records taken from another root's journal, keeping their ids and
    /// times. A `put` whose id is already known, or a `forget` of an id that is
    /// not active, is skipped (`Ok(false)`), so importing twice changes nothing.
    pub fn import_records(&self, records: Vec<Record>) -> Result<Vec<Result<bool>>> {
        let ops = records.into_iter().map(Op::Import).collect();
        Ok(self
            .submit_many(ops)?
            .into_iter()
            .map(|r| match r? {
                OpOutcome::Imported(appended) => Ok(appended),
                _ => Err(Error::Internal("import answered as another op".into())),
            })
            .collect())
    }

    /// Queues `op`; the thread that gets the writer commits everything queued.
    pub(super) fn submit(&self, op: Op) -> Result<OpOutcome> {
        self.submit_many(vec![op])?
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no answer for a queued operation".into())))
    }

    /// Queues `ops` together; they are committed in the same group.
    pub(super) fn submit_many(&self, ops: Vec<Op>) -> Result<Vec<Result<OpOutcome>>> {
        if self.writer.is_none() {
            return Err(self.locked_error());
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
            let mut state = self.writer_state()?;
            let batch = std::mem::take(&mut *self.queue.lock().expect("queue poisoned"));
            if !batch.is_empty() {
                self.commit(&mut state, batch);
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
    fn commit(&self, state: &mut WriterState, batch: Vec<Pending>) {
        let mut records = Vec::new();
        let mut answers: Vec<(mpsc::Sender<Result<OpOutcome>>, Result<OpOutcome>)> = Vec::new();
        let mut keys_in_batch: HashMap<String, String> = HashMap::new();
        let mut written_in_batch: HashSet<String> = HashSet::new();
        let mut forgotten_in_batch: HashSet<String> = HashSet::new();
        if let Some(touch) = self.take_touch_record() {
            records.push(touch);
        }
        let mut hashes_in_batch: HashMap<String, String> = HashMap::new();
        for Pending { op, reply } in batch {
            let outcome = match op {
                Op::Touch(record) => {
                    records.push(record);
                    Ok(OpOutcome::Imported(true))
                }
                Op::Rewrite(fact) => {
                    if forgotten_in_batch.contains(&fact.id)
                        || self.index.meta.fact_state(&fact.id).ok().flatten() != Some(true)
                    {
                        Err(Error::not_found("memory", fact.id.clone()))
                    } else if let Err(e) = fact.validate(&Self::pins(&self.config())) {
                        Err(e)
                    } else {
                        written_in_batch.insert(fact.id.clone());
                        let id = fact.id.clone();
                        records.push(Record::Put {
                            v: JOURNAL_VERSION,
                            at: None,
                            fact: *fact,
                        });
                        Ok(OpOutcome::Written(WriteOutcome {
                            id,
                            action: WriteAction::Update,
                        }))
                    }
                }
                Op::Write(req) => self
                    .prepare_write(
                        *req,
                        &keys_in_batch,
                        &mut hashes_in_batch,
                        &written_in_batch,
                        &forgotten_in_batch,
                    )
                    .map(|prepared| match prepared {
                        Prepared::Existing(id) => OpOutcome::Written(WriteOutcome {
                            id,
                            action: WriteAction::Noop,
                        }),
                        Prepared::Record(record) => {
                            let id = record.id().to_string();
                            if let Record::Put { fact, .. } = &record
                                && let Some(k) = &fact.idempotency_key
                            {
                                keys_in_batch.insert(k.clone(), id.clone());
                            }
                            written_in_batch.insert(id.clone());
                            records.push(record);
                            OpOutcome::Written(WriteOutcome {
                                id,
                                action: WriteAction::Add,
                            })
                        }
                    }),
                Op::Forget {
                    id,
                    reason,
                    source,
                    filter,
                } => self
                    .prepare_forget(&id, &filter, &written_in_batch, &forgotten_in_batch)
                    .map(|()| {
                        forgotten_in_batch.insert(id.clone());
                        records.push(Record::Forget {
                            v: JOURNAL_VERSION,
                            id,
                            ts: self.now(),
                            reason,
                            source,
                        });
                        OpOutcome::Forgotten
                    }),
                Op::Import(record) => self
                    .prepare_import(&record, &written_in_batch, &forgotten_in_batch)
                    .map(|append| {
                        if append {
                            match &record {
                                Record::Put { fact, .. } => {
                                    written_in_batch.insert(fact.id.clone())
                                }
                                Record::Forget { id, .. } => forgotten_in_batch.insert(id.clone()),
                                Record::Touch { .. } => false,
                            };
                            records.push(record);
                        }
                        OpOutcome::Imported(append)
                    }),
            };
            answers.push((reply, outcome));
        }
        let durable = if records.is_empty() {
            Ok(())
        } else {
            self.append_and_index(state, &records)
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

    pub(super) fn append_and_index(
        &self,
        state: &mut WriterState,
        records: &[Record],
    ) -> Result<()> {
        let records = self.stamp(records)?;
        // A failed append is rolled back by the journal: nothing of the group is stored.
        let ends = state.journal.append(&records)?;
        // The lines are durable from here on; indexing them is the same replay
        // that runs at startup. If it fails (a full disk), the index is marked
        // behind and catches up on the next commit or flush.
        let indexed = if self.index.behind().is_some() {
            self.recover_index()
        } else {
            let touched: Vec<String> = ends.into_keys().collect();
            self.catch_up_files(&touched, &mut |_| {}).map(|_| ())
        };
        if let Err(e) = indexed {
            tracing::error!(error = %e, "indexing after append failed; the index catches up once storage works again");
        }
        Ok(())
    }

    /// Stamps records for the merge rules ([`crate::index::merge`]): a `put`
    /// gets `at` = now, but at least one millisecond after the newest put or
    /// forget of its id this device knows (in the index or earlier in the
    /// group); a `forget` gets a `ts` no earlier than that. A clock that went
    /// backwards cannot make a line lose to one its device wrote before.
    fn stamp(&self, records: &[Record]) -> Result<Vec<Record>> {
        let mut floors: HashMap<String, i64> = HashMap::new();
        let mut out = Vec::with_capacity(records.len());
        for r in records {
            let mut r = r.clone();
            if matches!(r, Record::Touch { .. }) {
                out.push(r);
                continue;
            }
            let floor = match floors.get(r.id()) {
                Some(f) => Some(*f),
                None => self
                    .index
                    .meta
                    .with_reader(|c| crate::index::merge::floor(c, r.id()))?,
            };
            match &mut r {
                Record::Put { at, fact, .. } => {
                    // Milliseconds, as the index compares them.
                    let mut ms = self.now().timestamp_millis();
                    if let Some(f) = floor {
                        ms = ms.max(f + 1);
                    }
                    let when =
                        chrono::DateTime::from_timestamp_millis(ms).unwrap_or_else(|| self.now());
                    floors.insert(fact.id.clone(), when.timestamp_millis());
                    *at = Some(when);
                }
                Record::Forget { id, ts, .. } => {
                    if let Some(f) = floor
                        && ts.timestamp_millis() < f
                        && let Some(next) = chrono::DateTime::from_timestamp_millis(f)
                    {
                        *ts = next;
                    }
                    floors.insert(id.clone(), ts.timestamp_millis());
                }
                Record::Touch { .. } => {}
            }
            out.push(r);
        }
        Ok(out)
    }

    fn prepare_write(
        &self,
        req: WriteRequest,
        keys_in_batch: &HashMap<String, String>,
        hashes_in_batch: &mut HashMap<String, String>,
        written_in_batch: &HashSet<String>,
        forgotten_in_batch: &HashSet<String>,
    ) -> Result<Prepared> {
        let text = content::normalize_content(&req.text);
        if text.is_empty() {
            return Err(Error::invalid("text must not be empty"));
        }
        // A secret memory may hold a credential on purpose (needs secret:write).
        if req.privacy != Privacy::Secret
            && let Some((field, what)) =
                content::detect_credential_in(&text, req.title.as_deref(), &req.tags)
        {
            return Err(content::credential_refusal(field, what));
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
        self.check_pinned(req.privacy, &req.scene)?;
        if req.stage == Stage::Long
            && req.expires_at.is_some()
            && !self.config().lifecycle.tier_expiry
        {
            return Err(Error::invalid(
                "long-term memories do not expire (lifecycle.tierExpiry is off); \
                 write a short-term memory (stage short) for something that should expire",
            ));
        }
        if let Some(key) = &req.idempotency_key {
            if key.is_empty() || key.len() > MAX_FIELD_BYTES {
                return Err(Error::invalid(format!(
                    "idempotency_key must be 1-{MAX_FIELD_BYTES} bytes"
                )));
            }
            if let Some(id) = keys_in_batch.get(key) {
                return Ok(Prepared::Existing(id.clone()));
            }
            if let Some(id) = self.index.meta.find_idempotent(key)? {
                return Ok(Prepared::Existing(id));
            }
        }
        if let Some(old) = &req.supersedes
            && (self.index.meta.fact_state(old)? != Some(true) || forgotten_in_batch.contains(old))
        {
            return Err(Error::not_found("memory", old.clone()));
        }
        let now = self.now();
        // Exact duplicates of a live long-term memory reuse its id (NOOP).
        let hash = (req.stage == Stage::Long).then(|| {
            crate::lifecycle::content_hash(&req.scene, &req.kind, &text, req.privacy, req.subject)
        });
        if let Some(h) = &hash {
            if let Some(id) = hashes_in_batch.get(h) {
                return Ok(Prepared::Existing(id.clone()));
            }
            if let Some(id) = self
                .index
                .meta
                .with_reader(|c| crate::index::lifecycle::find_by_content(c, h, now))?
                && !forgotten_in_batch.contains(&id)
            {
                return Ok(Prepared::Existing(id));
            }
        }
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
        };
        let ts = req.ts.unwrap_or(now);
        // With tier expiry opted in, a long-term memory lives its tier's days
        // from when it is written; by default only short-term memories expire.
        let expires_at = match (req.expires_at, tier) {
            (Some(e), _) => Some(e),
            (None, Some(t)) => self.config().lifecycle.expiry(t, now),
            (None, None) => None,
        };
        // Ids carry 16 random bits per millisecond, so a large group commit
        // can draw the same one twice: draw again until it is unused.
        let mut id = ids::fact_id(&req.origin, &req.scene, ts);
        while written_in_batch.contains(&id) || self.index.meta.fact_state(&id)?.is_some() {
            id = ids::fact_id(&req.origin, &req.scene, ts);
        }
        let fact = Fact {
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
            device: self.device.clone(),
            accesses: 0,
            run: req.run,
            setting: req.setting,
        };
        fact.validate(&Self::pins(&self.config()))?;
        if let Some(h) = hash {
            hashes_in_batch.insert(h, fact.id.clone());
        }
        Ok(Prepared::Record(Record::Put {
            v: JOURNAL_VERSION,
            at: None,
            fact,
        }))
    }

    fn prepare_forget(
        &self,
        id: &str,
        filter: &Filter,
        written_in_batch: &HashSet<String>,
        forgotten_in_batch: &HashSet<String>,
    ) -> Result<()> {
        if ids::is_doc_id(id) {
            return Err(Error::invalid(format!(
                "{id} is a Markdown document; edit or delete its file under memories/ instead"
            )));
        }
        if forgotten_in_batch.contains(id) {
            return Err(Error::not_found("memory", id));
        }
        if written_in_batch.contains(id) {
            return Ok(());
        }
        let visible = self.index.meta.get_many(&[id.to_string()], filter)?;
        if visible.is_empty() {
            return Err(Error::not_found("memory", id));
        }
        Ok(())
    }

    fn prepare_import(
        &self,
        record: &Record,
        written_in_batch: &HashSet<String>,
        forgotten_in_batch: &HashSet<String>,
    ) -> Result<bool> {
        match record {
            Record::Put { fact, .. } => {
                fact.validate(&Self::pins(&self.config()))?;
                if fact.privacy != Privacy::Secret
                    && let Some((field, what)) =
                        content::detect_credential_in(&fact.text, fact.title.as_deref(), &fact.tags)
                {
                    return Err(Error::invalid(format!(
                        "{}: {}",
                        fact.id,
                        content::credential_refusal(field, what)
                    )));
                }
                Ok(!written_in_batch.contains(&fact.id)
                    && self.index.meta.fact_state(&fact.id)?.is_none())
            }
            Record::Forget { id, .. } => Ok(record.validate(&Self::pins(&self.config())).is_ok()
                && !forgotten_in_batch.contains(id)
                && (written_in_batch.contains(id)
                    || self.index.meta.fact_state(id)? == Some(true))),
            // Access counts belong to the root they were counted in.
            Record::Touch { .. } => Ok(false),
        }
    }

    /// Refuses sensitive and secret memories outside their pinned audiences.
    pub(super) fn check_pinned(&self, privacy: Privacy, scene: &Scene) -> Result<()> {
        Self::pins(&self.config()).check(privacy, scene)
    }
}

enum Prepared {
    Existing(String),
    Record(Record),
}
