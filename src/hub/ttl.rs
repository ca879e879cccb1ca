//! Sliding expiry of short-term memories: recalling a chat line keeps it
//! alive for another TTL, up to a hard cap counted from when it was written.
//!
//! An extension is a new `put` line for the same id with a later
//! `expires_at` (the same way a fact is rewritten in place), so a replay of
//! the journal gives the same expiry as the live index. A memory is only
//! rewritten when the extension is worth a line (more than an hour), and never
//! if it was forgotten: the check runs under the writer lock, right before the
//! append.

use chrono::{DateTime, Duration, Utc};

use super::Hub;
use crate::error::Result;
use crate::index::filter::{Filter, Scope};
use crate::model::{Fact, JOURNAL_VERSION, Origin, Record, Stage};

/// Longest a short-term memory lives, in hours from when it was written.
pub const MAX_SHORT_TTL_HOURS: i64 = 168;

/// Smallest extension worth a journal line.
const MIN_EXTENSION: Duration = Duration::hours(1);

impl Hub {
    /// Extends the expiry of the given short-term facts to `now + ttl` (capped
    /// at [`MAX_SHORT_TTL_HOURS`] after they were written). Ids that are not
    /// live short-term facts are ignored. Returns how many were extended; a
    /// read-only hub extends nothing.
    pub fn extend_short_ttl(
        &self,
        ids: &[String],
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<usize> {
        if !self.is_writer() || ids.is_empty() {
            return Ok(0);
        }
        let live_short = Filter::scope(Scope {
            stages: vec![Stage::Short],
            origins: vec![Origin::Fact],
            unexpired_at: Some(now),
            ..Scope::default()
        });
        let mut records = Vec::new();
        for m in self.index.meta.get_many(ids, &live_short)?.into_values() {
            let Some(current) = m.expires_at else {
                continue;
            };
            let target = (now + ttl).min(m.ts + Duration::hours(MAX_SHORT_TTL_HOURS));
            if target <= current + MIN_EXTENSION {
                continue;
            }
            let Some(extras) = self.index.meta.fact_extras(&m.id)? else {
                continue;
            };
            let device = extras.device.clone();
            records.push(Record::Put {
                v: JOURNAL_VERSION,
                at: None,
                fact: Fact {
                    expires_at: Some(target),
                    // The extension keeps the device that wrote the message.
                    ..super::fact_from_row(m, extras, device)
                },
            });
        }
        if records.is_empty() {
            return Ok(0);
        }
        let mut state = self.writer_state()?;
        // A forget committed since the read above must win: a `put` after it
        // would bring the memory back.
        let mut keep = Vec::with_capacity(records.len());
        for r in records {
            if self.index.meta.fact_state(r.id())? == Some(true) {
                keep.push(r);
            }
        }
        if keep.is_empty() {
            return Ok(0);
        }
        records = keep;
        self.append_and_index(&mut state, &records)?;
        Ok(records.len())
    }
}
