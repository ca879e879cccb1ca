//! Use case: rebuild the index from the files in the process that serves
//! the root (`POST /v1/reindex`, `memd reindex` next to a running daemon),
//! for admin tokens and the local operator.
//!
//! The daemon is the root's only writer, so the rebuild happens in it, in
//! place: holding the writer (writes wait for it), the index is emptied and
//! the same catch-up an open runs replays the journal and the documents
//! from the start; vectors follow, from the vector cache where the text is
//! unchanged. Searches meanwhile see the index as far as it has been
//! rebuilt. Without a daemon, `memd reindex` deletes `data/index/` and
//! builds a new one ([`Hub::reindex`]); both report a [`ReindexReply`].

use std::time::Instant;

use super::{Caller, CatchUpReport, Hub, Stats};
use crate::api::{ReindexBody, ReindexReply};
use crate::auth::scope;
use crate::error::Result;

impl Hub {
    /// Rebuilds this hub's index in place from the files (`admin`).
    pub fn rebuild_index(&self, caller: &Caller, _body: ReindexBody) -> Result<ReindexReply> {
        caller.require(scope::ADMIN)?;
        let started = Instant::now();
        // Accesses noted so far reach the journal first (through the writer
        // held below), so the rebuilt lifecycle state includes them.
        self.flush_accesses(true)?;
        let report = {
            let _held = self.writer.hold(&self.core)?;
            self.catchup.rebuild(&self.core, &mut |_| {})?
        };
        let vectors_stored = self.embed_pending(usize::MAX);
        let stats = self.stats()?;
        Ok(reindex_reply(&report, vectors_stored, &stats, started))
    }
}

/// What a rebuild reports: what it replayed, and what is searchable after it.
pub fn reindex_reply(
    report: &CatchUpReport,
    vectors_stored: u64,
    stats: &Stats,
    started: Instant,
) -> ReindexReply {
    ReindexReply {
        records: report.records,
        bad_lines: report.bad_lines,
        documents: report.documents_indexed,
        memories: stats.counts.memories,
        vectors: stats.vectors,
        vectors_stored,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}
