//! The writer lock: one process at a time may write a root.
//!
//! An advisory exclusive lock on `ROOT/.memd.lock`, held for the life of the
//! writer. The OS releases it when the process dies, even by SIGKILL, so a
//! crash never leaves a stale lock. The file holds the owner's pid for the
//! error message a second writer gets.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// Holds the lock until dropped.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock or fails with `ROOT_LOCKED` naming the holder's pid.
    pub(crate) fn acquire(root: &Path, lock_path: &Path) -> Result<WriterLock> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock_path)
            .ctx("cannot open writer lock", lock_path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                return Err(Error::RootLocked {
                    root: root.to_path_buf(),
                    pid: pid.trim().to_string(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).ctx("cannot lock", lock_path);
            }
        }
        file.set_len(0).ctx("cannot write writer lock", lock_path)?;
        file.seek(SeekFrom::Start(0))
            .ctx("cannot write writer lock", lock_path)?;
        write!(file, "{}", std::process::id()).ctx("cannot write writer lock", lock_path)?;
        Ok(WriterLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_until_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".memd.lock");
        let first = WriterLock::acquire(dir.path(), &path).unwrap();
        let err = WriterLock::acquire(dir.path(), &path).unwrap_err();
        assert_eq!(err.code().as_str(), "ROOT_LOCKED");
        assert!(
            err.to_string().contains(&std::process::id().to_string()),
            "{err}"
        );
        drop(first);
        WriterLock::acquire(dir.path(), &path).unwrap();
    }
}
