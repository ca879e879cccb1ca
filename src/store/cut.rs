//! The files as they stood at an instant: the journal cut at `T` and the
//! documents last modified by then, copied into another `memories/` (the
//! hub's `as_of` reads build a temporary index from it).
//!
//! A journal line's time is when it was written: a `put`'s `at` (a rewrite)
//! or else its fact's `ts`, a `forget`'s or a `touch`'s `ts`. The cut keeps
//! every line whose time is at or before `T`, in its own file (archived
//! months are read through and written plain) and in its order, so the merge
//! rules see the same versions and ties; later lines are left out, and so
//! are lines without a readable time (a replay would not apply them anyway).
//! Documents are not journaled: one is in the cut, with its current content,
//! when its file was last modified at or before `T`. The rename ledger is
//! copied whole, so a document keeps the id it has now.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::error::{IoContext, Result};
use crate::store::{journal, markdown, renames};

/// What is in the cut at one instant, and how much is left out.
#[derive(Debug, Default)]
pub(crate) struct Cut {
    /// Journal files (relative to `facts/`) and the 1-based lines of each kept.
    files: Vec<(String, Vec<u64>)>,
    /// Documents (relative to `memories/`) modified at or before the instant.
    documents: Vec<String>,
    /// Journal lines and documents later than the instant.
    pub(crate) later: u64,
    /// Journal lines kept.
    pub(crate) lines: u64,
    /// Equal for two cuts that hold the same lines and documents.
    pub(crate) key: u64,
}

/// The time fields of a journal line (see the module docs).
#[derive(serde::Deserialize)]
struct Stamp {
    #[serde(default)]
    at: Option<DateTime<Utc>>,
    ts: DateTime<Utc>,
}

/// When a raw journal line was written, if it says.
fn line_time(raw: &[u8]) -> Option<DateTime<Utc>> {
    let s: Stamp = serde_json::from_slice(raw).ok()?;
    Some(s.at.unwrap_or(s.ts))
}

/// The cut of the files under `memories` at `t` (nothing is written).
pub(crate) fn plan(memories: &Path, t: DateTime<Utc>) -> Result<Cut> {
    let facts = memories.join("facts");
    let mut cut = Cut::default();
    let mut key = DefaultHasher::new();
    for file in journal::list_all(&facts)? {
        let mut kept = Vec::new();
        journal::raw_lines(&facts, &file, |n, raw| {
            match line_time(raw) {
                Some(at) if at <= t => kept.push(n),
                Some(_) => cut.later += 1,
                None => {}
            }
            Ok(())
        })?;
        (&file, &kept).hash(&mut key);
        cut.lines += kept.len() as u64;
        cut.files.push((file, kept));
    }
    for rel in markdown::list_documents(memories)? {
        let path = memories.join(&rel);
        let meta = std::fs::symlink_metadata(&path).ctx("cannot stat document", &path)?;
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if DateTime::<Utc>::from(modified) <= t {
            (&rel, modified, meta.len()).hash(&mut key);
            cut.documents.push(rel);
        } else {
            cut.later += 1;
        }
    }
    cut.key = key.finish();
    Ok(cut)
}

/// Writes `cut` of the files under `memories` into `into` (another, empty
/// `memories/`): the kept journal lines, the documents (their modification
/// time kept) and the rename ledger.
pub(crate) fn write(cut: &Cut, memories: &Path, into: &Path) -> Result<()> {
    let facts = memories.join("facts");
    for (file, kept) in &cut.files {
        let mut out = Vec::new();
        let mut next = kept.iter().peekable();
        journal::raw_lines(&facts, file, |n, raw| {
            if next.next_if_eq(&&n).is_some() {
                out.extend_from_slice(raw);
                out.push(b'\n');
            }
            Ok(())
        })?;
        let path = into.join("facts").join(file);
        create_parent(&path)?;
        std::fs::write(&path, out).ctx("cannot write the journal cut", &path)?;
    }
    for rel in &cut.documents {
        copy_keeping_time(&memories.join(rel), &into.join(rel))?;
    }
    let ledger = memories.join(renames::DIR);
    if let Ok(entries) = std::fs::read_dir(&ledger) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                copy_keeping_time(
                    &entry.path(),
                    &into.join(renames::DIR).join(entry.file_name()),
                )?;
            }
        }
    }
    Ok(())
}

fn create_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) => std::fs::create_dir_all(dir).ctx("cannot create a directory of the cut", dir),
        None => Ok(()),
    }
}

/// Copies `from` to `to` with `from`'s modification time (a document's
/// time is its file's).
fn copy_keeping_time(from: &Path, to: &Path) -> Result<()> {
    create_parent(to)?;
    let bytes = crate::store::links::open_read(from)
        .and_then(|mut f| {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut v).map(|_| v)
        })
        .ctx("cannot read a file of the cut", from)?;
    std::fs::write(to, bytes).ctx("cannot write a file of the cut", to)?;
    let modified = std::fs::symlink_metadata(from)
        .and_then(|m| m.modified())
        .ctx("cannot stat a file of the cut", from)?;
    std::fs::File::options()
        .write(true)
        .open(to)
        .and_then(|f| f.set_modified(modified))
        .ctx("cannot keep a file's time in the cut", to)
}
