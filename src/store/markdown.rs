//! Markdown documents under `memories/`: discovery, front matter, chunking.
//!
//! Every `*.md` below `memories/` (outside `facts/`) is a document. Its YAML
//! front matter may set `title`, `tags`, `scene` (or `audience`), `privacy`,
//! `kind`, `subject`, `importance` and `tier`. The body is cut into chunks at
//! every heading; a section longer than the configured size is split again at
//! paragraph breaks. A document whose front matter is invalid is reported and
//! not indexed at all: falling back to defaults could publish something its
//! author marked private.

use std::path::Path;

use chrono::{DateTime, Utc};
use gray_matter::Matter;
use gray_matter::engine::YAML;
use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
use serde::Deserialize;

use crate::config::DocsConfig;
use crate::error::{Error, IoContext, Result};
use crate::ids;
use crate::model::{Privacy, Scene, Subject, Tier, parse_kind, parse_tags};

/// A parsed document, ready to index.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Path relative to `memories/`, with `/` separators.
    pub rel_path: String,
    /// `doc-<pathHash8>`.
    pub doc_id: String,
    /// Front matter title, else the first heading, else the file stem.
    pub title: String,
    /// Audience.
    pub scene: Scene,
    /// Sensitivity.
    pub privacy: Privacy,
    /// Kind word (`doc`, `identity`, `audience`, or the front matter's).
    pub kind: String,
    /// Whose memory it is.
    pub subject: Subject,
    /// Tags.
    pub tags: Vec<String>,
    /// 0–1.
    pub importance: f32,
    /// Retention tier, if given.
    pub tier: Option<Tier>,
    /// Last modification time of the file.
    pub modified: DateTime<Utc>,
    /// sha256 of the file bytes.
    pub hash: String,
    /// The chunks, in order.
    pub chunks: Vec<Chunk>,
}

/// One indexed piece of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// 0-based position.
    pub ord: usize,
    /// The heading the chunk sits under, if any.
    pub heading: Option<String>,
    /// The chunk text, heading included.
    pub text: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    title: Option<String>,
    #[serde(default)]
    tags: Option<TagList>,
    scene: Option<String>,
    audience: Option<String>,
    privacy: Option<String>,
    kind: Option<String>,
    subject: Option<String>,
    importance: Option<f32>,
    tier: Option<String>,
    // Accepted and ignored: common editor and note-tool keys.
    #[serde(default)]
    #[allow(dead_code)]
    date: Option<serde_json::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    updated: Option<serde_json::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    aliases: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TagList {
    List(Vec<String>),
    Csv(String),
}

/// Markdown files below `memories/` (not under `facts/`), as relative paths, sorted.
pub fn list_documents(memories: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    walk(memories, memories, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx("cannot list", dir),
    };
    for entry in entries {
        let entry = entry.ctx("cannot list", dir)?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let ft = entry.file_type().ctx("cannot stat", &path)?;
        if ft.is_dir() {
            if dir == base && name == "facts" {
                continue;
            }
            walk(base, &path, out)?;
        } else if ft.is_file() && name.ends_with(".md") {
            let rel = path
                .strip_prefix(base)
                .expect("walked below base")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push(rel);
        }
    }
    Ok(())
}

/// Reads and parses the document at `memories/<rel_path>`.
pub fn load(memories: &Path, rel_path: &str, cfg: &DocsConfig) -> Result<Document> {
    let path = memories.join(rel_path);
    let bytes = std::fs::read(&path).ctx("cannot read document", &path)?;
    let modified = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .ctx("cannot stat document", &path)?;
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| Error::invalid(format!("{rel_path}: not valid UTF-8")))?;
    let mut doc =
        parse(rel_path, &text, cfg).map_err(|e| Error::invalid(format!("{rel_path}: {e}")))?;
    doc.modified = modified.into();
    doc.hash = ids::sha256_hex(&bytes);
    Ok(doc)
}

/// Parses document text (no IO). `modified` and `hash` are left empty.
pub fn parse(rel_path: &str, text: &str, cfg: &DocsConfig) -> Result<Document> {
    let matter = Matter::<YAML>::new();
    let parsed = matter
        .parse::<FrontMatter>(text)
        .map_err(|e| Error::invalid(format!("front matter: {e}")))?;
    let fm = parsed.data.unwrap_or_default();
    let body = parsed.content;

    let scene = match fm.scene.as_deref().or(fm.audience.as_deref()) {
        Some(s) => Scene::parse(s)?,
        None => cfg.default_scene.clone(),
    };
    let privacy = fm
        .privacy
        .as_deref()
        .map(str::parse)
        .transpose()?
        .unwrap_or(Privacy::Normal);
    let subject = fm
        .subject
        .as_deref()
        .map(str::parse)
        .transpose()?
        .unwrap_or(Subject::Owner);
    let tier = fm.tier.as_deref().map(str::parse).transpose()?;
    let default_kind = if rel_path == "user/identity.md" {
        "identity"
    } else if rel_path.starts_with("audiences/") {
        "audience"
    } else {
        "doc"
    };
    let kind = parse_kind(fm.kind.as_deref().unwrap_or(default_kind))?;
    let tags = match fm.tags {
        None => Vec::new(),
        Some(TagList::List(v)) => parse_tags(v)?,
        Some(TagList::Csv(s)) => parse_tags(s.split(','))?,
    };
    let importance = fm.importance.unwrap_or(0.5);
    if !(0.0..=1.0).contains(&importance) {
        return Err(Error::invalid("importance must be between 0 and 1"));
    }

    let sections = sections(&body);
    let first_heading = sections.iter().find_map(|s| s.heading.clone());
    let stem = rel_path
        .rsplit('/')
        .next()
        .unwrap_or(rel_path)
        .trim_end_matches(".md");
    let title = fm
        .title
        .filter(|t| !t.trim().is_empty())
        .or(first_heading)
        .unwrap_or_else(|| stem.to_string());

    let mut chunks = Vec::new();
    for section in sections {
        for piece in split_long(&section.text, cfg.max_chunk_chars) {
            chunks.push(Chunk {
                ord: chunks.len(),
                heading: section.heading.clone(),
                text: piece,
            });
        }
    }
    Ok(Document {
        rel_path: rel_path.to_string(),
        doc_id: ids::doc_id(rel_path),
        title,
        scene,
        privacy,
        kind,
        subject,
        tags,
        importance,
        tier,
        modified: DateTime::<Utc>::UNIX_EPOCH,
        hash: String::new(),
        chunks,
    })
}

struct Section {
    heading: Option<String>,
    text: String,
}

/// Cuts a Markdown body at every heading. Each section's text starts with its heading text.
fn sections(body: &str) -> Vec<Section> {
    let mut starts: Vec<(usize, usize, String)> = Vec::new(); // (heading start, body start, heading text)
    let mut in_heading: Option<(usize, String, HeadingLevel)> = None;
    for (event, range) in Parser::new(body).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                in_heading = Some((range.start, String::new(), level));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, text, _)) = in_heading.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((start, text, _)) = in_heading.take() {
                    starts.push((start, range.end, text.trim().to_string()));
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let preamble_end = starts.first().map_or(body.len(), |s| s.0);
    let preamble = body[..preamble_end].trim();
    if !preamble.is_empty() {
        out.push(Section {
            heading: None,
            text: preamble.to_string(),
        });
    }
    for (i, (_, body_start, heading)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(body.len(), |s| s.0);
        let content = body[*body_start..end].trim();
        let text = if content.is_empty() {
            heading.clone()
        } else if heading.is_empty() {
            content.to_string()
        } else {
            format!("{heading}\n{content}")
        };
        if !text.is_empty() {
            out.push(Section {
                heading: Some(heading.clone()).filter(|h| !h.is_empty()),
                text,
            });
        }
    }
    out
}

/// Splits `text` into pieces of at most `max` characters, preferring paragraph breaks.
fn split_long(text: &str, max: usize) -> Vec<String> {
    if text.chars().count() <= max {
        return vec![text.to_string()];
    }
    let mut pieces = Vec::new();
    let mut current = String::new();
    for para in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        let para_len = para.chars().count();
        if !current.is_empty() && current.chars().count() + 2 + para_len > max {
            pieces.push(std::mem::take(&mut current));
        }
        if para_len > max {
            let chars: Vec<char> = para.chars().collect();
            for window in chars.chunks(max) {
                pieces.push(window.iter().collect());
            }
            continue;
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        current.push_str(para);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> DocsConfig {
        DocsConfig::default()
    }

    #[test]
    fn front_matter_and_headings() {
        let text = "---\ntitle: Trip notes\ntags: [travel, 公园]\nscene: qq:owner\nprivacy: personal\n---\nIntro line.\n\n# Day one\nWe walked in the park.\n\n## Lunch\n吃了面条。\n";
        let doc = parse("notes/trip.md", text, &cfg()).unwrap();
        assert_eq!(doc.title, "Trip notes");
        assert_eq!(doc.scene.as_str(), "qq:owner");
        assert_eq!(doc.privacy, Privacy::Personal);
        assert_eq!(doc.tags, ["travel", "公园"]);
        assert_eq!(doc.kind, "doc");
        let got: Vec<(Option<&str>, &str)> = doc
            .chunks
            .iter()
            .map(|c| (c.heading.as_deref(), c.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (None, "Intro line."),
                (Some("Day one"), "Day one\nWe walked in the park."),
                (Some("Lunch"), "Lunch\n吃了面条。"),
            ]
        );
        assert_eq!(doc.doc_id, ids::doc_id("notes/trip.md"));
    }

    #[test]
    fn defaults_without_front_matter() {
        let doc = parse("user/identity.md", "# Who I am\nI am Ada.", &cfg()).unwrap();
        assert_eq!(doc.title, "Who I am");
        assert_eq!(doc.kind, "identity");
        assert_eq!(doc.scene.as_str(), "main");
        let doc = parse("misc/plain.md", "just text", &cfg()).unwrap();
        assert_eq!(doc.title, "plain");
        assert_eq!(doc.chunks.len(), 1);
    }

    #[test]
    fn invalid_front_matter_is_refused() {
        for (text, needle) in [
            ("---\nprivacy: secrett\n---\nx", "privacy"),
            ("---\nscene: Main Room\n---\nx", "scene"),
            ("---\nimportance: 3\n---\nx", "importance"),
            ("---\ncolour: red\n---\nx", "front matter"),
        ] {
            let err = parse("a.md", text, &cfg()).unwrap_err();
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn long_sections_split_at_paragraphs() {
        let para = "word ".repeat(100);
        let text = format!("# H\n{para}\n\n{para}\n\n{para}");
        let mut c = cfg();
        c.max_chunk_chars = 1100;
        let doc = parse("a.md", &text, &c).unwrap();
        assert_eq!(doc.chunks.len(), 2);
        assert!(doc.chunks.iter().all(|ch| ch.text.chars().count() <= 1100));
        assert_eq!(doc.chunks[1].ord, 1);
    }

    #[test]
    fn discovery_skips_facts_and_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path();
        for p in [
            "a.md",
            "user/identity.md",
            "facts/x.md",
            ".hidden/y.md",
            "b.txt",
        ] {
            let path = m.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        assert_eq!(list_documents(m).unwrap(), ["a.md", "user/identity.md"]);
    }
}
