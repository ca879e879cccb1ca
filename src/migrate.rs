//! `memd import --from memory-hub PATH`: moves an existing Node memory-hub
//! root into this one, keeping what its memories are.
//!
//! The Node root keeps facts as JSON lines under `memories/facts/**/*.jsonl`,
//! old months compressed as `memories/facts/archive/*.jsonl.gz`, and
//! documents as Markdown anywhere else under `memories/`. Each fact line
//! becomes one of our journal records:
//!
//! - `{"id", "deleted": true, "ts"?}` — a tombstone: a `forget` of that id;
//! - any other line — a `put` with the same `id`, `text`, `kind`, `stage`,
//!   `privacy` (`work`/`financial` → sensitive), `subject`, `source`,
//!   `title`, `tags`, `importance`, `supersedes`, `expires_at`,
//!   `source_message_id`, `idempotency_key`, `session`, `speaker`; its
//!   `audience` (or `scene`) becomes the scene; `ts` (or `created_at`;
//!   RFC 3339, a date or epoch milliseconds) when it was written; `time`
//!   when it happened (kept as given and parsed, as a write keeps it; also
//!   when it was written if the line has no `ts`). A long-term memory gets
//!   its retention tier as a write would assign it (its own `tier` if it
//!   has one), and an expiry only where a write would get one (opt-in tier
//!   expiry).
//!
//! Compressed months are read like plain ones, in month order (a month's
//! archive before its plain file), so the last line of an id still wins.
//! The Node hub rewrote a memory by appending a line with the same id (short
//! → long); the last line of an id wins, as the Node reindex did. Puts are
//! imported before tombstones, so a tombstone always finds its memory. A line
//! that is not JSON, lacks an `id` or `text`, or breaks our write rules is
//! skipped and reported as `FILE:LINE: reason`; the rest goes in. Ids already
//! present are skipped, so importing twice changes nothing.
//!
//! Markdown documents are copied to the same path under our `memories/`
//! (never overwriting a different file), keeping their modification time
//! (the date search and the timeline show), so a document keeps its path and
//! therefore its `doc-<pathHash8>` id, and then indexed.
//!
//! Nothing is left behind without a word: every file the migration does not
//! take (anything under `memories/` that is neither a document nor a fact
//! journal; dot files, the metadata of sync tools and editors, aside) and
//! every copied document the index refuses is counted as refused and listed
//! with why. A document with a front-matter key memd does not know
//! (`status: done`) is such a refusal: it is copied byte for byte but not
//! indexed, because an unknown key may be another tool's access rule
//! (`private: true`, `visibility: owner`) and indexing the document under
//! defaults could show it to an audience its author meant to exclude — the
//! rule every document under `memories/` follows. The report names the key;
//! once it is removed or renamed, the copy is indexed.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::content::{self, TierInput};
use crate::error::{Error, IoContext, Result};
use crate::hub::Hub;
use crate::model::{Fact, JOURNAL_VERSION, Record, Scene, Setting, Stage, parse_kind, parse_tags};
use crate::store::files::{self, Added};
use crate::store::markdown;
use crate::transfer::ImportReport;

/// Largest compressed month read, decompressed, in bytes: a personal
/// memory month is a few megabytes, and a file that inflates further is no
/// journal to hold in memory.
const MAX_ARCHIVE_BYTES: u64 = 512 * 1024 * 1024;

/// One line of a Node `facts/*.jsonl` file.
#[derive(Debug, Deserialize)]
struct NodeLine {
    id: String,
    #[serde(default)]
    deleted: bool,
    #[serde(default, alias = "created_at")]
    ts: Option<serde_json::Value>,
    #[serde(default)]
    time: Option<serde_json::Value>,
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
    #[serde(default)]
    tier: Option<String>,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    speaker: Option<String>,
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

/// `time` as given, for the memory's `time` (epoch milliseconds as RFC 3339).
fn node_time_text(v: &serde_json::Value) -> Result<String> {
    match v {
        serde_json::Value::String(s) => Ok(s.clone()),
        other => node_time(other).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
    }
}

/// How records are made: the hub they go into and its clock.
struct Import<'a> {
    hub: &'a Hub,
    now: DateTime<Utc>,
}

impl Import<'_> {
    fn record(&self, line: NodeLine) -> Result<Record> {
        let written = line.ts.as_ref().or(line.time.as_ref());
        let ts = match written {
            Some(v) => node_time(v)?,
            None => self.now,
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
        let time = line.time.as_ref().map(node_time_text).transpose()?;
        let kind = parse_kind(line.kind.as_deref().unwrap_or("note"))?;
        let stage: Stage = line.stage.as_deref().unwrap_or("long").parse()?;
        let tags = parse_tags(&line.tags)?;
        let source = line.source.unwrap_or_else(|| "import".into());
        // The tier a write would give it (its own, if it names one).
        let explicit = line.tier.as_deref().map(str::parse).transpose()?;
        let tier = (stage == Stage::Long).then(|| {
            content::assign_tier(TierInput {
                explicit,
                category: false,
                source: &source,
                kind: &kind,
                text: &content::normalize_content(&text),
                tags: &tags,
            })
        });
        let expires_at = match (&line.expires_at, tier) {
            (Some(v), _) => Some(node_time(v)?),
            (None, Some(t)) => self.hub.config().lifecycle.expiry(t, self.now),
            (None, None) => None,
        };
        let fact = Fact {
            id: line.id,
            ts,
            scene,
            kind,
            stage,
            text,
            title: line.title,
            tags,
            privacy: line.privacy.as_deref().unwrap_or("normal").parse()?,
            subject: line.subject.as_deref().unwrap_or("owner").parse()?,
            source,
            importance: line.importance.unwrap_or(0.5),
            tier,
            supersedes: line.supersedes,
            expires_at,
            source_message_id: line.source_message_id,
            idempotency_key: line.idempotency_key,
            device: String::new(),
            accesses: 0,
            run: None,
            setting: Setting::from_input(
                time.as_deref(),
                line.session.as_deref(),
                line.speaker.as_deref(),
            ),
        };
        Ok(Record::Put {
            v: JOURNAL_VERSION,
            fact,
            at: None,
        })
    }
}

/// What is under the Node `facts/` directory.
#[derive(Debug, Default)]
struct FactFiles {
    /// Journals, plain (`*.jsonl`) and compressed (`*.jsonl.gz`), in reading order.
    journals: Vec<PathBuf>,
    /// Everything else (dot files aside), with why it is not read.
    others: Vec<(PathBuf, &'static str)>,
}

/// What is said of a file under `facts/` that is no journal.
const NOT_A_JOURNAL: &str = "not a fact journal (*.jsonl or *.jsonl.gz); not imported";
/// What is said of a file under `memories/` that is neither a document nor a journal.
const NOT_A_DOCUMENT: &str =
    "neither a Markdown document nor a fact journal; not imported (memd keeps only those)";

fn is_archive(path: &Path) -> bool {
    path.to_string_lossy().ends_with(".jsonl.gz")
}

/// A journal's place in reading order: its month (the name without
/// `.jsonl` or `.jsonl.gz`), a month's archive before its plain file.
fn reading_order(path: &Path) -> (String, bool, PathBuf) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let month = name
        .trim_end_matches(".gz")
        .trim_end_matches(".jsonl")
        .to_string();
    (month, !is_archive(path), path.to_path_buf())
}

/// Every journal below `dir`, and every other file (links are not followed).
fn fact_files(dir: &Path, out: &mut FactFiles) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ctx("cannot read", dir)?
        .collect::<std::io::Result<Vec<_>>>()
        .ctx("cannot read", dir)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let kind = e.file_type().ctx("cannot read", &e.path())?;
        if kind.is_dir() {
            fact_files(&e.path(), out)?;
        } else if kind.is_symlink() {
            out.others.push((e.path(), markdown::SYMLINK_ISSUE));
        } else if kind.is_file() && (name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")) {
            out.journals.push(e.path());
        } else {
            out.others.push((e.path(), NOT_A_JOURNAL));
        }
    }
    Ok(())
}

/// Files below `memories/` outside `facts/` that are not documents (dot
/// files aside; links are reported by the document scan).
fn loose_files(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ctx("cannot read", dir)?
        .collect::<std::io::Result<Vec<_>>>()
        .ctx("cannot read", dir)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || (dir == base && name == "facts") {
            continue;
        }
        let kind = e.file_type().ctx("cannot read", &e.path())?;
        if kind.is_dir() {
            loose_files(base, &e.path(), out)?;
        } else if kind.is_file() && !name.ends_with(".md") {
            out.push(e.path());
        }
    }
    Ok(())
}

/// The lines of a journal, plain or compressed; a compressed one that
/// cannot be read whole is refused with why.
fn journal_lines(path: &Path) -> Result<Vec<std::result::Result<String, String>>> {
    if !is_archive(path) {
        return crate::transfer::read_lines(path);
    }
    let file = std::fs::File::open(path).ctx("cannot open", path)?;
    let mut bytes = Vec::new();
    flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file))
        .take(MAX_ARCHIVE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::invalid(format!("cannot decompress ({e}); no line of it imported")))?;
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(Error::invalid(format!(
            "decompresses to more than {} MiB; not imported",
            MAX_ARCHIVE_BYTES >> 20
        )));
    }
    Ok(crate::transfer::split_lines(&bytes))
}

/// The `memories/` directory of a Node root given as the root or as its `memories/`.
fn memories_of(path: &Path) -> Result<PathBuf> {
    if path.join("memories").is_dir() {
        Ok(path.join("memories"))
    } else if path.join("facts").is_dir() {
        Ok(path.to_path_buf())
    } else {
        Err(Error::invalid(format!(
            "{}: not a memory-hub root (no memories/ or facts/ in it)",
            path.display()
        )))
    }
}

/// Imports the Node memory-hub root at `path` (the root or its `memories/`).
pub fn import_memory_hub(hub: &Hub, path: &Path) -> Result<ImportReport> {
    let memories = memories_of(path)?;
    let mut report = ImportReport::default();
    let mut files = FactFiles::default();
    if memories.join("facts").is_dir() {
        fact_files(&memories.join("facts"), &mut files)?;
    }
    files.journals.sort_by_key(|p| reading_order(p));
    for (file, why) in &files.others {
        report.fail(file.display(), why);
    }
    let (puts, forgets) = read_journals(hub, &files.journals, &mut report)?;
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
    let mut loose = Vec::new();
    loose_files(&memories, &memories, &mut loose)?;
    for file in loose {
        report.fail(file.display(), NOT_A_DOCUMENT);
    }
    copy_documents(hub, &memories, &mut report)?;
    Ok(report)
}

/// Records read from a journal, each with where it was read (`FILE:LINE`).
type Located = Vec<(String, Record)>;

/// Reads every journal in order: the puts (the last of an id wins, in the
/// place where the id first appeared) and the tombstones.
fn read_journals(
    hub: &Hub,
    journals: &[PathBuf],
    report: &mut ImportReport,
) -> Result<(Located, Located)> {
    let import = Import {
        hub,
        now: hub.now(),
    };
    let mut puts: Located = Vec::new();
    let mut put_at: HashMap<String, usize> = HashMap::new();
    let mut forgets: Located = Vec::new();
    for file in journals {
        let name = file.display().to_string();
        let lines = match journal_lines(file) {
            Ok(lines) => lines,
            Err(e @ Error::Invalid(_)) => {
                report.fail(&name, e);
                continue;
            }
            Err(e) => return Err(e),
        };
        for (i, line) in lines.into_iter().enumerate() {
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
                .and_then(|l| import.record(l))
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
    Ok((puts, forgets))
}

/// Copies every Markdown document to the same path under our `memories/`,
/// with its modification time, indexes them, and reports each one the
/// index refused (see the module docs).
fn copy_documents(hub: &Hub, from: &Path, report: &mut ImportReport) -> Result<()> {
    let listing = markdown::scan(from)?;
    for rel in &listing.links {
        report.fail(from.join(rel).display(), markdown::SYMLINK_ISSUE);
    }
    let ours = hub.layout().memories();
    let mut copied: Vec<(&String, PathBuf, Added)> = Vec::new();
    for rel in &listing.documents {
        let src = from.join(rel);
        let (bytes, modified) = match markdown::read_bounded(&src) {
            Ok(read) => read,
            Err(e) => {
                report.fail(src.display(), e);
                continue;
            }
        };
        let config = hub.config();
        // A document that holds a credential is not copied in (see `transfer`).
        if let Some(hit) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| markdown::credential_in(rel, text, &config.docs, &config.privacy))
        {
            report.fail(src.display(), format!("not copied: {}", hit.refusal()));
            continue;
        }
        match files::add_document(&ours, rel, &bytes, Some(modified))? {
            Added::Different => report.fail(
                src.display(),
                format!(
                    "{} exists with other content; not overwritten",
                    ours.join(rel).display()
                ),
            ),
            added => copied.push((rel, src, added)),
        }
    }
    hub.sync_documents()?;
    let refused = hub.document_issues()?;
    for (rel, src, added) in copied {
        match (refused.get(rel.as_str()), added) {
            (Some(why), _) => report.fail(src.display(), not_indexed(rel, why)),
            (None, Added::Created) => report.added += 1,
            (None, _) => report.skipped += 1,
        }
    }
    Ok(())
}

/// Why the copy `memories/<rel>` is not indexed, and what makes it so.
fn not_indexed(rel: &str, why: &str) -> String {
    let hint = if why.contains("unknown field") {
        "; memd indexes a document only when it knows every front-matter key (an unknown one may \
         be another tool's access rule): remove or rename the key there and it is indexed"
    } else {
        "; fix it there and it is indexed"
    };
    format!("copied to memories/{rel} but not indexed: {why}{hint}")
}
