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

pub mod filter;
pub mod fusion;
pub mod lifecycle;
pub mod meta;
pub mod meta_read;
pub mod stem;
pub mod text;
pub mod tokenizer;
pub mod vector;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

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

/// Bumped whenever the on-disk index layout changes; a mismatch triggers a rebuild.
pub const INDEX_FORMAT: &str = "5";

/// One change to apply.
#[derive(Debug, Clone)]
pub enum Change {
    /// A fact was written (or rewritten with the same id).
    PutFact {
        /// The fact as a searchable memory.
        memory: Memory,
        /// Columns that are not part of [`Memory`].
        extras: FactExtras,
    },
    /// Long-term facts were retrieved (one access each).
    Touch {
        /// The ids.
        ids: Vec<String>,
        /// When.
        at: DateTime<Utc>,
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
    pub changes: Vec<Change>,
    /// New cursor per journal file.
    pub cursors: Vec<(String, Cursor)>,
    /// Bad journal lines found while reading.
    pub issues: Vec<LineIssue>,
}

impl Batch {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.cursors.is_empty() && self.issues.is_empty()
    }
}

/// The text index and metadata store together.
pub struct Index {
    dir: PathBuf,
    /// Full-text index.
    pub text: TextIndex,
    /// Metadata store.
    pub meta: MetaDb,
    lifecycle: std::sync::RwLock<crate::lifecycle::LifecycleConfig>,
}

impl Index {
    /// Opens the index in `dir`. In writable mode a missing or outdated index is
    /// created empty (the caller then catches up from the files).
    pub fn open(dir: &Path, writable: bool) -> Result<Index> {
        let marker = dir.join("FORMAT");
        if writable {
            let current = std::fs::read_to_string(&marker).ok();
            if current.as_deref().map(str::trim) != Some(INDEX_FORMAT) {
                if dir.exists() {
                    tracing::warn!(index.dir = %dir.display(), "index format changed or unknown; rebuilding");
                    std::fs::remove_dir_all(dir).ctx("cannot remove old index", dir)?;
                }
                std::fs::create_dir_all(dir).ctx("cannot create index directory", dir)?;
                std::fs::write(&marker, INDEX_FORMAT).ctx("cannot write", &marker)?;
            }
        } else if !marker.exists() {
            return Err(crate::error::Error::Internal(format!(
                "no index at {}; run `memd reindex` or start the writer once",
                dir.display()
            )));
        }
        let text = TextIndex::open(&dir.join("text"), writable)?;
        let meta = MetaDb::open(&dir.join("meta.db"), writable)?;
        Ok(Index {
            dir: dir.to_path_buf(),
            text,
            meta,
            lifecycle: Default::default(),
        })
    }

    /// Sets the tier rules that `touch` records are replayed with.
    pub fn set_lifecycle(&self, cfg: crate::lifecycle::LifecycleConfig) {
        *self.lifecycle.write().expect("lifecycle config poisoned") = cfg;
    }

    /// Applies a batch: text index first, then metadata and cursors.
    pub fn apply(&self, batch: &Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut documents = false;
        // Supersede marks of this batch, for facts whose superseding line is not in SQLite yet.
        let mut superseded_here: std::collections::HashSet<&str> = Default::default();
        let mut latest: std::collections::HashMap<&str, &Memory> = Default::default();
        for change in &batch.changes {
            match change {
                Change::PutFact { memory, .. } => {
                    let superseded = superseded_here.contains(memory.id.as_str())
                        || self
                            .meta
                            .with_reader(|c| lifecycle::is_superseded(c, &memory.id))?;
                    self.text
                        .upsert(&lifecycle::effective(memory, superseded))?;
                    latest.insert(&memory.id, memory);
                    if let Some(old) = &memory.supersedes {
                        superseded_here.insert(old);
                        let old_memory = match latest.get(old.as_str()) {
                            Some(m) => Some((*m).clone()),
                            None => self
                                .meta
                                .get_many(std::slice::from_ref(old), &Filter::all())?
                                .remove(old),
                        };
                        if let Some(m) = old_memory {
                            self.text.upsert(&lifecycle::effective(&m, true))?;
                        }
                    }
                }
                Change::Touch { .. } => {}
                Change::Forget { id, .. } => self.text.remove(id)?,
                Change::PutDocument { row, chunks } => {
                    documents = true;
                    self.text.remove_doc(&row.doc_id)?;
                    for c in chunks {
                        self.text.upsert(c)?;
                    }
                }
                Change::RemoveDocument { doc_id, .. } => {
                    documents = true;
                    self.text.remove_doc(doc_id)?;
                }
            }
        }
        self.text.note_cursors(&batch.cursors);
        if !batch.changes.is_empty() {
            self.text.mark_dirty();
        }
        if documents {
            self.text.commit()?;
        }
        let cfg = self
            .lifecycle
            .read()
            .expect("lifecycle config poisoned")
            .clone();
        let mut touched: Vec<String> = Vec::new();
        let mut unsuperseded: Vec<String> = Vec::new();
        self.meta.write(|t| {
            for change in &batch.changes {
                match change {
                    Change::PutFact { memory, extras } => {
                        tx::upsert_memory(t, memory, None, extras)?;
                    }
                    Change::Touch { ids, at } => {
                        touched.extend(lifecycle::touch(t, ids, *at, &cfg)?);
                    }
                    Change::Forget { id, at } => {
                        tx::forget(t, id, *at)?;
                        unsuperseded.extend(lifecycle::after_forget(t, id)?);
                    }
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
            for (file, cursor) in &batch.cursors {
                tx::set_cursor(t, file, *cursor)?;
            }
            for issue in &batch.issues {
                tx::add_issue(t, issue)?;
            }
            Ok(())
        })?;
        // Facts whose superseding fact was forgotten are searchable again,
        // unless a later line of this batch superseded them once more.
        if !unsuperseded.is_empty() {
            let rows = self.meta.get_many(&unsuperseded, &Filter::all())?;
            for m in rows.values() {
                let superseded = self
                    .meta
                    .with_reader(|c| lifecycle::is_superseded(c, &m.id))?;
                self.text.upsert(&lifecycle::effective(m, superseded))?;
            }
            self.text.mark_dirty();
        }
        // Touched rows changed tier and expiry in SQLite; tantivy follows.
        if !touched.is_empty() {
            touched.sort();
            touched.dedup();
            let rows = self.meta.get_many(&touched, &Filter::all())?;
            for m in rows.values() {
                let superseded = self
                    .meta
                    .with_reader(|c| lifecycle::is_superseded(c, &m.id))?;
                self.text.upsert(&lifecycle::effective(m, superseded))?;
            }
            self.text.mark_dirty();
        }
        Ok(())
    }

    /// Commits pending text-index changes so searches see them.
    pub fn refresh(&self) -> Result<()> {
        self.text.commit()
    }

    /// Where catch-up must resume per journal file: the older of the SQLite and
    /// tantivy cursors.
    pub fn resume_cursors(&self) -> Result<std::collections::HashMap<String, Cursor>> {
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

    /// Text search under a filter; see [`TextIndex::search`].
    pub fn text_search(
        &self,
        terms: &[Term],
        filter: &Filter,
        all_terms: bool,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        self.text.search(terms, filter, all_terms, limit)
    }

    /// [`Index::text_search`] with a boost per term.
    pub fn text_search_weighted(
        &self,
        terms: &[(Term, f32)],
        filter: &Filter,
        all_terms: bool,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        self.text.search_weighted(terms, filter, all_terms, limit)
    }

    /// Documents containing each term, and the number of live documents.
    pub fn text_doc_freqs(&self, terms: &[Term]) -> Result<(Vec<u64>, u64)> {
        Ok((self.text.doc_freqs(terms)?, self.text.num_docs()))
    }

    /// Whether some searchable memory has no vector of the current model yet.
    pub fn vectors_pending(&self) -> Result<bool> {
        self.meta
            .with_reader(|c| Ok(!vector::pending(c, 1)?.is_empty()))
    }

    /// The model and dimension of the stored vectors, if any were stored.
    pub fn vector_model(&self) -> Result<Option<(String, usize)>> {
        self.meta.with_reader(vector::stored_model)
    }

    /// Number of memories waiting for a vector.
    pub fn vectors_pending_count(&self) -> Result<u64> {
        self.meta.with_reader(vector::pending_count)
    }

    /// Number of stored vectors.
    pub fn vector_count(&self) -> Result<u64> {
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
        let mut stored = 0u64;
        loop {
            let want = VECTOR_BATCH.min(limit.saturating_sub(stored as usize));
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
            self.meta.write(|t| vector::store(t, model, &rows))?;
            stored += rows.len() as u64;
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
        self.meta.with_reader(|c| {
            match vector::stored_model(c)? {
                None => return Ok(Vec::new()),
                Some((m, _)) if m != model => {
                    return Err(Error::EmbeddingUnavailable(format!(
                        "the index holds vectors of {m}, not of the configured {model}; \
                         start the writer (memd serve) or run memd reindex to re-embed"
                    )));
                }
                Some(_) => {}
            }
            vector::knn(c, query, filter, k)
        })
    }

    /// Bytes used by the index on disk.
    pub fn disk_bytes(&self) -> u64 {
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
