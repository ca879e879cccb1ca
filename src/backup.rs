//! Backups: a `.tar.gz` of `memories/`, `tokens.json` and `config.json` with a
//! manifest (sha256 and size of every file, counts, format versions) signed
//! with a key that never leaves this root. Never the index: it is rebuilt
//! after a restore.
//!
//! - `create` may run next to a live writer: the journal is append-only and
//!   each journal file is copied up to its last complete line, so a backup
//!   never contains a torn line. The archive is written to a temp name,
//!   fsync'd and renamed, so a crash never leaves a half archive under the
//!   final name. Its manifest is signed (HMAC-SHA256) with `ROOT/backup.key`,
//!   made on first use and never archived, so a restore can tell an archive
//!   made on this root from one made elsewhere (or crafted).
//! - `verify` streams the whole archive and checks every entry against the
//!   manifest and every size against a cap while it decompresses (a
//!   decompression bomb stops at the cap); any damage (gzip, tar, checksum,
//!   missing, extra or duplicate file, unsafe path, link or other non-file
//!   entry, a signature that does not match) is refused with `INVALID_INPUT`.
//! - `restore` needs the writer lock, so it is refused while `memd serve`
//!   runs. It verifies first and writes nothing unless the archive is sound
//!   and, if it was not made on this root, `foreign` is set. It then merges:
//!   files the root lacks are added, a journal file the archive extends is
//!   replaced by the longer copy, and nothing on the root is ever deleted or
//!   overwritten with different content (such a conflict refuses the whole
//!   restore). `tokens.json` and `config.json` stay as they are unless asked
//!   for (`with_tokens`, `with_config`), and then the plan shows what changes
//!   before anything moves. Staging happens in `ROOT/.restore-*`, removed on
//!   every path out, and stale ones from a crash are removed by the next
//!   restore.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{Config, Layout};
use crate::error::{Error, IoContext, Result};
use crate::ids::sha256_hex;
use crate::model::JOURNAL_VERSION;
use crate::store::journal;
use crate::store::lock::WriterLock;

/// Version of the archive layout: 2 adds the signed `manifest.mac` entry.
pub(crate) const BACKUP_FORMAT: u32 = 2;
/// The oldest layout this build still reads (unsigned, so always foreign).
const OLDEST_FORMAT: u32 = 1;

const MANIFEST: &str = "manifest.json";
const MAC: &str = "manifest.mac";
/// The per-root signing key, next to `memories/` and never archived.
pub(crate) const KEY_FILE: &str = "backup.key";
/// Top-level items a backup may contain.
const ITEMS: &[&str] = &["memories", "tokens.json", "config.json"];
/// Prefix of the staging directories a restore makes under the root.
const STAGE_PREFIX: &str = ".restore-";

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

/// Where an archive comes from, as far as its signature tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Origin {
    /// Signed with this root's `backup.key`.
    ThisRoot,
    /// Signed with another key (another root, or a lost key).
    Foreign,
    /// Not signed at all (format 1, or not made by `memd backup create`).
    Unsigned,
}

impl Origin {
    /// How the CLI says it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Origin::ThisRoot => "made on this root",
            Origin::Foreign => "NOT made on this root (signed with another key)",
            Origin::Unsigned => "NOT made on this root (unsigned)",
        }
    }
}

/// One file in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ManifestFile {
    /// Path relative to the root, `/`-separated.
    pub(crate) path: String,
    /// Size in bytes.
    pub(crate) size: u64,
    /// Lowercase hex sha256.
    pub(crate) sha256: String,
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// Archive layout version.
    pub(crate) format: u32,
    /// Journal line format version of the writer.
    pub(crate) journal_version: u32,
    /// The memd version that wrote it.
    pub(crate) memd_version: String,
    /// When it was made.
    pub(crate) created: DateTime<Utc>,
    /// Every file, sorted by path.
    pub(crate) files: Vec<ManifestFile>,
    /// Journal month files.
    pub(crate) journal_files: usize,
    /// Journal lines.
    pub(crate) journal_lines: u64,
    /// Markdown documents.
    pub(crate) documents: usize,
}

/// The `manifest.mac` entry: which key signed the manifest, and the signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestMac {
    alg: String,
    key_id: String,
    mac: String,
}

const MAC_ALG: &str = "hmac-sha256";

fn damaged(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "backup archive is damaged or not a memd backup: {what}"
    ))
}

/// The path of this root's signing key.
pub(crate) fn key_path(layout: &Layout) -> PathBuf {
    layout.root.join(KEY_FILE)
}

/// This root's signing key, if it has one.
fn load_key(layout: &Layout) -> Result<Option<Vec<u8>>> {
    let path = key_path(layout);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("cannot read backup key", &path),
    };
    let text = text.trim();
    let key: Option<Vec<u8>> = (text.len() == 64)
        .then(|| {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
                .collect()
        })
        .flatten();
    key.map(Some).ok_or_else(|| {
        Error::invalid(format!(
            "{} is not 64 hex digits; restore it from where you keep it, or delete it \
             (archives signed with it will then count as foreign)",
            path.display()
        ))
    })
}

/// This root's signing key, made (32 random bytes, owner-only) on first use.
fn key_or_create(layout: &Layout) -> Result<Vec<u8>> {
    if let Some(key) = load_key(layout)? {
        return Ok(key);
    }
    let key: [u8; 32] = rand::random();
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let path = key_path(layout);
    std::fs::create_dir_all(&layout.root).ctx("cannot create root", &layout.root)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&path) {
        Ok(mut f) => {
            f.write_all(format!("{hex}\n").as_bytes())
                .and_then(|()| f.sync_all())
                .ctx("cannot write backup key", &path)?;
            sync_dir(&layout.root)?;
            Ok(key.to_vec())
        }
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            load_key(layout)?.ok_or_else(|| Error::Internal(format!("{} vanished", path.display())))
        }
        Err(e) => Err(e).ctx("cannot create backup key", &path),
    }
}

/// A short public name of a key (it reveals nothing about the key).
fn key_id(key: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"memd backup key id\0");
    h.update(key);
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// HMAC-SHA256 (RFC 2104) over `msg`.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal without revealing where two strings first differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
                if is_journal_path(&rel) && journal::is_journal_name(name) {
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

/// A journal file, at any depth under `memories/facts/` (per-device directories included).
fn is_journal_path(rel: &str) -> bool {
    rel.strip_prefix("memories/facts/")
        .is_some_and(journal::is_journal_path)
}

fn rel_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .expect("walked below root")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `path` is a plain relative path inside one of [`ITEMS`].
fn safe_path(path: &str) -> bool {
    !path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
        && ITEMS
            .iter()
            .any(|item| path == *item || path.starts_with(&format!("{item}/")))
}

fn manifest_for(files: &[(String, Vec<u8>)]) -> Manifest {
    let journal_names: Vec<&(String, Vec<u8>)> =
        files.iter().filter(|(p, _)| is_journal_path(p)).collect();
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
pub(crate) fn create(layout: &Layout, out_dir: &Path) -> Result<(PathBuf, Manifest)> {
    let key = key_or_create(layout)?;
    let files = collect(layout)?;
    let manifest = manifest_for(&files);
    std::fs::create_dir_all(out_dir).ctx("cannot create backup directory", out_dir)?;
    // Backups hold every memory, secrets included: the directory and each
    // archive are private whatever the umask.
    crate::layout::tighten_tree(out_dir).ctx("cannot make private", out_dir)?;
    let name = format!(
        "memd-backup-{}.tar.gz",
        manifest.created.format("%Y%m%d-%H%M%S-%3f")
    );
    let final_path = out_dir.join(&name);
    let tmp_path = out_dir.join(format!(".{name}.tmp"));
    let file = crate::layout::create_private(&tmp_path).ctx("cannot create backup", &tmp_path)?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    let mac = ManifestMac {
        alg: MAC_ALG.into(),
        key_id: key_id(&key),
        mac: hex(&hmac_sha256(&key, &manifest_bytes)),
    };
    let mac_bytes = serde_json::to_vec_pretty(&mac).expect("mac serialises");
    let created = manifest.created.timestamp().max(0) as u64;
    let mut append = |path: &str, bytes: &[u8], mtime: u64| -> std::io::Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(mtime);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, path, bytes)
    };
    append(MANIFEST, &manifest_bytes, created).ctx("cannot write backup", &tmp_path)?;
    append(MAC, &mac_bytes, created).ctx("cannot write backup", &tmp_path)?;
    for (path, bytes) in &files {
        // Each file keeps its own modification time: a document's time is its
        // mtime, and a restore must not make every note "new".
        let mtime = std::fs::metadata(layout.root.join(path))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(created, |d| d.as_secs());
        append(path, bytes, mtime).ctx("cannot write backup", &tmp_path)?;
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

/// What a full read of an archive established.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The manifest.
    pub(crate) manifest: Manifest,
    /// Who made it.
    pub(crate) origin: Origin,
    /// sha256 of the manifest's bytes (two reads of one archive must agree).
    manifest_sha256: String,
}

/// Streams an archive end to end: every entry is a regular file at a safe
/// path, listed once in the manifest (the first entry), with the listed size
/// and checksum, within `limits`; the signature decides the [`Origin`]. With
/// `stage`, each file is also written below it.
fn read_archive(
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

fn too_big(limits: &Limits, what: &str) -> Error {
    Error::invalid(format!(
        "backup archive refused: {what} exceed the restore limit of {} bytes",
        limits.total_bytes
    ))
}

fn read_entries<R: Read>(
    reader: R,
    limits: &Limits,
    key: Option<&[u8]>,
    stage: Option<&Path>,
) -> Result<Checked> {
    let mut tar = tar::Archive::new(reader);
    let mut manifest: Option<(Manifest, Vec<u8>)> = None;
    let mut expected: BTreeMap<String, ManifestFile> = BTreeMap::new();
    let mut mac: Option<ManifestMac> = None;
    let mut seen: BTreeSet<String> = BTreeSet::new();
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
        let size = entry.size();
        if index == 0 {
            if path != MANIFEST {
                return Err(damaged("the first entry is not manifest.json"));
            }
            if size > limits.manifest_bytes {
                return Err(too_big(limits, "manifest.json"));
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(damaged)?;
            let m: Manifest = serde_json::from_slice(&bytes).map_err(damaged)?;
            if !(OLDEST_FORMAT..=BACKUP_FORMAT).contains(&m.format) {
                return Err(Error::invalid(format!(
                    "backup format {} is not supported by this build (reads {OLDEST_FORMAT} to {BACKUP_FORMAT})",
                    m.format
                )));
            }
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
            manifest = Some((m, bytes));
            continue;
        }
        if path == MAC {
            if mac.is_some() || size > 4096 {
                return Err(damaged("a second or oversized manifest.mac"));
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(damaged)?;
            mac = Some(serde_json::from_slice(&bytes).map_err(damaged)?);
            continue;
        }
        let Some(listed) = expected.get(&path) else {
            return Err(damaged(format!(
                "unexpected path {path:?} (not in the manifest)"
            )));
        };
        if !seen.insert(path.clone()) {
            return Err(damaged(format!("{path} appears twice")));
        }
        if size != listed.size {
            return Err(damaged(format!("{path} does not match its checksum")));
        }
        let mtime = entry.header().mtime().map_err(damaged)?;
        let mut out = match stage {
            Some(dir) => Some(create_file(&dir.join(&path))?),
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
    }
    // Read to the end so the gzip trailer (CRC32 and length) is checked too.
    std::io::copy(&mut tar.into_inner(), &mut std::io::sink()).map_err(damaged)?;
    let (manifest, manifest_bytes) = manifest.ok_or_else(|| damaged("no manifest.json"))?;
    if let Some(missing) = expected.keys().find(|p| !seen.contains(*p)) {
        return Err(damaged(format!("{missing} is missing")));
    }
    let origin = match (&mac, key) {
        (None, _) => Origin::Unsigned,
        (Some(m), Some(key)) if m.key_id == key_id(key) => {
            let want = hex(&hmac_sha256(key, &manifest_bytes));
            if m.alg != MAC_ALG || !constant_time_eq(want.as_bytes(), m.mac.as_bytes()) {
                return Err(damaged(
                    "its manifest claims this root's signature but the signature does not match \
                     (the archive was altered after it was made)",
                ));
            }
            Origin::ThisRoot
        }
        (Some(_), _) => Origin::Foreign,
    };
    Ok(Checked {
        manifest,
        origin,
        manifest_sha256: sha256_hex(&manifest_bytes),
    })
}

/// Creates a file (and its directories) for writing; returns it with its path.
fn create_file(path: &Path) -> Result<(File, PathBuf)> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).ctx("cannot create", parent)?;
    }
    let f = crate::layout::create_private(path).ctx("cannot write", path)?;
    Ok((f, path.to_path_buf()))
}

/// Checks an archive end to end with the default [`Limits`]; returns its manifest and origin.
pub fn verify(layout: &Layout, archive: &Path) -> Result<Checked> {
    verify_with(layout, archive, &Limits::default())
}

/// [`verify`] with explicit limits.
pub fn verify_with(layout: &Layout, archive: &Path, limits: &Limits) -> Result<Checked> {
    read_archive(archive, limits, load_key(layout)?.as_deref(), None)
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

/// A token whose entry a restore adds, removes or changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TokenChange {
    /// Token name.
    pub(crate) name: String,
    /// `added`, `removed` or `changed`.
    pub(crate) change: &'static str,
    /// Scopes after the restore (before, for a removed token).
    pub(crate) scopes: Vec<String>,
    /// Scenes after the restore (before, for a removed token).
    pub(crate) scenes: Vec<String>,
    /// For `changed`: which fields differ (`scopes`, `scenes`, `secret`, `revoked_at`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) fields: Vec<String>,
}

/// A config key whose effective value a restore changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ConfigChange {
    /// Dotted key, e.g. `sleep.model.command`.
    pub(crate) key: String,
    /// The value on this root now.
    pub(crate) before: serde_json::Value,
    /// The value from the archive.
    pub(crate) after: serde_json::Value,
}

/// What a restore does, shown before anything moves.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RestorePlan {
    /// Who made the archive.
    pub(crate) origin: Origin,
    /// Files this root lacks, added from the archive.
    pub(crate) added: Vec<String>,
    /// Journal files the archive holds a longer copy of (this root's is a prefix of it).
    pub(crate) extended: Vec<String>,
    /// Archive files identical to this root's, or that this root holds a longer journal of.
    pub(crate) unchanged: usize,
    /// `tokens.json` changes (only with `with_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens: Option<Vec<TokenChange>>,
    /// `config.json` changes (only with `with_config`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) config: Option<Vec<ConfigChange>>,
    /// Items in the archive left as they are on this root, and why.
    pub(crate) not_restored: Vec<String>,
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
    let key = load_key(layout)?;
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
    let mut plan = RestorePlan {
        origin: checked.origin,
        added: Vec::new(),
        extended: Vec::new(),
        unchanged: 0,
        tokens: None,
        config: None,
        not_restored: Vec::new(),
    };
    let mut conflicts = Vec::new();
    for f in manifest
        .files
        .iter()
        .filter(|f| f.path.starts_with("memories/"))
    {
        let local = layout.root.join(&f.path);
        let ours = match std::fs::read(&local) {
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
            let theirs = std::fs::read(stage.0.join(&f.path)).ctx("cannot read", &stage.0)?;
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
    if !conflicts.is_empty() {
        let shown: Vec<&str> = conflicts.iter().take(5).map(String::as_str).collect();
        return Err(Error::invalid(format!(
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
        )));
    }
    let has = |name: &str| manifest.files.iter().any(|f| f.path == name);
    if has("tokens.json") {
        if opts.with_tokens {
            plan.tokens = Some(token_diff(&layout.tokens(), &stage.0.join("tokens.json"))?);
        } else {
            plan.not_restored.push(
                "tokens.json: this root's tokens stay (pass --with-tokens to take the archive's)"
                    .into(),
            );
        }
    }
    if has("config.json") {
        if opts.with_config {
            plan.config = Some(config_diff(&layout.config(), &stage.0.join("config.json"))?);
        } else {
            plan.not_restored.push(
                "config.json: this root's config stays (pass --with-config to take the archive's)"
                    .into(),
            );
        }
    }
    announce(&plan);
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut moves: Vec<&str> = plan
        .added
        .iter()
        .chain(&plan.extended)
        .map(String::as_str)
        .collect();
    if plan.tokens.is_some() {
        moves.push("tokens.json");
    }
    if plan.config.is_some() {
        moves.push("config.json");
    }
    for rel in moves {
        let to = layout.root.join(rel);
        let parent = to.parent().expect("below the root").to_path_buf();
        std::fs::create_dir_all(&parent).ctx("cannot create", &parent)?;
        std::fs::rename(stage.0.join(rel), &to).ctx("cannot move into place", &to)?;
        dirs.insert(parent);
    }
    for dir in dirs {
        sync_dir(&dir)?;
    }
    Ok((manifest, plan))
}

/// The token table's entries by name, from a `tokens.json` (missing: empty).
fn token_entries(path: &Path) -> Result<BTreeMap<String, serde_json::Value>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e).ctx("cannot read", path),
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(format!("{}: not a token table: {e}", path.display())))?;
    let tokens = value["tokens"].as_array().ok_or_else(|| {
        Error::invalid(format!(
            "{}: not a token table (no tokens list)",
            path.display()
        ))
    })?;
    tokens
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .map(|n| (n.to_string(), t.clone()))
                .ok_or_else(|| {
                    Error::invalid(format!("{}: a token without a name", path.display()))
                })
        })
        .collect()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Names, scopes and scenes of the tokens a restore adds, removes or changes.
fn token_diff(current: &Path, incoming: &Path) -> Result<Vec<TokenChange>> {
    let before = token_entries(current)?;
    let after = token_entries(incoming)?;
    let mut out = Vec::new();
    for (name, new) in &after {
        let change = |change, fields| TokenChange {
            name: name.clone(),
            change,
            scopes: strings(&new["scopes"]),
            scenes: strings(&new["scenes"]),
            fields,
        };
        match before.get(name) {
            None => out.push(change("added", Vec::new())),
            Some(old) if old != new => {
                let mut keys: BTreeSet<&String> = BTreeSet::new();
                for v in [old, new] {
                    if let Some(o) = v.as_object() {
                        keys.extend(o.keys());
                    }
                }
                let fields = keys
                    .into_iter()
                    .filter(|k| old[k.as_str()] != new[k.as_str()])
                    .map(|k| {
                        if k == "hash" {
                            "secret".into()
                        } else {
                            k.clone()
                        }
                    })
                    .collect();
                out.push(change("changed", fields));
            }
            Some(_) => {}
        }
    }
    for (name, old) in &before {
        if !after.contains_key(name) {
            out.push(TokenChange {
                name: name.clone(),
                change: "removed",
                scopes: strings(&old["scopes"]),
                scenes: strings(&old["scenes"]),
                fields: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// The effective config keys a restore changes (both files must be valid configs).
fn config_diff(current: &Path, incoming: &Path) -> Result<Vec<ConfigChange>> {
    // A broken config here is what a restore may be meant to fix: compare with the defaults.
    let before = Config::load_file(current).unwrap_or_default();
    let after = Config::load_file(incoming)
        .map_err(|e| Error::invalid(format!("the archive's config.json is not valid here: {e}")))?;
    let mut a = BTreeMap::new();
    let mut b = BTreeMap::new();
    flatten(
        "",
        &serde_json::to_value(&before).expect("config serialises"),
        &mut a,
    );
    flatten(
        "",
        &serde_json::to_value(&after).expect("config serialises"),
        &mut b,
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    Ok(keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| ConfigChange {
            key: k.clone(),
            before: a.get(k).cloned().unwrap_or(serde_json::Value::Null),
            after: b.get(k).cloned().unwrap_or(serde_json::Value::Null),
        })
        .collect())
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, serde_json::Value>) {
    match v.as_object() {
        Some(o) => {
            for (k, v) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        None => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
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
        let checked = verify(&layout, &path).unwrap();
        assert_eq!(checked.manifest, manifest);
        assert_eq!(checked.origin, Origin::ThisRoot);
        assert!(
            !manifest.files.iter().any(|f| f.path.contains(KEY_FILE)),
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
        // Flip one byte anywhere: gzip header, deflate data, trailer.
        let positions: Vec<usize> = (0..original.len())
            .step_by(7)
            .chain([original.len() - 1])
            .collect();
        for pos in positions {
            let mut bytes = original.clone();
            bytes[pos] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            let err = verify(&layout, &path).unwrap_err();
            assert_eq!(err.code().as_str(), "INVALID_INPUT", "pos {pos}: {err}");
            assert!(err.to_string().contains("damaged"), "{err}");
        }
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 2 and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn the_key_is_owner_only_and_stable() {
        let (_dir, layout) = root_with_files();
        let a = key_or_create(&layout).unwrap();
        assert_eq!(key_or_create(&layout).unwrap(), a);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_path(&layout))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(key_path(&layout), "not hex").unwrap();
        assert_eq!(
            key_or_create(&layout).unwrap_err().code().as_str(),
            "INVALID_INPUT"
        );
    }
}
