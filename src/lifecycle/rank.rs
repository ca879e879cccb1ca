//! Lifecycle signals in ranking, applied after retrieval: short-term hits are
//! weighed down by `search.shortWeight`, importance scales a score between
//! ×0.75 (importance 0) and ×1.25 (importance 1), and T0 memories get a small
//! boost. Search applies the factor to its hits (`search::rerank`).

use crate::model::{Stage, Tier};

/// Extra weight of a T0 (never-expiring, foundational) memory.
pub(crate) const T0_BOOST: f32 = 1.1;

/// The factor a hit's score is multiplied by.
pub(crate) fn factor(stage: Stage, importance: f32, tier: Option<Tier>, short_weight: f32) -> f32 {
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
