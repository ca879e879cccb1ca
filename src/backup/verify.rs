//! Reading an archive end to end (verify, and the extraction pass of a
//! restore), listing the archives of a directory and pruning old ones.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use super::manifest::{
    BACKUP_FORMAT, MAC, MANIFEST, Manifest, ManifestFile, ManifestMac, OLDEST_FORMAT, damaged,
    safe_path,
};
use super::signing::{self, Origin};
use crate::base::bytes::hex;
use crate::config::Layout;
use crate::error::{Error, IoContext, Result};
use crate::ids::sha256_hex;

/// Size caps checked while an archive is read (decompressed bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// All files together.
    pub total_bytes: u64,
    /// One file.
    pub entry_bytes: u64,
    /// `manifest.json` itself.
    pub manifest_bytes: u64,
}

impl Default for Limits {
    /// Generous for Markdown and JSONL: 4 GiB in all, 1 GiB per file, a 16 MiB manifest.
    fn default() -> Self {
        Limits {
            total_bytes: 4 << 30,
            entry_bytes: 1 << 30,
            manifest_bytes: 16 << 20,
        }
    }
}

/// What a full read of an archive established.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The manifest.
    pub(crate) manifest: Manifest,
    /// Who made it.
    pub(crate) origin: Origin,
    /// sha256 of the manifest's bytes (two reads of one archive must agree).
    pub(super) manifest_sha256: String,
}

/// Counts decompressed bytes and fails the read once they pass `cap`.
struct Capped<R> {
    inner: R,
    read: u64,
    cap: u64,
    exceeded: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.cap {
            self.exceeded.set(true);
            return Err(std::io::Error::other("decompressed size limit exceeded"));
        }
        Ok(n)
    }
}

fn too_big(limits: &Limits, what: &str) -> Error {
    Error::invalid(format!(
        "backup archive refused: {what} exceed the restore limit of {} bytes",
        limits.total_bytes
    ))
}

/// The 10-byte gzip header our writer produces.
fn gzip_header() -> Vec<u8> {
    let mut bytes = GzEncoder::new(Vec::new(), Compression::default())
        .finish()
        .expect("in-memory gzip cannot fail");
    bytes.truncate(10);
    bytes
}

/// Streams an archive end to end: every entry is a regular file at a safe
/// path, listed once in the manifest (the first entry), with the listed size
/// and checksum, within `limits`; the signature decides the [`Origin`]. With
/// `stage`, each file is also written (and `fsync`ed) below it.
pub(super) fn read_archive(
    archive: &Path,
    limits: &Limits,
    key: Option<&[u8]>,
    stage: Option<&Path>,
) -> Result<Checked> {
    let mut file = File::open(archive).ctx("cannot open backup", archive)?;
    let compressed = file.metadata().ctx("cannot stat backup", archive)?.len();
    if compressed > limits.total_bytes.saturating_add(limits.manifest_bytes) {
        return Err(too_big(limits, "the archive file alone"));
    }
    // gzip does not checksum its own header; ours is fixed, so compare it exactly.
    let mut header = [0u8; 10];
    file.read_exact(&mut header).map_err(damaged)?;
    if header[..] != gzip_header()[..] {
        return Err(damaged("unexpected gzip header"));
    }
    drop(file);
    let exceeded = std::rc::Rc::new(std::cell::Cell::new(false));
    let reader = Capped {
        inner: GzDecoder::new(File::open(archive).ctx("cannot open backup", archive)?),
        read: 0,
        // File contents, the manifest, and room for tar headers and padding (about 1 KiB per file).
        cap: limits
            .total_bytes
            .saturating_add(limits.manifest_bytes)
            .saturating_add(16 << 20),
        exceeded: exceeded.clone(),
    };
    let result = read_entries(reader, limits, key, stage);
    if exceeded.get() {
        return Err(too_big(limits, "the archive's decompressed contents"));
    }
    result
}

/// What the entries read so far established.
#[derive(Default)]
struct Reading {
    /// The manifest and its exact bytes.
    manifest: Option<(Manifest, Vec<u8>)>,
    /// The files it lists, by path.
    expected: BTreeMap<String, ManifestFile>,
    /// The signature entry.
    mac: Option<ManifestMac>,
    /// Files read.
    seen: BTreeSet<String>,
}

fn read_entries<R: Read>(
    reader: R,
    limits: &Limits,
    key: Option<&[u8]>,
    stage: Option<&Path>,
) -> Result<Checked> {
    let mut tar = tar::Archive::new(reader);
    let mut reading = Reading::default();
    for (index, entry) in tar.entries().map_err(damaged)?.enumerate() {
        let mut entry = entry.map_err(damaged)?;
        let path = std::str::from_utf8(&entry.path_bytes())
            .map_err(|_| damaged("a path that is not UTF-8"))?
            .to_string();
        let kind = entry.header().entry_type();
        if !kind.is_file() {
            return Err(damaged(format!(
                "{path:?} is a {kind:?} entry; backups hold regular files only (no links, devices or directories)"
            )));
        }
        if index == 0 {
            if path != MANIFEST {
                return Err(damaged("the first entry is not manifest.json"));
            }
            if entry.size() > limits.manifest_bytes {
                return Err(too_big(limits, "manifest.json"));
            }
            let (manifest, bytes, expected) = read_manifest_entry(&mut entry, limits)?;
            reading.manifest = Some((manifest, bytes));
            reading.expected = expected;
        } else if path == MAC {
            if reading.mac.is_some() || entry.size() > 4096 {
                return Err(damaged("a second or oversized manifest.mac"));
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(damaged)?;
            reading.mac = Some(serde_json::from_slice(&bytes).map_err(damaged)?);
        } else {
            let Some(listed) = reading.expected.get(&path) else {
                return Err(damaged(format!(
                    "unexpected path {path:?} (not in the manifest)"
                )));
            };
            if !reading.seen.insert(path.clone()) {
                return Err(damaged(format!("{path} appears twice")));
            }
            read_file_entry(&mut entry, listed, stage)?;
        }
    }
    // Read to the end so the gzip trailer (CRC32 and length) is checked too.
    std::io::copy(&mut tar.into_inner(), &mut std::io::sink()).map_err(damaged)?;
    finish(reading, key)
}

/// The manifest entry: parsed, its format supported, every listed path safe
/// and within the limits; returns it with its bytes and the files it lists.
fn read_manifest_entry(
    entry: &mut impl Read,
    limits: &Limits,
) -> Result<(Manifest, Vec<u8>, BTreeMap<String, ManifestFile>)> {
    let mut bytes = Vec::new();
    entry.read_to_end(&mut bytes).map_err(damaged)?;
    let m: Manifest = serde_json::from_slice(&bytes).map_err(damaged)?;
    if !(OLDEST_FORMAT..=BACKUP_FORMAT).contains(&m.format) {
        return Err(Error::invalid(format!(
            "backup format {} is not supported by this build (reads {OLDEST_FORMAT} to {BACKUP_FORMAT})",
            m.format
        )));
    }
    let mut expected = BTreeMap::new();
    let mut total: u64 = 0;
    for f in &m.files {
        if !safe_path(&f.path) {
            return Err(damaged(format!("unexpected path {:?}", f.path)));
        }
        if f.size > limits.entry_bytes {
            return Err(Error::invalid(format!(
                "backup archive refused: {} is {} bytes, over the per-file limit of {}",
                f.path, f.size, limits.entry_bytes
            )));
        }
        total = total.saturating_add(f.size);
        if expected.insert(f.path.clone(), f.clone()).is_some() {
            return Err(damaged(format!("{} is listed twice", f.path)));
        }
    }
    if total > limits.total_bytes {
        return Err(too_big(limits, "the files it lists"));
    }
    Ok((m, bytes, expected))
}

/// One listed file: its size and checksum must match; with `stage`, it is
/// also written below it with its modification time, and `fsync`ed.
fn read_file_entry<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    listed: &ManifestFile,
    stage: Option<&Path>,
) -> Result<()> {
    let path = &listed.path;
    if entry.size() != listed.size {
        return Err(damaged(format!("{path} does not match its checksum")));
    }
    let mtime = entry.header().mtime().map_err(damaged)?;
    let mut out = match stage {
        Some(dir) => Some(create_file(&dir.join(path))?),
        None => None,
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got: u64 = 0;
    loop {
        let n = entry.read(&mut buf).map_err(damaged)?;
        if n == 0 {
            break;
        }
        got += n as u64;
        if got > listed.size {
            return Err(damaged(format!("{path} is longer than listed")));
        }
        hasher.update(&buf[..n]);
        if let Some((f, p)) = out.as_mut() {
            f.write_all(&buf[..n]).ctx("cannot write", p)?;
        }
    }
    if got != listed.size || hex(&hasher.finalize()) != listed.sha256 {
        return Err(damaged(format!("{path} does not match its checksum")));
    }
    if let Some((f, p)) = out {
        // Restored files keep the time they had when the backup was made.
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime))
            .ctx("cannot set the modification time of", &p)?;
        f.sync_all().ctx("cannot fsync", &p)?;
    }
    Ok(())
}

/// After the last entry: the manifest was there, every file it lists was
/// read, and the signature decides the origin.
fn finish(reading: Reading, key: Option<&[u8]>) -> Result<Checked> {
    let (manifest, manifest_bytes) = reading
        .manifest
        .ok_or_else(|| damaged("no manifest.json"))?;
    if let Some(missing) = reading.expected.keys().find(|p| !reading.seen.contains(*p)) {
        return Err(damaged(format!("{missing} is missing")));
    }
    let origin = signing::origin(reading.mac.as_ref(), key, &manifest_bytes)?;
    Ok(Checked {
        manifest,
        origin,
        manifest_sha256: sha256_hex(&manifest_bytes),
    })
}

/// Creates a private file (and its directories) for writing; returns it with its path.
fn create_file(path: &Path) -> Result<(File, PathBuf)> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).ctx("cannot create", parent)?;
    }
    let f = crate::base::durable::create_private(path).ctx("cannot write", path)?;
    Ok((f, path.to_path_buf()))
}

/// Checks an archive end to end with the default [`Limits`]; returns its manifest and origin.
pub fn verify(layout: &Layout, archive: &Path) -> Result<Checked> {
    verify_with(layout, archive, &Limits::default())
}

/// [`verify`] with explicit limits.
pub fn verify_with(layout: &Layout, archive: &Path, limits: &Limits) -> Result<Checked> {
    read_archive(archive, limits, signing::load_key(layout)?.as_deref(), None)
}

/// Archives in `dir` (newest first) with their manifests; unreadable ones are skipped with a warning.
pub(crate) fn list(dir: &Path) -> Result<Vec<(PathBuf, Manifest)>> {
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
    let first = entries
        .next()
        .ok_or_else(|| damaged("empty archive"))?
        .map_err(damaged)?;
    let mut bytes = Vec::new();
    first
        .take(Limits::default().manifest_bytes)
        .read_to_end(&mut bytes)
        .map_err(damaged)?;
    serde_json::from_slice(&bytes).map_err(damaged)
}

/// Deletes archives in `dir` older than `keep_days`; returns what was removed.
pub(crate) fn prune(dir: &Path, keep_days: u32, now: DateTime<Utc>) -> Result<Vec<PathBuf>> {
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

#[cfg(test)]
mod tests {
    use super::super::{create, signing};
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
        let checked = verify(&layout, &path).unwrap();
        assert_eq!(checked.manifest, manifest);
        assert_eq!(checked.origin, Origin::ThisRoot);
        assert!(
            !manifest
                .files
                .iter()
                .any(|f| f.path.contains(signing::KEY_FILE)),
            "the key is never archived"
        );
        // Another root has another key: the same archive is foreign there.
        let (_other_dir, other) = root_with_files();
        create(&other, tempfile::tempdir().unwrap().path()).unwrap();
        assert_eq!(verify(&other, &path).unwrap().origin, Origin::Foreign);
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
        let inflate = |bytes: &[u8]| {
            let mut out = Vec::new();
            GzDecoder::new(bytes)
                .read_to_end(&mut out)
                .map(|_| out)
                .ok()
        };
        let contents = inflate(&original).unwrap();
        // Flip one byte anywhere: gzip header, deflate data, trailer.
        let positions: Vec<usize> = (0..original.len())
            .step_by(7)
            .chain([original.len() - 1])
            .collect();
        for pos in positions {
            let mut bytes = original.clone();
            bytes[pos] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            match verify(&layout, &path) {
                Err(err) => {
                    assert_eq!(err.code().as_str(), "INVALID_INPUT", "pos {pos}: {err}");
                    assert!(err.to_string().contains("damaged"), "{err}");
                }
                // A few deflate bits change nothing that is decoded (the code length
                // of a symbol the block never uses): accepted only when every byte
                // restored is the byte backed up.
                Ok(_) => assert_eq!(
                    inflate(&bytes).as_ref(),
                    Some(&contents),
                    "pos {pos}: a change to the contents was accepted"
                ),
            }
        }
    }
}
