//! The second stage of hybrid search: gradient-boosted trees that reorder
//! the fused candidates of one query.
//!
//! Hybrid search fuses a full-text and a semantic ranking
//! ([`crate::search`]); every candidate of either list (at most twice
//! `search::HYBRID_DEPTH`) then gets [`FEATURES`], computed from what the
//! search already has (ranks, fused score, cosine, full-text evidence,
//! coverage, the candidate's session among the others, speaker, recency,
//! and for a dialogue its last turn's own full-text evidence), and a
//! model's score orders them: the question model for a one-turn query, the
//! dialogue model for a query of several turns (a conversation is another
//! kind of query: most of its words are not asked about). It reorders and does not decide
//! alone: which hits are kept is [`crate::relevance`]'s decision, which for
//! a question's hits also reads this model's score
//! ([`crate::relevance::Stage`]) and only ever keeps more with it.
//!
//! The models are data, `rerank_model.json` and `rerank_dialogue_model.json`,
//! written by `scripts/train-rerank.sh` (LightGBM, lambdarank objective,
//! trained on `memd eval --features` exports of the dev sets with k-fold
//! cross-validation grouped by conversation and dialogue; the question model
//! on every query and the first [`QUESTION_FEATURES`] features, the dialogue
//! model on the dialogues alone and all of them). Search uses a model only
//! when its file says `enabled`, which the trainer sets only when the
//! cross-validated recall@5 beats the fused order (and, for the dialogue
//! model, the question model on the dialogues). The evaluator here is
//! LightGBM's: a numerical split sends `x` left when `x <= threshold`
//! (compared in `f64`, as LightGBM does), and the score is the sum of the
//! leaves reached; search orders by that sum mapped into (0, 1) and blended
//! with the fused score (`blend`, fixed by the trainer). A unit test compares
//! it with the trainer's predictions of each model
//! (`tests/fixtures/rerank-parity.jsonl`, `rerank-dialogue-parity.jsonl`).

/// The features the model reads, in this order (see [`Features`]).
pub const FEATURES: [&str; N_FEATURES] = [
    // The fused score over the best fused score among the candidates.
    "fused_norm",
    // Rank (from 1) in the fused order.
    "fused_rank",
    // Rank (from 1) in the full-text list; 100 when absent.
    "text_rank",
    // Rank (from 1) in the semantic list; 100 when absent.
    "sem_rank",
    // Cosine of query and memory vectors (0 without a vector).
    "cosine",
    // Cosine minus the best semantic hit's (-1 without a vector).
    "cosine_gap",
    // Full-text score (own + weighted translated evidence; 0 when absent).
    "text_score",
    // Own-language full-text evidence.
    "own",
    // Translated full-text evidence.
    "translated",
    // The share of the query's weight × IDF the memory holds.
    "coverage",
    // The share of the query's content terms (IDF-weighted) it holds.
    "content_coverage",
    // 1 when it passed the AND pass.
    "and_pass",
    // 1 when it is written in the other script than the query.
    "other_script",
    // 1 when the query is a dialogue (several turns).
    "dialogue",
    // The query's CJK share, in [0, 1].
    "query_cjk",
    // The best `fused_norm` among the candidates of its session (its own without one).
    "session_best",
    // The mean `fused_norm` among the candidates of its session.
    "session_mean",
    // How many candidates share its session (1 without one).
    "session_count",
    // 1 when the memory's speaker is named in the query.
    "speaker_named",
    // Its age relative to the newest candidate, over the oldest's (0 newest, 1 oldest).
    "age",
    // The dialogue model's own, from the last turn alone when a person spoke
    // it (0 for a question, or a dialogue whose last turn the assistant spoke):
    // BM25 over that turn's terms over its maximum.
    "last_bm25",
    // The share of that turn's weight × IDF the memory holds.
    "last_coverage",
    // The share of that turn's content terms (IDF-weighted) it holds.
    "last_content",
    // The share of that turn's words it holds a translation of.
    "last_translated",
    // Rank (from 1) by `last_bm25` among the candidates.
    "last_bm25_rank",
    // From the person's turns of a dialogue alone, the assistant's left out
    // (0 for a question): BM25 over their terms over its maximum.
    "user_bm25",
    // The share of their content terms (IDF-weighted) it holds.
    "user_content",
    // The share of their words it holds a translation of.
    "user_translated",
];

/// Number of features.
pub const N_FEATURES: usize = 28;

/// The features the question model reads: the first ones of [`FEATURES`]
/// (the rest describe a dialogue's last turn).
pub const QUESTION_FEATURES: usize = 20;

/// One candidate's feature values, in the order of [`FEATURES`].
pub type Features = [f32; N_FEATURES];

/// One regression tree in LightGBM's layout: internal nodes `0..`, a child
/// index `< 0` is leaf `!child`.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct Tree {
    /// Feature index of each internal node.
    pub(crate) feature: Vec<usize>,
    /// Threshold of each internal node (`x <= threshold` goes left).
    pub(crate) threshold: Vec<f64>,
    /// Left child of each internal node.
    pub(crate) left: Vec<i32>,
    /// Right child of each internal node.
    pub(crate) right: Vec<i32>,
    /// Value of each leaf.
    pub(crate) leaf: Vec<f64>,
}

impl Tree {
    /// The value of the leaf `x` reaches.
    fn value(&self, x: &Features) -> f64 {
        if self.feature.is_empty() {
            return self.leaf.first().copied().unwrap_or(0.0);
        }
        let mut node = 0i32;
        // A well-formed tree reaches a leaf in fewer steps than it has nodes.
        for _ in 0..=self.feature.len() {
            let i = node as usize;
            let v = f64::from(x[self.feature[i]]);
            node = if v <= self.threshold[i] {
                self.left[i]
            } else {
                self.right[i]
            };
            if node < 0 {
                return self.leaf.get(!node as usize).copied().unwrap_or(0.0);
            }
        }
        0.0
    }

    /// Every index in range (features among the model's first `features`)
    /// and the tree acyclic in form (children after parents).
    fn well_formed(&self, features: usize) -> bool {
        let n = self.feature.len();
        let child_ok = |c: i32, parent: usize| {
            if c < 0 {
                (!c as usize) < self.leaf.len()
            } else {
                (c as usize) < n && c as usize > parent
            }
        };
        self.threshold.len() == n
            && self.left.len() == n
            && self.right.len() == n
            && !self.leaf.is_empty()
            && self.feature.iter().all(|&f| f < features.min(N_FEATURES))
            && (0..n).all(|i| child_ok(self.left[i], i) && child_ok(self.right[i], i))
    }
}

/// The checked-in second stage.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct Reranker {
    /// Whether hybrid search uses it (else the fused order stands).
    pub enabled: bool,
    /// Feature names: the first ones of [`FEATURES`], in its order.
    pub(crate) features: Vec<String>,
    /// The trees, summed.
    pub(crate) trees: Vec<Tree>,
    /// The share of the fused score (`fused_norm`) in the order
    /// ([`Reranker::score`]): the first stage's evidence kept as a prior, so
    /// that a memory holding the query's rare words, a kind of match the dev
    /// sets hold few of, is not buried by the trees.
    #[serde(default)]
    pub(crate) blend: f32,
}

impl Reranker {
    /// The model's raw score of one candidate (higher ranks first).
    pub fn raw(&self, x: &Features) -> f64 {
        self.trees.iter().map(|t| t.value(x)).sum()
    }

    /// The score search ranks by, in [0, 1]: the raw score mapped into
    /// (0, 1), so the multiplicative signals applied after it (the time
    /// boost, lifecycle weights) keep their meaning, blended with the fused
    /// score over the best candidate's (`blend`).
    pub fn score(&self, x: &Features) -> f32 {
        let model = (1.0 / (1.0 + (-self.raw(x)).exp())) as f32;
        (1.0 - self.blend) * model + self.blend * x[0]
    }
}

/// The checked-in question model (written by `scripts/train-rerank.sh`).
const MODEL_JSON: &str = include_str!("rerank_model.json");

/// The checked-in dialogue model (written by `scripts/train-rerank.sh`).
const DIALOGUE_JSON: &str = include_str!("rerank_dialogue_model.json");

/// A model file parsed; `None` when its features are not the first ones of
/// [`FEATURES`] or a tree is malformed (a test keeps them in step).
fn parse(json: &str) -> Option<Reranker> {
    let m: Reranker = serde_json::from_str(json).ok()?;
    let named =
        m.features.len() <= N_FEATURES && m.features.iter().zip(FEATURES).all(|(a, b)| a == b);
    (named && m.trees.iter().all(|t| t.well_formed(m.features.len()))).then_some(m)
}

/// The checked-in question model (one-turn queries), parsed once.
pub fn model() -> Option<&'static Reranker> {
    static MODEL: std::sync::LazyLock<Option<Reranker>> =
        std::sync::LazyLock::new(|| parse(MODEL_JSON));
    MODEL.as_ref()
}

/// The checked-in dialogue model (queries of several turns), parsed once.
pub fn dialogue_model() -> Option<&'static Reranker> {
    static MODEL: std::sync::LazyLock<Option<Reranker>> =
        std::sync::LazyLock::new(|| parse(DIALOGUE_JSON));
    MODEL.as_ref()
}

/// Whether `MEMD_RERANK=off` is in the environment (read once), which
/// measures search without the second stage.
fn off() -> bool {
    static OFF: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var("MEMD_RERANK").is_ok_and(|v| v == "off"));
    *OFF
}

/// The question model, when search should use it: `enabled` in the file
/// and not turned off by `MEMD_RERANK=off`.
pub fn enabled() -> Option<&'static Reranker> {
    model().filter(|m| m.enabled && !off())
}

/// The model that orders a query's candidates: for a dialogue the dialogue
/// model when its file says `enabled`, else (and for a question) the
/// question model when enabled; none under `MEMD_RERANK=off`.
pub fn enabled_for(dialogue: bool) -> Option<&'static Reranker> {
    let own = dialogue_model().filter(|m| dialogue && m.enabled && !off());
    own.or_else(enabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_models_parse_and_name_the_features() {
        let m = model().expect("src/rerank_model.json matches FEATURES");
        assert!(!m.trees.is_empty());
        assert_eq!(m.features.len(), QUESTION_FEATURES);
        let d = dialogue_model().expect("src/rerank_dialogue_model.json matches FEATURES");
        assert!(!d.trees.is_empty());
        assert_eq!(d.features.len(), N_FEATURES);
    }

    #[test]
    fn a_tree_sends_equal_values_left() {
        let t = Tree {
            feature: vec![4],
            threshold: vec![0.5],
            left: vec![-1],
            right: vec![-2],
            leaf: vec![-1.0, 2.0],
        };
        let mut x = [0.0; N_FEATURES];
        x[4] = 0.5;
        assert_eq!(t.value(&x), -1.0);
        x[4] = 0.500_001;
        assert_eq!(t.value(&x), 2.0);
        assert!(t.well_formed(N_FEATURES));
        assert!(!t.well_formed(4), "a feature the model does not read");
        let bad = Tree { left: vec![0], ..t };
        assert!(!bad.well_formed(N_FEATURES), "a node that is its own child");
    }

    /// The trainer's own predictions (`scripts/train-rerank.py` writes a
    /// sample of candidates with the full model's raw score) equal the Rust
    /// evaluator's, for the question model and the dialogue model.
    #[test]
    fn scores_match_the_trainers_predictions() {
        let question = include_str!("../tests/fixtures/rerank-parity.jsonl");
        same_as_trainer(model().expect("model"), question);
        let dialogue = include_str!("../tests/fixtures/rerank-dialogue-parity.jsonl");
        same_as_trainer(dialogue_model().expect("dialogue model"), dialogue);
    }

    /// Every line of a parity file (`x`: the model's features, `raw`: the
    /// trainer's score) scores the same here.
    fn same_as_trainer(m: &Reranker, text: &str) {
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let xs: Vec<f32> = v["x"]
                .as_array()
                .expect("x")
                .iter()
                .map(|f| f.as_f64().expect("number") as f32)
                .collect();
            assert_eq!(xs.len(), m.features.len(), "line {n}");
            let mut x = [0.0; N_FEATURES];
            x[..xs.len()].copy_from_slice(&xs);
            let want = v["raw"].as_f64().expect("raw");
            let got = m.raw(&x);
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "line {n}: rust {got} vs trainer {want}"
            );
            n += 1;
        }
        assert!(n >= 100, "the parity file has {n} rows");
    }
}
