//! The journal's files and the length of each, for the paths that ask on
//! every request (how far the index is behind the journal).
//!
//! Listing the journal opens `facts/` and every device directory; under a
//! file watcher each of those opens is an event the watcher wakes for, and
//! an archive's length is read from its last bytes. [`Listing`] keeps the
//! file names of the last listing and lists again only when one of the
//! directories it read changed (modification and change time, inode), and
//! keeps each archive's length while its file is unchanged. A plain file's
//! length is always `stat`ed afresh: appends do not change a directory.
//!
//! A directory changed within [`RACY`] of a listing is not trusted: a
//! second change in the same tick of the file system's clock would leave
//! its times as they were (the "racy" entries of git's index); the journal
//! is then listed plainly until [`RACY`] has passed. Anything unusual (a
//! linked directory, one that cannot be `stat`ed) is listed plainly too.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::store::{archive, device, journal};

/// How recent a directory's change may be for its listing to be kept.
const RACY: Duration = Duration::from_secs(2);

/// A file's or directory's identity and times as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    modified: Option<SystemTime>,
    changed: (i64, i64),
    inode: u64,
    len: u64,
}

impl Seen {
    fn of(meta: &std::fs::Metadata) -> Seen {
        Seen {
            modified: meta.modified().ok(),
            changed: (meta.ctime(), meta.ctime_nsec()),
            inode: meta.ino(),
            len: meta.len(),
        }
    }

    /// Whether it was modified within [`RACY`] before `at` (or after it).
    /// The change time is compared, not judged: setting the modification
    /// time back moves it to now, so such a directory differs at the next
    /// look once anything else changes it.
    fn racy(&self, at: SystemTime) -> bool {
        self.modified.is_none_or(|m| m + RACY > at)
    }
}

/// A real directory's [`Seen`]; `Ok(None)` when it does not exist, an
/// error for a link or anything else (never kept).
fn dir_seen(path: &Path) -> std::result::Result<Option<Seen>, ()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(Some(Seen::of(&m))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => Err(()),
    }
}

/// The directories a listing reads: `facts/`, its device directories,
/// `facts/archive/` and its device directories (those that exist).
fn dirs_of(facts: &Path) -> std::result::Result<Vec<(PathBuf, Seen)>, ()> {
    let mut out = Vec::new();
    let archive = facts.join(archive::DIR);
    for base in [facts.to_path_buf(), archive] {
        let Some(seen) = dir_seen(&base)? else {
            continue;
        };
        out.push((base.clone(), seen));
        for dev in device::device_dirs(&base).map_err(|_| ())? {
            let dir = base.join(dev);
            if let Some(seen) = dir_seen(&dir)? {
                out.push((dir, seen));
            }
        }
    }
    Ok(out)
}

/// The file names of one listing and the directories it read.
#[derive(Debug)]
struct Names {
    facts: PathBuf,
    dirs: Vec<(PathBuf, Seen)>,
    files: Vec<String>,
}

impl Names {
    /// Whether `facts` still holds exactly these files.
    fn current(&self, facts: &Path) -> bool {
        self.facts == facts
            && self
                .dirs
                .iter()
                .all(|(dir, seen)| dir_seen(dir) == Ok(Some(*seen)))
    }
}

/// What [`Listing`] holds between calls.
#[derive(Debug, Default)]
enum Kept {
    #[default]
    Nothing,
    Names(Names),
    /// A directory was too recent to keep the last listing: list plainly
    /// until then, without the `stat`s that keeping one takes.
    Until(SystemTime),
}

/// The journal's files and lengths, kept between calls (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    names: Mutex<Kept>,
    /// Archive path → its [`Seen`] and decompressed length.
    archives: Mutex<HashMap<PathBuf, (Seen, u64)>>,
}

impl Listing {
    /// Every journal file in reading order ([`journal::list_all`]) with the
    /// bytes of its logical stream ([`journal::content_len`]).
    pub(crate) fn lengths(&self, facts: &Path) -> Result<Vec<(String, u64)>> {
        self.files(facts)?
            .into_iter()
            .map(|file| {
                let len = self.archive_len(facts, &file)? + journal::plain_len(facts, &file)?;
                Ok((file, len))
            })
            .collect()
    }

    /// [`journal::list_all`], listed again only when a directory changed.
    fn files(&self, facts: &Path) -> Result<Vec<String>> {
        let mut kept = self.names.lock().expect("journal listing poisoned");
        let at = SystemTime::now();
        match &*kept {
            Kept::Names(n) if n.current(facts) => return Ok(n.files.clone()),
            Kept::Until(t) if at < *t => return journal::list_all(facts),
            _ => {}
        }
        let before = dirs_of(facts);
        let files = journal::list_all(facts)?;
        let after = dirs_of(facts);
        *kept = match (before, after) {
            (Ok(before), Ok(after))
                if before == after && !before.iter().any(|(_, s)| s.racy(at)) =>
            {
                Kept::Names(Names {
                    facts: facts.to_path_buf(),
                    dirs: before,
                    files: files.clone(),
                })
            }
            _ => Kept::Until(at + RACY),
        };
        Ok(files)
    }

    /// [`archive::len`], read again only when the archive's file changed.
    fn archive_len(&self, facts: &Path, file: &str) -> Result<u64> {
        let path = archive::archive_path(facts, file);
        let seen = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => Seen::of(&m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            _ => return archive::len(facts, file),
        };
        let mut archives = self.archives.lock().expect("archive lengths poisoned");
        match archives.get(&path) {
            Some((s, len)) if *s == seen => Ok(*len),
            _ => {
                let len = archive::len(facts, file)?;
                archives.insert(path, (seen, len));
                Ok(len)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(path)
            .or_else(|_| std::fs::File::open(path))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    #[test]
    fn a_new_file_is_listed_and_a_grown_one_measured() {
        let tmp = tempfile::tempdir().unwrap();
        let facts = tmp.path().join("facts");
        let dev = facts.join("laptop-3fa9c2");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("2026-11.jsonl"), "{}\n").unwrap();
        let listing = Listing::default();
        let first = listing.lengths(&facts).unwrap();
        assert_eq!(first, vec![("laptop-3fa9c2/2026-11.jsonl".to_string(), 3)]);
        // Appending changes no directory: the length is read afresh.
        std::fs::OpenOptions::new()
            .append(true)
            .open(dev.join("2026-11.jsonl"))
            .unwrap()
            .set_len(10)
            .unwrap();
        assert_eq!(listing.lengths(&facts).unwrap()[0].1, 10);
        // A file added to a directory whose times are old (trusted before).
        std::fs::write(dev.join("2026-12.jsonl"), "{}\n").unwrap();
        let files: Vec<String> = listing
            .lengths(&facts)
            .unwrap()
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            files,
            ["laptop-3fa9c2/2026-11.jsonl", "laptop-3fa9c2/2026-12.jsonl"]
        );
    }

    #[test]
    fn a_kept_listing_sees_a_file_added_later() {
        let tmp = tempfile::tempdir().unwrap();
        let facts = tmp.path().join("facts");
        let dev = facts.join("laptop-3fa9c2");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("2026-11.jsonl"), "{}\n").unwrap();
        age(&dev);
        age(&facts);
        let listing = Listing::default();
        assert_eq!(listing.lengths(&facts).unwrap().len(), 1);
        assert!(
            matches!(*listing.names.lock().unwrap(), Kept::Names(_)),
            "the listing is kept"
        );
        std::fs::write(dev.join("2026-12.jsonl"), "{}\n{}\n").unwrap();
        let after = listing.lengths(&facts).unwrap();
        assert_eq!(
            after,
            vec![
                ("laptop-3fa9c2/2026-11.jsonl".to_string(), 3),
                ("laptop-3fa9c2/2026-12.jsonl".to_string(), 6)
            ]
        );
        // A new device's directory too.
        age(&dev);
        age(&facts);
        listing.lengths(&facts).unwrap();
        let other = facts.join("phone-1b2c3d");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("2026-12.jsonl"), "{}\n").unwrap();
        assert_eq!(listing.lengths(&facts).unwrap().len(), 3);
    }
}
