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

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::{Bm25StatisticsProvider, Query};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{
    BitSet, DocId, DocSet, Score, Searcher, SegmentOrdinal, SegmentReader, TERMINATED, Term,
};

/// Visible documents per segment, and BM25 statistics over them.
pub struct ScopedStats<'a> {
    searcher: &'a Searcher,
    /// Per segment ordinal, the documents the filter admits (deleted ones excluded).
    visible: Vec<BitSet>,
    docs: u64,
}

impl<'a> ScopedStats<'a> {
    /// The documents of `searcher` that match `filter` (every live document when `None`).
    pub fn new(searcher: &'a Searcher, filter: Option<&dyn Query>) -> tantivy::Result<Self> {
        let visible = match filter {
            Some(q) => searcher.search(q, &VisibleDocs)?,
            None => searcher.search(&tantivy::query::AllQuery, &VisibleDocs)?,
        };
        let docs = visible.iter().map(|b| u64::from(b.len() as u32)).sum();
        Ok(ScopedStats {
            searcher,
            visible,
            docs,
        })
    }

    /// Visible documents containing `term`.
    pub fn count(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0u64;
        for (ord, reader) in self.searcher.segment_readers().iter().enumerate() {
            let bits = &self.visible[ord];
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
        Ok(n)
    }
}

impl Bm25StatisticsProvider for ScopedStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut total = 0u64;
        for (ord, reader) in self.searcher.segment_readers().iter().enumerate() {
            let bits = &self.visible[ord];
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
        Ok(total)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.count(term)
    }
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
