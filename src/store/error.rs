//! The store's typed error: the failures of the source of truth that callers
//! tell apart. A journal append that did not happen says whether the disk is
//! full (`STORAGE_FULL`, retryable: free space and retry) or something else
//! failed (`STORAGE`), and was rolled back either way; a file the store owns
//! that is not what it must be is `INTERNAL` until someone fixes it. Other
//! file operations of the store are [`crate::Error::Io`] with their path.

use std::path::PathBuf;

use crate::error::{Coded, Error, ErrorCode, io_is_full};

/// A failure of the source of truth.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Writing or `fsync`ing appended lines failed; the group was rolled back.
    #[error("cannot append to journal {}", path.display())]
    Append {
        /// The journal file.
        path: PathBuf,
        /// The OS error (`ENOSPC`, `EDQUOT`, `EIO`, …).
        #[source]
        source: std::io::Error,
    },
    /// Appended lines did not read back as written; the group was rolled back.
    #[error("{} did not read back as written", path.display())]
    ReadBack {
        /// The journal file.
        path: PathBuf,
    },
    /// A file the store owns is not what it must be (a journal name that is
    /// not a regular file, an unreadable membership table); nothing is
    /// written to it until it is fixed.
    #[error("{}: {problem}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it and what to do.
        problem: String,
    },
}

impl StoreError {
    /// Whether this is a full disk or quota.
    pub fn is_full(&self) -> bool {
        matches!(self, StoreError::Append { source, .. } if io_is_full(source))
    }
}

impl Coded for StoreError {
    fn code(&self) -> ErrorCode {
        match self {
            _ if self.is_full() => ErrorCode::StorageFull,
            StoreError::Append { .. } | StoreError::ReadBack { .. } => ErrorCode::Storage,
            StoreError::Damaged { .. } => ErrorCode::Internal,
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::typed(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_say_full_disk_storage_or_damage() {
        let append = |errno| StoreError::Append {
            path: "/r/memories/facts/d/2026-11.jsonl".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        for (e, code, retryable) in [
            (append(libc::ENOSPC), "STORAGE_FULL", true),
            (append(libc::EDQUOT), "STORAGE_FULL", true),
            (append(libc::EIO), "STORAGE", true),
            (
                StoreError::ReadBack {
                    path: "/r/x.jsonl".into(),
                },
                "STORAGE",
                true,
            ),
            (
                StoreError::Damaged {
                    path: "/r/memories/groups/members.json".into(),
                    problem: "unreadable".into(),
                },
                "INTERNAL",
                false,
            ),
        ] {
            let full = e.is_full();
            let err = Error::from(e);
            assert_eq!(err.code().as_str(), code, "{err}");
            assert_eq!(err.code().retryable(), retryable);
            assert_eq!(err.is_storage_full(), full);
            assert!(err.downcast_ref::<StoreError>().is_some());
            // A failed group commit answers every caller with the same code.
            assert_eq!(err.for_caller().code().as_str(), code);
        }
        assert!(
            std::error::Error::source(&Error::from(append(libc::ENOSPC))).is_some(),
            "the OS error is the source"
        );
    }
}
