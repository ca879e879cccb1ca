//! `memd import --from memory-hub PATH`: moves an existing Node memory-hub
//! root into this one, keeping what its memories are.
//!
//! The Node root keeps facts as JSON lines under `memories/facts/**/*.jsonl`
//! and documents as Markdown anywhere else under `memories/`. Each fact line
//! becomes one of our journal records:
//!
//! - `{"id", "deleted": true, "ts"?}` — a tombstone: a `forget` of that id;
//! - any other line — a `put` with the same `id`, `text`, `kind`, `stage`,
//!   `privacy` (`work`/`financial` → sensitive), `subject`, `source`,
//!   `title`, `tags`, `importance`, `supersedes`, `expires_at`,
//!   `source_message_id`, `idempotency_key`; its `audience` (or `scene`)
//!   becomes the scene; `ts` (or `time`, `created_at`; RFC 3339, a date or
//!   epoch milliseconds) the time.
//!
//! The Node hub rewrote a memory by appending a line with the same id (short
//! → long); the last line of an id wins, as the Node reindex did. Puts are
//! imported before tombstones, so a tombstone always finds its memory. A line
//! that is not JSON, lacks an `id` or `text`, or breaks our write rules is
//! skipped and reported as `FILE:LINE: reason`; the rest goes in. Ids already
//! present are skipped, so importing twice changes nothing.
//!
//! Markdown documents are copied to the same path under our `memories/`
//! (never overwriting a different file), so a document keeps its path and
//! therefore its `doc-<pathHash8>` id, and then indexed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::error::{Error, IoContext, Result};
use crate::hub::Hub;
use crate::model::{Fact, JOURNAL_VERSION, Record, Scene, parse_kind, parse_tags};
use crate::store::files::{self, Added};
use crate::store::markdown;
use crate::transfer::ImportReport;

/// One line of a Node `facts/*.jsonl` file.
#[derive(Debug, Deserialize)]
struct NodeLine {
    id: String,
    #[serde(default)]
    deleted: bool,
    #[serde(default, alias = "time", alias = "created_at")]
    ts: Option<serde_json::Value>,
    #[serde(default)]
    audience: Option<String>,
    #[serde(default)]
    scene: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    privacy: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    importance: Option<f32>,
    #[serde(default)]
    supersedes: Option<String>,
    #[serde(default)]
    expires_at: Option<serde_json::Value>,
    #[serde(default)]
    source_message_id: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// A time as the Node hub wrote it: RFC 3339, `YYYY-MM-DD`, or epoch milliseconds.
fn node_time(v: &serde_json::Value) -> Result<DateTime<Utc>> {
    match v {
        serde_json::Value::String(s) => crate::transfer::parse_time(s)
            .ok_or_else(|| Error::invalid(format!("cannot read the time {s:?}"))),
        serde_json::Value::Number(n) => n
            .as_i64()
            .and_then(DateTime::from_timestamp_millis)
            .ok_or_else(|| Error::invalid(format!("cannot read the time {n}"))),
        other => Err(Error::invalid(format!("cannot read the time {other}"))),
    }
}

fn record(line: NodeLine) -> Result<Record> {
    let ts = match &line.ts {
        Some(v) => node_time(v)?,
        None => Utc::now(),
    };
    if line.deleted {
        return Ok(Record::Forget {
            v: JOURNAL_VERSION,
            id: line.id,
            ts,
            reason: line.reason,
            source: "import".into(),
        });
    }
    let text = line
        .text
        .ok_or_else(|| Error::invalid("a memory line without `text`"))?;
    let scene = match (&line.audience, &line.scene) {
        (Some(a), Some(s)) if a != s => {
            return Err(Error::invalid(format!(
                "`audience: {a}` and `scene: {s}` disagree"
            )));
        }
        (Some(a), _) | (None, Some(a)) => Scene::parse(a)?,
        (None, None) => Scene::parse("main")?,
    };
    let fact = Fact {
        id: line.id,
        ts,
        scene,
        kind: parse_kind(line.kind.as_deref().unwrap_or("note"))?,
        stage: line.stage.as_deref().unwrap_or("long").parse()?,
        text,
        title: line.title,
        tags: parse_tags(&line.tags)?,
        privacy: line.privacy.as_deref().unwrap_or("normal").parse()?,
        subject: line.subject.as_deref().unwrap_or("owner").parse()?,
        source: line.source.unwrap_or_else(|| "import".into()),
        importance: line.importance.unwrap_or(0.5),
        tier: None,
        supersedes: line.supersedes,
        expires_at: line.expires_at.as_ref().map(node_time).transpose()?,
        source_message_id: line.source_message_id,
        idempotency_key: line.idempotency_key,
        device: String::new(),
        accesses: 0,
        run: None,
        setting: Default::default(),
    };
    Ok(Record::Put {
        v: JOURNAL_VERSION,
        fact,
        at: None,
    })
}

/// Every `*.jsonl` below `dir`, sorted (links are not followed).
fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ctx("cannot read", dir)?
        .collect::<std::io::Result<Vec<_>>>()
        .ctx("cannot read", dir)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let kind = e.file_type().ctx("cannot read", &e.path())?;
        if kind.is_dir() {
            jsonl_files(&e.path(), out)?;
        } else if kind.is_file() && e.file_name().to_string_lossy().ends_with(".jsonl") {
            out.push(e.path());
        }
    }
    Ok(())
}

/// Imports the Node memory-hub root at `path` (the root or its `memories/`).
pub fn import_memory_hub(hub: &Hub, path: &Path) -> Result<ImportReport> {
    let memories = if path.join("memories").is_dir() {
        path.join("memories")
    } else if path.join("facts").is_dir() {
        path.to_path_buf()
    } else {
        return Err(Error::invalid(format!(
            "{}: not a memory-hub root (no memories/ or facts/ in it)",
            path.display()
        )));
    };
    let mut report = ImportReport::default();
    let mut files = Vec::new();
    if memories.join("facts").is_dir() {
        jsonl_files(&memories.join("facts"), &mut files)?;
    }
    // The last put of an id wins; its place is where the id first appeared.
    let mut puts: Vec<(String, Record)> = Vec::new();
    let mut put_at: HashMap<String, usize> = HashMap::new();
    let mut forgets: Vec<(String, Record)> = Vec::new();
    for file in &files {
        let name = file.display().to_string();
        for (i, line) in crate::transfer::read_lines(file)?.into_iter().enumerate() {
            let at = format!("{name}:{}", i + 1);
            let line = match line {
                Ok(l) if l.trim().is_empty() => continue,
                Ok(l) => l,
                Err(e) => {
                    report.fail(&at, e);
                    continue;
                }
            };
            match serde_json::from_str::<NodeLine>(line.trim())
                .map_err(|e| Error::invalid(e.to_string()))
                .and_then(record)
            {
                Ok(r @ Record::Put { .. }) => {
                    let id = r.id().to_string();
                    match put_at.get(&id) {
                        Some(&k) => puts[k] = (at, r),
                        None => {
                            put_at.insert(id, puts.len());
                            puts.push((at, r));
                        }
                    }
                }
                Ok(r) => forgets.push((at, r)),
                Err(e) => report.fail(&at, e),
            }
        }
    }
    for group in [puts, forgets] {
        for chunk in group.chunks(1000) {
            let results = hub.import_records(chunk.iter().map(|(_, r)| r.clone()).collect())?;
            for ((at, _), result) in chunk.iter().zip(results) {
                match result {
                    Ok(true) => report.added += 1,
                    Ok(false) => report.skipped += 1,
                    Err(e) => report.fail(at, e),
                }
            }
        }
    }
    copy_documents(hub, &memories, &mut report)?;
    Ok(report)
}

/// Copies every Markdown document to the same path under our `memories/`.
fn copy_documents(hub: &Hub, from: &Path, report: &mut ImportReport) -> Result<()> {
    let listing = markdown::scan(from)?;
    for rel in &listing.links {
        report.fail(from.join(rel).display(), markdown::SYMLINK_ISSUE);
    }
    let ours = hub.layout().memories();
    for rel in &listing.documents {
        let src = from.join(rel);
        let bytes = match markdown::read_bounded(&src) {
            Ok((b, _)) => b,
            Err(e) => {
                report.fail(src.display(), e);
                continue;
            }
        };
        match files::add_document(&ours, rel, &bytes)? {
            Added::Created => report.added += 1,
            Added::Identical => report.skipped += 1,
            Added::Different => report.fail(
                src.display(),
                format!(
                    "{} exists with other content; not overwritten",
                    ours.join(rel).display()
                ),
            ),
        }
    }
    hub.sync_documents()?;
    Ok(())
}
