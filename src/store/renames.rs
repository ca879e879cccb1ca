//! The rename ledger: a document keeps its id when its file is renamed or
//! moved under `memories/`.
//!
//! A document's id is `doc-<hash of its path>` unless its front matter
//! gives `id:`. When the document sync finds the same content under a new
//! path while the old path is gone (a rename, in the watcher or at the
//! start of `memd serve`), it records the move here, and from then on the
//! new path carries the old id: every supersede link and every chunk id
//! naming it still holds. The ledger lives under `memories/renames/`, one
//! append-only JSONL file per device (`<device>.jsonl`, like the journal, so
//! that a file sync tool never sees two devices write one file), and a
//! rebuilt index reads it, so `memd reindex` gives a renamed document the
//! same id as the live index did. A new file at a path a document moved
//! away from gets an id of its own (`doc-<hash of path#n>`), never the id
//! that moved. Lines are fsync'd before the sync applies the rename; a line
//! that cannot be read is skipped (the document then gets its path's id).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result};
use crate::ids;

/// The ledger's directory below `memories/`.
pub(crate) const DIR: &str = "renames";

/// One recorded move of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Rename {
    /// When the move was seen.
    pub(crate) at: DateTime<Utc>,
    /// The id the document keeps.
    pub(crate) id: String,
    /// Its path before, relative to `memories/`.
    pub(crate) from: String,
    /// Its path now.
    pub(crate) to: String,
}

/// Which id each moved document's path carries, from every device's ledger.
#[derive(Debug, Default, Clone)]
pub(crate) struct Renames {
    /// Path → the id it carries (the newest move to it wins).
    by_path: HashMap<String, String>,
}

impl Renames {
    /// Reads every device's ledger under `memories`.
    pub(crate) fn load(memories: &Path) -> Result<Renames> {
        let dir = memories.join(DIR);
        let mut moves = Vec::new();
        if crate::store::links::is_link(&dir) {
            return Ok(Renames::default());
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Renames::default()),
            Err(e) => return Err(e).ctx("cannot list", &dir),
        };
        let mut files: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        for path in files {
            let Ok(file) = crate::store::links::open_read(&path) else {
                continue;
            };
            let text = std::io::read_to_string(file).ctx("cannot read", &path)?;
            moves.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Rename>(l).ok()),
            );
        }
        moves.sort_by(|a, b| (a.at, &a.id, &a.to).cmp(&(b.at, &b.id, &b.to)));
        let mut out = Renames::default();
        for m in moves {
            out.apply(&m);
        }
        Ok(out)
    }

    /// Applies one move: `to` carries the id, `from` no longer does.
    pub(crate) fn apply(&mut self, m: &Rename) {
        self.by_path.remove(&m.from);
        self.by_path.insert(m.to.clone(), m.id.clone());
    }

    /// Whether `id` is carried by some moved path.
    fn carried(&self, id: &str) -> bool {
        self.by_path.values().any(|v| v == id)
    }

    /// Whether `rel` carries an id because a document moved there.
    pub(crate) fn moved_here(&self, rel: &str) -> bool {
        self.by_path.contains_key(rel)
    }

    /// The id of the document at `rel` whose id comes from its path: the id
    /// a document moved there carries, else its path's id unless a document
    /// that moved away took it (then `doc-<hash of rel#n>`, the first free).
    pub(crate) fn id_for(&self, rel: &str) -> String {
        if let Some(id) = self.by_path.get(rel) {
            return id.clone();
        }
        let own = ids::doc_id(rel);
        if !self.carried(&own) {
            return own;
        }
        let taken: HashSet<&String> = self.by_path.values().collect();
        (1..)
            .map(|n| ids::doc_id(&format!("{rel}#{n}")))
            .find(|id| !taken.contains(id))
            .expect("some suffix is free")
    }
}

/// Appends `m` to this device's ledger and fsyncs it.
pub(crate) fn record(memories: &Path, device: &str, m: &Rename) -> Result<()> {
    let dir = memories.join(DIR);
    std::fs::create_dir_all(&dir).ctx("cannot create", &dir)?;
    let path = dir.join(format!("{device}.jsonl"));
    let mut file = crate::store::links::open_append(&path).ctx("cannot open", &path)?;
    let mut line = serde_json::to_string(m)
        .map_err(|e| crate::Error::Internal(format!("rename ledger line: {e}")))?;
    line.push('\n');
    file.write_all(line.as_bytes())
        .ctx("cannot append to", &path)?;
    file.sync_all().ctx("cannot sync", &path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(id: &str, from: &str, to: &str, secs: i64) -> Rename {
        Rename {
            at: DateTime::from_timestamp(1_790_000_000 + secs, 0).unwrap(),
            id: id.into(),
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn moved_ids_follow_their_files_and_a_new_file_gets_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let a = ids::doc_id("notes/a.md");
        record(dir.path(), "dev1", &mv(&a, "notes/a.md", "notes/b.md", 0)).unwrap();
        record(dir.path(), "dev2", &mv(&a, "notes/b.md", "old/c.md", 5)).unwrap();
        let r = Renames::load(dir.path()).unwrap();
        assert_eq!(r.id_for("old/c.md"), a);
        assert_eq!(r.id_for("notes/b.md"), ids::doc_id("notes/b.md"));
        let fresh = r.id_for("notes/a.md");
        assert_ne!(fresh, a, "the id moved away with its document");
        assert_eq!(fresh, ids::doc_id("notes/a.md#1"));
        assert!(r.moved_here("old/c.md") && !r.moved_here("notes/a.md"));
        assert_eq!(r.id_for("other.md"), ids::doc_id("other.md"));
    }
}
