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
//! going (the loop is [`super::catchup::CatchUp::open_healing`]). The vector
//! cache under `data/cache/` is not part of the index, so re-embedding after
//! a rebuild mostly reads the cache.
//!
//! The rebuild is synchronous: it happens inside [`crate::hub::Hub::open`],
//! before `memd serve` listens. What happened is reported by the `index`
//! component of health ([`IndexState`]: `rebuilt` with the reason).
//! Corruption found by a search while serving marks the component
//! `degraded` (state `damaged`, with the reason); the running process does
//! not swap its index, so the rebuild happens at the next start.

use std::path::Path;

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
pub(crate) fn open_index(dir: &Path) -> Result<(Index, Option<String>)> {
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

/// Moves the index in `dir` aside and opens an empty one in its place.
pub(crate) fn replace(dir: &Path, reason: &str) -> Result<Index> {
    let aside = index::move_aside(dir)?;
    tracing::warn!(
        index.reason = %reason,
        index.moved_to = %aside.display(),
        "the derived index is damaged; moved it aside and rebuilding it from memories/"
    );
    Index::open(dir, true)
}
