//! Query planning and ranking over the index, in three modes.
//!
//! **fulltext** — a query is tokenized with the index's own tokenizer, stop words are
//! dropped, and the text index is asked twice at most: an AND pass (every term
//! must match) and, when that finds fewer than `orFallbackMinHits`, an OR pass
//! that fills the remaining places. AND hits always rank above OR hits; within
//! a pass, BM25 decides and ties go to the smaller id, so results are
//! deterministic and a rebuilt index returns the same order.
//!
//! **semantic** — the query is embedded (with the query prefix) and the vector
//! index returns the nearest visible memories (the filter is inside the KNN).
//!
//! **hybrid** (the default) — both rankings, each `HYBRID_DEPTH` deep, are
//! fused by reciprocal rank ([`crate::index::fusion`]) with `search.rrfK` and
//! the two weights. A full-text hit written in another script than the query
//! (mostly CJK against mostly Latin) weighs nothing: it matched on a name or
//! a number, and letting it vote made hybrid worse than semantic alone across
//! languages (dev recall@5 zh→en 0.213 against 0.331).
//!
//! **Cross-lingual pass** — with the CC-CEDICT lexicon installed
//! ([`crate::embed::dictionary`]), the query's content words are also translated
//! into the other language ([`crate::query::translate`]) and searched like a
//! query of their own, under the same filter. That pass votes, at
//! `search.fulltextWeight`, only for hits written in the other script than
//! the query that contain a translated term: each memory gets at most one
//! full-text vote, from the pass in its own language. In hybrid mode it is a
//! third ranking in the fusion; in fulltext mode, when it finds such hits,
//! the two full-text rankings are fused and the query's own hits that got no
//! vote follow (no literal match is lost; else full text is unchanged). Without the lexicon nothing changes. Without an embedder, hybrid runs as fulltext and the
//! response says `"mode": "fulltext"`; an explicit semantic request fails with
//! `EMBEDDING_UNAVAILABLE` instead.

use serde::{Deserialize, Serialize};

use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::index::filter::Filter;
use crate::index::fusion;
#[cfg(test)]
use crate::index::tokenizer::is_stop_word;
use crate::index::tokenizer::{Term, TermKind, tokenize};
use crate::model::Memory;
use crate::query::{QueryPlan, WeightedTerm};

/// How a query is matched.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 over our tokenizer's terms: an AND pass, then an OR pass when AND is weak.
    Fulltext,
    /// Nearest neighbours of the query's embedding.
    Semantic,
    /// Both rankings fused by reciprocal rank (`search.rrfK` and weights).
    Hybrid,
}

impl SearchMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Fulltext => "fulltext",
            SearchMode::Semantic => "semantic",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for SearchMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fulltext" | "full-text" | "text" => Ok(SearchMode::Fulltext),
            "semantic" | "vector" => Ok(SearchMode::Semantic),
            "hybrid" => Ok(SearchMode::Hybrid),
            other => Err(Error::invalid(format!(
                "mode must be one of fulltext, semantic, hybrid; got {other:?}"
            ))),
        }
    }
}

impl std::fmt::Display for SearchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How deep each ranking goes before hybrid fusion.
pub(crate) const HYBRID_DEPTH: usize = 50;

/// Which pass found a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pass {
    /// Every query term matched.
    And,
    /// Some query terms matched.
    Or,
    /// Found by the vector index only.
    Semantic,
}

/// A search request after authorization: the filter is already the caller's visibility.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// Free text.
    pub query: String,
    /// What the caller may see (and any extra restriction it asked for).
    pub filter: Filter,
    /// Number of hits wanted; `None` uses `search.defaultLimit`.
    pub limit: Option<usize>,
    /// How to match; `None` uses `search.mode`.
    pub mode: Option<SearchMode>,
}

/// One result.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SearchHit {
    /// The memory.
    #[serde(flatten)]
    pub memory: Memory,
    /// Relevance score (higher is better; comparable within one response only).
    pub score: f32,
    /// The pass that found it.
    pub pass: Pass,
    /// Whether it expires within `lifecycle.expiringSoonDays` (set by the hub).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expiring_soon: bool,
}

/// A response.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// The query terms that were searched for.
    pub(crate) terms: Vec<String>,
    /// The mode that ran (`fulltext` when hybrid fell back for want of an embedder).
    pub mode: SearchMode,
    /// Why the mode that ran differs from the one asked for, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Journal lines the caller could read that the index has not applied
    /// yet (it is catching up): the hits may miss them. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_behind: Option<u64>,
}

/// The terms a query searches for: tokenized, stop words dropped (unless that
/// leaves nothing), duplicates removed.
#[cfg(test)]
pub(crate) fn query_terms(query: &str) -> Vec<Term> {
    let all = tokenize(query);
    let content: Vec<Term> = all.iter().filter(|t| !is_stop_word(t)).cloned().collect();
    let mut chosen = if content.is_empty() { all } else { content };
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|t| seen.insert(t.text.clone()));
    chosen
}

/// The longest query searched, in characters. Queries are questions or a
/// few turns of conversation; a longer one costs CPU without finding more.
pub(crate) const MAX_QUERY_CHARS: usize = 2000;

/// Runs a search. `embedder` is `None` when none is available: hybrid then
/// runs as fulltext and semantic fails with `EMBEDDING_UNAVAILABLE`. `now`
/// (the hub's clock) anchors the times a query names ("last week").
pub(crate) fn search(
    index: &Index,
    embedder: Option<&dyn Embedder>,
    req: &SearchRequest,
    cfg: &SearchConfig,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<SearchResults> {
    let limit = req.limit.unwrap_or(cfg.default_limit);
    if limit == 0 || limit > cfg.max_limit {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {}",
            cfg.max_limit
        )));
    }
    if req.query.trim().is_empty() {
        return Err(Error::invalid("query must not be empty"));
    }
    let chars = req.query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(Error::invalid(format!(
            "query is {chars} characters; the limit is {MAX_QUERY_CHARS}"
        )));
    }
    // Changes applied but not yet committed to the text index become visible now.
    // If the commit fails (a full disk), search what was committed; the index catches up later.
    if let Err(e) = index.refresh() {
        tracing::warn!(error = %e, "searching the last committed text index");
    }
    let req = &without_superseded(req);
    let requested = req.mode.unwrap_or(cfg.mode);
    let (mode, embedder) = match (requested, embedder) {
        (SearchMode::Fulltext, _) => (SearchMode::Fulltext, None),
        (SearchMode::Hybrid, None) => (SearchMode::Fulltext, None),
        (SearchMode::Semantic, None) => {
            return Err(Error::EmbeddingUnavailable(
                "no embedder is loaded; search with --mode fulltext".into(),
            ));
        }
        (m, Some(e)) => (m, Some(e)),
    };
    let plan = crate::query::plan(&req.query);
    // A time the query names ("in May 2023", "last week", "去年五月") ranks
    // memories from then higher; the ranking reaches deeper so that they can
    // come up from below the cut.
    let range = crate::when::query_range(&req.query, now);
    let wanted = limit;
    let limit = if range.is_some() {
        HYBRID_DEPTH.max(limit)
    } else {
        limit
    };
    let term_texts = plan.terms.iter().map(|w| w.term.text.clone()).collect();
    let mut mode = mode;
    let mut fallback = None;
    let scored: Vec<(String, f32, Pass)> = match (mode, embedder) {
        (SearchMode::Semantic, Some(e)) => semantic_ranking(index, e, &plan, req, limit)?,
        (SearchMode::Hybrid, Some(e)) if fusion::learned().is_some_and(|m| m.enabled) => {
            let model = fusion::learned().expect("checked in the guard");
            match hybrid_candidates(index, e, &plan, req, cfg, limit) {
                Ok(candidates) => {
                    let mut scored: Vec<(String, f32, Pass)> = candidates
                        .into_iter()
                        // Quantised like BM25 scores: features that differ by
                        // a few ulps between an incremental and a rebuilt
                        // index must not reorder hits (ties go by id).
                        .map(|c| {
                            let score = crate::index::text::quantise(model.score(&c.features));
                            (c.id, score, c.pass)
                        })
                        .collect();
                    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                    scored.truncate(limit);
                    scored
                }
                Err(err) if err.code() == crate::error::ErrorCode::EmbeddingUnavailable => {
                    mode = SearchMode::Fulltext;
                    fallback = Some(err.to_string());
                    fulltext_ranking(index, &plan, &req.filter, limit, cfg)?
                }
                Err(err) => return Err(err),
            }
        }
        (SearchMode::Hybrid, Some(e)) => {
            let depth = HYBRID_DEPTH.max(limit);
            let text = fulltext_ranking(index, &plan, &req.filter, depth, cfg)?;
            let semantic = match semantic_ranking(index, e, &plan, req, depth) {
                Ok(s) => s,
                // E.g. the index holds vectors of another model: full text still answers.
                Err(err) if err.code() == crate::error::ErrorCode::EmbeddingUnavailable => {
                    mode = SearchMode::Fulltext;
                    fallback = Some(err.to_string());
                    Vec::new()
                }
                Err(err) => return Err(err),
            };
            let text_weighted = text_weights(index, &req.query, &text, &req.filter, cfg, None)?;
            // The cross-lingual pass votes for the hits in the other script,
            // the one the query's own terms cannot vote for.
            let (translated, translated_weighted) =
                translated_ranking(index, &req.query, &req.filter, depth, cfg)?;
            let semantic_weighted: Vec<(String, f32)> = semantic
                .iter()
                .map(|h| (h.0.clone(), cfg.semantic_weight))
                .collect();
            let mut passes: std::collections::HashMap<&str, Pass> =
                translated.iter().map(|h| (h.0.as_str(), h.2)).collect();
            passes.extend(text.iter().map(|h| (h.0.as_str(), h.2)));
            fusion::rrf_weighted(
                &[&text_weighted, &translated_weighted, &semantic_weighted],
                cfg.rrf_k,
            )
            .into_iter()
            .take(limit)
            .map(|(id, score)| {
                let pass = passes.get(id.as_str()).copied().unwrap_or(Pass::Semantic);
                (id, score, pass)
            })
            .collect()
        }
        _ => fulltext_search(index, &plan, req, limit, cfg)?,
    };
    let ids: Vec<String> = scored.iter().map(|(id, _, _)| id.clone()).collect();
    let mut rows = index.meta.get_many(&ids, &req.filter)?;
    let mut scored = scored;
    if let Some(range) = range {
        time_boost(&mut scored, &rows, range, mode == SearchMode::Fulltext);
    }
    scored.truncate(wanted);
    let hits = scored
        .into_iter()
        .filter_map(|(id, score, pass)| {
            rows.remove(&id).map(|memory| SearchHit {
                memory,
                score,
                pass,
                expiring_soon: false,
            })
        })
        .collect();
    let mut hits: Vec<SearchHit> = hits;
    rerank(&mut hits, mode, cfg.short_weight);
    Ok(SearchResults {
        hits,
        terms: term_texts,
        mode,
        fallback: fallback.or_else(|| {
            (mode != requested).then(|| format!("{requested} search needs an embedder; ran {mode}"))
        }),
        index_behind: None,
    })
}

/// A hit whose event time (else its write time) lies in the range the query
/// names scores `1 + TIME_BOOST` times as much. Chosen by 5-fold
/// cross-validation by conversation on LoCoMo dev (0.25, 0.5, 1.0 tried;
/// 1.0 chosen in four folds of five; full text 0.586 → 0.596, the 102
/// questions that name a time 0.650 → 0.723).
pub(crate) const TIME_BOOST: f32 = 1.0;

/// Multiplies the score of hits from within `range` by `1 + TIME_BOOST`
/// and re-sorts (ties by id; in full text, AND hits stay before OR hits).
/// A boost, not a filter: nothing is dropped.
fn time_boost(
    scored: &mut [(String, f32, Pass)],
    rows: &std::collections::HashMap<String, Memory>,
    range: crate::when::TimeRange,
    fulltext: bool,
) {
    let factor = 1.0 + TIME_BOOST;
    for (id, score, _) in scored.iter_mut() {
        if rows
            .get(id)
            .is_some_and(|m| range.contains(m.setting.time_at.unwrap_or(m.ts)))
        {
            *score *= factor;
        }
    }
    let group = |p: Pass| u8::from(fulltext && p == Pass::Or);
    scored.sort_by(|a, b| {
        group(a.2)
            .cmp(&group(b.2))
            .then_with(|| b.1.total_cmp(&a.1))
            .then_with(|| a.0.cmp(&b.0))
    });
}

/// The full-text ranking with a fusion weight per hit: `search.fulltextWeight`,
/// or nothing for a hit written in another script than the query (mostly CJK
/// against mostly Latin, [`crate::query::scripts_differ`]). Such a hit can
/// only have matched on a name or a number, so it may not outvote the
/// semantic ranking, which reads across languages; it keeps its place, so
/// the hits below it are not promoted.
///
/// With `translations` (the ranking of the cross-lingual pass,
/// [`translated_ranking`]), the other way round: only hits written in
/// another script than the query vote, so each memory gets one full-text
/// vote at most, from the pass in its own language; and only those that
/// contain one of the `translations` (a name kept as it is votes no more
/// here than in the query's own pass).
fn text_weights(
    index: &Index,
    query: &str,
    text: &[(String, f32, Pass)],
    filter: &Filter,
    cfg: &SearchConfig,
    translations: Option<&[Term]>,
) -> Result<Vec<(String, f32)>> {
    let query_share = crate::query::cjk_share(query);
    let ids: Vec<String> = text.iter().map(|h| h.0.clone()).collect();
    let bodies = index.meta.bodies_of(&ids, filter)?;
    Ok(text
        .iter()
        .map(|(id, _, _)| {
            let body = bodies.get(id);
            let differs = body.is_some_and(|b| {
                crate::query::scripts_differ(query_share, crate::query::cjk_share(b))
            });
            let votes = match translations {
                None => !differs,
                Some(terms) => differs && body.is_some_and(|b| contains_any(b, terms)),
            };
            let weight = if votes { cfg.fulltext_weight } else { 0.0 };
            (id.clone(), weight)
        })
        .collect())
}

/// Whether `text` holds one of `terms` (words and bigrams as the tokenizer
/// cuts them, jieba words as the words field does).
fn contains_any(text: &str, terms: &[Term]) -> bool {
    let words: std::collections::HashSet<String> =
        tokenize(text).into_iter().map(|t| t.text).collect();
    if terms
        .iter()
        .any(|t| matches!(t.kind, TermKind::Word | TermKind::Bigram) && words.contains(&t.text))
    {
        return true;
    }
    terms.iter().any(|t| t.kind == TermKind::Segment)
        && crate::index::tokenizer::cjk_words(text).iter().any(|w| {
            terms
                .iter()
                .any(|t| t.kind == TermKind::Segment && t.text == *w)
        })
}

/// One hybrid candidate: a memory from either ranking with the features the
/// learned fusion reads ([`fusion::FEATURES`]) and what describes it beyond
/// them (exported by `memd eval --features`, not used by the model).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// Memory id.
    pub id: String,
    /// The pass that found it (`semantic` when only the vector index did).
    pub(crate) pass: Pass,
    /// Values in the order of [`fusion::FEATURES`] (exported by name, not here).
    #[serde(skip)]
    pub features: [f32; fusion::N_FEATURES],
    /// Rank (from 1) in the full-text list, if there.
    pub text_rank: Option<usize>,
    /// Rank (from 1) in the semantic list, if there.
    pub(crate) semantic_rank: Option<usize>,
    /// The memory's importance.
    pub(crate) importance: f32,
    /// The memory's tier, if it has one.
    pub(crate) tier: Option<String>,
    /// The memory's stage.
    pub(crate) stage: String,
    /// Days between the memory's time and the newest candidate's.
    pub(crate) age_days: f32,
}

/// The candidates of a hybrid search (the full-text and semantic lists,
/// each `HYBRID_DEPTH.max(limit)` deep) with their features, full-text
/// hits first in their order, then semantic-only hits in theirs.
pub fn hybrid_candidates(
    index: &Index,
    embedder: &dyn Embedder,
    plan: &QueryPlan,
    req: &SearchRequest,
    cfg: &SearchConfig,
    limit: usize,
) -> Result<Vec<Candidate>> {
    let req = &without_superseded(req);
    let depth = HYBRID_DEPTH.max(limit);
    let text = fulltext_ranking(index, plan, &req.filter, depth, cfg)?;
    let qvec = embedder
        .embed_queries(&[plan.semantic.as_str()])?
        .pop()
        .ok_or_else(|| Error::Internal("embedder returned no vector".into()))?;
    let semantic: Vec<(String, f32)> = index
        .vector_search(&qvec, embedder.model_id(), &req.filter, depth)?
        .into_iter()
        .map(|(id, distance)| (id, 1.0 - distance))
        .collect();
    let text_weighted = text_weights(index, &req.query, &text, &req.filter, cfg, None)?;
    let mut ids: Vec<String> = text.iter().map(|h| h.0.clone()).collect();
    for (id, _) in &semantic {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    let rows = index.meta.get_many(&ids, &req.filter)?;
    let vectors = index.vectors_of(&ids, embedder.model_id())?;
    let best_cos = semantic.first().map_or(0.0, |h| h.1);
    let query_share = crate::query::cjk_share(&req.query);
    let coverage = Coverage::new(index, &plan.terms, &req.filter)?;
    let newest = rows.values().map(|m| m.ts).max();
    let rrf = |rank: usize| cfg.rrf_k / (cfg.rrf_k + rank as f32);
    Ok(ids
        .into_iter()
        .filter_map(|id| {
            let m = rows.get(&id)?;
            let t = text.iter().position(|h| h.0 == id);
            let s = semantic.iter().position(|h| h.0 == id);
            let text_weight = t.map_or(0.0, |i| text_weighted[i].1);
            let text_rrf = t.map_or(0.0, |i| text_weight * rrf(i + 1));
            let sem_rrf = s.map_or(0.0, |i| cfg.semantic_weight * rrf(i + 1));
            let cosine = vectors.get(&id).map(|v| dot(&qvec, v));
            let body = match &m.title {
                Some(title) => format!("{title}\n{}", m.text),
                None => m.text.clone(),
            };
            let differs = crate::query::scripts_differ(query_share, crate::query::cjk_share(&body));
            // Full-text evidence for a memory in another script is void (see
            // `text_weights`): it can only have matched a name or a number.
            let text_evidence = if differs { 0.0 } else { 1.0 };
            let features = [
                text_rrf,
                sem_rrf,
                cosine.unwrap_or(0.0),
                cosine.map_or(-1.0, |c| c - best_cos),
                text_evidence * f32::from(t.is_some_and(|i| text[i].2 == Pass::And)),
                text_evidence * coverage.of(&body),
                if plan.conversational { text_rrf } else { 0.0 },
                query_share * sem_rrf,
                text_evidence * f32::from(t.is_some() && s.is_some()),
            ];
            Some(Candidate {
                pass: t.map_or(Pass::Semantic, |i| text[i].2),
                features,
                text_rank: t.map(|i| i + 1),
                semantic_rank: s.map(|i| i + 1),
                importance: m.importance,
                tier: m.tier.map(|t| t.as_str().to_string()),
                stage: m.stage.as_str().to_string(),
                age_days: newest.map_or(0.0, |n| (n - m.ts).num_seconds() as f32 / 86400.0),
                id,
            })
        })
        .collect())
}

/// The cosine similarity of two vectors (0 when either is zero).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let d: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n =
        a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 { d / n } else { 0.0 }
}

/// The share of a query's weight × IDF that a text contains.
struct Coverage<'a> {
    terms: &'a [WeightedTerm],
    signal: Vec<f32>,
    total: f32,
}

impl<'a> Coverage<'a> {
    fn new(index: &Index, terms: &'a [WeightedTerm], filter: &Filter) -> Result<Self> {
        let plain: Vec<Term> = terms.iter().map(|w| w.term.clone()).collect();
        let (dfs, n) = index.text_doc_freqs(&plain, filter)?;
        let signal: Vec<f32> = terms
            .iter()
            .zip(&dfs)
            .map(|(w, &df)| {
                let idf = ((n as f32 - df as f32 + 0.5) / (df as f32 + 0.5) + 1.0).ln();
                w.weight * idf
            })
            .collect();
        let total = signal.iter().sum::<f32>().max(f32::EPSILON);
        Ok(Coverage {
            terms,
            signal,
            total,
        })
    }

    fn of(&self, text: &str) -> f32 {
        let words: std::collections::HashSet<String> =
            tokenize(text).into_iter().map(|t| t.text).collect();
        let chars: std::collections::HashSet<String> = crate::index::tokenizer::cjk_chars(text)
            .into_iter()
            .collect();
        let segments: std::collections::HashSet<String> =
            if self.terms.iter().any(|w| w.term.kind == TermKind::Segment) {
                crate::index::tokenizer::cjk_words(text)
                    .into_iter()
                    .collect()
            } else {
                Default::default()
            };
        self.terms
            .iter()
            .zip(&self.signal)
            .filter(|(w, _)| match w.term.kind {
                TermKind::Single => chars.contains(&w.term.text),
                TermKind::Segment => segments.contains(&w.term.text),
                TermKind::Word | TermKind::Bigram => words.contains(&w.term.text),
            })
            .map(|(_, s)| *s)
            .sum::<f32>()
            / self.total
    }
}

/// Long conversational queries: how far the OR pass reaches before the coverage re-rank.
pub(crate) const COVERAGE_DEPTH: usize = 200;
/// Weight of query coverage against normalised BM25 in the re-rank (seed: 6.0).
pub(crate) const COVERAGE_BOOST: f32 = 6.0;

/// The AND pass, then the OR pass when AND finds fewer than
/// `orFallbackMinHits`: `(id, score, pass)`, AND hits first. A conversational
/// query (see [`crate::query`]) skips the AND pass, which it could never pass,
/// and its OR hits are re-ranked by coverage.
fn fulltext_ranking(
    index: &Index,
    plan: &QueryPlan,
    filter: &Filter,
    limit: usize,
    cfg: &SearchConfig,
) -> Result<Vec<(String, f32, Pass)>> {
    let terms: Vec<(Term, f32)> = plan
        .terms
        .iter()
        .map(|w| (w.term.clone(), w.weight))
        .collect();
    if plan.conversational {
        let depth = COVERAGE_DEPTH.max(limit);
        let hits = index.text_search_weighted(&terms, filter, false, depth)?;
        let mut scored = coverage_rerank(index, &plan.terms, hits, filter)?;
        scored.truncate(limit);
        return Ok(scored);
    }
    let mut scored: Vec<(String, f32, Pass)> = index
        .text_search_weighted(&terms, filter, true, limit)?
        .into_iter()
        .map(|h| (h.id, h.score, Pass::And))
        .collect();
    if terms.len() > 1 && scored.len() < cfg.or_fallback_min_hits.min(limit) {
        let or_hits = index.text_search_weighted(&terms, filter, false, limit)?;
        for h in or_hits {
            if scored.len() >= limit {
                break;
            }
            if !scored.iter().any(|(id, _, _)| *id == h.id) {
                scored.push((h.id, h.score, Pass::Or));
            }
        }
    }
    Ok(scored)
}

/// Re-ranks OR hits of a long query: BM25 (normalised to the best hit) plus
/// `COVERAGE_BOOST` × the share of the query's weight × IDF that the memory
/// contains. BM25 alone favours short texts that repeat one term; coverage
/// favours memories that speak of several things the conversation mentions.
fn coverage_rerank(
    index: &Index,
    terms: &[WeightedTerm],
    hits: Vec<crate::index::text::TextHit>,
    filter: &Filter,
) -> Result<Vec<(String, f32, Pass)>> {
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let coverage = Coverage::new(index, terms, filter)?;
    let ids: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
    let bodies = index.meta.bodies_of(&ids, filter)?;
    let best = hits.iter().map(|h| h.score).fold(f32::EPSILON, f32::max);
    let mut scored: Vec<(String, f32, Pass)> = hits
        .into_iter()
        .map(|h| {
            let covered = bodies.get(&h.id).map_or(0.0, |b| coverage.of(b));
            (h.id, h.score / best + COVERAGE_BOOST * covered, Pass::Or)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(scored)
}

/// Full-text mode: the query's own ranking, fused by reciprocal rank with
/// the cross-lingual pass when that pass finds memories in the other script
/// holding a translation (each memory voted for by the pass in its own
/// language, as in hybrid; the query's own hits that got no vote follow, so
/// no literal match is lost); else the query's own ranking as it is (AND
/// hits, then OR hits).
fn fulltext_search(
    index: &Index,
    plan: &QueryPlan,
    req: &SearchRequest,
    limit: usize,
    cfg: &SearchConfig,
) -> Result<Vec<(String, f32, Pass)>> {
    let depth = HYBRID_DEPTH.max(limit);
    let (translated, translated_weighted) =
        translated_ranking(index, &req.query, &req.filter, depth, cfg)?;
    if translated_weighted.iter().all(|(_, w)| *w <= 0.0) {
        return fulltext_ranking(index, plan, &req.filter, limit, cfg);
    }
    let text = fulltext_ranking(index, plan, &req.filter, depth, cfg)?;
    let text_weighted = text_weights(index, &req.query, &text, &req.filter, cfg, None)?;
    let mut passes: std::collections::HashMap<&str, Pass> =
        translated.iter().map(|h| (h.0.as_str(), h.2)).collect();
    passes.extend(text.iter().map(|h| (h.0.as_str(), h.2)));
    let mut fused: Vec<(String, f32, Pass)> =
        fusion::rrf_weighted(&[&text_weighted, &translated_weighted], cfg.rrf_k)
            .into_iter()
            .take(limit)
            .map(|(id, score)| {
                let pass = passes.get(id.as_str()).copied().unwrap_or(Pass::Or);
                (id, score, pass)
            })
            .collect();
    // A hit of the query's own terms that got no vote (written in the other
    // script: a name, a word in a mixed-language memory) is still a literal
    // match; without a semantic ranking to find it, it would be lost. Such
    // hits follow every voted one, in their own order, with scores below
    // the lowest fused score.
    let floor = fused.last().map_or(1.0, |h| h.1);
    let unvoted: Vec<&(String, f32, Pass)> = text
        .iter()
        .filter(|h| !fused.iter().any(|f| f.0 == h.0))
        .take(limit.saturating_sub(fused.len()))
        .collect();
    let n = unvoted.len() as f32;
    for (j, h) in unvoted.into_iter().enumerate() {
        fused.push((h.0.clone(), floor * (n - j as f32) / (n + 1.0), h.2));
    }
    Ok(fused)
}

/// The cross-lingual full-text ranking: the query translated through the
/// installed lexicon ([`crate::query::translate`]) and searched like any
/// query, under the same filter, with its fusion weights ([`text_weights`]
/// with the translations). Empty without a lexicon or when nothing in the
/// query translates.
#[allow(clippy::type_complexity)]
fn translated_ranking(
    index: &Index,
    query: &str,
    filter: &Filter,
    limit: usize,
    cfg: &SearchConfig,
) -> Result<(Vec<(String, f32, Pass)>, Vec<(String, f32)>)> {
    // A Latin-script query can only cross into Chinese memories: without any
    // in the index, the pass would find nothing to vote for (the lexicon is
    // not even loaded). This changes no result, only the work done.
    if crate::query::cjk_share(query) <= 0.5 && !index.text_has_cjk()? {
        return Ok(Default::default());
    }
    let Some(t) =
        crate::embed::dictionary::lexicon().and_then(|l| crate::query::translate(query, l))
    else {
        return Ok(Default::default());
    };
    let hits = fulltext_ranking(index, &t.plan, filter, limit, cfg)?;
    let weights = text_weights(index, query, &hits, filter, cfg, Some(&t.translations))?;
    Ok((hits, weights))
}

/// The nearest visible memories to the embedded query: `(id, cosine similarity, Semantic)`.
fn semantic_ranking(
    index: &Index,
    embedder: &dyn Embedder,
    plan: &QueryPlan,
    req: &SearchRequest,
    k: usize,
) -> Result<Vec<(String, f32, Pass)>> {
    let query = embedder
        .embed_queries(&[plan.semantic.as_str()])?
        .pop()
        .ok_or_else(|| Error::Internal("embedder returned no vector".into()))?;
    Ok(index
        .vector_search(&query, embedder.model_id(), &req.filter, k)?
        .into_iter()
        .map(|(id, distance)| (id, 1.0 - distance, Pass::Semantic))
        .collect())
}

/// The request with every scope bounded by an expiry, so superseded
/// memories (whose searchable expiry is the epoch, see `index::lifecycle`)
/// never match, even for callers that see expired memories.
fn without_superseded(req: &SearchRequest) -> SearchRequest {
    let mut req = req.clone();
    let floor = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH + chrono::Duration::milliseconds(1);
    for scope in &mut req.filter.any_of {
        scope.unexpired_at = Some(scope.unexpired_at.map_or(floor, |t| t.max(floor)));
    }
    req
}

/// Rescales hits by their lifecycle signals ([`crate::lifecycle::rank`]) and
/// re-sorts them (best first; ties by id); in full-text mode AND hits still
/// rank above OR hits.
fn rerank(hits: &mut [SearchHit], mode: SearchMode, short_weight: f32) {
    for h in hits.iter_mut() {
        let m = &h.memory;
        h.score *= crate::lifecycle::rank::factor(m.stage, m.importance, m.tier, short_weight);
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

/// Search tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchConfig {
    /// Results returned when the request gives no limit.
    pub default_limit: usize,
    /// Largest limit a request may ask for.
    pub(crate) max_limit: usize,
    /// When the AND pass finds fewer hits than this, an OR pass fills up.
    pub(crate) or_fallback_min_hits: usize,
    /// Mode of a request that names none: `fulltext`, `semantic` or `hybrid`.
    pub(crate) mode: SearchMode,
    /// The `K` of reciprocal rank fusion: `score = Σ weight / (K + rank)`.
    pub(crate) rrf_k: f32,
    /// Weight of the full-text ranking in hybrid fusion.
    pub(crate) fulltext_weight: f32,
    /// Weight of the semantic ranking in hybrid fusion.
    pub(crate) semantic_weight: f32,
    /// Score multiplier of short-term hits (1 disables the penalty).
    pub(crate) short_weight: f32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            default_limit: 5,
            max_limit: 10,
            or_fallback_min_hits: 3,
            mode: SearchMode::Hybrid,
            rrf_k: 60.0,
            fulltext_weight: 1.0,
            semantic_weight: 1.0,
            short_weight: 0.5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_terms_drop_stop_words_and_duplicates() {
        let texts = |q: &str| {
            query_terms(q)
                .into_iter()
                .map(|t| t.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(texts("What is the park like in the park"), ["park", "lik"]);
        assert_eq!(texts("the"), ["the"]);
        assert_eq!(texts("公园 公园"), ["公园"]);
    }
}
