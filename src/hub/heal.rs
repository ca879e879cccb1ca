//! Self-healing of the derived index when a writer opens a root.
//!
//! `data/index/` is derived from `memories/`, so a damaged index is never a
//! reason to stop serving. When the writer opens it, the index must pass a
//! cheap integrity check ([`Index::open_verified`]: tantivy's segment files
//! are present, pass their checksums and load; SQLite passes
//! `PRAGMA quick_check`), catching up must not hit a corruption error, and
//! afterwards the two stores must agree ([`Index::disagreement`]: as many
//! live memories in tantivy as in SQLite, the same journal cursors). If any
//! of this fails, the index is moved aside to `data/index.broken-<ts>/` (the
//! two most recent are kept), rebuilt from `memories/` and the hub keeps
//! going. The vector cache under `data/cache/` is not part of the index, so
//! re-embedding after a rebuild mostly reads the cache.
//!
//! The rebuild is synchronous: it happens inside [`Hub::open`], before
//! `memd serve` listens. What happened is reported by the `index` component
//! of [`Hub::health`] (state `rebuilt` with the reason). Corruption found by
//! a search while serving marks the component `degraded` (state `damaged`,
//! with the reason); the running process does not swap its index, so the
//! rebuild happens at the next start.

use std::path::Path;

use super::{CatchUpReport, Hub, Progress};
use crate::error::Result;
use crate::index::{self, Index};

/// How the index came to be, or why it cannot be trusted now.
#[derive(Debug, Clone, Default)]
pub(crate) enum IndexState {
    /// Opened and checked.
    #[default]
    Ok,
    /// Rebuilt at open because it was damaged.
    Rebuilt {
        /// What was wrong.
        reason: String,
    },
    /// Damaged and not (yet) rebuilt.
    Degraded {
        /// What is wrong.
        reason: String,
    },
}

/// Opens the writable index in `dir`; if it does not pass its integrity
/// check, moves it aside and opens a fresh one. Returns why it was replaced.
pub(super) fn open_index(dir: &Path) -> Result<(Index, Option<String>)> {
    match Index::open_verified(dir) {
        Ok(i) => Ok((i, None)),
        Err(e) if dir.exists() => {
            let reason = e.to_string();
            let fresh = replace(dir, &reason)?;
            Ok((fresh, Some(reason)))
        }
        Err(e) => Err(e),
    }
}

fn replace(dir: &Path, reason: &str) -> Result<Index> {
    let aside = index::move_aside(dir)?;
    tracing::warn!(
        index.reason = %reason,
        index.moved_to = %aside.display(),
        "the derived index is damaged; moved it aside and rebuilding it from memories/"
    );
    Index::open(dir, true)
}

impl Hub {
    /// Catches up with the journal and the documents, then checks that the
    /// two stores agree. A damaged index (corruption while applying, or a
    /// disagreement) is rebuilt once; `healed` says it already was, at open.
    pub(super) fn catch_up_healing(
        &mut self,
        healed: Option<String>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let mut healed = healed;
        loop {
            let damage = match self.catch_up_checked(progress)? {
                Ok(report) => {
                    self.set_index_state(match healed {
                        Some(reason) => IndexState::Rebuilt { reason },
                        None => IndexState::Ok,
                    });
                    return Ok(report);
                }
                Err(damage) => damage,
            };
            if healed.is_some() {
                // A fresh index that still disagrees is a bug, not damage:
                // serve what there is and say so.
                tracing::error!(index.reason = %damage, "the rebuilt index is inconsistent; run `memd reindex`");
                self.set_index_state(IndexState::Degraded { reason: damage });
                return Ok(CatchUpReport::default());
            }
            let dir = self.layout.index();
            let fresh = replace(&dir, &damage)?;
            fresh.set_lifecycle(self.config().lifecycle.clone());
            self.index = fresh;
            // What the last sync saw of each document describes the old index.
            *self.doc_stamps.lock().expect("document stamps poisoned") = Default::default();
            healed = Some(damage);
        }
    }

    /// Catch-up and agreement check; `Ok(Err(reason))` when the index is damaged.
    fn catch_up_checked(
        &self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<std::result::Result<CatchUpReport, String>> {
        let run = |progress: &mut dyn FnMut(Progress)| -> Result<CatchUpReport> {
            let mut report = self.catch_up(progress)?;
            if !self.config().lifecycle.tier_expiry {
                let cleared = self.index.clear_long_term_expiry()?;
                if cleared > 0 {
                    tracing::info!(
                        memories = cleared,
                        "long-term memories no longer expire (lifecycle.tierExpiry is off)"
                    );
                }
            }
            let docs = self.sync_documents()?;
            report.documents_indexed = docs.documents_indexed;
            report.documents_removed = docs.documents_removed;
            report.documents_read = docs.documents_read;
            report.documents_invalid = docs.documents_invalid;
            report.vectors_stored += docs.vectors_stored;
            Ok(report)
        };
        let report = match run(progress) {
            Ok(r) => r,
            Err(e) if index::is_damage(&e) => return Ok(Err(e.to_string())),
            Err(e) => return Err(e),
        };
        match self.index.disagreement() {
            Ok(None) => Ok(Ok(report)),
            Ok(Some(d)) => Ok(Err(d)),
            Err(e) if index::is_damage(&e) => Ok(Err(e.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Marks the index damaged when a read hit corruption (SQLite
    /// `SQLITE_CORRUPT`, unreadable tantivy files), so `/v1/health` says so
    /// with the reason. The running process cannot swap its index; the next
    /// start rebuilds it (the integrity check at open fails the same way).
    pub(super) fn note_index_error(&self, e: &crate::error::Error) {
        if !index::is_damage(e) {
            return;
        }
        tracing::error!(error = %e, "the index is damaged; restart memd serve to rebuild it, or run `memd reindex`");
        self.set_index_state(IndexState::Degraded {
            reason: format!(
                "{e}; restart memd serve (it rebuilds a damaged index at start) or run `memd reindex`"
            ),
        });
    }

    pub(super) fn set_index_state(&self, state: IndexState) {
        *self.index_state.lock().expect("index state poisoned") = state;
    }

    pub(super) fn index_state(&self) -> IndexState {
        self.index_state
            .lock()
            .expect("index state poisoned")
            .clone()
    }
}
