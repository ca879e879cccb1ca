//! Paths under one root and the private file modes of what memd writes there.
//!
//! The lowest layer every module may use: it knows where things live
//! (`memories/`, `data/`, `config.json`, ...), not what they contain.

use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// Paths under one root.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The root directory.
    pub(crate) root: PathBuf,
}

impl Layout {
    /// A layout for `root` (not created yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    /// `memories/`: documents and the fact journal.
    pub(crate) fn memories(&self) -> PathBuf {
        self.root.join("memories")
    }

    /// `memories/facts/`: the journal.
    pub fn facts(&self) -> PathBuf {
        self.memories().join("facts")
    }

    /// `data/`: derived files only.
    pub(crate) fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    /// `data/index/`: the rebuildable index (tantivy + SQLite).
    pub fn index(&self) -> PathBuf {
        self.data().join("index")
    }

    /// `data/cache/`: derived caches that survive `memd reindex` (vectors).
    pub(crate) fn cache(&self) -> PathBuf {
        self.data().join("cache")
    }

    /// `config.json`.
    pub fn config(&self) -> PathBuf {
        self.root.join("config.json")
    }

    /// `tokens.json`: issued tokens, hashed.
    pub fn tokens(&self) -> PathBuf {
        self.root.join("tokens.json")
    }

    /// `data/audit.jsonl`: the HTTP audit log.
    pub fn audit(&self) -> PathBuf {
        self.data().join("audit.jsonl")
    }

    /// The writer lock file.
    pub(crate) fn lock(&self) -> PathBuf {
        self.root.join(".memd.lock")
    }

    /// Creates `memories/facts/` and `data/` if missing, and makes the root's
    /// own files private (see [`Layout::tighten`]).
    pub(crate) fn create_dirs(&self) -> Result<()> {
        for dir in [self.facts(), self.data()] {
            std::fs::create_dir_all(&dir).ctx("cannot create directory", &dir)?;
        }
        self.tighten();
        Ok(())
    }

    /// What memd keeps under the root and must be readable by its user only:
    /// directories (walked) and single files.
    pub(crate) fn private_paths(&self) -> Vec<PathBuf> {
        vec![
            self.memories(),
            self.data(),
            self.root.join("backups"),
            self.tokens(),
            self.config(),
            self.lock(),
        ]
    }

    /// Removes group and other permissions from memd's files under the root:
    /// directories become 0700, files 0600 (execute bits of the owner kept).
    /// A tree is walked only when its top still has such bits (a root made by
    /// an older memd), so this costs one `stat` per path on every open.
    /// Failures (a file owned by someone else) are logged, not fatal:
    /// `memd doctor` reports what is left.
    pub(crate) fn tighten(&self) {
        for path in self.private_paths() {
            match open_mode(&path) {
                Some(mode) if mode & 0o077 != 0 => {
                    if let Err(e) = tighten_tree(&path) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot make private");
                    }
                }
                _ => {}
            }
        }
    }
}

/// The permission bits of `path` (not following symlinks), if it exists.
pub fn open_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// Removes group and other permissions from `path` and, for a directory,
/// everything under it. Symlinks are left alone.
pub fn tighten_tree(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            tighten_tree(&entry?.path())?;
        }
    }
    Ok(())
}

/// Makes every file and directory this process creates private to its user
/// (umask 077): SQLite, tantivy, the journal, backups and temp files alike.
/// `memd` calls it first thing; libraries embedding the hub may too.
pub fn private_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Creates (or truncates) a file private to its owner (see [`crate::base::durable::create_private`]).
pub use crate::base::durable::create_private;
