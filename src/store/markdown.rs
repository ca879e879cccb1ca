//! Markdown documents under `memories/`: discovery, front matter, chunking.
//!
//! Every `*.md` below `memories/` (outside `facts/`) is a document. Its YAML
//! front matter may set `id`, `title`, `tags`, `scene` (or `audience`), `privacy`,
//! `kind`, `subject`, `importance` and `tier`. The document id is
//! `doc-<pathHash8>`, or `doc-id-<id>` with `id:` (1–64 ASCII letters, digits,
//! `_`, `-`), which keeps it across a rename; two files that claim the same
//! `id` are both reported and neither is indexed (see `hub::replay`). The body is cut into chunks at
//! every heading; a section longer than the configured size is split again at
//! paragraph breaks.
//!
//! A document is indexed only if everything about it is understood; anything
//! else is reported (`memd stats`, `memd doctor`, health) and not indexed at
//! all, because falling back to defaults could publish something its author
//! marked private:
//!
//! - front matter opened with `---` (the first non-blank line) and never
//!   closed with `---` or `...`;
//! - front matter over [`MAX_FRONT_MATTER_BYTES`], a file over
//!   [`MAX_DOCUMENT_BYTES`], or a file that is not UTF-8;
//! - YAML outside the plain subset: anchors (`&a`), aliases (`*a`), tags
//!   (`!x`), several documents, non-scalar or duplicate keys, nesting deeper
//!   than [`MAX_YAML_DEPTH`] — aliases are how a few hundred bytes expand to
//!   gigabytes ("billion laughs"), so they are refused before anything is
//!   built;
//! - an `id` outside its pattern;
//! - an unknown key, a value of the wrong type, an unknown privacy, scene,
//!   subject, tier or kind, an empty `privacy:`/`scene:`/`audience:`, a
//!   `scene` and an `audience` that disagree;
//! - a `sensitive` or `secret` document outside the audiences its level is
//!   pinned to (`privacy.sensitiveAudiences`, `privacy.secretAudiences`), the
//!   same rule facts follow;
//! - a symbolic link (file or directory): links are never followed, so a link
//!   cannot pull a file from outside `memories/` into the index;
//! - a credential in its text, title, tags, path or `id` (the check every
//!   record meets, [`crate::content::in_record`]; a `secret` document may
//!   hold one in its content): the document is quarantined, reported and
//!   never indexed.
//!
//! Parsing is linear in the input and the input is capped, so one file cannot
//! stall the others; it runs before the writer is taken (see `hub::replay`).

use std::io::Read;
use std::path::Path;

use chrono::{DateTime, Utc};
use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};
use yaml_rust2::parser::{Event as YamlEvent, Parser as YamlParser};
use yaml_rust2::scanner::TScalarStyle;

use crate::content::{CredentialHit, PrivacyConfig};
use crate::error::{Error, IoContext, Result};
use crate::ids;
use crate::model::{Privacy, Scene, Subject, Tier, parse_kind, parse_tags};

/// Front matter longer than this (between the fences) is refused.
pub const MAX_FRONT_MATTER_BYTES: usize = 16 * 1024;
/// Documents larger than this are refused without being read in full.
pub const MAX_DOCUMENT_BYTES: u64 = 8 * 1024 * 1024;
/// Deepest nesting of lists and mappings accepted in front matter.
pub const MAX_YAML_DEPTH: usize = 16;

/// What a document issue says about a symbolic link.
pub(crate) const SYMLINK_ISSUE: &str = super::links::NOT_FOLLOWED;

/// A parsed document, ready to index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Document {
    /// Path relative to `memories/`, with `/` separators.
    pub(crate) rel_path: String,
    /// `doc-<pathHash8>`, or `doc-id-<id>` when the front matter gives `id`.
    pub(crate) doc_id: String,
    /// Front matter title, else the first heading, else the file stem.
    pub(crate) title: String,
    /// Audience.
    pub(crate) scene: Scene,
    /// Sensitivity.
    pub(crate) privacy: Privacy,
    /// Kind word (`doc`, `identity`, `audience`, or the front matter's).
    pub(crate) kind: String,
    /// Whose memory it is.
    pub(crate) subject: Subject,
    /// Tags.
    pub(crate) tags: Vec<String>,
    /// 0–1.
    pub(crate) importance: f32,
    /// Retention tier, if given.
    pub(crate) tier: Option<Tier>,
    /// Last modification time of the file.
    pub(crate) modified: DateTime<Utc>,
    /// sha256 of the file bytes.
    pub(crate) hash: String,
    /// The chunks, in order.
    pub(crate) chunks: Vec<Chunk>,
}

/// One indexed piece of a document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chunk {
    /// 0-based position.
    pub(crate) ord: usize,
    /// The heading the chunk sits under, if any.
    pub(crate) heading: Option<String>,
    /// The chunk text, heading included.
    pub(crate) text: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    id: Option<String>,
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

/// What discovery found below a directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Listing {
    /// Markdown files (not under `facts/`), relative, `/`-separated, sorted.
    pub(crate) documents: Vec<String>,
    /// Symbolic links that discovery did not follow: links named `*.md` and
    /// links to directories (they could hold documents), sorted.
    pub(crate) links: Vec<String>,
}

/// Markdown files below `memories/` (not under `facts/`), as relative paths, sorted.
/// Symbolic links are not followed (see [`scan`] to hear about them).
pub(crate) fn list_documents(memories: &Path) -> Result<Vec<String>> {
    scan(memories).map(|l| l.documents)
}

/// Documents below `dir`, and the symbolic links skipped on the way.
pub(crate) fn scan(dir: &Path) -> Result<Listing> {
    let mut out = Listing::default();
    walk(dir, dir, &mut out)?;
    out.documents.sort();
    out.links.sort();
    Ok(out)
}

fn walk(base: &Path, dir: &Path, out: &mut Listing) -> Result<()> {
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
        // Dot files include a sync tool's temporaries; a conflict copy is
        // reported by health and doctor, never indexed as a second document.
        if name.starts_with('.') || crate::store::syncfiles::is_conflict_name(&name) {
            continue;
        }
        let rel = || {
            path.strip_prefix(base)
                .expect("walked below base")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        };
        // `file_type` does not follow links: a link is neither a file nor a directory here.
        let ft = entry.file_type().ctx("cannot stat", &path)?;
        if ft.is_dir() {
            if dir == base && name == "facts" {
                continue;
            }
            walk(base, &path, out)?;
        } else if ft.is_file() && name.ends_with(".md") {
            out.documents.push(rel());
        } else if ft.is_symlink() && (name.ends_with(".md") || path.is_dir()) {
            out.links.push(rel());
        }
    }
    Ok(())
}

/// The raw bytes of `memories/<rel_path>` and their modification time, read
/// without following a link and never more than [`MAX_DOCUMENT_BYTES`].
pub(crate) fn read_bounded(path: &Path) -> Result<(Vec<u8>, std::time::SystemTime)> {
    use std::os::unix::fs::OpenOptionsExt;
    let meta = std::fs::symlink_metadata(path).ctx("cannot stat document", path)?;
    if meta.file_type().is_symlink() {
        return Err(Error::invalid(SYMLINK_ISSUE));
    }
    // O_NOFOLLOW: a link swapped in after the stat is refused by the open itself.
    let file = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a FIFO swapped in after the listing must not block the sync.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                Error::invalid(SYMLINK_ISSUE)
            } else {
                Error::Io {
                    context: format!("cannot read document {}", path.display()),
                    source: e,
                }
            }
        })?;
    let meta = file.metadata().ctx("cannot stat document", path)?;
    if !meta.is_file() {
        return Err(Error::invalid("not a regular file"));
    }
    too_large(meta.len())?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .ctx("cannot read document", path)?;
    too_large(bytes.len() as u64)?;
    let modified = meta.modified().ctx("cannot stat document", path)?;
    Ok((bytes, modified))
}

fn too_large(len: u64) -> Result<()> {
    if len > MAX_DOCUMENT_BYTES {
        return Err(Error::invalid(format!(
            "document is {len} bytes; the limit is {} MiB",
            MAX_DOCUMENT_BYTES / (1024 * 1024)
        )));
    }
    Ok(())
}

/// Reads and parses the document at `memories/<rel_path>`.
pub(crate) fn load(
    memories: &Path,
    rel_path: &str,
    cfg: &DocsConfig,
    pins: &PrivacyConfig,
) -> Result<Document> {
    let (bytes, modified) = read_bounded(&memories.join(rel_path))?;
    from_bytes(rel_path, &bytes, modified, cfg, pins)
}

/// Parses already-read document bytes (see [`read_bounded`]).
pub(crate) fn from_bytes(
    rel_path: &str,
    bytes: &[u8],
    modified: std::time::SystemTime,
    cfg: &DocsConfig,
    pins: &PrivacyConfig,
) -> Result<Document> {
    let text = std::str::from_utf8(bytes).map_err(|_| Error::invalid("not valid UTF-8"))?;
    let mut doc = parse(rel_path, text, cfg, pins)?;
    doc.modified = modified.into();
    doc.hash = ids::sha256_hex(bytes);
    Ok(doc)
}

/// Splits `text` into its front matter (between the fences) and its body.
///
/// The opening fence is the first non-blank line when it is exactly `---`
/// (trailing blanks allowed); the closing fence is the next line that is
/// `---` or `...`. An opening fence without a closing one is an error, never
/// a body: the author meant front matter, and it may say `privacy: secret`.
fn split_front_matter(text: &str) -> Result<(Option<&str>, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rest = text;
    let opening = loop {
        let Some((line, after)) = next_line(rest) else {
            return Ok((None, text));
        };
        if line.trim().is_empty() {
            rest = after;
            continue;
        }
        if line.trim_end() == "---" {
            break after;
        }
        return Ok((None, text));
    };
    let mut at = opening;
    let mut consumed = 0usize;
    while let Some((line, after)) = next_line(at) {
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            return Ok((Some(&opening[..consumed]), after));
        }
        consumed += at.len() - after.len();
        at = after;
        if consumed > MAX_FRONT_MATTER_BYTES {
            return Err(Error::invalid(format!(
                "front matter: longer than {} KiB (or its closing `---` is missing)",
                MAX_FRONT_MATTER_BYTES / 1024
            )));
        }
    }
    Err(Error::invalid(
        "front matter: opened with `---` but never closed (add a `---` line after it)",
    ))
}

/// The first line of `s` (without its line break) and what follows it.
fn next_line(s: &str) -> Option<(&str, &str)> {
    if s.is_empty() {
        return None;
    }
    Some(match s.find('\n') {
        Some(i) => (s[..i].trim_end_matches('\r'), &s[i + 1..]),
        None => (s, ""),
    })
}

/// Parses front matter YAML into JSON, accepting only the plain subset: no
/// anchors, aliases or tags, one document, string keys without repeats,
/// nesting up to [`MAX_YAML_DEPTH`]. Events are pulled one at a time and the
/// input is capped, so the work is linear in at most 16 KiB.
fn parse_yaml(src: &str) -> Result<serde_json::Value> {
    use serde_json::{Map, Value};
    enum Frame {
        Seq(Vec<Value>),
        Map(Map<String, Value>, Option<String>),
    }
    let bad = |what: &str| Error::invalid(format!("front matter: {what}"));
    let mut parser = YamlParser::new_from_str(src);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Value> = None;
    let mut documents = 0;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| bad(&format!("invalid YAML: {e}")))?;
        let at = |what: &str| bad(&format!("{what} (line {})", mark.line()));
        let value = match event {
            YamlEvent::StreamEnd => break,
            YamlEvent::StreamStart | YamlEvent::DocumentEnd | YamlEvent::Nothing => continue,
            YamlEvent::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(at("more than one YAML document"));
                }
                continue;
            }
            YamlEvent::Alias(_) => {
                return Err(at("YAML aliases (`*name`) are not allowed"));
            }
            YamlEvent::Scalar(_, _, anchor, _)
            | YamlEvent::SequenceStart(anchor, _)
            | YamlEvent::MappingStart(anchor, _)
                if anchor != 0 =>
            {
                return Err(at("YAML anchors (`&name`) are not allowed"));
            }
            YamlEvent::Scalar(_, _, _, Some(_))
            | YamlEvent::SequenceStart(_, Some(_))
            | YamlEvent::MappingStart(_, Some(_)) => {
                return Err(at("YAML tags (`!tag`) are not allowed"));
            }
            YamlEvent::SequenceStart(..) | YamlEvent::MappingStart(..) => {
                if stack.len() >= MAX_YAML_DEPTH {
                    return Err(at(&format!("nested deeper than {MAX_YAML_DEPTH} levels")));
                }
                if let Some(Frame::Map(_, None)) = stack.last() {
                    return Err(at("keys must be plain text"));
                }
                stack.push(if matches!(event, YamlEvent::SequenceStart(..)) {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(Map::new(), None)
                });
                continue;
            }
            YamlEvent::SequenceEnd | YamlEvent::MappingEnd => match stack.pop() {
                Some(Frame::Seq(items)) => Value::Array(items),
                Some(Frame::Map(map, _)) => Value::Object(map),
                None => return Err(at("unbalanced YAML")),
            },
            YamlEvent::Scalar(text, style, _, None) => scalar(text, style),
        };
        match stack.last_mut() {
            None => root = Some(value),
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map(map, key @ None)) => match value {
                Value::String(k) if !map.contains_key(&k) => *key = Some(k),
                Value::String(k) => return Err(at(&format!("key `{k}` appears twice"))),
                _ => return Err(at("keys must be plain text")),
            },
            Some(Frame::Map(map, key)) => {
                let k = key.take().expect("a key is pending");
                map.insert(k, value);
            }
        }
    }
    Ok(root.unwrap_or(Value::Null))
}

/// A YAML scalar as JSON: plain scalars resolve to null, booleans and
/// numbers (YAML 1.2 core schema); quoted and block scalars stay text.
fn scalar(text: String, style: TScalarStyle) -> serde_json::Value {
    use serde_json::Value;
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match yaml_rust2::Yaml::from_str(&text) {
        yaml_rust2::Yaml::Null => Value::Null,
        yaml_rust2::Yaml::Boolean(b) => Value::Bool(b),
        yaml_rust2::Yaml::Integer(i) => Value::from(i),
        yaml_rust2::Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(text), Value::Number),
        _ => Value::String(text),
    }
}

/// The front matter of `text` as typed fields, and the body.
fn front_matter(text: &str) -> Result<(FrontMatter, &str)> {
    let (yaml, body) = split_front_matter(text)?;
    let Some(yaml) = yaml else {
        return Ok((FrontMatter::default(), body));
    };
    let value = parse_yaml(yaml)?;
    let fm = match value {
        serde_json::Value::Null => FrontMatter::default(),
        serde_json::Value::Object(map) => {
            // An explicitly empty level or audience is a mistake to report,
            // not a reason to fall back to the defaults.
            for key in ["privacy", "scene", "audience", "id"] {
                if map.get(key).is_some_and(serde_json::Value::is_null) {
                    return Err(Error::invalid(format!("front matter: `{key}` is empty")));
                }
            }
            serde_json::from_value(serde_json::Value::Object(map))
                .map_err(|e| Error::invalid(format!("front matter: {e}")))?
        }
        _ => return Err(Error::invalid("front matter: must be a YAML mapping")),
    };
    Ok((fm, body))
}

/// The front matter of `text` as plain JSON (see [`parse_yaml`]; `Null`
/// without any) and the body after it.
pub(crate) fn split(text: &str) -> Result<(serde_json::Value, &str)> {
    let (yaml, body) = split_front_matter(text)?;
    let value = match yaml {
        Some(yaml) => parse_yaml(yaml)?,
        None => serde_json::Value::Null,
    };
    Ok((value, body))
}

/// A value memd writes into front matter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FrontValue {
    /// A string, written quoted whenever YAML would read it as anything else.
    Text(String),
    /// A list of strings.
    List(Vec<String>),
    /// A number.
    Number(f64),
}

impl FrontValue {
    fn yaml(&self) -> yaml_rust2::Yaml {
        use yaml_rust2::Yaml;
        match self {
            FrontValue::Text(t) => Yaml::String(t.clone()),
            FrontValue::List(items) => {
                Yaml::Array(items.iter().cloned().map(Yaml::String).collect())
            }
            FrontValue::Number(n) => Yaml::Real(format!("{n:?}")),
        }
    }

    /// Whether `value` (as [`parse_yaml`] reads it back) is this value.
    fn reads_back_as(&self, value: Option<&serde_json::Value>) -> bool {
        use serde_json::Value;
        match (self, value) {
            (FrontValue::Text(t), Some(Value::String(s))) => s == t,
            (FrontValue::List(items), Some(Value::Array(values))) => {
                items.len() == values.len()
                    && items
                        .iter()
                        .zip(values)
                        .all(|(i, v)| v.as_str() == Some(i.as_str()))
            }
            (FrontValue::Number(n), Some(v)) => v.as_f64() == Some(*n),
            _ => false,
        }
    }
}

/// Front matter holding `fields` in order, between `---` fences and ending
/// in a line break, emitted by a YAML emitter: quotes, colons, line breaks,
/// leading dashes, text that looks like a number or `null`, and any script
/// come back as written. The result is parsed back with the same parser
/// that reads documents; a value that would not come back identical (control
/// characters the emitter leaves bare) is refused with `INVALID_INPUT`.
pub(crate) fn render_front_matter(fields: &[(&str, FrontValue)]) -> Result<String> {
    let mut map = yaml_rust2::yaml::Hash::new();
    for (key, value) in fields {
        map.insert(yaml_rust2::Yaml::String((*key).to_string()), value.yaml());
    }
    let mut out = String::new();
    yaml_rust2::YamlEmitter::new(&mut out)
        .dump(&yaml_rust2::Yaml::Hash(map))
        .map_err(|e| Error::Internal(format!("cannot emit front matter: {e}")))?;
    // The emitter opens the document with `---`; close it the same way.
    out.push_str("\n---\n");
    let (back, _) = split(&out)?;
    for (key, value) in fields {
        if !value.reads_back_as(back.get(*key)) {
            return Err(Error::invalid(format!(
                "front matter: the value of `{key}` cannot be written so that it reads back \
                 the same (remove control characters from it)"
            )));
        }
    }
    Ok(out)
}

/// Parses document text (no IO). `modified` and `hash` are left empty. A
/// document that holds a credential is refused like any other broken one:
/// reported, never indexed (see [`credential_in`]).
pub(crate) fn parse(
    rel_path: &str,
    text: &str,
    cfg: &DocsConfig,
    pins: &PrivacyConfig,
) -> Result<Document> {
    let (doc, body) = parse_unchecked(rel_path, text, cfg, pins)?;
    if let Some(hit) = credential(&doc, body) {
        return Err(Error::invalid(format!(
            "quarantined, not indexed: {}. Remove it from the file, or mark the document \
             `privacy: secret` if it is kept there on purpose",
            hit.reason()
        )));
    }
    Ok(doc)
}

/// The credential a document holds, if any: in its text, title or tags
/// (unless it is `secret`), path or front matter `id`; for a file that does
/// not parse, anywhere in it. Imports check this before copying a file in.
pub(crate) fn credential_in(
    rel_path: &str,
    text: &str,
    cfg: &DocsConfig,
    pins: &PrivacyConfig,
) -> Option<CredentialHit> {
    use crate::content::FieldKind::{Id, Prose};
    match parse_unchecked(rel_path, text, cfg, pins) {
        Ok((doc, body)) => credential(&doc, body),
        Err(_) => crate::content::scan([("text", Prose, text), ("path", Id, rel_path)]),
    }
}

/// The one credential check ([`crate::content::scan`]) over a parsed document.
fn credential(doc: &Document, body: &str) -> Option<CredentialHit> {
    use crate::content::FieldKind::Id;
    let joined = doc.tags.join(" ");
    crate::content::scan(
        crate::content::content_fields(doc.privacy, body, Some(&doc.title), &doc.tags, &joined)
            .into_iter()
            .chain([
                ("path", Id, doc.rel_path.as_str()),
                ("id", Id, doc.doc_id.as_str()),
                ("kind", Id, doc.kind.as_str()),
            ]),
    )
}

/// The document id: `doc-<pathHash8>`, or `doc-id-<id>` from a valid
/// front matter `id`.
fn doc_id_of(rel_path: &str, front_id: Option<&str>) -> Result<String> {
    Ok(match front_id.map(str::trim) {
        None => ids::doc_id(rel_path),
        Some(key) if ids::valid_doc_key(key) => ids::doc_id_from_key(key),
        // Never echoed: reported by the credential check instead.
        Some(key)
            if crate::content::scan([("id", crate::content::FieldKind::Id, key)]).is_some() =>
        {
            ids::doc_id_from_key(key)
        }
        Some(key) => {
            return Err(Error::invalid(format!(
                "front matter: `id: {key}` must be 1-64 ASCII letters, digits, `_` or `-`, starting with a letter or digit"
            )));
        }
    })
}

/// [`parse`] without the credential check; also returns the body.
fn parse_unchecked<'t>(
    rel_path: &str,
    text: &'t str,
    cfg: &DocsConfig,
    pins: &PrivacyConfig,
) -> Result<(Document, &'t str)> {
    let (fm, body) = front_matter(text)?;

    if let (Some(scene), Some(audience)) = (&fm.scene, &fm.audience)
        && scene != audience
    {
        return Err(Error::invalid(format!(
            "front matter: `scene: {scene}` and `audience: {audience}` disagree; give one"
        )));
    }
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

    pins.check_pinned(privacy, &scene)?;
    let doc_id = doc_id_of(rel_path, fm.id.as_deref())?;

    let sections = sections(body);
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
    let doc = Document {
        rel_path: rel_path.to_string(),
        doc_id,
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
    };
    Ok((doc, body))
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

/// Markdown documents under `memories/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct DocsConfig {
    /// Scene of a document whose front matter names none.
    pub(crate) default_scene: Scene,
    /// Sections longer than this many characters are split at paragraph breaks.
    pub(crate) max_chunk_chars: usize,
}

impl Default for DocsConfig {
    fn default() -> Self {
        DocsConfig {
            default_scene: Scene::parse("main").expect("built-in scene names are valid"),
            max_chunk_chars: 1200,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> DocsConfig {
        DocsConfig::default()
    }

    #[test]
    fn front_matter_id_names_the_document() {
        let parse_id = |fm: &str| {
            parse(
                "notes/a.md",
                &format!("---\n{fm}\n---\nbody\n"),
                &cfg(),
                &PrivacyConfig::default(),
            )
            .map(|d| d.doc_id)
        };
        assert_eq!(parse_id("id: trip-2026_a").unwrap(), "doc-id-trip-2026_a");
        assert_eq!(parse_id("title: x").unwrap(), ids::doc_id("notes/a.md"));
        for bad in [
            "id: ../x",
            "id: -x",
            "id: a b",
            "id: 旅行",
            "id:",
            "id: [a]",
        ] {
            assert!(parse_id(bad).is_err(), "{bad}");
        }
        assert!(parse_id(&format!("id: {}", "a".repeat(65))).is_err());
    }

    #[test]
    fn front_matter_and_headings() {
        let text = "---\ntitle: Trip notes\ntags: [travel, 公园]\nscene: qq:owner\nprivacy: personal\n---\nIntro line.\n\n# Day one\nWe walked in the park.\n\n## Lunch\n吃了面条。\n";
        let doc = parse("notes/trip.md", text, &cfg(), &PrivacyConfig::default()).unwrap();
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
        let doc = parse(
            "user/identity.md",
            "# Who I am\nI am Ada.",
            &cfg(),
            &PrivacyConfig::default(),
        )
        .unwrap();
        assert_eq!(doc.title, "Who I am");
        assert_eq!(doc.kind, "identity");
        assert_eq!(doc.scene.as_str(), "main");
        let doc = parse(
            "misc/plain.md",
            "just text",
            &cfg(),
            &PrivacyConfig::default(),
        )
        .unwrap();
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
            let err = parse("a.md", text, &cfg(), &PrivacyConfig::default()).unwrap_err();
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    /// The billion-laughs shape: nine levels of nine aliases each.
    pub(crate) fn alias_bomb() -> String {
        let mut s = String::from(
            "---\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for w in names.windows(2) {
            let (prev, next) = (w[0], w[1]);
            s.push_str(&format!("{next}: &{next} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
        }
        s.push_str("privacy: normal\n---\nboom\n");
        s
    }

    #[test]
    fn front_matter_outside_the_plain_subset_is_refused() {
        let pins = PrivacyConfig::default();
        let big = format!("---\ntitle: {}\n---\nx", "y".repeat(MAX_FRONT_MATTER_BYTES));
        let deep = format!("---\ntitle: {}{}\n---\nx", "[".repeat(40), "]".repeat(40));
        for (text, needle) in [
            (alias_bomb().as_str(), "anchors"),
            ("---\ntitle: *x\n---\nx", "invalid YAML"),
            ("---\ntags: !!set {a: 1}\n---\nx", "tags"),
            ("---\nprivacy: secret\nprivacy: normal\n---\nx", "twice"),
            ("---\n[a]: 1\n---\nx", "keys"),
            ("---\n- a\n- b\n---\nx", "mapping"),
            ("---\nprivacy:\n---\nx", "`privacy` is empty"),
            ("---\nscene: ~\n---\nx", "`scene` is empty"),
            ("---\nprivacy: [secret]\n---\nx", "front matter"),
            ("---\nprivacy: top-secret\n---\nx", "privacy"),
            ("---\nscene: main\naudience: qq:group:1\n---\nx", "disagree"),
            ("---\nprivacy: secret\nnever closed\n", "never closed"),
            ("---\nprivacy: secret\n", "never closed"),
            ("\n\n---\r\nprivacy: secret\r\n", "never closed"),
            ("\u{feff}---\nprivacy: secret\n", "never closed"),
            (big.as_str(), "16 KiB"),
            (deep.as_str(), "deeper"),
            (
                "---\nprivacy: secret\nscene: qq:group:42\n---\nx",
                "secret memories may only live in [main]",
            ),
            (
                "---\nprivacy: sensitive\nscene: qq:group:42\n---\nx",
                "sensitive memories",
            ),
        ] {
            let err = parse("a.md", text, &cfg(), &pins)
                .map(|d| d.privacy)
                .expect_err(text);
            assert!(err.to_string().contains(needle), "{text:?}: {err}");
            assert_eq!(err.code().as_str(), "INVALID_INPUT", "{text:?}");
        }
    }

    #[test]
    fn front_matter_fences_and_scalars() {
        let pins = PrivacyConfig::default();
        let check = |text: &str, privacy: Privacy, first_chunk: &str| {
            let doc = parse("a.md", text, &cfg(), &pins).unwrap();
            assert_eq!(doc.privacy, privacy, "{text:?}");
            assert_eq!(doc.chunks[0].text, first_chunk, "{text:?}");
        };
        check(
            "---\nprivacy: personal\n---\nbody",
            Privacy::Personal,
            "body",
        );
        check(
            "---\r\nprivacy: personal\r\n---\r\nbody",
            Privacy::Personal,
            "body",
        );
        check(
            "\u{feff}---\nprivacy: secret\n...\nbody",
            Privacy::Secret,
            "body",
        );
        check(
            "\n  \n---  \nprivacy: personal\n---\nbody",
            Privacy::Personal,
            "body",
        );
        check("---\n---\nbody", Privacy::Normal, "body");
        check("---\n# only a comment\n---\nbody", Privacy::Normal, "body");
        // A rule further down the body is not front matter.
        check(
            "body\n\n---\nprivacy: secret\n",
            Privacy::Normal,
            "body\n\n---\nprivacy: secret",
        );
        let doc = parse(
            "a.md",
            "---\ntitle: \"42\"\nimportance: 0.9\ntags:\n  - x\n  - y\ndate: 2024-01-02\n---\nb",
            &cfg(),
            &pins,
        )
        .unwrap();
        assert_eq!(doc.title, "42");
        assert_eq!(doc.importance, 0.9);
        assert_eq!(doc.tags, ["x", "y"]);
    }

    #[test]
    fn the_alias_bomb_is_refused_before_anything_is_built() {
        // Parsing a file that expands to 9^9 strings would take minutes and
        // gigabytes; refusing it takes microseconds. No time bound is
        // asserted: finishing at all is the point.
        let err = parse("bomb.md", &alias_bomb(), &cfg(), &PrivacyConfig::default()).unwrap_err();
        assert!(err.to_string().contains("anchors"), "{err}");
        assert!(alias_bomb().len() < 400);
    }

    #[test]
    fn long_sections_split_at_paragraphs() {
        let para = "word ".repeat(100);
        let text = format!("# H\n{para}\n\n{para}\n\n{para}");
        let mut c = cfg();
        c.max_chunk_chars = 1100;
        let doc = parse("a.md", &text, &c, &PrivacyConfig::default()).unwrap();
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
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), m.join("link.md")).unwrap();
        std::os::unix::fs::symlink(outside.path(), m.join("linked-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), m.join("other.txt")).unwrap();
        let listing = scan(m).unwrap();
        assert_eq!(listing.documents, ["a.md", "user/identity.md"]);
        assert_eq!(listing.links, ["link.md", "linked-dir"]);
        let err = read_bounded(&m.join("link.md")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    /// Values that `format!`-built front matter gets wrong come back exactly
    /// as written through the emitter, in a document the parser accepts.
    #[test]
    fn emitted_front_matter_round_trips_awkward_values() {
        let awkward = [
            "plain",
            "say \"hi\"",
            "it's",
            "a: b",
            "key:value",
            "line one\nline two",
            "trailing newline\n",
            "季度预算评审",
            "日本語のメモ: テスト",
            "- leading dash",
            "---",
            "...",
            "# not a comment",
            "[not, a, list]",
            "{not: a map}",
            "&anchor",
            "*alias",
            "!tag",
            "null",
            "~",
            "true",
            "no",
            "2024",
            "1.5",
            "0x1f",
            ".hidden",
            " padded ",
            "",
            "tab\there",
            "back\\slash",
            "emoji 🧠",
            "line\u{2028}separator",
            "bom\u{feff}inside",
        ];
        for value in awkward {
            let fields = [
                ("title", FrontValue::Text(value.to_string())),
                (
                    "tags",
                    FrontValue::List(vec![value.to_string(), "x".into()]),
                ),
                ("importance", FrontValue::Number(0.25)),
            ];
            let front =
                render_front_matter(&fields).unwrap_or_else(|e| panic!("{value:?} refused: {e}"));
            let doc = format!("{front}\nbody\n");
            let (back, body) = split(&doc).unwrap();
            assert_eq!(back["title"], value, "{front}");
            assert_eq!(back["tags"][0], value, "{front}");
            assert_eq!(back["importance"], 0.25, "{front}");
            assert_eq!(body, "\nbody\n");
        }
        // A value the emitter would leave bare is refused, never garbled.
        for control in ["ding\u{7}", "esc\u{1b}[0m", "del\u{7f}"] {
            match render_front_matter(&[("title", FrontValue::Text(control.into()))]) {
                Ok(front) => assert_eq!(split(&front).unwrap().0["title"], control),
                Err(e) => assert_eq!(e.code().as_str(), "INVALID_INPUT", "{control:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Any printable text (any script, quotes, colons, dashes, line
        /// breaks) reads back exactly as emitted.
        #[test]
        fn any_printable_text_round_trips(value in "[\\PC\n\t]{0,40}") {
            let front = render_front_matter(&[("title", FrontValue::Text(value.clone()))]).unwrap();
            let (back, _) = split(&front).unwrap();
            proptest::prop_assert_eq!(back["title"].as_str(), Some(value.as_str()));
        }
    }
}
