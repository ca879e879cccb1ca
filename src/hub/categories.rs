//! Use case: categories (`POST /v1/categories`, `memory_category`):
//! always-injected policy slots (BHGBrain's company-values, architecture,
//! coding-requirements, custom), kept as ordinary Markdown documents
//! `memories/categories/<name>.md` with T0 front matter.
//!
//! Reading uses the caller's read filter like every read; `set` and
//! `delete` need `*` (categories are injected into every session: standing
//! policy is set by the owner's full-rights token only) and the right to
//! forget what is there now (an existing category in another scene is
//! `FORBIDDEN`). A new category lives in the request's scene.
//!
//! Being documents, they are indexed, searchable and visible under the same
//! scene/privacy rules as any other memory, a human can edit them in an
//! editor, and `memd reindex` rebuilds them like everything else. The file
//! format and the writes are [`crate::store::categories`]'s (which keeps the
//! replaced version under `categories/.revisions/`, never indexed); this
//! file holds the rules and re-syncs documents through the writer.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Caller, Hub};
use crate::api::{CategoriesBody, CategoryAction};
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::ids;
use crate::index::filter::Filter;
use crate::model::{Privacy, Scene};
use crate::store::categories as store;

/// The slots a category may fill.
pub const SLOTS: &[&str] = crate::model::CATEGORY_SLOTS;

/// Largest category content, in characters.
pub(crate) const MAX_CONTENT_CHARS: usize = 100_000;

/// One category.
#[derive(Debug, Clone, Serialize)]
pub struct Category {
    /// Unique name, e.g. `coding-standards`.
    pub(crate) name: String,
    /// One of [`SLOTS`].
    pub slot: String,
    /// The scene it belongs to.
    pub(crate) scene: Scene,
    /// Its document id.
    pub doc_id: String,
    /// When the file was last written.
    pub(crate) updated_at: DateTime<Utc>,
    /// The first 200 characters (list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) preview: Option<String>,
    /// The full Markdown content (get/set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Earlier versions, oldest first (paths below `memories/`; not indexed).
    pub revisions: Vec<String>,
}

/// What `/v1/categories` answers.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum CategoriesReply {
    /// `list`: every visible category with a preview.
    Listing {
        /// By name.
        categories: Vec<Category>,
    },
    /// `get` and `set`: one category in full.
    One(Category),
    /// `delete`.
    Deleted {
        /// Always true.
        ok: bool,
        /// The category removed.
        name: String,
    },
}

impl CategoriesReply {
    /// The document ids the reply shows.
    pub fn doc_ids(&self) -> Vec<String> {
        match self {
            CategoriesReply::Listing { categories } => {
                categories.iter().map(|c| c.doc_id.clone()).collect()
            }
            CategoriesReply::One(c) => vec![c.doc_id.clone()],
            CategoriesReply::Deleted { .. } => Vec::new(),
        }
    }
}

/// Checks a category name: lowercase letters, digits and `-`, 1-64 bytes.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "category name {name:?} must be 1-64 lowercase letters, digits or '-'"
        )))
    }
}

fn preview(body: &str) -> String {
    let flat = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut p: String = flat.chars().take(200).collect();
    if flat.chars().count() > 200 {
        p.push('…');
    }
    p
}

/// "No category with id `name`" when the category is not visible; any other
/// failure (storage, index) stays what it is.
fn missing_category(e: Error, name: &str) -> Error {
    match e {
        Error::NotFound { .. } => Error::not_found("category", name),
        other => other,
    }
}

impl Hub {
    /// Lists, reads, sets or deletes categories for `caller` (see the module docs).
    pub fn categories(&self, caller: &Caller, body: CategoriesBody) -> Result<CategoriesReply> {
        let scene = caller.scene(body.scene.as_deref())?;
        let name = || {
            body.name.clone().ok_or_else(|| {
                Error::invalid(format!("action {:?} needs a name", body.action.as_str()))
            })
        };
        match body.action {
            CategoryAction::List => {
                let filter = caller.read_filter(None, false)?;
                Ok(CategoriesReply::Listing {
                    categories: categories_in(self, &filter)?,
                })
            }
            CategoryAction::Get => {
                let filter = caller.read_filter(None, false)?;
                Ok(CategoriesReply::One(category(self, &name()?, &filter)?))
            }
            CategoryAction::Set => {
                caller.require(scope::ALL)?;
                caller.check_write(Privacy::Normal)?;
                let writable = caller.writable()?;
                let name = name()?;
                let slot = body.slot.clone().unwrap_or_else(|| "custom".into());
                let content = body
                    .content
                    .clone()
                    .ok_or_else(|| Error::invalid("action \"set\" needs content"))?;
                let c = set_category(self, &name, &slot, &scene, &content, &writable)?;
                Ok(CategoriesReply::One(c))
            }
            CategoryAction::Delete => {
                caller.require(scope::ALL)?;
                let writable = caller.writable()?;
                let name = name()?;
                delete_category(self, &name, &writable)?;
                Ok(CategoriesReply::Deleted { ok: true, name })
            }
        }
    }
}

/// Reads one category visible under `filter`.
fn read_category(hub: &Hub, name: &str, filter: &Filter, full: bool) -> Result<Category> {
    check_name(name)?;
    let rel = store::rel_path(name);
    let doc_id = ids::doc_id(&rel);
    let visible = hub
        .fetch(&doc_id, filter)
        .map_err(|e| missing_category(e, name))?;
    let path = hub.layout().memories().join(&rel);
    // Never through a link (see `store::links`).
    let (bytes, _) = crate::store::markdown::read_bounded(&path)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let updated_at = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .map(DateTime::<Utc>::from)
        .unwrap_or(visible.ts);
    let (slot, body) = store::parse(&text);
    Ok(Category {
        name: name.to_string(),
        slot,
        scene: visible.scene,
        doc_id,
        updated_at,
        preview: (!full).then(|| preview(&body)),
        content: full.then_some(body),
        revisions: store::revisions(&hub.layout().memories(), name),
    })
}

/// One category in full.
fn category(hub: &Hub, name: &str, filter: &Filter) -> Result<Category> {
    read_category(hub, name, filter, true)
}

/// Every category visible under `filter`, by name, with previews.
pub(crate) fn categories_in(hub: &Hub, filter: &Filter) -> Result<Vec<Category>> {
    let dir = hub.layout().memories().join("categories");
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".md").map(str::to_string)
            })
            .filter(|n| check_name(n).is_ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    let mut out = Vec::new();
    for name in names {
        match read_category(hub, &name, filter, false) {
            Ok(c) => out.push(c),
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Creates or replaces a category in `scene`. `writable` must let the
/// caller forget memories in the scene of an existing category.
fn set_category(
    hub: &Hub,
    name: &str,
    slot: &str,
    scene: &Scene,
    content: &str,
    writable: &Filter,
) -> Result<Category> {
    check_name(name)?;
    if !SLOTS.contains(&slot) {
        return Err(Error::invalid(format!(
            "slot must be one of {}; got {slot:?}",
            SLOTS.join(", ")
        )));
    }
    let content = content.trim();
    if content.is_empty() {
        return Err(Error::invalid("category content must not be empty"));
    }
    if content.chars().count() > MAX_CONTENT_CHARS {
        return Err(Error::invalid(format!(
            "category content is limited to {MAX_CONTENT_CHARS} characters"
        )));
    }
    if let Some(what) = crate::content::detect_credential(content) {
        return Err(Error::invalid(format!(
            "content appears to contain {what}; credentials are refused"
        )));
    }
    let rel = store::rel_path(name);
    let path = hub.layout().memories().join(&rel);
    if path.exists() {
        // Replacing needs the right to forget what is there now.
        hub.fetch(&ids::doc_id(&rel), writable)
            .map_err(|e| match e {
                Error::NotFound { .. } => {
                    Error::Forbidden(format!("category {name} belongs to another scene"))
                }
                other => other,
            })?;
    }
    store::write(
        &hub.layout().memories(),
        &store::CategoryFile {
            name,
            slot,
            scene,
            content,
            updated: hub.now(),
        },
    )?;
    hub.sync_documents()?;
    category(hub, name, writable)
}

/// Removes a category the caller may write.
fn delete_category(hub: &Hub, name: &str, writable: &Filter) -> Result<()> {
    check_name(name)?;
    let rel = store::rel_path(name);
    hub.fetch(&ids::doc_id(&rel), writable)
        .map_err(|e| missing_category(e, name))?;
    store::remove(&hub.layout().memories(), name)?;
    hub.sync_documents()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_files() {
        for (name, ok) in [
            ("coding-standards", true),
            ("a1", true),
            ("", false),
            ("Upper", false),
            ("-x", false),
            ("../etc", false),
            ("a b", false),
        ] {
            assert_eq!(check_name(name).is_ok(), ok, "{name}");
        }
    }
}
