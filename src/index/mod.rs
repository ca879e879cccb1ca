//! The derived index under `data/index/`: tantivy for text, SQLite for
//! metadata, sqlite-vec (inside the same SQLite file) for vectors.
//!
//! Everything here can be deleted and rebuilt from `memories/`. Changes arrive
//! as a [`Batch`]. SQLite commits every batch at once, with the journal cursors
//! it has applied. tantivy commits are expensive (new segment, several
//! fsyncs), so the text index commits lazily — before a search reads it, on
//! [`Index::refresh`] and on drop — and stores its own cursors in the commit
//! payload. On open, catch-up restarts from the older of the two cursors per
//! file; every change is an idempotent upsert or delete, so replaying a line
//! twice is harmless and a crash loses nothing from either side. Document
//! changes are not journaled, so a batch with one commits tantivy before SQLite.
//! Vectors follow in a second step ([`Index::sync_vectors`]): applying a
//! change marks the memory pending (or deletes its vector), and the hub then
//! embeds what is pending, so a crash in between only leaves work pending.
//!
//! Only this module writes below `data/index/`.

pub mod error;
pub mod filter;
pub mod fusion;
pub mod lifecycle;
pub mod merge;
pub mod meta;
pub mod meta_read;
pub mod neighbours;
pub mod scoped_stats;
pub mod text;
pub mod vector;
pub mod vector_scan;

/// The tokenizer and stemmer live in [`crate::analysis`] (below the index,
/// shared with query planning and the test embedder); re-exported here so
/// `index::tokenizer` paths keep working.
pub use crate::analysis::{stem, tokenizer};

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

pub use error::IndexError;

use crate::embed::Embedder;
use crate::embed::cache::{VectorCache, embed_passages_cached};
use crate::error::{Error, IoContext, Result};
use crate::model::Memory;
use crate::store::journal::{Cursor, LineIssue};
use filter::Filter;
use meta::{DocumentRow, FactExtras, MetaDb, tx};
use text::{TextHit, TextIndex};
use tokenizer::Term;

/// Memories embedded per transaction while syncing vectors.
const VECTOR_BATCH: usize = 256;

/// Memories per transaction while a new index is bulk-loaded: no reader
/// waits on these transactions, and most vectors come from the cache.
const BULK_VECTOR_BATCH: usize = 4096;

/// Bumped whenever the on-disk index layout changes; a mismatch triggers a rebuild.
pub(crate) const INDEX_FORMAT: &str = "8";

/// The file holding [`INDEX_FORMAT`]; written last, when the index is complete.
const FORMAT_FILE: &str = "FORMAT";

/// One change to apply.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// A fact was written (or rewritten with the same id).
    PutFact {
        /// The fact as a searchable memory.
        memory: Memory,
        /// Columns that are not part of [`Memory`].
        extras: FactExtras,
        /// When the line was written (its merge version, see [`merge`]).
        at: DateTime<Utc>,
    },
    /// Long-term facts were retrieved (one access each).
    Touch {
        /// The ids.
        ids: Vec<String>,
        /// When.
        at: DateTime<Utc>,
        /// The journal file and line of the `touch`, which identify it.
        line: Option<(String, u64)>,
    },
    /// A link between two facts was written (`on`) or dismissed.
    Link {
        /// The pair, its relation and time.
        link: crate::model::Link,
        /// Written (`link`) or dismissed (`unlink`).
        on: bool,
    },
    /// A fact was forgotten.
    Forget {
        /// The fact id.
        id: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// A document was added or changed.
    PutDocument {
        /// Bookkeeping row.
        row: DocumentRow,
        /// Its chunks.
        chunks: Vec<Memory>,
    },
    /// A document was removed, or became unreadable.
    RemoveDocument {
        /// The document id.
        doc_id: String,
        /// Its path.
        path: String,
        /// Why it cannot be indexed, if it still exists.
        issue: Option<String>,
    },
}

/// Changes plus journal progress, applied atomically with respect to restarts.
#[derive(Debug, Default)]
pub struct Batch {
    /// The changes, in order.
    pub(crate) changes: Vec<Change>,
    /// New cursor per journal file.
    pub(crate) cursors: Vec<(String, Cursor)>,
    /// Bad journal lines found while reading.
    pub(crate) issues: Vec<LineIssue>,
    /// Journal files read again from their first line: the bad lines
    /// recorded for them are replaced by this batch's `issues`.
    pub(crate) rechecked: Vec<String>,
    /// Journal lines read and quarantined by a rule outside the merge rules
    /// (a credential in a field): recorded in table `quarantine`.
    pub(crate) quarantined: Vec<Quarantined>,
}

/// A journal line quarantined on replay: where, which id, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quarantined {
    /// Journal file (relative to `facts/`).
    pub(crate) file: String,
    /// 1-based line.
    pub(crate) line: u64,
    /// The id it names (withheld when the id itself is the problem).
    pub(crate) id: String,
    /// Why; never the offending value.
    pub(crate) reason: String,
}

impl Batch {
    /// Whether there is nothing to apply.
    pub(crate) fn is_empty(&self) -> bool {
        self.changes.is_empty()
            && self.cursors.is_empty()
            && self.issues.is_empty()
            && self.rechecked.is_empty()
            && self.quarantined.is_empty()
    }
}

/// Whether `e` says the index files themselves are damaged (see
/// [`IndexError::is_damage`]). Such an index is moved aside and rebuilt.
pub(crate) fn is_damage(e: &Error) -> bool {
    e.downcast_ref::<IndexError>()
        .is_some_and(IndexError::is_damage)
}

/// Moves a damaged index directory to `data/index.broken-<timestamp>/`
/// (for a post-mortem) and keeps only the two most recent of those.
/// Returns where it went.
pub(crate) fn move_aside(dir: &Path) -> Result<PathBuf> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "index".into());
    let prefix = format!("{name}.broken-");
    let stamp = Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let mut aside = parent.join(format!("{prefix}{stamp}"));
    let mut n = 1;
    while aside.exists() {
        n += 1;
        aside = parent.join(format!("{prefix}{stamp}-{n}"));
    }
    std::fs::rename(dir, &aside).ctx("cannot move the damaged index aside to", &aside)?;
    let mut old: Vec<PathBuf> = std::fs::read_dir(parent)
        .ctx("cannot list", parent)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .filter(|p| *p != aside)
        .collect();
    // The copy just made is kept whatever its name sorts as (a name freed by
    // an earlier removal in the same millisecond can sort first).
    old.sort();
    let excess = old.len().saturating_sub(KEEP_BROKEN.saturating_sub(1));
    for p in &old[..excess] {
        if let Err(e) = std::fs::remove_dir_all(p) {
            tracing::warn!(error = %e, index.dir = %p.display(), "cannot remove an old damaged index");
        }
    }
    Ok(aside)
}

/// Damaged indexes kept under `data/` for a post-mortem.
const KEEP_BROKEN: usize = 2;

/// The text index and metadata store together.
pub struct Index {
    dir: PathBuf,
    /// Whether this index is being bulk-loaded: new, without its `FORMAT` file yet.
    bulk: std::sync::atomic::AtomicBool,
    /// Full-text index.
    pub(crate) text: TextIndex,
    /// Metadata store.
    pub(crate) meta: MetaDb,
    lifecycle: std::sync::RwLock<crate::lifecycle::LifecycleConfig>,
    /// Why the index is behind the journal after a failed apply or commit, until caught up.
    /// (failures so far, why it is behind now).
    behind: std::sync::Mutex<(u64, Option<String>)>,
    /// The in-process coarse vector pass (see [`vector_scan`]).
    coarse: std::sync::RwLock<vector_scan::CoarseVectors>,
    /// While bulk-loading, the ids named so far (see [`merge::Named`]).
    named: std::sync::Mutex<Option<merge::Named>>,
}

impl Index {
    /// Opens the index in `dir`. In writable mode a missing or outdated index is
    /// created empty (the caller then catches up from the files).
    ///
    /// A new index is bulk-loaded ([`MetaDb::open_for_bulk_load`]) and gets
    /// its `FORMAT` file only from [`Index::end_bulk_load`], after everything
    /// is synced: a directory without it (a crash or an error mid-build) is
    /// an unfinished build, removed and built again here, and a read-only
    /// open reports no index rather than reading half of one.
    pub(crate) fn open(dir: &Path, writable: bool) -> Result<Index> {
        let marker = dir.join(FORMAT_FILE);
        let mut bulk = false;
        if writable {
            let current = std::fs::read_to_string(&marker).ok();
            if current.as_deref().map(str::trim) != Some(INDEX_FORMAT) {
                if dir.exists() {
                    if current.is_some() {
                        tracing::warn!(index.dir = %dir.display(), "index format changed; rebuilding");
                    } else {
                        tracing::warn!(index.dir = %dir.display(), "index build unfinished or format unknown; rebuilding");
                    }
                    std::fs::remove_dir_all(dir).ctx("cannot remove old index", dir)?;
                }
                std::fs::create_dir_all(dir).ctx("cannot create index directory", dir)?;
                bulk = true;
            }
        } else if !marker.exists() {
            return Err(crate::error::Error::Internal(format!(
                "no index at {} (none yet, or still being built); run `memd reindex` or start the writer once",
                dir.display()
            )));
        }
        let text = TextIndex::open(&dir.join("text"), writable)?;
        let meta_path = dir.join("meta.db");
        let meta = if bulk {
            MetaDb::open_for_bulk_load(&meta_path)?
        } else {
            MetaDb::open(&meta_path, writable)?
        };
        Ok(Index {
            dir: dir.to_path_buf(),
            bulk: std::sync::atomic::AtomicBool::new(bulk),
            text,
            meta,
            lifecycle: Default::default(),
            behind: Default::default(),
            coarse: std::sync::RwLock::new(vector_scan::CoarseVectors::in_dir(dir)),
            named: std::sync::Mutex::new(bulk.then(merge::Named::default)),
        })
    }

    /// Opens a complete index for reading on a disk too full to open it for
    /// writing ([`Index::open`] fails there: SQLite cannot create its
    /// shared-memory file, tantivy its lock file). Searches and reads work;
    /// every change fails until [`Index::ensure_writable`] succeeds once
    /// there is room again.
    pub(crate) fn open_on_full_disk(dir: &Path) -> Result<Index> {
        let format = std::fs::read_to_string(dir.join(FORMAT_FILE)).ok();
        if format.as_deref().map(str::trim) != Some(INDEX_FORMAT) {
            return Err(Error::StorageFull(format!(
                "the disk holding {} is full and there is no complete index to read meanwhile",
                dir.display()
            )));
        }
        let text = TextIndex::open(&dir.join("text"), true)?;
        let meta = MetaDb::open_pinned(&dir.join("meta.db"))?;
        Ok(Index {
            dir: dir.to_path_buf(),
            bulk: std::sync::atomic::AtomicBool::new(false),
            text,
            meta,
            lifecycle: Default::default(),
            behind: Default::default(),
            coarse: std::sync::RwLock::new(vector_scan::CoarseVectors::in_dir(dir)),
            named: std::sync::Mutex::new(None),
        })
    }

    /// Opens the metadata store's write connection if the index was opened
    /// on a full disk ([`Index::open_on_full_disk`]); nothing to do otherwise.
    pub(crate) fn ensure_writable(&self) -> Result<()> {
        self.meta.open_writer_late()
    }

    /// Whether changes can be applied (false while an index opened on a
    /// full disk waits for room).
    pub(crate) fn is_writable(&self) -> bool {
        self.meta.is_writable()
    }

    /// The room left on the file system holding the index.
    pub(crate) fn room(&self) -> Option<crate::disk::Room> {
        crate::disk::Room::of(&self.dir)
    }

    /// Gives space back to a file system short of it: checkpoints SQLite's
    /// write-ahead log into the database and truncates it. Returns the
    /// bytes the log held.
    pub(crate) fn reclaim(&self) -> Result<u64> {
        if !self.is_writable() {
            return Ok(0);
        }
        self.meta.checkpoint_truncate()
    }

    /// Marks the index behind the journal for `reason` without a failed
    /// apply (it opened on a full disk and has not caught up).
    pub(crate) fn mark_behind(&self, reason: String) {
        let mut behind = self.behind.lock().expect("index state poisoned");
        behind.0 += 1;
        behind.1 = Some(reason);
    }

    /// Opens the index for writing and checks it cheaply: tantivy's segment
    /// files are present with valid checksums and load, and SQLite passes
    /// `PRAGMA quick_check`. Any error means the index must be rebuilt.
    pub(crate) fn open_verified(dir: &Path) -> Result<Index> {
        let index = Index::open(dir, true)?;
        index.text.verify()?;
        index.meta.quick_check()?;
        Ok(index)
    }

    /// Whether the two stores disagree once both have applied the same
    /// journal lines: a description of the difference, or `None`. Commits the
    /// text index first. Only meaningful right after a catch-up.
    pub(crate) fn disagreement(&self) -> Result<Option<String>> {
        self.refresh()?;
        let text = self.text.num_docs();
        let meta = self.meta.live_count()?;
        if text != meta {
            return Ok(Some(format!(
                "the full-text index holds {text} memories and the metadata store {meta}"
            )));
        }
        let text_cursors = self.text.applied_cursors();
        let meta_cursors = self.meta.cursors()?;
        for (file, c) in &meta_cursors {
            if text_cursors.get(file) != Some(c) {
                return Ok(Some(format!(
                    "the full-text index and the metadata store have applied {file} to different lines"
                )));
            }
        }
        Ok(None)
    }

    /// Sets the tier rules that `touch` records are replayed with.
    pub(crate) fn set_lifecycle(&self, cfg: crate::lifecycle::LifecycleConfig) {
        *self.lifecycle.write().expect("lifecycle config poisoned") = cfg;
    }

    /// Applies a batch: text index first, then metadata and cursors.
    ///
    /// On failure (a full disk, typically) the text writer is reset to its
    /// last commit and the index is marked [`Index::behind`]: nothing is lost,
    /// because the journal lines are durable and catch-up applies them again
    /// from the cursors of the last successful commits.
    pub(crate) fn apply(&self, batch: &Batch) -> Result<()> {
        // The index never takes the last bytes of its file system: below
        // the floor it stops growing (see `crate::disk`) and catches up once
        // there is room again.
        if !batch.changes.is_empty()
            && let Some(room) = self.room()
            && !room.above_floor()
        {
            let _ = self.reclaim();
            if self.room().is_some_and(|r| !r.above_floor()) {
                let e = Error::StorageFull(format!(
                    "the index does not grow with {} bytes free on its file system (it keeps {} bytes free)",
                    room.free,
                    room.floor()
                ));
                self.mark_behind(e.to_string());
                return Err(e);
            }
        }
        let out = self.apply_inner(batch);
        if let Err(e) = &out {
            self.fell_behind(e);
        }
        out
    }

    /// Records a failed apply or commit and resets the text writer.
    fn fell_behind(&self, e: &Error) {
        // On a full disk this repeats with every write: once a minute, counted.
        if let Some(repeats) = crate::base::repeat::global().admit("index.behind") {
            tracing::error!(error = %e, repeated = repeats, "index update failed; it catches up from the journal once storage works again");
        }
        let mut behind = self.behind.lock().expect("index state poisoned");
        behind.0 += 1;
        behind.1 = Some(e.to_string());
        drop(behind);
        if let Err(e) = self.text.reset_writer() {
            tracing::warn!(error = %e, "cannot reopen the full-text writer yet; retried on next use");
        }
    }

    /// Why the index is behind the journal (after a storage error), if it
    /// is, with the number of failures so far (for [`Index::caught_up`]).
    pub(crate) fn behind(&self) -> Option<(u64, String)> {
        let behind = self.behind.lock().expect("index state poisoned");
        behind.1.clone().map(|reason| (behind.0, reason))
    }

    /// Records that a full catch-up and commit, started when `failures`
    /// failures had happened, succeeded; a failure since keeps it behind.
    pub(crate) fn caught_up(&self, failures: u64) {
        let mut behind = self.behind.lock().expect("index state poisoned");
        if behind.0 == failures {
            behind.1 = None;
            crate::base::repeat::global().clear("index.behind");
        }
    }

    /// Documents are not journaled: the text changes of a batch's documents
    /// commit to tantivy before SQLite is written.
    fn apply_documents_to_text(&self, batch: &Batch) -> Result<()> {
        let mut documents = false;
        for change in &batch.changes {
            match change {
                Change::PutDocument { row, chunks } => {
                    documents = true;
                    self.text.remove_doc(&row.doc_id)?;
                    for c in chunks {
                        self.text.upsert(c, "")?;
                    }
                }
                Change::RemoveDocument { doc_id, .. } => {
                    documents = true;
                    self.text.remove_doc(doc_id)?;
                }
                Change::PutFact { .. }
                | Change::Touch { .. }
                | Change::Forget { .. }
                | Change::Link { .. } => {}
            }
        }
        if documents {
            self.text.commit()?;
        }
        Ok(())
    }

    fn apply_inner(&self, batch: &Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // A reset of the text writer from here on drops what this batch queues.
        let epoch = self.text.epoch();
        self.apply_documents_to_text(batch)?;
        let cfg = self
            .lifecycle
            .read()
            .expect("lifecycle config poisoned")
            .clone();
        // Facts whose row changed: tantivy follows SQLite for them below.
        let mut changed: Vec<String> = Vec::new();
        // Facts put for the first time in a bulk load, without a session and
        // named by no later line of this batch: their row is the put itself,
        // so tantivy takes it as it is, without reading it back.
        let mut fresh: std::collections::HashMap<&str, &Memory> = Default::default();
        if batch
            .changes
            .iter()
            .any(|c| matches!(c, Change::Link { .. }))
        {
            self.meta.note_link();
        }
        let mut named = self.named.lock().expect("bulk-load ids poisoned");
        let mut name = |id: &str, fresh: &mut std::collections::HashMap<&str, &Memory>| {
            fresh.remove(id);
            named.as_mut().is_some_and(|n| n.first(id))
        };
        self.meta.write(|t| {
            for change in &batch.changes {
                match change {
                    Change::PutFact { memory, extras, at } => {
                        if let Some(old) = &memory.supersedes {
                            name(old, &mut fresh);
                        }
                        if name(&memory.id, &mut fresh) {
                            let ids = merge::put_fresh(t, memory, extras, *at)?;
                            if memory.setting.session.is_none() {
                                fresh.insert(&memory.id, memory);
                                changed.extend(ids.into_iter().filter(|id| *id != memory.id));
                                continue;
                            }
                            changed.extend(ids);
                        } else {
                            changed.extend(merge::put(t, memory, extras, *at, &cfg)?);
                        }
                    }
                    Change::Touch { ids, at, line } => {
                        for id in ids {
                            name(id, &mut fresh);
                        }
                        changed.extend(merge::touch(t, ids, *at, line.as_ref(), &cfg)?);
                    }
                    Change::Forget { id, at } => {
                        name(id, &mut fresh);
                        changed.extend(merge::forget(t, id, *at)?);
                    }
                    Change::Link { link, on } => merge::link(t, link, *on)?,
                    Change::PutDocument { row, chunks } => tx::replace_document(t, row, chunks)?,
                    Change::RemoveDocument {
                        doc_id,
                        path,
                        issue,
                    } => {
                        tx::remove_document(t, doc_id)?;
                        tx::set_document_issue(t, path, issue.as_deref())?;
                    }
                }
            }
            bookkeeping(t, batch)
        })?;
        drop(named);
        changed.sort();
        changed.dedup();
        for id in &changed {
            fresh.remove(id.as_str());
        }
        self.follow_rows(&changed)?;
        for change in &batch.changes {
            if let Change::PutFact { memory, .. } = change
                && fresh.remove(memory.id.as_str()).is_some()
            {
                self.text.upsert(memory, "")?;
            }
        }
        // Noted only now: a failure above, or a reset of the text writer by
        // another thread's failed commit since `epoch`, leaves tantivy's
        // cursors behind, and catch-up applies these lines again.
        self.text.note_cursors(epoch, &batch.cursors)?;
        if !batch.changes.is_empty() {
            self.text.mark_dirty();
        }
        Ok(())
    }

    /// Makes tantivy show each of `ids` as its SQLite row is: live rows
    /// (hidden from searches while superseded) are upserted, forgotten or
    /// missing ones removed.
    ///
    /// The session neighbours of each changed fact follow too: their context
    /// field holds its text (see [`neighbours`]).
    fn follow_rows(&self, ids: &[String]) -> Result<()> {
        // The live rows of the changed facts, read once: a row without a
        // session has no neighbours, so most facts skip both lookups below.
        let mut rows: std::collections::HashMap<String, Memory> = Default::default();
        for chunk in ids.chunks(500) {
            rows.extend(self.meta.get_many(chunk, &Filter::all())?);
        }
        let mut all: Vec<String> = ids.to_vec();
        self.meta.with_reader(|c| {
            for id in ids {
                if rows.get(id).is_some_and(|m| m.setting.session.is_none()) {
                    continue;
                }
                all.extend(neighbours::around(c, id)?);
            }
            Ok(())
        })?;
        all.sort();
        all.dedup();
        for chunk in all.chunks(500) {
            let missing: Vec<String> = chunk
                .iter()
                .filter(|id| !rows.contains_key(*id))
                .cloned()
                .collect();
            let more = self.meta.get_many(&missing, &Filter::all())?;
            for id in chunk {
                match rows.get(id).or_else(|| more.get(id)) {
                    Some(m) => self.upsert_text(m)?,
                    None => self.text.remove(id)?,
                }
            }
        }
        Ok(())
    }

    /// Indexes a live row's text as search should see it: hidden while
    /// superseded, with its session context (none without a session: see
    /// [`neighbours::context_text`]).
    fn upsert_text(&self, m: &Memory) -> Result<()> {
        let (superseded, context) = self.meta.with_reader(|c| {
            let context = if m.setting.session.is_some() {
                neighbours::context_text(c, &m.id)?
            } else {
                String::new()
            };
            Ok((lifecycle::is_superseded(c, &m.id)?, context))
        })?;
        self.text
            .upsert(&lifecycle::effective(m, superseded), &context)
    }

    /// Empties the index in place, for a rebuild by the process that holds
    /// the writer (a running daemon asked to reindex): the text index
    /// commits its emptiness with no journal cursors, the metadata store
    /// deletes every row (vectors included) in one transaction, and the
    /// in-process vector copy starts over. Catch-up then replays the files
    /// from the start. The caller holds the writer, so no batch is applied
    /// meanwhile; searches meanwhile see what has been replayed so far.
    pub(crate) fn clear(&self) -> Result<()> {
        self.text.clear()?;
        self.meta.clear()?;
        *self.coarse.write().expect("coarse vectors poisoned") =
            vector_scan::CoarseVectors::in_dir(&self.dir);
        Ok(())
    }

    /// Clears the expiry of long-term facts indexed with one (tier expiry
    /// off); see [`lifecycle::clear_long_term_expiry`]. Returns how many.
    pub(crate) fn clear_long_term_expiry(&self) -> Result<usize> {
        let ids = self.meta.write(lifecycle::clear_long_term_expiry)?;
        if ids.is_empty() {
            return Ok(0);
        }
        let rows = self.meta.get_many(&ids, &Filter::all())?;
        for m in rows.values() {
            self.upsert_text(m)?;
        }
        self.text.mark_dirty();
        Ok(ids.len())
    }

    /// Ends the bulk load of an index that opened empty (see
    /// [`TextIndex::end_bulk_load`] and [`MetaDb::end_bulk_load`]); called
    /// once the first catch-up is done. For a new index, commits the text
    /// index, syncs the metadata store and only then writes the `FORMAT`
    /// file (synced, with its directory) that marks the index complete.
    pub(crate) fn end_bulk_load(&self) -> Result<()> {
        self.text.end_bulk_load();
        *self.named.lock().expect("bulk-load ids poisoned") = None;
        if !self.bulk.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        self.refresh()?;
        self.meta.end_bulk_load()?;
        crate::base::durable::write_atomic(&self.dir.join(FORMAT_FILE), INDEX_FORMAT.as_bytes())?;
        self.bulk.store(false, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Whether this index is new and not yet marked complete ([`Index::end_bulk_load`]).
    pub(crate) fn bulk_loading(&self) -> bool {
        self.bulk.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Commits pending text-index changes so searches see them, and once
    /// no metadata write has committed for `IDLE_CHECKPOINT` (10 s),
    /// checkpoints and truncates SQLite's write-ahead log (the server's
    /// scheduler calls this every second, so an idle server holds no log).
    pub fn refresh(&self) -> Result<()> {
        let out = self.text.commit();
        if let Err(e) = &out {
            self.fell_behind(e);
        }
        if !self.bulk_loading()
            && let Err(e) = self.meta.checkpoint_if_idle(meta::IDLE_CHECKPOINT)
        {
            tracing::warn!(error = %e, "cannot checkpoint the metadata store's log; retried when idle");
        }
        out
    }

    /// Checkpoints SQLite's write-ahead log into the database and truncates
    /// it (a clean close does this too); returns whether it completed.
    pub fn checkpoint(&self) -> Result<bool> {
        self.meta.checkpoint()
    }

    /// Where catch-up must resume per journal file: the older of the SQLite and
    /// tantivy cursors.
    pub(crate) fn resume_cursors(&self) -> Result<std::collections::HashMap<String, Cursor>> {
        let mut cursors = self.meta.cursors()?;
        let text = self.text.applied_cursors();
        for (file, c) in cursors.iter_mut() {
            let t = text.get(file).copied().unwrap_or_default();
            if t.offset < c.offset {
                *c = t;
            }
        }
        Ok(cursors)
    }

    /// Whether any indexed document holds a CJK character (deleted ones
    /// included until their segment merges); see [`TextIndex::has_cjk`].
    pub(crate) fn text_has_cjk(&self) -> Result<bool> {
        self.text.has_cjk()
    }

    /// Text search under a filter with a boost per term, optionally among
    /// memories of some scripts only; see [`TextIndex::search_weighted`].
    pub(crate) fn text_search_weighted(
        &self,
        terms: &[(Term, f32)],
        filter: &Filter,
        all_terms: bool,
        band: Option<text::ScriptBand>,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        self.text
            .search_weighted(terms, filter, all_terms, band, limit)
    }

    /// The visible index terms a query word may stand for; see
    /// [`TextIndex::expansions`].
    pub(crate) fn text_expansions(
        &self,
        word: &str,
        fuzzy: bool,
        prefix: bool,
        filter: &Filter,
    ) -> Result<Vec<(String, u64)>> {
        self.text.expansions(word, fuzzy, prefix, filter)
    }

    /// Memories holding `tokens` as an exact phrase; see [`TextIndex::phrase_search`].
    pub(crate) fn text_phrase_search(
        &self,
        tokens: &[Term],
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        self.text.phrase_search(tokens, filter, limit)
    }

    /// Bytes SQLite holds in this process; see [`vector::sqlite_heap_bytes`].
    pub(crate) fn sqlite_heap_bytes() -> u64 {
        vector::sqlite_heap_bytes()
    }

    /// Whether the phrase search finds `m` for `tokens`; see [`text::holds_phrase`].
    pub(crate) fn holds_phrase(m: &Memory, tokens: &[Term]) -> bool {
        text::holds_phrase(m, tokens)
    }

    /// The average visible body length in tokens; see [`TextIndex::average_body_tokens`].
    pub(crate) fn text_average_body_tokens(&self, filter: &Filter) -> Result<f32> {
        self.text.average_body_tokens(filter)
    }

    /// Visible documents (under `filter`) containing each term, and the number of visible documents.
    pub(crate) fn text_doc_freqs(
        &self,
        terms: &[Term],
        filter: &Filter,
    ) -> Result<(Vec<u64>, u64)> {
        self.text.doc_freqs(terms, filter)
    }

    /// Whether some memory visible under `filter` holds one of `terms` in its
    /// title or text; see [`TextIndex::holds_any`].
    pub(crate) fn text_holds_any(&self, terms: &[Term], filter: &Filter) -> Result<bool> {
        self.text.holds_any(terms, filter)
    }

    /// Whether some searchable memory has no vector of the current model yet.
    pub(crate) fn vectors_pending(&self) -> Result<bool> {
        self.meta
            .with_reader(|c| Ok(!vector::pending(c, 1)?.is_empty()))
    }

    /// The model and dimension of the stored vectors, if any were stored.
    pub(crate) fn vector_model(&self) -> Result<Option<(String, usize)>> {
        self.meta.with_reader(vector::stored_model)
    }

    /// Number of memories waiting for a vector.
    pub(crate) fn vectors_pending_count(&self) -> Result<u64> {
        self.meta.with_reader(vector::pending_count)
    }

    /// Number of stored vectors.
    pub(crate) fn vector_count(&self) -> Result<u64> {
        self.meta.with_reader(vector::count)
    }

    /// Embeds every searchable memory that has no vector of `embedder`'s model
    /// (all of them after a model change), `VECTOR_BATCH` per transaction,
    /// taking vectors from `cache` where it can. Returns how many were stored.
    pub fn sync_vectors(
        &self,
        embedder: &dyn Embedder,
        cache: Option<&VectorCache>,
        limit: usize,
    ) -> Result<u64> {
        let model = embedder.model_id();
        if self
            .meta
            .write(|t| vector::ensure_model(t, model, embedder.dim()))?
        {
            tracing::info!(embed.model = %model, "vector table (re)created; embedding every memory");
        }
        let bulk = self.bulk_loading();
        let batch = if bulk {
            BULK_VECTOR_BATCH
        } else {
            VECTOR_BATCH
        };
        let (mut stored, mut tried) = (0u64, 0usize);
        loop {
            let want = batch.min(limit.saturating_sub(tried));
            let pending = if want == 0 {
                Vec::new()
            } else {
                self.meta.write(|t| vector::pending(t, want))?
            };
            if pending.is_empty() {
                return Ok(stored);
            }
            let texts: Vec<&str> = pending.iter().map(|p| p.text.as_str()).collect();
            let vectors = embed_passages_cached(embedder, cache, &texts)?;
            if vectors.len() != pending.len() {
                return Err(Error::Internal("embedder lost vectors".into()));
            }
            let rows: Vec<(&vector::Pending, &[f32])> = pending
                .iter()
                .zip(&vectors)
                .map(|(p, v)| (p, v.as_slice()))
                .collect();
            tried += rows.len();
            stored += self
                .meta
                .write(|t| vector::store_logged(t, model, &rows, bulk))?;
        }
    }

    /// The `k` nearest memories visible under `filter` to a query vector of
    /// `model`, as `(id, cosine distance)`. `EMBEDDING_UNAVAILABLE` if the index
    /// holds vectors of another model.
    pub fn vector_search(
        &self,
        query: &[f32],
        model: &str,
        filter: &Filter,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        self.meta
            .with_reader(|c| vector_scan::knn(c, &self.coarse, model, query, filter, k))
    }

    /// Loads the in-process coarse vectors now (they load on the first
    /// vector search otherwise); returns how many rows and bytes they hold.
    pub fn warm_vectors(&self) -> Result<(usize, usize)> {
        let rows = self
            .meta
            .with_reader(|c| vector_scan::warm(c, &self.coarse))?;
        let bytes = self.coarse.read().expect("coarse vectors poisoned").bytes();
        Ok((rows, bytes))
    }

    /// [`Index::vector_search`] by sqlite-vec's exact KNN over every float
    /// vector, without the coarse pass: the reference its recall is measured against.
    pub fn vector_search_exact(
        &self,
        query: &[f32],
        filter: &Filter,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        self.meta
            .with_reader(|c| vector::knn_exact(c, query, filter, k))
    }

    /// The stored vectors of these memory ids, if they are of `model`
    /// (an empty map when the index holds another model's vectors).
    pub(crate) fn vectors_of(
        &self,
        ids: &[String],
        model: &str,
    ) -> Result<std::collections::HashMap<String, Vec<f32>>> {
        self.meta
            .with_reader(|c| vector_scan::vectors_of(c, &self.coarse, model, ids))
    }

    /// Bytes used by the index on disk.
    pub(crate) fn disk_bytes(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(p) else {
                return 0;
            };
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&e.path()),
                    _ => e.metadata().map(|m| m.len()).unwrap_or(0),
                })
                .sum()
        }
        walk(&self.dir)
    }
}

/// The journal cursors, issues and quarantined lines of a batch, in its transaction.
fn bookkeeping(t: &rusqlite::Transaction<'_>, batch: &Batch) -> Result<()> {
    for (file, cursor) in &batch.cursors {
        tx::set_cursor(t, file, *cursor)?;
    }
    for file in &batch.rechecked {
        tx::clear_issues(t, file)?;
    }
    for issue in &batch.issues {
        tx::add_issue(t, issue)?;
    }
    for q in &batch.quarantined {
        merge::quarantine(t, &q.file, q.line, &q.id, &q.reason)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_two_damaged_indexes_are_kept() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("index");
        for _ in 0..4 {
            std::fs::create_dir_all(dir.join("text")).unwrap();
            let aside = move_aside(&dir).unwrap();
            assert!(aside.join("text").is_dir());
            assert!(!dir.exists());
        }
        let kept = std::fs::read_dir(data.path()).unwrap().count();
        assert_eq!(kept, KEEP_BROKEN);
    }
}
