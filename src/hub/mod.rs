//! The application service: every use-case over store + index, and the single writer.
//!
//! A [`Hub`] opened in write mode holds the root's writer lock, the journal
//! appender and the index writers. Writes from any number of threads go
//! through a commit queue: whichever thread takes the writer mutex drains the
//! whole queue, appends every line, fsyncs once (group commit), then applies
//! the new lines to the index by the same catch-up path that runs on open and
//! on reindex. A write is acknowledged only after its line is durable, and the
//! index always equals a replay of the files.
//!
//! Vectors are computed off the write path (see `vectors.rs`): a write is
//! acknowledged once durable and in the full-text index; memories without a
//! vector are embedded by [`Hub::embed_pending`] in the background and before
//! any semantic or hybrid search. If no embedder can be loaded, memories stay
//! pending and are embedded once one is available.
//!
//! Reads (`search`, `get`, `stats`) take `&self` and run concurrently.

pub mod categories;
mod health;
mod ingest;
mod lifecycle;
mod read;
mod recall;
mod restore;
mod ttl;

pub use health::{Component, HealthReport};
pub use ingest::{IngestAction, IngestOutcome, IngestRequest};
pub use lifecycle::{ArchivedMonth, Clock, EditRequest, TierCount, TierReport};
pub use read::{
    Bootstrap, MAX_PAGE, RecentTitle, Timeline, TimelineEntry, TimelineMonth, TimelineQuery,
    narrow, one_line,
};
pub use recall::{
    RecallHit, RecallOutcome, RecallRequest, recall_query, render_recall_block, render_recent_block,
};
pub use ttl::MAX_SHORT_TTL_HOURS;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, mpsc};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{Config, Layout};
use crate::embed::EmbedderSlot;
use crate::embed::cache::VectorCache;
use crate::error::{Error, IoContext, Result};
use crate::ids;
use crate::index::filter::Filter;
use crate::index::meta::{DocumentRow, FactExtras, MetaCounts};
use crate::index::{Batch, Change, Index};
use crate::model::{
    Fact, JOURNAL_VERSION, MAX_TEXT_BYTES, Memory, Origin, Privacy, Record, Scene, Stage, Subject,
    Tier,
};
use crate::policy;
use crate::store::journal::{self, JournalWriter};
use crate::store::lock::WriterLock;
use crate::store::markdown;

mod vectors;

/// Changes per index commit while catching up.
const CATCH_UP_BATCH: usize = 5000;

/// How a hub opens a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Take the writer lock; fail with `ROOT_LOCKED` if another process has it.
    Write,
    /// Read the existing index without catching up.
    ReadOnly,
    /// Take the writer lock if free, else read what the other writer has indexed.
    ReadPreferWrite,
}

/// Progress of a catch-up or rebuild, for progress bars.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Journal bytes processed so far.
    pub done: u64,
    /// Journal bytes to process in total.
    pub total: u64,
}

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
    pub source: String,
    /// 0–1.
    pub importance: f32,
    /// Retention tier.
    pub tier: Option<Tier>,
    /// The id it replaces.
    pub supersedes: Option<String>,
    /// When it stops being searchable.
    pub expires_at: Option<DateTime<Utc>>,
    /// Ingest key.
    pub source_message_id: Option<String>,
    /// Client idempotency key.
    pub idempotency_key: Option<String>,
    /// When it happened, for imports of older memories; `None` means now.
    pub ts: Option<DateTime<Utc>>,
    /// The consolidation run writing it, if any.
    pub run: Option<String>,
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
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WriteAction {
    /// A new fact was appended.
    Add,
    /// A near-duplicate was found and rewritten (same id, merged tags).
    Update,
    /// An identical earlier write was found; nothing was appended.
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

/// Counts and problems for `memd stats`.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// The root.
    pub root: String,
    /// Index counts.
    #[serde(flatten)]
    pub counts: MetaCounts,
    /// Journal month files.
    pub journal_files: usize,
    /// Journal bytes.
    pub journal_bytes: u64,
    /// Index bytes on disk.
    pub index_bytes: u64,
    /// Documents in the text index (facts + chunks).
    pub text_documents: u64,
    /// Bad journal lines and unreadable documents.
    pub issues: Vec<String>,
    /// Whether this process holds the writer lock.
    pub writer: bool,
    /// Stored vectors (memories searchable semantically).
    pub vectors: u64,
    /// Memories waiting for their vector (embedded in the background).
    pub pending_vectors: u64,
}

/// What opening or a catch-up did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CatchUpReport {
    /// Journal records applied.
    pub records: u64,
    /// Bad lines skipped (each also logged with file:line).
    pub bad_lines: u64,
    /// Memories embedded (from the model or the vector cache).
    pub vectors_stored: u64,
    /// Documents (re)indexed.
    pub documents_indexed: u64,
    /// Documents removed from the index.
    pub documents_removed: u64,
}

enum Op {
    Write(Box<WriteRequest>),
    /// A near-duplicate write folded into an existing fact.
    Merge(Box<WriteRequest>, String),
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

enum OpOutcome {
    Written(WriteOutcome),
    Forgotten,
    Imported(bool),
}

struct Pending {
    op: Op,
    reply: mpsc::Sender<Result<OpOutcome>>,
}

struct WriterState {
    journal: JournalWriter,
    _lock: WriterLock,
}

/// The memory service over one root.
pub struct Hub {
    layout: Layout,
    config: Config,
    index: Index,
    device: String,
    writer: Option<Mutex<WriterState>>,
    queue: Mutex<Vec<Pending>>,
    embedder: EmbedderSlot,
    cache: Option<VectorCache>,
    clock: std::sync::RwLock<Clock>,
    accesses: Mutex<lifecycle::AccessBuffer>,
    track_accesses: std::sync::atomic::AtomicBool,
}

impl Hub {
    /// Opens `layout` with `config`.
    pub fn open(layout: Layout, config: Config, mode: Mode) -> Result<Hub> {
        Self::open_with_progress(layout, config, mode, &mut |_| {}).map(|(hub, _)| hub)
    }

    /// Opens and reports catch-up progress.
    pub fn open_with_progress(
        layout: Layout,
        config: Config,
        mode: Mode,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Hub, CatchUpReport)> {
        let slot = EmbedderSlot::from_config(&config.embedder);
        Self::open_with(layout, config, mode, slot, progress)
    }

    /// Opens with an explicit embedder (a test embedder, or none) instead of the configured model.
    pub fn open_with(
        layout: Layout,
        config: Config,
        mode: Mode,
        embedder: EmbedderSlot,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Hub, CatchUpReport)> {
        let lock = match mode {
            Mode::ReadOnly => None,
            Mode::Write => Some(Self::lock(&layout)?),
            Mode::ReadPreferWrite => match Self::lock(&layout) {
                Ok(l) => Some(l),
                Err(Error::RootLocked { pid, .. }) => {
                    tracing::info!(writer.pid = %pid, "root is locked by another process; reading its index");
                    None
                }
                Err(e) => return Err(e),
            },
        };
        let device = config.device_name();
        let Some(lock) = lock else {
            let index = Index::open(&layout.index(), false)?;
            let hub = Hub {
                layout,
                config,
                index,
                device,
                writer: None,
                queue: Mutex::new(Vec::new()),
                embedder,
                cache: None,
                clock: std::sync::RwLock::new(lifecycle::system_clock()),
                accesses: Mutex::new(Default::default()),
                track_accesses: Default::default(),
            };
            return Ok((hub, CatchUpReport::default()));
        };
        let (journal, repaired) = JournalWriter::open(&layout.facts())?;
        for issue in &repaired {
            tracing::warn!(journal.issue = %issue, "repaired torn journal tail");
        }
        let index = Index::open(&layout.index(), true)?;
        index.set_lifecycle(config.lifecycle.clone());
        let cache_path = layout.cache().join("vectors.db");
        let cache = VectorCache::open(&cache_path)
            .inspect_err(|e| tracing::warn!(error = %e, cache.path = %cache_path.display(), "vector cache unavailable; embedding without it"))
            .ok();
        let hub = Hub {
            layout,
            config,
            index,
            device,
            writer: Some(Mutex::new(WriterState {
                journal,
                _lock: lock,
            })),
            queue: Mutex::new(Vec::new()),
            embedder,
            cache,
            clock: std::sync::RwLock::new(lifecycle::system_clock()),
            accesses: Mutex::new(Default::default()),
            track_accesses: Default::default(),
        };
        let mut report = hub.catch_up(progress)?;
        let docs = hub.sync_documents()?;
        report.documents_indexed = docs.documents_indexed;
        report.documents_removed = docs.documents_removed;
        report.vectors_stored += docs.vectors_stored;
        Ok((hub, report))
    }

    fn lock(layout: &Layout) -> Result<WriterLock> {
        layout.create_dirs()?;
        WriterLock::acquire(&layout.root, &layout.lock())
    }

    /// Deletes the derived index and rebuilds it from the files.
    pub fn reindex(
        layout: Layout,
        config: Config,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Hub, CatchUpReport)> {
        let slot = EmbedderSlot::from_config(&config.embedder);
        Self::reindex_with(layout, config, slot, progress)
    }

    /// [`Hub::reindex`] with an explicit embedder. The vector cache under
    /// `data/cache/` survives, so unchanged memories are not embedded again.
    pub fn reindex_with(
        layout: Layout,
        config: Config,
        embedder: EmbedderSlot,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Hub, CatchUpReport)> {
        let lock = Self::lock(&layout)?;
        let dir = layout.index();
        if dir.exists() {
            std::fs::remove_dir_all(&dir).ctx("cannot remove index", &dir)?;
        }
        drop(lock);
        let (hub, mut report) = Self::open_with(layout, config, Mode::Write, embedder, progress)?;
        // A rebuilt index is complete: every vector is stored (from the cache
        // where the text is unchanged) before reindex reports success.
        report.vectors_stored = hub.embed_pending(usize::MAX);
        Ok((hub, report))
    }

    /// The root layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether this hub holds the writer lock.
    pub fn is_writer(&self) -> bool {
        self.writer.is_some()
    }

    /// Applies journal lines not yet in the index.
    fn catch_up(&self, progress: &mut dyn FnMut(Progress)) -> Result<CatchUpReport> {
        let files = journal::list_all(&self.layout.facts())?;
        self.catch_up_files(&files, progress)
    }

    /// Applies journal lines of `files` not yet in the index.
    fn catch_up_files(
        &self,
        files: &[String],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let dir = self.layout.facts();
        let cursors = self.index.resume_cursors()?;
        let mut sizes = Vec::with_capacity(files.len());
        for f in files {
            sizes.push(journal::content_len(&dir, f)?);
        }
        let mut report = CatchUpReport::default();
        let mut batch = Batch::default();
        let total: u64 = sizes.iter().sum();
        let mut done_before = 0u64;
        for (file, size) in files.iter().zip(sizes) {
            let mut from = cursors.get(file).copied().unwrap_or_default();
            if from.offset > size {
                tracing::warn!(journal.file = %file, "journal file is shorter than the index remembers; re-reading it");
                from = Default::default();
            }
            done_before += from.offset;
            let mut last = from;
            let torn = journal::scan_file(&dir, file, from, |item| {
                match item.entry {
                    Ok(record) => {
                        batch
                            .changes
                            .push(record_change(record, file, item.cursor.lines));
                        report.records += 1;
                    }
                    Err(issue) => {
                        tracing::warn!(journal.issue = %issue, "skipping unreadable journal line");
                        report.bad_lines += 1;
                        batch.issues.push(issue);
                    }
                }
                last = item.cursor;
                if batch.changes.len() >= CATCH_UP_BATCH {
                    batch.cursors.push((file.clone(), last));
                    self.index.apply(&std::mem::take(&mut batch))?;
                    progress(Progress {
                        done: done_before + (last.offset - from.offset),
                        total,
                    });
                }
                Ok(())
            })?;
            if let Some(issue) = torn {
                tracing::warn!(journal.issue = %issue, "journal ends in an incomplete line");
            }
            if last != from {
                batch.cursors.push((file.clone(), last));
            }
            done_before += last.offset - from.offset;
            progress(Progress {
                done: done_before,
                total,
            });
        }
        self.index.apply(&batch)?;
        Ok(report)
    }

    /// Applies journal lines appended by another process (a file sync tool)
    /// since the index last looked.
    pub fn catch_up_journal(&self) -> Result<CatchUpReport> {
        let _guard = self.writer_state()?;
        self.catch_up(&mut |_| {})
    }

    /// Brings the index in line with the Markdown documents on disk.
    pub fn sync_documents(&self) -> Result<CatchUpReport> {
        let _guard = self.writer_state()?;
        let memories = self.layout.memories();
        let known = self.index.meta.documents()?;
        let paths = markdown::list_documents(&memories)?;
        let on_disk: HashSet<&str> = paths.iter().map(String::as_str).collect();
        let mut report = CatchUpReport::default();
        let mut batch = Batch::default();
        for rel in &paths {
            let path = memories.join(rel);
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(doc.path = %rel, error = %e, "cannot read document");
                    continue;
                }
            };
            if known
                .get(rel)
                .is_some_and(|row| row.hash == ids::sha256_hex(&bytes))
            {
                continue;
            }
            match markdown::load(&memories, rel, &self.config.docs) {
                Ok(doc) => {
                    let chunks = document_chunks(&doc);
                    batch.changes.push(Change::PutDocument {
                        row: DocumentRow {
                            doc_id: doc.doc_id.clone(),
                            path: doc.rel_path.clone(),
                            hash: doc.hash.clone(),
                            title: doc.title.clone(),
                            chunks: chunks.len(),
                        },
                        chunks,
                    });
                    report.documents_indexed += 1;
                }
                Err(e) => {
                    tracing::warn!(doc.path = %rel, error = %e, "document not indexed");
                    batch.changes.push(Change::RemoveDocument {
                        doc_id: ids::doc_id(rel),
                        path: rel.clone(),
                        issue: Some(e.to_string()),
                    });
                }
            }
        }
        for (path, row) in &known {
            if !on_disk.contains(path.as_str()) {
                batch.changes.push(Change::RemoveDocument {
                    doc_id: row.doc_id.clone(),
                    path: path.clone(),
                    issue: None,
                });
                report.documents_removed += 1;
            }
        }
        self.index.apply(&batch)?;
        Ok(report)
    }

    fn locked_error(&self) -> Error {
        Error::RootLocked {
            root: self.layout.root.clone(),
            pid: std::fs::read_to_string(self.layout.lock())
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }

    fn writer_state(&self) -> Result<std::sync::MutexGuard<'_, WriterState>> {
        let w = self.writer.as_ref().ok_or_else(|| self.locked_error())?;
        Ok(w.lock().expect("writer state poisoned"))
    }

    /// Writes one memory. Returns after its journal line is fsync'd and indexed.
    ///
    /// Long-term writes are deduplicated: an exact duplicate of a live memory
    /// (same scene, kind, normalised text, privacy and subject) answers
    /// `NOOP` with its id; with an embedder loaded, a near-duplicate answers
    /// `NOOP` or is folded into the existing memory (`UPDATE`) by the
    /// per-tier thresholds of [`crate::lifecycle::LifecycleConfig::dedup_thresholds`].
    pub fn write(&self, req: WriteRequest) -> Result<WriteOutcome> {
        self.write_dedup(req)
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
    fn submit(&self, op: Op) -> Result<OpOutcome> {
        self.submit_many(vec![op])?
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no answer for a queued operation".into())))
    }

    /// Queues `ops` together; they are committed in the same group.
    fn submit_many(&self, ops: Vec<Op>) -> Result<Vec<Result<OpOutcome>>> {
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
                        Err(Error::NotFound(fact.id.clone()))
                    } else {
                        written_in_batch.insert(fact.id.clone());
                        let id = fact.id.clone();
                        records.push(Record::Put {
                            v: JOURNAL_VERSION,
                            fact: *fact,
                        });
                        Ok(OpOutcome::Written(WriteOutcome {
                            id,
                            action: WriteAction::Update,
                        }))
                    }
                }
                Op::Merge(req, into) => {
                    self.prepare_merge(*req, &into, &forgotten_in_batch)
                        .map(|fact| {
                            written_in_batch.insert(fact.id.clone());
                            let id = fact.id.clone();
                            records.push(Record::Put {
                                v: JOURNAL_VERSION,
                                fact,
                            });
                            OpOutcome::Written(WriteOutcome {
                                id,
                                action: WriteAction::Update,
                            })
                        })
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
                (Err(e), Ok(_)) => Err(Error::Internal(format!("write not stored: {e}"))),
                (_, outcome) => outcome,
            };
            // A caller that went away does not need its answer.
            let _ = reply.send(answer);
        }
    }

    fn append_and_index(&self, state: &mut WriterState, records: &[Record]) -> Result<()> {
        let ends = match state.journal.append(records) {
            Ok(ends) => ends,
            Err(e) => {
                tracing::error!(error = %e, "journal append failed; reopening the journal");
                // Reopening terminates any torn tail left by the failed append.
                if let Ok((journal, _)) = JournalWriter::open(&self.layout.facts()) {
                    state.journal = journal;
                }
                return Err(e);
            }
        };
        // The lines are durable from here on; indexing them is the same replay
        // that runs at startup, so a failure below is repaired on the next open.
        let touched: Vec<String> = ends.into_keys().collect();
        if let Err(e) = self.catch_up_files(&touched, &mut |_| {}) {
            tracing::error!(error = %e, "indexing after append failed; the next open catches up");
        }
        Ok(())
    }

    fn prepare_write(
        &self,
        req: WriteRequest,
        keys_in_batch: &HashMap<String, String>,
        hashes_in_batch: &mut HashMap<String, String>,
        written_in_batch: &HashSet<String>,
        forgotten_in_batch: &HashSet<String>,
    ) -> Result<Prepared> {
        let text = policy::normalize_content(&req.text);
        if text.is_empty() {
            return Err(Error::invalid("text must not be empty"));
        }
        if let Some(what) = policy::detect_credential(&text) {
            return Err(Error::invalid(format!(
                "content appears to contain {what}; memories are kept in an append-only journal, \
                 so credentials are refused. Remove the secret and write again"
            )));
        }
        if text.len() > MAX_TEXT_BYTES {
            return Err(Error::invalid(format!(
                "text is {} bytes; the limit is {MAX_TEXT_BYTES}",
                text.len()
            )));
        }
        if !(0.0..=1.0).contains(&req.importance) || req.importance.is_nan() {
            return Err(Error::invalid("importance must be between 0 and 1"));
        }
        self.check_pinned(req.privacy, &req.scene)?;
        if let Some(key) = &req.idempotency_key {
            if key.is_empty() || key.len() > 200 {
                return Err(Error::invalid("idempotency_key must be 1-200 bytes"));
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
            return Err(Error::NotFound(old.clone()));
        }
        if req.title.as_ref().is_some_and(|t| t.len() > 300) {
            return Err(Error::invalid("title must be at most 300 bytes"));
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
            Stage::Long => Some(policy::assign_tier(policy::TierInput {
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
        // A long-term memory lives its tier's days from when it is written.
        let expires_at = match (req.expires_at, tier) {
            (Some(e), _) => Some(e),
            (None, Some(t)) => self.config.lifecycle.expiry(t, now),
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
        };
        if let Some(h) = hash {
            hashes_in_batch.insert(h, fact.id.clone());
        }
        Ok(Prepared::Record(Record::Put {
            v: JOURNAL_VERSION,
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
            return Err(Error::NotFound(id.to_string()));
        }
        if written_in_batch.contains(id) {
            return Ok(());
        }
        let visible = self.index.meta.get_many(&[id.to_string()], filter)?;
        if visible.is_empty() {
            return Err(Error::NotFound(id.to_string()));
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
                if fact.id.is_empty() || fact.id.len() > 200 || ids::is_doc_id(&fact.id) {
                    return Err(Error::invalid(format!("{:?} is not a fact id", fact.id)));
                }
                if policy::normalize_content(&fact.text).is_empty() {
                    return Err(Error::invalid(format!(
                        "{}: text must not be empty",
                        fact.id
                    )));
                }
                self.check_pinned(fact.privacy, &fact.scene)?;
                Ok(!written_in_batch.contains(&fact.id)
                    && self.index.meta.fact_state(&fact.id)?.is_none())
            }
            Record::Forget { id, .. } => Ok(!forgotten_in_batch.contains(id)
                && (written_in_batch.contains(id)
                    || self.index.meta.fact_state(id)? == Some(true))),
            // Access counts belong to the root they were counted in.
            Record::Touch { .. } => Ok(false),
        }
    }

    /// Refuses sensitive and secret memories outside their pinned audiences.
    fn check_pinned(&self, privacy: Privacy, scene: &Scene) -> Result<()> {
        let pinned = match privacy {
            Privacy::Sensitive => Some(("sensitive", &self.config.privacy.sensitive_audiences)),
            Privacy::Secret => Some(("secret", &self.config.privacy.secret_audiences)),
            _ => None,
        };
        if let Some((name, allowed)) = pinned
            && !allowed.contains(scene)
        {
            let list: Vec<&str> = allowed.iter().map(Scene::as_str).collect();
            return Err(Error::invalid(format!(
                "{name} memories may only live in [{}]; scene {scene} is not one of them",
                list.join(", "),
            )));
        }
        Ok(())
    }

    /// Commits pending index changes so that every reader sees them. Searches
    /// do this by themselves; a server also calls it on a timer so that other
    /// processes reading the index see recent writes.
    pub fn flush(&self) -> Result<()> {
        if self.writer.is_some() {
            self.index.refresh()?;
        }
        Ok(())
    }

    /// One memory by fact id, chunk id or document id, if visible under `filter`.
    ///
    /// A document id returns the whole document: its visible chunks joined.
    pub fn get(&self, id: &str, filter: &Filter) -> Result<Memory> {
        if ids::is_doc_id(id) && !id.contains('#') {
            let chunks = self.index.meta.doc_chunks(id, filter)?;
            let first = chunks
                .first()
                .cloned()
                .ok_or_else(|| Error::NotFound(id.to_string()))?;
            let text = chunks
                .iter()
                .map(|c| c.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            let title = first
                .title
                .as_deref()
                .map(|t| t.split(" › ").next().unwrap_or(t).to_string());
            return Ok(Memory {
                id: id.to_string(),
                text,
                title,
                ..first
            });
        }
        let m = self
            .index
            .meta
            .get_many(&[id.to_string()], filter)?
            .remove(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        self.note_access([&m]);
        Ok(m)
    }

    /// Counts, sizes and problems.
    pub fn stats(&self) -> Result<Stats> {
        self.flush()?;
        let dir = self.layout.facts();
        let files = journal::list_files(&dir)?;
        let journal_bytes = files
            .iter()
            .map(|f| std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0))
            .sum();
        Ok(Stats {
            root: self.layout.root.display().to_string(),
            counts: self.index.meta.counts()?,
            journal_files: files.len(),
            journal_bytes,
            index_bytes: self.index.disk_bytes(),
            text_documents: self.index.text.num_docs(),
            issues: self.index.meta.issues()?,
            writer: self.is_writer(),
            vectors: self.index.vector_count()?,
            pending_vectors: self.index.vectors_pending_count()?,
        })
    }

    /// The index (read access for other modules).
    pub fn index(&self) -> &Index {
        &self.index
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Err(e) = self.flush_accesses(true) {
            tracing::warn!(error = %e, "could not journal buffered accesses on close");
        }
        if let Err(e) = self.flush() {
            tracing::warn!(error = %e, "could not commit the text index on close; the next open catches up");
        }
    }
}

enum Prepared {
    Existing(String),
    Record(Record),
}

/// A fact rebuilt from its index row, to be written again with the same id
/// (an edit or a TTL extension). `device` is the one recorded on the new line;
/// the new line belongs to no consolidation run.
fn fact_from_row(m: Memory, extras: FactExtras, device: String) -> Fact {
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
    }
}

fn record_change(record: Record, file: &str, line: u64) -> Change {
    match record {
        Record::Put { fact, .. } => Change::PutFact {
            memory: Memory::from(&fact),
            extras: FactExtras {
                content_hash: (fact.stage == Stage::Long).then(|| {
                    crate::lifecycle::content_hash(
                        &fact.scene,
                        &fact.kind,
                        &fact.text,
                        fact.privacy,
                        fact.subject,
                    )
                }),
                accesses: fact.accesses,
                source_message_id: fact.source_message_id,
                idempotency_key: fact.idempotency_key,
                device: fact.device,
                journal: Some((file.to_string(), line)),
            },
        },
        Record::Forget { id, ts, .. } => Change::Forget { id, at: ts },
        Record::Touch { ids, ts, .. } => Change::Touch { ids, at: ts },
    }
}

fn document_chunks(doc: &markdown::Document) -> Vec<Memory> {
    doc.chunks
        .iter()
        .map(|c| Memory {
            id: ids::chunk_id(&doc.doc_id, c.ord),
            origin: Origin::Doc,
            doc_id: Some(doc.doc_id.clone()),
            path: Some(doc.rel_path.clone()),
            ts: doc.modified,
            scene: doc.scene.clone(),
            kind: doc.kind.clone(),
            stage: Stage::Long,
            title: Some(match &c.heading {
                Some(h) if *h != doc.title => format!("{} › {h}", doc.title),
                _ => doc.title.clone(),
            }),
            text: c.text.clone(),
            tags: doc.tags.clone(),
            privacy: doc.privacy,
            subject: doc.subject,
            source: "doc".into(),
            importance: doc.importance,
            tier: doc.tier,
            supersedes: None,
            expires_at: None,
        })
        .collect()
}
