//! Lifecycle signals in ranking, applied after retrieval: short-term hits are
//! weighed down by `search.shortWeight`, importance scales a score between
//! ×0.75 (importance 0) and ×1.25 (importance 1), and T0 memories get a small
//! boost. In full-text mode AND hits still rank above OR hits.

use crate::model::{Stage, Tier};
use crate::search::{Pass, SearchHit, SearchMode, SearchRequest};

/// Extra weight of a T0 (never-expiring, foundational) memory.
pub const T0_BOOST: f32 = 1.1;

/// The factor a hit's score is multiplied by.
pub fn factor(stage: Stage, importance: f32, tier: Option<Tier>, short_weight: f32) -> f32 {
    let stage = if stage == Stage::Short {
        short_weight
    } else {
        1.0
    };
    let importance = 0.75 + 0.5 * importance.clamp(0.0, 1.0);
    let tier = if tier == Some(Tier::T0) {
        T0_BOOST
    } else {
        1.0
    };
    stage * importance * tier
}

/// The request with every scope bounded by an expiry, so superseded
/// memories (whose searchable expiry is the epoch, see `index::lifecycle`)
/// never match, even for callers that see expired memories.
pub fn without_superseded(req: &SearchRequest) -> SearchRequest {
    let mut req = req.clone();
    let floor = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH + chrono::Duration::milliseconds(1);
    for scope in &mut req.filter.any_of {
        scope.unexpired_at = Some(scope.unexpired_at.map_or(floor, |t| t.max(floor)));
    }
    req
}

/// Rescales and re-sorts hits (best first; ties by id).
pub fn rerank(hits: &mut [SearchHit], mode: SearchMode, short_weight: f32) {
    for h in hits.iter_mut() {
        let m = &h.memory;
        h.score *= factor(m.stage, m.importance, m.tier, short_weight);
    }
    let group = |p: Pass| match (mode, p) {
        (SearchMode::Fulltext, Pass::Or) => 1,
        _ => 0,
    };
    hits.sort_by(|a, b| {
        group(a.pass)
            .cmp(&group(b.pass))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.memory.id.cmp(&b.memory.id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors() {
        assert_eq!(factor(Stage::Long, 0.5, Some(Tier::T2), 0.5), 1.0);
        assert_eq!(factor(Stage::Short, 0.5, None, 0.5), 0.5);
        assert_eq!(factor(Stage::Short, 0.5, None, 1.0), 1.0);
        assert!(factor(Stage::Long, 0.5, Some(Tier::T0), 0.5) > 1.0);
        assert!(factor(Stage::Long, 1.0, None, 0.5) > factor(Stage::Long, 0.0, None, 0.5));
    }
}
