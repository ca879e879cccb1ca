//! Use cases: the documents a caller may read (`POST /v1/documents`) and
//! one whole document (`POST /v1/document`), for the console's document
//! pages.
//!
//! Both are scoped exactly like search: the caller's read filter is part of
//! the index query, so a document the caller may not read is neither listed
//! nor counted, and reading it answers `NOT_FOUND` as for an id that does not
//! exist. A document's chunks share its scene and privacy, so it is visible
//! whole or not at all.
//!
//! The whole document is its file's Markdown body (front matter left out)
//! when the file's bytes still hash to what was indexed: then it is exactly
//! what the index let the caller see, with its tables and heading levels.
//! When the file changed since (its front matter may now say `secret`), the
//! body is rebuilt from the indexed sections instead, until the index has
//! read the file again. Reading writes nothing.

use super::caller::Visibility;
use super::read::MAX_PAGE;
use super::{Caller, Hub};
use crate::api::{
    DocumentBody, DocumentReply, DocumentSection, DocumentSource, DocumentSummary, DocumentsBody,
    DocumentsReply,
};
use crate::error::{Error, Result};
use crate::ids;
use crate::index::meta::DocumentRow;
use crate::model::Memory;
use crate::store::markdown;

impl Hub {
    /// The documents `caller` may read, by path (default 50 per page).
    pub fn documents(&self, caller: &Caller, body: DocumentsBody) -> Result<DocumentsReply> {
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let limit = body.limit.unwrap_or(50);
        if limit == 0 || limit > MAX_PAGE {
            return Err(Error::invalid(format!(
                "limit must be between 1 and {MAX_PAGE}"
            )));
        }
        let mut rows =
            self.core
                .index
                .meta
                .document_list(&filter, body.after.as_deref(), limit + 1)?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_after = more
            .then(|| rows.last().and_then(|r| r.first.path.clone()))
            .flatten();
        let documents = rows
            .into_iter()
            .map(|r| summary(r.first, r.title, r.chunks))
            .collect();
        Ok(DocumentsReply {
            documents,
            next_after,
        })
    }

    /// Document `body.id` (or the document of a chunk id) whole, if
    /// `caller` may read it (see the module docs).
    pub fn document(&self, caller: &Caller, body: DocumentBody) -> Result<DocumentReply> {
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let doc_id = body.id.split('#').next().unwrap_or_default();
        let not_found = || Error::not_found("document", body.id.clone());
        if !ids::is_doc_id(doc_id) {
            return Err(not_found());
        }
        let meta = &self.core.index.meta;
        let chunks = meta.doc_chunks(doc_id, &filter)?;
        let Some(first) = chunks.first().cloned() else {
            return Err(not_found());
        };
        let row = meta.document_row(doc_id)?;
        let (markdown, source) = match row.as_ref().and_then(|r| file_body(self, r)) {
            Some(text) => (text, DocumentSource::File),
            None => (from_sections(&chunks), DocumentSource::Index),
        };
        let sections = chunks
            .iter()
            .map(|c| DocumentSection {
                id: c.id.clone(),
                heading: section_heading(c),
            })
            .collect();
        let title = row.map(|r| r.title);
        Ok(DocumentReply {
            summary: summary(first, title, chunks.len()),
            markdown,
            source,
            sections,
        })
    }
}

/// A list entry from a document's first chunk.
fn summary(first: Memory, title: Option<String>, chunks: usize) -> DocumentSummary {
    let title = title
        .filter(|t| !t.trim().is_empty())
        .or_else(|| {
            first
                .title
                .as_deref()
                .map(|t| t.split(" › ").next().unwrap_or(t).to_string())
        })
        .unwrap_or_else(|| first.path.clone().unwrap_or_default());
    DocumentSummary {
        id: first.doc_id.clone().unwrap_or_else(|| first.id.clone()),
        path: first.path.unwrap_or_default(),
        title,
        scene: first.scene,
        privacy: first.privacy,
        kind: first.kind,
        tags: first.tags,
        ts: first.ts,
        chunks,
    }
}

/// The file's Markdown body, if its bytes are still the ones indexed.
fn file_body(hub: &Hub, row: &DocumentRow) -> Option<String> {
    let path = hub.layout().memories().join(&row.path);
    let (bytes, _) = markdown::read_bounded(&path).ok()?;
    // The recorded hash is `<sha256 of the bytes>:<rules>`.
    let indexed = row.hash.split(':').next().unwrap_or_default();
    if ids::sha256_hex(&bytes) != indexed {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let (_, body) = markdown::split(&text).ok()?;
    Some(body.trim_start_matches('\n').to_string())
}

/// The heading a chunk sits under: the last part of its title.
fn section_heading(chunk: &Memory) -> Option<String> {
    let title = chunk.title.as_deref()?;
    let (_, heading) = title.rsplit_once(" › ")?;
    Some(heading.to_string())
}

/// A body rebuilt from the indexed sections: each section's heading (the
/// first line of its text) as a level-two heading (the document's own
/// title, at the top, as level one), then its text.
fn from_sections(chunks: &[Memory]) -> String {
    let mut out = Vec::new();
    let mut last_heading: Option<String> = None;
    for c in chunks {
        let heading = section_heading(c);
        if heading.is_none()
            && let Some(title) = c.title.as_deref()
            && let Some(rest) = c.text.strip_prefix(&format!("{title}\n"))
        {
            out.push(format!("# {title}"));
            out.push(rest.trim_start_matches('\n').to_string());
            continue;
        }
        let mut text = c.text.as_str();
        if let Some(h) = &heading
            && let Some(rest) = text.strip_prefix(h.as_str())
        {
            text = rest.trim_start_matches('\n');
            if last_heading.as_ref() != Some(h) {
                out.push(format!("## {h}"));
            }
        }
        last_heading = heading;
        out.push(text.to_string());
    }
    out.join("\n\n")
}
