//! The relevance decision: whether a hit is about its query, one calibrated
//! probability per hit.
//!
//! Search scores order hits but have no absolute scale (the best hit of an
//! unrelated query scores as high as the best hit of a good one), and e5
//! cosines between unrelated texts sit around 0.80 whatever the scripts, so
//! no fixed score or cosine floor separates on-topic from off-topic. Each
//! hit is judged instead on the evidence search already has
//! ([`Evidence`]):
//!
//! - **coverage**: the share of the query's content terms, each weighted by
//!   its turn weight ([`crate::query::plan`]) × IDF over the visible
//!   memories, that the memory contains. Speaker tags (`小王：…`, `<Bart>:`)
//!   are left out of every feature: who says something is not what is asked. A term no memory holds has the
//!   largest IDF, so a question about something the root never heard of
//!   covers little of any memory.
//! - **content**: the same share counting only the query's terms that some
//!   visible memory holds, speaker tags left out: all the root could match of
//!   the question (and `content_known`, that times **known**, the share of
//!   the query's words the root knows).
//! - **bm25**: the own-language BM25 of the memory's text over those terms,
//!   divided by the query's maximum (every term once, in a text of average length).
//! - **phrase**: the memory holds the query as written (every token adjacent, in order).
//! - **translated**: the share of the query's translated words (CC-CEDICT,
//!   [`crate::query::translate`]) one of whose translations the memory holds,
//!   each word counted with the IDF of the rarest translation held (at most
//!   the mean of its translations'): a common sense says less.
//! - **cosine** of query and memory embeddings with the calibrated model
//!   ([`CALIBRATED_MODEL`]), read with the scripts of the two texts
//!   ([`Pairing`]): cross-script pairs run lower than same-script ones.
//!
//! - **stage**: in hybrid search, what the second stage ([`crate::rerank`])
//!   said of the hit ([`Stage`]): its score beside the best and mean of the
//!   query's candidates, and the full-text and semantic ranks it read.
//!
//! A logistic model over these ([`RelevanceModel`]) gives P(relevant); a
//! hit below the threshold (the operating point: the probability above
//! which one in two thousand off-topic training searches keeps a hit, out
//! of fold; for `dialogue` below, the highest at which a dev set's recall
//! keeps within 0.01 of the decision off) is dropped. Evidence only ever raises the probability (the
//! trainer keeps the weights of the evidence features at or above zero).
//! Four variants are trained: `semantic` for hits with a cosine of the
//! calibrated model, `lexical` for the rest (full-text searches, other
//! models), and, for the hybrid hits the second stage ranked, `reranked`
//! (a question's, one turn, judged beside `semantic`: the judgement further
//! above its threshold counts, so the second stage's evidence only ever
//! keeps more) and `dialogue` (a conversation's, judged by it alone: fitted
//! on conversations only, whose off-topic searches are conversations of
//! off-topic questions; `semantic` let a quarter of those keep a hit). The
//! coefficients, thresholds and cross-validated figures are data:
//! `relevance_weights.json`, written by `scripts/train-relevance.sh`; a test
//! checks this evaluator against the trainer's own predictions.
//!
//! The decision is made by [`crate::search`] for every search (and so for
//! recall, its block, MCP and the console, which all search): `min_score`
//! `None` applies the calibrated threshold, `Some(0.0)` turns the decision
//! off, any other value is a floor on the probability.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::analysis::presence::Probe;
use crate::analysis::tokenizer::{
    Term, TermKind, cjk_chars, cjk_words, normalize, script_milli, tokenize,
};
use crate::embed::Embedder;
use crate::error::Result;
use crate::index::Index;
use crate::index::filter::Filter;
use crate::model::Memory;
use crate::query::{QueryPlan, Translation};

/// The model the `semantic` variant was trained with: cosines of any other
/// model (another model directory, the test hash embedder) are no evidence.
pub const CALIBRATED_MODEL: &str = "multilingual-e5-small";

/// Whether `embedder`'s cosines are evidence (it is the calibrated model).
pub fn calibrated(embedder: &dyn Embedder) -> bool {
    embedder.model_id().contains(CALIBRATED_MODEL)
}

/// BM25's term-frequency saturation (tantivy's default).
const BM25_K1: f32 = 1.2;
/// BM25's length normalisation (tantivy's default).
const BM25_B: f32 = 0.75;

/// The scripts of a query and a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pairing {
    /// Both mostly CJK.
    Cjk,
    /// Both mostly Latin (or neutral).
    #[default]
    Latin,
    /// One mostly CJK, the other not.
    Mixed,
}

impl Pairing {
    /// The pairing of two scripts ([`script_milli`]): mostly CJK is more than half.
    pub(crate) fn of(query_script: i64, text_script: i64) -> Pairing {
        match (query_script > 500, text_script > 500) {
            (true, true) => Pairing::Cjk,
            (false, false) => Pairing::Latin,
            _ => Pairing::Mixed,
        }
    }
}

/// What speaks for one hit being about its query.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// Share of the query's IDF-weighted content terms the memory contains, in `[0, 1]`.
    pub coverage: f32,
    /// The same share counting only terms some visible memory holds, speaker
    /// tags left out (what hybrid fusion reads too), in `[0, 1]`: all
    /// of what the root could match of the question.
    pub content: f32,
    /// Own-language BM25 over the query's terms, divided by the query's maximum, in `[0, 2]`.
    pub bm25: f32,
    /// The memory holds the query as written.
    pub phrase: bool,
    /// Share of the query's content words (each weighted by turn weight ×
    /// the IDF of its translations) that the memory holds a translation of
    /// (a name: itself), in `[0, 1]`.
    pub translated: f32,
    /// Cosine of query and memory embeddings (calibrated model only).
    pub cosine: Option<f32>,
    /// The scripts of query and memory.
    pub pairing: Pairing,
    /// `ln(1 + n)` for the query's `n` content terms (jieba words not counted).
    pub terms: f32,
    /// The query has several turns.
    pub dialogue: bool,
    /// The share of the query's words (by turn weight) that some visible
    /// memory holds, in the query's language or translated, whichever is
    /// larger: a question about things the root never heard of knows few.
    pub known: f32,
    /// `ln(1 + n)` for the `n` memories the caller may read.
    pub docs: f32,
    /// `ln(1 + n)` for the memory's `n` tokens: a line of chat a few words
    /// long is near everything and about nothing.
    pub length: f32,
    /// The strongest lexical evidence (coverage or translated) among the
    /// response's first [`LIST_DEPTH`] hits: whether the query is about
    /// anything the root holds at all.
    pub best_lexical: f32,
    /// The highest cosine among those hits, when there are cosines.
    pub best_cosine: Option<f32>,
    /// What the second stage of hybrid search said of the hit, when it
    /// ranked it ([`crate::rerank`]).
    pub stage: Option<Stage>,
}

/// The second stage's evidence for one hybrid hit: its score and the ranks
/// it read, beside those of the other candidates of the query.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// The model's score mapped into (0, 1) (unblended).
    pub score: f32,
    /// The highest score among the query's candidates.
    pub best: f32,
    /// The mean score of the query's candidates.
    pub mean: f32,
    /// Rank in the full-text list (100 when absent).
    pub text_rank: f32,
    /// Rank in the semantic list (100 when absent).
    pub sem_rank: f32,
    /// The fused score over the best candidate's.
    pub fused: f32,
}

/// How many of a response's first hits its list evidence looks at (the default limit).
pub const LIST_DEPTH: usize = 5;

/// Sets the list evidence ([`Evidence::best_lexical`], [`Evidence::best_cosine`])
/// of every hit of a response from its first [`LIST_DEPTH`] hits.
pub(crate) fn set_list_evidence(evidence: &mut [&mut Evidence]) {
    let top = evidence.iter().take(LIST_DEPTH);
    let best_lexical = top
        .clone()
        .map(|e| e.coverage.max(e.translated))
        .fold(0.0, f32::max);
    let best_cosine = top.filter_map(|e| e.cosine).reduce(f32::max);
    for e in evidence.iter_mut() {
        e.best_lexical = best_lexical;
        e.best_cosine = best_cosine;
    }
}

impl Evidence {
    /// The value of a named feature ([`FEATURES`]); `None` for an unknown name.
    pub fn feature(&self, name: &str) -> Option<f32> {
        let cos = self.cosine.unwrap_or(0.0);
        let cjk = f32::from(u8::from(self.pairing == Pairing::Cjk));
        let mixed = f32::from(u8::from(self.pairing == Pairing::Mixed));
        Some(match name {
            "coverage" => self.coverage,
            "content" => self.content,
            "content_known" => self.content * self.known,
            "bm25" => self.bm25,
            "phrase" => f32::from(u8::from(self.phrase)),
            "translated" => self.translated,
            "lexical" => self.coverage.max(self.translated),
            "terms" => self.terms,
            "dialogue" => f32::from(u8::from(self.dialogue)),
            "coverage_terms" => self.coverage * self.terms,
            "cosine" => cos,
            "cjk" => cjk,
            "mixed" => mixed,
            "cosine_cjk" => cos * cjk,
            "cosine_mixed" => cos * mixed,
            "cosine_lexical" => cos * self.coverage.max(self.translated),
            "known" => self.known,
            "docs" => self.docs,
            "length" => self.length,
            "length_cosine" => self.length * cos,
            "known_cosine" => self.known * cos,
            "best_lexical" => self.best_lexical,
            "best_cosine" => self.best_cosine.unwrap_or(0.0),
            "lexical_gap" => self.best_lexical - self.coverage.max(self.translated),
            "cosine_gap" => self.best_cosine.unwrap_or(0.0) - cos,
            _ => return self.stage_feature(name),
        })
    }

    /// The value of a feature of the second stage ([`STAGE_FEATURES`]), 0
    /// without one; `None` for an unknown name.
    fn stage_feature(&self, name: &str) -> Option<f32> {
        let s = self.stage.unwrap_or_default();
        let rrf = |rank: f32| if rank > 0.0 { 1.0 / rank } else { 0.0 };
        Some(match name {
            "stage" => s.score,
            "stage_best" => s.best,
            "stage_gap" => s.best - s.score,
            "stage_lift" => s.score - s.mean,
            "stage_spread" => s.best - s.mean,
            "stage_text_rrf" => rrf(s.text_rank),
            "stage_sem_rrf" => rrf(s.sem_rank),
            "stage_fused" => s.fused,
            _ => return None,
        })
    }
}

/// The features of the second stage's evidence ([`Evidence::stage`]), read
/// by the `reranked` variant only.
pub const STAGE_FEATURES: [&str; 8] = [
    "stage",
    "stage_best",
    "stage_gap",
    "stage_lift",
    "stage_spread",
    "stage_text_rrf",
    "stage_sem_rrf",
    "stage_fused",
];

/// Every feature name [`Evidence::feature`] knows (what the training data holds).
pub const FEATURES: [&str; 25] = [
    "coverage",
    "content",
    "content_known",
    "bm25",
    "phrase",
    "translated",
    "lexical",
    "terms",
    "dialogue",
    "coverage_terms",
    "cosine",
    "cjk",
    "mixed",
    "cosine_cjk",
    "cosine_mixed",
    "cosine_lexical",
    "known",
    "docs",
    "length",
    "length_cosine",
    "known_cosine",
    "best_lexical",
    "best_cosine",
    "lexical_gap",
    "cosine_gap",
];

/// A query's side of the evidence, computed once per search: its terms with
/// their weights and IDFs under the caller's filter, its translations and
/// its phrase.
pub(crate) struct QueryEvidence {
    terms: Vec<(Term, f32)>,
    /// Finds which of `terms` a text holds (the coverage re-rank).
    probe: Probe,
    /// Turn weight × IDF per term, in the order of `terms`.
    signal: Vec<f32>,
    /// Whether each term says something the root knows: some visible
    /// memory holds it, and it is not only a speaker tag
    /// ([`crate::query::WeightedTerm::speaker`]).
    content: Vec<bool>,
    /// The sum of `signal`: BM25's maximum for one occurrence of each term
    /// in a text of average length.
    total: f32,
    /// Whether each term is asked about: not only a speaker tag (who says
    /// something is not what is asked).
    asked: Vec<bool>,
    /// The sum of `signal` over the asked terms (the divisor of the
    /// coverage and BM25 features).
    asked_total: f32,
    avg_len: f32,
    groups: Vec<Vec<Vec<Term>>>,
    group_weights: Vec<f32>,
    /// Each translated word's turn weight and the IDF of each of its translations.
    group_idfs: Vec<(f32, Vec<f32>)>,
    phrase: Option<Vec<String>>,
    script: i64,
    n_terms: f32,
    dialogue: bool,
    known: f32,
    docs: f32,
}

/// The translated words of a query as [`QueryEvidence`] weighs them.
#[derive(Default)]
struct TranslatedSide {
    /// Each word's translations, as the terms of each.
    groups: Vec<Vec<Vec<Term>>>,
    /// Each word's turn weight × the mean IDF of its translations (a word
    /// without any: the IDF of a term no memory holds).
    weights: Vec<f32>,
    /// Each word's turn weight and the IDF of each of its translations.
    idfs: Vec<(f32, Vec<f32>)>,
    /// The share of the words (by turn weight) some visible memory holds a
    /// translation of.
    known: f32,
}

impl TranslatedSide {
    fn new(index: &Index, t: &Translation, filter: &Filter) -> Result<TranslatedSide> {
        let keys: Vec<Term> = t
            .groups
            .iter()
            .flat_map(|g| g.alternatives.iter().filter_map(|a| a.first()))
            .map(|(term, _)| term.clone())
            .collect();
        let (key_dfs, n) = index.text_doc_freqs(&keys, filter)?;
        // Whether some visible memory holds a translation of each word.
        let mut at = 0;
        let (mut held, mut all) = (0.0f32, 0.0f32);
        for g in &t.groups {
            let k = g.alternatives.len();
            if key_dfs[at..at + k].iter().any(|&df| df > 0) {
                held += g.weight;
            }
            all += g.weight;
            at += k;
        }
        let mut key_idf = key_dfs.into_iter().map(|df| idf(df, n));
        let groups = t
            .groups
            .iter()
            .map(|g| {
                g.alternatives
                    .iter()
                    .map(|a| a.iter().map(|(t, _)| t.clone()).collect())
                    .collect()
            })
            .collect();
        let mut idfs = Vec::new();
        let weights = t
            .groups
            .iter()
            .map(|g| {
                let these: Vec<f32> = key_idf.by_ref().take(g.alternatives.len()).collect();
                let mean = if these.is_empty() {
                    idf(0, n)
                } else {
                    these.iter().sum::<f32>() / these.len() as f32
                };
                idfs.push((g.weight, these));
                g.weight * mean
            })
            .collect();
        Ok(TranslatedSide {
            groups,
            weights,
            idfs,
            known: if all > 0.0 { held / all } else { 0.0 },
        })
    }
}

/// Inverse document frequency as tantivy's BM25 computes it.
pub(crate) fn idf(df: u64, docs: u64) -> f32 {
    let (df, n) = (df as f32, docs as f32);
    ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
}

impl QueryEvidence {
    /// The evidence of `query` (planned as `plan`, translated as
    /// `translation`) under `filter`: IDFs and the average length come from
    /// the memories the filter admits only.
    pub(crate) fn new(
        index: &Index,
        query: &str,
        plan: &QueryPlan,
        translation: Option<&Translation>,
        filter: &Filter,
    ) -> Result<QueryEvidence> {
        let plain: Vec<Term> = plan.terms.iter().map(|w| w.term.clone()).collect();
        let (dfs, n) = index.text_doc_freqs(&plain, filter)?;
        let signal: Vec<f32> = plan
            .terms
            .iter()
            .zip(&dfs)
            .map(|(w, &df)| w.weight * idf(df, n))
            .collect();
        let total = signal.iter().sum::<f32>();
        let side = match translation {
            Some(t) => TranslatedSide::new(index, t, filter)?,
            None => TranslatedSide::default(),
        };
        let weight_of = |only_known: bool| -> f32 {
            plan.terms
                .iter()
                .zip(&dfs)
                .filter(|(w, df)| !w.speaker && (!only_known || **df > 0))
                .map(|(w, _)| w.weight)
                .sum()
        };
        let own_known = if plan.terms.iter().all(|w| w.speaker) {
            0.0
        } else {
            weight_of(true) / weight_of(false).max(f32::EPSILON)
        };
        let counted = plan
            .terms
            .iter()
            .filter(|w| w.term.kind != TermKind::Segment && !w.speaker)
            .count();
        let asked: Vec<bool> = plan.terms.iter().map(|w| !w.speaker).collect();
        let asked_total = signal
            .iter()
            .zip(&asked)
            .filter(|(_, a)| **a)
            .map(|(s, _)| s)
            .sum::<f32>();
        Ok(QueryEvidence {
            terms: plan
                .terms
                .iter()
                .map(|w| (w.term.clone(), w.weight))
                .collect(),
            probe: Probe::new(&plain),
            signal,
            asked,
            asked_total,
            content: plan
                .terms
                .iter()
                .zip(&dfs)
                .map(|(w, &df)| !w.speaker && df > 0)
                .collect(),
            total,
            avg_len: index.text_average_body_tokens(filter)?.max(1.0),
            groups: side.groups,
            group_weights: side.weights,
            group_idfs: side.idfs,
            phrase: crate::query::phrase_tokens(query)
                .map(|t| t.into_iter().map(|t| t.text).collect()),
            script: script_milli(query),
            n_terms: (1.0 + counted as f32).ln(),
            dialogue: plan.dialogue,
            known: own_known.max(side.known),
            docs: (1.0 + n as f32).ln(),
        })
    }

    /// BM25's maximum for the query: every term once in a text of average
    /// length (the divisor of [`Evidence::bm25`]).
    pub(crate) fn max_bm25(&self) -> f32 {
        self.total
    }

    /// The query's script ([`script_milli`]).
    pub(crate) fn script(&self) -> i64 {
        self.script
    }

    /// The coverage of a text alone (see [`Evidence::coverage`]).
    pub(crate) fn coverage(&self, text: &str) -> f32 {
        // Every term counts here, speaker tags too: this orders the coverage
        // re-rank of full text, not the relevance decision.
        let found = self.probe.scan(text);
        let held: f32 = self
            .signal
            .iter()
            .zip(&self.terms)
            .filter(|(_, (t, _))| found.holds(t))
            .map(|(s, _)| s)
            .sum();
        if self.total > 0.0 {
            (held / self.total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The share of the query's content-term signal that `text` holds, in
    /// `[0, 1]`, counting only terms some visible memory holds and leaving
    /// speaker tags out: how much a memory has of what the conversation
    /// says that the root could match at all, not of who says it.
    pub(crate) fn content_coverage(&self, text: &str) -> f32 {
        let counts = self.counts(text);
        let (mut held, mut total) = (0.0f32, 0.0f32);
        for ((s, content), f) in self.signal.iter().zip(&self.content).zip(&counts) {
            if *content {
                total += s;
                if *f > 0 {
                    held += s;
                }
            }
        }
        if total > 0.0 {
            (held / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// How often `text` holds each query term, in the order of `terms`.
    fn counts(&self, text: &str) -> Vec<u32> {
        let tokens = tokenize(text);
        self.counts_in(text, &tokens)
    }

    fn counts_in(&self, text: &str, tokens: &[Term]) -> Vec<u32> {
        let mut tf: HashMap<&str, u32> = HashMap::new();
        for t in tokens {
            *tf.entry(t.text.as_str()).or_default() += 1;
        }
        let needs = |kind| self.terms.iter().any(|(t, _)| t.kind == kind);
        let mut chars: HashMap<String, u32> = HashMap::new();
        if needs(TermKind::Single) {
            for c in cjk_chars(text) {
                *chars.entry(c).or_default() += 1;
            }
        }
        let mut segments: HashMap<String, u32> = HashMap::new();
        if needs(TermKind::Segment) {
            for w in cjk_words(text) {
                *segments.entry(w).or_default() += 1;
            }
        }
        self.terms
            .iter()
            .map(|(t, _)| match t.kind {
                TermKind::Single => chars.get(&t.text).copied().unwrap_or(0),
                TermKind::Segment => segments.get(&t.text).copied().unwrap_or(0),
                TermKind::Word | TermKind::Bigram => tf.get(t.text.as_str()).copied().unwrap_or(0),
            })
            .collect()
    }

    /// The evidence for `memory`, with its cosine when there is one.
    pub(crate) fn of(&self, memory: &Memory, cosine: Option<f32>) -> Evidence {
        self.of_text(&indexed_text(memory), cosine)
    }

    fn of_text(&self, text: &str, cosine: Option<f32>) -> Evidence {
        let tokens = tokenize(text);
        let counts = self.counts_in(text, &tokens);
        let len_norm = 1.0 - BM25_B + BM25_B * tokens.len() as f32 / self.avg_len;
        let (mut covered, mut bm25) = (0.0f32, 0.0f32);
        let (mut content_held, mut content_total) = (0.0f32, 0.0f32);
        for (((s, &f), &content), &asked) in self
            .signal
            .iter()
            .zip(&counts)
            .zip(&self.content)
            .zip(&self.asked)
        {
            if content {
                content_total += s;
                if f > 0 {
                    content_held += s;
                }
            }
            let f = f as f32;
            if asked && f > 0.0 {
                covered += s;
                bm25 += s * f * (BM25_K1 + 1.0) / (f + BM25_K1 * len_norm);
            }
        }
        let share = |x: f32| {
            if self.asked_total > 0.0 {
                x / self.asked_total
            } else {
                0.0
            }
        };
        let norm = normalize(text);
        let words: HashSet<&str> = tokens
            .iter()
            .filter(|t| t.kind == TermKind::Word)
            .map(|t| t.text.as_str())
            .collect();
        let holds = |alternative: &[Term]| match alternative.first() {
            Some(t) if t.kind == TermKind::Word => words.contains(t.text.as_str()),
            Some(t) => norm.contains(&t.text),
            None => false,
        };
        let group_total: f32 = self.group_weights.iter().sum();
        // A word counts with the IDF of the rarest translation the memory
        // holds, at most its mean: holding a common sense (`time` for 时间)
        // says less than holding the word's specific one.
        let translated: f32 = self
            .groups
            .iter()
            .zip(&self.group_weights)
            .zip(&self.group_idfs)
            .filter_map(|((g, w), (turn, idfs))| {
                let held = g
                    .iter()
                    .zip(idfs)
                    .filter(|(a, _)| holds(a))
                    .map(|(_, idf)| *idf)
                    .reduce(f32::max)?;
                Some(w.min(turn * held))
            })
            .sum();
        let phrase = self.phrase.as_ref().is_some_and(|p| {
            tokens.len() >= p.len()
                && tokens
                    .windows(p.len())
                    .any(|w| w.iter().zip(p).all(|(a, b)| a.text == *b))
        });
        Evidence {
            coverage: share(covered).clamp(0.0, 1.0),
            content: if content_total > 0.0 {
                (content_held / content_total).clamp(0.0, 1.0)
            } else {
                0.0
            },
            bm25: share(bm25).clamp(0.0, 2.0),
            phrase,
            translated: if group_total > 0.0 {
                (translated / group_total).clamp(0.0, 1.0)
            } else {
                0.0
            },
            cosine,
            pairing: Pairing::of(self.script, script_milli(text)),
            terms: self.n_terms,
            dialogue: self.dialogue,
            known: self.known,
            docs: self.docs,
            length: (1.0 + tokens.len() as f32).ln(),
            best_lexical: 0.0,
            best_cosine: None,
            stage: None,
        }
    }
}

/// The text of a memory as the index holds it: title, text and tags.
pub(crate) fn indexed_text(m: &Memory) -> String {
    let mut text = match &m.title {
        Some(t) => format!("{t}\n{}", m.text),
        None => m.text.clone(),
    };
    for tag in &m.tags {
        text.push('\n');
        text.push_str(tag);
    }
    text
}

/// One logistic model: features standardised, weighted, summed with a bias.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Logistic {
    /// Feature names ([`FEATURES`]), in the order of the other vectors.
    pub(crate) features: Vec<String>,
    /// Mean subtracted from each feature.
    pub(crate) mean: Vec<f32>,
    /// Scale each centred feature is divided by.
    pub(crate) scale: Vec<f32>,
    /// One weight per feature.
    pub(crate) weights: Vec<f32>,
    /// Intercept.
    pub(crate) bias: f32,
    /// The operating point: hits below this probability are dropped by default.
    pub(crate) threshold: f32,
}

impl Logistic {
    fn valid(&self) -> bool {
        let n = self.features.len();
        self.mean.len() == n
            && self.scale.len() == n
            && self.weights.len() == n
            && self.scale.iter().all(|s| *s > 0.0)
            && self
                .features
                .iter()
                .all(|f| FEATURES.contains(&f.as_str()) || STAGE_FEATURES.contains(&f.as_str()))
            && (0.0..1.0).contains(&self.threshold)
    }

    fn probability(&self, e: &Evidence) -> f32 {
        self.probability_with(|name| e.feature(name).unwrap_or(0.0))
    }

    /// The probability given each feature's value by name.
    fn probability_with(&self, feature: impl Fn(&str) -> f32) -> f32 {
        let z: f32 = self
            .features
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .zip(&self.weights)
            .map(|(((f, m), s), w)| (feature(f) - m) / s * w)
            .sum::<f32>()
            + self.bias;
        1.0 / (1.0 + (-z).exp())
    }
}

/// The variants of the relevance model (see the module docs).
#[derive(Debug, Clone, Deserialize)]
pub struct RelevanceModel {
    /// For hits without a cosine of the calibrated model.
    pub(crate) lexical: Logistic,
    /// For hits with one.
    pub(crate) semantic: Logistic,
    /// For hybrid hits with one that the second stage ranked
    /// ([`Evidence::stage`]) for a question (one turn), beside `semantic`.
    #[serde(default)]
    pub(crate) reranked: Option<Logistic>,
    /// For a conversation's hybrid hits that the second stage ranked,
    /// instead of `semantic` (fitted on conversations only).
    #[serde(default)]
    pub(crate) dialogue: Option<Logistic>,
}

/// The checked-in model (written by `scripts/train-relevance.py`).
const WEIGHTS_JSON: &str = include_str!("relevance_weights.json");

/// The checked-in model, parsed once.
pub fn model() -> &'static RelevanceModel {
    static MODEL: std::sync::LazyLock<RelevanceModel> = std::sync::LazyLock::new(|| {
        let m: RelevanceModel = serde_json::from_str(WEIGHTS_JSON)
            .expect("relevance_weights.json is checked in and parsed by a test");
        assert!(
            m.lexical.valid()
                && m.semantic.valid()
                && m.reranked.as_ref().is_none_or(Logistic::valid)
                && m.dialogue.as_ref().is_none_or(Logistic::valid),
            "relevance_weights.json names known features with one value each"
        );
        m
    });
    &MODEL
}

impl RelevanceModel {
    /// The variant that judges a hit with this evidence, and its
    /// probability. A question's hybrid hit that the second stage ranked is
    /// judged by `reranked` and by `semantic`, and the judgement further
    /// above its threshold counts: the second stage's evidence only ever
    /// keeps more. A conversation's is judged by `dialogue` alone.
    fn judge(&self, e: &Evidence) -> (&Logistic, f32) {
        fn one<'m>(v: &'m Logistic, e: &Evidence) -> (&'m Logistic, f32) {
            (v, v.probability(e))
        }
        let second = if e.dialogue {
            &self.dialogue
        } else {
            &self.reranked
        };
        match (e.cosine, e.stage, second) {
            (Some(_), Some(_), Some(dialogue)) if e.dialogue => one(dialogue, e),
            (Some(_), Some(_), Some(reranked)) => {
                let (a, b) = (one(&self.semantic, e), one(reranked, e));
                if b.1 - b.0.threshold > a.1 - a.0.threshold {
                    b
                } else {
                    a
                }
            }
            (Some(_), _, _) => one(&self.semantic, e),
            (None, _, _) => one(&self.lexical, e),
        }
    }

    /// P(relevant) of a hit with this evidence, in (0, 1).
    pub fn probability(&self, e: &Evidence) -> f32 {
        self.judge(e).1
    }

    /// The probability below which a hit with this evidence is dropped by default.
    pub fn threshold(&self, e: &Evidence) -> f32 {
        self.judge(e).0.threshold
    }

    /// Whether a hit with probability `p` (and this evidence) is kept under
    /// `min_score`: `None` is the default threshold, `Some(0.0)` keeps everything.
    pub fn keeps(&self, e: &Evidence, p: f32, min_score: Option<f32>) -> bool {
        p >= min_score.unwrap_or_else(|| self.threshold(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(coverage: f32, cosine: Option<f32>, pairing: Pairing) -> Evidence {
        Evidence {
            coverage,
            content: coverage,
            bm25: coverage,
            phrase: false,
            translated: 0.0,
            cosine,
            pairing,
            terms: 2f32.ln(),
            dialogue: false,
            known: 1.0,
            docs: 100f32.ln(),
            length: 10f32.ln(),
            best_lexical: coverage,
            best_cosine: cosine,
            stage: None,
        }
    }

    #[test]
    fn the_checked_in_model_parses_and_is_monotone_in_lexical_evidence() {
        let m = model();
        for cosine in [None, Some(0.84)] {
            let low = m.probability(&evidence(0.0, cosine, Pairing::Latin));
            let high = m.probability(&evidence(1.0, cosine, Pairing::Latin));
            assert!(low < high, "{cosine:?}: {low} < {high}");
            assert!(0.0 < low && high < 1.0);
        }
        let e = evidence(0.0, None, Pairing::Latin);
        assert!(m.keeps(&e, 0.0, Some(0.0)), "0 turns the decision off");
        assert!(!m.keeps(&e, 0.2, Some(0.3)));
    }

    /// The trainer's own predictions (`scripts/train-relevance.py --parity`)
    /// for sample rows of its training data: this evaluator must agree.
    #[test]
    fn the_evaluator_agrees_with_the_trainer() {
        let rows = include_str!("../tests/fixtures/relevance-parity.jsonl");
        let m = model();
        let mut n = 0;
        for line in rows.lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let variant = match row["variant"].as_str().unwrap() {
                "reranked" => m.reranked.as_ref().expect("the reranked variant"),
                "dialogue" => m.dialogue.as_ref().expect("the dialogue variant"),
                "semantic" => &m.semantic,
                _ => &m.lexical,
            };
            assert_eq!(row["hasCosine"], row["variant"] != "lexical");
            let got =
                variant.probability_with(|name| row["features"][name].as_f64().unwrap() as f32);
            let want = row["probability"].as_f64().unwrap() as f32;
            assert!((got - want).abs() < 1e-4, "{got} != {want}: {line}");
            n += 1;
        }
        assert!(n >= 50, "{n} rows");
    }

    #[test]
    fn every_feature_name_is_known() {
        let e = evidence(0.5, Some(0.8), Pairing::Mixed);
        for name in FEATURES.iter().chain(&STAGE_FEATURES) {
            assert!(e.feature(name).is_some(), "{name}");
        }
        assert_eq!(e.feature("cosine_mixed"), Some(0.8));
        assert_eq!(e.feature("cosine_cjk"), Some(0.0));
        assert_eq!(e.feature("no such feature"), None);
    }

    #[test]
    fn the_second_stage_adds_its_judgement_to_a_questions_hybrid_hits_and_judges_a_conversations() {
        let m = model();
        let reranked = m
            .reranked
            .as_ref()
            .expect("the reranked variant is checked in");
        let stage = Stage {
            score: 0.75,
            best: 0.75,
            mean: 0.25,
            text_rank: 1.0,
            sem_rank: 2.0,
            fused: 1.0,
        };
        let mut e = Evidence {
            stage: Some(stage),
            ..evidence(0.2, Some(0.84), Pairing::Latin)
        };
        let (variant, p) = m.judge(&e);
        let margin = |v: &Logistic| v.probability(&e) - v.threshold;
        assert!(p - variant.threshold >= margin(reranked).max(margin(&m.semantic)));
        assert_eq!(e.feature("stage_spread"), Some(0.5));
        assert_eq!(e.feature("stage_text_rrf"), Some(1.0));
        e.dialogue = true;
        let dialogue = m
            .dialogue
            .as_ref()
            .expect("the dialogue variant is checked in");
        assert!(std::ptr::eq(m.judge(&e).0, dialogue), "a conversation");
        assert_eq!(m.probability(&e), dialogue.probability(&e));
        e.stage = None;
        assert!(
            std::ptr::eq(m.judge(&e).0, &m.semantic),
            "a conversation's hit the second stage did not rank"
        );
        e.stage = Some(stage);
        e.dialogue = false;
        e.cosine = None;
        assert!(std::ptr::eq(m.judge(&e).0, &m.lexical), "no cosine");
        // A higher score of the second stage never lowers the probability.
        let e = |score| Evidence {
            stage: Some(Stage { score, ..stage }),
            ..evidence(0.2, Some(0.84), Pairing::Latin)
        };
        assert!(m.probability(&e(0.2)) <= m.probability(&e(0.8)));
    }

    #[test]
    fn pairings_follow_the_scripts() {
        let s = |t: &str| script_milli(t);
        assert_eq!(
            Pairing::of(s("量子色动力学"), s("小王对花生过敏")),
            Pairing::Cjk
        );
        assert_eq!(
            Pairing::of(s("peanut allergy"), s("Wang is allergic")),
            Pairing::Latin
        );
        assert_eq!(
            Pairing::of(s("量子色动力学"), s("Wang is allergic")),
            Pairing::Mixed
        );
    }
}
