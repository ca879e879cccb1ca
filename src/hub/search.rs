//! Use case: search (`POST /v1/search`, `memory_search`, `memd search`).
//!
//! The caller's read filter is the visibility of the search (inside the
//! index query); `stage` and `kinds` only narrow it. A `limit` above
//! `search.maxLimit` is lowered to it rather than refused (as the Node
//! memory-hub did, so its clients keep working), and the reply says so.
//!
//! The relevance decision applies by default, the same as in recall: every
//! hit whose P(relevant) ([`crate::relevance`]) is below `min_score` (0-1;
//! absent: the calibrated threshold; 0: off) is dropped inside
//! [`crate::search`], and the reply counts them in `dropped_below_floor`.
//!
//! Paging: a search that gives an `offset` (0 to [`MAX_OFFSET`]) ranks
//! `offset + limit + 1` hits, returns the `limit` after the first `offset`,
//! and says `next_offset` when there is a hit beyond them. A search without
//! an `offset` runs exactly as before and never says `next_offset`.
//!
//! With `as_of`, the search runs as memory stood at that instant, read-only
//! (`hub/asof.rs`).

use super::asof;
use super::caller::Visibility;
use super::read::narrow;
use super::{Caller, Hub};
use crate::api::SearchBody;
use crate::error::{Error, Result};
use crate::index::filter::Scope;
use crate::model::parse_kind;
use crate::search::{SearchRequest, SearchResults};

/// A reply whose `limit` may have been lowered to `search.maxLimit`.
#[derive(Debug)]
pub struct Limited<T> {
    /// The reply.
    pub body: T,
    /// `<asked>; max=<max>` when the limit was lowered.
    pub clamped: Option<String>,
    /// A paged search: the `offset` of the next page, when there is one.
    pub next_offset: Option<usize>,
}

/// The largest `offset` of a paged search (nine pages of ten).
pub const MAX_OFFSET: usize = 90;

impl Hub {
    /// Searches what `caller` may read (see the module docs).
    pub fn search(&self, caller: &Caller, mut body: SearchBody) -> Result<Limited<SearchResults>> {
        if let Some(as_of) = body.as_of.take() {
            body.touch = false;
            let (mut reply, at) = asof::answer(self, caller, &as_of, |hub, c| hub.search(c, body))?;
            reply.body.as_of = Some(at);
            // Answered by the cut's index: whether the live one is caught up is not known.
            reply.body.caught_up = false;
            return Ok(reply);
        }
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let kinds = body
            .kinds
            .iter()
            .flatten()
            .map(|k| parse_kind(k))
            .collect::<Result<Vec<_>>>()?;
        let filter = narrow(
            &filter,
            &Scope {
                stages: body.stage.into_iter().collect(),
                kinds,
                ..Scope::default()
            },
        );
        let (limit, clamped) = clamp_limit(self, body.limit);
        let page = page_of(self, body.offset, limit)?;
        let req = SearchRequest {
            query: body.query,
            filter,
            limit: page.map_or(limit, |(offset, n)| Some(offset + n + 1)),
            mode: body.mode,
            min_score: body.min_score,
        };
        let depth = req.limit.filter(|_| page.is_some()).unwrap_or(0);
        let mut results = self.search_deep_as(caller, &req, depth)?;
        super::conflicts::annotate(self, &mut results.hits, &req.filter)?;
        let lag = self.index_lag(Some(&req.filter))?;
        results.index_behind = lag.behind;
        results.caught_up = !lag.lagging;
        let mut next_offset = None;
        if let Some((offset, n)) = page {
            next_offset = (results.hits.len() > offset + n).then_some(offset + n);
            results.hits.truncate(offset + n);
            results.hits.drain(..offset.min(results.hits.len()));
        }
        // A search is looking; it counts as a retrieval only when asked.
        if body.touch {
            self.note_retrieval(results.hits.iter().map(|h| &h.memory));
        }
        Ok(Limited {
            body: results,
            clamped,
            next_offset,
        })
    }
}

/// A `limit` above `search.maxLimit` lowered to it, and the note saying
/// so (`<asked>; max=<max>`). Zero stays an error (the search says so).
pub(crate) fn clamp_limit(hub: &Hub, limit: Option<usize>) -> (Option<usize>, Option<String>) {
    let max = hub.config().search.max_limit;
    match limit {
        Some(n) if n > max && max > 0 => (Some(max), Some(format!("{n}; max={max}"))),
        other => (other, None),
    }
}

/// A paged search's `(offset, hits per page)`: `None` without an `offset`
/// or with a zero limit (which the search refuses as before).
fn page_of(
    hub: &Hub,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<Option<(usize, usize)>> {
    let Some(offset) = offset else {
        return Ok(None);
    };
    if offset > MAX_OFFSET {
        return Err(Error::invalid(format!(
            "offset must be between 0 and {MAX_OFFSET}; got {offset}"
        )));
    }
    let n = limit.unwrap_or(hub.config().search.default_limit);
    Ok((n > 0).then_some((offset, n)))
}
