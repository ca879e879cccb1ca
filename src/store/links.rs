//! Symbolic links under `memories/`: never followed, to read or to write.
//!
//! A link would let a file outside the root pass for a memory (a linked
//! peer journal would be indexed and served), or let memd write outside it
//! (its own journal appended through a link, the target of a dangling link
//! created wherever it points). So the store opens every file under
//! `memories/` with `O_NOFOLLOW` (a link swapped in after a check is
//! refused by the open itself), checks the directories on the way with
//! `symlink_metadata`, lists directories without following links, and
//! refuses to create anything through one. Links are not silently ignored
//! either: [`find`] lists every one, for `memd doctor` (which names each),
//! health (which counts them) and backups (which report them).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What a report says about a link.
pub(crate) const NOT_FOLLOWED: &str =
    "symbolic link, not followed (memd never follows links under memories/)";

/// Whether `path` itself is a symbolic link (not followed; `false` if absent).
pub(crate) fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Opens `path` for reading; a link at its last component is refused
/// (`ELOOP`, see [`is_loop`]).
pub(crate) fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens (creating if absent) `path` for reading and appending; a link at
/// its last component is refused, dangling or not, and nothing is created.
pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Whether an open failed because the path is a link (`O_NOFOLLOW`).
pub(crate) fn is_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// The first component of `rel` (relative to `base`) that is a symbolic
/// link, as a path relative to `base`; `None` if none is (or none exists yet).
pub(crate) fn first_link(base: &Path, rel: &str) -> Option<String> {
    let mut at = base.to_path_buf();
    let mut walked: Vec<&str> = Vec::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        at.push(part);
        walked.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Some(walked.join("/")),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Every symbolic link below `memories` (itself excluded), as paths
/// relative to it with `/`, sorted. Links are listed, never entered.
pub fn find(memories: &Path) -> Vec<String> {
    let mut out = Vec::new();
    walk(memories, "", &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if kind.is_symlink() {
            out.push(rel);
        } else if kind.is_dir() {
            walk(&entry.path(), &rel, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_found_refused_and_never_created_through() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let m = root.path();
        std::fs::create_dir_all(m.join("facts/laptop")).unwrap();
        std::fs::write(outside.path().join("peer.jsonl"), "x\n").unwrap();
        symlink(
            outside.path().join("peer.jsonl"),
            m.join("facts/laptop/2026-06.jsonl"),
        )
        .unwrap();
        symlink(
            outside.path().join("gone.jsonl"),
            m.join("facts/laptop/2026-07.jsonl"),
        )
        .unwrap();
        symlink(outside.path(), m.join("facts/peer")).unwrap();
        assert_eq!(
            find(m),
            [
                "facts/laptop/2026-06.jsonl",
                "facts/laptop/2026-07.jsonl",
                "facts/peer"
            ]
        );
        assert!(is_loop(
            &open_read(&m.join("facts/laptop/2026-06.jsonl")).unwrap_err()
        ));
        // A dangling link: refused, and its target is not created.
        let e = open_append(&m.join("facts/laptop/2026-07.jsonl")).unwrap_err();
        assert!(is_loop(&e), "{e}");
        assert!(!outside.path().join("gone.jsonl").exists());
        assert_eq!(
            first_link(m, "facts/peer/2026-06.jsonl").as_deref(),
            Some("facts/peer")
        );
        assert_eq!(first_link(m, "facts/laptop/2026-08.jsonl"), None);
    }
}
