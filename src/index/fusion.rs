//! Reciprocal rank fusion: one ranking out of several.
//!
//! Each input ranking contributes `weight / (k + rank)` (rank from 1) to every
//! id it contains; ids are ordered by the sum, ties by id so the result is
//! deterministic. Only ranks matter, so BM25 scores and cosine distances never
//! have to be put on one scale.
//!
//! [`LearnedFusion`] is the alternative: a logistic model over a few features
//! of each candidate ([`FEATURES`]), trained offline on the dev sets with
//! k-fold cross-validation (`scripts/train-fusion.py`, from the features
//! `memd eval --features` exports) and checked in as `fusion_weights.json`.
//! Hybrid search uses it only when the file says `enabled`, which the script
//! sets only when the cross-validated recall@5 beats reciprocal rank fusion.

use std::collections::HashMap;

/// Fuses `rankings` (each best first, with its weight) with constant `k`.
/// Returns `(id, fused score)`, best first.
pub fn rrf(rankings: &[(&[String], f32)], k: f32) -> Vec<(String, f32)> {
    let mut scores: HashMap<&str, f32> = HashMap::new();
    for (ranking, weight) in rankings {
        let mut seen = std::collections::HashSet::new();
        for (i, id) in ranking.iter().enumerate() {
            if !seen.insert(id.as_str()) {
                continue;
            }
            *scores.entry(id.as_str()).or_default() += weight / (k + (i + 1) as f32);
        }
    }
    let mut out: Vec<(String, f32)> = scores
        .into_iter()
        .map(|(id, s)| (id.to_string(), s))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Like [`rrf`], but every entry of a ranking carries its own weight: an
/// entry at rank `r` (from 1, counting every entry, weighted or not)
/// contributes `weight / (k + r)`. A weight of zero keeps an entry's place in
/// the ranking but lets it add nothing.
pub fn rrf_weighted(rankings: &[&[(String, f32)]], k: f32) -> Vec<(String, f32)> {
    let mut scores: HashMap<&str, f32> = HashMap::new();
    for ranking in rankings {
        let mut seen = std::collections::HashSet::new();
        for (i, (id, weight)) in ranking.iter().enumerate() {
            if !seen.insert(id.as_str()) || *weight <= 0.0 {
                continue;
            }
            *scores.entry(id.as_str()).or_default() += weight / (k + (i + 1) as f32);
        }
    }
    let mut out: Vec<(String, f32)> = scores
        .into_iter()
        .map(|(id, s)| (id.to_string(), s))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// The features of one hybrid candidate that the learned fusion reads, in
/// this order (see [`FEATURES`]). Ranks count from 1 in lists
/// `search::HYBRID_DEPTH` deep; a candidate absent from a list has 0 there.
pub const FEATURES: [&str; N_FEATURES] = [
    // 60 / (60 + full-text rank) × the full-text fusion weight (0 when the
    // memory is written in another script than the query).
    "text_rrf",
    // 60 / (60 + semantic rank).
    "sem_rrf",
    // Every full-text feature is 0 for a memory in another script than the
    // query (mostly CJK against mostly Latin). Whether the scripts differ is
    // no feature itself: on the dev sets it is the same for every candidate
    // of a query, so its weight would be learned from nothing and would
    // decide alone in a store that mixes languages.
    //
    // No feature reads a BM25 value, only full-text ranks. BM25 scores of an
    // incrementally kept index and a rebuilt one are equal only up to
    // quantisation, and a document chunk was seen to score 1.0 higher after
    // a rebuild with the same rank (`heal` tests); a feature that divides by
    // the best score (the former `text_score`) carried that into every
    // candidate's learned score and reordered hits. Ranks are what
    // reciprocal rank fusion already relies on.
    // Cosine similarity of query and memory embeddings (0 without a vector).
    "cosine",
    // Cosine minus the best semantic hit's cosine (-1 without a vector).
    "cosine_gap",
    // 1 when the memory passed the AND pass.
    "and_pass",
    // The share of the query's weight × IDF the memory contains.
    "coverage",
    // `text_rrf` for a conversational (long) query, else 0.
    "long_query_text",
    // The query's CJK share × `sem_rrf`.
    "cjk_query_sem",
    // 1 when both lists hold the memory.
    "in_both",
];

/// Number of learned-fusion features.
pub(crate) const N_FEATURES: usize = 9;

/// A logistic model over [`FEATURES`], trained by `scripts/train-fusion.py`
/// with k-fold cross-validation by conversation; `enabled` only when its
/// cross-validated recall@5 beat reciprocal rank fusion on the dev sets.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LearnedFusion {
    /// Whether hybrid search uses the model (else reciprocal rank fusion).
    pub enabled: bool,
    /// Feature names, in the order of [`FEATURES`].
    pub(crate) features: Vec<String>,
    /// Mean subtracted from each feature before weighting.
    pub(crate) mean: Vec<f32>,
    /// Scale each centred feature is divided by.
    pub(crate) scale: Vec<f32>,
    /// One weight per feature.
    pub(crate) weights: Vec<f32>,
    /// Intercept.
    pub(crate) bias: f32,
}

/// The checked-in weights (written by `scripts/train-fusion.py`).
const WEIGHTS_JSON: &str = include_str!("fusion_weights.json");

/// The checked-in learned fusion, parsed once. `None` when the file does not
/// match [`FEATURES`] (a test keeps them in step).
pub fn learned() -> Option<&'static LearnedFusion> {
    static MODEL: std::sync::LazyLock<Option<LearnedFusion>> = std::sync::LazyLock::new(|| {
        let m: LearnedFusion = serde_json::from_str(WEIGHTS_JSON).ok()?;
        let n = FEATURES.len();
        (m.features == FEATURES
            && m.mean.len() == n
            && m.scale.len() == n
            && m.weights.len() == n
            && m.scale.iter().all(|s| *s > 0.0))
        .then_some(m)
    });
    MODEL.as_ref()
}

impl LearnedFusion {
    /// The model's probability that a candidate is relevant, in (0, 1).
    pub fn score(&self, x: &[f32; N_FEATURES]) -> f32 {
        let z: f32 = x
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .zip(&self.weights)
            .map(|(((x, m), s), w)| (x - m) / s * w)
            .sum::<f32>()
            + self.bias;
        1.0 / (1.0 + (-z).exp())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn checked_in_weights_match_the_features() {
        let m = learned().expect("fusion_weights.json parses and names FEATURES in order");
        let zero = [0.0; N_FEATURES];
        let s = m.score(&zero);
        assert!(s > 0.0 && s < 1.0);
    }

    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fuses_by_reciprocal_rank() {
        let text = ids(&["a", "b", "c"]);
        let sem = ids(&["c", "d", "a"]);
        let check = |weights: (f32, f32), want: &[&str]| {
            let got: Vec<String> = rrf(&[(&text, weights.0), (&sem, weights.1)], 60.0)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            assert_eq!(got, want, "{weights:?}");
        };
        // a: 1/61 + 1/63, c: 1/63 + 1/61 (tie, by id), b: 1/62, d: 1/62.
        check((1.0, 1.0), &["a", "c", "b", "d"]);
        check((1.0, 0.0), &["a", "b", "c", "d"]);
        check((0.0, 1.0), &["c", "d", "a", "b"]);
        let fused = rrf(&[(&text, 1.0)], 60.0);
        assert!((fused[0].1 - 1.0 / 61.0).abs() < 1e-7);
        assert!(rrf(&[], 60.0).is_empty());
    }

    #[test]
    fn per_entry_weights() {
        let w = |v: &[(&str, f32)]| -> Vec<(String, f32)> {
            v.iter().map(|(id, w)| (id.to_string(), *w)).collect()
        };
        let text = w(&[("a", 0.0), ("b", 1.0)]);
        let sem = w(&[("c", 1.0), ("a", 1.0)]);
        let got = rrf_weighted(&[&text, &sem], 60.0);
        let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
        // a adds nothing from the text list but keeps its semantic rank 2;
        // b keeps its text rank 2 although a above it weighs nothing.
        assert_eq!(ids, ["c", "a", "b"]);
        assert!((got[1].1 - 1.0 / 62.0).abs() < 1e-7);
        assert!((got[2].1 - 1.0 / 62.0).abs() < 1e-7);
        // With every weight 1 it is plain RRF.
        let ones = w(&[("a", 1.0), ("b", 1.0)]);
        let plain = rrf(&[(&ids_of(&ones), 1.0), (&ids_of(&sem), 1.0)], 60.0);
        assert_eq!(rrf_weighted(&[&ones, &sem], 60.0), plain);
    }

    fn ids_of(v: &[(String, f32)]) -> Vec<String> {
        v.iter().map(|(id, _)| id.clone()).collect()
    }
}
