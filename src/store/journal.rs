//! The fact journal: append-only JSON lines under `memories/facts/`.
//!
//! Layout: each device appends only to its own directory,
//! `facts/<device>/YYYY-MM.jsonl` (see [`crate::store::device`]), and reads
//! every device's directory plus the legacy flat `facts/YYYY-MM.jsonl` files
//! of roots written before devices existed. Journal files are named by their
//! path relative to `facts/` (`laptop-3fa9c2/2026-11.jsonl`, or
//! `2026-11.jsonl` for a legacy file) wherever cursors and `file:line` issues
//! name them. A line goes into the file of the month of its timestamp (UTC).
//! Files are read in month order, and within a month the legacy file first,
//! then the devices by name. Anything that is not a regular file but has a
//! journal name (a directory called `2026-10.jsonl`, a socket) is skipped
//! with a warning, and so is a symbolic link, file or directory: links are
//! never followed, read or write ([`crate::store::links`]; `memd doctor`
//! names them). The writer refuses to append through one.
//!
//! Appending (one line per record, group commit with one `fsync` per file,
//! nothing acknowledged before it is durable and reads back): only the
//! writer's own files are ever written. Before appending, the writer makes
//! sure its file ends with `\n`; a failed append (a short write, `ENOSPC` on
//! write or `fsync`, a read-back mismatch) truncates every file of the group
//! back to its previous length, so no fragment is left for the next line to
//! be glued to.
//!
//! Every line this build writes ends with a checksum field,
//! `,"crc":"<8 hex>"}`: the CRC-32 of the line's bytes without that field
//! (as if the object closed right before it). Replay verifies it, so a
//! flipped bit inside a string is reported as a damaged line rather than
//! served as data. The field is optional: lines without it (older builds,
//! other tools) stay valid, and older readers ignore it (a record has no
//! closed field list).
//!
//! Scanning reads from a byte offset and reports corrupt lines with
//! `file:line` instead of failing. A last line without its newline is never
//! consumed: the cursor stays before it until it is complete (a sync tool may
//! still be writing it). Files memd does not own are never repaired or
//! rewritten.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Datelike, Utc};

use crate::base::durable::sync_dir;
use crate::error::{Error, IoContext, Result};
use crate::model::{JOURNAL_VERSION, Record};
pub use crate::store::device::{device_dirs, is_journal_name};
use crate::store::error::StoreError;
use crate::store::{device, links};

/// The journal month file name for a timestamp: `YYYY-MM.jsonl`.
pub fn file_name_for(ts: DateTime<Utc>) -> String {
    format!("{:04}-{:02}.jsonl", ts.year(), ts.month())
}

/// Whether `rel` (relative to `facts/`) names a journal file: a legacy
/// `YYYY-MM.jsonl` or `<device>/YYYY-MM.jsonl`.
pub(crate) fn is_journal_path(rel: &str) -> bool {
    match rel.split_once('/') {
        None => is_journal_name(rel),
        Some((dev, name)) => device::is_device_name(dev) && is_journal_name(name),
    }
}

/// The month file name of a journal file (`YYYY-MM.jsonl`).
pub(crate) fn month_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or(rel, |(_, m)| m)
}

/// The device directory of a journal file; `None` for a legacy flat file.
pub(crate) fn device_of(rel: &str) -> Option<&str> {
    rel.split_once('/').map(|(d, _)| d)
}

/// Reading order: month, then the legacy file, then devices by name.
fn order_key(rel: &str) -> (&str, &str) {
    (month_of(rel), device_of(rel).unwrap_or(""))
}

fn sort_files(names: &mut Vec<String>) {
    names.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
    names.dedup();
}

/// Journal month files (`YYYY-MM.jsonl` names) that are regular files in
/// `dir`; links are skipped, never followed (see [`crate::store::links`]).
fn month_files(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    if links::is_link(dir) {
        tracing::warn!(path = %dir.display(), "symbolic link, not followed; no journal read through it");
        return Ok(names);
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(e).ctx("cannot list journal directory", dir),
    };
    for entry in entries {
        let entry = entry.ctx("cannot list journal directory", dir)?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !is_journal_name(&name) {
            continue;
        }
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_file() => names.push(name),
            Ok(t) if t.is_symlink() => {
                tracing::warn!(path = %path.display(), "symbolic link, not followed; skipped as a journal file")
            }
            Ok(_) => {
                tracing::warn!(path = %path.display(), "not a regular file; skipped as a journal file")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot stat; skipped as a journal file")
            }
        }
    }
    Ok(names)
}

/// Plain journal files below `facts/` (legacy flat files and every device's),
/// as relative names, in reading order.
pub fn list_files(facts: &Path) -> Result<Vec<String>> {
    let mut names = month_files(facts)?;
    for dev in device_dirs(facts)? {
        names.extend(
            month_files(&facts.join(&dev))?
                .into_iter()
                .map(|m| format!("{dev}/{m}")),
        );
    }
    sort_files(&mut names);
    Ok(names)
}

/// Every journal file with lines, in reading order: plain files and archived
/// months alike. Scan them with [`scan_file`], which reads a month's archive
/// and then its plain file as one stream (see [`crate::store::archive`]).
pub(crate) fn list_all(facts: &Path) -> Result<Vec<String>> {
    let mut names = list_files(facts)?;
    names.extend(crate::store::archive::archived_months(facts)?);
    sort_files(&mut names);
    Ok(names)
}

/// Bytes of a journal file's logical stream: its archive (decompressed) plus its plain file.
pub(crate) fn content_len(facts: &Path, file: &str) -> Result<u64> {
    Ok(crate::store::archive::len(facts, file)? + plain_len(facts, file)?)
}

/// Bytes of a journal file's plain part (0 when it has none).
pub(crate) fn plain_len(facts: &Path, file: &str) -> Result<u64> {
    let path = facts.join(file);
    let plain = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).ctx("cannot stat journal", &path),
    };
    Ok(plain)
}

/// How far a file has been read: the byte offset after the last complete line
/// and the number of lines before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Cursor {
    /// Byte offset just after the last consumed newline.
    pub(crate) offset: u64,
    /// Lines consumed so far (the next line is `lines + 1`).
    pub(crate) lines: u64,
}

/// A line that could not be used, with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineIssue {
    /// Journal file name.
    pub(crate) file: String,
    /// 1-based line number.
    pub(crate) line: u64,
    /// What is wrong with it.
    pub(crate) message: String,
}

impl std::fmt::Display for LineIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// One item of a scan: a record or an issue, with the cursor after it.
#[derive(Debug)]
pub(crate) struct ScanItem {
    /// The parsed record, or what was wrong with the line.
    pub(crate) entry: std::result::Result<Record, LineIssue>,
    /// Position after this line.
    pub(crate) cursor: Cursor,
}

/// The checksum field's opening, as it ends a sealed line: `,"crc":"`,
/// eight lowercase hex digits, `"}`.
const CRC_OPEN: &str = ",\"crc\":\"";

/// Length of the checksum field at the end of a sealed line.
const CRC_FIELD_LEN: usize = CRC_OPEN.len() + 8 + 2;

/// Appends the checksum field to one serialised record (a JSON object).
pub(crate) fn seal(line: &mut Vec<u8>) {
    debug_assert_eq!(line.last(), Some(&b'}'));
    let crc = crc32fast::hash(line);
    line.pop();
    line.extend_from_slice(format!("{CRC_OPEN}{crc:08x}\"}}").as_bytes());
}

/// Checks the checksum field ending `line`, if it has one.
fn check_seal(line: &str) -> std::result::Result<(), String> {
    let Some(split) = line.len().checked_sub(CRC_FIELD_LEN) else {
        return Ok(());
    };
    let (Some(body), Some(field)) = (line.get(..split), line.get(split..)) else {
        return Ok(());
    };
    let Some(hex) = field
        .strip_prefix(CRC_OPEN)
        .and_then(|f| f.strip_suffix("\"}"))
    else {
        return Ok(());
    };
    let Ok(want) = u32::from_str_radix(hex, 16) else {
        return Err(format!("checksum field {hex:?} is not 8 hex digits"));
    };
    let mut h = crc32fast::Hasher::new();
    h.update(body.as_bytes());
    h.update(b"}");
    let got = h.finalize();
    if got != want {
        return Err(format!(
            "checksum mismatch (the line says {want:08x}, its bytes give {got:08x}): \
             the line was changed or damaged after it was written"
        ));
    }
    Ok(())
}

/// Parses one journal line, verifying its checksum if it has one.
pub(crate) fn parse_line(line: &str) -> std::result::Result<Record, String> {
    check_seal(line)?;
    let record: Record = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let v = record.version();
    if v == 0 || v > JOURNAL_VERSION {
        return Err(format!(
            "format version {v} is not supported by this build (max {JOURNAL_VERSION})"
        ));
    }
    Ok(record)
}

/// A month's archive (decompressed, in memory) followed by its plain file.
type ArchiveThenPlain = std::io::Chain<std::io::Cursor<Vec<u8>>, Box<dyn Read>>;

/// A journal file's logical stream (archive, then plain file) from an offset.
enum Stream {
    /// The bytes from the offset on.
    Lines(BufReader<ArchiveThenPlain>),
    /// Not a regular file: skipped with a warning.
    Skipped,
    /// The month cannot be read past its archive; nothing past the offset applies.
    Held(LineIssue),
}

fn open_from(dir: &Path, file: &str, from: Cursor) -> Result<Stream> {
    let path = dir.join(file);
    // An archived month is read from its archive first, then from the plain
    // file appended since; offsets count bytes of both together.
    // An archive that cannot be read (another device's half-synced copy, a
    // damaged file) holds this month back, reported, instead of stopping every
    // catch-up: nothing past the cursor is applied until it reads again.
    let archived = match crate::store::archive::read(dir, file) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Ok(Stream::Held(LineIssue {
                file: file.to_string(),
                line: from.lines + 1,
                message: format!(
                    "archive cannot be read ({e}); this month is not applied until it can"
                ),
            }));
        }
    };
    let head_len = archived.len() as u64;
    if links::first_link(dir, file).is_some() {
        tracing::warn!(path = %path.display(), "symbolic link, not followed; skipped as a journal file");
        return Ok(Stream::Skipped);
    }
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        tracing::warn!(path = %path.display(), "not a regular file; skipped as a journal file");
        return Ok(Stream::Skipped);
    }
    // O_NOFOLLOW: a link swapped in after the check is refused by the open.
    let tail: Box<dyn Read> = match links::open_read(&path) {
        Ok(mut f) => {
            f.seek(SeekFrom::Start(from.offset.saturating_sub(head_len)))
                .ctx("cannot seek journal", &path)?;
            Box::new(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && head_len > 0 => {
            Box::new(std::io::empty())
        }
        Err(e) if links::is_loop(&e) => {
            tracing::warn!(path = %path.display(), "symbolic link, not followed; skipped as a journal file");
            return Ok(Stream::Skipped);
        }
        Err(e) => return Err(e).ctx("cannot open journal", &path),
    };
    let skip = from.offset.min(head_len);
    let mut head = std::io::Cursor::new(archived);
    head.set_position(skip);
    Ok(Stream::Lines(BufReader::with_capacity(
        1 << 16,
        head.chain(tail),
    )))
}

/// Complete lines of `file` after `from` (blank ones included), without
/// parsing them.
pub(crate) fn count_lines(dir: &Path, file: &str, from: Cursor) -> Result<u64> {
    let Stream::Lines(mut reader) = open_from(dir, file, from)? else {
        return Ok(0);
    };
    let path = dir.join(file);
    let mut n = 0u64;
    loop {
        let buf = reader.fill_buf().ctx("cannot read journal", &path)?;
        if buf.is_empty() {
            return Ok(n);
        }
        let len = buf.len();
        n += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        reader.consume(len);
    }
}

/// Every complete line of `file` (its archive, then its plain file), raw and
/// without its newline, with its 1-based number; a torn tail is left out.
pub(crate) fn raw_lines(
    dir: &Path,
    file: &str,
    visit: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    raw_lines_from(dir, file, Cursor::default(), visit).map(|_| ())
}

/// [`raw_lines`] after `from` (numbered on from it); returns the cursor
/// after the last complete line (`from` for a file skipped or held).
pub(crate) fn raw_lines_from(
    dir: &Path,
    file: &str,
    from: Cursor,
    mut visit: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<Cursor> {
    let Stream::Lines(mut reader) = open_from(dir, file, from)? else {
        return Ok(from);
    };
    let path = dir.join(file);
    let mut buf = Vec::new();
    let mut cursor = from;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .ctx("cannot read journal", &path)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok(cursor);
        }
        cursor.lines += 1;
        cursor.offset += n as u64;
        visit(cursor.lines, &buf[..n - 1])?;
    }
}

/// Reads the complete lines of `file` after `from`, calling `visit` for each.
///
/// A trailing line without a newline is not consumed: it is returned as the
/// torn tail (line number and length) so the caller can report it.
pub(crate) fn scan_file(
    dir: &Path,
    file: &str,
    from: Cursor,
    mut visit: impl FnMut(ScanItem) -> Result<()>,
) -> Result<Option<LineIssue>> {
    let mut reader = match open_from(dir, file, from)? {
        Stream::Lines(r) => r,
        Stream::Skipped => return Ok(None),
        Stream::Held(issue) => return Ok(Some(issue)),
    };
    let path = dir.join(file);
    let mut cursor = from;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .ctx("cannot read journal", &path)?;
        if n == 0 {
            return Ok(None);
        }
        let line_no = cursor.lines + 1;
        if buf.last() != Some(&b'\n') {
            return Ok(Some(LineIssue {
                file: file.to_string(),
                line: line_no,
                message: format!(
                    "incomplete last line ({n} bytes without a newline), not applied until it is complete"
                ),
            }));
        }
        cursor.offset += n as u64;
        cursor.lines = line_no;
        let text = String::from_utf8_lossy(&buf[..n - 1]);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let entry = parse_line(text).map_err(|message| LineIssue {
            file: file.to_string(),
            line: line_no,
            message,
        });
        visit(ScanItem { entry, cursor })?;
    }
}

/// The single appender of the journal: appends only to this device's files.
#[derive(Debug)]
pub(crate) struct JournalWriter {
    facts: PathBuf,
    device: String,
    open: BTreeMap<String, OwnFile>,
    #[cfg(test)]
    inject: Option<Inject>,
    /// Files of the next group appended before the injection hits.
    #[cfg(test)]
    inject_skip: usize,
}

/// An open file of this device, with the length of its last good state.
#[derive(Debug)]
struct OwnFile {
    file: File,
    /// Bytes that are known to be whole lines.
    len: u64,
    /// A failed append could not be truncated away: truncate to `len` before the next one.
    dirty: bool,
}

/// A failure to inject into the next append (tests only).
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
enum Inject {
    /// Write this many bytes, then fail with ENOSPC.
    WriteFailsAfter(usize),
    /// Write everything, then fail the fsync with ENOSPC.
    FsyncFails,
    /// Write a different byte than asked (the read-back must catch it).
    Corrupt,
}

/// Where a batch of appended lines ended, per file.
pub(crate) type AppendEnds = BTreeMap<String, u64>;

impl JournalWriter {
    /// Opens `facts/<device>/` for appending, finishes an interrupted archive
    /// run of this device's (or legacy) months, and terminates a torn last
    /// line of this device's own files (a crash mid-write) with `\n`, so it
    /// becomes one reported corrupt line.
    ///
    /// Returns the writer and the torn tails it terminated.
    pub(crate) fn open(facts: &Path, device: &str) -> Result<(Self, Vec<LineIssue>)> {
        if !device::is_device_name(device) {
            return Err(Error::Internal(format!(
                "{device:?} is not usable as a journal directory name"
            )));
        }
        // Nothing is written through a link: the writer refuses to start
        // on one rather than append outside the root.
        let memories = facts.parent().unwrap_or(facts);
        if let Some(link) = links::first_link(memories, &format!("facts/{device}")) {
            return Err(StoreError::Damaged {
                path: memories.join(&link),
                problem: format!(
                    "{}; memd appends only to a real directory: replace the link by the \
                     directory it points to",
                    links::NOT_FOLLOWED
                ),
            }
            .into());
        }
        std::fs::create_dir_all(facts).ctx("cannot create journal directory", facts)?;
        crate::store::archive::recover(facts, device)?;
        let mut writer = JournalWriter {
            facts: facts.to_path_buf(),
            device: device.to_string(),
            open: BTreeMap::new(),
            #[cfg(test)]
            inject: None,
            #[cfg(test)]
            inject_skip: 0,
        };
        let mut repaired = Vec::new();
        for name in month_files(&facts.join(device))? {
            let rel = format!("{device}/{name}");
            match writer.ensure_open(&rel) {
                Ok(Some(issue)) => repaired.push(issue),
                Ok(None) => {}
                // A torn tail cannot be terminated on a full disk: the next
                // append terminates it first (see `append_file`).
                Err(e) if e.is_storage_full() => {
                    tracing::warn!(journal.file = %rel, error = %e, "cannot repair the journal's last line yet (disk full)");
                }
                Err(e) => return Err(e),
            }
        }
        Ok((writer, repaired))
    }

    /// Forgets open file handles (after months were archived) and repeats [`JournalWriter::open`].
    pub(crate) fn reopen(&mut self) -> Result<Vec<LineIssue>> {
        let (fresh, repaired) = JournalWriter::open(&self.facts, &self.device)?;
        *self = fresh;
        Ok(repaired)
    }

    /// Plain files this writer may rewrite (archive): its own and the legacy flat ones.
    pub(crate) fn owned_files(&self) -> Result<Vec<String>> {
        Ok(list_files(&self.facts)?
            .into_iter()
            .filter(|rel| device_of(rel).is_none_or(|d| d == self.device))
            .collect())
    }

    /// Opens `rel` (a file of this device) if needed, creating its directory
    /// and file durably, and makes sure it ends with `\n`.
    fn ensure_open(&mut self, rel: &str) -> Result<Option<LineIssue>> {
        if self.open.contains_key(rel) {
            return Ok(None);
        }
        let dir = self.facts.join(&self.device);
        let path = self.facts.join(rel);
        let memories = self.facts.parent().unwrap_or(&self.facts);
        let refuse_link = |link: &Path| -> Error {
            StoreError::Damaged {
                path: link.to_path_buf(),
                problem: format!(
                    "{}; nothing is appended through it (move it away so memd can append to \
                     its own file)",
                    links::NOT_FOLLOWED
                ),
            }
            .into()
        };
        if let Some(link) = links::first_link(memories, &format!("facts/{rel}")) {
            return Err(refuse_link(&memories.join(link)));
        }
        if std::fs::symlink_metadata(&dir).is_err() {
            std::fs::create_dir_all(&dir).ctx("cannot create journal directory", &dir)?;
            sync_dir(&self.facts)?;
        }
        let existed = std::fs::symlink_metadata(&path).is_ok();
        // O_NOFOLLOW: a link (dangling or not) is refused, never created through.
        let file = match links::open_append(&path) {
            Ok(f) => f,
            Err(e) if links::is_loop(&e) => return Err(refuse_link(&path)),
            Err(e) => return Err(e).ctx("cannot open journal", &path),
        };
        if !existed {
            // The new directory entry must be durable too.
            sync_dir(&dir)?;
        }
        let meta = file.metadata().ctx("cannot stat journal", &path)?;
        if !meta.is_file() {
            return Err(StoreError::Damaged {
                path,
                problem: "not a regular file; move it away so memd can append to it".into(),
            }
            .into());
        }
        self.open.insert(
            rel.to_string(),
            OwnFile {
                file,
                len: meta.len(),
                dirty: false,
            },
        );
        self.terminate_tail(rel)
    }

    /// Terminates a last line without `\n` (never acknowledged: a crash mid-write).
    fn terminate_tail(&mut self, rel: &str) -> Result<Option<LineIssue>> {
        let path = self.facts.join(rel);
        let own = self.open.get_mut(rel).expect("opened by the caller");
        let len = own.file.metadata().ctx("cannot stat journal", &path)?.len();
        own.len = len;
        if len == 0 {
            return Ok(None);
        }
        let mut last = [0u8; 1];
        own.file
            .read_exact_at(&mut last, len - 1)
            .ctx("cannot read journal", &path)?;
        if last[0] == b'\n' {
            return Ok(None);
        }
        let lines = count_newlines(&path)?;
        own.file
            .write_all(b"\n")
            .and_then(|()| own.file.sync_data())
            .ctx("cannot repair journal", &path)?;
        own.len = len + 1;
        tracing::warn!(journal.file = %rel, journal.line = lines + 1, "terminated a torn last line (crash mid-write)");
        Ok(Some(LineIssue {
            file: rel.to_string(),
            line: lines + 1,
            message: "torn last line (crash mid-write); terminated and skipped".into(),
        }))
    }

    /// Appends `records` as one group: every line is written, then each touched
    /// file is fsync'd once and read back. Returns the end offset of each
    /// touched file. On any failure every file of the group is truncated back
    /// to where it was, and nothing of the group is stored.
    pub(crate) fn append(&mut self, records: &[Record]) -> Result<AppendEnds> {
        let mut by_file: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for r in records {
            let mut line = serde_json::to_vec(r)
                .map_err(|e| Error::Internal(format!("serialise record: {e}")))?;
            seal(&mut line);
            line.push(b'\n');
            by_file
                .entry(format!("{}/{}", self.device, file_name_for(r.ts())))
                .or_default()
                .extend(line);
        }
        let mut ends = AppendEnds::new();
        let mut done: Vec<(String, u64)> = Vec::new();
        for (rel, bytes) in by_file {
            match self.append_file(&rel, &bytes) {
                Ok((start, end)) => {
                    done.push((rel.clone(), start));
                    ends.insert(rel, end);
                }
                Err(e) => {
                    if let Some(repeats) = crate::base::repeat::global().admit("journal.append") {
                        tracing::error!(journal.file = %rel, error = %e, repeated = repeats, "journal append failed; the group is rolled back");
                    }
                    for (rel, start) in done {
                        self.truncate_back(&rel, start);
                    }
                    return Err(e);
                }
            }
        }
        Ok(ends)
    }

    /// Appends `bytes` to one own file; on failure truncates it back.
    /// Returns the offsets before and after.
    fn append_file(&mut self, rel: &str, bytes: &[u8]) -> Result<(u64, u64)> {
        self.ensure_open(rel)?;
        let path = self.facts.join(rel);
        {
            let own = self.open.get_mut(rel).expect("opened above");
            if own.dirty {
                own.file
                    .set_len(own.len)
                    .and_then(|()| own.file.sync_data())
                    .ctx("cannot truncate journal", &path)?;
                own.dirty = false;
            }
        }
        // Whatever happened to the file since, it must end with a newline.
        self.terminate_tail(rel)?;
        #[cfg(test)]
        let inject = if self.inject_skip > 0 {
            self.inject_skip -= 1;
            None
        } else {
            self.inject.take()
        };
        let own = self.open.get_mut(rel).expect("opened above");
        let start = own.len;
        let written = (|| -> std::io::Result<()> {
            #[cfg(test)]
            match inject {
                Some(Inject::WriteFailsAfter(n)) => {
                    own.file.write_all(&bytes[..n.min(bytes.len())])?;
                    return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
                }
                Some(Inject::FsyncFails) => {
                    own.file.write_all(bytes)?;
                    return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
                }
                Some(Inject::Corrupt) => {
                    let mut wrong = bytes.to_vec();
                    wrong[0] ^= 0x20;
                    own.file.write_all(&wrong)?;
                    return own.file.sync_data();
                }
                None => {}
            }
            own.file.write_all(bytes)?;
            own.file.sync_data()
        })()
        .map_err(|source| {
            Error::from(StoreError::Append {
                path: path.clone(),
                source,
            })
        })
        .and_then(|()| read_back(&own.file, &path, start, bytes));
        match written {
            Ok(()) => {
                own.len = start + bytes.len() as u64;
                Ok((start, own.len))
            }
            Err(e) => {
                self.truncate_back(rel, start);
                Err(e)
            }
        }
    }

    /// Removes everything after `len` from an own file (a failed or rolled-back append).
    fn truncate_back(&mut self, rel: &str, len: u64) {
        let path = self.facts.join(rel);
        let Some(own) = self.open.get_mut(rel) else {
            return;
        };
        own.len = len;
        match own.file.set_len(len).and_then(|()| own.file.sync_data()) {
            Ok(()) => own.dirty = false,
            Err(e) => {
                // Retried before the next append to this file.
                tracing::error!(path = %path.display(), error = %e, "cannot truncate a failed append yet");
                own.dirty = true;
            }
        }
    }
}

/// Checks that `bytes` are what the file holds at `start` (and nothing after).
fn read_back(file: &File, path: &Path, start: u64, bytes: &[u8]) -> Result<()> {
    let len = file.metadata().ctx("cannot stat journal", path)?.len();
    let mut back = vec![0u8; bytes.len()];
    file.read_exact_at(&mut back, start)
        .ctx("cannot read back journal", path)?;
    if len != start + bytes.len() as u64 || back != bytes {
        return Err(StoreError::ReadBack {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

fn count_newlines(path: &Path) -> Result<u64> {
    let mut f = links::open_read(path).ctx("cannot open journal", path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let read = f.read(&mut buf).ctx("cannot read journal", path)?;
        if read == 0 {
            return Ok(n);
        }
        n += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fact, Privacy, Scene, Stage, Subject};
    use std::fs::OpenOptions;

    fn fact(id: &str, text: &str) -> Record {
        Record::Put {
            v: 1,
            at: None,
            fact: Fact {
                id: id.into(),
                ts: DateTime::from_timestamp(1_780_000_000, 0).unwrap(),
                scene: Scene::parse("main").unwrap(),
                kind: "note".into(),
                stage: Stage::Long,
                text: text.into(),
                title: None,
                tags: vec![],
                privacy: Privacy::Normal,
                subject: Subject::Owner,
                source: "test".into(),
                importance: 0.5,
                tier: None,
                supersedes: None,
                expires_at: None,
                source_message_id: None,
                idempotency_key: None,
                device: String::new(),
                accesses: 0,
                run: None,
                setting: Default::default(),
            },
        }
    }

    const DEV: &str = "dev1";

    fn scan_all(dir: &Path) -> (Vec<String>, Vec<String>, Option<LineIssue>) {
        let mut ids = Vec::new();
        let mut issues = Vec::new();
        let mut torn = None;
        for name in list_files(dir).unwrap() {
            torn = scan_file(dir, &name, Cursor::default(), |item| {
                match item.entry {
                    Ok(r) => ids.push(r.id().to_string()),
                    Err(i) => issues.push(i.to_string()),
                }
                Ok(())
            })
            .unwrap()
            .or(torn);
        }
        (ids, issues, torn)
    }

    #[test]
    fn append_then_scan() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, repaired) = JournalWriter::open(dir.path(), DEV).unwrap();
        assert!(repaired.is_empty());
        let ends = w.append(&[fact("a", "x"), fact("b", "y")]).unwrap();
        assert_eq!(ends.len(), 1);
        let name = ends.keys().next().unwrap();
        assert!(name.starts_with("dev1/"), "{name}");
        assert!(dir.path().join(name).is_file());
        let (ids, issues, torn) = scan_all(dir.path());
        assert_eq!(ids, ["a", "b"]);
        assert!(issues.is_empty() && torn.is_none());
    }

    #[test]
    fn corrupt_and_torn_lines_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        w.append(&[fact("a", "x")]).unwrap();
        let name = list_files(dir.path()).unwrap().remove(0);
        let path = dir.path().join(&name);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{not json}\n{\"op\":\"put\",\"v\":99}\n")
            .unwrap();
        drop(w);
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        w.append(&[fact("b", "y")]).unwrap();
        drop(w);
        // A crash mid-write leaves half a line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"op\":\"put\",\"v\":1,\"id\":\"half")
            .unwrap();
        let (ids, issues, torn) = scan_all(dir.path());
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(issues.len(), 2);
        assert!(issues[0].starts_with(&format!("{name}:2:")), "{issues:?}");
        assert!(issues[1].starts_with(&format!("{name}:3:")), "{issues:?}");
        assert_eq!(torn.unwrap().line, 5);
        // Reopening terminates the torn tail of its own file, so later appends stay readable.
        let (mut w, repaired) = JournalWriter::open(dir.path(), DEV).unwrap();
        assert_eq!(repaired.len(), 1);
        assert_eq!(repaired[0].line, 5);
        w.append(&[fact("c", "z")]).unwrap();
        let (ids, issues, torn) = scan_all(dir.path());
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(issues.len(), 3);
        assert!(torn.is_none());
    }

    #[test]
    fn sealed_lines_verify_and_older_readers_ignore_the_seal() {
        let mut line = serde_json::to_vec(&fact("a", "kayak")).unwrap();
        seal(&mut line);
        let text = String::from_utf8(line).unwrap();
        assert!(text.ends_with("\"}"), "{text}");
        assert_eq!(parse_line(&text).unwrap(), fact("a", "kayak"));
        // What an older build does with a line (deserialise the record): the
        // field is ignored, the line is not refused.
        let older: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(older, fact("a", "kayak"));
        // A flipped bit inside a string is reported, not served.
        let flipped = text.replacen("kayak", "kayal", 1);
        assert!(
            parse_line(&flipped)
                .unwrap_err()
                .contains("checksum mismatch"),
            "{flipped}"
        );
        let bad_field = format!("{}zzzzzzzz\"}}", &text[..text.len() - 10]);
        assert!(parse_line(&bad_field).is_err(), "{bad_field}");
        // Lines without the field stay valid.
        let plain = serde_json::to_string(&fact("b", "canoe")).unwrap();
        assert_eq!(parse_line(&plain).unwrap(), fact("b", "canoe"));
        // Appended lines carry it.
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        w.append(&[fact("c", "raft")]).unwrap();
        let name = list_files(dir.path()).unwrap().remove(0);
        let written = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(written.contains(CRC_OPEN), "{written}");
        assert_eq!(parse_line(written.trim()).unwrap(), fact("c", "raft"));
    }

    #[test]
    fn lines_after_a_cursor_are_counted_without_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        let ends = w.append(&[fact("a", "x")]).unwrap();
        w.append(&[fact("b", "y"), fact("c", "z")]).unwrap();
        let (name, offset) = ends.into_iter().next().unwrap();
        assert_eq!(
            count_lines(dir.path(), &name, Cursor::default()).unwrap(),
            3
        );
        assert_eq!(
            count_lines(dir.path(), &name, Cursor { offset, lines: 1 }).unwrap(),
            2
        );
    }

    #[test]
    fn scan_resumes_from_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        let ends = w.append(&[fact("a", "x")]).unwrap();
        w.append(&[fact("b", "y")]).unwrap();
        let (name, offset) = ends.into_iter().next().unwrap();
        let mut seen = Vec::new();
        scan_file(dir.path(), &name, Cursor { offset, lines: 1 }, |item| {
            let r = item.entry.unwrap();
            assert_eq!(item.cursor.lines, 2);
            seen.push(r.id().to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, ["b"]);
    }

    /// The bytes of every file below `dir`, by relative name.
    fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        list_files(dir)
            .unwrap()
            .into_iter()
            .map(|f| (f.clone(), std::fs::read(dir.join(&f)).unwrap()))
            .collect()
    }

    #[test]
    fn a_failed_append_leaves_no_fragment() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        w.append(&[fact("a", "first")]).unwrap();
        let before = snapshot(dir.path());
        for inject in [
            Inject::WriteFailsAfter(17),
            Inject::WriteFailsAfter(0),
            Inject::FsyncFails,
            Inject::Corrupt,
        ] {
            w.inject = Some(inject);
            let err = w
                .append(&[fact("b", "refused"), fact("c", "refused too")])
                .unwrap_err();
            if !matches!(inject, Inject::Corrupt) {
                assert_eq!(err.code(), crate::error::ErrorCode::StorageFull, "{err}");
            }
            // Truncated back to exactly what was there.
            assert_eq!(snapshot(dir.path()), before, "{inject:?}");
        }
        // The next write is whole and readable: nothing glued to a fragment.
        w.append(&[fact("d", "after")]).unwrap();
        let (ids, issues, torn) = scan_all(dir.path());
        assert_eq!(ids, ["a", "d"]);
        assert!(issues.is_empty() && torn.is_none(), "{issues:?}");
    }

    #[test]
    fn a_failed_group_rolls_back_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path(), DEV).unwrap();
        let mut other_month = fact("b", "other month");
        if let Record::Put { fact, .. } = &mut other_month {
            fact.ts = DateTime::from_timestamp(1_790_000_000, 0).unwrap();
        }
        w.append(&[fact("a", "x"), other_month.clone()]).unwrap();
        let before = snapshot(dir.path());
        assert_eq!(before.len(), 2);
        // The first file of the group is written, the second fails midway:
        // the first is truncated back too, so nothing of the group is stored.
        w.inject_skip = 1;
        w.inject = Some(Inject::WriteFailsAfter(5));
        w.append(&[fact("c", "y"), other_month]).unwrap_err();
        assert_eq!(snapshot(dir.path()), before);
        assert!(w.inject.is_none(), "the injection was reached");
    }

    #[test]
    fn foreign_and_legacy_files_are_read_not_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let facts = dir.path();
        // A legacy flat file and another device's file, each with a half line
        // that a sync tool is still writing.
        let line = |id: &str| {
            let mut l = serde_json::to_vec(&fact(id, "from elsewhere")).unwrap();
            l.push(b'\n');
            l
        };
        let month = file_name_for(DateTime::from_timestamp(1_780_000_000, 0).unwrap());
        std::fs::create_dir_all(facts.join("other")).unwrap();
        let legacy = facts.join(&month);
        let foreign = facts.join("other").join(&month);
        let whole = line("legacy1");
        let half = line("legacy2");
        std::fs::write(&legacy, [whole.as_slice(), &half[..10]].concat()).unwrap();
        std::fs::write(&foreign, &line("foreign1")[..20]).unwrap();
        // Not-regular files with journal names are skipped.
        std::fs::create_dir_all(facts.join("2026-10.jsonl")).unwrap();
        std::fs::create_dir_all(facts.join("other/2026-09.jsonl")).unwrap();
        let (mut w, repaired) = JournalWriter::open(facts, DEV).unwrap();
        assert!(repaired.is_empty());
        w.append(&[fact("mine", "ours")]).unwrap();
        let names = list_files(facts).unwrap();
        assert_eq!(
            names,
            [
                month.clone(),
                format!("{DEV}/{month}"),
                format!("other/{month}")
            ]
        );
        let (ids, _, _) = scan_all(facts);
        assert_eq!(ids, ["legacy1", "mine"]);
        // Untouched by the writer.
        assert_eq!(std::fs::read(&foreign).unwrap().len(), 20);
        // The sync tool finishes both lines: both are read, once.
        let mut f = OpenOptions::new().append(true).open(&legacy).unwrap();
        f.write_all(&half[10..]).unwrap();
        let mut f = OpenOptions::new().append(true).open(&foreign).unwrap();
        f.write_all(&line("foreign1")[20..]).unwrap();
        let (ids, issues, torn) = scan_all(facts);
        assert_eq!(ids, ["legacy1", "legacy2", "mine", "foreign1"]);
        assert!(issues.is_empty() && torn.is_none());
    }

    #[test]
    fn journal_names() {
        assert!(is_journal_name("2026-11.jsonl"));
        assert!(is_journal_path("2026-11.jsonl"));
        assert!(is_journal_path("laptop/2026-11.jsonl"));
        assert!(!is_journal_path("archive/2026-11.jsonl"));
        assert!(!is_journal_path("a/b/2026-11.jsonl"));
        assert_eq!(month_of("laptop/2026-11.jsonl"), "2026-11.jsonl");
        assert_eq!(device_of("2026-11.jsonl"), None);
        for bad in [
            "2026-1.jsonl",
            "2026-11.json",
            "notes.jsonl",
            "2026_11.jsonl",
        ] {
            assert!(!is_journal_name(bad), "{bad}");
        }
    }
}
