//! The application service: every use case, and the single writer.
//!
//! **Use cases.** Every surface (HTTP, MCP through `/v1`, the CLI, the
//! console through `/v1`) parses its input into the `/v1` request types of
//! [`crate::api`], builds a [`Caller`] and calls one use case:
//! `hub.<use_case>(&caller, request) -> Result<reply>`. The rules live in
//! the use case, once: scene resolution and the read filters
//! ([`caller`]), privacy and pin permission, subject and source defaults,
//! the short-stage TTL and idempotency namespacing ([`mod@write`]), supersede
//! visibility and inheritance ([`supersede`]), forgetting ([`forget`]),
//! bringing a version back ([`restore`]) and the list of forgotten
//! memories to bring back from ([`forgotten`]), search and recall
//! with the relevance floor ([`search`], [`recall`]), reads ([`read`]),
//! the document list and whole documents ([`documents`]),
//! ingest and membership ([`ingest`]), disclosure ([`disclose`]),
//! categories ([`categories`]), tag edits and the archive ([`tags`]),
//! configuration edits ([`settings`]), tokens, capabilities and health
//! ([`admin`]), consolidation runs ([`consolidation`]), rebuilding the index
//! in a running daemon ([`reindex`]), and the operator's use cases: paged
//! lists ([`list`]), tiers ([`tiers`]), the cleanup ([`gc`]), the audit log
//! ([`mod@audit`]), the scenes a token may use ([`scenes`]), the bootstrap
//! interview's profile ([`profile`]) and the health history ([`history`]). A surface only
//! parses, calls and replies, so "a pet token may not pin" is met the same
//! way over HTTP, MCP and the CLI. Each use-case file has one `impl Hub`
//! block holding only its use cases; its helpers are free functions.
//!
//! **Parts.** [`Hub`] is a small facade over owned parts (`hub/parts/`): the
//! writer (queue, group commit, write rules), catch-up (replay of the files
//! into the index, healing), the searcher (gate, search, vectors) and the
//! lifecycle (accesses, tiers, expiry), over one shared core (root, live
//! config, index, device, clock). A write is acknowledged only after its
//! line is durable and indexed, and the index always equals a replay of the
//! files. Reads take `&self` and run concurrently.
//!
//! **Drivers.** Internal drivers (consolidation, import, restore, eval) and
//! tests use a lower-level API without a caller: [`Hub::append`],
//! [`Hub::append_batch`], [`Hub::tombstone`], [`Hub::import_records`],
//! [`Hub::fetch`], [`Hub::search_filtered`]. The write rules of the writer
//! apply to them; the caller's rules do not.

pub mod admin;
mod asof;
pub mod audit;
mod blocks;
pub mod caller;
pub mod categories;
pub mod conflicts;
pub mod consolidation;
pub mod disclose;
pub mod documents;
pub mod forget;
pub mod forgotten;
pub mod gc;
pub mod health;
pub mod history;
pub mod ingest;
pub mod list;
pub(crate) mod parts;
pub mod profile;
pub mod read;
pub mod recall;
pub mod reindex;
pub mod restore;
pub mod scenes;
pub mod search;
pub mod settings;
pub mod supersede;
pub mod tags;
pub mod tiers;
pub mod write;

pub(crate) use blocks::one_line;
pub use caller::Caller;
pub use consolidation::Consolidation;
pub use health::{Component, HealthReport};
pub use ingest::{IngestAction, IngestOutcome};
pub use parts::Clock;
pub use parts::catchup::{CatchUpReport, Progress};
pub use parts::lifecycle::{EditRequest, MAX_SHORT_TTL_HOURS, TierCount, TierReport};
pub use parts::writer::{ArchivedMonth, WriteAction, WriteOutcome, WriteRequest};
pub use search::Limited;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde::Serialize;

use crate::config::{Config, Layout};
use crate::embed::cache::VectorCache;
use crate::embed::{Embedder, EmbedderSlot};
use crate::error::{Error, IoContext, Result};
use crate::ids;
use crate::index::Index;
use crate::index::filter::Filter;
use crate::index::meta::MetaCounts;
use crate::model::{Fact, Memory, Record};
use crate::search::{SearchRequest, SearchResults};
use crate::store::journal::{self, JournalWriter};
use crate::store::lock::WriterLock;
use parts::Core;
use parts::catchup::CatchUp;
use parts::ctx::Ctx;
use parts::lifecycle::Lifecycle;
use parts::searcher::Searcher;
use parts::writer::{Writer, WriterState};

/// How a hub opens a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Take the writer lock; fail with `ROOT_LOCKED` if another process has it.
    Write,
    /// Read the existing index without catching up.
    ReadOnly,
    /// Take the writer lock if free, else read what the other writer has indexed.
    ReadPreferWrite,
    /// Take the writer lock like [`Mode::Write`]; if the disk is too full
    /// to open the index for writing or to catch it up, serve reads from
    /// the index as it is, refuse writes with `STORAGE_FULL`, and catch up
    /// once there is room (`memd serve`).
    WriteOrWait,
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

/// The memory service over one root: a facade over its parts (see the module docs).
pub struct Hub {
    core: Core,
    catchup: CatchUp,
    lifecycle: Lifecycle,
    writer: Writer,
    searcher: Searcher,
    /// Consolidation, when the process that serves installed it.
    consolidation: OnceLock<Arc<dyn Consolidation>>,
    /// Requests since the last health sample ([`history`]).
    history: history::History,
    /// The temporary indexes of the last `as_of` reads.
    cuts: asof::Cuts,
    /// The texts new facts were last compared with for conflicts.
    seen: conflicts::SeenTexts,
    opened: Instant,
}

/// What a reply says of the index's lag ([`Hub::index_lag`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IndexLag {
    /// Journal lines the reader could read that the index has not applied.
    pub(crate) behind: Option<u64>,
    /// Whether any journal line was unapplied (for any reader); `false`
    /// means the index was caught up with the whole journal.
    pub(crate) lagging: bool,
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
        match hub.core.index.end_bulk_load() {
            Ok(()) => {}
            // Marked complete by the catch-up that follows once there is room.
            Err(e) if mode == Mode::WriteOrWait && e.is_storage_full() => {
                hub.catchup.opened_on_full_disk(&hub.core, &e.to_string());
            }
            Err(e) => return Err(e),
        }
        Ok((hub, report))
    }

    /// A writer hub on a fresh root at `root` with the default config and no
    /// model: the unit tests of the surfaces, which may not reach the layers
    /// below the hub themselves.
    #[cfg(test)]
    pub(crate) fn for_tests(root: &std::path::Path) -> Hub {
        let slot = EmbedderSlot::none("no model in this test");
        Self::open_with(
            Layout::new(root),
            Config::default(),
            Mode::Write,
            slot,
            &mut |_| {},
        )
        .expect("open a test hub")
        .0
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
            Mode::Write | Mode::WriteOrWait => Some(Self::lock(&layout)?),
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
            let core = Core::new(layout, config, index, device, false);
            let hub = Hub::assemble(
                core,
                CatchUp::default(),
                None,
                Searcher::new(embedder, None),
            );
            return Ok((hub, CatchUpReport::default()));
        };
        let (journal, repaired) = JournalWriter::open(&layout.facts(), &device)?;
        for issue in &repaired {
            tracing::warn!(journal.issue = %issue, "repaired torn journal tail");
        }
        let wait = mode == Mode::WriteOrWait;
        let (index, healed, full) = match parts::heal::open_index(&layout.index()) {
            Ok((index, healed)) => (index, healed, None),
            Err(e) if wait && parts::heal::short_of_space(&e, &layout.data()) => {
                (Index::open_on_full_disk(&layout.index())?, None, Some(e))
            }
            Err(e) => return Err(e),
        };
        index.set_lifecycle(config.lifecycle.clone());
        let cache_path = layout.cache().join("vectors.db");
        let cache = VectorCache::open(&cache_path)
            .inspect_err(|e| tracing::warn!(error = %e, cache.path = %cache_path.display(), "vector cache unavailable; embedding without it"))
            .ok();
        let mut core = Core::new(layout, config, index, device, true);
        let catchup = CatchUp::default();
        let report = match full {
            Some(e) => {
                catchup.opened_on_full_disk(&core, &e.to_string());
                CatchUpReport::default()
            }
            None => match catchup.open_healing(&mut core, healed, progress) {
                Ok(report) => report,
                Err(e) if wait && parts::heal::short_of_space(&e, &core.layout.data()) => {
                    catchup.opened_on_full_disk(&core, &e.to_string());
                    CatchUpReport::default()
                }
                Err(e) => return Err(e),
            },
        };
        let state = WriterState {
            journal,
            _lock: lock,
        };
        let hub = Hub::assemble(core, catchup, Some(state), Searcher::new(embedder, cache));
        Ok((hub, report))
    }

    fn assemble(
        core: Core,
        catchup: CatchUp,
        writer: Option<WriterState>,
        searcher: Searcher,
    ) -> Hub {
        Hub {
            core,
            catchup,
            lifecycle: Lifecycle::default(),
            writer: Writer::new(writer),
            searcher,
            consolidation: OnceLock::new(),
            history: history::History::default(),
            cuts: asof::Cuts::default(),
            seen: conflicts::SeenTexts::default(),
            opened: Instant::now(),
        }
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
        hub.core.index.end_bulk_load()?;
        Ok((hub, report))
    }

    fn cx(&self) -> Ctx<'_> {
        Ctx {
            core: &self.core,
            catchup: &self.catchup,
            lifecycle: &self.lifecycle,
        }
    }

    /// A caller with `grant`'s rights, at this instant of the hub's clock.
    pub(crate) fn caller(&self, grant: crate::auth::Grant) -> Caller {
        Caller::new(grant, self.now())
    }

    /// The local operator (the CLI) at this instant of the hub's clock.
    pub fn operator(&self) -> Caller {
        Caller::operator(self.now())
    }

    /// Runs `f`, one request of `caller`, under the rules that depend on
    /// who asks rather than on the request: the local operator's reads are
    /// never counted as retrievals (as when the CLI opens the root itself).
    pub fn on_behalf_of<T>(&self, caller: &Caller, f: impl FnOnce() -> T) -> T {
        if caller.is_operator() {
            parts::lifecycle::untracked(f)
        } else {
            f()
        }
    }

    /// The root layout.
    pub fn layout(&self) -> &Layout {
        &self.core.layout
    }

    /// The configuration in force: a snapshot of the one live config (a
    /// cheap `Arc` clone), which [`Hub::update_config`] swaps on reload.
    pub fn config(&self) -> Arc<Config> {
        self.core.config()
    }

    /// Replaces the live config with `change(current)`, atomically with
    /// respect to other updates (the `config.json` watcher and config
    /// edits). Readers keep the snapshot they hold. On error the config in
    /// force stays as it was.
    pub fn update_config(
        &self,
        change: impl FnOnce(&Config) -> Result<Config>,
    ) -> Result<Arc<Config>> {
        self.core.update_config(change)
    }

    /// This device's id: its journal directory below `memories/facts/`
    /// (see [`crate::store::device`]).
    pub fn device(&self) -> &str {
        &self.core.device
    }

    /// Now, by the hub's one clock (every rule and every surface reads it).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.core.now()
    }

    /// Replaces the clock (tests move it; "last week" follows it too).
    pub fn set_clock(&self, clock: Clock) {
        self.core.set_clock(clock);
    }

    /// How long ago this hub opened its root.
    pub(crate) fn uptime(&self) -> std::time::Duration {
        self.opened.elapsed()
    }

    /// Whether this hub holds the writer lock.
    pub(crate) fn is_writer(&self) -> bool {
        self.core.writable
    }

    /// The index (read access for other modules).
    pub fn index(&self) -> &Index {
        &self.core.index
    }

    /// Commits pending index changes so that every reader sees them. Searches
    /// do this by themselves; a server also calls it on a timer so that other
    /// processes reading the index see recent writes.
    pub(crate) fn flush(&self) -> Result<()> {
        if self.core.writable {
            if self.core.index.behind().is_some()
                && let Some(_held) = self.writer.try_hold()
                && let Err(e) = self.catchup.recover(&self.core)
            {
                // Whoever holds the writer recovers on its own commit.
                tracing::debug!(error = %e, "index still cannot catch up");
            }
            match self.core.index.refresh() {
                // Recorded as behind (health says so) and retried by the
                // catch-up loop: not an error of whoever asked to commit.
                Err(e) if e.is_storage_full() => {
                    tracing::debug!(error = %e, "index commit waits for room");
                }
                other => other?,
            }
        }
        Ok(())
    }

    /// Counts, sizes and problems. Journal files changed inside the part
    /// already indexed are read again first, so damage shows at once.
    pub fn stats(&self) -> Result<Stats> {
        if let Err(e) = self.flush() {
            // Counts come from SQLite; the index reports itself degraded.
            tracing::warn!(error = %e, "index commit failed while gathering stats");
        }
        if self.core.writable
            && self.core.index.is_writable()
            && let Some(_held) = self.writer.try_hold()
            && let Err(e) = self.catchup.recheck_changed(&self.core)
        {
            tracing::warn!(error = %e, "cannot check the journal for damaged lines");
        }
        let dir = self.core.layout.facts();
        let files = journal::list_files(&dir)?;
        let journal_bytes = files
            .iter()
            .map(|f| std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0))
            .sum();
        let index = &self.core.index;
        Ok(Stats {
            root: self.core.layout.root.display().to_string(),
            counts: index.meta.counts()?,
            journal_files: files.len(),
            journal_bytes,
            index_bytes: index.disk_bytes(),
            text_documents: index.text.num_docs(),
            issues: index.meta.issues()?,
            writer: self.is_writer(),
            vectors: index.vector_count()?,
            pending_vectors: index.vectors_pending_count()?,
        })
    }

    // ---- The drivers' API: the writer's rules apply, no caller's. ----

    /// Appends one memory through the single writer; returns after its
    /// journal line is fsync'd and indexed. Dedup is exact only: an exact
    /// duplicate of a live long-term memory or a repeated idempotency key
    /// answers `NOOP` with the existing id.
    pub fn append(&self, req: WriteRequest) -> Result<WriteOutcome> {
        self.writer.write(self.cx(), req)
    }

    /// Appends many memories as one group: one fsync, one index update.
    /// Each request succeeds or fails on its own.
    pub fn append_batch(&self, reqs: Vec<WriteRequest>) -> Result<Vec<Result<WriteOutcome>>> {
        self.writer.write_batch(self.cx(), reqs)
    }

    /// Appends a tombstone for a fact visible under `filter`, recorded as
    /// forgotten by `source`.
    pub fn tombstone(
        &self,
        id: &str,
        reason: Option<String>,
        source: &str,
        filter: &Filter,
    ) -> Result<()> {
        self.writer.forget(self.cx(), id, reason, source, filter)
    }

    /// Appends records taken from another root's journal, keeping their ids and
    /// times. A `put` whose id is already known, or a `forget` of an id that is
    /// not active, is skipped (`Ok(false)`), so importing twice changes nothing.
    pub fn import_records(&self, records: Vec<Record>) -> Result<Vec<Result<bool>>> {
        self.writer.import_records(self.cx(), records)
    }

    /// Documents under `memories/` the index refused, by path relative to
    /// `memories/`, with why (bad front matter, a link, an `id` two files
    /// claim, …), as the last document sync recorded them.
    pub fn document_issues(&self) -> Result<std::collections::HashMap<String, String>> {
        self.core.index.meta.document_issues()
    }

    /// Re-appends earlier `put` lines of forgotten facts (rollback of a
    /// consolidation run); returns the ids restored.
    pub(crate) fn restore_forgotten(&self, facts: Vec<Fact>) -> Result<Vec<String>> {
        self.writer.restore_forgotten(self.cx(), facts)
    }

    /// Makes each of `ids` current again by putting the same id again, when
    /// it is an older version (or forgotten) and no later version of its line
    /// is live; the others are left alone. A rollback of a consolidation run
    /// uses it for what the run replaced: forgetting the run's new version
    /// does not bring the old one back by itself. Returns the ids restored.
    pub(crate) fn reinstate(&self, ids: Vec<String>, source: &str) -> Result<Vec<String>> {
        let ops = ids
            .iter()
            .map(|id| parts::writer::RestoreOp {
                id: id.clone(),
                filter: Filter::all(),
                source: source.to_string(),
                same_id_only: true,
            })
            .collect();
        let done = self.writer.restore(self.cx(), ops)?;
        let mut out = Vec::new();
        for (id, result) in ids.into_iter().zip(done) {
            match result {
                Ok(parts::writer::Restored::Same) => out.push(id),
                Ok(_) | Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Compresses journal months older than `older_than_months` whole months
    /// (default `lifecycle.archiveAfterMonths`; 0 = nothing) into
    /// `memories/facts/archive/`; readers see no difference.
    pub fn archive_journal(&self, older_than_months: Option<u32>) -> Result<Vec<ArchivedMonth>> {
        self.writer
            .archive_months(&self.core, older_than_months, false)
    }

    /// One memory by fact id, chunk id or document id, if visible under
    /// `filter`. A document id returns the whole document: its visible
    /// chunks joined. Reading it counts no access.
    pub fn fetch(&self, id: &str, filter: &Filter) -> Result<Memory> {
        let meta = &self.core.index.meta;
        if ids::is_doc_id(id) && !id.contains('#') {
            let chunks = meta.doc_chunks(id, filter)?;
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
        match meta.get_many(&[id.to_string()], filter)?.remove(id) {
            Some(m) => Ok(m),
            // Acknowledged but not applied yet (the index is catching up):
            // read it from the journal, under the same filter.
            None => parts::backlog::find(&self.core, id, filter)?
                .ok_or_else(|| Error::not_found("memory", id)),
        }
    }

    /// Counts `memories` as retrieved (long-term facts only): an agent's
    /// recall, or a read that asks for it with `touch`. Looking alone (a get,
    /// a search, a list, the console) never counts, so browsing never
    /// promotes a memory or writes to the journal. No IO: the counts become
    /// one `touch` line within a few seconds.
    pub(crate) fn note_retrieval<'a>(&self, memories: impl IntoIterator<Item = &'a Memory>) {
        self.lifecycle.note_access(&self.core, memories);
    }

    /// Journal lines the index has not applied yet that a reader with
    /// `filter` could read (`None`: every line); `None` when the index is
    /// caught up. See [`parts::backlog::lines_for`].
    pub(crate) fn index_behind(&self, filter: Option<&Filter>) -> Result<Option<u64>> {
        Ok(self.index_lag(filter)?.behind)
    }

    /// [`Hub::index_behind`], and whether the index had applied the whole
    /// journal then (so that nothing is behind for any reader either).
    pub(crate) fn index_lag(&self, filter: Option<&Filter>) -> Result<IndexLag> {
        if parts::backlog::lag(&self.core)?.bytes == 0 {
            return Ok(IndexLag::default());
        }
        let behind = Some(parts::backlog::lines_for(&self.core, filter)?).filter(|n| *n > 0);
        Ok(IndexLag {
            behind,
            lagging: true,
        })
    }

    /// [`Hub::index_behind`] for everything `caller` may read (`None` too
    /// for a caller that may read nothing).
    pub(crate) fn index_behind_for(&self, caller: &Caller) -> Result<Option<u64>> {
        match caller.read_filter(None, false) {
            Ok(filter) => self.index_behind(Some(&filter)),
            Err(_) => Ok(None),
        }
    }

    /// Catches the index up with everything the journal holds (after a
    /// storage error, lines another device's files brought, a file copied
    /// in before its directory was watched), reads journal files damaged
    /// inside their applied part again, and returns the journal bytes still
    /// not applied. The file watcher's loop calls it until that is zero.
    pub(crate) fn catch_up_pending(&self) -> Result<u64> {
        let _held = self.writer.hold(&self.core)?;
        Ok(self.catchup.catch_up_pending(&self.core)?.bytes)
    }

    /// Search under the request's own filter, in its mode (default
    /// `search.mode`); see [`Hub::search`] for the use case.
    pub fn search_filtered(&self, req: &SearchRequest) -> Result<SearchResults> {
        self.searcher
            .search(self.cx(), parts::gate::IN_PROCESS, req)
    }

    /// [`Hub::search_filtered`] in `caller`'s queue at the search gate (a
    /// token's own, the local operator's), so that one caller's load delays
    /// only that caller; a full queue is `RATE_LIMITED`.
    pub(crate) fn search_as(&self, caller: &Caller, req: &SearchRequest) -> Result<SearchResults> {
        self.search_deep_as(caller, req, 0)
    }

    /// [`Hub::search_as`] ranking up to `depth` hits even above
    /// `search.maxLimit` (a paged search; [`search`] bounds the depth).
    pub(crate) fn search_deep_as(
        &self,
        caller: &Caller,
        req: &SearchRequest,
        depth: usize,
    ) -> Result<SearchResults> {
        self.searcher
            .search_deep(self.cx(), gate_queue(caller), req, depth, caller.now())
    }

    /// Holds the search gate in `caller`'s queue for work of `cost`
    /// (estimated milliseconds) that is not a search (an `as_of` build).
    pub(crate) fn admit_as(&self, caller: &Caller, cost: u64) -> Result<parts::gate::Permit<'_>> {
        self.searcher.admit(&self.core, gate_queue(caller), cost)
    }

    /// Searches holding the search gate's permits, and searches waiting for
    /// their turn (all callers together).
    pub fn search_gate_load(&self) -> (usize, usize) {
        self.searcher.gate_load()
    }

    /// Bytes SQLite holds in this process (its page caches, statements and
    /// schemas), for `/metrics`.
    pub fn sqlite_heap_bytes(&self) -> u64 {
        crate::index::Index::sqlite_heap_bytes()
    }

    /// The candidates of a hybrid search with the learned-fusion features of
    /// each ([`crate::search::hybrid_candidates`]), for `memd eval --features`.
    pub fn hybrid_candidates(&self, req: &SearchRequest) -> Result<Vec<crate::search::Candidate>> {
        self.searcher.hybrid_candidates(&self.core, req)
    }

    /// The embedder, loading the configured model on first use;
    /// `EMBEDDING_UNAVAILABLE` says why there is none.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        self.searcher.embedder()
    }

    /// Embeds up to `limit` memories that have no vector yet, without
    /// holding the writer; returns how many were stored.
    pub fn embed_pending(&self, limit: usize) -> u64 {
        self.searcher.embed_pending(&self.core, limit)
    }

    /// Whether the configured model has not loaded yet while memories wait for a vector.
    pub(crate) fn embedder_load_pending(&self) -> bool {
        self.searcher.embedder_load_pending(&self.core)
    }

    /// Loads the configured model on a thread of its own.
    pub(crate) fn load_embedder_in_background(&self) -> Result<()> {
        self.searcher.load_embedder_in_background()
    }

    /// Applies journal lines appended by another process (a file sync tool)
    /// since the index last looked.
    pub fn catch_up_journal(&self) -> Result<CatchUpReport> {
        let _held = self.writer.hold(&self.core)?;
        self.catchup.catch_up(&self.core, &mut |_| {})
    }

    /// Brings the index in line with the Markdown documents on disk: files
    /// are read and parsed without the writer, which is taken only to apply
    /// the finished batch.
    pub fn sync_documents(&self) -> Result<CatchUpReport> {
        if !self.core.writable {
            return Err(self.core.locked_error());
        }
        self.catchup.sync_documents(&self.core, &mut |batch| {
            let _held = self.writer.hold(&self.core)?;
            self.core.index.apply(batch)
        })
    }

    /// Turns access tracking on (the server and MCP do; operator reads from
    /// the CLI do not count and never write to the journal).
    pub fn set_access_tracking(&self, on: bool) {
        self.lifecycle.set_tracking(on);
    }

    /// Journals buffered accesses if the oldest waited 4 s (or always, with
    /// `force`). Returns how many ids were written.
    pub fn flush_accesses(&self, force: bool) -> Result<usize> {
        let Some(record) = self.lifecycle.due_touch(&self.core, force) else {
            return Ok(0);
        };
        let n = match &record {
            Record::Touch { ids, .. } => ids.len(),
            _ => 0,
        };
        match self
            .writer
            .submit(self.cx(), parts::writer::Op::Touch(record))
        {
            Ok(_) => Ok(n),
            // Access counts are not acknowledged writes: on a full disk
            // this window is not counted, said once a minute.
            Err(e) if e.is_storage_full() => {
                if let Some(repeats) = crate::base::repeat::global().admit("accesses.full") {
                    tracing::warn!(error = %e, repeated = repeats, "accesses not journaled: the disk is full");
                }
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Extends the expiry of the given short-term facts to `now + ttl`
    /// (capped at [`MAX_SHORT_TTL_HOURS`] after they were written). Ids that
    /// are not live short-term facts are ignored, and a forget committed
    /// meanwhile wins. Returns how many were extended; a read-only hub
    /// extends nothing.
    pub fn extend_short_ttl(
        &self,
        ids: &[String],
        ttl: chrono::Duration,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<usize> {
        let records = self.lifecycle.ttl_extensions(&self.core, ids, ttl, now)?;
        self.writer.append_if_active(self.cx(), records)
    }

    /// Counts of long-term facts per tier against the configured budgets.
    pub fn tier_report(&self) -> Result<TierReport> {
        self.lifecycle.tier_report(&self.core)
    }

    /// Whether a memory expires within the warning window.
    pub fn is_expiring_soon(&self, m: &Memory) -> bool {
        self.lifecycle.is_expiring_soon(&self.core, m)
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

/// The queue of `caller` at the search gate: a token's own, the local operator's.
fn gate_queue(caller: &Caller) -> &str {
    if caller.is_operator() {
        parts::gate::OPERATOR
    } else {
        caller.name()
    }
}
