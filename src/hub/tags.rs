//! Use cases: tag and importance edits (`POST /v1/tags`, `memory_tag`) and
//! the archive of expired memories (`POST /v1/archive/search`,
//! `/v1/archive/restore`, `memd archive search|restore`).
//!
//! An edit changes something (tags to add or remove, or an importance);
//! it needs `write` in the memory's scene (what the token may forget, it may
//! edit) and the memory unexpired; the fact keeps its id (a new `put` line);
//! a Markdown document is edited in its front matter instead. Searching expired memories and restoring one need `*`; the archive
//! applies the token's privacy scopes inside the query, as search does (a
//! memory the token may not read is `NOT_FOUND`), and a restore keeps to
//! what the token may also write. A restored memory lives another tier
//! lifetime (short-term: another `ingest.ttlHours`).

use super::{Caller, EditRequest, Hub};
use crate::api::{ArchiveReply, ArchiveSearchBody, EditAction, RestoreBody, TagsBody, TagsReply};
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::model::Memory;

impl Hub {
    /// Adds and removes tags and sets importance of a fact `caller` may write.
    pub fn tags(&self, caller: &Caller, body: TagsBody) -> Result<TagsReply> {
        if body.add.is_empty() && body.remove.is_empty() && body.importance.is_none() {
            return Err(Error::invalid(
                "give tags to `add` and/or `remove`, or an `importance`",
            ));
        }
        let mut filter = caller.writable()?;
        for s in &mut filter.any_of {
            s.unexpired_at = Some(caller.now());
        }
        let req = EditRequest {
            add_tags: body.add,
            remove_tags: body.remove,
            importance: body.importance,
        };
        let fact = self.lifecycle.edited(&self.core, &body.id, &req, &filter)?;
        let (tags, importance) = (fact.tags.clone(), fact.importance);
        let out = self.writer.rewrite(self.cx(), fact, &filter)?;
        // The reply shows what was written; reading it back is no retrieval.
        Ok(TagsReply {
            id: out.id,
            // An edit that succeeds rewrites the fact in place.
            action: EditAction::Update,
            tags,
            importance,
        })
    }

    /// Expired memories `caller` may read whose text or title contains the
    /// query, newest first (`limit` 1-100, default 20).
    pub fn archive_search(&self, caller: &Caller, body: ArchiveSearchBody) -> Result<ArchiveReply> {
        caller.require(scope::ALL)?;
        let filter = caller.archive_filter(false)?;
        let limit = body.limit.unwrap_or(20);
        if !(1..=100).contains(&limit) {
            return Err(Error::invalid("limit must be between 1 and 100"));
        }
        let items = self
            .lifecycle
            .search_expired(&self.core, &body.query, limit, &filter)?;
        Ok(ArchiveReply { items })
    }

    /// Brings an expired memory `caller` may read and write back for another
    /// tier lifetime.
    pub fn archive_restore(&self, caller: &Caller, body: RestoreBody) -> Result<Memory> {
        caller.require(scope::ALL)?;
        let filter = caller.archive_filter(true)?;
        let fact = self.lifecycle.restored(&self.core, &body.id, &filter)?;
        self.writer.rewrite(self.cx(), fact, &filter)?;
        self.fetch(&body.id, &filter)
    }
}
