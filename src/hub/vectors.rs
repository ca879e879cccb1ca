//! Vectors and search: the hub's side of semantic search.
//!
//! Embedding is kept off the write path: a write is acknowledged once it is
//! durable and in the full-text index. Memories without a vector are embedded
//! in small groups by [`Hub::embed_pending`] (the server's scheduler thread
//! calls it every second), all at once by `memd reindex`, and before any
//! semantic or hybrid search, so a search sees the writes acknowledged
//! before it began (see `refresh_vectors` for the one exception). Searches pick the embedder for their mode and degrade as
//! documented in [`crate::search`].
//!
//! Writes never wait for readers: no embedding pass takes the writer. A pass
//! holds only [`crate::embed::EmbedderSlot::pass`] (one pass at a time, so
//! concurrent searches do not embed the same memories twice), computes
//! vectors with no lock held, and stores them in short transactions that
//! re-read each memory ([`crate::index::vector::store`]), so a memory
//! changed or forgotten meanwhile never gets a stale vector.

use std::sync::Arc;

use super::Hub;
use crate::embed::Embedder;
use crate::error::Result;
use crate::search::{self, SearchRequest, SearchResults};

impl Hub {
    /// The embedder, loading the configured model on first use;
    /// `EMBEDDING_UNAVAILABLE` says why there is none.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        self.embedder.get()
    }

    /// Whether memories wait for a vector while the configured model has
    /// neither loaded nor failed to load yet: [`Hub::embed_pending`] would
    /// first spend seconds loading it.
    pub(crate) fn embedder_load_pending(&self) -> bool {
        matches!(
            self.embedder.status(),
            crate::embed::EmbedderStatus::NotLoaded
        ) && matches!(self.index.vectors_pending(), Ok(true))
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
    pub fn embed_pending(&self, limit: usize) -> u64 {
        if self.writer.is_none() {
            return 0;
        }
        // The first load of a model takes seconds: do it before taking the
        // pass, so searches are not held up by it.
        if matches!(self.index.vectors_pending(), Ok(true)) {
            let _ = self.embedder.get();
        }
        let _pass = self.embedder.pass();
        self.sync_vectors(limit)
    }

    /// [`Hub::embed_pending`] for a caller that holds the embedding pass.
    fn sync_vectors(&self, limit: usize) -> u64 {
        if self.writer.is_none() {
            return 0;
        }
        // A loaded embedder of another model than the stored vectors means
        // everything is re-embedded; a lazily configured one is checked when
        // it first loads (see `refresh_vectors`).
        let model_changed = self.embedder.loaded().is_some_and(|e| {
            self.index
                .vector_model()
                .ok()
                .flatten()
                .is_some_and(|(m, d)| m != e.model_id() || d != e.dim())
        });
        match self.index.vectors_pending() {
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
        match self
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
    fn refresh_vectors(&self, embedder: &dyn Embedder) -> Result<()> {
        if self.writer.is_none() {
            return Ok(());
        }
        let stale = || -> Result<bool> {
            Ok(self
                .index
                .vector_model()?
                .is_some_and(|(m, d)| m != embedder.model_id() || d != embedder.dim()))
        };
        if !stale()? && !self.index.vectors_pending()? {
            return Ok(());
        }
        let _pass = self.embedder.pass();
        // Whoever held the pass before may have embedded everything.
        let limit = if stale()? {
            usize::MAX
        } else {
            match self.index.vectors_pending_count()? {
                0 => return Ok(()),
                n => usize::try_from(n).unwrap_or(usize::MAX),
            }
        };
        if let Err(e) = self
            .index
            .sync_vectors(embedder, self.cache.as_ref(), limit)
        {
            tracing::warn!(error = %e, "embedding pending memories failed; searching what is indexed");
        }
        Ok(())
    }

    /// The candidates of a hybrid search with the learned-fusion features of
    /// each ([`search::hybrid_candidates`]), for `memd eval --features`.
    pub fn hybrid_candidates(&self, req: &SearchRequest) -> Result<Vec<search::Candidate>> {
        let embedder = self.embedder.get()?;
        self.refresh_vectors(embedder.as_ref())?;
        self.index.refresh()?;
        let config = self.config();
        let limit = req.limit.unwrap_or(config.search.default_limit);
        search::hybrid_candidates(&self.index, embedder.as_ref(), req, &config.search, limit)
    }

    /// Search under the request's filter, in the request's mode (default
    /// `search.mode`). Hybrid falls back to full text when no embedder is
    /// available and says so in [`SearchResults::mode`]; semantic answers
    /// `EMBEDDING_UNAVAILABLE`. Search settings are those of the live config
    /// (hot-reloaded keys included). About one search per core runs at a
    /// time; the others wait their turn in arrival order (writes never wait).
    pub fn search(&self, req: &SearchRequest) -> Result<SearchResults> {
        let config = self.config();
        let cfg = &config.search;
        let mode = req.mode.unwrap_or(cfg.mode);
        let mut unavailable = None;
        let embedder = match mode {
            search::SearchMode::Fulltext => None,
            _ => match self.embedder.get() {
                Ok(e) => {
                    self.refresh_vectors(e.as_ref())?;
                    Some(e)
                }
                Err(e) if mode == search::SearchMode::Semantic => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "hybrid search falls back to full text");
                    unavailable = Some(e.to_string());
                    None
                }
            },
        };
        // About one search per core runs at once; the others queue in
        // arrival order (see `gate.rs`). Vectors are refreshed before the
        // gate: embedding pending memories is not this search's service time.
        let permit = self.search_gate.enter();
        let searched = search::search(&self.index, embedder.as_deref(), req, cfg);
        drop(permit);
        let mut results = searched.inspect_err(|e| self.note_index_error(e))?;
        if results.fallback.is_some() && unavailable.is_some() {
            results.fallback = unavailable;
        }
        for hit in &mut results.hits {
            hit.expiring_soon = self.is_expiring_soon(&hit.memory);
        }
        self.note_access(results.hits.iter().map(|h| &h.memory));
        Ok(results)
    }
}
