//! What the journal holds that the index has not applied yet, and damage in
//! lines it has.
//!
//! The index is derived, so it can fall behind the journal: a full disk, a
//! file another device's sync tool just copied in, a burst of lines the
//! catch-up has not reached. This part answers, without holding the
//! writer:
//!
//! - how far behind the index is ([`lag`]: journal bytes past the index's
//!   cursors, one `stat` per file; the file names are listed again only when
//!   a journal directory changed, see [`crate::store::listing`]), and how many of those lines a caller
//!   could read ([`lines_for`]; only lines the caller's filter admits are
//!   counted, so the number says nothing about memories it may not read);
//! - a memory that is in the journal but not in the index yet ([`find`]),
//!   so `get` of an acknowledged write never answers `NOT_FOUND` while the
//!   index catches up;
//! - which journal files changed inside the part already applied
//!   ([`Backlog::changed_in_place`]: a file whose size and modification
//!   time moved without growing past the cursor), and the bad lines of such
//!   a file read again from its start ([`recheck`]). A line damaged after
//!   it was indexed is reported like any unreadable line, so health and
//!   stats count it at once, instead of a later reindex dropping its
//!   memory without a word.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::SystemTime;

use super::{Core, pins};
use crate::error::{IoContext, Result};
use crate::index::Batch;
use crate::index::filter::Filter;
use crate::model::{Fact, Memory, Record, Stage};
use crate::store::journal::{self, Cursor, LineIssue};

/// Journal bytes past the index's cursors.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lag {
    /// Bytes not applied, over every journal file.
    pub(crate) bytes: u64,
    /// Files with bytes not applied.
    pub(crate) files: usize,
}

/// Parsing the backlog for a caller's count stops after this many bytes
/// (the count is then a lower bound): a search must not read a whole
/// newly copied device file while the catch-up is applying it.
const COUNT_BYTES: u64 = 4 * 1024 * 1024;

/// A journal file's identity and size as last read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(path: &std::path::Path) -> Result<Option<Stamp>> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(Some(Stamp {
                len: m.len(),
                modified: m.modified().ok(),
                inode: m.ino(),
            })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).ctx("cannot stat journal", path),
        }
    }
}

/// What the catch-up last saw of each plain journal file (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    stamps: Mutex<HashMap<String, Stamp>>,
}

impl Backlog {
    /// The state of `file` now: take it before reading new lines, and
    /// [`Backlog::remember`] it once they are applied.
    pub(crate) fn stamp(&self, core: &Core, file: &str) -> Option<Stamp> {
        Stamp::of(&core.layout.facts().join(file)).ok().flatten()
    }

    /// Records the state `file` was in when its new lines were read.
    pub(crate) fn remember(&self, file: &str, stamp: Option<Stamp>) {
        if let Some(stamp) = stamp {
            self.stamps
                .lock()
                .expect("journal stamps poisoned")
                .insert(file.to_string(), stamp);
        }
    }

    /// Plain journal files that changed inside the part the index already
    /// applied (size and modification time moved, and the file did not
    /// grow past its cursor). A file seen for the first time is trusted as
    /// it is: damage from before this process started is for `memd doctor`.
    pub(crate) fn changed_in_place(&self, core: &Core) -> Result<Vec<String>> {
        let facts = core.layout.facts();
        let cursors = core.index.meta.cursors()?;
        let mut stamps = self.stamps.lock().expect("journal stamps poisoned");
        let mut out = Vec::new();
        for file in journal::list_files(&facts)? {
            // An archived month's plain file holds only what came after its
            // archive; the archive itself is checked when it is read.
            if crate::store::archive::len(&facts, &file)? > 0 {
                continue;
            }
            let Some(now) = Stamp::of(&facts.join(&file))? else {
                continue;
            };
            let applied = cursors.get(&file).map_or(0, |c| c.offset);
            match stamps.get(&file) {
                Some(seen) if *seen == now => {}
                // New lines: the catch-up reads them and stamps the file.
                Some(_) if now.len > applied => {}
                Some(_) => {
                    out.push(file.clone());
                    stamps.insert(file, now);
                }
                None => {
                    stamps.insert(file, now);
                }
            }
        }
        Ok(out)
    }
}

/// The memory a `put` line makes, as replay indexes it: a long-term fact
/// carries no expiry unless tier expiry is on (see `super::catchup`).
pub(crate) fn memory_of(fact: &Fact, tier_expiry: bool) -> Memory {
    let mut m = Memory::from(fact);
    if fact.stage == Stage::Long && !tier_expiry {
        m.expires_at = None;
    }
    m
}

/// Journal files with bytes past the index's cursors, with the cursor to
/// read from.
fn tails(core: &Core) -> Result<Vec<(String, Cursor)>> {
    let facts = core.layout.facts();
    let cursors = core.index.resume_cursors()?;
    let mut out = Vec::new();
    for (file, len) in core.journal.lengths(&facts)? {
        let mut from = cursors.get(&file).copied().unwrap_or_default();
        if from.offset > len {
            // Shorter than the index remembers: the catch-up reads it again.
            from = Cursor::default();
        }
        if len > from.offset {
            out.push((file, from));
        }
    }
    Ok(out)
}

/// How far the index is behind the journal (see the module docs).
pub(crate) fn lag(core: &Core) -> Result<Lag> {
    let facts = core.layout.facts();
    let cursors = core.index.resume_cursors()?;
    let mut lag = Lag::default();
    for (file, len) in core.journal.lengths(&facts)? {
        let applied = cursors.get(&file).map_or(0, |c| c.offset);
        let behind = if applied > len { len } else { len - applied };
        if behind > 0 {
            lag.bytes += behind;
            lag.files += 1;
        }
    }
    Ok(lag)
}

/// Complete journal lines the index has not applied, counted for a reader
/// whose visibility is `filter` (`None`: every line, for the operator and
/// health). A caller counts a `put` it could read and a `forget` of a
/// memory it could read; access counts and unreadable lines are not
/// counted for it.
pub(crate) fn lines_for(core: &Core, filter: Option<&Filter>) -> Result<u64> {
    let facts = core.layout.facts();
    let tails = tails(core)?;
    let Some(filter) = filter else {
        let mut n = 0;
        for (file, from) in &tails {
            n += journal::count_lines(&facts, file, *from)?;
        }
        return Ok(n);
    };
    let tier_expiry = core.config().lifecycle.tier_expiry;
    let mut admitted: HashSet<String> = HashSet::new();
    let mut n = 0u64;
    let mut read = 0u64;
    for (file, from) in &tails {
        if read >= COUNT_BYTES {
            break;
        }
        let mut last = *from;
        journal::scan_file(&facts, file, *from, |item| {
            read += item.cursor.offset - last.offset;
            last = item.cursor;
            match item.entry {
                Ok(Record::Put { fact, .. }) => {
                    if filter.admits(&memory_of(&fact, tier_expiry)) {
                        admitted.insert(fact.id);
                        n += 1;
                    }
                }
                Ok(Record::Forget { id, .. }) => {
                    let visible = admitted.contains(&id)
                        || !core
                            .index
                            .meta
                            .get_many(std::slice::from_ref(&id), filter)?
                            .is_empty();
                    if visible {
                        n += 1;
                    }
                }
                Ok(Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. }) | Err(_) => {
                }
            }
            Ok(())
        })?;
    }
    Ok(n)
}

/// The memory `id` as the journal lines the index has not applied yet
/// leave it, if one of them puts it, none forgets it afterwards, and it is
/// visible under `filter` (the same test as the index's `WHERE`).
pub(crate) fn find(core: &Core, id: &str, filter: &Filter) -> Result<Option<Memory>> {
    if core.index.meta.fact_state(id)? == Some(false) {
        // Forgotten in the index: a pending line does not bring it back here.
        return Ok(None);
    }
    let facts = core.layout.facts();
    let tier_expiry = core.config().lifecycle.tier_expiry;
    let mut found: Option<Fact> = None;
    for (file, from) in tails(core)? {
        journal::scan_file(&facts, &file, from, |item| {
            match item.entry {
                // A line replay quarantines is never served (see `catchup`).
                Ok(ref r)
                    if matches!(
                        crate::content::replay_verdict(r),
                        crate::content::Replay::Quarantine(_)
                    ) => {}
                Ok(Record::Put { fact, .. }) if fact.id == id => found = Some(fact),
                Ok(Record::Forget { id: gone, .. }) if gone == id => found = None,
                _ => {}
            }
            Ok(())
        })?;
    }
    Ok(found
        .map(|f| memory_of(&f, tier_expiry))
        .filter(|m| filter.admits(m)))
}

/// Reads `file` again from its first line up to the index's cursor and
/// returns a batch that replaces its recorded bad lines with the ones found
/// now (by the same rules as replay). A line that was readable when it was
/// applied says so: its memory is still served, but a reindex or restore
/// would drop it.
pub(crate) fn recheck(core: &Core, file: &str) -> Result<Batch> {
    let facts = core.layout.facts();
    let applied = core
        .index
        .meta
        .cursors()?
        .get(file)
        .copied()
        .unwrap_or_default();
    let prefix = format!("facts/{file}:");
    let before: HashSet<u64> = core
        .index
        .meta
        .issues()?
        .iter()
        .filter_map(|i| i.strip_prefix(&prefix)?.split(':').next()?.parse().ok())
        .collect();
    let config = core.config();
    let pins = pins(&config);
    let mut batch = Batch {
        rechecked: vec![file.to_string()],
        ..Batch::default()
    };
    journal::scan_file(&facts, file, Cursor::default(), |item| {
        if item.cursor.lines > applied.lines {
            return Ok(());
        }
        let line = item.cursor.lines;
        let problem = match item.entry {
            Ok(record) => record.validate(&pins).err().map(|e| e.to_string()),
            Err(issue) => Some(issue.message),
        };
        if let Some(message) = problem {
            let message = if before.contains(&line) {
                message
            } else {
                format!(
                    "{message} (damaged after it was indexed: its memory is still served, \
                     but a reindex or restore would drop it; restore the line from a backup)"
                )
            };
            batch.issues.push(LineIssue {
                file: file.to_string(),
                line,
                message,
            });
        }
        Ok(())
    })?;
    Ok(batch)
}
