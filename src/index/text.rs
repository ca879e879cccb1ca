//! The tantivy full-text index: schema, upserts, and filtered BM25 queries.
//!
//! One tantivy document per searchable memory (fact or document chunk). The
//! `id` is stored; everything else needed to show a hit lives in SQLite. Raw
//! fields (`scene`, `privacy`, `stage`, `kind`, `subject`, `tier`, `origin`)
//! are indexed untokenised so visibility filters are `Must` clauses of the
//! same query that scores the text.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use std::ops::Bound;
use tantivy::collector::TopDocs;

use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, Occur, Query, RangeQuery, TermQuery,
    TermSetQuery,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TantivyDocument,
    TextFieldIndexing, TextOptions, Value,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Term as TTerm};

use crate::error::Result;
use crate::index::filter::Filter;
use crate::index::scoped_stats::ScopedStats;
use crate::index::tokenizer::{
    CHARS_TOKENIZER, MemdTokenizer, TEXT_TOKENIZER, Term, TermKind, WORDS_TOKENIZER,
};
use crate::model::Memory;
use crate::store::journal::Cursor;

/// How much a title match weighs against a body match.
const TITLE_BOOST: f32 = 1.5;

/// Hits fetched beyond the limit so that ties at the cut are decided by id.
const TIE_MARGIN: usize = 16;

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
    words: Field,
    ts: Field,
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
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED),
        doc_id: b.add_text_field("doc_id", STRING),
        origin: b.add_text_field("origin", STRING),
        scene: b.add_text_field("scene", STRING),
        privacy: b.add_text_field("privacy", STRING),
        stage: b.add_text_field("stage", STRING),
        kind: b.add_text_field("kind", STRING),
        subject: b.add_text_field("subject", STRING),
        tier: b.add_text_field("tier", STRING),
        title: b.add_text_field("title", text(TEXT_TOKENIZER)),
        body: b.add_text_field("body", text(TEXT_TOKENIZER)),
        chars: b.add_text_field("chars", text(CHARS_TOKENIZER)),
        // jieba words of title and body, beside the bigrams ([`TermKind::Segment`]).
        words: b.add_text_field("words", text(WORDS_TOKENIZER)),
        ts: b.add_i64_field("ts", INDEXED),
        // Milliseconds; `i64::MAX` for memories that never expire.
        expires: b.add_i64_field("expires", INDEXED | FAST),
    };
    (b.build(), fields)
}

/// A scored id from the text index.
#[derive(Debug, Clone, PartialEq)]
pub struct TextHit {
    /// Memory id.
    pub id: String,
    /// BM25 score.
    pub score: f32,
}

/// Journal cursors applied to the index, committed and pending.
#[derive(Default)]
struct CommitState {
    /// Cursors of everything added, committed or not.
    cursors: BTreeMap<String, Cursor>,
    /// Whether there are uncommitted changes.
    dirty: bool,
}

/// Memory budget of the tantivy writer.
const WRITER_HEAP: usize = 32 * 1024 * 1024;

/// The full-text index. Readers are cheap and thread-safe; the writer is optional.
///
/// After a failure (a full disk kills tantivy's writer) [`TextIndex::reset_writer`]
/// drops the writer and its uncommitted changes and rewinds the applied cursors
/// to the last commit; a new writer is opened on next use, and catch-up
/// re-applies the journal from the rewound cursors.
pub struct TextIndex {
    index: Index,
    commit_state: Mutex<CommitState>,
    reader: IndexReader,
    /// `None` inside: to be (re)opened on next use.
    writer: Option<Mutex<Option<IndexWriter>>>,
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
    pub fn open(dir: &Path, writable: bool) -> Result<TextIndex> {
        let (schema, f) = schema();
        let index = if dir.join("meta.json").exists() {
            Index::open_in_dir(dir)?
        } else if !writable {
            return Err(tantivy::TantivyError::OpenReadError(
                tantivy::directory::error::OpenReadError::FileDoesNotExist(dir.join("meta.json")),
            )
            .into());
        } else {
            std::fs::create_dir_all(dir).map_err(tantivy::TantivyError::from)?;
            Index::create_in_dir(dir, schema)?
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
            .reload_policy(if writable {
                ReloadPolicy::Manual
            } else {
                ReloadPolicy::OnCommitWithDelay
            })
            .try_into()?;
        let writer = if writable {
            Some(Mutex::new(Some(
                index.writer_with_num_threads(1, WRITER_HEAP)?,
            )))
        } else {
            None
        };
        let committed: BTreeMap<String, Cursor> = index
            .load_metas()?
            .payload
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or_default();
        Ok(TextIndex {
            index,
            commit_state: Mutex::new(CommitState {
                cursors: committed,
                dirty: false,
            }),
            reader,
            writer,
            f,
        })
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
    pub fn reset_writer(&self) -> Result<()> {
        let Some(slot) = &self.writer else {
            return Ok(());
        };
        let mut state = self.commit_state.lock().expect("commit state poisoned");
        let mut guard = slot.lock().expect("index writer poisoned");
        // Dropping releases the directory lock, so a new writer can take it.
        *guard = None;
        state.cursors = self
            .index
            .load_metas()?
            .payload
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or_default();
        state.dirty = false;
        *guard = Some(self.index.writer_with_num_threads(1, WRITER_HEAP)?);
        Ok(())
    }

    /// Replaces (or adds) the document for `m`. Visible after [`TextIndex::commit`].
    pub fn upsert(&self, m: &Memory) -> Result<()> {
        let mut guard = self.writer()?;
        let w = guard.as_mut().expect("opened by writer()");
        let f = &self.f;
        w.delete_term(TTerm::from_field_text(f.id, &m.id));
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
        let mut body = m.text.clone();
        for tag in &m.tags {
            body.push('\n');
            body.push_str(tag);
        }
        let titled = format!("{}\n{body}", m.title.as_deref().unwrap_or(""));
        doc.add_text(f.words, &titled);
        doc.add_text(f.chars, titled);
        doc.add_text(f.body, &body);
        doc.add_i64(f.ts, m.ts.timestamp_millis());
        doc.add_i64(
            f.expires,
            m.expires_at.map_or(i64::MAX, |t| t.timestamp_millis()),
        );
        w.add_document(doc)?;
        Ok(())
    }

    /// Removes the document with this memory id.
    pub fn remove(&self, id: &str) -> Result<()> {
        self.writer()?
            .as_mut()
            .expect("opened by writer()")
            .delete_term(TTerm::from_field_text(self.f.id, id));
        Ok(())
    }

    /// Removes every chunk of a document.
    pub fn remove_doc(&self, doc_id: &str) -> Result<()> {
        self.writer()?
            .as_mut()
            .expect("opened by writer()")
            .delete_term(TTerm::from_field_text(self.f.doc_id, doc_id));
        Ok(())
    }

    /// Records that the journal has been applied up to these cursors; they are
    /// stored with the next commit.
    pub fn note_cursors(&self, cursors: &[(String, Cursor)]) {
        if cursors.is_empty() {
            return;
        }
        let mut state = self.commit_state.lock().expect("commit state poisoned");
        for (file, c) in cursors {
            state.cursors.insert(file.clone(), *c);
        }
        state.dirty = true;
    }

    /// Marks uncommitted changes that carry no journal cursor (documents).
    pub fn mark_dirty(&self) {
        self.commit_state
            .lock()
            .expect("commit state poisoned")
            .dirty = true;
    }

    /// The journal cursors of everything added to the index, committed or not.
    /// Right after open these are the ones stored with the last commit.
    pub fn applied_cursors(&self) -> BTreeMap<String, Cursor> {
        self.commit_state
            .lock()
            .expect("commit state poisoned")
            .cursors
            .clone()
    }

    /// Makes pending changes durable and visible to searches, storing the
    /// journal cursors in the commit payload. Does nothing when clean.
    pub fn commit(&self) -> Result<()> {
        let mut state = self.commit_state.lock().expect("commit state poisoned");
        if !state.dirty {
            return Ok(());
        }
        let payload = serde_json::to_string(&state.cursors)
            .map_err(|e| crate::error::Error::Internal(format!("cursor payload: {e}")))?;
        {
            let mut guard = self.writer()?;
            let writer = guard.as_mut().expect("opened by writer()");
            let mut prepared = writer.prepare_commit()?;
            prepared.set_payload(&payload);
            prepared.commit()?;
        }
        self.reader.reload()?;
        state.dirty = false;
        Ok(())
    }

    /// Checks the committed segments: every file is present with a valid
    /// checksum, and a searcher opens every segment.
    pub fn verify(&self) -> Result<()> {
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

    /// Number of live documents.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    fn term_query(&self, term: &Term) -> Box<dyn Query> {
        let f = &self.f;
        let idx = IndexRecordOption::WithFreqs;
        if term.kind == TermKind::Single {
            // A lone CJK character matches inside longer runs through the chars field.
            return Box::new(TermQuery::new(
                TTerm::from_field_text(f.chars, &term.text),
                idx,
            ));
        }
        if term.kind == TermKind::Segment {
            return Box::new(TermQuery::new(
                TTerm::from_field_text(f.words, &term.text),
                idx,
            ));
        }
        Box::new(BooleanQuery::new(vec![
            (
                Occur::Should,
                Box::new(TermQuery::new(
                    TTerm::from_field_text(f.body, &term.text),
                    idx,
                )),
            ),
            (
                Occur::Should,
                Box::new(BoostQuery::new(
                    Box::new(TermQuery::new(
                        TTerm::from_field_text(f.title, &term.text),
                        idx,
                    )),
                    TITLE_BOOST,
                )),
            ),
        ]))
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
    pub fn search(
        &self,
        terms: &[Term],
        filter: &Filter,
        all_terms: bool,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        let weighted: Vec<(Term, f32)> = terms.iter().map(|t| (t.clone(), 1.0)).collect();
        self.search_weighted(&weighted, filter, all_terms, limit)
    }

    /// Documents visible under `filter` containing each term (the chars field
    /// for lone CJK characters), and the number of visible documents. Counts
    /// never include memories the filter hides (see [`ScopedStats`]).
    pub fn doc_freqs(&self, terms: &[Term], filter: &Filter) -> Result<(Vec<u64>, u64)> {
        let searcher = self.reader.searcher();
        let fq = self.filter_query(filter);
        let stats = ScopedStats::new(&searcher, fq.as_deref())?;
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

    /// [`TextIndex::search`] with a boost per term (1.0 is neutral).
    pub fn search_weighted(
        &self,
        terms: &[(Term, f32)],
        filter: &Filter,
        all_terms: bool,
        limit: usize,
    ) -> Result<Vec<TextHit>> {
        if terms.is_empty() || filter.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let text: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|(t, w)| {
                // A jieba word only adds score: the bigrams it is made of
                // already decide whether a memory passes AND.
                let occur = if all_terms && t.kind != TermKind::Segment {
                    Occur::Must
                } else {
                    Occur::Should
                };
                let q = self.term_query(t);
                let q: Box<dyn Query> = if *w == 1.0 {
                    q
                } else {
                    Box::new(BoostQuery::new(q, *w))
                };
                (occur, q)
            })
            .collect();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(text)))];
        let fq = self.filter_query(filter);
        let searcher = self.reader.searcher();
        // BM25 statistics over what the filter admits only: a score must not
        // depend on memories the caller cannot read.
        let stats = ScopedStats::new(&searcher, fq.as_deref())?;
        if let Some(fq) = fq {
            clauses.push((Occur::Must, fq));
        }
        let query = BooleanQuery::new(clauses);
        // Fetch a margin beyond `limit` so that ties at the cut are ordered by
        // id, not by segment; widen it while the tie reaches the margin's end.
        let mut fetch = limit + TIE_MARGIN;
        let top = loop {
            let top = searcher.search_with_statistics_provider(
                &query,
                &TopDocs::with_limit(fetch).order_by_score(),
                &stats,
            )?;
            let tie_at_end = top.len() == fetch
                && top.get(limit - 1).map(|h| quantise(h.0)) == top.last().map(|h| quantise(h.0));
            if !tie_at_end {
                break top;
            }
            fetch *= 2;
        };
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            let id = doc
                .get_first(self.f.id)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            hits.push(TextHit {
                id,
                score: quantise(score),
            });
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        hits.truncate(limit);
        Ok(hits)
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
pub fn quantise(score: f32) -> f32 {
    f32::from_bits(score.to_bits() & !((1u32 << NOISE_BITS) - 1))
}
