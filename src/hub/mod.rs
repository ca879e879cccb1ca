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
mod gate;
mod heal;
pub mod health;
mod ingest;
mod lifecycle;
mod read;
mod recall;
mod replay;
mod restore;
mod ttl;
mod writer;

pub use health::{Component, HealthReport};
pub use ingest::{IngestAction, IngestOutcome, IngestRequest};
pub use lifecycle::{ArchivedMonth, Clock, EditRequest, TierCount, TierReport};
pub use read::TimelineQuery;
pub(crate) use read::{narrow, one_line};
pub use recall::RecallRequest;
pub(crate) use recall::render_recent_block;
pub use replay::{CatchUpReport, Progress};
pub use ttl::MAX_SHORT_TTL_HOURS;
use writer::{Pending, WriterState};
pub use writer::{WriteAction, WriteOutcome, WriteRequest};

use std::sync::Mutex;

use serde::Serialize;

use crate::config::{Config, Layout};
use crate::embed::EmbedderSlot;
use crate::embed::cache::VectorCache;
use crate::error::{Error, IoContext, Result};
use crate::ids;
use crate::index::Index;
use crate::index::filter::Filter;
use crate::index::meta::{FactExtras, MetaCounts};
use crate::model::{Fact, Memory};
use crate::store::journal::{self, JournalWriter};
use crate::store::lock::WriterLock;

mod vectors;

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

/// Counts and problems for `memd stats`.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// The root.
    pub(crate) root: String,
    /// Index counts.
    #[serde(flatten)]
    pub counts: MetaCounts,
    /// Journal month files.
    pub journal_files: usize,
    /// Journal bytes.
    pub(crate) journal_bytes: u64,
    /// Index bytes on disk.
    pub(crate) index_bytes: u64,
    /// Documents in the text index (facts + chunks).
    pub text_documents: u64,
    /// Bad journal lines and unreadable documents.
    pub issues: Vec<String>,
    /// Whether this process holds the writer lock.
    pub(crate) writer: bool,
    /// Stored vectors (memories searchable semantically).
    pub vectors: u64,
    /// Memories waiting for their vector (embedded in the background).
    pub(crate) pending_vectors: u64,
}

/// The memory service over one root.
pub struct Hub {
    layout: Layout,
    /// The one live configuration: a read is an `Arc` clone, a reload swaps it.
    config: std::sync::RwLock<std::sync::Arc<Config>>,
    index: Index,
    device: String,
    writer: Option<Mutex<WriterState>>,
    queue: Mutex<Vec<Pending>>,
    /// Shared with the thread that loads the model in the background.
    embedder: std::sync::Arc<EmbedderSlot>,
    cache: Option<VectorCache>,
    clock: std::sync::RwLock<Clock>,
    accesses: Mutex<lifecycle::AccessBuffer>,
    track_accesses: std::sync::atomic::AtomicBool,
    index_state: Mutex<heal::IndexState>,
    doc_stamps: Mutex<replay::DocStamps>,
    /// Admits about one search per core, in arrival order (see `gate.rs`).
    search_gate: gate::Gate,
}

impl Hub {
    /// Opens `layout` with `config`.
    pub fn open(layout: Layout, config: Config, mode: Mode) -> Result<Hub> {
        Self::open_with_progress(layout, config, mode, &mut |_| {}).map(|(hub, _)| hub)
    }

    /// Opens and reports catch-up progress.
    pub(crate) fn open_with_progress(
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
        let (hub, report) = Self::open_inner(layout, config, mode, embedder, progress)?;
        hub.index.end_bulk_load()?;
        Ok((hub, report))
    }

    /// [`Hub::open_with`] without ending the bulk load of a new index
    /// ([`crate::index::Index::end_bulk_load`]): the caller does, once it
    /// has loaded what it wants to load in bulk.
    fn open_inner(
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
        let device = crate::store::device::resolve(&layout, &config.device, lock.is_some())?;
        let Some(lock) = lock else {
            let index = Index::open(&layout.index(), false)?;
            let hub = Hub {
                layout,
                config: std::sync::RwLock::new(std::sync::Arc::new(config)),
                index,
                device,
                writer: None,
                queue: Mutex::new(Vec::new()),
                embedder: std::sync::Arc::new(embedder),
                cache: None,
                clock: std::sync::RwLock::new(lifecycle::system_clock()),
                accesses: Mutex::new(Default::default()),
                track_accesses: Default::default(),
                index_state: Default::default(),
                doc_stamps: Default::default(),
                search_gate: gate::Gate::per_core(),
            };
            return Ok((hub, CatchUpReport::default()));
        };
        let (journal, repaired) = JournalWriter::open(&layout.facts(), &device)?;
        for issue in &repaired {
            tracing::warn!(journal.issue = %issue, "repaired torn journal tail");
        }
        let (index, healed) = heal::open_index(&layout.index())?;
        index.set_lifecycle(config.lifecycle.clone());
        let cache_path = layout.cache().join("vectors.db");
        let cache = VectorCache::open(&cache_path)
            .inspect_err(|e| tracing::warn!(error = %e, cache.path = %cache_path.display(), "vector cache unavailable; embedding without it"))
            .ok();
        let hub = Hub {
            layout,
            config: std::sync::RwLock::new(std::sync::Arc::new(config)),
            index,
            device,
            writer: Some(Mutex::new(WriterState {
                journal,
                _lock: lock,
            })),
            queue: Mutex::new(Vec::new()),
            embedder: std::sync::Arc::new(embedder),
            cache,
            clock: std::sync::RwLock::new(lifecycle::system_clock()),
            accesses: Mutex::new(Default::default()),
            track_accesses: Default::default(),
            index_state: Default::default(),
            doc_stamps: Default::default(),
            search_gate: gate::Gate::per_core(),
        };
        let mut hub = hub;
        let report = hub.catch_up_healing(healed, progress)?;
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
        let (hub, mut report) = Self::open_inner(layout, config, Mode::Write, embedder, progress)?;
        // A rebuilt index is complete: every vector is stored (from the cache
        // where the text is unchanged) before reindex reports success. They
        // are stored while the new index is still bulk-loading; it is marked
        // complete after them.
        report.vectors_stored = hub.embed_pending(usize::MAX);
        hub.index.end_bulk_load()?;
        Ok((hub, report))
    }

    /// The root layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The configuration in force: a snapshot of the one live config (a
    /// cheap `Arc` clone), which [`Hub::update_config`] swaps on reload.
    pub fn config(&self) -> std::sync::Arc<Config> {
        std::sync::Arc::clone(&self.config.read().expect("config lock poisoned"))
    }

    /// Replaces the live config with `change(current)`, atomically with
    /// respect to other updates (the `config.json` watcher and
    /// `POST /v1/config`). Readers keep the snapshot they hold. On error the
    /// config in force stays as it was.
    pub fn update_config(
        &self,
        change: impl FnOnce(&Config) -> Result<Config>,
    ) -> Result<std::sync::Arc<Config>> {
        let mut live = self.config.write().expect("config lock poisoned");
        let next = std::sync::Arc::new(change(&live)?);
        *live = std::sync::Arc::clone(&next);
        Ok(next)
    }

    /// This device's id: its journal directory below `memories/facts/`
    /// (see [`crate::store::device`]).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Whether this hub holds the writer lock.
    pub(crate) fn is_writer(&self) -> bool {
        self.writer.is_some()
    }

    /// Commits pending index changes so that every reader sees them. Searches
    /// do this by themselves; a server also calls it on a timer so that other
    /// processes reading the index see recent writes.
    pub(crate) fn flush(&self) -> Result<()> {
        if self.writer.is_some() {
            if self.index.behind().is_some() {
                self.try_recover_index();
            }
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
                .ok_or_else(|| Error::not_found("memory", id))?;
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
            .ok_or_else(|| Error::not_found("memory", id))?;
        self.note_access([&m]);
        Ok(m)
    }

    /// Counts, sizes and problems.
    pub fn stats(&self) -> Result<Stats> {
        if let Err(e) = self.flush() {
            // Counts come from SQLite; the index reports itself degraded.
            tracing::warn!(error = %e, "index commit failed while gathering stats");
        }
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
        setting: m.setting,
    }
}
