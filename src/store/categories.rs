//! Category documents: always-injected policy slots (BHGBrain's categories)
//! stored as T0 Markdown documents `memories/categories/<slot>.md`.
//!
//! Setting a slot first copies the current file to
//! `memories/categories/.revisions/<slot>-<UTC time>.md` and appends a line
//! (`ts`, `source`, `file`) to `.revisions/<slot>.jsonl`, then replaces the
//! document atomically. The dot directory is not indexed, so only the
//! current text is searchable; every earlier version stays on disk.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::error::{Error, IoContext, Result};
use crate::store::atomic::write_atomic;

/// The slots a category may fill.
pub const SLOTS: &[&str] = &[
    "company-values",
    "architecture",
    "coding-requirements",
    "custom",
];

/// Checks a slot name.
pub fn check_slot(slot: &str) -> Result<()> {
    if SLOTS.contains(&slot) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "category slot must be one of {}; got {slot:?}",
            SLOTS.join(", ")
        )))
    }
}

/// `memories/categories`.
pub fn dir(memories: &Path) -> PathBuf {
    memories.join("categories")
}

/// The document path of a slot, relative to `memories/`.
pub fn rel_path(slot: &str) -> String {
    format!("categories/{slot}.md")
}

/// The current text of a slot (the body after the front matter), if set.
pub fn read(memories: &Path, slot: &str) -> Result<Option<(String, Option<DateTime<Utc>>)>> {
    let path = memories.join(rel_path(slot));
    let raw = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("cannot read", &path),
    };
    let (front, body) = split_front_matter(&raw);
    let updated = front.lines().find_map(|l| {
        l.strip_prefix("updated:")
            .and_then(|v| DateTime::parse_from_rfc3339(v.trim().trim_matches('"')).ok())
            .map(|t| t.with_timezone(&Utc))
    });
    Ok(Some((body.trim().to_string(), updated)))
}

fn split_front_matter(raw: &str) -> (&str, &str) {
    if let Some(rest) = raw.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---\n")
    {
        return (&rest[..end], &rest[end + 5..]);
    }
    ("", raw)
}

/// Earlier versions of a slot, oldest first (paths relative to `memories/`).
pub fn revisions(memories: &Path, slot: &str) -> Result<Vec<String>> {
    let dir = dir(memories).join(".revisions");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("cannot list", &dir),
    };
    let prefix = format!("{slot}-");
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".md"))
        .map(|n| format!("categories/.revisions/{n}"))
        .collect();
    out.sort();
    Ok(out)
}

/// Writes a slot's new text, keeping the previous version as a revision.
pub fn write(
    memories: &Path,
    slot: &str,
    text: &str,
    source: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    check_slot(slot)?;
    let dir = dir(memories);
    let revisions = dir.join(".revisions");
    std::fs::create_dir_all(&revisions).ctx("cannot create", &revisions)?;
    let path = memories.join(rel_path(slot));
    if let Ok(old) = std::fs::read(&path) {
        let name = format!("{slot}-{}.md", now.format("%Y%m%dT%H%M%S%3fZ"));
        write_atomic(&revisions.join(&name), &old)?;
        let log = revisions.join(format!("{slot}.jsonl"));
        let line = serde_json::json!({"ts": now, "source": source, "file": name});
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .ctx("cannot open", &log)?;
        writeln!(f, "{line}").ctx("cannot append", &log)?;
        f.sync_all().ctx("cannot sync", &log)?;
    }
    let doc = format!(
        "---\ntitle: \"Category: {slot}\"\nkind: category\ntier: t0\nscene: shared\nimportance: 1\ntags: [category, {slot}]\nupdated: \"{}\"\n---\n{}\n",
        now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        text.trim()
    );
    write_atomic(&path, doc.as_bytes())
}
