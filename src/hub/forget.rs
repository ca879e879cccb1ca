//! Use case: forget a memory (`POST /v1/forget`, `memory_forget`, `memd forget`).
//!
//! A forget appends a tombstone for a fact the caller may write (its write
//! scenes and privacy scopes, `Caller::writable`); a memory outside them is
//! `NOT_FOUND` whether or not it exists. The tombstone records the token's
//! name as its source. Markdown documents are edited or deleted as files.

use super::{Caller, Hub};
use crate::api::{ForgetBody, ForgetReply};
use crate::error::Result;

impl Hub {
    /// Forgets `body.id` for `caller` (see the module docs).
    pub fn forget(&self, caller: &Caller, body: ForgetBody) -> Result<ForgetReply> {
        caller.scene(body.scene.as_deref())?;
        let filter = caller.writable()?;
        self.tombstone(&body.id, body.reason, caller.name(), &filter)?;
        Ok(ForgetReply {
            id: body.id,
            forgotten: true,
        })
    }
}
