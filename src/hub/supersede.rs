//! Use case: a new version of a memory (a write with `supersedes`).
//!
//! The write path ([`super::write`]) applies every rule of a new memory,
//! then hands the request here; the rules of replacing live in this one
//! place:
//!
//! - Replacing needs the same right as forgetting: the old memory must be
//!   active and visible under the caller's writable filter
//!   (`Caller::writable`), else `NOT_FOUND` (whether or not it exists).
//!   The check runs inside the writer's commit group, with the append, so a
//!   forget committed meanwhile cannot slip between them.
//! - The old memory stops matching searches once the new version is indexed
//!   (its expiry becomes the epoch, see [`crate::index::lifecycle`]).

use super::{Caller, Hub, WriteOutcome, WriteRequest};
use crate::error::Result;

impl Hub {
    /// Writes `req` as the new version of `old` for `caller` (see the module docs).
    pub(crate) fn supersede(
        &self,
        caller: &Caller,
        mut req: WriteRequest,
        old: &str,
    ) -> Result<WriteOutcome> {
        req.supersede_filter = Some(caller.writable()?);
        req.supersedes = Some(old.to_string());
        self.append(req)
    }
}
