//! Use case: the cleanup, now (`POST /v1/gc`, `memd gc`).
//!
//! memd deletes nothing on its own: the journal is the source of truth and
//! an expired memory stays in it, restorable (`memd archive restore`), out
//! of every search from the moment it expires. So the cleanup is what keeps
//! a root small and current: it journals buffered retrievals at once
//! (instead of within a few seconds), commits the index, compresses the
//! journal months older than `lifecycle.archiveAfterMonths` (the daily
//! archive job, run now), and counts the expired memories per class. With
//! `tier` it only counts that tier and compresses nothing; `dry_run` says
//! what it would do and changes nothing. It needs the `admin` scope (it
//! counts every scene, as health does).

use super::{Caller, Hub};
use crate::api::{GcBody, GcClass, GcReply};
use crate::auth::scope;
use crate::error::Result;

impl Hub {
    /// Runs the cleanup now (see the module docs).
    pub fn gc(&self, caller: &Caller, body: GcBody) -> Result<GcReply> {
        caller.require(scope::ADMIN)?;
        let now = caller.now();
        let mut accesses = 0;
        if !body.dry_run && self.core.writable {
            accesses = self.flush_accesses(true)? as u64;
            self.flush()?;
        }
        let months = match body.tier {
            Some(_) => Vec::new(),
            None => self
                .writer
                .archive_months(&self.core, None, body.dry_run)?
                .into_iter()
                .map(|m| m.month)
                .collect(),
        };
        let counts = self
            .core
            .index
            .meta
            .with_reader(|c| crate::index::lifecycle::expired_counts(c, now))?;
        let expired = counts
            .into_iter()
            .filter(|(class, _)| body.tier.is_none_or(|t| t.as_str() == class))
            .map(|(class, expired)| GcClass { class, expired })
            .collect();
        let archived_months = crate::store::archive::archived_months(&self.core.layout.facts())?;
        Ok(GcReply {
            dry_run: body.dry_run,
            expired,
            months,
            archived_months,
            accesses_journaled: accesses,
            at: now,
        })
    }
}
