//! The fact journal: `memories/facts/YYYY-MM.jsonl`, append-only JSON lines.
//!
//! Owns appending (one line per record, `fsync` before anything is
//! acknowledged, group commit for a batch) and scanning (from a byte offset,
//! reporting torn or corrupt lines with `file:line` instead of failing).
//! A line goes into the file of the month of its timestamp (UTC).
//!
//! Crash safety: a crash mid-write can leave a last line without its newline.
//! When the writer opens a file it terminates such a torn tail with `\n`, so
//! the fragment becomes one reported corrupt line and later appends stay
//! intact. Nothing is ever rewritten in place.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Datelike, Utc};

use crate::error::{IoContext, Result};
use crate::model::{JOURNAL_VERSION, Record};

/// The journal file name for a timestamp: `YYYY-MM.jsonl`.
pub fn file_name_for(ts: DateTime<Utc>) -> String {
    format!("{:04}-{:02}.jsonl", ts.year(), ts.month())
}

/// Whether `name` looks like a journal month file.
pub fn is_journal_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".jsonl") else {
        return false;
    };
    let b = stem.as_bytes();
    b.len() == 7
        && b[4] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || c.is_ascii_digit())
}

/// Journal month files in `dir`, oldest first.
pub fn list_files(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(e).ctx("cannot list journal directory", dir),
    };
    for entry in entries {
        let entry = entry.ctx("cannot list journal directory", dir)?;
        if let Some(name) = entry.file_name().to_str()
            && is_journal_name(name)
        {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Every month with lines, oldest first, as month file names
/// (`YYYY-MM.jsonl`): plain files and archived months alike. Scan them with
/// [`scan_file`], which reads a month's archive and then its plain file as
/// one stream (see [`crate::store::archive`]).
pub fn list_all(dir: &Path) -> Result<Vec<String>> {
    let mut names = list_files(dir)?;
    names.extend(crate::store::archive::archived_months(dir)?);
    names.sort();
    names.dedup();
    Ok(names)
}

/// Bytes of a month's logical stream: its archive (decompressed) plus its plain file.
pub fn content_len(dir: &Path, file: &str) -> Result<u64> {
    let archived = crate::store::archive::len(dir, file)?;
    let path = dir.join(file);
    let plain = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).ctx("cannot stat journal", &path),
    };
    Ok(archived + plain)
}

/// How far a file has been read: the byte offset after the last complete line
/// and the number of lines before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    /// Byte offset just after the last consumed newline.
    pub offset: u64,
    /// Lines consumed so far (the next line is `lines + 1`).
    pub lines: u64,
}

/// A line that could not be used, with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIssue {
    /// Journal file name.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for LineIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// One item of a scan: a record or an issue, with the cursor after it.
#[derive(Debug)]
pub struct ScanItem {
    /// The parsed record, or what was wrong with the line.
    pub entry: std::result::Result<Record, LineIssue>,
    /// Position after this line.
    pub cursor: Cursor,
}

/// Parses one journal line.
pub fn parse_line(line: &str) -> std::result::Result<Record, String> {
    let record: Record = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let v = record.version();
    if v == 0 || v > JOURNAL_VERSION {
        return Err(format!(
            "format version {v} is not supported by this build (max {JOURNAL_VERSION})"
        ));
    }
    Ok(record)
}

/// Reads the complete lines of `file` after `from`, calling `visit` for each.
///
/// A trailing line without a newline is not consumed: it is returned as the
/// torn tail (line number and length) so the caller can report it.
pub fn scan_file(
    dir: &Path,
    file: &str,
    from: Cursor,
    mut visit: impl FnMut(ScanItem) -> Result<()>,
) -> Result<Option<LineIssue>> {
    let path = dir.join(file);
    // An archived month is read from its archive first, then from the plain
    // file appended since; offsets count bytes of both together.
    let archived = crate::store::archive::read(dir, file)?;
    let head_len = archived.len() as u64;
    let tail: Box<dyn Read> = match File::open(&path) {
        Ok(mut f) => {
            f.seek(SeekFrom::Start(from.offset.saturating_sub(head_len)))
                .ctx("cannot seek journal", &path)?;
            Box::new(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && head_len > 0 => {
            Box::new(std::io::empty())
        }
        Err(e) => return Err(e).ctx("cannot open journal", &path),
    };
    let skip = from.offset.min(head_len) as usize;
    let mut head = std::io::Cursor::new(archived);
    head.set_position(skip as u64);
    let mut reader = BufReader::with_capacity(1 << 16, head.chain(tail));
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
                message: format!("torn last line ({n} bytes without a newline), not applied"),
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

/// The single appender of the journal.
#[derive(Debug)]
pub struct JournalWriter {
    dir: PathBuf,
    open: BTreeMap<String, File>,
}

/// Where a batch of appended lines ended, per file.
pub type AppendEnds = BTreeMap<String, u64>;

impl JournalWriter {
    /// Opens the journal directory for appending and terminates torn tails.
    ///
    /// Returns the writer and the torn tails it repaired.
    pub fn open(dir: &Path) -> Result<(Self, Vec<LineIssue>)> {
        std::fs::create_dir_all(dir).ctx("cannot create journal directory", dir)?;
        crate::store::archive::recover(dir)?;
        let mut repaired = Vec::new();
        for name in list_files(dir)? {
            let path = dir.join(&name);
            let mut f = OpenOptions::new()
                .read(true)
                .append(true)
                .open(&path)
                .ctx("cannot open journal", &path)?;
            let len = f.metadata().ctx("cannot stat journal", &path)?.len();
            if len == 0 {
                continue;
            }
            let mut last = [0u8; 1];
            f.seek(SeekFrom::Start(len - 1))
                .ctx("cannot seek journal", &path)?;
            f.read_exact(&mut last).ctx("cannot read journal", &path)?;
            if last[0] != b'\n' {
                let lines = count_newlines(&path)?;
                f.write_all(b"\n").ctx("cannot repair journal", &path)?;
                f.sync_data().ctx("cannot fsync journal", &path)?;
                repaired.push(LineIssue {
                    file: name.clone(),
                    line: lines + 1,
                    message: "torn last line (crash mid-write); terminated and skipped".into(),
                });
            }
        }
        Ok((
            JournalWriter {
                dir: dir.to_path_buf(),
                open: BTreeMap::new(),
            },
            repaired,
        ))
    }

    /// Appends `records` as one group: every line is written, then each touched
    /// file is fsync'd once. Returns the end offset of each touched file.
    pub fn append(&mut self, records: &[Record]) -> Result<AppendEnds> {
        let mut by_file: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for r in records {
            let mut line = serde_json::to_vec(r)
                .map_err(|e| crate::error::Error::Internal(format!("serialise record: {e}")))?;
            line.push(b'\n');
            by_file
                .entry(file_name_for(r.ts()))
                .or_default()
                .extend(line);
        }
        let mut ends = AppendEnds::new();
        for (name, bytes) in by_file {
            let path = self.dir.join(&name);
            if !self.open.contains_key(&name) {
                let existed = path.exists();
                let f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .ctx("cannot open journal", &path)?;
                if !existed {
                    // The new directory entry must be durable too.
                    File::open(&self.dir)
                        .and_then(|d| d.sync_all())
                        .ctx("cannot fsync journal directory", &self.dir)?;
                }
                self.open.insert(name.clone(), f);
            }
            let f = self.open.get_mut(&name).expect("inserted above");
            f.write_all(&bytes).ctx("cannot append to journal", &path)?;
            f.sync_data().ctx("cannot fsync journal", &path)?;
            let end = f.metadata().ctx("cannot stat journal", &path)?.len();
            ends.insert(name, end);
        }
        Ok(ends)
    }
}

fn count_newlines(path: &Path) -> Result<u64> {
    let mut f = File::open(path).ctx("cannot open journal", path)?;
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

    fn fact(id: &str, text: &str) -> Record {
        Record::Put {
            v: 1,
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
            },
        }
    }

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
            .unwrap();
        }
        (ids, issues, torn)
    }

    #[test]
    fn append_then_scan() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, repaired) = JournalWriter::open(dir.path()).unwrap();
        assert!(repaired.is_empty());
        let ends = w.append(&[fact("a", "x"), fact("b", "y")]).unwrap();
        assert_eq!(ends.len(), 1);
        let (ids, issues, torn) = scan_all(dir.path());
        assert_eq!(ids, ["a", "b"]);
        assert!(issues.is_empty() && torn.is_none());
    }

    #[test]
    fn corrupt_and_torn_lines_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path()).unwrap();
        w.append(&[fact("a", "x")]).unwrap();
        let name = list_files(dir.path()).unwrap().remove(0);
        let path = dir.path().join(&name);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{not json}\n{\"op\":\"put\",\"v\":99}\n")
            .unwrap();
        drop(w);
        let (mut w, _) = JournalWriter::open(dir.path()).unwrap();
        w.append(&[fact("b", "y")]).unwrap();
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
        // Reopening terminates the torn tail, so later appends stay readable.
        let (mut w, repaired) = JournalWriter::open(dir.path()).unwrap();
        assert_eq!(repaired.len(), 1);
        assert_eq!(repaired[0].line, 5);
        w.append(&[fact("c", "z")]).unwrap();
        let (ids, issues, torn) = scan_all(dir.path());
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(issues.len(), 3);
        assert!(torn.is_none());
    }

    #[test]
    fn scan_resumes_from_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = JournalWriter::open(dir.path()).unwrap();
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

    #[test]
    fn journal_names() {
        assert!(is_journal_name("2026-11.jsonl"));
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
