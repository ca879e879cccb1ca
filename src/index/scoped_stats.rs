//! BM25 statistics computed over what the caller may read, never over the whole index.
//!
//! tantivy scores a term by its document frequency and the average field
//! length across the whole index. Those numbers include memories the caller
//! cannot see, so a score would tell a group token whether some word occurs in
//! the owner's secret notes (write a probe memory, search, compare scores).
//! [`ScopedStats`] answers tantivy's statistics questions from the documents
//! that match the caller's visibility filter only, so every score is a
//! function of visible memories alone.
//!
//! The same statistics make scores independent of the segment layout: tantivy's
//! own counts include deleted documents until a merge, ours count live matches,
//! so an incrementally maintained index and a rebuilt one score alike.
//!
//! Computing the visible set reads every document's filter fields and field
//! lengths: at 100k memories that is most of a query's time. [`StatsCache`]
//! keeps the visible set (and the lengths and document frequencies read from
//! it) per filter for one searcher generation, so repeated queries under the
//! same filter pay for it once per commit. A filter's expiry instant is part
//! of its key only as far as it changes the visible set (see
//! [`StatsCache::scoped`]); entries never outlive the generation they were
//! computed on, and every entry is a function of its filter alone, so
//! sharing one between callers with the same filter shows nobody anything
//! their filter hides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::{Bm25StatisticsProvider, Query};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{
    BitSet, DocId, DocSet, Score, Searcher, SegmentOrdinal, SegmentReader, TERMINATED, Term,
};

use crate::index::filter::Filter;

/// Filters whose visible sets are kept per generation.
const CACHED_FILTERS: usize = 32;

/// Document frequencies kept per visible set.
const CACHED_TERMS: usize = 16_384;

/// The documents a filter admits in one searcher generation, and the
/// statistics read from them so far.
struct Visible {
    /// Per segment ordinal, the documents the filter admits (deleted ones excluded).
    bits: Vec<BitSet>,
    docs: u64,
    tokens: Mutex<HashMap<Field, u64>>,
    dfs: Mutex<HashMap<Term, u64>>,
}

/// Visible documents per segment, and BM25 statistics over them.
pub struct ScopedStats<'a> {
    searcher: &'a Searcher,
    visible: Arc<Visible>,
}

impl<'a> ScopedStats<'a> {
    /// The documents of `searcher` that match `filter` (every live document when `None`).
    #[cfg(test)]
    pub(crate) fn new(searcher: &'a Searcher, filter: Option<&dyn Query>) -> tantivy::Result<Self> {
        Ok(ScopedStats {
            searcher,
            visible: Arc::new(Visible::compute(searcher, filter)?),
        })
    }

    /// Whether the filter admits document `doc` of segment `ord` (deleted
    /// documents are never admitted).
    pub(crate) fn admits(&self, ord: SegmentOrdinal, doc: DocId) -> bool {
        self.visible.bits[ord as usize].contains(doc)
    }

    /// Whether the filter admits any document of segment `ord`.
    pub(crate) fn admits_any(&self, ord: SegmentOrdinal) -> bool {
        self.visible.bits[ord as usize].len() > 0
    }

    /// Visible documents containing `term`.
    pub(crate) fn count(&self, term: &Term) -> tantivy::Result<u64> {
        if let Some(n) = self.visible.dfs.lock().expect("stats poisoned").get(term) {
            return Ok(*n);
        }
        let mut n = 0u64;
        for (ord, reader) in self.searcher.segment_readers().iter().enumerate() {
            let bits = &self.visible.bits[ord];
            if bits.len() == 0 {
                continue;
            }
            let inverted = reader.inverted_index(term.field())?;
            let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::Basic)? else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if bits.contains(doc) {
                    n += 1;
                }
                doc = postings.advance();
            }
        }
        let mut dfs = self.visible.dfs.lock().expect("stats poisoned");
        if dfs.len() < CACHED_TERMS {
            dfs.insert(term.clone(), n);
        }
        Ok(n)
    }
}

impl Visible {
    fn compute(searcher: &Searcher, filter: Option<&dyn Query>) -> tantivy::Result<Visible> {
        let bits = match filter {
            Some(q) => searcher.search(q, &VisibleDocs)?,
            None => searcher.search(&tantivy::query::AllQuery, &VisibleDocs)?,
        };
        let docs = bits.iter().map(|b| u64::from(b.len() as u32)).sum();
        Ok(Visible {
            bits,
            docs,
            tokens: Mutex::default(),
            dfs: Mutex::default(),
        })
    }
}

impl Bm25StatisticsProvider for ScopedStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        if let Some(n) = self
            .visible
            .tokens
            .lock()
            .expect("stats poisoned")
            .get(&field)
        {
            return Ok(*n);
        }
        let mut total = 0u64;
        for (ord, reader) in self.searcher.segment_readers().iter().enumerate() {
            let bits = &self.visible.bits[ord];
            if bits.len() == 0 {
                continue;
            }
            let norms = reader.get_fieldnorms_reader(field)?;
            for doc in 0..reader.max_doc() {
                if bits.contains(doc) {
                    total += u64::from(norms.fieldnorm(doc));
                }
            }
        }
        self.visible
            .tokens
            .lock()
            .expect("stats poisoned")
            .insert(field, total);
        Ok(total)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.visible.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.count(term)
    }
}

/// Visible sets of recent filters, for the newest searcher generation seen.
pub struct StatsCache {
    /// The `i64` fast field of expiry instants (milliseconds).
    expires: &'static str,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    generation: Option<u64>,
    /// Distinct expiry instants of the generation's documents, ascending.
    expiries: Arc<Vec<i64>>,
    /// Most recently computed last.
    entries: Vec<(Filter, Arc<Visible>)>,
}

impl StatsCache {
    /// An empty cache; `expires` names the fast field the filters' expiry
    /// conditions test (`expires > instant`).
    pub(crate) fn new(expires: &'static str) -> Self {
        StatsCache {
            expires,
            state: Mutex::default(),
        }
    }

    /// The [`ScopedStats`] of `filter` (whose query is `query`), from the
    /// cache when the same filter was seen in this searcher generation.
    ///
    /// Each scope's expiry instant enters the key as the newest document
    /// expiry at or before it: every instant between two consecutive
    /// expiries admits exactly the same documents, so requests made a
    /// moment apart share an entry, and one made after a document expired
    /// does not.
    pub fn scoped<'a>(
        &self,
        searcher: &'a Searcher,
        filter: &Filter,
        query: Option<&dyn Query>,
    ) -> tantivy::Result<ScopedStats<'a>> {
        let generation = searcher.generation().generation_id();
        let key = {
            let mut state = self.state.lock().expect("stats cache poisoned");
            if state.generation != Some(generation) {
                state.entries.clear();
                state.expiries = Arc::new(expiries(searcher, self.expires)?);
                state.generation = Some(generation);
            }
            let key = normalise(filter, &state.expiries);
            if let Some((_, visible)) = state.entries.iter().find(|(k, _)| *k == key) {
                return Ok(ScopedStats {
                    searcher,
                    visible: Arc::clone(visible),
                });
            }
            key
        };
        let visible = Arc::new(Visible::compute(searcher, query)?);
        let mut state = self.state.lock().expect("stats cache poisoned");
        if state.generation == Some(generation) && !state.entries.iter().any(|(k, _)| *k == key) {
            if state.entries.len() >= CACHED_FILTERS {
                state.entries.remove(0);
            }
            state.entries.push((key, Arc::clone(&visible)));
        }
        Ok(ScopedStats { searcher, visible })
    }
}

/// Distinct expiry instants of the searcher's documents, ascending
/// (deleted documents included: an extra instant only splits a key in two).
fn expiries(searcher: &Searcher, field: &str) -> tantivy::Result<Vec<i64>> {
    let mut all = Vec::new();
    for reader in searcher.segment_readers() {
        let column = reader.fast_fields().i64(field)?;
        for doc in 0..reader.max_doc() {
            all.extend(column.values_for_doc(doc).filter(|e| *e != i64::MAX));
        }
    }
    all.sort_unstable();
    all.dedup();
    Ok(all)
}

/// `filter` with each expiry instant replaced by the newest expiry at or
/// before it (or the earliest instant when there is none): the same
/// documents are visible under both.
fn normalise(filter: &Filter, expiries: &[i64]) -> Filter {
    let mut key = filter.clone();
    for scope in &mut key.any_of {
        if let Some(at) = scope.unexpired_at {
            let before = expiries.partition_point(|e| *e <= at.timestamp_millis());
            scope.unexpired_at = Some(
                before
                    .checked_sub(1)
                    .and_then(|i| DateTime::<Utc>::from_timestamp_millis(expiries[i]))
                    .unwrap_or(DateTime::<Utc>::MIN_UTC),
            );
        }
    }
    key
}

/// Collects the matching documents of each segment as a bit set.
struct VisibleDocs;

struct SegmentVisible(BitSet);

impl Collector for VisibleDocs {
    type Fruit = Vec<BitSet>;
    type Child = SegmentVisible;

    fn for_segment(
        &self,
        _ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<SegmentVisible> {
        Ok(SegmentVisible(BitSet::with_max_value(segment.max_doc())))
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<BitSet>) -> tantivy::Result<Vec<BitSet>> {
        // Segment fruits arrive in segment-ordinal order.
        Ok(fruits)
    }
}

impl SegmentCollector for SegmentVisible {
    type Fruit = BitSet;

    fn collect(&mut self, doc: DocId, _score: Score) {
        self.0.insert(doc);
    }

    fn harvest(self) -> BitSet {
        self.0
    }
}
