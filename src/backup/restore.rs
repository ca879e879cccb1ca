//! Restoring: check the whole archive, take the writer lock, extract it
//! into a staging directory, plan the merge (refusing any conflict), show
//! the plan, then move the staged files into place.

use std::path::{Path, PathBuf};

use chrono::Utc;

use super::manifest::{Manifest, is_journal_path};
use super::plan::{RestorePlan, config_diff, token_diff};
use super::signing::{self, Origin};
use super::verify::{Limits, read_archive};
use crate::base::durable;
use crate::config::Layout;
use crate::error::{Error, IoContext, Result};
use crate::ids::sha256_hex;
use crate::store::files;
use crate::store::lock::WriterLock;

/// Prefix of the staging directories a restore makes under the root.
const STAGE_PREFIX: &str = ".restore-";

/// How a restore is asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct RestoreOptions {
    /// Replace `tokens.json` with the archive's (otherwise this root's stays).
    pub(crate) with_tokens: bool,
    /// Replace `config.json` with the archive's (otherwise this root's stays).
    pub(crate) with_config: bool,
    /// Accept an archive not signed by this root's key.
    pub(crate) foreign: bool,
    /// Size caps.
    pub(crate) limits: Limits,
}

/// A staging directory under the root, removed when dropped (on every path out).
struct Stage(PathBuf);

impl Drop for Stage {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(stage.path = %self.0.display(), error = %e, "cannot remove restore staging");
        }
    }
}

/// Removes `.restore-*` directories a crashed restore left behind (the caller holds the lock).
fn remove_stale_stages(root: &Path) -> Result<()> {
    for entry in std::fs::read_dir(root).ctx("cannot list", root)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(STAGE_PREFIX) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            tracing::info!(stage.path = %entry.path().display(), "removing a stale restore staging directory");
            std::fs::remove_dir_all(entry.path()).ctx("cannot remove", &entry.path())?;
        }
    }
    Ok(())
}

/// Merges an archive into the root. Needs the writer lock (refused with
/// `ROOT_LOCKED` while a server runs); the index must be rebuilt afterwards.
/// `announce` sees the plan after every check passed and before anything moves.
pub(crate) fn restore(
    layout: &Layout,
    archive: &Path,
    opts: &RestoreOptions,
    announce: &mut dyn FnMut(&RestorePlan),
) -> Result<(Manifest, RestorePlan)> {
    // A first pass checks everything before a single byte is written.
    let key = signing::load_key(layout)?;
    let checked = read_archive(archive, &opts.limits, key.as_deref(), None)?;
    if checked.origin != Origin::ThisRoot && !opts.foreign {
        return Err(Error::invalid(format!(
            "{} is {}: it may come from another machine or be crafted. Check where it came from, \
             then pass --foreign to restore it",
            archive.display(),
            checked.origin.describe()
        )));
    }
    std::fs::create_dir_all(&layout.root).ctx("cannot create root", &layout.root)?;
    let _lock = WriterLock::acquire(&layout.root, &layout.lock())?;
    remove_stale_stages(&layout.root)?;
    let stage = Stage(layout.root.join(format!(
        "{STAGE_PREFIX}{}-{:04x}",
        Utc::now().format("%Y%m%d%H%M%S%3f"),
        rand::random::<u16>()
    )));
    std::fs::create_dir_all(&stage.0).ctx("cannot create", &stage.0)?;
    // The second pass extracts; it must read the very archive the first one checked.
    let extracted = read_archive(archive, &opts.limits, key.as_deref(), Some(&stage.0))?;
    if extracted.manifest_sha256 != checked.manifest_sha256 || extracted.origin != checked.origin {
        return Err(Error::invalid(format!(
            "{} changed while it was being restored; nothing was changed",
            archive.display()
        )));
    }
    let manifest = extracted.manifest;
    let mut plan = RestorePlan::new(checked.origin);
    plan_memories(layout, &manifest, &stage.0, &mut plan)?;
    plan_root_files(layout, &manifest, &stage.0, opts, &mut plan)?;
    announce(&plan);
    move_into_place(layout, &plan, &stage.0)?;
    Ok((manifest, plan))
}

/// Sorts the archive's `memories/` files into added, extended and
/// unchanged; any other difference refuses the whole restore.
fn plan_memories(
    layout: &Layout,
    manifest: &Manifest,
    stage: &Path,
    plan: &mut RestorePlan,
) -> Result<()> {
    let mut conflicts = Vec::new();
    for f in manifest
        .files
        .iter()
        .filter(|f| f.path.starts_with("memories/"))
    {
        let local = layout.root.join(&f.path);
        // A link on this root is never read or written through.
        if let Some(link) = crate::store::links::first_link(&layout.root, &f.path) {
            conflicts.push(format!("{link} (a symbolic link here, never followed)"));
            continue;
        }
        let read = crate::store::links::open_read(&local).and_then(|mut file| {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).map(|_| bytes)
        });
        let ours = match read {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                plan.added.push(f.path.clone());
                continue;
            }
            Err(e) => return Err(e).ctx("cannot read", &local),
        };
        if sha256_hex(&ours) == f.sha256 {
            plan.unchanged += 1;
            continue;
        }
        if is_journal_path(&f.path) {
            let staged = stage.join(&f.path);
            let theirs = std::fs::read(&staged).ctx("cannot read", &staged)?;
            if theirs.starts_with(&ours) {
                plan.extended.push(f.path.clone());
                continue;
            }
            if ours.starts_with(&theirs) {
                // This root holds everything the archive has and more.
                plan.unchanged += 1;
                continue;
            }
        }
        conflicts.push(f.path.clone());
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = conflicts.iter().take(5).map(String::as_str).collect();
    Err(Error::invalid(format!(
        "restore refused, nothing was changed: {} file(s) on this root differ from the archive's \
         ({}{}). A restore only adds what is missing and never overwrites; move these files \
         aside first to take the archive's copies",
        conflicts.len(),
        shown.join(", "),
        if conflicts.len() > shown.len() {
            ", …"
        } else {
            ""
        }
    )))
}

/// `tokens.json` and `config.json`: the changes they bring when asked for,
/// else a note that this root's stay.
fn plan_root_files(
    layout: &Layout,
    manifest: &Manifest,
    stage: &Path,
    opts: &RestoreOptions,
    plan: &mut RestorePlan,
) -> Result<()> {
    let has = |name: &str| manifest.files.iter().any(|f| f.path == name);
    if has("tokens.json") {
        if opts.with_tokens {
            plan.tokens = Some(token_diff(&layout.tokens(), &stage.join("tokens.json"))?);
        } else {
            plan.not_restored.push(
                "tokens.json: this root's tokens stay (pass --with-tokens to take the archive's)"
                    .into(),
            );
        }
    }
    if has("config.json") {
        if opts.with_config {
            plan.config = Some(config_diff(&layout.config(), &stage.join("config.json"))?);
        } else {
            plan.not_restored.push(
                "config.json: this root's config stays (pass --with-config to take the archive's)"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Moves the planned files from the stage into place, durably: those under
/// `memories/` through the store, then the root's own files.
fn move_into_place(layout: &Layout, plan: &RestorePlan, stage: &Path) -> Result<()> {
    let (memories, root): (Vec<&str>, Vec<&str>) = plan
        .moves()
        .into_iter()
        .partition(|rel| rel.starts_with("memories/"));
    let staged: Vec<(&str, PathBuf)> = memories
        .iter()
        .map(|rel| (&rel["memories/".len()..], stage.join(rel)))
        .collect();
    files::adopt_all(&layout.memories(), &staged)?;
    replace_root_files(&layout.root, &root, stage)
}

/// `tokens.json` and `config.json` from the stage, when the plan takes them.
fn replace_root_files(root: &Path, names: &[&str], stage: &Path) -> Result<()> {
    let moves: Vec<(PathBuf, PathBuf)> = names
        .iter()
        .map(|name| (stage.join(name), root.join(name)))
        .collect();
    durable::rename_all(&moves)
}
