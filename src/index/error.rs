//! The index's typed error: a failure of one of its backends, SQLite (the
//! metadata store and sqlite-vec) or tantivy (full text), kept as the
//! source, and told apart the way callers branch on it:
//!
//! - a full disk or quota ([`IndexError::is_full`]) is `STORAGE_FULL`
//!   (retryable: free space and retry; the index catches up);
//! - damaged index files ([`IndexError::is_damage`]: SQLite reports
//!   corruption, tantivy cannot read its own files) make the hub move the
//!   index aside and rebuild it from `memories/`;
//! - anything else is `STORAGE`.
//!
//! The conversions from `rusqlite::Error` and `tantivy::TantivyError` into
//! [`crate::Error`] live here, with the backends they convert, so `?` works
//! inside this module; `tests/integration/layering.rs` keeps rusqlite and
//! tantivy out of other modules (the vector cache under `data/cache/` wraps
//! its own SQLite errors, see [`crate::embed::cache`]).

use crate::error::{Coded, Error, ErrorCode, FULL_MESSAGES, chain_is_full};

/// A failure of the derived index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The SQLite metadata store (with its sqlite-vec tables) failed.
    #[error("metadata store: {0}{code}", code = extended_code(.0))]
    Sqlite(#[source] rusqlite::Error),
    /// The tantivy full-text index failed.
    #[error("full-text index: {0}")]
    Text(#[source] tantivy::TantivyError),
}

/// SQLite's extended result code of a failure, where it says more than the
/// message (`database is locked` is one message for several causes: a
/// busy snapshot, a recovery, a checkpoint in progress).
fn extended_code(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.extended_code & !0xff != 0 => {
            format!(" (SQLite code {})", f.extended_code)
        }
        _ => String::new(),
    }
}

impl IndexError {
    /// Whether the disk or quota holding the index is full.
    pub fn is_full(&self) -> bool {
        match self {
            IndexError::Sqlite(e) => {
                matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DiskFull))
                    || chain_is_full(e)
            }
            // tantivy reports some failures of its threads only as text.
            IndexError::Text(e) => {
                chain_is_full(e) || {
                    let text = e.to_string();
                    FULL_MESSAGES.iter().any(|m| text.contains(m))
                }
            }
        }
    }

    /// Whether the index files themselves are damaged (as opposed to, say, a
    /// full disk): such an index is moved aside and rebuilt.
    pub fn is_damage(&self) -> bool {
        use tantivy::TantivyError as T;
        match self {
            IndexError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
            ),
            IndexError::Sqlite(_) => false,
            IndexError::Text(t) => matches!(
                t,
                T::DataCorruption(_)
                    | T::OpenReadError(_)
                    | T::OpenDirectoryError(_)
                    | T::IncompatibleIndex(_)
                    | T::SchemaError(_)
            ),
        }
    }
}

impl Coded for IndexError {
    fn code(&self) -> ErrorCode {
        if self.is_full() {
            ErrorCode::StorageFull
        } else {
            ErrorCode::Storage
        }
    }
}

impl From<IndexError> for Error {
    fn from(e: IndexError) -> Self {
        Error::typed(e)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        IndexError::Sqlite(e).into()
    }
}

impl From<tantivy::TantivyError> for Error {
    fn from(e: tantivy::TantivyError) -> Self {
        IndexError::Text(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: i32) -> IndexError {
        IndexError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            None,
        ))
    }

    #[test]
    fn a_busy_failure_names_its_extended_code() {
        // SQLITE_BUSY_SNAPSHOT (517) and SQLITE_BUSY (5) share one message.
        let busy = |code| {
            IndexError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                Some("database is locked".into()),
            ))
            .to_string()
        };
        assert_eq!(
            busy(517),
            "metadata store: database is locked (SQLite code 517)"
        );
        assert_eq!(busy(5), "metadata store: database is locked");
    }

    fn io(kind: std::io::ErrorKind) -> IndexError {
        IndexError::Text(tantivy::TantivyError::IoError(std::sync::Arc::new(
            std::io::Error::new(kind, "io"),
        )))
    }

    #[test]
    fn full_disks_damage_and_other_failures_are_told_apart() {
        let corrupt = IndexError::Text(tantivy::TantivyError::DataCorruption(
            tantivy::error::DataCorruption::comment_only("bad"),
        ));
        let killed = IndexError::Text(tantivy::TantivyError::ErrorInThread(
            "An index writer was killed: No space left on device (os error 28)".into(),
        ));
        let enospc = IndexError::Text(tantivy::TantivyError::IoError(std::sync::Arc::new(
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        )));
        // (error, damaged, code)
        for (e, damage, code) in [
            (sqlite(rusqlite::ffi::SQLITE_CORRUPT), true, "STORAGE"),
            (sqlite(rusqlite::ffi::SQLITE_NOTADB), true, "STORAGE"),
            (sqlite(rusqlite::ffi::SQLITE_FULL), false, "STORAGE_FULL"),
            (sqlite(rusqlite::ffi::SQLITE_BUSY), false, "STORAGE"),
            (corrupt, true, "STORAGE"),
            (enospc, false, "STORAGE_FULL"),
            (killed, false, "STORAGE_FULL"),
            (io(std::io::ErrorKind::PermissionDenied), false, "STORAGE"),
        ] {
            assert_eq!(e.is_damage(), damage, "{e}");
            let err = Error::from(e);
            assert_eq!(err.code().as_str(), code, "{err}");
            assert!(err.code().retryable());
            assert_eq!(super::super::is_damage(&err), damage);
            assert!(
                std::error::Error::source(&err).is_some(),
                "the backend error is the source"
            );
            // A failed group commit answers every caller with the same code.
            assert_eq!(err.for_caller().code().as_str(), code);
        }
        assert!(!super::super::is_damage(&Error::Internal("x".into())));
    }
}
