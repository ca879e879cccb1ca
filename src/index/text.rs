//! The tantivy full-text index: schema, upserts, and filtered BM25 queries.
//!
//! One tantivy document per searchable memory (fact or document chunk). The
//! `id` is stored (read for the hits returned) and a fast field (its ordinal
//! in a segment's sorted dictionary orders tied hits as the ids do, without
//! reading them); everything else needed to show a hit lives in SQLite. Raw
//! fields (`scene`, `privacy`, `stage`, `kind`, `subject`, `tier`, `origin`)
//! are indexed untokenised: a visibility filter is a query over them, whose
//! matching documents (cached per filter and index generation with the BM25
//! statistics, [`crate::index::scoped_stats`]) are the only ones the scoring
//! pass may collect.
//!
//! Writes never wait for a commit: upserts and removals are queued (a short
//! lock) and handed to tantivy's writer by the next commit, which holds the
//! writer, never the queue, while it writes segments and syncs them.
//! Commits are coalesced: searches that arrive during a commit wait for it,
//! and one of them then commits everything queued meanwhile; a search whose
//! writes an earlier commit already covered does not commit again. So an
//! acknowledged write is still visible to the next search (read-your-writes),
//! and the commit payload still carries exactly the journal cursors of what
//! it holds.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;
use std::sync::Mutex;

use std::ops::Bound;

use tantivy::directory::MmapDirectory;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, EnableScoring, FuzzyTermQuery, Occur,
    PhraseQuery, Query, RangeQuery, TermQuery, TermSetQuery, Weight,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TantivyDocument,
    TextFieldIndexing, TextOptions, Value,
};
use tantivy::{
    DocAddress, DocId, Index, IndexReader, IndexWriter, ReloadPolicy, Score, SegmentOrdinal,
    Term as TTerm,
};

use crate::error::Result;
use crate::index::filter::Filter;
use crate::index::scoped_stats::{ScopedStats, StatsCache};
use crate::index::tokenizer::{
    CHARS_TOKENIZER, MemdTokenizer, TEXT_TOKENIZER, Term, TermKind, WORDS_TOKENIZER, tokenize,
};
use crate::model::Memory;
use crate::store::journal::Cursor;

/// The expiry field (milliseconds), also read as a fast field.
const EXPIRES: &str = "expires";

/// The write time field (milliseconds), also read as a fast field: ties
/// in score go to the newer memory.
const TS: &str = "ts";

/// The script field: the memory's share of CJK words in thousandths
/// ([`crate::analysis::tokenizer::script_milli`]), a fast field only.
const SCRIPT: &str = "script";

/// How much a title match weighs against a body match.
const TITLE_BOOST: f32 = 1.5;

/// How much a match in the neighbouring turns of the same session weighs
/// (see [`crate::index::neighbours`]). Chosen by 5-fold cross-validation by
/// conversation on LoCoMo dev (0, 0.15, 0.3, 0.6, 1.0, 1.5 tried: 0.6–1.0
/// best, 1.5 worse).
const CONTEXT_BOOST: f32 = 0.6;

/// How much a match in the speaker's name weighs (0, 0.2, 0.5, 1.0 tried).
const SPEAKER_BOOST: f32 = 1.0;

/// How much a match in the event time's words (`8 May 2023`) weighs
/// (tried together with the speaker weight).
const WHEN_BOOST: f32 = 1.0;

/// Decompressed document-store blocks kept per segment (16 KiB each; a
/// block holds the ids of ~400 memories). A hit's id is read from the
/// store; with tantivy's default of 100 blocks, most reads at 100k memories
/// decompressed a block again and took a quarter of a search.
const DOC_STORE_CACHE_BLOCKS: usize = 512;

#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    doc_id: Field,
    origin: Field,
    scene: Field,
    privacy: Field,
    stage: Field,
    kind: Field,
    subject: Field,
    tier: Field,
    title: Field,
    body: Field,
    chars: Field,
    context: Field,
    speaker: Field,
    when: Field,
    words: Field,
    ts: Field,
    script: Field,
    expires: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = |tokenizer: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(IndexRecordOption::WithFreqs),
        )
    };
    // Title and body keep positions: a query found there as written, every
    // token adjacent and in order, is an exact phrase ([`TextIndex::phrase_search`]).
    let positional = |tokenizer: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
    };
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED | FAST),
        doc_id: b.add_text_field("doc_id", STRING),
        origin: b.add_text_field("origin", STRING),
        scene: b.add_text_field("scene", STRING),
        privacy: b.add_text_field("privacy", STRING),
        stage: b.add_text_field("stage", STRING),
        kind: b.add_text_field("kind", STRING),
        subject: b.add_text_field("subject", STRING),
        tier: b.add_text_field("tier", STRING),
        title: b.add_text_field("title", positional(TEXT_TOKENIZER)),
        body: b.add_text_field("body", positional(TEXT_TOKENIZER)),
        chars: b.add_text_field("chars", text(CHARS_TOKENIZER)),
        // Neighbouring turns, speaker and event date: lower-weight fields.
        context: b.add_text_field("context", text(TEXT_TOKENIZER)),
        speaker: b.add_text_field("speaker", text(TEXT_TOKENIZER)),
        when: b.add_text_field("when", text(TEXT_TOKENIZER)),
        // jieba words of title and body, beside the bigrams ([`TermKind::Segment`]).
        words: b.add_text_field("words", text(WORDS_TOKENIZER)),
        ts: b.add_i64_field(TS, INDEXED | FAST),
        script: b.add_i64_field(SCRIPT, FAST),
        // Milliseconds; `i64::MAX` for memories that never expire.
        expires: b.add_i64_field(EXPIRES, INDEXED | FAST),
    };
    (b.build(), fields)
}

/// A scored id from the text index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextHit {
    /// Memory id.
    pub(crate) id: String,
    /// BM25 score.
    pub(crate) score: f32,
    /// The memory's script: its share of CJK words in thousandths.
    pub(crate) script: i64,
}

/// A range of scripts (inclusive, in thousandths of CJK words, see
/// [`TextHit::script`]): a search given one collects only memories whose
/// script lies in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScriptBand {
    /// Lowest script admitted.
    pub(crate) lo: i64,
    /// Highest script admitted.
    pub(crate) hi: i64,
}

impl ScriptBand {
    fn admits(&self, script: i64) -> bool {
        (self.lo..=self.hi).contains(&script)
    }
}

/// A change waiting for the next commit.
enum Queued {
    /// Replace (or add) the document with this id.
    Upsert(String, TantivyDocument),
    /// Remove the document with this memory id.
    Remove(String),
    /// Remove every chunk of a document.
    RemoveDoc(String),
}

/// Changes and journal cursors queued for the next commit.
#[derive(Default)]
struct CommitState {
    /// Cursors of everything queued or added, committed or not.
    cursors: BTreeMap<String, Cursor>,
    /// Changes not yet handed to tantivy's writer, in order.
    queue: Vec<Queued>,
    /// Bumped by every change and cursor note: what a commit must reach.
    seq: u64,
    /// Bumped by every [`TextIndex::reset_writer`]: a batch queued before a
    /// reset lost its changes and must not note its cursors.
    epoch: u64,
}

/// Changes queued beyond this are handed to tantivy's writer by the thread
/// that queues them (bulk loads), so the queue never holds a whole corpus.
const QUEUE_LIMIT: usize = 4096;

/// Memory budget of the tantivy writer.
const WRITER_HEAP: usize = 32 * 1024 * 1024;

/// The full-text index. Readers are cheap and thread-safe; the writer is optional.
///
/// After a failure (a full disk kills tantivy's writer) [`TextIndex::reset_writer`]
/// drops the writer and its uncommitted changes and rewinds the applied cursors
/// to the last commit; a new writer is opened on next use, and catch-up
/// re-applies the journal from the rewound cursors.
pub(crate) struct TextIndex {
    index: Index,
    /// The directory under `index` (a handle to the same one), kept to
    /// forget the files each commit replaced: see [`TextIndex::forget_replaced_files`].
    files: MmapDirectory,
    /// The searcher generation whose replaced files were last forgotten
    /// (read-only indexes reload on their own, see [`TextIndex::searcher`]).
    forgotten_at: std::sync::atomic::AtomicU64,
    /// Taken only briefly, by writes (to queue) and by commits (to take the queue).
    commit_state: Mutex<CommitState>,
    /// Serialises commits; holds the `seq` of the last successful one.
    committed: Mutex<u64>,
    /// Visible sets per filter for the current searcher (BM25 statistics).
    stats: StatsCache,
    reader: IndexReader,
    /// `None` inside: to be (re)opened on next use.
    writer: Option<Mutex<Option<IndexWriter>>>,
    /// While an index that opened empty is being filled (a rebuild, a
    /// first start): hashes of every memory id handed to the writer so far,
    /// a superset of the ids it holds. An upsert of an id not in it has no
    /// document to replace, so it adds without a delete. Every delete is a
    /// term looked up again in each older segment when tantivy applies it
    /// (at each merge and commit): at 1M memories most of a rebuild's
    /// full-text time. `None` outside a bulk load ([`TextIndex::end_bulk_load`]).
    added: Mutex<Option<std::collections::HashSet<u64>>>,
    f: Fields,
}

impl Drop for TextIndex {
    /// Waits for tantivy's merge threads, so that no file under the index
    /// directory is still being written once the index is closed (a reindex
    /// in the same process removes that directory right after).
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            let writer = writer
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(writer) = writer
                && let Err(e) = writer.wait_merging_threads()
            {
                tracing::warn!(error = %e, "text index merges did not finish cleanly");
            }
        }
    }
}

impl TextIndex {
    /// Opens (creating if needed) the index in `dir`; `writable` also opens the writer.
    pub(crate) fn open(dir: &Path, writable: bool) -> Result<TextIndex> {
        let (schema, f) = schema();
        let exists = dir.join("meta.json").exists();
        if !exists && !writable {
            return Err(tantivy::TantivyError::OpenReadError(
                tantivy::directory::error::OpenReadError::FileDoesNotExist(dir.join("meta.json")),
            )
            .into());
        }
        if !exists {
            std::fs::create_dir_all(dir).map_err(tantivy::TantivyError::from)?;
        }
        let files = MmapDirectory::open(dir).map_err(tantivy::TantivyError::from)?;
        let index = if exists {
            Index::open(files.clone())?
        } else {
            Index::create(files.clone(), schema, tantivy::IndexSettings::default())?
        };
        index
            .tokenizers()
            .register(TEXT_TOKENIZER, MemdTokenizer::text());
        index
            .tokenizers()
            .register(CHARS_TOKENIZER, MemdTokenizer::chars());
        index
            .tokenizers()
            .register(WORDS_TOKENIZER, MemdTokenizer::words());
        let reader = index
            .reader_builder()
            .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
            .reload_policy(if writable {
                ReloadPolicy::Manual
            } else {
                ReloadPolicy::OnCommitWithDelay
            })
            .try_into()?;
        let writer = if writable {
            // On a full disk the writer (its lock file) cannot be created
            // yet: reads work without it, and it opens on first use.
            let writer = match index.writer_with_num_threads(1, WRITER_HEAP) {
                Ok(w) => Some(w),
                Err(e) => {
                    let e = crate::error::Error::from(e);
                    if !e.is_storage_full() {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, "full-text writer not opened (disk full); it opens once there is room");
                    None
                }
            };
            Some(Mutex::new(writer))
        } else {
            None
        };
        let metas = index.load_metas()?;
        // Empty: no segment at all (a new index), not merely no live document.
        let added = (writable && metas.segments.is_empty()).then(Default::default);
        let committed: BTreeMap<String, Cursor> = metas
            .payload
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or_default();
        Ok(TextIndex {
            index,
            files,
            forgotten_at: std::sync::atomic::AtomicU64::new(0),
            commit_state: Mutex::new(CommitState {
                cursors: committed,
                ..CommitState::default()
            }),
            committed: Mutex::new(0),
            stats: StatsCache::new(EXPIRES),
            reader,
            writer,
            added: Mutex::new(added),
            f,
        })
    }

    /// Ends the bulk load that began when the index opened empty: from here
    /// on every upsert deletes the id's previous document first (the set of
    /// ids would otherwise grow with every write for the life of the process).
    pub(crate) fn end_bulk_load(&self) {
        *self.added.lock().expect("added ids poisoned") = None;
    }

    /// The writer, opened again if a failure dropped it.
    fn writer(&self) -> Result<std::sync::MutexGuard<'_, Option<IndexWriter>>> {
        let w = self
            .writer
            .as_ref()
            .ok_or_else(|| crate::error::Error::Internal("text index opened read-only".into()))?;
        let mut guard = w.lock().expect("index writer poisoned");
        if guard.is_none() {
            *guard = Some(self.index.writer_with_num_threads(1, WRITER_HEAP)?);
            tracing::info!("full-text index writer reopened");
        }
        Ok(guard)
    }

    /// Drops the writer with its uncommitted changes (a failed commit may have
    /// killed it) and rewinds the applied cursors to the last commit, so that
    /// catch-up applies those journal lines again. A new writer is opened now
    /// if possible, else on next use.
    pub(crate) fn reset_writer(&self) -> Result<()> {
        let Some(slot) = &self.writer else {
            return Ok(());
        };
        let mut committed = self.committed.lock().expect("commit lock poisoned");
        let mut guard = slot.lock().expect("index writer poisoned");
        let mut state = self.commit_state.lock().expect("commit state poisoned");
        // Dropping releases the directory lock, so a new writer can take it.
        *guard = None;
        state.queue.clear();
        state.epoch += 1;
        state.cursors = self
            .index
            .load_metas()?
            .payload
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or_default();
        // Nothing is pending any more: the last commit is the state.
        *committed = state.seq;
        drop(state);
        *guard = Some(self.index.writer_with_num_threads(1, WRITER_HEAP)?);
        Ok(())
    }

    /// Queues a change for the next commit. Never waits for a commit in
    /// progress (writes never wait for readers), except to hand a long queue
    /// to tantivy's writer during bulk loads.
    fn enqueue(&self, change: Queued) -> Result<()> {
        if self.writer.is_none() {
            return Err(crate::error::Error::Internal(
                "text index opened read-only".into(),
            ));
        }
        let long = {
            let mut state = self.commit_state.lock().expect("commit state poisoned");
            state.queue.push(change);
            state.seq += 1;
            state.queue.len() >= QUEUE_LIMIT
        };
        if long {
            let mut guard = self.writer()?;
            let writer = guard.as_mut().expect("opened by writer()");
            self.drain(writer)?;
        }
        Ok(())
    }

    /// Hands every queued change to tantivy's writer, in order. The caller
    /// holds the writer, so changes reach it in the order they were queued.
    fn drain(&self, writer: &mut IndexWriter) -> Result<()> {
        let queue = std::mem::take(
            &mut self
                .commit_state
                .lock()
                .expect("commit state poisoned")
                .queue,
        );
        let f = &self.f;
        let mut added = self.added.lock().expect("added ids poisoned");
        for change in queue {
            match change {
                Queued::Upsert(id, doc) => {
                    // A hash collision only costs a needless delete.
                    let first = added.as_mut().is_some_and(|ids| ids.insert(id_hash(&id)));
                    if !first {
                        writer.delete_term(TTerm::from_field_text(f.id, &id));
                    }
                    writer.add_document(doc)?;
                }
                Queued::Remove(id) => {
                    writer.delete_term(TTerm::from_field_text(f.id, &id));
                }
                Queued::RemoveDoc(doc_id) => {
                    writer.delete_term(TTerm::from_field_text(f.doc_id, &doc_id));
                }
            }
        }
        Ok(())
    }

    /// Replaces (or adds) the document for `m`, with `context` (its
    /// neighbours' text, see [`crate::index::neighbours`]) in a field of its
    /// own. Visible after [`TextIndex::commit`].
    pub(crate) fn upsert(&self, m: &Memory, context: &str) -> Result<()> {
        let f = &self.f;
        let mut doc = TantivyDocument::default();
        doc.add_text(f.id, &m.id);
        if let Some(d) = &m.doc_id {
            doc.add_text(f.doc_id, d);
        }
        doc.add_text(f.origin, m.origin.as_str());
        doc.add_text(f.scene, m.scene.as_str());
        doc.add_text(f.privacy, m.privacy.as_str());
        doc.add_text(f.stage, m.stage.as_str());
        doc.add_text(f.kind, &m.kind);
        doc.add_text(f.subject, m.subject.as_str());
        if let Some(t) = m.tier {
            doc.add_text(f.tier, t.as_str());
        }
        if let Some(t) = &m.title {
            doc.add_text(f.title, t);
        }
        let body = indexed_body(m);
        let titled = format!("{}\n{body}", m.title.as_deref().unwrap_or(""));
        doc.add_text(f.words, &titled);
        doc.add_text(f.chars, &titled);
        doc.add_text(f.body, &body);
        if !context.is_empty() {
            doc.add_text(f.context, context);
        }
        if let Some(s) = &m.setting.speaker {
            doc.add_text(f.speaker, s);
        }
        if let Some(when) = when_words(m) {
            doc.add_text(f.when, when);
        }
        doc.add_i64(f.ts, m.ts.timestamp_millis());
        doc.add_i64(f.script, crate::analysis::tokenizer::script_milli(&titled));
        doc.add_i64(
            f.expires,
            m.expires_at.map_or(i64::MAX, |t| t.timestamp_millis()),
        );
        self.enqueue(Queued::Upsert(m.id.clone(), doc))
    }

    /// Removes the document with this memory id.
    pub(crate) fn remove(&self, id: &str) -> Result<()> {
        self.enqueue(Queued::Remove(id.to_string()))
    }

    /// Removes every chunk of a document.
    pub(crate) fn remove_doc(&self, doc_id: &str) -> Result<()> {
        self.enqueue(Queued::RemoveDoc(doc_id.to_string()))
    }

    /// The current writer epoch: take it before queueing a batch's changes
    /// and pass it to [`TextIndex::note_cursors`].
    pub(crate) fn epoch(&self) -> u64 {
        self.commit_state
            .lock()
            .expect("commit state poisoned")
            .epoch
    }

    /// Records that the journal has been applied up to these cursors; they are
    /// stored with the next commit. `epoch` is [`TextIndex::epoch`] from
    /// before the batch's changes were queued: if the writer was reset since
    /// (another thread's commit failed), those changes were dropped, so the
    /// cursors are refused and catch-up applies the lines again.
    pub(crate) fn note_cursors(&self, epoch: u64, cursors: &[(String, Cursor)]) -> Result<()> {
        let mut state = self.commit_state.lock().expect("commit state poisoned");
        if state.epoch != epoch {
            return Err(crate::error::Error::Internal(
                "the full-text writer was reset while a batch was applied".into(),
            ));
        }
        if cursors.is_empty() {
            return Ok(());
        }
        for (file, c) in cursors {
            state.cursors.insert(file.clone(), *c);
        }
        state.seq += 1;
        Ok(())
    }

    /// Marks uncommitted changes that carry no journal cursor (documents).
    pub(crate) fn mark_dirty(&self) {
        self.commit_state.lock().expect("commit state poisoned").seq += 1;
    }

    /// The journal cursors of everything added to the index, committed or not.
    /// Right after open these are the ones stored with the last commit.
    pub(crate) fn applied_cursors(&self) -> BTreeMap<String, Cursor> {
        self.commit_state
            .lock()
            .expect("commit state poisoned")
            .cursors
            .clone()
    }

    /// Makes every change queued before the call durable and visible to
    /// searches, storing the journal cursors in the commit payload. Does
    /// nothing when clean.
    ///
    /// Commits are coalesced: callers that arrive while one runs wait for
    /// it, and the first of them then commits everything queued meanwhile
    /// in one go; a caller whose changes an earlier commit already covered
    /// returns at once. Writes keep queueing during a commit (see
    /// [`TextIndex::upsert`]): a commit holds tantivy's writer, never the
    /// queue.
    pub(crate) fn commit(&self) -> Result<()> {
        let target = self.commit_state.lock().expect("commit state poisoned").seq;
        let mut committed = self.committed.lock().expect("commit lock poisoned");
        if *committed >= target {
            return Ok(());
        }
        {
            let mut guard = self.writer()?;
            let writer = guard.as_mut().expect("opened by writer()");
            // Cursors and the queue are taken together, under the writer:
            // every change that precedes a noted cursor is in this commit.
            let (payload, seq) = {
                let state = self.commit_state.lock().expect("commit state poisoned");
                let payload = serde_json::to_string(&state.cursors)
                    .map_err(|e| crate::error::Error::Internal(format!("cursor payload: {e}")))?;
                (payload, state.seq)
            };
            self.drain(writer)?;
            let mut prepared = writer.prepare_commit()?;
            prepared.set_payload(&payload);
            prepared.commit()?;
            self.reader.reload()?;
            self.forget_replaced_files();
            *committed = seq;
        }
        Ok(())
    }

    /// Deletes every document and commits the empty index with no journal
    /// cursors, so that catch-up replays every file from the start (a
    /// rebuild in place, see [`crate::index::Index::clear`]). Changes queued
    /// before are dropped, and a batch queued before cannot note its cursors.
    pub(crate) fn clear(&self) -> Result<()> {
        let mut committed = self.committed.lock().expect("commit lock poisoned");
        let mut guard = self.writer()?;
        let writer = guard.as_mut().expect("opened by writer()");
        let seq = {
            let mut state = self.commit_state.lock().expect("commit state poisoned");
            state.queue.clear();
            state.cursors.clear();
            state.epoch += 1;
            state.seq += 1;
            state.seq
        };
        writer.delete_all_documents()?;
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload("{}");
        prepared.commit()?;
        self.reader.reload()?;
        self.forget_replaced_files();
        *committed = seq;
        Ok(())
    }

    /// Checks the committed segments: every file is present with a valid
    /// checksum, and a searcher opens every segment.
    pub(crate) fn verify(&self) -> Result<()> {
        let damaged = self.index.validate_checksum()?;
        if !damaged.is_empty() {
            let mut names: Vec<String> = damaged.iter().map(|p| p.display().to_string()).collect();
            names.sort();
            return Err(crate::error::Error::Internal(format!(
                "full-text index files fail their checksum: {}",
                names.join(", ")
            )));
        }
        self.reader.reload()?;
        let searcher = self.reader.searcher();
        for segment in searcher.segment_readers() {
            for (field, entry) in self.index.schema().fields() {
                if entry.is_indexed() {
                    segment.inverted_index(field)?;
                }
            }
        }
        Ok(())
    }

    /// Drops the directory's record of files no reader maps any more.
    /// tantivy's memory-mapping directory keeps, by path, a weak handle to
    /// every file it ever mapped, and removes one only when the same path is
    /// opened again: each commit writes a new segment (and deletes files)
    /// under new names, so a server committing a few times a second grew by
    /// about 1.5 KiB a commit (heaptrack over 3,000 write-forget-search
    /// rounds: 4.4 MiB of paths and hash table). Asking the directory for
    /// its cache information prunes the dead handles first.
    fn forget_replaced_files(&self) {
        let _ = self.files.get_cache_info();
        let generation = self.reader.searcher().generation().generation_id();
        self.forgotten_at
            .store(generation, std::sync::atomic::Ordering::Relaxed);
    }

    /// The current searcher. A read-only index reloads on its own when
    /// another process commits, so the files its new generation replaced
    /// are forgotten here (see [`TextIndex::forget_replaced_files`]).
    fn searcher(&self) -> tantivy::Searcher {
        let searcher = self.reader.searcher();
        if self.writer.is_none()
            && self.forgotten_at.swap(
                searcher.generation().generation_id(),
                std::sync::atomic::Ordering::Relaxed,
            ) != searcher.generation().generation_id()
        {
            let _ = self.files.get_cache_info();
        }
        searcher
    }

    /// Number of live documents.
    pub(crate) fn num_docs(&self) -> u64 {
        self.searcher().num_docs()
    }

    /// The fields a term is looked up in, each with its weight.
    fn term_fields(&self, term: &Term) -> Vec<(Field, f32)> {
        let f = &self.f;
        match term.kind {
            // A lone CJK character matches inside longer runs through the chars field.
            TermKind::Single => vec![(f.chars, 1.0)],
            TermKind::Segment => vec![(f.words, 1.0)],
            // Neighbouring turns, speaker and date: lower-weight fields of their own.
            TermKind::Word | TermKind::Bigram => vec![
                (f.body, 1.0),
                (f.title, TITLE_BOOST),
                (f.context, CONTEXT_BOOST),
                (f.speaker, SPEAKER_BOOST),
                (f.when, WHEN_BOOST),
            ],
        }
    }

    /// `term` in every field it is looked up in, each clause weighted by
    /// the field's weight times `weight`.
    fn term_clauses(&self, term: &Term, weight: f32) -> Vec<Box<dyn Query>> {
        self.term_fields(term)
            .into_iter()
            .map(|(field, boost)| -> Box<dyn Query> {
                let q = Box::new(TermQuery::new(
                    TTerm::from_field_text(field, &term.text),
                    IndexRecordOption::WithFreqs,
                ));
                let boost = weight * boost;
                if boost == 1.0 {
                    q
                } else {
                    Box::new(BoostQuery::new(q, boost))
                }
            })
            .collect()
    }

    /// `term` matching in any of its fields, weighted by `weight`.
    fn term_query(&self, term: &Term, weight: f32) -> Box<dyn Query> {
        let mut clauses = self.term_clauses(term, weight);
        if clauses.len() == 1 {
            return clauses.remove(0);
        }
        Box::new(BooleanQuery::new(
            clauses.into_iter().map(|q| (Occur::Should, q)).collect(),
        ))
    }

    fn filter_query(&self, filter: &Filter) -> Option<Box<dyn Query>> {
        let f = &self.f;
        let field_of = |name: &str| match name {
            "scene" => f.scene,
            "privacy" => f.privacy,
            "stage" => f.stage,
            "kind" => f.kind,
            "subject" => f.subject,
            "origin" => f.origin,
            _ => unreachable!("Filter::field_sets names only known fields"),
        };
        let mut alternatives: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for scope in &filter.any_of {
            if Filter::is_unrestricted(scope) {
                return None; // one unrestricted alternative makes the whole filter unrestricted
            }
            let sets = Filter::field_sets(scope);
            let mut clauses: Vec<(Occur, Box<dyn Query>)> = sets
                .into_iter()
                .map(|(name, values)| {
                    let field = field_of(name);
                    let q: Box<dyn Query> = Box::new(TermSetQuery::new(
                        values.iter().map(|v| TTerm::from_field_text(field, v)),
                    ));
                    (Occur::Must, q)
                })
                .collect();
            if let Some(at) = scope.unexpired_at {
                let after = TTerm::from_field_i64(f.expires, at.timestamp_millis());
                clauses.push((
                    Occur::Must,
                    Box::new(RangeQuery::new(Bound::Excluded(after), Bound::Unbounded)),
                ));
            }
            alternatives.push((Occur::Should, Box::new(BooleanQuery::new(clauses))));
        }
        Some(Box::new(BooleanQuery::new(alternatives)))
    }

    /// Scores `terms` under `filter`. `all_terms` requires every term but jieba
    /// words (AND pass);
    /// otherwise any term may match (OR pass). Ties are broken by id.
    #[cfg(test)]
    pub(crate) fn search(
        &self,
        terms: &[Term],
        filter: &Filter,
        all_terms: bool,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        let weighted: Vec<(Term, f32)> = terms.iter().map(|t| (t.clone(), 1.0)).collect();
        self.search_weighted(&weighted, filter, all_terms, None, limit)
    }

    /// Whether any document of the index (visible or not, deleted ones until
    /// their segment merges) holds a CJK character: a cheap look at the
    /// chars field's term dictionaries, used only to skip work that could
    /// find nothing (the cross-lingual pass of a Latin-script query).
    pub(crate) fn has_cjk(&self) -> Result<bool> {
        for segment in self.searcher().segment_readers() {
            if segment.inverted_index(self.f.chars)?.terms().num_terms() > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Documents visible under `filter` containing each term (the chars field
    /// for lone CJK characters), and the number of visible documents. Counts
    /// never include memories the filter hides (see [`crate::index::scoped_stats`]).
    pub(crate) fn doc_freqs(&self, terms: &[Term], filter: &Filter) -> Result<(Vec<u64>, u64)> {
        let searcher = self.searcher();
        let fq = self.filter_query(filter);
        let stats = self.stats.scoped(&searcher, filter, fq.as_deref())?;
        let dfs = terms
            .iter()
            .map(|t| {
                let field = match t.kind {
                    TermKind::Single => self.f.chars,
                    TermKind::Segment => self.f.words,
                    TermKind::Word | TermKind::Bigram => self.f.body,
                };
                Ok(stats.count(&TTerm::from_field_text(field, &t.text))?)
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok((dfs, stats.total_num_docs()?))
    }

    /// Whether some document visible under `filter` may hold one of `terms`
    /// in its title or text: a word or bigram in the title or body field
    /// (the body also holds the tags), a jieba word in the words field, a
    /// lone character in the chars field. `false` means no visible memory
    /// holds any of them, as [`crate::analysis::tokenizer::tokenize`] and
    /// `cjk_words` cut its title and text.
    pub(crate) fn holds_any(&self, terms: &[Term], filter: &Filter) -> Result<bool> {
        if terms.is_empty() || filter.is_empty() {
            return Ok(false);
        }
        let searcher = self.searcher();
        let fq = self.filter_query(filter);
        let stats = self.stats.scoped(&searcher, filter, fq.as_deref())?;
        for t in terms {
            let fields: &[Field] = match t.kind {
                TermKind::Single => &[self.f.chars],
                TermKind::Segment => &[self.f.words],
                TermKind::Word | TermKind::Bigram => &[self.f.body, self.f.title],
            };
            for field in fields {
                if stats.count(&TTerm::from_field_text(*field, &t.text))? > 0 {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// [`TextIndex::search`] with a boost per term (1.0 is neutral), and
    /// only among memories whose script lies in `band` when given.
    pub(crate) fn search_weighted(
        &self,
        terms: &[(Term, f32)],
        filter: &Filter,
        all_terms: bool,
        band: Option<ScriptBand>,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        if terms.is_empty() || filter.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let text: Vec<(Occur, Box<dyn Query>)> = if all_terms {
            terms
                .iter()
                .map(|(t, w)| {
                    // A jieba word only adds score: the bigrams it is made of
                    // already decide whether a memory passes AND.
                    let occur = if t.kind == TermKind::Segment {
                        Occur::Should
                    } else {
                        Occur::Must
                    };
                    (occur, self.term_query(t, *w))
                })
                .collect()
        } else {
            // One flat union of term-in-field clauses (the same weights and
            // the same sum as a union of per-term unions), so tantivy can
            // skip blocks that cannot reach the threshold (block-max WAND)
            // instead of scoring every match.
            terms
                .iter()
                .flat_map(|(t, w)| self.term_clauses(t, *w))
                .map(|q| (Occur::Should, q))
                .collect()
        };
        let query = BooleanQuery::new(text);
        let fq = self.filter_query(filter);
        let searcher = self.searcher();
        // BM25 statistics over what the filter admits only: a score must not
        // depend on memories the caller cannot read. The same statistics
        // hold the documents the filter admits, which is how the filter is
        // applied: it selects and never scores, and costs one bit test per
        // candidate instead of a second query intersected with the text.
        let stats = self.stats.scoped(&searcher, filter, fq.as_deref())?;
        let weight = query.weight(EnableScoring::enabled_from_statistics_provider(
            &stats, &searcher,
        ))?;
        top_visible(&searcher, weight.as_ref(), &stats, band, limit)
    }

    /// The index terms a query word may stand for (see
    /// [`crate::search::fuzzy`]): those of the title and body fields within
    /// edit distance 1 of `word` (a transposition counts as one) when
    /// `fuzzy`, those starting with it when `prefix`; `word` itself left
    /// out. Each comes with how many memories visible under `filter` hold it
    /// (in the body or the title, whichever more), most held first, then in
    /// term order; terms no visible memory holds are left out.
    ///
    /// The dictionaries walked hold every memory's terms, hidden ones too;
    /// each candidate is then counted through the filter's statistics
    /// alone, and none is cut before it is counted, so the answer is the
    /// one an index of the visible memories alone would give.
    pub(crate) fn expansions(
        &self,
        word: &str,
        fuzzy: bool,
        prefix: bool,
        filter: &Filter,
    ) -> Result<Vec<(String, u64)>> {
        if filter.is_empty() || !(fuzzy || prefix) {
            return Ok(Vec::new());
        }
        let searcher = self.searcher();
        let fields = [self.f.body, self.f.title];
        let mut candidates = std::collections::BTreeSet::new();
        for field in fields {
            let term = TTerm::from_field_text(field, word);
            let queries = [
                (fuzzy, FuzzyTermQuery::new(term.clone(), 1, true)),
                (prefix, FuzzyTermQuery::new_prefix(term, 0, true)),
            ];
            for (_, query) in queries.iter().filter(|(on, _)| *on) {
                for segment in searcher.segment_readers() {
                    let inverted = segment.inverted_index(field)?;
                    let mut stream = inverted
                        .terms()
                        .search(query.automaton()?)
                        .into_stream()
                        .map_err(tantivy::TantivyError::from)?;
                    while stream.advance() {
                        if let Ok(t) = std::str::from_utf8(stream.key())
                            && t != word
                        {
                            candidates.insert(t.to_string());
                        }
                    }
                }
            }
        }
        let fq = self.filter_query(filter);
        let stats = self.stats.scoped(&searcher, filter, fq.as_deref())?;
        let mut held = Vec::new();
        for c in candidates {
            let mut n = 0;
            for field in fields {
                n = n.max(stats.count(&TTerm::from_field_text(field, &c))?);
            }
            if n > 0 {
                held.push((c, n));
            }
        }
        held.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(held)
    }

    /// The memories (visible under `filter`) whose title or body holds
    /// `tokens` as written: every token adjacent to the next, in order
    /// (stop words included, since the index keeps them). Best first by the
    /// phrase's BM25; empty for fewer than two tokens.
    pub(crate) fn phrase_search(
        &self,
        tokens: &[Term],
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        if tokens.len() < 2 || filter.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let phrase = |field: Field| -> Box<dyn Query> {
            Box::new(PhraseQuery::new(
                tokens
                    .iter()
                    .map(|t| TTerm::from_field_text(field, &t.text))
                    .collect(),
            ))
        };
        let query = BooleanQuery::new(vec![
            (Occur::Should, phrase(self.f.body)),
            (Occur::Should, phrase(self.f.title)),
        ]);
        let fq = self.filter_query(filter);
        let searcher = self.searcher();
        let stats = self.stats.scoped(&searcher, filter, fq.as_deref())?;
        let weight = query.weight(EnableScoring::enabled_from_statistics_provider(
            &stats, &searcher,
        ))?;
        top_visible(&searcher, weight.as_ref(), &stats, None, limit)
    }

    /// The length of an average visible body in tokens (BM25's `avgdl`).
    pub(crate) fn average_body_tokens(&self, filter: &Filter) -> Result<f32> {
        let searcher = self.searcher();
        let fq = self.filter_query(filter);
        let stats = self.stats.scoped(&searcher, filter, fq.as_deref())?;
        let docs = stats.total_num_docs()?;
        if docs == 0 {
            return Ok(0.0);
        }
        Ok(stats.total_num_tokens(self.f.body)? as f32 / docs as f32)
    }
}

/// What the body field indexes of `m`: its text, then each tag on a line of its own.
fn indexed_body(m: &Memory) -> String {
    let mut body = m.text.clone();
    for tag in &m.tags {
        body.push('\n');
        body.push_str(tag);
    }
    body
}

/// Whether [`TextIndex::phrase_search`] finds `m` for `tokens`: its title
/// or its body (as indexed) holds them adjacent and in order. Computed
/// from the memory, without the index.
pub(crate) fn holds_phrase(m: &Memory, tokens: &[Term]) -> bool {
    let holds = |text: &str| {
        let terms = tokenize(text);
        !tokens.is_empty()
            && terms
                .windows(tokens.len())
                .any(|w| w.iter().zip(tokens).all(|(a, b)| a.text == b.text))
    };
    m.title.as_deref().is_some_and(holds) || holds(&indexed_body(m))
}

/// The hash [`TextIndex`] keeps of an id during a bulk load.
fn id_hash(id: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id)
}

/// A candidate of one segment: its quantised score, its write time, the
/// ordinal of its id in the segment's sorted id dictionary, its document
/// number and its script. Ordered worst first, so that a max-heap of them
/// has its worst candidate on top: a lower score is worse, at equal scores
/// an older memory is, and at equal times a greater id is.
#[derive(PartialEq, Clone, Copy)]
struct Candidate(Score, i64, u64, DocId, i64);

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .0
            .total_cmp(&self.0)
            .then_with(|| other.1.cmp(&self.1))
            .then_with(|| self.2.cmp(&other.2))
            .then_with(|| self.3.cmp(&other.3))
    }
}

/// A score ordered by [`f32::total_cmp`], for the heap of the best scores seen.
#[derive(PartialEq, Clone, Copy)]
struct Total(Score);

impl Eq for Total {}

impl PartialOrd for Total {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Total {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The `limit` best documents of `weight` among those `stats` admits (live
/// documents the caller's filter selects) and whose script lies in `band`,
/// best first: by quantised score (see [`quantise`]), ties by write time
/// (newer first), then by id.
///
/// Ties are decided without reading the ids of the tied documents: within a
/// segment, the write time is a fast field and the id's ordinal in the
/// segment's sorted id dictionary (a fast field) orders them as the ids do,
/// so each segment keeps its `limit` best by (score, time, ordinal) in one
/// scoring pass, however many documents tie. Only the heads of those lists
/// are then read from the document store, to merge the segments: at most
/// `limit` hits plus one per segment.
///
/// tantivy hands over only documents scoring at least the `limit`-th best
/// visible quantised score seen so far (documents that cannot enter are
/// skipped unscored where the query allows it); documents scoring exactly
/// that may still win on their time or id. Hidden documents never raise the
/// threshold.
fn top_visible(
    searcher: &tantivy::Searcher,
    weight: &dyn Weight,
    stats: &ScopedStats<'_>,
    band: Option<ScriptBand>,
    limit: usize,
) -> Result<Vec<TextHit>> {
    let schema = searcher.schema();
    let id_field = schema.get_field("id")?;
    // The `limit` best quantised scores seen, over all segments (a min-heap).
    let mut best: BinaryHeap<Reverse<Total>> = BinaryHeap::with_capacity(limit + 1);
    let mut lists: Vec<(SegmentOrdinal, Vec<Candidate>)> = Vec::new();
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        let ord = ord as SegmentOrdinal;
        if !stats.admits_any(ord) {
            continue;
        }
        let fast = reader.fast_fields();
        let missing = || {
            crate::error::Error::Internal(
                "full-text segment without its fast fields; run `memd reindex`".into(),
            )
        };
        let ids = fast.str("id")?.ok_or_else(missing)?;
        let ords = ids.ords();
        let times = fast.i64(TS)?;
        let scripts = fast.i64(SCRIPT)?;
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(limit + 1);
        let mut threshold = floor_of(&best, limit);
        weight.for_each_pruning(threshold, reader, &mut |doc, score| {
            if !stats.admits(ord, doc) {
                return threshold;
            }
            let script = scripts.first(doc).unwrap_or(500);
            if band.is_some_and(|b| !b.admits(script)) {
                return threshold;
            }
            let q = quantise(score);
            let c = Candidate(
                q,
                times.first(doc).unwrap_or(i64::MIN),
                ords.first(doc).unwrap_or(u64::MAX),
                doc,
                script,
            );
            if heap.len() < limit {
                heap.push(c);
            } else if heap.peek().is_some_and(|worst| c < *worst) {
                heap.pop();
                heap.push(c);
            }
            best.push(Reverse(Total(q)));
            if best.len() > limit {
                best.pop();
            }
            threshold = floor_of(&best, limit);
            threshold
        })?;
        if !heap.is_empty() {
            // Ascending order of `Candidate` is best first.
            lists.push((ord, heap.into_sorted_vec()));
        }
    }
    merge_segments(searcher, id_field, lists, limit)
}

/// The threshold handed to tantivy: just below the `limit`-th best
/// quantised score seen, so that documents scoring exactly that still come
/// (they may win on their time or id); no threshold before `limit` were seen.
fn floor_of(best: &BinaryHeap<Reverse<Total>>, limit: usize) -> Score {
    match best.peek() {
        Some(Reverse(Total(s))) if best.len() >= limit && *s > 0.0 => s.next_down(),
        _ => Score::MIN,
    }
}

/// Merges per-segment lists (each best first, ties by time, then id) into
/// the `limit` best hits, reading an id from the document store only for
/// hits taken and for list heads that tie with the best remaining score and time.
fn merge_segments(
    searcher: &tantivy::Searcher,
    id_field: Field,
    lists: Vec<(SegmentOrdinal, Vec<Candidate>)>,
    limit: usize,
) -> Result<Vec<TextHit>> {
    let read_id = |seg: SegmentOrdinal, doc: DocId| -> Result<String> {
        let d: TantivyDocument = searcher.doc(DocAddress::new(seg, doc))?;
        Ok(d.get_first(id_field)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string())
    };
    let mut pos = vec![0usize; lists.len()];
    let mut head_ids: Vec<Option<String>> = vec![None; lists.len()];
    let mut hits = Vec::with_capacity(limit);
    while hits.len() < limit {
        let heads = || {
            lists
                .iter()
                .enumerate()
                .filter_map(|(i, (_, l))| l.get(pos[i]).map(|c| (i, (Total(c.0), c.1))))
        };
        let Some(top) = heads().map(|(_, key)| key).max() else {
            break;
        };
        let tied: Vec<usize> = heads()
            .filter(|(_, key)| *key == top)
            .map(|(i, _)| i)
            .collect();
        let mut pick: Option<usize> = None;
        for &i in &tied {
            if head_ids[i].is_none() {
                let c = lists[i].1[pos[i]];
                head_ids[i] = Some(read_id(lists[i].0, c.3)?);
            }
            if pick.is_none_or(|p| head_ids[i] < head_ids[p]) {
                pick = Some(i);
            }
        }
        let i = pick.expect("a best head exists");
        let c = lists[i].1[pos[i]];
        hits.push(TextHit {
            id: head_ids[i].take().expect("read above"),
            score: c.0,
            script: c.4,
        });
        pos[i] += 1;
    }
    Ok(hits)
}

/// The words of a memory's event time for the `when` field: the time as
/// given, and its date spelled out (`8 May 2023 2023-05-08`) when parsed.
fn when_words(m: &Memory) -> Option<String> {
    let s = &m.setting;
    let spelled = s
        .time_at
        .map(|t| t.format("%-d %B %Y %Y-%m-%d").to_string());
    match (&s.time, spelled) {
        (Some(t), Some(d)) => Some(format!("{t} {d}")),
        (Some(t), None) => Some(t.clone()),
        (None, d) => d,
    }
}

/// Low mantissa bits cleared from BM25 scores (12 significant bits remain,
/// a relative step of 2.4e-4).
const NOISE_BITS: u32 = 11;

/// A BM25 score without its last bits. tantivy adds the per-term scores of a
/// document in an order that depends on the segment layout (which posting
/// list ends first), so the same document can score a few ulps apart in an
/// incrementally built index and a rebuilt one; quantised, equal documents
/// tie exactly and are ordered by id.
pub(crate) fn quantise(score: f32) -> f32 {
    f32::from_bits(score.to_bits() & !((1u32 << NOISE_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use chrono::{DateTime, Utc};

    use super::*;
    use crate::index::filter::Scope;
    use crate::model::{Origin, Privacy, Scene, Stage, Subject};

    /// How long a test waits for something that must happen, not a timing assertion.
    const BOUND: Duration = Duration::from_secs(30);

    fn memory(id: &str, scene: &str, text: &str, expires_ms: Option<i64>) -> Memory {
        Memory {
            id: id.into(),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
            scene: Scene::parse(scene).unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            text: text.into(),
            tags: Vec::new(),
            privacy: Privacy::Normal,
            subject: Subject::Owner,
            source: "test".into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            expires_at: expires_ms.map(|ms| DateTime::from_timestamp_millis(ms).unwrap()),
            setting: Default::default(),
        }
    }

    /// The indexed form of one word (normalised and stemmed as the index does).
    fn word(w: &str) -> Term {
        let mut terms = crate::index::tokenizer::tokenize(w);
        assert_eq!(terms.len(), 1, "{w} is one term");
        terms.remove(0)
    }

    fn ids(hits: &[TextHit]) -> Vec<&str> {
        hits.iter().map(|h| h.id.as_str()).collect()
    }

    fn at(ms: i64) -> Filter {
        Filter::scope(Scope {
            unexpired_at: DateTime::<Utc>::from_timestamp_millis(ms),
            ..Scope::default()
        })
    }

    /// Red team: a memory matching more of the caller's scopes (or more
    /// filter clauses) scored a constant more; the filter must select only.
    #[test]
    fn the_filter_selects_and_never_scores() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        idx.upsert(&memory("a", "main", "heron pond", None), "")
            .unwrap();
        idx.upsert(&memory("b", "other", "heron pond", None), "")
            .unwrap();
        idx.commit().unwrap();
        let both = Filter {
            any_of: vec![
                Scope {
                    scenes: vec![Scene::parse("main").unwrap()],
                    ..Scope::default()
                },
                Scope {
                    privacy: vec![Privacy::Normal],
                    unexpired_at: DateTime::<Utc>::from_timestamp_millis(1),
                    ..Scope::default()
                },
            ],
        };
        let hits = idx.search(&[word("heron")], &both, true, 10).unwrap();
        assert_eq!(ids(&hits), vec!["a", "b"]);
        assert_eq!(hits[0].score, hits[1].score, "{hits:?}");
        let unfiltered = idx
            .search(&[word("heron")], &Filter::all(), true, 10)
            .unwrap();
        assert_eq!(hits[0].score, unfiltered[0].score);
    }

    #[test]
    fn changes_queue_while_a_commit_holds_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let cursor = Cursor {
            offset: 42,
            lines: 1,
        };
        std::thread::scope(|s| {
            // What a commit in progress holds.
            let held = idx.writer().unwrap();
            let (done_tx, done_rx) = mpsc::channel();
            let idx = &idx;
            let writing = s.spawn(move || {
                let out = idx
                    .upsert(&memory("a", "main", "the lighthouse keeper", None), "")
                    .and_then(|()| idx.note_cursors(0, &[("dev/2026-11.jsonl".into(), cursor)]));
                let _ = done_tx.send(());
                out
            });
            let queued = done_rx.recv_timeout(BOUND);
            // Release before asserting, so a failure never leaves the thread stuck.
            drop(held);
            assert_eq!(queued, Ok(()), "the change waited for the commit");
            writing.join().unwrap().unwrap();
        });
        assert!(
            idx.search(&[word("lighthouse")], &Filter::all(), true, 10)
                .unwrap()
                .is_empty(),
            "queued changes are not visible before a commit"
        );
        idx.commit().unwrap();
        let hits = idx
            .search(&[word("lighthouse")], &Filter::all(), true, 10)
            .unwrap();
        assert_eq!(ids(&hits), ["a"]);
        drop(idx);
        let reopened = TextIndex::open(dir.path(), true).unwrap();
        assert_eq!(
            reopened.applied_cursors().get("dev/2026-11.jsonl"),
            Some(&cursor),
            "the commit stored the cursors of what it committed"
        );
    }

    #[test]
    fn a_queued_upsert_replaces_and_a_queued_remove_removes() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        idx.upsert(&memory("a", "main", "plum jam", None), "")
            .unwrap();
        idx.upsert(&memory("b", "main", "plum cake", None), "")
            .unwrap();
        idx.commit().unwrap();
        idx.upsert(&memory("a", "main", "apple jam", None), "")
            .unwrap();
        idx.remove("b").unwrap();
        idx.commit().unwrap();
        let plum = idx
            .search(&[word("plum")], &Filter::all(), true, 10)
            .unwrap();
        assert!(plum.is_empty(), "{plum:?}");
        let apple = idx
            .search(&[word("apple")], &Filter::all(), true, 10)
            .unwrap();
        assert_eq!(ids(&apple), ["a"]);
        assert_eq!(idx.num_docs(), 1);
    }

    #[test]
    fn a_bulk_load_adds_without_deletes_and_still_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        assert!(
            idx.added.lock().unwrap().is_some(),
            "an empty index bulk-loads"
        );
        let only = |idx: &TextIndex, w: &str| {
            ids(&idx.search(&[word(w)], &Filter::all(), true, 10).unwrap())
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        // The same id twice before any commit: the second replaces the first.
        idx.upsert(&memory("a", "main", "plum jam", None), "")
            .unwrap();
        idx.upsert(&memory("a", "main", "apple jam", None), "")
            .unwrap();
        idx.commit().unwrap();
        assert!(only(&idx, "plum").is_empty());
        assert_eq!(only(&idx, "apple"), ["a"]);
        assert_eq!(idx.num_docs(), 1);
        idx.end_bulk_load();
        assert!(idx.added.lock().unwrap().is_none());
        idx.upsert(&memory("a", "main", "pear jam", None), "")
            .unwrap();
        idx.commit().unwrap();
        assert_eq!(only(&idx, "pear"), ["a"]);
        assert_eq!(idx.num_docs(), 1);
        drop(idx);
        // An index with segments never bulk-loads.
        let idx = TextIndex::open(dir.path(), true).unwrap();
        assert!(idx.added.lock().unwrap().is_none());
        idx.upsert(&memory("a", "main", "fig jam", None), "")
            .unwrap();
        idx.commit().unwrap();
        assert_eq!(only(&idx, "fig"), ["a"]);
        assert_eq!(idx.num_docs(), 1);
    }

    #[test]
    fn a_long_queue_goes_to_the_writer_without_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        for i in 0..QUEUE_LIMIT + 1 {
            idx.upsert(&memory(&format!("m{i:05}"), "main", "bulk", None), "")
                .unwrap();
        }
        assert!(
            idx.commit_state.lock().unwrap().queue.len() < QUEUE_LIMIT,
            "the queue was handed over"
        );
        idx.commit().unwrap();
        assert_eq!(idx.num_docs(), QUEUE_LIMIT as u64 + 1);
    }

    #[test]
    fn a_reset_drops_the_queue_and_rewinds_to_the_last_commit() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let file = "dev/2026-11.jsonl".to_string();
        let first = Cursor {
            offset: 10,
            lines: 1,
        };
        idx.upsert(&memory("a", "main", "first", None), "").unwrap();
        idx.note_cursors(idx.epoch(), &[(file.clone(), first)])
            .unwrap();
        idx.commit().unwrap();
        idx.upsert(&memory("b", "main", "second", None), "")
            .unwrap();
        idx.note_cursors(
            idx.epoch(),
            &[(
                file.clone(),
                Cursor {
                    offset: 20,
                    lines: 2,
                },
            )],
        )
        .unwrap();
        idx.reset_writer().unwrap();
        assert_eq!(idx.applied_cursors().get(&file), Some(&first));
        idx.commit().unwrap();
        assert_eq!(
            idx.num_docs(),
            1,
            "the dropped change is applied again by catch-up, not by the queue"
        );
    }

    #[test]
    fn a_batch_queued_across_a_reset_cannot_note_its_cursors() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let file = "dev/2026-11.jsonl".to_string();
        // The writer thread takes the epoch and queues its change...
        let epoch = idx.epoch();
        idx.upsert(&memory("a", "main", "queued before the reset", None), "")
            .unwrap();
        // ...another thread's commit fails and resets the writer...
        idx.reset_writer().unwrap();
        // ...so the batch's cursors are refused: its change was dropped.
        let later = Cursor {
            offset: 30,
            lines: 1,
        };
        assert!(idx.note_cursors(epoch, &[(file.clone(), later)]).is_err());
        assert_eq!(
            idx.applied_cursors().get(&file),
            None,
            "catch-up starts over"
        );
        idx.commit().unwrap();
        assert_eq!(idx.num_docs(), 0);
        // A batch started after the reset notes as usual.
        idx.note_cursors(idx.epoch(), &[(file.clone(), later)])
            .unwrap();
        assert_eq!(idx.applied_cursors().get(&file), Some(&later));
    }

    #[test]
    fn cached_statistics_follow_commits_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        idx.upsert(&memory("a", "main", "harbour boats", None), "")
            .unwrap();
        idx.upsert(&memory("b", "group:x", "harbour ships", None), "")
            .unwrap();
        idx.commit().unwrap();
        let main = Filter::scope(Scope {
            scenes: vec![Scene::parse("main").unwrap()],
            ..Scope::default()
        });
        let terms = [word("harbour")];
        assert_eq!(idx.doc_freqs(&terms, &main).unwrap(), (vec![1], 1));
        assert_eq!(idx.doc_freqs(&terms, &Filter::all()).unwrap(), (vec![2], 2));
        // Asked again (from the cache), the same answers.
        assert_eq!(idx.doc_freqs(&terms, &main).unwrap(), (vec![1], 1));
        idx.upsert(&memory("c", "main", "harbour lights", None), "")
            .unwrap();
        idx.commit().unwrap();
        assert_eq!(
            idx.doc_freqs(&terms, &main).unwrap(),
            (vec![2], 2),
            "a commit makes new statistics"
        );
        // Scores from the cache equal scores computed afresh.
        let cached = idx.search(&terms, &main, true, 10).unwrap();
        let searcher = idx.reader.searcher();
        let fresh = crate::index::scoped_stats::ScopedStats::new(
            &searcher,
            idx.filter_query(&main).as_deref(),
        )
        .unwrap();
        let cached_stats = idx
            .stats
            .scoped(&searcher, &main, idx.filter_query(&main).as_deref())
            .unwrap();
        let body = TTerm::from_field_text(idx.f.body, &word("harbour").text);
        assert_eq!(
            fresh.doc_freq(&body).unwrap(),
            cached_stats.doc_freq(&body).unwrap()
        );
        assert_eq!(
            fresh.total_num_tokens(idx.f.body).unwrap(),
            cached_stats.total_num_tokens(idx.f.body).unwrap()
        );
        assert_eq!(ids(&cached), ["a", "c"]);
    }

    #[test]
    fn cached_statistics_see_a_memory_expire() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let t = 1_800_000_000_000;
        idx.upsert(&memory("a", "main", "tide table", Some(t)), "")
            .unwrap();
        idx.upsert(&memory("b", "main", "tide clock", None), "")
            .unwrap();
        idx.commit().unwrap();
        let terms = [word("tide")];
        // Instants before the expiry share an entry and see both.
        assert_eq!(idx.doc_freqs(&terms, &at(t - 1000)).unwrap(), (vec![2], 2));
        assert_eq!(idx.doc_freqs(&terms, &at(t - 1)).unwrap(), (vec![2], 2));
        // From the expiry on (`expires > instant`), only the other one.
        assert_eq!(idx.doc_freqs(&terms, &at(t)).unwrap(), (vec![1], 1));
        assert_eq!(idx.doc_freqs(&terms, &at(t + 1)).unwrap(), (vec![1], 1));
        assert_eq!(idx.doc_freqs(&terms, &at(t - 1)).unwrap(), (vec![2], 2));
        let hits = idx.search(&terms, &at(t + 5), true, 10).unwrap();
        assert_eq!(ids(&hits), ["b"]);
    }

    /// Red team 3: hidden documents that outscore every visible one never
    /// raise the pruning threshold, across segments and commits (the cached
    /// visible set is per generation: deletes, updates and merges renumber
    /// documents and segments), and an update that hides or shows a memory
    /// is followed at once.
    #[test]
    fn hidden_documents_never_crowd_out_visible_ones_across_commits() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let main = Filter::scope(Scope {
            scenes: vec![Scene::parse("main").unwrap()],
            ..Scope::default()
        });
        let terms = [word("heron")];
        // Several segments: hidden documents scoring higher in each.
        for seg in 0..4 {
            for i in 0..50 {
                idx.upsert(
                    &memory(
                        &format!("h{seg}-{i:02}"),
                        "group:x",
                        "heron heron heron heron",
                        None,
                    ),
                    "",
                )
                .unwrap();
            }
            idx.upsert(
                &memory(
                    &format!("v{seg}"),
                    "main",
                    "heron and a long tail of other words",
                    None,
                ),
                "",
            )
            .unwrap();
            idx.commit().unwrap();
        }
        let hits = idx.search(&terms, &main, true, 3).unwrap();
        assert_eq!(ids(&hits), ["v0", "v1", "v2"]);
        assert_eq!(
            ids(&idx.search(&terms, &main, true, 10).unwrap()),
            ["v0", "v1", "v2", "v3"]
        );
        // v1 moves to the hidden scene, h2-07 to the visible one, v0 goes.
        idx.upsert(&memory("v1", "group:x", "heron", None), "")
            .unwrap();
        idx.upsert(
            &memory("h2-07", "main", "heron heron heron heron", None),
            "",
        )
        .unwrap();
        idx.remove("v0").unwrap();
        idx.commit().unwrap();
        let hits = idx.search(&terms, &main, true, 10).unwrap();
        assert_eq!(ids(&hits), ["h2-07", "v2", "v3"]);
        assert_eq!(idx.doc_freqs(&terms, &main).unwrap(), (vec![3], 3));
        // Merged into one segment: ordinals and document numbers change.
        {
            let mut guard = idx.writer().unwrap();
            let writer = guard.as_mut().unwrap();
            let segments = idx.index.searchable_segment_ids().unwrap();
            writer.merge(&segments).wait().unwrap();
        }
        idx.reader.reload().unwrap();
        assert_eq!(idx.reader.searcher().segment_readers().len(), 1);
        let merged = idx.search(&terms, &main, true, 10).unwrap();
        assert_eq!(merged, hits);
        assert_eq!(idx.doc_freqs(&terms, &main).unwrap(), (vec![3], 3));
    }

    /// Many more documents tie than the limit, spread over several segments
    /// and written in an order unrelated to their ids: the hits are the
    /// smallest ids of the best score, whatever the segment layout, as a
    /// full sort by (score, id) gives them.
    #[test]
    fn ties_beyond_the_limit_are_decided_by_id_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let mut expected: Vec<String> = Vec::new();
        // A scrambled order of 300 ids (7 is coprime with 300).
        for (n, i) in (0..300).map(|i| (i * 7) % 300).enumerate() {
            let id = format!("m{i:03}");
            // Every third memory is longer, so it scores lower.
            let text = if i % 3 == 0 {
                "otter by the weir at dusk"
            } else {
                "otter"
            };
            if i % 3 != 0 {
                expected.push(id.clone());
            }
            idx.upsert(&memory(&id, "main", text, None), "").unwrap();
            if n % 70 == 69 {
                idx.commit().unwrap();
            }
        }
        idx.commit().unwrap();
        assert!(idx.reader.searcher().segment_readers().len() > 2);
        expected.sort();
        for limit in [1, 5, 10, 64, 250] {
            let hits = idx
                .search(&[word("otter")], &Filter::all(), true, limit)
                .unwrap();
            let want: Vec<&str> = expected.iter().map(String::as_str).take(limit).collect();
            if limit <= expected.len() {
                assert_eq!(ids(&hits), want, "limit {limit}");
            } else {
                // The tied ones first, then the lower-scoring ones by id.
                assert_eq!(ids(&hits)[..expected.len()], want[..], "limit {limit}");
                let rest: Vec<&str> = ids(&hits)[expected.len()..].to_vec();
                let mut sorted = rest.clone();
                sorted.sort();
                assert_eq!(rest, sorted);
                assert!(
                    rest.iter()
                        .all(|id| id[1..].parse::<u32>().unwrap() % 3 == 0)
                );
            }
            assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        }
        // A filter admitting only some of the tied memories.
        idx.upsert(&memory("m001", "group:x", "otter", None), "")
            .unwrap();
        idx.commit().unwrap();
        let main = Filter::scope(Scope {
            scenes: vec![Scene::parse("main").unwrap()],
            ..Scope::default()
        });
        let hits = idx.search(&[word("otter")], &main, true, 3).unwrap();
        assert_eq!(ids(&hits), ["m002", "m004", "m005"]);
    }

    fn phrase(idx: &TextIndex, text: &str, filter: &Filter) -> Vec<String> {
        idx.phrase_search(&crate::index::tokenizer::tokenize(text), filter, 10)
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect()
    }

    #[test]
    fn a_phrase_is_every_token_adjacent_and_in_order_stop_words_included() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        idx.upsert(
            &memory(
                "a",
                "main",
                "Look, I made it in pottery class yesterday!",
                None,
            ),
            "",
        )
        .unwrap();
        idx.upsert(
            &memory("b", "main", "yesterday in class I made it, pottery", None),
            "",
        )
        .unwrap();
        idx.upsert(
            &memory("c", "main", "Bart在学校的绘画比赛中拿了第一名", None),
            "",
        )
        .unwrap();
        let mut titled = memory("d", "secret", "body text", None);
        titled.title = Some("pottery class schedule".into());
        idx.upsert(&titled, "").unwrap();
        idx.commit().unwrap();
        let all = Filter::all();
        assert_eq!(phrase(&idx, "made it in pottery class", &all), ["a"]);
        assert_eq!(
            phrase(&idx, "MADE IT, in pottery", &all),
            ["a"],
            "as the index cuts it"
        );
        assert_eq!(phrase(&idx, "绘画比赛中拿", &all), ["c"]);
        assert_eq!(
            phrase(&idx, "pottery class", &all),
            ["a", "d"],
            "titles too"
        );
        assert!(
            phrase(&idx, "class pottery", &all).is_empty(),
            "order counts"
        );
        assert!(
            phrase(&idx, "pottery", &all).is_empty(),
            "one token is no phrase"
        );
        let main = Filter::scope(Scope {
            scenes: vec![Scene::parse("main").unwrap()],
            ..Scope::default()
        });
        assert_eq!(
            phrase(&idx, "pottery class", &main),
            ["a"],
            "under the filter"
        );
    }

    #[test]
    fn a_memory_holds_a_phrase_exactly_when_the_phrase_search_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let mut all_memories = vec![
            memory(
                "a",
                "main",
                "Look, I made it in pottery class yesterday!",
                None,
            ),
            memory("b", "main", "yesterday in class I made it, pottery", None),
            memory("c", "main", "Bart在学校的绘画比赛中拿了第一名", None),
            memory(
                "e",
                "main",
                "Ｃｏｆｆｅｅ Shops near the park; 咖啡店很安静",
                None,
            ),
        ];
        let mut titled = memory("d", "main", "body text", None);
        titled.title = Some("pottery class schedule".into());
        all_memories.push(titled);
        let mut tagged = memory("f", "main", "we bought a new laptop", None);
        tagged.tags = vec!["work gear".into(), "咖啡店".into()];
        all_memories.push(tagged);
        for m in &all_memories {
            idx.upsert(m, "").unwrap();
        }
        idx.commit().unwrap();
        let phrases = [
            "made it in pottery class",
            "MADE IT, in pottery",
            "绘画比赛中拿",
            "pottery class",
            "class pottery",
            "coffee shop",
            "咖啡店",
            "laptop work gear",
            "gear 咖啡",
            "text pottery",
            "schedule body",
            "the park 咖啡",
        ];
        let mut answered = Vec::new();
        for text in phrases {
            let tokens = crate::index::tokenizer::tokenize(text);
            let mut found = phrase(&idx, text, &Filter::all());
            found.sort();
            if !found.is_empty() {
                answered.push(text);
            }
            let held: Vec<String> = all_memories
                .iter()
                .filter(|m| holds_phrase(m, &tokens))
                .map(|m| m.id.clone())
                .collect();
            assert_eq!(found, held, "{text}");
        }
        // Reversed words and a title running into the body are no phrase.
        assert_eq!(
            answered.len(),
            phrases.len() - 3,
            "{answered:?}: all but class pottery, text pottery, schedule body"
        );
        // Across a line between the text and a tag, as the index reads the body.
        assert_eq!(phrase(&idx, "laptop work gear", &Filter::all()), ["f"]);
        assert!(!holds_phrase(&all_memories[0], &[]), "no tokens, no phrase");
    }

    #[test]
    fn equal_scores_go_to_the_newer_memory_then_to_the_smaller_id() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        let at = |id: &str, ms: i64| {
            let mut m = memory(id, "main", "kestrel", None);
            m.ts = DateTime::from_timestamp_millis(ms).unwrap();
            m
        };
        idx.upsert(&at("m1", 1_700_000_000_000), "").unwrap();
        idx.commit().unwrap();
        idx.upsert(&at("m3", 1_700_000_500_000), "").unwrap();
        idx.upsert(&at("m2", 1_700_000_500_000), "").unwrap();
        idx.upsert(&at("m0", 1_600_000_000_000), "").unwrap();
        idx.commit().unwrap();
        let hits = idx
            .search(&[word("kestrel")], &Filter::all(), true, 10)
            .unwrap();
        assert_eq!(ids(&hits), ["m2", "m3", "m1", "m0"]);
        let two = idx
            .search(&[word("kestrel")], &Filter::all(), true, 2)
            .unwrap();
        assert_eq!(ids(&two), ["m2", "m3"]);
    }

    #[test]
    fn a_script_band_admits_only_memories_of_those_scripts() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        idx.upsert(&memory("en", "main", "project wexqir kickoff", None), "")
            .unwrap();
        idx.upsert(&memory("zh", "main", "项目代号 wexqir 下周启动", None), "")
            .unwrap();
        idx.commit().unwrap();
        let terms = [(word("wexqir"), 1.0)];
        let search = |band| {
            idx.search_weighted(&terms, &Filter::all(), true, band, 10)
                .unwrap()
        };
        let all = search(None);
        assert_eq!(all.len(), 2);
        let cjk = search(Some(ScriptBand { lo: 501, hi: 1000 }));
        assert_eq!(ids(&cjk), ["zh"]);
        assert!(cjk[0].script > 500, "{cjk:?}");
        let latin = search(Some(ScriptBand { lo: 0, hi: 499 }));
        assert_eq!(ids(&latin), ["en"]);
        assert_eq!(latin[0].script, 0);
    }

    /// Red team 3: a filter with no scope at all (a token that may read
    /// nothing) counts nothing and finds nothing.
    #[test]
    fn an_empty_filter_counts_and_finds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::open(dir.path(), true).unwrap();
        idx.upsert(&memory("a", "main", "lantern", None), "")
            .unwrap();
        idx.commit().unwrap();
        let none = Filter { any_of: vec![] };
        let terms = [word("lantern")];
        assert_eq!(idx.doc_freqs(&terms, &none).unwrap(), (vec![0], 0));
        assert!(idx.search(&terms, &none, false, 10).unwrap().is_empty());
        assert_eq!(idx.doc_freqs(&terms, &Filter::all()).unwrap(), (vec![1], 1));
    }
}
