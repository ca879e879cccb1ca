//! Precision on a mixed root: does a phrase copied from a memory find that
//! memory first, and do off-topic questions get no answer?
//!
//! [`precision`] builds one root, every memory in scene `main`, from the
//! corpus lines of several datasets (each restricted to one of its scenes: a
//! LoCoMo conversation, a MADial user), as a personal root mixing English
//! conversation turns with Chinese and English memories would be. Then:
//!
//! - **exact first**: `spans` memories are picked at random (seeded), and
//!   from each a distinctive span: 8 consecutive CJK characters of a mostly
//!   Chinese memory, or 6 consecutive words of another, occurring (after
//!   normalisation) in no other memory. Each span is searched in each mode
//!   with the default relevance floor; the rate is the share of spans whose
//!   memory comes first.
//! - **off-topic**: each question is searched in each mode and recalled,
//!   all with the defaults a client gets; a question is answered when any
//!   hit comes back.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{CorpusLine, EvalRoot, load_corpus, read_jsonl};
use crate::api::{Format, RecallBody};
use crate::config::Config;
use crate::embed::EmbedderSlot;
use crate::error::{Error, Result};
use crate::hub::Caller;
use crate::index::filter::Filter;
use crate::index::tokenizer::{is_cjk, normalize};
use crate::model::Scene;
use crate::search::{SearchMode, SearchRequest};

/// CJK characters in a Chinese span.
pub const SPAN_CJK_CHARS: usize = 8;
/// Words in a span of any other text.
pub const SPAN_WORDS: usize = 6;

/// The memories of one dataset's scene that go into the mixed root.
#[derive(Debug, Clone)]
pub struct MixedSource {
    /// A dataset directory (its `corpus.jsonl` is read).
    pub dir: PathBuf,
    /// Only the corpus lines of this scene.
    pub scene: String,
}

/// An off-topic question (one JSON object a line in the fixture files).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct OffTopic {
    /// The question.
    pub query: String,
    /// `zh` or `en`.
    pub lang: String,
    /// `tune` (may be trained on) or `test` (never).
    pub split: String,
}

/// Reads off-topic questions (JSONL).
pub fn read_off_topic(path: &Path) -> Result<Vec<OffTopic>> {
    read_jsonl(path)
}

/// Options of [`precision`].
#[derive(Debug, Clone)]
pub struct PrecisionOptions {
    /// Spans searched.
    pub spans: usize,
    /// Seed of the span choice.
    pub seed: u64,
    /// A vector cache shared across runs (as [`super::EvalOptions::vector_cache`]).
    pub vector_cache: Option<PathBuf>,
    /// Modes each span and question is searched in.
    pub modes: Vec<SearchMode>,
    /// The relevance floor of every search and recall (`None`: the default).
    pub min_score: Option<f32>,
}

/// One span and where its memory ranked in each mode.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanOutcome {
    /// The corpus id of the memory the span was taken from.
    pub corpus_id: String,
    /// The span searched for.
    pub span: String,
    /// Per mode: the memory's rank (from 1) among the hits, if there.
    pub rank: Vec<(SearchMode, Option<usize>)>,
    /// Per mode: the corpus id of the first hit, if any.
    pub first: Vec<(SearchMode, Option<String>)>,
}

/// One off-topic question and what came back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OffTopicOutcome {
    /// The question.
    pub query: String,
    /// Per mode: the hits returned (corpus ids).
    pub hits: Vec<(SearchMode, Vec<String>)>,
    /// The hits recall returned (corpus ids).
    pub recall: Vec<String>,
}

/// What [`precision`] measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrecisionReport {
    /// Memories in the root.
    pub memories: usize,
    /// Every span with its ranks.
    pub spans: Vec<SpanOutcome>,
    /// Every off-topic question with its hits.
    pub off_topic: Vec<OffTopicOutcome>,
}

impl PrecisionReport {
    /// The share of spans whose memory came first in `mode`.
    pub fn exact_first(&self, mode: SearchMode) -> f64 {
        let first = self
            .spans
            .iter()
            .filter(|s| s.rank.iter().any(|(m, r)| *m == mode && *r == Some(1)))
            .count();
        first as f64 / self.spans.len().max(1) as f64
    }

    /// Off-topic questions answered with at least one hit in `mode`.
    pub fn off_topic_answered(&self, mode: SearchMode) -> usize {
        self.off_topic
            .iter()
            .filter(|q| q.hits.iter().any(|(m, h)| *m == mode && !h.is_empty()))
            .count()
    }

    /// Off-topic questions recall answered.
    pub fn off_topic_recalled(&self) -> usize {
        self.off_topic
            .iter()
            .filter(|q| !q.recall.is_empty())
            .count()
    }
}

/// A distinctive span of `text`: [`SPAN_CJK_CHARS`] consecutive CJK
/// characters of a mostly CJK text, else [`SPAN_WORDS`] consecutive words,
/// whose normalised form occurs in none of `others`. Positions are tried in
/// a random order; `None` when the text has no such span.
pub(crate) fn distinctive_span(text: &str, others: &[&str], rng: &mut StdRng) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let cjk = chars.iter().filter(|c| is_cjk(**c)).count();
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut spans: Vec<String> = if cjk * 2 > chars.iter().filter(|c| c.is_alphanumeric()).count() {
        (0..chars.len().saturating_sub(SPAN_CJK_CHARS - 1))
            .map(|i| &chars[i..i + SPAN_CJK_CHARS])
            .filter(|w| w.iter().all(|c| is_cjk(*c)))
            .map(|w| w.iter().collect())
            .collect()
    } else {
        (0..words.len().saturating_sub(SPAN_WORDS - 1))
            .map(|i| {
                words[i..i + SPAN_WORDS]
                    .join(" ")
                    .trim_matches(|c: char| !c.is_alphanumeric())
                    .to_string()
            })
            .filter(|s| s.split_whitespace().count() == SPAN_WORDS)
            .collect()
    };
    spans.shuffle(rng);
    spans.into_iter().find(|span| {
        let norm = normalize(span);
        !others.iter().any(|o| o.contains(&norm))
    })
}

/// Up to `count` memories of `corpus` in a seeded random order, each with a
/// distinctive span of its text: `(corpus id, span)`.
fn pick_spans(corpus: &[CorpusLine], count: usize, seed: u64) -> Vec<(String, String)> {
    let normalised: Vec<String> = corpus.iter().map(|l| normalize(&l.text)).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..corpus.len()).collect();
    order.shuffle(&mut rng);
    let mut picked: Vec<(String, String)> = Vec::new();
    for i in order {
        if picked.len() >= count {
            break;
        }
        let others: Vec<&str> = normalised
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, t)| t.as_str())
            .collect();
        let mut span_rng = StdRng::seed_from_u64(rng.random());
        if let Some(span) = distinctive_span(&corpus[i].text, &others, &mut span_rng) {
            picked.push((corpus[i].id.clone(), span));
        }
    }
    picked
}

/// Builds the mixed root of `sources` and measures exact-first and
/// off-topic answers (see the module docs).
pub fn precision(
    sources: &[MixedSource],
    off_topic: &[OffTopic],
    config: &Config,
    embedder: EmbedderSlot,
    options: &PrecisionOptions,
) -> Result<PrecisionReport> {
    let mut corpus: Vec<CorpusLine> = Vec::new();
    for s in sources {
        let lines: Vec<CorpusLine> = read_jsonl(&s.dir.join("corpus.jsonl"))?;
        corpus.extend(
            lines
                .into_iter()
                .filter(|l| l.scene.as_deref() == Some(s.scene.as_str())),
        );
    }
    if corpus.is_empty() {
        return Err(Error::invalid("the mixed root would be empty"));
    }
    let main = Scene::parse("main")?;
    let root = EvalRoot::open(config.clone(), embedder, options.vector_cache.as_deref())?;
    let hub = &root.hub;
    let corpus_id_of = load_corpus(hub, "mixed", &corpus, Some(&main))?;
    let picked = pick_spans(&corpus, options.spans, options.seed);

    let search = |query: &str, mode: SearchMode| -> Result<Vec<String>> {
        let results = hub.search_filtered(&SearchRequest {
            query: query.to_string(),
            filter: Filter::all(),
            limit: None,
            mode: Some(mode),
            min_score: options.min_score,
        })?;
        Ok(results
            .hits
            .iter()
            .filter_map(|h| corpus_id_of.get(&h.memory.id).cloned())
            .collect())
    };
    let mut spans = Vec::new();
    for (corpus_id, span) in picked {
        let mut rank = Vec::new();
        let mut first = Vec::new();
        for &mode in &options.modes {
            let hits = search(&span, mode)?;
            rank.push((
                mode,
                hits.iter().position(|h| *h == corpus_id).map(|i| i + 1),
            ));
            first.push((mode, hits.first().cloned()));
        }
        spans.push(SpanOutcome {
            corpus_id,
            span,
            rank,
            first,
        });
    }
    let mut outcomes = Vec::new();
    for q in off_topic {
        let mut hits = Vec::new();
        for &mode in &options.modes {
            hits.push((mode, search(&q.query, mode)?));
        }
        // The local operator reads every scene, as `Filter::all` does; only
        // looking, so nothing recalled counts as a retrieval.
        let recalled = hub
            .recall(
                &Caller::operator(hub.now()),
                RecallBody {
                    query: Some(q.query.clone()),
                    min_score: options.min_score,
                    format: Some(Format::Block),
                    touch: Some(false),
                    ..RecallBody::default()
                },
            )?
            .body;
        outcomes.push(OffTopicOutcome {
            query: q.query.clone(),
            hits,
            recall: recalled
                .hits
                .iter()
                .filter_map(|h| corpus_id_of.get(&h.hit.memory.id).cloned())
                .collect(),
        });
    }
    let memories = corpus.len();
    root.close()?;
    Ok(PrecisionReport {
        memories,
        spans,
        off_topic: outcomes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_distinctive_and_of_the_right_size() {
        let mut rng = StdRng::seed_from_u64(1);
        let zh = "Bart在学校的体育节上获得男子一百米第一名，感到非常开心。";
        let others = [
            normalize("Bart在学校的体育节上跑步"),
            normalize("感到非常开心"),
        ];
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        for _ in 0..20 {
            let span = distinctive_span(zh, &others, &mut rng).unwrap();
            assert_eq!(span.chars().count(), SPAN_CJK_CHARS, "{span}");
            assert!(span.chars().all(is_cjk) && zh.contains(&span));
            assert!(others.iter().all(|o| !o.contains(&normalize(&span))));
        }
        let en = "Melanie: I made it in pottery class yesterday, so proud!";
        let span = distinctive_span(en, &[], &mut rng).unwrap();
        assert_eq!(span.split_whitespace().count(), SPAN_WORDS, "{span}");
        assert!(!span.ends_with(',') && !span.ends_with('!'), "{span}");
        assert_eq!(distinctive_span("too short here", &[], &mut rng), None);
        assert_eq!(distinctive_span(zh, &[&normalize(zh)], &mut rng), None);
    }
}
