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

use super::caller::Visibility;
use super::read::narrow;
use super::{Caller, Hub};
use crate::api::SearchBody;
use crate::error::Result;
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
}

impl Hub {
    /// Searches what `caller` may read (see the module docs).
    pub fn search(&self, caller: &Caller, body: SearchBody) -> Result<Limited<SearchResults>> {
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
        let req = SearchRequest {
            query: body.query,
            filter,
            limit,
            mode: body.mode,
            min_score: body.min_score,
        };
        let mut results = self.search_as(caller, &req)?;
        results.index_behind = self.index_behind(Some(&req.filter))?;
        // A search is looking; it counts as a retrieval only when asked.
        if body.touch {
            self.note_retrieval(results.hits.iter().map(|h| &h.memory));
        }
        Ok(Limited {
            body: results,
            clamped,
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
