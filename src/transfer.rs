//! Import and export, so nobody is locked in.
//!
//! Import reads our own journal lines (ids and times kept; an id already
//! present is skipped, so importing twice changes nothing), loose JSON lines
//! (`{"text": …, "scene"?, "kind"?, "tags"?, "privacy"?, "title"?, "time"?}`,
//! written as new facts), a directory or file of Markdown (copied under
//! `memories/import/`), or plain text (one memory per non-empty line).
//! Export writes the live facts as journal lines, or as Markdown files that
//! `memd import` reads back. A long-term fact imported without a tier gets
//! the tier a write would give it. Every bad line (not UTF-8, not JSON, breaking
//! the write rules of [`crate::model::Fact::validate`], or holding a
//! credential in any field, [`crate::content::in_record`]) is reported as
//! `FILE:LINE: reason` and skipped; the rest still goes in. A Markdown file
//! that holds a credential is reported and not copied.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::hub::{Hub, WriteAction, WriteRequest};
use crate::model::{Fact, Record, Scene, parse_kind, parse_tags};
use crate::store::markdown::FrontValue;
use crate::store::{files, journal, markdown};

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Decide from the path: directory or `.md` → markdown, `.jsonl`/`.json` → jsonl, else text.
    Auto,
    /// Our journal lines or loose JSON objects, one per line.
    Jsonl,
    /// Markdown documents.
    Markdown,
    /// One memory per non-empty line.
    Text,
}

/// Defaults for imported lines that do not say.
#[derive(Debug, Clone)]
pub struct ImportDefaults {
    /// Scene for lines without one.
    pub scene: Scene,
    /// Kind for lines without one.
    pub kind: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    /// Memories or records appended, or documents copied.
    pub added: u64,
    /// Already present (same id or idempotency key).
    pub(crate) skipped: u64,
    /// Lines or files refused.
    pub failed: u64,
    /// The refusals, as `FILE:LINE: reason` or `PATH: reason` (the first
    /// [`MAX_REPORTED_ERRORS`]; `failed` counts them all).
    pub errors: Vec<String>,
}

/// Refusals listed one by one in an [`ImportReport`].
pub const MAX_REPORTED_ERRORS: usize = 10_000;

impl ImportReport {
    pub(crate) fn fail(&mut self, at: impl std::fmt::Display, e: impl std::fmt::Display) {
        self.failed += 1;
        if self.errors.len() < MAX_REPORTED_ERRORS {
            self.errors.push(format!("{at}: {e}"));
        }
    }
}

/// The lines of a file, each decoded on its own: a line that is not UTF-8
/// is an `Err` for that line only, never for the file.
pub(crate) fn read_lines(path: &Path) -> Result<Vec<std::result::Result<String, String>>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ctx("cannot open", path)?
        .read_to_end(&mut bytes)
        .ctx("cannot read", path)?;
    Ok(split_lines(&bytes))
}

/// `bytes` cut into lines (`\n` or `\r\n`), each decoded on its own (see [`read_lines`]).
pub(crate) fn split_lines(bytes: &[u8]) -> Vec<std::result::Result<String, String>> {
    let mut lines: Vec<_> = bytes
        .split(|&b| b == b'\n')
        .map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            String::from_utf8(line.to_vec()).map_err(|e| {
                format!(
                    "not valid UTF-8 (byte {} of the line); line skipped",
                    e.utf8_error().valid_up_to() + 1
                )
            })
        })
        .collect();
    if matches!(lines.last(), Some(Ok(l)) if l.is_empty()) {
        lines.pop();
    }
    lines
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LooseLine {
    text: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    scene: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    privacy: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    importance: Option<f32>,
    #[serde(default, alias = "ts")]
    time: Option<String>,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    speaker: Option<String>,
}

/// Parses a free-form time: RFC 3339 or `YYYY-MM-DD`.
pub(crate) fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
}

fn loose_request(line: LooseLine, defaults: &ImportDefaults) -> Result<WriteRequest> {
    let scene = match &line.scene {
        Some(s) => Scene::parse(s)?,
        None => defaults.scene.clone(),
    };
    let mut req = WriteRequest::new(scene, line.text, "import");
    req.origin = "import".into();
    req.kind = parse_kind(line.kind.as_deref().unwrap_or(&defaults.kind))?;
    req.tags = parse_tags(&line.tags)?;
    if let Some(p) = &line.privacy {
        req.privacy = p.parse()?;
    }
    if let Some(s) = &line.subject {
        req.subject = s.parse()?;
    }
    if let Some(i) = line.importance {
        req.importance = i;
    }
    req.title = line.title;
    // The event time is kept as given (and parsed, free text too); the
    // memory also counts as written then, as before.
    req.setting = crate::model::Setting::from_input(
        line.time.as_deref(),
        line.session.as_deref(),
        line.speaker.as_deref(),
    );
    req.ts = req
        .setting
        .time_at
        .or_else(|| line.time.as_deref().and_then(parse_time));
    // A source id makes re-importing the same file a no-op.
    req.idempotency_key = line.id.map(|id| format!("import:{id}"));
    Ok(req)
}

/// Lines refused, by line number, with why.
type Refusals = Vec<(usize, String)>;

enum Item {
    Record(Record),
    Write(WriteRequest),
}

/// Imports `path` into the hub. `progress` receives (lines done, lines total).
pub fn import(
    hub: &Hub,
    path: &Path,
    format: Format,
    defaults: &ImportDefaults,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ImportReport> {
    let meta = std::fs::symlink_metadata(path).ctx("cannot open", path)?;
    if meta.file_type().is_symlink() {
        return Err(Error::invalid(format!(
            "{}: is a symbolic link; memd import does not follow links (give the path it points to)",
            path.display()
        )));
    }
    let format = match format {
        Format::Auto if meta.is_dir() => Format::Markdown,
        Format::Auto => match path.extension().and_then(|e| e.to_str()) {
            Some("md") => Format::Markdown,
            Some("jsonl" | "json") => Format::Jsonl,
            _ => Format::Text,
        },
        f => f,
    };
    if format == Format::Markdown {
        return import_markdown(hub, path);
    }
    let lines = read_lines(path)?;
    let total = lines.len() as u64;
    // Refusals by line number, reported in file order at the end.
    let (items, mut refused) = parse_lines(&lines, format, defaults);
    let mut report = ImportReport::default();
    for chunk in items.chunks(1000) {
        apply_chunk(hub, chunk, &mut report, &mut refused)?;
        progress(chunk.last().map_or(0, |(n, _)| *n as u64), total);
    }
    refused.sort_by_key(|(n, _)| *n);
    let name = path.display();
    for (n, e) in refused {
        report.fail(format!("{name}:{n}"), e);
    }
    progress(total, total);
    Ok(report)
}

/// Reads each non-empty line as `format` (text, journal line or loose JSON):
/// the items by line number, and the lines refused with why.
fn parse_lines(
    lines: &[std::result::Result<String, String>],
    format: Format,
    defaults: &ImportDefaults,
) -> (Vec<(usize, Item)>, Refusals) {
    let mut items = Vec::new();
    let mut refused = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let line = match line {
            Ok(line) => line.trim(),
            Err(e) => {
                refused.push((n, e.to_string()));
                continue;
            }
        };
        if line.is_empty() {
            continue;
        }
        let item = match format {
            Format::Text => Ok(Item::Write({
                let mut r = WriteRequest::new(defaults.scene.clone(), line, "import");
                r.origin = "import".into();
                r.kind = defaults.kind.clone();
                r
            })),
            _ if line.contains("\"op\"") => journal::parse_line(line)
                .map(Item::Record)
                .map_err(Error::invalid),
            _ => serde_json::from_str::<LooseLine>(line)
                .map_err(|e| Error::invalid(e.to_string()))
                .and_then(|l| loose_request(l, defaults))
                .map(Item::Write),
        };
        match item {
            Ok(item) => items.push((n, item)),
            Err(e) => refused.push((n, e.to_string())),
        }
    }
    (items, refused)
}

/// Writes one chunk of items through the hub (journal records with their
/// ids, new memories through the write rules), counting what went in and
/// noting what was refused.
fn apply_chunk(
    hub: &Hub,
    chunk: &[(usize, Item)],
    report: &mut ImportReport,
    refused: &mut Refusals,
) -> Result<()> {
    let mut records = Vec::new();
    let mut writes = Vec::new();
    for (n, item) in chunk {
        match item {
            Item::Record(r) => records.push((*n, r.clone())),
            Item::Write(w) => writes.push((*n, w.clone())),
        }
    }
    if !records.is_empty() {
        let results = hub.import_records(
            records
                .iter()
                .map(|(_, r)| with_tier(hub, r.clone()))
                .collect(),
        )?;
        for ((n, _), result) in records.iter().zip(results) {
            match result {
                Ok(true) => report.added += 1,
                Ok(false) => report.skipped += 1,
                Err(e) => refused.push((*n, e.to_string())),
            }
        }
    }
    if !writes.is_empty() {
        let results = hub.append_batch(writes.iter().map(|(_, w)| w.clone()).collect())?;
        for ((n, _), result) in writes.iter().zip(results) {
            match result {
                Ok(w) if w.action == WriteAction::Noop => report.skipped += 1,
                Ok(_) => report.added += 1,
                Err(e) => refused.push((*n, e.to_string())),
            }
        }
    }
    Ok(())
}

/// A long-term fact imported without a tier (a line of an older build, or
/// written by hand) gets the tier a write would give it, and with
/// `lifecycle.tierExpiry` on the expiry that tier gives it from now.
fn with_tier(hub: &Hub, record: Record) -> Record {
    let Record::Put { v, at, mut fact } = record else {
        return record;
    };
    if fact.stage == crate::model::Stage::Long && fact.tier.is_none() {
        let tier = crate::content::assign_tier(crate::content::TierInput {
            explicit: None,
            category: fact.kind == "category",
            source: &fact.source,
            kind: &fact.kind,
            text: &crate::content::normalize_content(&fact.text),
            tags: &fact.tags,
        });
        fact.tier = Some(tier);
        if fact.expires_at.is_none() {
            fact.expires_at = hub.config().lifecycle.expiry(tier, hub.now());
        }
    }
    Record::Put { v, at, fact }
}

/// Copies Markdown under `memories/import/<name>/`, never overwriting, then indexes it.
/// Symbolic links are never followed: a link inside the directory is reported
/// and skipped (the path itself was checked by [`import`]).
fn import_markdown(hub: &Hub, path: &Path) -> Result<ImportReport> {
    let mut report = ImportReport::default();
    let name = path
        .file_stem()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("import");
    let is_dir = std::fs::symlink_metadata(path)
        .ctx("cannot open", path)?
        .is_dir();
    let sources: Vec<(PathBuf, String)> = if is_dir {
        let listing = markdown::scan(path)?;
        for link in &listing.links {
            report.fail(path.join(link).display(), markdown::SYMLINK_ISSUE);
        }
        listing
            .documents
            .into_iter()
            .map(|rel| (path.join(&rel), rel))
            .collect()
    } else {
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("doc.md");
        vec![(path.to_path_buf(), file.to_string())]
    };
    let memories = hub.layout().memories();
    for (src, rel) in sources {
        let dest = if is_dir {
            format!("import/{name}/{rel}")
        } else {
            format!("import/{rel}")
        };
        // `symlink_metadata`, not `exists`: a dangling link is not free space to write through.
        if std::fs::symlink_metadata(memories.join(&dest)).is_ok() {
            report.skipped += 1;
            continue;
        }
        let (bytes, modified) = match markdown::read_bounded(&src) {
            Ok(read) => read,
            Err(e) => {
                report.fail(src.display(), e);
                continue;
            }
        };
        let config = hub.config();
        // A document that holds a credential is not copied in: memories/ is
        // synced and backed up, and the original stays where it is.
        if let Some(hit) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| markdown::credential_in(&rel, text, &config.docs, &config.privacy))
        {
            report.fail(src.display(), format!("not copied: {}", hit.refusal()));
            continue;
        }
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|_| Error::invalid("not valid UTF-8"))
            .and_then(|text| markdown::parse(&rel, text, &config.docs, &config.privacy));
        // The copy keeps the date its original was last edited.
        if files::add_document(&memories, &dest, &bytes, Some(modified))? != files::Added::Created {
            // Another writer took the name since the check above.
            report.skipped += 1;
            continue;
        }
        match parsed {
            // Copied anyway (nothing is lost); it is not indexed until fixed.
            Err(e) => report.fail(src.display(), format!("copied but not indexed: {e}")),
            Ok(_) => report.added += 1,
        }
    }
    hub.sync_documents()?;
    Ok(report)
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// Journal `put` lines of the live facts (what `memd import` reads back with ids kept).
    Jsonl,
    /// One Markdown file per scene, plus a copy of every document.
    Markdown,
}

/// The live facts (not forgotten), in journal order, optionally only some scenes.
pub fn live_facts(hub: &Hub, scenes: &[Scene]) -> Result<Vec<Fact>> {
    let dir = hub.layout().facts();
    let mut order: Vec<String> = Vec::new();
    let mut facts: std::collections::HashMap<String, Fact> = std::collections::HashMap::new();
    for file in journal::list_all(&dir)? {
        journal::scan_file(&dir, &file, Default::default(), |item| {
            match item.entry {
                Ok(Record::Put { fact, .. }) => {
                    if !facts.contains_key(&fact.id) {
                        order.push(fact.id.clone());
                    }
                    facts.insert(fact.id.clone(), fact);
                }
                Ok(Record::Forget { id, .. }) => {
                    facts.remove(&id);
                }
                Ok(Record::Touch { .. } | Record::Link { .. } | Record::Unlink { .. }) | Err(_) => {
                }
            }
            Ok(())
        })?;
    }
    Ok(order
        .into_iter()
        .filter_map(|id| facts.remove(&id))
        .filter(|f| scenes.is_empty() || scenes.contains(&f.scene))
        .collect())
}

/// Writes an export to `out` (a file for jsonl, a directory for markdown); returns facts written.
pub(crate) fn export(hub: &Hub, format: ExportFormat, out: &Path, scenes: &[Scene]) -> Result<u64> {
    let facts = live_facts(hub, scenes)?;
    match format {
        ExportFormat::Jsonl => {
            if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).ctx("cannot create", parent)?;
            }
            let mut f =
                std::io::BufWriter::new(std::fs::File::create(out).ctx("cannot create", out)?);
            for fact in &facts {
                let line = serde_json::to_string(&Record::Put {
                    v: crate::model::JOURNAL_VERSION,
                    at: None,
                    fact: fact.clone(),
                })
                .map_err(|e| Error::Internal(e.to_string()))?;
                writeln!(f, "{line}").ctx("cannot write", out)?;
            }
            f.flush().ctx("cannot write", out)?;
        }
        ExportFormat::Markdown => {
            std::fs::create_dir_all(out).ctx("cannot create", out)?;
            let mut by_scene: std::collections::BTreeMap<String, Vec<&Fact>> = Default::default();
            for f in &facts {
                by_scene.entry(f.scene.to_string()).or_default().push(f);
            }
            for (scene, list) in by_scene {
                let mut text = markdown::render_front_matter(&[
                    ("title", FrontValue::Text(format!("Facts in {scene}"))),
                    ("scene", FrontValue::Text(scene.clone())),
                    ("kind", FrontValue::Text("export".into())),
                ])?;
                for f in list {
                    let heading = f
                        .title
                        .clone()
                        .unwrap_or_else(|| f.ts.format("%Y-%m-%d %H:%M").to_string());
                    text.push_str(&format!("\n## {heading}\n\n{}\n", f.text));
                    if !f.tags.is_empty() {
                        text.push_str(&format!("\ntags: {}\n", f.tags.join(", ")));
                    }
                    text.push_str(&format!(
                        "\n<!-- id: {} kind: {} time: {} -->\n",
                        f.id,
                        f.kind,
                        f.ts.to_rfc3339()
                    ));
                }
                let path = out.join(format!("facts-{}.md", scene.replace(':', "-")));
                std::fs::write(&path, text).ctx("cannot write", &path)?;
            }
            let memories = hub.layout().memories();
            for rel in markdown::list_documents(&memories)? {
                let dest = out.join("documents").join(&rel);
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent).ctx("cannot create", parent)?;
                }
                std::fs::copy(memories.join(&rel), &dest).ctx("cannot copy", &dest)?;
            }
        }
    }
    Ok(facts.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(
            parse_time("2023-12-25").unwrap().to_rfc3339(),
            "2023-12-25T00:00:00+00:00"
        );
        assert!(parse_time("2024-01-02T03:04:05Z").is_some());
        assert!(parse_time("last tuesday").is_none());
    }
}
