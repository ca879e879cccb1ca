//! Use case: the memories a caller may read, newest first, one page at a
//! time (`POST /v1/list`, the MCP resource `memory://list`, `memd list`,
//! `memd tier list`, `memd stats --expiring`, `memd archive list`).
//!
//! The page is a slice of the order `(ts, id)` descending, read with the
//! caller's filter inside the query; the cursor is the position of the last
//! row of the previous page (`<millis>~<id>`), so rows that share a
//! timestamp are neither skipped nor repeated however pages fall. Narrowing
//! (a tier, a stage, an expiry range, the warning window) only removes rows.
//! The archive (`archived`: memories past their expiry that the journal
//! still holds) needs `*`, as archive search does, with the caller's scenes
//! and privacy scopes still inside the query. Listing counts no access.

use chrono::{DateTime, Duration, Utc};

use super::caller::Visibility;
use super::read::narrow;
use super::{Caller, Hub};
use crate::api::{ListBody, ListReply};
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::index::filter::Scope;
use crate::index::meta_read::Latest;
use crate::lifecycle::Warning;
use crate::model::Origin;

/// Largest page.
pub(crate) const MAX_LIST: usize = 100;

/// Longest `expiring_within_days`.
const MAX_EXPIRY_DAYS: u32 = 3650;

/// The cursor after `m`: its time in milliseconds and its id.
pub(crate) fn cursor_after(ts: DateTime<Utc>, id: &str) -> String {
    format!("{}~{id}", ts.timestamp_millis())
}

/// Reads a cursor made by [`cursor_after`]; anything else is `INVALID_INPUT`.
pub(crate) fn parse_cursor(cursor: &str) -> Result<(DateTime<Utc>, String)> {
    let bad = || {
        Error::invalid(format!(
            "cursor {cursor:?} is not a next_cursor of this list; start without one"
        ))
    };
    let (ms, id) = cursor.split_once('~').ok_or_else(bad)?;
    let ms: i64 = ms.parse().map_err(|_| bad())?;
    let ts = DateTime::from_timestamp_millis(ms).ok_or_else(bad)?;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '#');
    if id.is_empty() || id.len() > 200 || !id.chars().all(plain) {
        return Err(bad());
    }
    Ok((ts, id.to_string()))
}

impl Hub {
    /// One page of the memories `caller` may read, newest first.
    pub fn list(&self, caller: &Caller, body: ListBody) -> Result<ListReply> {
        let limit = body.limit.unwrap_or(20);
        if !(1..=MAX_LIST).contains(&limit) {
            return Err(Error::invalid(format!(
                "limit must be between 1 and {MAX_LIST}"
            )));
        }
        let before = body.cursor.as_deref().map(parse_cursor).transpose()?;
        let now = caller.now();
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let filter = if body.archived {
            caller.require(scope::ALL)?;
            // The same scenes and privacy, without the expiry condition.
            let mut all = filter;
            for s in &mut all.any_of {
                s.unexpired_at = None;
            }
            all
        } else {
            filter
        };
        let want = Scope {
            origins: vec![Origin::Fact],
            stages: body.stage.into_iter().collect(),
            ..Scope::default()
        };
        let expires_within = match body.expiring_within_days {
            None => None,
            Some(d) if (1..=MAX_EXPIRY_DAYS).contains(&d) => {
                Some((now, now + Duration::days(i64::from(d))))
            }
            Some(_) => {
                return Err(Error::invalid(format!(
                    "expiring_within_days must be between 1 and {MAX_EXPIRY_DAYS}"
                )));
            }
        };
        let config = self.config();
        let mut rows = self.core.index.meta.latest(
            &narrow(&filter, &want),
            &Latest {
                limit: limit + 1,
                before,
                tier: body.tier,
                expires_within,
                expired_at: body.archived.then_some(now),
                warning: body
                    .expiring_soon
                    .then(|| Warning::at(now, &config.lifecycle)),
                ..Latest::default()
            },
        )?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_cursor = more
            .then(|| rows.last().map(|m| cursor_after(m.ts, &m.id)))
            .flatten();
        Ok(ListReply {
            items: rows,
            next_cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let ts = DateTime::from_timestamp_millis(1_790_000_000_123).unwrap();
        let c = cursor_after(ts, "fact-main-1-ab");
        assert_eq!(
            parse_cursor(&c).unwrap(),
            (ts, "fact-main-1-ab".to_string())
        );
        for bad in ["", "~", "12~", "x~fact", "1790000000123", "1~a b", "1~a'--"] {
            let e = parse_cursor(bad).unwrap_err();
            assert_eq!(e.code().as_str(), "INVALID_INPUT", "{bad:?}");
        }
    }
}
