//! Category files: `memories/categories/<name>.md`, ordinary Markdown
//! documents whose front matter makes them T0 policy slots, and the earlier
//! versions kept under `categories/.revisions/` (a dot directory, never
//! indexed).
//!
//! The hub decides who may write which category ([`crate::hub`]); this file
//! owns the format and the files. Front matter is emitted by a YAML emitter
//! (`markdown::render_front_matter`), so a scene, slot or title comes back
//! exactly as it was written, and read with the document parser. Writing
//! keeps the version being replaced as a revision, then replaces the file
//! durably.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::markdown::{self, FrontValue};
use crate::base::durable;
use crate::error::{IoContext, Result};
use crate::model::{CATEGORY_SLOTS, Scene};

/// Where earlier versions are kept, relative to `memories/`.
pub(crate) const REVISIONS: &str = "categories/.revisions";

/// A category as written to its file.
#[derive(Debug, Clone)]
pub(crate) struct CategoryFile<'a> {
    /// Its name (checked by the hub: lowercase letters, digits, `-`).
    pub(crate) name: &'a str,
    /// One of [`CATEGORY_SLOTS`].
    pub(crate) slot: &'a str,
    /// The scene it belongs to.
    pub(crate) scene: &'a Scene,
    /// The Markdown body.
    pub(crate) content: &'a str,
    /// When it is written.
    pub(crate) updated: DateTime<Utc>,
}

/// Path of a category relative to `memories/`.
pub(crate) fn rel_path(name: &str) -> String {
    format!("categories/{name}.md")
}

/// The file's text: front matter, a blank line, the content.
pub(crate) fn render(file: &CategoryFile<'_>) -> Result<String> {
    let text = |s: &str| FrontValue::Text(s.to_string());
    let front = markdown::render_front_matter(&[
        ("title", text(file.name)),
        ("kind", text("category")),
        (
            "tags",
            FrontValue::List(vec!["category".into(), file.slot.to_string()]),
        ),
        ("scene", text(file.scene.as_str())),
        ("privacy", text("normal")),
        ("tier", text("t0")),
        ("importance", FrontValue::Number(1.0)),
        ("updated", text(&file.updated.to_rfc3339())),
    ])?;
    Ok(format!("{front}\n{}\n", file.content))
}

/// Splits a category file into its slot (the last tag that is a slot,
/// else `custom`) and its body.
pub(crate) fn parse(text: &str) -> (String, String) {
    let (front, body) = match markdown::split(text) {
        Ok(parts) => parts,
        // An unreadable file still shows its text; the index reports why.
        Err(_) => (serde_json::Value::Null, text),
    };
    let slot = front
        .get("tags")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .rfind(|t| CATEGORY_SLOTS.contains(t))
        .unwrap_or("custom")
        .to_string();
    (slot, body.trim_start_matches('\n').to_string())
}

/// Earlier versions of a category, oldest first (paths below `memories/`).
pub(crate) fn revisions(memories: &Path, name: &str) -> Vec<String> {
    let prefix = format!("{name}@");
    if super::links::first_link(memories, REVISIONS).is_some() {
        return Vec::new();
    }
    let mut out: Vec<String> = std::fs::read_dir(memories.join(REVISIONS))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| f.starts_with(&prefix) && f.ends_with(".md"))
                .map(|f| format!("{REVISIONS}/{f}"))
                .collect()
        })
        .unwrap_or_default();
    // The timestamp in the name sorts chronologically.
    out.sort();
    out
}

/// Writes a category: the version it replaces (if any) is kept as a
/// revision first, then the file is replaced durably.
pub(crate) fn write(memories: &Path, file: &CategoryFile<'_>) -> Result<()> {
    let text = render(file)?;
    // Nothing is read or written through a link (see `store::links`).
    for rel in [rel_path(file.name), REVISIONS.to_string()] {
        if let Some(link) = super::links::first_link(memories, &rel) {
            return Err(super::StoreError::Damaged {
                path: memories.join(link),
                problem: format!(
                    "{}; the category is not written",
                    super::links::NOT_FOLLOWED
                ),
            }
            .into());
        }
    }
    let path = memories.join(rel_path(file.name));
    let dir = path.parent().expect("categories/ is below memories/");
    std::fs::create_dir_all(dir).ctx("cannot create directory", dir)?;
    if let Ok(previous) = std::fs::read(&path) {
        // Categories are standing policy: their history matters.
        let revisions = memories.join(REVISIONS);
        std::fs::create_dir_all(&revisions).ctx("cannot create directory", &revisions)?;
        // Named by the write's time; when the clock stands still (a test
        // clock) the stamp moves on, so no revision replaces another.
        let mut at = file.updated;
        let revision = loop {
            let stamp = at.format("%Y%m%dT%H%M%S%.6fZ");
            let candidate = revisions.join(format!("{}@{stamp}.md", file.name));
            if !candidate.exists() {
                break candidate;
            }
            at += chrono::Duration::microseconds(1);
        };
        durable::write_atomic(&revision, &previous)?;
    }
    durable::write_atomic(&path, text.as_bytes())
}

/// Removes a category's file (its revisions stay).
pub(crate) fn remove(memories: &Path, name: &str) -> Result<()> {
    let path = memories.join(rel_path(name));
    std::fs::remove_file(&path).ctx("cannot remove category", &path)?;
    durable::sync_dir(path.parent().expect("categories/ is below memories/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::PrivacyConfig;

    fn file<'a>(scene: &'a Scene, content: &'a str) -> CategoryFile<'a> {
        CategoryFile {
            name: "coding-standards",
            slot: "architecture",
            scene,
            content,
            updated: "2026-11-30T03:00:00Z".parse().unwrap(),
        }
    }

    /// A category file is a valid document whose fields read back as written.
    #[test]
    fn a_category_reads_back_as_a_document_and_as_a_category() {
        for scene in ["main", "qq:group:123", "null", "2024", "true", "1.5", "-x"] {
            let Ok(scene) = Scene::parse(scene) else {
                continue;
            };
            let content = "# Rules\n\n---\nkey: value\n- not front matter";
            let text = render(&file(&scene, content)).unwrap();
            let doc = markdown::parse(
                "categories/coding-standards.md",
                &text,
                &markdown::DocsConfig::default(),
                &PrivacyConfig::default(),
            )
            .unwrap_or_else(|e| panic!("{scene}: {e}\n{text}"));
            assert_eq!(doc.scene, scene);
            assert_eq!(doc.title, "coding-standards");
            assert_eq!(doc.tags, ["category", "architecture"]);
            assert_eq!(doc.tier, Some(crate::model::Tier::T0));
            assert_eq!(
                parse(&text),
                ("architecture".into(), format!("{content}\n"))
            );
        }
        // Files written by earlier versions (inline tag lists) still parse.
        let old = "---\ntitle: \"x\"\nkind: category\ntags: [category, coding-requirements]\n---\n\n# Hi\n";
        assert_eq!(parse(old), ("coding-requirements".into(), "# Hi\n".into()));
        assert_eq!(parse("plain").0, "custom");
    }

    #[test]
    fn writing_keeps_the_replaced_version() {
        let dir = tempfile::tempdir().unwrap();
        let scene = Scene::parse("main").unwrap();
        write(dir.path(), &file(&scene, "first")).unwrap();
        let mut second = file(&scene, "second");
        second.updated = "2026-12-01T03:00:00Z".parse().unwrap();
        write(dir.path(), &second).unwrap();
        let revs = revisions(dir.path(), "coding-standards");
        assert_eq!(revs.len(), 1);
        let kept = std::fs::read_to_string(dir.path().join(&revs[0])).unwrap();
        assert_eq!(parse(&kept).1, "first\n");
        remove(dir.path(), "coding-standards").unwrap();
        assert!(!dir.path().join(rel_path("coding-standards")).exists());
        assert_eq!(revisions(dir.path(), "coding-standards").len(), 1);
    }
}
