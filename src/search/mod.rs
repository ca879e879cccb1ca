//! Query planning and ranking over the index, in three modes, and the
//! relevance decision on every hit.
//!
//! **fulltext** — BM25 over our tokenizer's terms, ranked by evidence
//! (`fulltext.rs`): the query's own terms decide (an AND pass, an OR pass
//! when AND is weak, a coverage re-rank for conversational queries) and a
//! cross-lingual pass adds memories in the other script holding a
//! translation, at half weight, when it can change the answer. When the
//! exact pass is weak, a fuzzy pass (`fuzzy.rs`) adds memories holding a
//! word within edit distance 1 of a query word or starting with it, after
//! every exact hit.
//!
//! **semantic** — the query is embedded (with the query prefix) and the vector
//! index returns the nearest visible memories (the filter is inside the KNN).
//!
//! **hybrid** (the default) — both rankings, each `HYBRID_DEPTH` deep, fused
//! by reciprocal rank and full-text evidence (`hybrid.rs`).
//!
//! In every mode a memory that holds the query as written (one line, every
//! token adjacent and in order, stop words included) is an **exact phrase**
//! and ranks first ([`crate::index::text`] keeps positions for that). Equal
//! scores go to the stronger own-language evidence, then to the newer
//! memory, and only then to the smaller id, so results are deterministic and
//! a rebuilt index returns the same order.
//!
//! **Relevance** — every hit returned gets P(relevant) from the calibrated
//! model ([`crate::relevance`]); below the request's `min_score` (`None`: the
//! model's threshold; `Some(0.0)`: off) it is dropped, and the response
//! counts it in `dropped_below_floor`. Cosines count as evidence only with
//! the calibrated model; a full-text search judges on lexical evidence.
//!
//! Without the lexicon the cross-lingual pass is skipped. Without an
//! embedder, hybrid runs as fulltext and the response says `"mode":
//! "fulltext"`; an explicit semantic request fails with
//! `EMBEDDING_UNAVAILABLE` instead.

pub(crate) mod fulltext;
pub(crate) mod fuzzy;
pub(crate) mod hybrid;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::index::fusion;
#[cfg(test)]
use crate::index::tokenizer::{Term, is_stop_word, tokenize};
use crate::model::Memory;
use crate::query::QueryPlan;
use crate::relevance::{Evidence, QueryEvidence};
use hybrid::Stages;

pub use hybrid::Candidate;

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
    /// Both rankings fused by reciprocal rank and full-text evidence.
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
    /// Some query terms matched (or, in full text, only their translations).
    Or,
    /// Found by the vector index only.
    Semantic,
    /// In full text, found only by the fuzzy pass (typos and word forms).
    Fuzzy,
}

/// A search request after authorization: the filter is already the caller's visibility.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// Free text.
    pub query: String,
    /// What the caller may see (and any extra restriction it asked for).
    pub filter: crate::index::filter::Filter,
    /// Number of hits wanted; `None` uses `search.defaultLimit`.
    pub limit: Option<usize>,
    /// How to match; `None` uses `search.mode`.
    pub mode: Option<SearchMode>,
    /// The relevance floor: hits whose probability of being about the query
    /// is below it are dropped. `None` is the calibrated default; `Some(0.0)`
    /// turns it off.
    pub min_score: Option<f32>,
}

/// One result.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SearchHit {
    /// The memory.
    #[serde(flatten)]
    pub memory: Memory,
    /// Rank score (higher is better; comparable within one response only).
    pub score: f32,
    /// The pass that found it.
    pub pass: Pass,
    /// The memory holds the query as written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub phrase: bool,
    /// P(relevant) from the calibrated model ([`crate::relevance`]), in (0, 1).
    pub relevance: f32,
    /// What the relevance was judged on (not sent on the wire).
    #[serde(skip, default)]
    pub evidence: Evidence,
    /// In a conversation whose last turn a person spoke, both judgements'
    /// evidence: the whole conversation's and the last turn's (`evidence`
    /// is whichever counted; not sent on the wire, read by the training
    /// export).
    #[serde(skip, default)]
    pub judged_twice: Option<Box<[Evidence; 2]>>,
    /// Whether it expires within `lifecycle.expiringSoonDays` (set by the hub).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expiring_soon: bool,
    /// Memories the caller may read that likely contradict this one (set by the hub).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts_with: Vec<crate::model::ConflictRef>,
}

/// A response.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Hits dropped because they are below the relevance floor (of those
    /// the caller may read; they would have been among `limit`).
    pub dropped_below_floor: usize,
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
    /// Whether the index had applied the whole journal when the hub checked
    /// (set by the hub): the HTTP layer then knows the reply's
    /// `x-memd-index-behind` is absent without checking again.
    #[serde(skip)]
    pub(crate) caught_up: bool,
    /// The instant the answer is for, when the request gave `as_of` (set by the hub).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
}

/// A ranked candidate before its memory is read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scored {
    /// Memory id.
    pub(crate) id: String,
    /// Rank score.
    pub(crate) score: f32,
    /// Own-language full-text evidence (the first tie-break).
    pub(crate) own: f32,
    /// The pass that found it.
    pub(crate) pass: Pass,
    /// Its cosine with the query, when the semantic ranking holds it.
    pub(crate) cosine: Option<f32>,
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

/// A `min_score` must be a number from 0 to 1.
pub(crate) fn check_min_score(min: Option<f32>) -> Result<()> {
    match min {
        Some(m) if !(0.0..=1.0).contains(&m) => Err(Error::invalid(format!(
            "min_score must be between 0 and 1; got {m}"
        ))),
        _ => Ok(()),
    }
}

/// What a search needs of its query, worked out once.
struct Planned {
    plan: QueryPlan,
    translation: Option<crate::query::Translation>,
    evidence: QueryEvidence,
    /// The evidence of the last turn alone, for a conversation whose last
    /// turn a person spoke: a hit about what was just said is about the
    /// conversation, however little it shares with the turns before.
    last_turn: Option<QueryEvidence>,
    /// The evidence of a conversation's turns a person spoke, without the
    /// assistant's (the dialogue model's features: [`crate::rerank`]).
    user_turns: Option<QueryEvidence>,
}

/// What a full-text search works with (the full-text, fuzzy and hybrid
/// passes share it).
pub(crate) struct Context<'a> {
    /// The index.
    pub(crate) index: &'a Index,
    /// The query's plan.
    pub(crate) plan: &'a QueryPlan,
    /// Its translation, if the lexicon has one.
    pub(crate) translation: Option<&'a crate::query::Translation>,
    /// Its side of the evidence.
    pub(crate) evidence: &'a QueryEvidence,
    /// The evidence of its last turn alone ([`Planned::last_turn`]).
    pub(crate) last_turn: Option<&'a QueryEvidence>,
    /// The evidence of its person's turns ([`Planned::user_turns`]).
    pub(crate) user_turns: Option<&'a QueryEvidence>,
    /// The caller's filter.
    pub(crate) filter: &'a crate::index::filter::Filter,
    /// Search settings.
    pub(crate) cfg: &'a SearchConfig,
    /// The expansions of the fuzzy pass, once it ran ([`fuzzy`]).
    pub(crate) fuzzy: std::cell::OnceCell<Vec<fuzzy::Expansion>>,
    /// Whether a second thread may work for this search (no other search
    /// holds or waits for the gate): a long query is then embedded beside
    /// its full text ([`hybrid`]).
    pub(crate) spare_core: bool,
}

impl Planned {
    fn context<'a>(
        &'a self,
        index: &'a Index,
        req: &'a SearchRequest,
        cfg: &'a SearchConfig,
    ) -> Context<'a> {
        Context {
            index,
            plan: &self.plan,
            translation: self.translation.as_ref(),
            evidence: &self.evidence,
            last_turn: self.last_turn.as_ref(),
            user_turns: self.user_turns.as_ref(),
            filter: &req.filter,
            cfg,
            fuzzy: Default::default(),
            spare_core: false,
        }
    }

    fn new(index: &Index, req: &SearchRequest) -> Result<Planned> {
        let plan = crate::query::plan(&req.query);
        let translation = translate(index, &req.query)?;
        let evidence =
            QueryEvidence::new(index, &req.query, &plan, translation.as_ref(), &req.filter)?;
        let turns = crate::query::turns(&req.query);
        let text_evidence = |text: &str| -> Result<QueryEvidence> {
            let translation = translate(index, text)?;
            let plan = crate::query::plan(text);
            QueryEvidence::new(index, text, &plan, translation.as_ref(), &req.filter)
        };
        let last_turn = match turns.last() {
            Some(last) if turns.len() > 1 && !last.is_assistant() => {
                Some(text_evidence(&last.text)?)
            }
            _ => None,
        };
        let user_turns = user_turns(&turns)
            .map(|text| text_evidence(&text))
            .transpose()?;
        Ok(Planned {
            plan,
            translation,
            evidence,
            last_turn,
            user_turns,
        })
    }
}

/// A conversation's turns a person spoke, one a line with their tags
/// (`<Bart>:"…"`), without the assistant's; `None` for a one-turn query or
/// a conversation only the assistant spoke in.
fn user_turns(turns: &[crate::query::Turn]) -> Option<String> {
    let lines: Vec<String> = turns
        .iter()
        .filter(|t| !t.is_assistant())
        .map(|t| match &t.speaker {
            Some(s) => format!("<{s}>:\"{}\"", t.text),
            None => t.text.clone(),
        })
        .collect();
    (turns.len() > 1 && !lines.is_empty()).then(|| lines.join("\n"))
}

/// The dictionary translation of `query`, when it can cross into the other
/// script: a Latin-script query only into Chinese memories, so without any
/// in the index there is nothing to translate for (and the lexicon is not
/// even loaded).
fn translate(index: &Index, query: &str) -> Result<Option<crate::query::Translation>> {
    let latin = crate::analysis::tokenizer::script_milli(query) < 500;
    Ok(if latin && !index.text_has_cjk()? {
        None
    } else {
        crate::embed::dictionary::lexicon().and_then(|l| crate::query::translate(query, l))
    })
}

/// Checks a request's limit, query and floor; returns the limit.
fn check_request(req: &SearchRequest, cfg: &SearchConfig) -> Result<usize> {
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
    check_min_score(req.min_score)?;
    Ok(limit)
}

/// The ranking of one search before exact phrases, the time boost and the
/// relevance decision.
struct Ranked {
    scored: Vec<Scored>,
    /// The mode that ran.
    mode: SearchMode,
    /// Why it differs from the one asked for, when the embedder failed.
    fallback: Option<String>,
    /// The query's vector, when a semantic ranking ran (for the cosines of
    /// the relevance decision).
    query_vector: Option<Vec<f32>>,
    /// The second stage's evidence of the hits it ranked.
    stages: hybrid::Stages,
}

/// Ranks `limit` candidates in `mode` (see the module docs); hybrid falls
/// back to full text when the embedder fails with `EMBEDDING_UNAVAILABLE`.
fn rank(
    cx: &Context<'_>,
    embedder: Option<&dyn Embedder>,
    req: &SearchRequest,
    mode: SearchMode,
    limit: usize,
) -> Result<Ranked> {
    let (index, plan, cfg) = (cx.index, cx.plan, cx.cfg);
    let fulltext_only = |limit: usize| -> Result<Vec<Scored>> {
        Ok(fulltext::ranking(cx, limit, false)?
            .into_iter()
            .map(|h| Scored {
                id: h.id,
                score: h.score,
                own: h.own,
                pass: h.pass,
                cosine: None,
            })
            .collect())
    };
    let ranked = |scored, query_vector, stages| Ranked {
        scored,
        mode,
        fallback: None,
        query_vector,
        stages,
    };
    let fell_back = |err: Error| -> Result<Ranked> {
        Ok(Ranked {
            mode: SearchMode::Fulltext,
            fallback: Some(err.to_string()),
            ..ranked(fulltext_only(limit)?, None, Stages::new())
        })
    };
    let unavailable = |err: &Error| err.code() == crate::error::ErrorCode::EmbeddingUnavailable;
    match (mode, embedder) {
        (SearchMode::Semantic, Some(e)) => {
            let (v, hits) = hybrid::semantic_ranking(index, e, plan, req, limit)?;
            let scored = hits
                .into_iter()
                .map(|(id, cosine)| Scored {
                    id,
                    score: cosine,
                    own: 0.0,
                    pass: Pass::Semantic,
                    cosine: Some(cosine),
                })
                .collect();
            Ok(ranked(scored, Some(v), Stages::new()))
        }
        (SearchMode::Hybrid, Some(e)) if crate::rerank::enabled_for(plan.dialogue).is_some() => {
            match hybrid::reranked(cx, e, req, limit) {
                Ok((scored, v, stages)) => Ok(ranked(scored, Some(v), stages)),
                Err(err) if unavailable(&err) => fell_back(err),
                Err(err) => Err(err),
            }
        }
        (SearchMode::Hybrid, Some(e)) if fusion::learned().is_some_and(|m| m.enabled) => {
            let model = fusion::learned().expect("checked in the guard");
            match hybrid::candidates(cx, e, req, limit) {
                Ok(candidates) => {
                    let mut scored: Vec<Scored> = candidates
                        .into_iter()
                        // Quantised like BM25 scores: features that differ by
                        // a few ulps between an incremental and a rebuilt
                        // index must not reorder hits.
                        .map(|c| Scored {
                            score: crate::index::text::quantise(model.score(&c.features)),
                            own: 0.0,
                            pass: c.pass,
                            cosine: None,
                            id: c.id,
                        })
                        .collect();
                    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
                    scored.truncate(limit);
                    Ok(ranked(scored, None, Stages::new()))
                }
                Err(err) if unavailable(&err) => fell_back(err),
                Err(err) => Err(err),
            }
        }
        (SearchMode::Hybrid, Some(e)) => {
            let depth = HYBRID_DEPTH.max(limit);
            match hybrid::semantic_ranking(index, e, plan, req, depth) {
                Ok((v, semantic)) => {
                    let text = fulltext::ranking(cx, depth, true)?;
                    let votes = hybrid::votes(cx, &text)?;
                    let mut fused = hybrid::fuse(&text, &votes, &semantic, cfg);
                    fused.truncate(limit);
                    Ok(ranked(fused, Some(v), Stages::new()))
                }
                // E.g. the index holds vectors of another model: full text still answers.
                Err(err) if unavailable(&err) => fell_back(err),
                Err(err) => Err(err),
            }
        }
        _ => Ok(ranked(fulltext_only(limit)?, None, Stages::new())),
    }
}

/// Runs a search. `embedder` is `None` when none is available: hybrid then
/// runs as fulltext and semantic fails with `EMBEDDING_UNAVAILABLE`. `now`
/// (the hub's clock) anchors the times a query names ("last week");
/// `spare_core` lets a long query be embedded beside its full text
/// ([`Context::spare_core`]).
pub(crate) fn search(
    index: &Index,
    embedder: Option<&dyn Embedder>,
    req: &SearchRequest,
    cfg: &SearchConfig,
    now: chrono::DateTime<chrono::Utc>,
    spare_core: bool,
) -> Result<SearchResults> {
    let limit = check_request(req, cfg)?;
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
    let q = Planned::new(index, req)?;
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
    let cx = Context {
        spare_core,
        ..q.context(index, req, cfg)
    };
    let Ranked {
        mut scored,
        mode,
        fallback,
        query_vector,
        stages,
    } = rank(&cx, embedder, req, mode, limit)?;
    let ids: Vec<String> = scored.iter().map(|s| s.id.clone()).collect();
    let mut rows = index.meta.get_many(&ids, &req.filter)?;
    let phrase_ids = with_phrases(index, req, limit, &mut scored, &mut rows)?;
    if let Some(range) = range {
        time_boost(&mut scored, &rows, range);
    }
    order(
        &mut scored,
        &rows,
        &phrase_ids,
        mode == SearchMode::Fulltext,
    );
    scored.truncate(wanted);
    let embedder = embedder.filter(|e| crate::relevance::calibrated(*e));
    let judged = Judged {
        index,
        evidence: &q.evidence,
        last_turn: q.last_turn.as_ref(),
        calibrated: embedder.zip(query_vector.as_deref()),
        phrases: &phrase_ids,
        stages: &stages,
        corrector: fuzzy::Corrector::new(&cx, &req.query),
    };
    let (hits, dropped_below_floor) = judged.decide(scored, rows, mode, cfg, req.min_score)?;
    Ok(SearchResults {
        dropped_below_floor,
        hits,
        terms: q.plan.terms.iter().map(|w| w.term.text.clone()).collect(),
        mode,
        fallback: fallback.or_else(|| {
            (mode != requested).then(|| format!("{requested} search needs an embedder; ran {mode}"))
        }),
        index_behind: None,
        caught_up: false,
        as_of: None,
    })
}

/// Exact phrases first, in every mode: the memories holding the query as
/// written, found by the index (such a memory may be in neither ranking),
/// never more than `limit`, added to `scored` at its top score if missing
/// (their rows to `rows`); returns their ids.
///
/// When the ranking's first `limit` hits all hold the phrase (read from
/// their rows), they are the answer already: every hit shown holds it, and
/// the index is not asked. A common phrase ("coffee shop" in a corpus of
/// cafés) costs the index every position of every memory holding its
/// words; a distinctive one, which a few memories hold, is looked up.
fn with_phrases(
    index: &Index,
    req: &SearchRequest,
    limit: usize,
    scored: &mut Vec<Scored>,
    rows: &mut HashMap<String, Memory>,
) -> Result<std::collections::HashSet<String>> {
    let Some(tokens) = crate::query::phrase_tokens(&req.query) else {
        return Ok(Default::default());
    };
    let head = &scored[..limit.min(scored.len())];
    if head.len() == limit
        && head.iter().all(|s| {
            rows.get(&s.id)
                .is_some_and(|m| Index::holds_phrase(m, &tokens))
        })
    {
        return Ok(head.iter().map(|s| s.id.clone()).collect());
    }
    let phrases = index.text_phrase_search(&tokens, &req.filter, limit)?;
    let top = scored.first().map_or(1.0, |s| s.score);
    let mut added = Vec::new();
    for h in &phrases {
        if !scored.iter().any(|s| s.id == h.id) {
            scored.push(Scored {
                id: h.id.clone(),
                score: top,
                own: 0.0,
                pass: Pass::And,
                cosine: None,
            });
            added.push(h.id.clone());
        }
    }
    rows.extend(index.meta.get_many(&added, &req.filter)?);
    Ok(phrases.into_iter().map(|h| h.id).collect())
}

/// What the relevance decision of one search works with.
struct Judged<'a> {
    index: &'a Index,
    evidence: &'a QueryEvidence,
    /// The last turn's evidence ([`Planned::last_turn`]).
    last_turn: Option<&'a QueryEvidence>,
    /// The calibrated embedder and the query's vector, when the search
    /// ran with both: cosines count as evidence only then.
    calibrated: Option<(&'a dyn Embedder, &'a [f32])>,
    phrases: &'a std::collections::HashSet<String>,
    /// The second stage's evidence of the hits it ranked (hybrid only).
    stages: &'a hybrid::Stages,
    /// Judges hits of the fuzzy pass alone, when it ran.
    corrector: Option<fuzzy::Corrector<'a>>,
}

impl Judged<'_> {
    /// The hits of `scored` (best first, rows read) with their evidence and
    /// P(relevant), re-ranked by lifecycle signals, those below `min_score`
    /// (`None`: the model's threshold) dropped; returns them and how many
    /// were dropped.
    fn decide(
        &self,
        scored: Vec<Scored>,
        mut rows: HashMap<String, Memory>,
        mode: SearchMode,
        cfg: &SearchConfig,
        min_score: Option<f32>,
    ) -> Result<(Vec<SearchHit>, usize)> {
        // Cosines of the hits the semantic ranking did not hold.
        let mut cosines: HashMap<String, f32> = HashMap::new();
        if let Some((e, v)) = self.calibrated {
            let missing: Vec<String> = scored
                .iter()
                .filter(|s| s.cosine.is_none())
                .map(|s| s.id.clone())
                .collect();
            if !missing.is_empty() {
                for (id, vector) in self.index.vectors_of(&missing, e.model_id())? {
                    cosines.insert(id, hybrid::dot(v, &vector));
                }
            }
        }
        let model = crate::relevance::model();
        let mut hits: Vec<SearchHit> = scored
            .into_iter()
            .filter_map(|s| {
                let memory = rows.remove(&s.id)?;
                let cosine = match self.calibrated {
                    Some(_) => s.cosine.or_else(|| cosines.get(&s.id).copied()),
                    None => None,
                };
                Some(SearchHit {
                    relevance: 0.0,
                    phrase: self.phrases.contains(&s.id),
                    evidence: crate::relevance::Evidence {
                        stage: cosine.and(self.stages.get(&s.id).copied()),
                        ..self.evidence.of(&memory, cosine)
                    },
                    judged_twice: None,
                    memory,
                    score: s.score,
                    pass: s.pass,
                    expiring_soon: false,
                    conflicts_with: Vec::new(),
                })
            })
            .collect();
        if let Some(c) = &self.corrector {
            c.correct(&mut hits)?;
        }
        rerank(&mut hits, mode, cfg.short_weight);
        crate::relevance::set_list_evidence(
            &mut hits.iter_mut().map(|h| &mut h.evidence).collect::<Vec<_>>(),
        );
        for h in &mut hits {
            h.relevance = model.probability(&h.evidence);
        }
        if let Some(last) = self.last_turn {
            self.judge_by_last_turn(last, &mut hits);
        }
        let before = hits.len();
        hits.retain(|h| model.keeps(&h.evidence, h.relevance, min_score));
        let dropped = before - hits.len();
        Ok((hits, dropped))
    }
}

impl Judged<'_> {
    /// Judges each hit on the last turn alone too (lexical evidence: the
    /// query's vector is of the whole conversation) and keeps whichever
    /// judgement is further above its threshold, so that a hit about what
    /// was just said is kept.
    fn judge_by_last_turn(&self, last: &QueryEvidence, hits: &mut [SearchHit]) {
        let model = crate::relevance::model();
        let mut evidence: Vec<crate::relevance::Evidence> =
            hits.iter().map(|h| last.of(&h.memory, None)).collect();
        crate::relevance::set_list_evidence(&mut evidence.iter_mut().collect::<Vec<_>>());
        for (h, e) in hits.iter_mut().zip(evidence) {
            let p = model.probability(&e);
            h.judged_twice = Some(Box::new([h.evidence, e]));
            if p - model.threshold(&e) > h.relevance - model.threshold(&h.evidence) {
                h.relevance = p;
                h.evidence = e;
            }
        }
    }
}

/// Sorts candidates best first: exact phrases, then (in full text) AND
/// hits, OR hits, hits of the fuzzy pass alone, then by score, own-language evidence, recency and id.
fn order(
    scored: &mut [Scored],
    rows: &HashMap<String, Memory>,
    phrases: &std::collections::HashSet<String>,
    fulltext: bool,
) {
    let ts = |id: &str| rows.get(id).map(|m| m.ts);
    let group = |s: &Scored| match (fulltext, s.pass) {
        (true, Pass::Or) => 1,
        (true, Pass::Fuzzy) => 2,
        _ => 0,
    };
    scored.sort_by(|a, b| {
        phrases
            .contains(&b.id)
            .cmp(&phrases.contains(&a.id))
            .then_with(|| group(a).cmp(&group(b)))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| b.own.total_cmp(&a.own))
            .then_with(|| ts(&b.id).cmp(&ts(&a.id)))
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// The hybrid candidates of a request with their learned-fusion features
/// (both rankings, `HYBRID_DEPTH` deep), for `memd eval --features`.
pub fn hybrid_candidates(
    index: &Index,
    embedder: &dyn Embedder,
    req: &SearchRequest,
    cfg: &SearchConfig,
    limit: usize,
) -> Result<Vec<Candidate>> {
    let req = &without_superseded(req);
    let q = Planned::new(index, req)?;
    hybrid::candidates(&q.context(index, req, cfg), embedder, req, limit)
}

/// A hit whose event time (else its write time) lies in the range the query
/// names scores `1 + TIME_BOOST` times as much. Chosen by 5-fold
/// cross-validation by conversation on LoCoMo dev (0.25, 0.5, 1.0 tried;
/// 1.0 chosen in four folds of five; full text 0.586 → 0.596, the 102
/// questions that name a time 0.650 → 0.723).
pub(crate) const TIME_BOOST: f32 = 1.0;

/// Multiplies the score of hits from within `range` by `1 + TIME_BOOST`
/// (the caller re-sorts). A boost, not a filter: nothing is dropped.
fn time_boost(
    scored: &mut [Scored],
    rows: &HashMap<String, Memory>,
    range: crate::when::TimeRange,
) {
    let factor = 1.0 + TIME_BOOST;
    for s in scored.iter_mut() {
        if rows
            .get(&s.id)
            .is_some_and(|m| range.contains(m.setting.time_at.unwrap_or(m.ts)))
        {
            s.score *= factor;
        }
    }
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
/// re-sorts them: exact phrases first, then (in full-text mode) AND hits
/// before OR hits before hits of the fuzzy pass alone, then by score, own-language evidence, recency and id.
fn rerank(hits: &mut [SearchHit], mode: SearchMode, short_weight: f32) {
    for h in hits.iter_mut() {
        let m = &h.memory;
        h.score *= crate::lifecycle::rank::factor(m.stage, m.importance, m.tier, short_weight);
    }
    let group = |p: Pass| match (mode, p) {
        (SearchMode::Fulltext, Pass::Or) => 1,
        (SearchMode::Fulltext, Pass::Fuzzy) => 2,
        _ => 0,
    };
    hits.sort_by(|a, b| {
        b.phrase
            .cmp(&a.phrase)
            .then_with(|| group(a.pass).cmp(&group(b.pass)))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| b.evidence.bm25.total_cmp(&a.evidence.bm25))
            .then_with(|| b.memory.ts.cmp(&a.memory.ts))
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
    fn a_persons_turns_leave_the_assistants_out() {
        let turns = crate::query::turns(
            "<Bart>:\"I lost my keys\"\n<Assistant>:\"Oh no!\"\n<Bart>:\"At the beach\"",
        );
        assert_eq!(
            user_turns(&turns).as_deref(),
            Some("<Bart>:\"I lost my keys\"\n<Bart>:\"At the beach\"")
        );
        let question = crate::query::turns("where are my keys?");
        assert_eq!(user_turns(&question), None, "a one-turn query");
        let assistant = crate::query::turns("<Assistant>:\"Hi\"\n<Assistant>:\"Hello?\"");
        assert_eq!(user_turns(&assistant), None, "only the assistant spoke");
    }

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
