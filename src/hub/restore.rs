//! Use case: bring a version back (`POST /v1/restore`, `memory_restore`,
//! `memd restore`): undo a forget, or make an older version current again.
//!
//! Forgetting the newest version of a memory hides its whole line (the
//! older versions stay superseded, see [`crate::index::lifecycle`]); a
//! person brings one back only on purpose, here. Every restore is a journal
//! line like any other write, never an edit of the journal:
//!
//! - If nothing later in the memory's line is live (it is the forgotten
//!   newest version, or every version after it was forgotten), the same id
//!   is put again with its content: it is current (`RESTORED`).
//! - If a later version is live, the old content becomes a new version that
//!   replaces the newest one (`NEW_VERSION`): the line stays one line.
//! - A memory that is current already answers `NOOP`.
//!
//! Restoring needs the rights of forgetting: the memory must be one the
//! caller may write (its write scenes and privacy scopes), forgotten or
//! not, else `NOT_FOUND`. A new version is also a write of that content, so
//! it meets the rules of writing it (a pinned memory or one about the owner
//! needs `*`, as for any write); putting the same id back does not, since it
//! restores exactly what was there.

use super::parts::writer::{RestoreOp, Restored};
use super::write::{check_pin, source_for, subject_for};
use super::{Caller, Hub};
use crate::api::{RestoreAction, RestoreVersionBody, RestoreVersionReply};
use crate::error::{Error, Result};

impl Hub {
    /// Brings back `body.id` for `caller` (see the module docs).
    pub fn restore(
        &self,
        caller: &Caller,
        body: RestoreVersionBody,
    ) -> Result<RestoreVersionReply> {
        caller.scene(body.scene.as_deref())?;
        let filter = caller.writable()?;
        let row = self
            .core
            .index
            .meta
            .version_row(&body.id, &filter)?
            .ok_or_else(|| Error::not_found("memory", body.id.clone()))?;
        let m = &row.memory;
        let may_write = caller
            .check_write(m.privacy)
            .and_then(|()| check_pin(caller, m.tier, &m.kind))
            .and_then(|()| subject_for(caller, &m.scene, Some(m.subject)).map(|_| ()));
        let op = RestoreOp {
            id: body.id.clone(),
            filter,
            source: source_for(caller, &m.scene, None)?,
            same_id_only: may_write.is_err(),
        };
        let done = self
            .writer
            .restore(self.cx(), vec![op])?
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no answer for a restore".into())))?;
        let (id, action) = match done {
            Restored::Same => (body.id.clone(), RestoreAction::Restored),
            Restored::NewVersion(new) => (new, RestoreAction::NewVersion),
            Restored::Current => (body.id.clone(), RestoreAction::Noop),
            Restored::Skipped => {
                return Err(may_write
                    .err()
                    .unwrap_or_else(|| Error::Internal("a restore was skipped".into())));
            }
        };
        Ok(RestoreVersionReply {
            id,
            restored: body.id,
            action,
        })
    }
}
