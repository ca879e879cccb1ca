//! Paths under one root and the private file modes of what memd writes there.
//!
//! The lowest layer every module may use: it knows where things live
//! (`memories/`, `data/`, `config.json`, ...), not what they contain, and
//! where the root is when nobody says ([`default_root`]: the platform's data
//! directory, never the current directory, so a source checkout or any
//! other git working tree never becomes a root by accident).

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

    /// The address file of the running `memd serve` (its address, pid and
    /// local credential), which the CLI reads to go through the daemon.
    pub fn daemon_address(&self) -> PathBuf {
        self.root.join(".memd.addr")
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
            self.daemon_address(),
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

/// The directory under the platform's data directory that holds the
/// default root.
const ROOT_DIR_NAME: &str = "memd";

/// The root used when neither `--root` nor `MEMD_ROOT` names one: memd's
/// directory in the platform's data directory, `$XDG_DATA_HOME/memd` (when
/// absolute), else `~/.local/share/memd` (on macOS `~/Library/Application
/// Support/memd`). It is never the current directory, so running memd
/// inside a source checkout does not put memories into its working tree.
pub fn default_root() -> Result<PathBuf> {
    default_root_from(
        std::env::var_os("XDG_DATA_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

/// [`default_root`] from the values of `XDG_DATA_HOME` and `HOME`.
fn default_root_from(xdg_data_home: Option<PathBuf>, home: Option<PathBuf>) -> Result<PathBuf> {
    // The XDG base directory rules ignore a relative value.
    if !cfg!(target_os = "macos")
        && let Some(dir) = xdg_data_home.filter(|d| d.is_absolute())
    {
        return Ok(dir.join(ROOT_DIR_NAME));
    }
    let home = home.filter(|h| h.is_absolute()).ok_or_else(|| {
        crate::error::Error::invalid(
            "no root: HOME is not set, so there is no data directory to keep memories in; \
             pass --root DIR or set MEMD_ROOT",
        )
    })?;
    let data = if cfg!(target_os = "macos") {
        home.join("Library/Application Support")
    } else {
        home.join(".local/share")
    };
    Ok(data.join(ROOT_DIR_NAME))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(not(target_os = "macos"))]
    fn the_default_root_is_the_data_directory() {
        let check = |xdg: Option<&str>, home: Option<&str>, want: Option<&str>| {
            let got = default_root_from(xdg.map(PathBuf::from), home.map(PathBuf::from));
            match want {
                Some(w) => assert_eq!(got.unwrap(), PathBuf::from(w), "{xdg:?} {home:?}"),
                None => assert_eq!(got.unwrap_err().code().as_str(), "INVALID_INPUT"),
            }
        };
        check(None, Some("/home/a"), Some("/home/a/.local/share/memd"));
        check(Some("/data"), Some("/home/a"), Some("/data/memd"));
        // A relative XDG_DATA_HOME is ignored, as the base directory rules say.
        check(
            Some("rel"),
            Some("/home/a"),
            Some("/home/a/.local/share/memd"),
        );
        check(Some(""), Some("/home/a"), Some("/home/a/.local/share/memd"));
        check(Some("/data"), None, Some("/data/memd"));
        check(None, None, None);
        check(None, Some("relative"), None);
    }
}
