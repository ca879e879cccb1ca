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
//!
//! A full disk is not damage ([`short_of_space`]): `memd serve` then opens
//! the index as it is for reading (state `waiting`) and catches up once
//! there is room (see [`super::catchup::CatchUp::opened_on_full_disk`]).

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
    /// Opened on a full disk: serving reads as it is, catching up once
    /// there is room.
    Waiting {
        /// Why it could not open for writing or catch up.
        reason: String,
    },
}

/// Whether `e`, met while opening or catching up the index in `dir`, comes
/// from a full disk rather than damage: a full disk says so, or surfaces
/// as an I/O error (SQLite cannot size its shared-memory file) while the
/// file system is below its floor. Such an index is not moved aside.
pub(crate) fn short_of_space(e: &crate::Error, dir: &Path) -> bool {
    e.is_storage_full()
        || (!index::is_damage(e) && crate::disk::Room::of(dir).is_some_and(|r| !r.above_floor()))
}

/// Opens the writable index in `dir`; if it does not pass its integrity
/// check, moves it aside and opens a fresh one. Returns why it was replaced.
pub(crate) fn open_index(dir: &Path) -> Result<(Index, Option<String>)> {
    match Index::open_verified(dir) {
        Ok(i) => Ok((i, None)),
        // A full disk is not damage: moving the index aside would lose the
        // one copy that can still be read.
        Err(e) if short_of_space(&e, dir.parent().unwrap_or(dir)) => Err(e),
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
