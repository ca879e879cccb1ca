//! Use case: the forgotten memories a caller may read (`POST /v1/forgotten`),
//! so that a person can find one and bring it back with `POST /v1/restore`
//! (a journal line like any write; see [`super::restore`]).
//!
//! The caller's read filter is part of the index query, as for search: what
//! the caller may not read is neither listed nor counted. Each item says
//! whether this caller may restore it (the rights of forgetting it: its
//! write scenes and privacy scopes). Listing writes nothing.

use super::caller::Visibility;
use super::read::{MAX_PAGE, parse_before};
use super::{Caller, Hub};
use crate::api::{ForgottenBody, ForgottenItem, ForgottenReply};
use crate::error::{Error, Result};

impl Hub {
    /// Forgotten memories `caller` may read, the most recently forgotten
    /// first (default 20 per page).
    pub fn forgotten(&self, caller: &Caller, body: ForgottenBody) -> Result<ForgottenReply> {
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let limit = body.limit.unwrap_or(20);
        if limit == 0 || limit > MAX_PAGE {
            return Err(Error::invalid(format!(
                "limit must be between 1 and {MAX_PAGE}"
            )));
        }
        let before = body.before.as_deref().map(parse_before).transpose()?;
        let meta = &self.core.index.meta;
        let mut rows = meta.forgotten(&filter, before.as_ref(), limit + 1)?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_before = more
            .then(|| rows.last())
            .flatten()
            .map(|r| format!("{}~{}", r.forgotten_at.timestamp_millis(), r.memory.id));
        // A token without write rights restores nothing; that is no error here.
        let writable = caller.writable().ok();
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            let restorable = match &writable {
                Some(w) => meta.version_row(&row.memory.id, w)?.is_some(),
                None => false,
            };
            items.push(ForgottenItem {
                memory: row.memory,
                forgotten_at: row.forgotten_at,
                restorable,
            });
        }
        Ok(ForgottenReply { items, next_before })
    }
}
