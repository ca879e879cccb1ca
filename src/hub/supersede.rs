//! Use case: a new version of a memory (a write with `supersedes`).
//!
//! The write path ([`super::write`]) hands the request here; the rules of
//! replacing live in this one place:
//!
//! - Replacing needs the same right as forgetting: the old memory must be
//!   active and visible under the caller's writable filter
//!   (`Caller::writable`: its write scenes and privacy scopes), else
//!   `NOT_FOUND` (whether or not it exists).
//! - The new version inherits every field the request does not set from the
//!   version it replaces: scene, kind, title, tags, privacy, subject,
//!   importance, tier, stage, event time, session and speaker (an empty
//!   string clears a text field, `tags: []` clears the tags). Who writes it
//!   (`source`) and its idempotency key are the caller's own. The result
//!   then meets every rule of a new memory ([`super::write`]): an inherited
//!   `subject: owner` or tier `t0` needs `*` as if it were asked for.
//! - Privacy may go up or down with the new version. Raising it needs the
//!   scope of the higher level; lowering needs what writing at the lower
//!   level needs (nothing more: whoever may write the old version can read
//!   it and could write its text at the lower level anyway). A memory pinned
//!   to its audiences stays pinned (the writer's rule).
//! - Versions form a line: only the newest version can be replaced; an
//!   older one is `CONFLICT` naming the newest when the caller may see it
//!   (checked in the writer's commit group, with the append, so a forget or
//!   another supersede committed meanwhile cannot slip between them).
//! - The old memory stops matching searches once the new version is indexed
//!   (its expiry becomes the epoch, see [`crate::index::lifecycle`]), and a
//!   later forget of the new version does not bring it back.

use super::write::write_request;
use super::{Caller, Hub, WriteOutcome};
use crate::api::WriteBody;
use crate::error::{Error, Result};
use crate::model::{Memory, Stage};

impl Hub {
    /// Writes `body` as the new version of `old` for `caller` (see the module docs).
    pub(crate) fn supersede(
        &self,
        caller: &Caller,
        body: WriteBody,
        old: &str,
    ) -> Result<WriteOutcome> {
        let filter = caller.writable()?;
        let previous = self
            .core
            .index
            .meta
            .version_row(old, &filter)?
            .filter(|r| !r.forgotten)
            .ok_or_else(|| Error::not_found("memory", old))?
            .memory;
        let keeps_time = body.time.is_none();
        let body = inherit(body, &previous);
        let mut req = write_request(self, caller, body)?;
        if keeps_time {
            // The event time as it was parsed when it was written ("last
            // Friday" keeps meaning the Friday before that write).
            req.setting.time = previous.setting.time.clone();
            req.setting.time_at = previous.setting.time_at;
        }
        req.supersede_filter = Some(filter);
        req.supersedes = Some(old.to_string());
        self.append(req)
    }
}

/// `body` with every field it does not set taken from `old`.
fn inherit(mut body: WriteBody, old: &Memory) -> WriteBody {
    let stage = *body.stage.get_or_insert(old.stage);
    body.scene.get_or_insert_with(|| old.scene.to_string());
    body.kind.get_or_insert_with(|| old.kind.clone());
    if body.title.is_none() {
        body.title = old.title.clone();
    }
    body.tags.get_or_insert_with(|| old.tags.clone());
    body.privacy.get_or_insert(old.privacy);
    if body.subject.is_none() {
        body.subject = Some(old.subject);
    }
    body.importance.get_or_insert(old.importance);
    if body.tier.is_none() && stage == Stage::Long && old.stage == Stage::Long {
        body.tier = old.tier;
    }
    if body.time.is_none() {
        body.time = old.setting.time.clone();
    }
    if body.session.is_none() {
        body.session = old.setting.session.clone();
    }
    if body.speaker.is_none() {
        body.speaker = old.setting.speaker.clone();
    }
    body
}
