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
//!
//! Planning a cut reads no journal line that was read before: [`Summaries`]
//! keeps, per journal file, the time of each of its lines (and the same
//! times sorted), with what a stat said of the file (length, modification
//! time, inode; its archive's too) when it was read. A plan stats the files;
//! one whose stat is unchanged is not opened, one that grew in place (same
//! inode, same archive, no shorter) is read from where the last read
//! stopped, any other change is read again from its start. Counting the
//! lines at or before `T` is then a binary search per file, and so is the
//! cut's key: per file, the read that started its summary, how many lines
//! are kept and the latest kept time, which name the same kept lines for as
//! long as the file is only appended to.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::error::{IoContext, Result};
use crate::store::journal::{self, Cursor};
use crate::store::{archive, markdown, renames};

/// What is in the cut at one instant, and how much is left out.
#[derive(Debug)]
pub(crate) struct Cut {
    /// The instant.
    t: DateTime<Utc>,
    /// Journal files (relative to `facts/`) and their line times.
    files: Vec<(String, Arc<Summary>)>,
    /// Documents (relative to `memories/`) modified at or before the instant.
    documents: Vec<String>,
    /// Journal lines and documents later than the instant.
    pub(crate) later: u64,
    /// Journal lines kept.
    pub(crate) lines: u64,
    /// About the bytes of the kept lines and documents (a file's share of
    /// its bytes, archived ones as stored).
    pub(crate) bytes: u64,
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

/// What a stat says of one file; any change to the file changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStat {
    len: u64,
    modified: SystemTime,
    dev: u64,
    ino: u64,
}

impl FileStat {
    fn of(path: &Path) -> Result<Option<FileStat>> {
        match std::fs::symlink_metadata(path) {
            Ok(m) => Ok(Some(FileStat {
                len: m.len(),
                modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                dev: m.dev(),
                ino: m.ino(),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).ctx("cannot stat journal", path),
        }
    }
}

/// A journal file as stats see it: its archive and its plain file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    archive: Option<FileStat>,
    plain: Option<FileStat>,
}

impl Seen {
    fn of(facts: &Path, file: &str) -> Result<Seen> {
        Ok(Seen {
            archive: FileStat::of(&archive::archive_path(facts, file))?,
            plain: FileStat::of(&facts.join(file))?,
        })
    }

    /// Whether `now` is this file with lines appended (same archive, same
    /// plain file, no shorter).
    fn grown_to(&self, now: &Seen) -> bool {
        match (self.plain, now.plain) {
            (Some(was), Some(is)) => {
                self.archive == now.archive
                    && (was.dev, was.ino) == (is.dev, is.ino)
                    && is.len >= was.len
            }
            _ => false,
        }
    }
}

/// The line times of one journal file, as far as it has been read.
#[derive(Debug, Clone)]
pub(crate) struct Summary {
    /// The file when it was last read (stat taken before reading).
    seen: Seen,
    /// After the last complete line read.
    cursor: Cursor,
    /// Each complete line's time, in file order (`None`: no readable time).
    times: Vec<Option<DateTime<Utc>>>,
    /// The readable times, sorted.
    sorted: Vec<DateTime<Utc>>,
    /// Names the read that started this summary (appends keep it).
    generation: u64,
}

impl Summary {
    fn read(facts: &Path, file: &str, seen: Seen) -> Result<Summary> {
        static GENERATION: AtomicU64 = AtomicU64::new(0);
        let mut summary = Summary {
            seen,
            cursor: Cursor::default(),
            times: Vec::new(),
            sorted: Vec::new(),
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        };
        summary.extend(facts, file)?;
        Ok(summary)
    }

    /// Reads the complete lines after the cursor.
    fn extend(&mut self, facts: &Path, file: &str) -> Result<()> {
        let from = self.sorted.len();
        let times = &mut self.times;
        let sorted = &mut self.sorted;
        self.cursor = journal::raw_lines_from(facts, file, self.cursor, |_, raw| {
            let t = line_time(raw);
            times.push(t);
            sorted.extend(t);
            Ok(())
        })?;
        if !self.sorted[from.saturating_sub(1)..].is_sorted() {
            self.sorted.sort_unstable();
        }
        Ok(())
    }

    /// How many lines are at or before `t`, and the latest of their times.
    fn upto(&self, t: DateTime<Utc>) -> (usize, Option<DateTime<Utc>>) {
        let n = self.sorted.partition_point(|x| *x <= t);
        (n, n.checked_sub(1).map(|i| self.sorted[i]))
    }

    /// About the bytes of `n` of the file's lines: their share of its bytes.
    fn bytes_upto(&self, n: usize) -> u64 {
        let stored = [self.seen.plain, self.seen.archive]
            .iter()
            .flatten()
            .map(|s| s.len)
            .sum::<u64>();
        let all = self.times.len().max(1) as u64;
        stored.saturating_mul(n as u64) / all
    }

    /// The 1-based numbers of the lines at or before `t`, in order.
    fn kept(&self, t: DateTime<Utc>) -> impl Iterator<Item = u64> + '_ {
        (1u64..)
            .zip(&self.times)
            .filter(move |(_, x)| x.is_some_and(|x| x <= t))
            .map(|(n, _)| n)
    }
}

/// The [`Summary`] of each journal file, kept between plans.
#[derive(Debug, Default)]
pub(crate) struct Summaries(Mutex<HashMap<String, Arc<Summary>>>);

impl Summaries {
    /// Every journal file under `facts`, in reading order, with its summary
    /// brought up to date (see the module docs).
    fn current(&self, facts: &Path) -> Result<Vec<(String, Arc<Summary>)>> {
        let files = journal::list_all(facts)?;
        let mut map = self.0.lock().expect("journal summaries poisoned");
        let listed: std::collections::HashSet<&String> = files.iter().collect();
        map.retain(|f, _| listed.contains(f));
        let mut out = Vec::with_capacity(files.len());
        for file in &files {
            let seen = Seen::of(facts, file)?;
            let summary = refresh(facts, file, seen, map.remove(file))?;
            map.insert(file.clone(), Arc::clone(&summary));
            out.push((file.clone(), summary));
        }
        Ok(out)
    }
}

/// `old` if the file is as it was, extended if it grew, else read anew.
fn refresh(
    facts: &Path,
    file: &str,
    seen: Seen,
    old: Option<Arc<Summary>>,
) -> Result<Arc<Summary>> {
    let Some(mut summary) = old else {
        return Ok(Arc::new(Summary::read(facts, file, seen)?));
    };
    if summary.seen == seen {
        return Ok(summary);
    }
    if summary.seen.grown_to(&seen) && journal::content_len(facts, file)? >= summary.cursor.offset {
        let grown = Arc::make_mut(&mut summary);
        grown.seen = seen;
        grown.extend(facts, file)?;
        return Ok(summary);
    }
    Ok(Arc::new(Summary::read(facts, file, seen)?))
}

/// The cut of the files under `memories` at `t` (nothing is written), with
/// the journal's line times from `summaries`.
pub(crate) fn plan(memories: &Path, t: DateTime<Utc>, summaries: &Summaries) -> Result<Cut> {
    let mut cut = Cut {
        t,
        files: Vec::new(),
        documents: Vec::new(),
        later: 0,
        lines: 0,
        bytes: 0,
        key: 0,
    };
    let mut key = DefaultHasher::new();
    for (file, summary) in summaries.current(&memories.join("facts"))? {
        let (n, latest) = summary.upto(t);
        (&file, summary.generation, n, latest).hash(&mut key);
        cut.lines += n as u64;
        cut.bytes += summary.bytes_upto(n);
        cut.later += (summary.sorted.len() - n) as u64;
        cut.files.push((file, summary));
    }
    plan_documents(memories, &mut cut, &mut key)?;
    cut.key = key.finish();
    Ok(cut)
}

/// The documents of `cut`: those modified at or before its instant.
fn plan_documents(memories: &Path, cut: &mut Cut, key: &mut DefaultHasher) -> Result<()> {
    for rel in markdown::list_documents(memories)? {
        let path = memories.join(&rel);
        let meta = std::fs::symlink_metadata(&path).ctx("cannot stat document", &path)?;
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if DateTime::<Utc>::from(modified) <= cut.t {
            (&rel, modified, meta.len(), meta.ino()).hash(key);
            cut.bytes += meta.len();
            cut.documents.push(rel);
        } else {
            cut.later += 1;
        }
    }
    Ok(())
}

/// Writes `cut` of the files under `memories` into `into` (another, empty
/// `memories/`): the kept journal lines, the documents (their modification
/// time kept) and the rename ledger.
pub(crate) fn write(cut: &Cut, memories: &Path, into: &Path) -> Result<()> {
    let facts = memories.join("facts");
    for (file, summary) in &cut.files {
        let mut out = Vec::new();
        let mut next = summary.kept(cut.t).peekable();
        journal::raw_lines(&facts, file, |n, raw| {
            if next.next_if_eq(&n).is_some() {
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
