//! Free space of the file systems memd writes, and the room it keeps free
//! on each.
//!
//! memd writes three places that may live on different file systems:
//! `memories/` (the journal, the source of truth), `data/` (the derived
//! index, the audit log, caches) and the backup directory. Each gets its
//! own check against its own file system:
//!
//! - a **reserve** (`reserve`): below it, memd refuses new writes with
//!   `STORAGE_FULL` (507, retryable) instead of acknowledging a write the
//!   index could not take. The index and the journal finish what was
//!   already acknowledged inside the reserve.
//! - a **floor** (`floor`): below it, the index refuses to grow (and the
//!   audit log stops), so the derived files never take the last bytes of a
//!   file system the journal, SQLite's lock files or a restart still need.
//!
//! Both scale with the file system (1/16 and 1/64 of it) within fixed
//! bounds, so a 12 MiB test file system keeps 1 MiB and a large disk at
//! most 64 MiB.

use std::path::Path;

/// The smallest reserve, in bytes.
const MIN_RESERVE: u64 = 1024 * 1024;

/// The largest reserve, in bytes.
const MAX_RESERVE: u64 = 64 * 1024 * 1024;

/// Bytes free for unprivileged users and total bytes, or `None` if the OS
/// cannot tell (the path does not exist, or the platform has no such call).
pub(crate) fn space(path: &Path) -> Option<(u64, u64)> {
    let stats = fs4::statvfs(path).ok()?;
    Some((stats.available_space(), stats.total_space()))
}

/// The device id of the file system holding `path` (two paths on the same
/// file system share it), or `None` if it cannot be read.
pub(crate) fn device(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.dev())
}

/// Bytes memd keeps free on a file system of `total` bytes: below this, new
/// writes are refused (see the module docs).
pub(crate) fn reserve(total: u64) -> u64 {
    (total / 16).clamp(MIN_RESERVE, MAX_RESERVE)
}

/// Bytes below which the derived index and logs stop growing on a file
/// system of `total` bytes (a quarter of the [`reserve`]).
pub(crate) fn floor(total: u64) -> u64 {
    reserve(total) / 4
}

/// Free space of the file system holding `path` measured against its
/// reserve and floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    /// Bytes free for memd.
    pub(crate) free: u64,
    /// Size of the file system.
    pub(crate) total: u64,
}

impl Room {
    /// The room on the file system holding `path`, or `None` if the OS
    /// cannot tell (then nothing is refused on its account).
    pub(crate) fn of(path: &Path) -> Option<Room> {
        space(path).map(|(free, total)| Room { free, total })
    }

    /// Whether a new write of `bytes` fits without eating into the reserve.
    pub(crate) fn takes(&self, bytes: u64) -> bool {
        self.free >= reserve(self.total).saturating_add(bytes)
    }

    /// Whether the derived files may still grow (free space above the floor).
    pub(crate) fn above_floor(&self) -> bool {
        self.free >= floor(self.total)
    }

    /// This file system's reserve.
    pub(crate) fn reserve(&self) -> u64 {
        reserve(self.total)
    }

    /// This file system's floor.
    pub(crate) fn floor(&self) -> u64 {
        floor(self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_some_space_for_the_temp_dir() {
        let (free, total) = space(&std::env::temp_dir()).unwrap();
        assert!(total > 0 && free <= total);
        assert!(space(Path::new("/nonexistent/path")).is_none());
        assert!(device(&std::env::temp_dir()).is_some());
    }

    #[test]
    fn reserves_scale_within_bounds() {
        const MIB: u64 = 1024 * 1024;
        // (file system size, reserve, floor)
        for (total, want_reserve, want_floor) in [
            (12 * MIB, MIB, MIB / 4),
            (64 * MIB, 4 * MIB, MIB),
            (100 * 1024 * MIB, 64 * MIB, 16 * MIB),
            (0, MIB, MIB / 4),
        ] {
            assert_eq!(reserve(total), want_reserve, "{total}");
            assert_eq!(floor(total), want_floor, "{total}");
        }
        let room = Room {
            free: 2 * MIB,
            total: 12 * MIB,
        };
        assert!(room.takes(MIB));
        assert!(!room.takes(MIB + 1));
        assert!(room.above_floor());
        let full = Room {
            free: 1000,
            total: 12 * MIB,
        };
        assert!(!full.takes(0) && !full.above_floor());
    }
}
