//! Backups: a `.tar.gz` of `memories/`, `tokens.json` and `config.json` with a
//! manifest (sha256 and size of every file, counts, format versions). Never
//! the index: it is rebuilt after a restore.
//!
//! - `create` may run next to a live writer: the journal is append-only and
//!   each journal file is copied up to its last complete line, so a backup
//!   never contains a torn line. The archive is written to a temp name,
//!   fsync'd and renamed, so a crash never leaves a half archive under the
//!   final name.
//! - `verify` reads the whole archive and checks every checksum against the
//!   manifest; any damage (gzip, tar, checksum, missing or extra file, unsafe
//!   path) is refused with `INVALID_INPUT`.
//! - `restore` needs the writer lock, so it is refused while `memd serve`
//!   runs. It verifies first, extracts next to the root, swaps each top-level
//!   item in by rename, and the caller then rebuilds the index.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use crate::config::Layout;
use crate::error::{Error, IoContext, Result};
use crate::ids::sha256_hex;
use crate::model::JOURNAL_VERSION;
use crate::store::journal;
use crate::store::lock::WriterLock;

/// Version of the archive layout.
pub const BACKUP_FORMAT: u32 = 1;

const MANIFEST: &str = "manifest.json";
/// Top-level items a backup may contain.
const ITEMS: &[&str] = &["memories", "tokens.json", "config.json"];

/// One file in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Path relative to the root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Archive layout version.
    pub format: u32,
    /// Journal line format version of the writer.
    pub journal_version: u32,
    /// The memd version that wrote it.
    pub memd_version: String,
    /// When it was made.
    pub created: DateTime<Utc>,
    /// Every file, sorted by path.
    pub files: Vec<ManifestFile>,
    /// Journal month files.
    pub journal_files: usize,
    /// Journal lines.
    pub journal_lines: u64,
    /// Markdown documents.
    pub documents: usize,
}

fn damaged(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "backup archive is damaged or not a memd backup: {what}"
    ))
}

/// Collects `(relative path, bytes)` for everything a backup holds.
fn collect(layout: &Layout) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).ctx("cannot list", dir),
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let meta = std::fs::symlink_metadata(&path).ctx("cannot stat", &path)?;
            if meta.is_dir() {
                walk(root, &path, out)?;
            } else if meta.is_file() {
                let rel = rel_path(root, &path);
                let mut bytes = std::fs::read(&path).ctx("cannot read", &path)?;
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if rel.starts_with("memories/facts/") && journal::is_journal_name(name) {
                    // A line still being appended is not part of the backup.
                    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                    bytes.truncate(end);
                }
                out.push((rel, bytes));
            }
        }
        Ok(())
    }
    walk(&layout.root, &layout.memories(), &mut out)?;
    for name in ["tokens.json", "config.json"] {
        let path = layout.root.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => out.push((name.to_string(), bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).ctx("cannot read", &path),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn rel_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .expect("walked below root")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn manifest_for(files: &[(String, Vec<u8>)]) -> Manifest {
    let journal_names: Vec<&(String, Vec<u8>)> = files
        .iter()
        .filter(|(p, _)| {
            p.strip_prefix("memories/facts/")
                .is_some_and(journal::is_journal_name)
        })
        .collect();
    Manifest {
        format: BACKUP_FORMAT,
        journal_version: JOURNAL_VERSION,
        memd_version: env!("CARGO_PKG_VERSION").to_string(),
        created: Utc::now(),
        files: files
            .iter()
            .map(|(path, bytes)| ManifestFile {
                path: path.clone(),
                size: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            })
            .collect(),
        journal_files: journal_names.len(),
        journal_lines: journal_names
            .iter()
            .map(|(_, b)| b.iter().filter(|&&c| c == b'\n').count() as u64)
            .sum(),
        documents: files
            .iter()
            .filter(|(p, _)| p.starts_with("memories/") && p.ends_with(".md"))
            .count(),
    }
}

/// Writes a new archive into `out_dir`; returns its path and manifest.
pub fn create(layout: &Layout, out_dir: &Path) -> Result<(PathBuf, Manifest)> {
    let files = collect(layout)?;
    let manifest = manifest_for(&files);
    std::fs::create_dir_all(out_dir).ctx("cannot create backup directory", out_dir)?;
    // Backups hold every memory, secrets included: the directory and each
    // archive are private whatever the umask.
    crate::config::tighten_tree(out_dir).ctx("cannot make private", out_dir)?;
    let name = format!(
        "memd-backup-{}.tar.gz",
        manifest.created.format("%Y%m%d-%H%M%S-%3f")
    );
    let final_path = out_dir.join(&name);
    let tmp_path = out_dir.join(format!(".{name}.tmp"));
    let file = crate::config::create_private(&tmp_path).ctx("cannot create backup", &tmp_path)?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    let mut append = |path: &str, bytes: &[u8]| -> std::io::Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(manifest.created.timestamp().max(0) as u64);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, path, bytes)
    };
    append(MANIFEST, &manifest_bytes).ctx("cannot write backup", &tmp_path)?;
    for (path, bytes) in &files {
        append(path, bytes).ctx("cannot write backup", &tmp_path)?;
    }
    let file = tar
        .into_inner()
        .and_then(|gz| gz.finish())
        .ctx("cannot finish backup", &tmp_path)?;
    file.sync_all().ctx("cannot fsync backup", &tmp_path)?;
    std::fs::rename(&tmp_path, &final_path).ctx("cannot rename backup", &final_path)?;
    sync_dir(out_dir)?;
    Ok((final_path, manifest))
}

/// Reads an archive fully, checks every file against the manifest, and returns the
/// manifest and the files.
fn read_verified(archive: &Path) -> Result<(Manifest, BTreeMap<String, Vec<u8>>)> {
    let mut file = File::open(archive).ctx("cannot open backup", archive)?;
    // gzip does not checksum its own header; ours is fixed, so compare it exactly.
    let mut header = [0u8; 10];
    file.read_exact(&mut header).map_err(damaged)?;
    if header[..] != gzip_header()[..] {
        return Err(damaged("unexpected gzip header"));
    }
    drop(file);
    let file = File::open(archive).ctx("cannot open backup", archive)?;
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    let mut manifest: Option<Manifest> = None;
    let mut files = BTreeMap::new();
    for entry in tar.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        let path = entry
            .path()
            .map_err(damaged)?
            .to_string_lossy()
            .into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(damaged)?;
        if path == MANIFEST {
            manifest = Some(serde_json::from_slice(&bytes).map_err(damaged)?);
            continue;
        }
        let safe = !path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
            && ITEMS
                .iter()
                .any(|item| path == *item || path.starts_with(&format!("{item}/")));
        if !safe {
            return Err(damaged(format!("unexpected path {path:?}")));
        }
        files.insert(path, bytes);
    }
    // Read to the end so the gzip trailer (CRC32 and length) is checked too.
    std::io::copy(&mut tar.into_inner(), &mut std::io::sink()).map_err(damaged)?;
    let manifest = manifest.ok_or_else(|| damaged("no manifest.json"))?;
    if manifest.format != BACKUP_FORMAT {
        return Err(Error::invalid(format!(
            "backup format {} is not supported by this build (expects {BACKUP_FORMAT})",
            manifest.format
        )));
    }
    if manifest.files.len() != files.len() {
        return Err(damaged(format!(
            "manifest lists {} files, archive holds {}",
            manifest.files.len(),
            files.len()
        )));
    }
    for f in &manifest.files {
        let bytes = files
            .get(&f.path)
            .ok_or_else(|| damaged(format!("{} is missing", f.path)))?;
        if bytes.len() as u64 != f.size || sha256_hex(bytes) != f.sha256 {
            return Err(damaged(format!("{} does not match its checksum", f.path)));
        }
    }
    Ok((manifest, files))
}

/// Checks an archive end to end; returns its manifest.
pub fn verify(archive: &Path) -> Result<Manifest> {
    read_verified(archive).map(|(m, _)| m)
}

/// Archives in `dir` (newest first) with their manifests; unreadable ones are skipped with a warning.
pub fn list(dir: &Path) -> Result<Vec<(PathBuf, Manifest)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).ctx("cannot list", dir),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("memd-backup-") && name.ends_with(".tar.gz")) {
            continue;
        }
        match read_manifest(&path) {
            Ok(m) => out.push((path, m)),
            Err(e) => {
                tracing::warn!(backup.path = %path.display(), error = %e, "unreadable backup")
            }
        }
    }
    out.sort_by_key(|(_, m)| std::cmp::Reverse(m.created));
    Ok(out)
}

/// Reads only the manifest (the first entry).
fn read_manifest(archive: &Path) -> Result<Manifest> {
    let file = File::open(archive).ctx("cannot open backup", archive)?;
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    let mut entries = tar.entries().map_err(damaged)?;
    let mut first = entries
        .next()
        .ok_or_else(|| damaged("empty archive"))?
        .map_err(damaged)?;
    let mut bytes = Vec::new();
    first.read_to_end(&mut bytes).map_err(damaged)?;
    serde_json::from_slice(&bytes).map_err(damaged)
}

/// Deletes archives in `dir` older than `keep_days`; returns what was removed.
pub fn prune(dir: &Path, keep_days: u32, now: DateTime<Utc>) -> Result<Vec<PathBuf>> {
    let cutoff = now - chrono::Duration::days(i64::from(keep_days));
    let mut removed = Vec::new();
    for (path, manifest) in list(dir)? {
        if manifest.created < cutoff {
            std::fs::remove_file(&path).ctx("cannot remove old backup", &path)?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Replaces the root's files with the archive's. Needs the writer lock
/// (refused with `ROOT_LOCKED` while a server runs); the index must be rebuilt afterwards.
pub fn restore(layout: &Layout, archive: &Path) -> Result<Manifest> {
    let (manifest, files) = read_verified(archive)?;
    std::fs::create_dir_all(&layout.root).ctx("cannot create root", &layout.root)?;
    let _lock = WriterLock::acquire(&layout.root, &layout.lock())?;
    let stage = layout
        .root
        .join(format!(".restore-{}", Utc::now().format("%Y%m%d%H%M%S%3f")));
    std::fs::create_dir_all(stage.join("new")).ctx("cannot create", &stage)?;
    for (rel, bytes) in &files {
        let path = stage.join("new").join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).ctx("cannot create", parent)?;
        }
        let mut f = crate::config::create_private(&path).ctx("cannot write", &path)?;
        f.write_all(bytes).ctx("cannot write", &path)?;
        f.sync_all().ctx("cannot fsync", &path)?;
    }
    std::fs::create_dir_all(stage.join("new/memories")).ctx("cannot create", &stage)?;
    std::fs::create_dir_all(stage.join("old")).ctx("cannot create", &stage)?;
    for item in ITEMS {
        let new = stage.join("new").join(item);
        if !new.exists() {
            continue;
        }
        let current = layout.root.join(item);
        if current.exists() {
            std::fs::rename(&current, stage.join("old").join(item))
                .ctx("cannot move aside", &current)?;
        }
        std::fs::rename(&new, &current).ctx("cannot move into place", &current)?;
    }
    sync_dir(&layout.root)?;
    std::fs::remove_dir_all(&stage).ctx("cannot remove", &stage)?;
    Ok(manifest)
}

/// The 10-byte gzip header our writer produces.
fn gzip_header() -> Vec<u8> {
    let mut bytes = GzEncoder::new(Vec::new(), Compression::default())
        .finish()
        .expect("in-memory gzip cannot fail");
    bytes.truncate(10);
    bytes
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("cannot fsync directory", dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with_files() -> (tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.facts()).unwrap();
        std::fs::write(layout.facts().join("2026-11.jsonl"), "{\"a\":1}\n{\"torn").unwrap();
        std::fs::write(layout.memories().join("note.md"), "# Hi\n").unwrap();
        std::fs::write(layout.root.join("config.json"), "{}").unwrap();
        (dir, layout)
    }

    #[test]
    fn create_verify_list_and_torn_tail_excluded() {
        let (_dir, layout) = root_with_files();
        let out = tempfile::tempdir().unwrap();
        let (path, manifest) = create(&layout, out.path()).unwrap();
        assert_eq!(manifest.journal_files, 1);
        assert_eq!(manifest.journal_lines, 1);
        assert_eq!(manifest.documents, 1);
        let journal = manifest
            .files
            .iter()
            .find(|f| f.path == "memories/facts/2026-11.jsonl")
            .unwrap();
        assert_eq!(journal.size, 8, "the torn tail is not backed up");
        assert_eq!(verify(&path).unwrap(), manifest);
        let listed = list(out.path()).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(prune(out.path(), 7, Utc::now()).unwrap().len(), 0);
        assert_eq!(
            prune(out.path(), 7, Utc::now() + chrono::Duration::days(8))
                .unwrap()
                .len(),
            1
        );
        assert!(list(out.path()).unwrap().is_empty());
    }

    #[test]
    fn any_single_byte_change_is_refused() {
        let (_dir, layout) = root_with_files();
        let out = tempfile::tempdir().unwrap();
        let (path, _) = create(&layout, out.path()).unwrap();
        let original = std::fs::read(&path).unwrap();
        // Flip one byte anywhere: gzip header, deflate data, trailer.
        let positions: Vec<usize> = (0..original.len())
            .step_by(7)
            .chain([original.len() - 1])
            .collect();
        for pos in positions {
            let mut bytes = original.clone();
            bytes[pos] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            let err = verify(&path).unwrap_err();
            assert_eq!(err.code().as_str(), "INVALID_INPUT", "pos {pos}: {err}");
            assert!(err.to_string().contains("damaged"), "{err}");
        }
    }
}
