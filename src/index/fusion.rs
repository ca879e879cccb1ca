//! Reciprocal rank fusion: one ranking out of several.
//!
//! Each input ranking contributes `weight / (k + rank)` (rank from 1) to every
//! id it contains; ids are ordered by the sum, ties by id so the result is
//! deterministic. Only ranks matter, so BM25 scores and cosine distances never
//! have to be put on one scale.

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

#[cfg(test)]
mod tests {
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
