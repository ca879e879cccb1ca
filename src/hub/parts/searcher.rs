//! The searcher part: the search gate, search in three modes, and vectors.
//!
//! Ranking and the relevance decision on every hit are [`crate::search`];
//! this part decides which embedder a search gets, keeps the vectors up to
//! date with the writes, admits about one search per core ([`super::gate`])
//! and marks hits that expire soon.
//!
//! Embedding is kept off the write path: a write is acknowledged once it is
//! durable and in the full-text index. Memories without a vector are embedded
//! in small groups by [`Searcher::embed_pending`] (the server's scheduler
//! thread calls it every second), all at once by `memd reindex`, and before
//! any semantic or hybrid search, so a search sees the writes acknowledged
//! before it began (see `refresh_vectors` for the one exception). If no
//! embedder can be loaded, memories stay pending and are embedded once one
//! is available; searches degrade as documented in [`crate::search`].
//!
//! Writes never wait for readers: no embedding pass takes the writer. A pass
//! holds only [`crate::embed::EmbedderSlot::pass`] (one pass at a time, so
//! concurrent searches do not embed the same memories twice), computes
//! vectors with no lock held, and stores them in short transactions that
//! re-read each memory ([`crate::index::vector::store`]), so a memory
//! changed or forgotten meanwhile never gets a stale vector.

use std::sync::Arc;

use super::Core;
use super::ctx::Ctx;
use super::gate::{self, Gate};
use crate::embed::cache::VectorCache;
use crate::embed::{Embedder, EmbedderSlot, EmbedderStatus};
use crate::error::Result;
use crate::search::{self, SearchMode, SearchRequest, SearchResults};

/// The searcher part (see the module docs).
pub(crate) struct Searcher {
    /// Admits about one search per core, fairly between callers (shared
    /// with the searchers of `as_of` indexes).
    gate: Arc<Gate>,
    /// Shared with the thread that loads the model in the background.
    embedder: Arc<EmbedderSlot>,
    cache: Option<VectorCache>,
}

impl Searcher {
    pub(crate) fn new(embedder: EmbedderSlot, cache: Option<VectorCache>) -> Searcher {
        Searcher {
            gate: Arc::new(Gate::per_core()),
            embedder: Arc::new(embedder),
            cache,
        }
    }

    /// A searcher over another index with this one's embedder (loaded once
    /// for both) and its gate (a search there is one of the caller's
    /// searches): the temporary index of an `as_of` read.
    pub(crate) fn sharing(&self, cache: Option<VectorCache>) -> Searcher {
        Searcher {
            gate: Arc::clone(&self.gate),
            embedder: Arc::clone(&self.embedder),
            cache,
        }
    }

    /// Holds the gate for `caller`'s work of `cost` (estimated milliseconds)
    /// that is not a search but costs like one (building an `as_of` index):
    /// it waits its turn in the caller's queue, and a full queue is
    /// `RATE_LIMITED`.
    pub(crate) fn admit(&self, core: &Core, caller: &str, cost: u64) -> Result<gate::Permit<'_>> {
        let limits = gate::Limits::of(&core.config().search_gate);
        self.gate
            .enter(caller, cost, limits)
            .map_err(|r| refused(caller, &r))
    }

    /// Searches holding the gate, and searches waiting.
    pub(crate) fn gate_load(&self) -> (usize, usize) {
        self.gate.load()
    }

    /// The embedder, loading the configured model on first use;
    /// `EMBEDDING_UNAVAILABLE` says why there is none.
    pub(crate) fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        self.embedder.get()
    }

    /// Where the embedder stands, without loading it.
    pub(crate) fn embedder_status(&self) -> EmbedderStatus {
        self.embedder.status()
    }

    /// Whether memories wait for a vector while the configured model has
    /// neither loaded nor failed to load yet: [`Searcher::embed_pending`]
    /// would first spend seconds loading it.
    pub(crate) fn embedder_load_pending(&self, core: &Core) -> bool {
        matches!(self.embedder.status(), EmbedderStatus::NotLoaded)
            && matches!(core.index.vectors_pending(), Ok(true))
    }

    /// Loads the configured model on a thread of its own that holds only the
    /// model slot, so whoever asked (the server's scheduler) can stop at once
    /// while it loads. Searches that need the model meanwhile wait for this load.
    pub(crate) fn load_embedder_in_background(&self) -> Result<()> {
        let slot = Arc::clone(&self.embedder);
        std::thread::Builder::new()
            .name("memd-embedder-load".into())
            .spawn(move || {
                let _ = slot.get();
            })
            .map(drop)
            .map_err(|e| {
                crate::error::Error::Internal(format!("cannot start the model loader: {e}"))
            })
    }

    /// Embeds up to `limit` memories that have no vector yet, without holding
    /// the writer; returns how many were stored. Vectors are derived data: a
    /// failure is logged and the memories stay pending for the next call.
    pub(crate) fn embed_pending(&self, core: &Core, limit: usize) -> u64 {
        if !core.writable {
            return 0;
        }
        // The first load of a model takes seconds: do it before taking the
        // pass, so searches are not held up by it.
        if matches!(core.index.vectors_pending(), Ok(true)) {
            let _ = self.embedder.get();
        }
        let _pass = self.embedder.pass();
        self.sync_vectors(core, limit)
    }

    /// [`Searcher::embed_pending`] for a caller that holds the embedding pass.
    fn sync_vectors(&self, core: &Core, limit: usize) -> u64 {
        // A loaded embedder of another model than the stored vectors means
        // everything is re-embedded; a lazily configured one is checked when
        // it first loads (see `refresh_vectors`).
        let model_changed = self.embedder.loaded().is_some_and(|e| {
            core.index
                .vector_model()
                .ok()
                .flatten()
                .is_some_and(|(m, d)| m != e.model_id() || d != e.dim())
        });
        match core.index.vectors_pending() {
            Ok(true) => {}
            Ok(false) if model_changed => {}
            Ok(false) => return 0,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for memories to embed");
                return 0;
            }
        }
        let Ok(embedder) = self.embedder.get() else {
            // Logged once when loading failed; the memories stay pending.
            return 0;
        };
        match core
            .index
            .sync_vectors(embedder.as_ref(), self.cache.as_ref(), limit)
        {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "embedding memories failed; they stay pending and are retried after the next write");
                0
            }
        }
    }

    /// Brings the vectors up to date with a just-loaded embedder: embeds
    /// memories written while none was available, and everything if the index
    /// holds vectors of another model (the configured model changed). Writer
    /// process only; writes go on meanwhile (see the module docs). The pass
    /// embeds as many memories as were pending when it took the pass, so a
    /// steady stream of writes cannot keep a search embedding; pending
    /// memories are taken in id order, so one written meanwhile can take the
    /// place of an older one, which then waits for the next pass (the
    /// scheduler's, within a second) and is found by full text until then.
    /// A failure is logged and the search goes on with what is indexed.
    fn refresh_vectors(&self, core: &Core, embedder: &dyn Embedder) -> Result<()> {
        if !core.writable {
            return Ok(());
        }
        let stale = || -> Result<bool> {
            Ok(core
                .index
                .vector_model()?
                .is_some_and(|(m, d)| m != embedder.model_id() || d != embedder.dim()))
        };
        if !stale()? && !core.index.vectors_pending()? {
            return Ok(());
        }
        let _pass = self.embedder.pass();
        // Whoever held the pass before may have embedded everything.
        let limit = if stale()? {
            usize::MAX
        } else {
            match core.index.vectors_pending_count()? {
                0 => return Ok(()),
                n => usize::try_from(n).unwrap_or(usize::MAX),
            }
        };
        if let Err(e) = core
            .index
            .sync_vectors(embedder, self.cache.as_ref(), limit)
        {
            tracing::warn!(error = %e, "embedding pending memories failed; searching what is indexed");
        }
        Ok(())
    }

    /// The candidates of a hybrid search with the learned-fusion features of
    /// each ([`search::hybrid_candidates`]), for `memd eval --features`.
    pub(crate) fn hybrid_candidates(
        &self,
        core: &Core,
        req: &SearchRequest,
    ) -> Result<Vec<search::Candidate>> {
        let embedder = self.embedder.get()?;
        self.refresh_vectors(core, embedder.as_ref())?;
        core.index.refresh()?;
        let config = core.config();
        let limit = req.limit.unwrap_or(config.search.default_limit);
        search::hybrid_candidates(&core.index, embedder.as_ref(), req, &config.search, limit)
    }

    /// Search under the request's filter, in the request's mode (default
    /// `search.mode`). Hybrid falls back to full text when no embedder is
    /// available and says so in [`SearchResults::mode`]; semantic answers
    /// `EMBEDDING_UNAVAILABLE`. Search settings are those of the live config
    /// (hot-reloaded keys included). About one search per core runs at a
    /// time; the others wait in `caller`'s queue (a token's name,
    /// [`gate::OPERATOR`] or [`gate::IN_PROCESS`]), served fairly between
    /// callers; a full queue is `RATE_LIMITED` (writes never wait).
    pub(crate) fn search(
        &self,
        cx: Ctx<'_>,
        caller: &str,
        req: &SearchRequest,
    ) -> Result<SearchResults> {
        let now = cx.core.now();
        self.search_deep(cx, caller, req, 0, now)
    }

    /// [`Searcher::search`] that may rank up to `depth` hits even where that
    /// is above `search.maxLimit`: a paged search asks for the hits of the
    /// pages before the one it shows (the hub bounds `depth`). `now` is the
    /// request's instant (the anchor of "last week" in the query).
    pub(crate) fn search_deep(
        &self,
        cx: Ctx<'_>,
        caller: &str,
        req: &SearchRequest,
        depth: usize,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<SearchResults> {
        let core = cx.core;
        let config = core.config();
        let mut deep = config.search.clone();
        deep.max_limit = deep.max_limit.max(depth);
        let cfg = &deep;
        let mode = req.mode.unwrap_or(cfg.mode);
        let mut unavailable = None;
        let embedder = match mode {
            SearchMode::Fulltext => None,
            _ => match self.embedder.get() {
                Ok(e) => {
                    self.refresh_vectors(core, e.as_ref())?;
                    Some(e)
                }
                Err(e) if mode == SearchMode::Semantic => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "hybrid search falls back to full text");
                    unavailable = Some(e.to_string());
                    None
                }
            },
        };
        // About one search per core runs at once; the others queue per
        // caller, served fairly (see `gate.rs`). Vectors are refreshed before
        // the gate: embedding pending memories is not this search's service time.
        let cost_mode = if embedder.is_some() {
            mode
        } else {
            SearchMode::Fulltext
        };
        let cost = gate::cost(cost_mode, req.query.chars().count());
        let limits = gate::Limits::of(&config.search_gate);
        let permit = self
            .gate
            .enter(caller, cost, limits)
            .map_err(|r| refused(caller, &r))?;
        // A second thread (a dialogue embedded beside its full text) only
        // while no other search runs or waits: under load it would take a
        // core another caller's search was admitted to.
        let spare_core = self.gate.alone();
        let searched = search::search(&core.index, embedder.as_deref(), req, cfg, now, spare_core);
        drop(permit);
        let mut results = searched.inspect_err(|e| cx.catchup.note_index_error(e))?;
        if results.fallback.is_some() && unavailable.is_some() {
            results.fallback = unavailable;
        }
        for hit in &mut results.hits {
            hit.expiring_soon = cx.lifecycle.is_expiring_soon(core, &hit.memory);
        }
        // Hits are not accesses: the use case that retrieves for a
        // conversation (recall, or a search asked with `touch`) counts them.
        Ok(results)
    }
}

/// The refusal of a search whose caller's own queue is full.
fn refused(caller: &str, r: &gate::Refused) -> crate::error::Error {
    let who = if caller.starts_with('(') {
        caller.to_string()
    } else {
        format!("token {caller:?}")
    };
    crate::error::Error::RateLimited {
        message: format!(
            "{who} already has {} searches waiting for their turn; retry in {} s",
            r.waiting, r.retry_after
        ),
        retry_after: r.retry_after,
    }
}
