//! Durable file writes: a file is replaced whole or not at all, and once a
//! write returns, a power cut cannot take it back.
//!
//! [`write_atomic`] writes a temp file in the target's directory (a dot
//! file, so nothing that lists documents or journals ever reads it, and
//! private to the user), `fsync`s it, renames it over the target and
//! `fsync`s the directory, in that order:
//!
//! - a crash before the rename leaves the old file (and at worst a stale
//!   `.NAME.tmp.PID-N` beside it, which no reader looks at);
//! - the rename is atomic, so a reader sees the old bytes or the new ones,
//!   never a mix;
//! - the temp file's data is on disk before the rename, so a power cut after
//!   the rename cannot leave an empty or partial file under the final name
//!   (the failure that a write-then-rename without `fsync` allows);
//! - the directory `fsync` makes the rename itself survive a power cut.
//!
//! [`create_new`] does the same for files that must never be overwritten
//! (imported documents, the backup key): the finished temp file is linked to
//! its name only if that name is free. [`rename_all`] moves finished files
//! into place (a restore's staged files) and syncs their directories.

#[cfg(test)]
use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{IoContext, Result};

/// The steps of a replacement, in order. Tests stop a write after any of
/// them ([`crash_after`]) to show that the target is then the old file or the
/// new one, never a torn one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Step {
    /// The temp file exists, empty.
    Created,
    /// Half of the new bytes are in the temp file.
    HalfWritten,
    /// All of them are.
    Written,
    /// The temp file is `fsync`ed.
    Synced,
    /// The temp file has the target's name.
    Renamed,
    /// The directory is `fsync`ed: the write is complete.
    DirSynced,
}

#[cfg(test)]
impl Step {
    /// Every step, in order.
    pub(crate) const ALL: [Step; 6] = [
        Step::Created,
        Step::HalfWritten,
        Step::Written,
        Step::Synced,
        Step::Renamed,
        Step::DirSynced,
    ];
}

#[cfg(test)]
thread_local! {
    /// Where writes on this thread stop, as if the process died there.
    static STOP_AFTER: Cell<Option<Step>> = const { Cell::new(None) };
}

/// Makes every durable write on this thread stop after `step`, leaving the
/// files as a crash at that point would (`None` restores normal writes).
/// The write then fails with an error saying so.
#[cfg(test)]
pub(crate) fn crash_after(step: Option<Step>) {
    STOP_AFTER.with(|s| s.set(step));
}

/// Fails with a simulated crash if a test stops writes after `step`.
fn reached(step: Step) -> std::io::Result<()> {
    #[cfg(test)]
    if STOP_AFTER.with(Cell::get) == Some(step) {
        return Err(std::io::Error::other(format!(
            "simulated crash after {step:?}"
        )));
    }
    let _ = step;
    Ok(())
}

/// Whether a test simulates a crash on this thread.
fn crashed() -> bool {
    #[cfg(test)]
    return STOP_AFTER.with(Cell::get).is_some();
    #[cfg(not(test))]
    false
}

/// Creates (or truncates) `path` readable and writable by its owner only,
/// whatever the umask.
pub fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// A temp name beside `path`: a dot file ending in `.tmp.PID-N`, unique
/// within this process (two threads replacing one file never share one),
/// and matched by the `*.tmp.[0-9]*` line of the `.stignore` memd writes.
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.tmp.{}-{n}", std::process::id()))
}

/// Writes a complete, `fsync`ed private temp file beside `path` with what
/// `fill` writes; returns its path and what `fill` returned. The temp file is
/// removed again if anything fails.
fn finished_temp<T>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<T>,
) -> Result<(PathBuf, T)> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut file = create_private(&tmp)?;
        reached(Step::Created)?;
        let value = fill(&mut file)?;
        reached(Step::Written)?;
        file.sync_all()?;
        reached(Step::Synced)?;
        Ok(value)
    })();
    match result {
        Ok(value) => Ok((tmp, value)),
        Err(e) => {
            discard(&tmp);
            Err(e).ctx("cannot write", &tmp)
        }
    }
}

/// Removes a temp file after a failure (a simulated crash leaves it, as a real one would).
fn discard(tmp: &Path) {
    if !crashed() {
        let _ = std::fs::remove_file(tmp);
    }
}

/// Replaces `path` with `bytes` durably (see the module docs). The file is
/// private to the user (mode 0600) whatever the umask.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let half = bytes.len() / 2;
    write_atomic_with(path, |f| {
        f.write_all(&bytes[..half])?;
        reached(Step::HalfWritten)?;
        f.write_all(&bytes[half..])
    })
}

/// [`write_atomic`] with the content streamed into the temp file by `fill`
/// (a backup archive); returns what `fill` returned.
pub fn write_atomic_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<T>,
) -> Result<T> {
    let (tmp, value) = finished_temp(path, fill)?;
    if let Err(e) = std::fs::rename(&tmp, path).and_then(|()| reached(Step::Renamed)) {
        discard(&tmp);
        return Err(e).ctx("cannot replace", path);
    }
    sync_dir(parent(path))?;
    reached(Step::DirSynced).ctx("cannot replace", path)?;
    Ok(value)
}

/// Copies `from` over `to` durably, creating `to`'s directory if needed.
pub fn copy_atomic(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(parent(to)).ctx("cannot create directory", parent(to))?;
    let mut source = File::open(from).ctx("cannot open", from)?;
    write_atomic_with(to, |f| std::io::copy(&mut source, f).map(drop))
}

/// Creates `path` holding `bytes`, durably, only if nothing has that name
/// yet: readers see no file or the whole file, and an existing file (even one
/// created a moment earlier by another process) is never touched. Returns
/// whether it was created.
pub fn create_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    create_new_dated(path, bytes, None)
}

/// [`create_new`], the file carrying `modified` as its modification time
/// (when given) before it takes its name, so that no reader sees it dated
/// otherwise: a copied document keeps the date it was last edited.
pub fn create_new_dated(
    path: &Path,
    bytes: &[u8],
    modified: Option<std::time::SystemTime>,
) -> Result<bool> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let (tmp, ()) = finished_temp(path, |f| {
        f.write_all(bytes)?;
        match modified {
            Some(t) => f.set_modified(t),
            None => Ok(()),
        }
    })?;
    let linked = link_new(&tmp, path);
    discard(&tmp);
    if !linked.ctx("cannot create", path)? {
        return Ok(false);
    }
    sync_dir(parent(path))?;
    Ok(true)
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's hard links fail as on a file system without them.
    static NO_LINKS: Cell<bool> = const { Cell::new(false) };
}

/// Gives the finished `tmp` the name `path` if that name is free; returns
/// whether it did. A hard link fails if the name is taken, which a rename
/// would not. File systems without hard links (FAT, some network and FUSE
/// mounts) reserve the name with an exclusive create and rename over it
/// instead: a reader may then see an empty file for a moment, never a
/// partial one.
fn link_new(tmp: &Path, path: &Path) -> std::io::Result<bool> {
    #[cfg(test)]
    let linked = if NO_LINKS.with(Cell::get) {
        Err(std::io::Error::from_raw_os_error(libc::EPERM))
    } else {
        std::fs::hard_link(tmp, path)
    };
    #[cfg(not(test))]
    let linked = std::fs::hard_link(tmp, path);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EOPNOTSUPP | libc::ENOSYS)
            ) =>
        {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
            {
                Ok(_) => std::fs::rename(tmp, path).map(|()| true),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Moves finished files into place (`(from, to)`, same file system),
/// replacing what is there, then syncs each destination directory once, so
/// the moves survive a power cut. The caller has `fsync`ed the files
/// themselves.
pub fn rename_all(moves: &[(PathBuf, PathBuf)]) -> Result<()> {
    let mut dirs = std::collections::BTreeSet::new();
    for (from, to) in moves {
        std::fs::rename(from, to).ctx("cannot move into place", to)?;
        dirs.insert(parent(to));
    }
    dirs.into_iter().try_for_each(sync_dir)
}

/// `fsync`s a directory, so the names created, renamed or removed in it
/// survive a power cut. File systems that cannot sync a directory (they
/// answer `EINVAL`) are accepted as they are.
pub fn sync_dir(dir: &Path) -> Result<()> {
    match File::open(dir).and_then(|d| d.sync_all()) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        other => other.ctx("cannot fsync directory", dir),
    }
}

/// The directory holding `path` (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_whole_files_privately_and_leaves_no_temp() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new and longer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new and longer");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(names(dir.path()), ["state.json"]);
        let copy = dir.path().join("sub/copy.json");
        copy_atomic(&path, &copy).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), b"new and longer");
    }

    /// A crash after any step leaves the old file or the new one under the
    /// name, never a torn one, and the next write works.
    #[test]
    fn a_crash_after_any_step_leaves_the_old_or_the_new_file() {
        let old = b"{\"backup\":{\"failures\":0}}".repeat(100);
        let new = b"{\"backup\":{\"failures\":1},\"sleep\":{}}".repeat(100);
        for step in Step::ALL {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("scheduler.json");
            write_atomic(&path, &old).unwrap();
            crash_after(Some(step));
            let err = write_atomic(&path, &new).unwrap_err();
            crash_after(None);
            assert!(err.to_string().contains("cannot"), "{step:?}: {err}");
            let seen = std::fs::read(&path).unwrap();
            let want = if step >= Step::Renamed { &new } else { &old };
            assert!(seen == *want, "after a crash at {step:?} the file is torn");
            // Debris is a dot file beside it, and the next write still works.
            assert!(
                names(dir.path())
                    .iter()
                    .all(|n| n == "scheduler.json" || n.starts_with('.'))
            );
            write_atomic(&path, b"next").unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"next");
        }
    }

    #[test]
    fn create_new_never_overwrites() {
        for no_links in [false, true] {
            NO_LINKS.with(|n| n.set(no_links));
            create_new_never_overwrites_here();
        }
        NO_LINKS.with(|n| n.set(false));
    }

    #[test]
    fn create_new_dated_keeps_the_given_time() {
        for no_links in [false, true] {
            NO_LINKS.with(|n| n.set(no_links));
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("note.md");
            let then = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
            assert!(create_new_dated(&path, b"# Note\n", Some(then)).unwrap());
            let got = std::fs::metadata(&path).unwrap().modified().unwrap();
            assert_eq!(got, then, "links: {}", !no_links);
        }
        NO_LINKS.with(|n| n.set(false));
    }

    fn create_new_never_overwrites_here() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        assert!(create_new(&path, b"first").unwrap());
        assert!(!create_new(&path, b"second").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        // A dangling link is a taken name, not free space to write through.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert!(!create_new(&link, b"x").unwrap());
        assert!(!dir.path().join("nowhere").exists());
        assert_eq!(names(dir.path()), ["key", "link"]);
    }

    #[test]
    fn rename_all_moves_finished_files_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let staged = dir.path().join(".stage/a.jsonl");
        std::fs::create_dir_all(staged.parent().unwrap()).unwrap();
        std::fs::write(&staged, b"line\n").unwrap();
        let to = dir.path().join("a.jsonl");
        std::fs::write(&to, b"li").unwrap();
        rename_all(&[(staged.clone(), to.clone())]).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"line\n");
        assert!(!staged.exists());
    }
}
