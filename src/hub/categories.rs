//! Categories: the always-injected policy slots (company values,
//! architecture, coding requirements, custom), stored as T0 Markdown
//! documents by [`crate::store::categories`] and indexed like any document.
//! Bootstrap includes every category the caller may see.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Hub;
use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::policy;
use crate::store::categories as store;

/// The category slots.
pub const CATEGORY_SLOTS: &[&str] = store::SLOTS;

/// One category slot and its current text.
#[derive(Debug, Clone, Serialize)]
pub struct Category {
    /// The slot.
    pub slot: String,
    /// Its document id (`get` returns it).
    pub id: String,
    /// The current text.
    pub text: String,
    /// When it was last set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<DateTime<Utc>>,
    /// Earlier versions, oldest first (paths below `memories/`).
    pub revisions: Vec<String>,
}

impl Hub {
    /// Every slot that has a text, in slot order.
    pub fn categories(&self) -> Result<Vec<Category>> {
        let mut out = Vec::new();
        for slot in store::SLOTS {
            if let Some(c) = self.category(slot)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// One slot, if it has a text.
    pub fn category(&self, slot: &str) -> Result<Option<Category>> {
        store::check_slot(slot)?;
        let memories = self.layout().memories();
        let Some((text, updated)) = store::read(&memories, slot)? else {
            return Ok(None);
        };
        Ok(Some(Category {
            slot: slot.to_string(),
            id: crate::ids::doc_id(&store::rel_path(slot)),
            text,
            updated,
            revisions: store::revisions(&memories, slot)?,
        }))
    }

    /// The categories visible under `filter` (bootstrap).
    pub fn visible_categories(&self, filter: &Filter) -> Result<Vec<Category>> {
        let mut out = Vec::new();
        for c in self.categories()? {
            match self.get(&c.id, filter) {
                Ok(_) => out.push(c),
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Sets a slot's text (the previous one is kept as a revision) and indexes it.
    pub fn set_category(&self, slot: &str, text: &str, source: &str) -> Result<Category> {
        store::check_slot(slot)?;
        let text = policy::normalize_content(text);
        if text.is_empty() {
            return Err(Error::invalid("category text must not be empty"));
        }
        if text.len() > crate::model::MAX_TEXT_BYTES {
            return Err(Error::invalid(format!(
                "category text is {} bytes; the limit is {}",
                text.len(),
                crate::model::MAX_TEXT_BYTES
            )));
        }
        if let Some(what) = policy::detect_credential(&text) {
            return Err(Error::invalid(format!(
                "content appears to contain {what}; credentials are refused"
            )));
        }
        {
            let _writer = self.writer_state()?;
            store::write(&self.layout().memories(), slot, &text, source, self.now())?;
        }
        self.sync_documents()?;
        self.category(slot)?
            .ok_or_else(|| Error::Internal("category vanished after writing".into()))
    }
}
