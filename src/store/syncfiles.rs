//! Files a file-sync tool leaves below `memories/`: conflict copies and
//! temporary files (Syncthing's names), and the `.stignore` memd writes for
//! it (durably, and never over one the user wrote).
//!
//! - A *conflict copy* (`name.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext`) is
//!   what Syncthing keeps when a file changed on two devices at once. memd
//!   never indexes one (a copy of a document would be indexed twice): a
//!   document's copy is the loser of a concurrent edit, for the user to merge
//!   by hand; a journal's copy should not happen (each device appends only to
//!   its own files) and means two roots share a device id. Both are reported
//!   by [`crate::hub::Hub::health`] and `memd doctor`.
//! - *Temporary files* (`.syncthing.NAME.tmp`, `~syncthing~NAME.tmp`) are
//!   files being received; they are ignored (dot files are never read, and
//!   neither name is a document or journal name) and never reported.

use std::path::Path;

use crate::error::{IoContext, Result};

/// The marker in a Syncthing conflict copy's name.
pub(crate) const CONFLICT_MARK: &str = ".sync-conflict-";

/// The ignore file [`stignore`] writes below `memories/`.
pub(crate) const STIGNORE: &str = ".stignore";

/// Whether a file name is a sync conflict copy.
pub(crate) fn is_conflict_name(name: &str) -> bool {
    name.contains(CONFLICT_MARK)
}

/// Conflict copies below `memories/` (journals included), as paths relative
/// to it, sorted; at most `limit`, plus the total found.
pub(crate) fn conflict_copies(memories: &Path, limit: usize) -> (Vec<String>, usize) {
    fn walk(
        base: &Path,
        dir: &Path,
        out: &mut Vec<String>,
        total: &mut usize,
        limit: usize,
        depth: u32,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() && !name.starts_with('.') && depth < 32 {
                walk(base, &entry.path(), out, total, limit, depth + 1);
            } else if ft.is_file() && is_conflict_name(&name) {
                *total += 1;
                if out.len() < limit
                    && let Ok(rel) = entry.path().strip_prefix(base)
                {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut total = 0;
    walk(memories, memories, &mut out, &mut total, limit, 0);
    out.sort();
    (out, total)
}

/// The `.stignore` for a Syncthing folder on `memories/`. The sync root is
/// `memories/`, so the index (`data/`), tokens, config and the device file,
/// which live beside it, are never offered; this keeps temporary and
/// conflict files and editor litter from travelling.
pub(crate) fn stignore() -> &'static str {
    "// Written by `memd sync init`: the Syncthing folder is memories/.\n\
     // data/, tokens.json, config.json and device.json live outside it and never sync.\n\
     (?d).DS_Store\n\
     (?d)*.swp\n\
     (?d)*~\n\
     (?d).#*\n\
     *.sync-conflict-*.jsonl\n\
     *.tmp.[0-9]*\n"
}

/// Writes `memories/.stignore` durably unless a different one is there
/// (kept: it is the user's). Returns whether it was written.
pub(crate) fn write_stignore(memories: &Path) -> Result<bool> {
    let path = memories.join(STIGNORE);
    let want = stignore();
    match std::fs::read_to_string(&path) {
        Ok(have) if have == want => return Ok(false),
        Ok(have) if !have.starts_with("// Written by `memd sync init`") => {
            tracing::warn!(path = %path.display(), "an .stignore of your own is kept as it is");
            return Ok(false);
        }
        _ => {}
    }
    std::fs::create_dir_all(memories).ctx("cannot create", memories)?;
    crate::base::durable::write_atomic(&path, want.as_bytes())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_conflict_name(
            "notes.sync-conflict-20261130-101010-ABCDEFG.md"
        ));
        assert!(is_conflict_name(
            "2026-11.sync-conflict-20261130-101010-ABCDEFG.jsonl"
        ));
        assert!(!is_conflict_name("notes.md"));
    }

    #[test]
    fn finds_copies_of_documents_and_journals() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path();
        std::fs::create_dir_all(m.join("facts/laptop")).unwrap();
        std::fs::write(m.join("a.md"), "x").unwrap();
        std::fs::write(m.join("a.sync-conflict-20261130-101010-ABCDEFG.md"), "y").unwrap();
        std::fs::write(
            m.join("facts/laptop/2026-11.sync-conflict-20261130-101010-ABCDEFG.jsonl"),
            "",
        )
        .unwrap();
        std::fs::write(m.join(".syncthing.a.md.tmp"), "").unwrap();
        let (found, total) = conflict_copies(m, 10);
        assert_eq!(total, 2);
        assert_eq!(found.len(), 2);
        assert!(found.iter().any(|f| f.starts_with("facts/laptop/")));
        assert_eq!(conflict_copies(m, 1).0.len(), 1);
    }
}
