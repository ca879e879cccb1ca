//! Compressed journal months: `memories/facts/archive/<file>.gz`, where
//! `<file>` is the journal file's name relative to `facts/`
//! (`archive/2026-01.jsonl.gz` for a legacy flat file,
//! `archive/<device>/2026-01.jsonl.gz` for a device's). A device archives
//! only its own months and the legacy ones.
//!
//! A month is archived by (1) writing its lines gzip-compressed to
//! `archive/M.jsonl.gz.tmp`, fsync'd, then read back and compared byte for
//! byte; (2) renaming the plain file to `archive/M.jsonl.archiving`; (3)
//! renaming the temporary file to `archive/M.jsonl.gz`; (4) deleting the
//! `.archiving` copy. A crash at any step is repaired when the writer opens
//! the journal ([`recover`]): a month is always readable from exactly one of
//! its forms.
//!
//! Readers see one logical stream per month: the archive's lines followed by
//! any plain file appended later (a fact rewritten in place keeps its month,
//! so an archived month can grow again). Cursors count bytes of that stream,
//! so the index does not re-read a month because it was archived.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::base::durable::sync_dir;
use crate::error::{Error, IoContext, Result};

/// The archive directory below `memories/facts/`.
pub(crate) const DIR: &str = crate::store::device::ARCHIVE_DIR;

/// The archive of `month_file` unless a link stands anywhere on its way
/// below `memories/` (then it is treated as absent, and doctor names the link).
fn own_path(facts: &Path, month_file: &str) -> Option<PathBuf> {
    let memories = facts.parent().unwrap_or(facts);
    let rel = format!("facts/{DIR}/{month_file}.gz");
    crate::store::links::first_link(memories, &rel)
        .is_none()
        .then(|| archive_path(facts, month_file))
}

/// `archive/<file>.gz` for a journal file `<file>` (relative to `facts/`).
pub(crate) fn archive_path(facts: &Path, month_file: &str) -> PathBuf {
    facts.join(DIR).join(format!("{month_file}.gz"))
}

/// Archived month names (`YYYY-MM.jsonl`) directly in `dir`.
fn archived_in(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("cannot list", dir),
    };
    // `file_type` does not follow links: a linked archive is not read.
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter_map(|n| n.strip_suffix(".gz").map(str::to_string))
        .filter(|n| crate::store::device::is_journal_name(n))
        .collect())
}

/// Journal files (relative to `facts/`) that have an archive (never
/// through a link: see [`crate::store::links`]).
pub(crate) fn archived_months(facts: &Path) -> Result<Vec<String>> {
    let dir = facts.join(DIR);
    if crate::store::links::is_link(facts) || crate::store::links::is_link(&dir) {
        return Ok(Vec::new());
    }
    let mut out = archived_in(&dir)?;
    for dev in crate::store::device::device_dirs(&dir)? {
        out.extend(
            archived_in(&dir.join(&dev))?
                .into_iter()
                .map(|m| format!("{dev}/{m}")),
        );
    }
    out.sort();
    Ok(out)
}

/// The decompressed bytes of a month's archive (empty if it has none).
pub(crate) fn read(facts: &Path, month_file: &str) -> Result<Vec<u8>> {
    let Some(path) = own_path(facts, month_file) else {
        return Ok(Vec::new());
    };
    let f = match crate::store::links::open_read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if crate::store::links::is_loop(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("cannot open archive", &path),
    };
    let mut out = Vec::new();
    GzDecoder::new(std::io::BufReader::new(f))
        .read_to_end(&mut out)
        .ctx("cannot decompress archive", &path)?;
    Ok(out)
}

/// The decompressed length of a month's archive, from the gzip trailer (0 if none).
pub(crate) fn len(facts: &Path, month_file: &str) -> Result<u64> {
    use std::io::{Seek, SeekFrom};
    let Some(path) = own_path(facts, month_file) else {
        return Ok(0);
    };
    let mut f = match crate::store::links::open_read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) if crate::store::links::is_loop(&e) => return Ok(0),
        Err(e) => return Err(e).ctx("cannot open archive", &path),
    };
    let size = f.metadata().ctx("cannot stat archive", &path)?.len();
    if size < 18 {
        // Too short to be a gzip member (a copy still arriving): counts as
        // empty here; reading it reports the problem (see `journal::scan_file`).
        return Ok(0);
    }
    let mut tail = [0u8; 4];
    f.seek(SeekFrom::End(-4))
        .and_then(|_| f.read_exact(&mut tail))
        .ctx("cannot read archive", &path)?;
    Ok(u64::from(u32::from_le_bytes(tail)))
}

/// Repairs an interrupted [`archive_month`] of a legacy month or one of
/// `device`'s (called by the journal writer on open). Other devices' archives
/// are theirs to repair.
pub fn recover(facts: &Path, device: &str) -> Result<()> {
    for (prefix, dir) in [
        (String::new(), facts.join(DIR)),
        (format!("{device}/"), facts.join(DIR).join(device)),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if let Some(month) = name.strip_suffix(".archiving") {
                let rel = format!("{prefix}{month}");
                if archive_path(facts, &rel).exists() {
                    std::fs::remove_file(&path).ctx("cannot remove", &path)?;
                } else {
                    let plain = facts.join(&rel);
                    std::fs::rename(&path, &plain).ctx("cannot restore", &plain)?;
                    sync_dir(plain.parent().unwrap_or(facts))?;
                }
            } else if name.ends_with(".gz.tmp") {
                std::fs::remove_file(&path).ctx("cannot remove", &path)?;
            }
        }
    }
    Ok(())
}

/// Compresses the plain month file `month_file` into the archive; see the module docs.
/// A month that already has an archive is left alone. Returns the lines archived.
pub fn archive_month(facts: &Path, month_file: &str) -> Result<u64> {
    let plain = facts.join(month_file);
    let target = archive_path(facts, month_file);
    // Nothing is read or written through a link (see `store::links`).
    let memories = facts.parent().unwrap_or(facts);
    for rel in [
        format!("facts/{month_file}"),
        format!("facts/{DIR}/{month_file}.gz"),
    ] {
        if let Some(link) = crate::store::links::first_link(memories, &rel) {
            return Err(crate::store::StoreError::Damaged {
                path: memories.join(link),
                problem: format!(
                    "{}; the month is not archived",
                    crate::store::links::NOT_FOLLOWED
                ),
            }
            .into());
        }
    }
    if std::fs::symlink_metadata(&target).is_ok() {
        return Ok(0);
    }
    let bytes = std::fs::read(&plain).ctx("cannot read journal", &plain)?;
    if bytes.last().is_some_and(|&b| b != b'\n') {
        return Err(Error::Internal(format!(
            "{} ends in an incomplete line; not archived",
            plain.display()
        )));
    }
    let dir = target.parent().unwrap_or(facts).to_path_buf();
    std::fs::create_dir_all(&dir).ctx("cannot create", &dir)?;
    let tmp = facts.join(DIR).join(format!("{month_file}.gz.tmp"));
    {
        let f = std::fs::File::create(&tmp).ctx("cannot create", &tmp)?;
        let mut enc = GzEncoder::new(f, Compression::default());
        enc.write_all(&bytes).ctx("cannot compress", &tmp)?;
        let f = enc.finish().ctx("cannot compress", &tmp)?;
        f.sync_all().ctx("cannot fsync", &tmp)?;
    }
    // Read back and verify before the plain file goes away.
    let mut back = Vec::new();
    GzDecoder::new(std::fs::File::open(&tmp).ctx("cannot open", &tmp)?)
        .read_to_end(&mut back)
        .ctx("cannot read back", &tmp)?;
    if back != bytes {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Internal(format!(
            "{} did not read back identically; plain file kept",
            tmp.display()
        )));
    }
    let parked = facts.join(DIR).join(format!("{month_file}.archiving"));
    std::fs::rename(&plain, &parked).ctx("cannot move", &plain)?;
    sync_dir(plain.parent().unwrap_or(facts))?;
    std::fs::rename(&tmp, &target).ctx("cannot move", &tmp)?;
    sync_dir(&dir)?;
    std::fs::remove_file(&parked).ctx("cannot remove", &parked)?;
    sync_dir(&dir)?;
    Ok(bytes.iter().filter(|&&b| b == b'\n').count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_round_trip_and_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let facts = dir.path();
        std::fs::write(facts.join("2026-01.jsonl"), "a\nb\n").unwrap();
        assert_eq!(archive_month(facts, "2026-01.jsonl").unwrap(), 2);
        assert!(!facts.join("2026-01.jsonl").exists());
        assert_eq!(read(facts, "2026-01.jsonl").unwrap(), b"a\nb\n");
        assert_eq!(len(facts, "2026-01.jsonl").unwrap(), 4);
        assert_eq!(archived_months(facts).unwrap(), ["2026-01.jsonl"]);
        // An interrupted run before the archive was in place puts the plain file back.
        std::fs::write(facts.join("archive/2026-02.jsonl.archiving"), "c\n").unwrap();
        std::fs::write(facts.join("archive/2026-02.jsonl.gz.tmp"), "junk").unwrap();
        recover(facts, "dev").unwrap();
        assert_eq!(std::fs::read(facts.join("2026-02.jsonl")).unwrap(), b"c\n");
        assert!(!facts.join("archive/2026-02.jsonl.gz.tmp").exists());
    }

    #[test]
    fn device_months_archive_below_their_device() {
        let dir = tempfile::tempdir().unwrap();
        let facts = dir.path();
        std::fs::create_dir_all(facts.join("dev")).unwrap();
        std::fs::create_dir_all(facts.join("other")).unwrap();
        std::fs::write(facts.join("dev/2026-01.jsonl"), "a\n").unwrap();
        assert_eq!(archive_month(facts, "dev/2026-01.jsonl").unwrap(), 1);
        assert!(facts.join("archive/dev/2026-01.jsonl.gz").is_file());
        assert!(!facts.join("dev/2026-01.jsonl").exists());
        assert_eq!(archived_months(facts).unwrap(), ["dev/2026-01.jsonl"]);
        assert_eq!(read(facts, "dev/2026-01.jsonl").unwrap(), b"a\n");
        // Interrupted runs: this device's is repaired, another device's is left alone.
        std::fs::create_dir_all(facts.join("archive/other")).unwrap();
        std::fs::write(facts.join("archive/dev/2026-02.jsonl.archiving"), "b\n").unwrap();
        std::fs::write(facts.join("archive/other/2026-02.jsonl.archiving"), "c\n").unwrap();
        recover(facts, "dev").unwrap();
        assert_eq!(
            std::fs::read(facts.join("dev/2026-02.jsonl")).unwrap(),
            b"b\n"
        );
        assert!(facts.join("archive/other/2026-02.jsonl.archiving").exists());
        assert!(!facts.join("other/2026-02.jsonl").exists());
    }
}
