//! Whole files under `memories/` that do not come through the journal:
//! documents an import or a migration adds, and the files a backup restore
//! takes from its archive. Both go through here so that `store` stays the
//! only writer of `memories/` (the journal, categories, membership and the
//! sync ignore file have their own files in this module).
//!
//! Adding never overwrites: a document is created durably and atomically
//! only if its name is free ([`crate::base::durable::create_new`]), so a
//! reader (the watcher, a reindex) sees no file or the whole file. A restore
//! moves files it has already staged and `fsync`ed into place
//! (`adopt_all`); the caller (the restore) decides what may be replaced.

use std::path::{Component, Path, PathBuf};

use crate::base::durable;
use crate::error::{Error, IoContext, Result};

/// What adding a document found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// The file was created.
    Created,
    /// A file with the same bytes was already there.
    Identical,
    /// Another file was there; it was left as it is.
    Different,
}

/// The path of `rel` (relative, `/`-separated, no `..`) below `memories`.
fn below(memories: &Path, rel: &str) -> Result<PathBuf> {
    let path = Path::new(rel);
    let plain = !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(Error::invalid(format!(
            "{rel:?} is not a plain relative path below memories/"
        )));
    }
    // Nothing is written through a link (see `store::links`).
    if let Some(link) = super::links::first_link(memories, rel) {
        return Err(super::StoreError::Damaged {
            path: memories.join(link),
            problem: format!(
                "{}; {rel} is not written through it",
                super::links::NOT_FOLLOWED
            ),
        }
        .into());
    }
    Ok(memories.join(path))
}

/// Adds the document `rel` with `bytes` unless something has that name (a
/// link included: it is never written through). With `modified`, the new
/// file keeps that modification time (a copy keeps its original's date).
pub(crate) fn add_document(
    memories: &Path,
    rel: &str,
    bytes: &[u8],
    modified: Option<std::time::SystemTime>,
) -> Result<Added> {
    let path = below(memories, rel)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ctx("cannot create", dir)?;
    }
    if durable::create_new_dated(&path, bytes, modified)? {
        return Ok(Added::Created);
    }
    let same = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
        && std::fs::read(&path).is_ok_and(|b| b == bytes);
    Ok(if same {
        Added::Identical
    } else {
        Added::Different
    })
}

/// Moves staged, `fsync`ed files (`(rel, staged)`) to `rel` below
/// `memories`, replacing what is there (a restore has checked that only a
/// journal prefix is replaced), and makes the moves durable.
pub(crate) fn adopt_all(memories: &Path, staged: &[(&str, PathBuf)]) -> Result<()> {
    let mut moves = Vec::with_capacity(staged.len());
    for (rel, from) in staged {
        let to = below(memories, rel)?;
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).ctx("cannot create", dir)?;
        }
        moves.push((from.clone(), to));
    }
    durable::rename_all(&moves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_never_overwrites_and_paths_stay_below_memories() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("memories");
        assert_eq!(
            add_document(&m, "import/a/b.md", b"# B\n", None).unwrap(),
            Added::Created
        );
        assert_eq!(
            add_document(&m, "import/a/b.md", b"# B\n", None).unwrap(),
            Added::Identical
        );
        assert_eq!(
            add_document(&m, "import/a/b.md", b"# other\n", None).unwrap(),
            Added::Different
        );
        assert_eq!(std::fs::read(m.join("import/a/b.md")).unwrap(), b"# B\n");
        for bad in ["", "../x.md", "/etc/x.md", "a/../../x.md", "./x.md"] {
            let e = add_document(&m, bad, b"x", None).unwrap_err();
            assert_eq!(e.code().as_str(), "INVALID_INPUT", "{bad}");
        }
        let staged = dir.path().join("stage.jsonl");
        std::fs::write(&staged, b"{}\n").unwrap();
        adopt_all(&m, &[("facts/2026-11.jsonl", staged)]).unwrap();
        assert_eq!(
            std::fs::read(m.join("facts/2026-11.jsonl")).unwrap(),
            b"{}\n"
        );
    }
}
