//! Making an archive: collect the root's files (journal files up to their
//! last complete line), sign the manifest, stream the archive durably into
//! the backup directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;

use super::manifest::{MAC, MANIFEST, Manifest, is_journal_path, manifest_for};
use super::signing;
use crate::base::durable;
use crate::config::Layout;
use crate::error::{IoContext, Result};
use crate::store::journal;

/// `(relative path, bytes)` of the files a backup holds.
type Files = Vec<(String, Vec<u8>)>;

/// Collects `(relative path, bytes)` for everything a backup holds, sorted
/// by path, and the symbolic links under `memories/` it leaves out.
fn collect(layout: &Layout) -> Result<(Files, Vec<String>)> {
    let mut out = Vec::new();
    let mut links = Vec::new();
    walk(&layout.root, &layout.memories(), &mut out, &mut links)?;
    for name in ["tokens.json", "config.json"] {
        let path = layout.root.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => out.push((name.to_string(), bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).ctx("cannot read", &path),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    links.sort();
    if !links.is_empty() {
        tracing::warn!(
            links = links.len(),
            first = %links[0],
            "symbolic links under memories/ are not followed and not backed up"
        );
    }
    Ok((out, links))
}

/// Regular files below `dir`, as paths relative to `root`; symbolic links
/// are never followed (an open with `O_NOFOLLOW` refuses one swapped in)
/// and are listed in `links` instead.
fn walk(root: &Path, dir: &Path, out: &mut Files, links: &mut Vec<String>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx("cannot list", dir),
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let meta = std::fs::symlink_metadata(&path).ctx("cannot stat", &path)?;
        if meta.file_type().is_symlink() {
            links.push(rel_path(root, &path));
        } else if meta.is_dir() {
            walk(root, &path, out, links)?;
        } else if meta.is_file() {
            let rel = rel_path(root, &path);
            let mut bytes = Vec::new();
            match crate::store::links::open_read(&path) {
                Ok(mut f) => {
                    std::io::Read::read_to_end(&mut f, &mut bytes).ctx("cannot read", &path)?;
                }
                Err(e) if crate::store::links::is_loop(&e) => {
                    links.push(rel);
                    continue;
                }
                Err(e) => return Err(e).ctx("cannot read", &path),
            }
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

fn rel_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .expect("walked below root")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Writes a new archive into `out_dir`; returns its path and manifest.
pub(crate) fn create(layout: &Layout, out_dir: &Path) -> Result<(PathBuf, Manifest)> {
    let key = signing::key_or_create(layout)?;
    let (files, links) = collect(layout)?;
    let manifest = manifest_for(&files, links);
    std::fs::create_dir_all(out_dir).ctx("cannot create backup directory", out_dir)?;
    // A backup never takes the reserve of its file system (the journal may
    // share it): the uncompressed size bounds what the archive can take.
    let size: u64 = files.iter().map(|(_, b)| b.len() as u64 + 1024).sum();
    if let Some(room) = crate::disk::Room::of(out_dir)
        && !room.takes(size)
    {
        return Err(crate::Error::StorageFull(format!(
            "the backup directory's file system has {} bytes free; a backup of up to {size} bytes \
             would leave less than the {} bytes memd keeps free there. Nothing was written",
            room.free,
            room.reserve()
        )));
    }
    // Backups hold every memory, secrets included: the directory and each
    // archive are private whatever the umask.
    crate::layout::tighten_tree(out_dir).ctx("cannot make private", out_dir)?;
    let name = format!(
        "memd-backup-{}.tar.gz",
        manifest.created.format("%Y%m%d-%H%M%S-%3f")
    );
    let path = out_dir.join(&name);
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    let mac_bytes =
        serde_json::to_vec_pretty(&signing::sign(&key, &manifest_bytes)).expect("mac serialises");
    let created = manifest.created.timestamp().max(0) as u64;
    durable::write_atomic_with(&path, |file| {
        let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
        append(&mut tar, MANIFEST, &manifest_bytes, created)?;
        append(&mut tar, MAC, &mac_bytes, created)?;
        for (rel, bytes) in &files {
            // Each file keeps its own modification time: a document's time is
            // its mtime, and a restore must not make every note "new".
            let mtime = std::fs::metadata(layout.root.join(rel))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(created, |d| d.as_secs());
            append(&mut tar, rel, bytes, mtime)?;
        }
        tar.into_inner()?.finish()?.flush()
    })?;
    Ok((path, manifest))
}

/// Appends one regular, owner-only file entry.
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    bytes: &[u8],
    mtime: u64,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o600);
    header.set_mtime(mtime);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, path, bytes)
}
