//! Semantic ranking and hybrid fusion.
//!
//! Hybrid search fuses the full-text ranking ([`super::fulltext::ranking`],
//! both passes) and the semantic ranking, each [`super::HYBRID_DEPTH`]
//! deep, by reciprocal rank (`search.rrfK` and the two weights) **and** by
//! full-text evidence: a hit scores
//!
//! ```text
//! vote / (K + text rank) + semantic weight / (K + semantic rank) + EVIDENCE_WEIGHT × evidence
//! ```
//!
//! where `evidence` is the hit's full-text score (own + weighted translated,
//! see [`super::fulltext`]) capped at 1, and for a one-turn query the larger
//! of that and the share of the query's content terms the memory holds
//! ([`crate::relevance::QueryEvidence::content_coverage`]): every word of a
//! question is asked about, while most words of a conversation are not, so
//! there holding many of them is weak evidence (measured: taking coverage
//! for conversations too cost MADial-en hybrid recall@5 0.012). Ranks alone
//! give the first hit of each list the same 1/(K+1) whatever its BM25, so a
//! memory holding every query word once lost to semantic neighbours holding
//! none; the evidence term keeps it ahead.
//!
//! A full-text hit written in another script than the query (mostly CJK
//! against mostly Latin) votes (`vote` is the full-text weight, and the
//! evidence term counts) only with evidence of what the query says: when
//! the translated pass found a translation in it, or when it holds at least
//! [`OTHER_SCRIPT_VOTE`] of the query's content terms that some memory holds
//! (IDF-weighted, speaker tags such as `<Bart>:` left out:
//! [`crate::relevance::QueryEvidence::content_coverage`]).
//! Otherwise `vote` is 0 and full text adds nothing to it. The name that
//! heads every turn of a dialogue letting such hits vote made hybrid worse
//! than semantic alone across languages (dev recall@5 zh→en 0.213 against
//! 0.331); words of the query held in a memory of the other script (a
//! codename, a Chinese remark in an English note) do count.

use super::Context;
use super::fulltext::TextScored;
use super::{HYBRID_DEPTH, Pass, Scored, SearchConfig, SearchRequest};
use crate::analysis::tokenizer::scripts_differ_milli;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::index::fusion;
use crate::query::QueryPlan;

/// The weight of full-text evidence (in `[0, 1]`) in the hybrid score.
pub(crate) const EVIDENCE_WEIGHT: f32 = 0.02;

/// The share of the query's content terms from which a full-text hit in
/// the other script votes.
pub(crate) const OTHER_SCRIPT_VOTE: f32 = 0.5;

/// The nearest visible memories of a query, `(id, cosine similarity)`, best first.
pub(crate) type Neighbours = Vec<(String, f32)>;

/// The semantic ranking: the query's vector and its [`Neighbours`].
pub(crate) fn semantic_ranking(
    index: &Index,
    embedder: &dyn Embedder,
    plan: &QueryPlan,
    req: &SearchRequest,
    k: usize,
) -> Result<(Vec<f32>, Neighbours)> {
    let query = query_vector(embedder, &plan.semantic, &req.filter)?;
    neighbours(index, embedder, query, req, k)
}

/// The [`Neighbours`] of the query's vector `query`, `k` deep, with it.
fn neighbours(
    index: &Index,
    embedder: &dyn Embedder,
    query: Vec<f32>,
    req: &SearchRequest,
    k: usize,
) -> Result<(Vec<f32>, Neighbours)> {
    let hits = index
        .vector_search(&query, embedder.model_id(), &req.filter, k)?
        .into_iter()
        .map(|(id, distance)| (id, 1.0 - distance))
        .collect();
    Ok((query, hits))
}

/// From this many characters of semantic text (a dialogue, a long
/// question) the query is embedded on a thread of its own while full text
/// ranks: embedding 550 characters takes tens of milliseconds, full text of
/// a dialogue several, and the search then waits for the longer of the two
/// instead of both. A short query embeds in a few milliseconds, less than a
/// thread is worth.
pub(crate) const EMBED_BESIDE_CHARS: usize = 200;

/// The full-text ranking `depth` deep and the query's vector, computed side
/// by side for a query of [`EMBED_BESIDE_CHARS`] or more while no other
/// search runs ([`Context::spare_core`]); one after the other otherwise, and
/// if no thread can be started.
fn text_beside_vector(
    cx: &Context<'_>,
    embedder: &dyn Embedder,
    req: &SearchRequest,
    depth: usize,
) -> (Result<Vec<TextScored>>, Result<Vec<f32>>) {
    let semantic = &cx.plan.semantic;
    let embed = || query_vector(embedder, semantic, &req.filter);
    if !cx.spare_core || semantic.chars().count() < EMBED_BESIDE_CHARS {
        return (super::fulltext::ranking(cx, depth, true), embed());
    }
    std::thread::scope(|s| {
        let beside = std::thread::Builder::new()
            .name("memd-query-embed".into())
            .spawn_scoped(s, embed);
        let text = super::fulltext::ranking(cx, depth, true);
        let query = match beside {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("embedding the query panicked".into()))),
            Err(_) => embed(),
        };
        (text, query)
    })
}

/// Query vectors kept ([`query_vector`]).
pub(crate) const QUERY_CACHE: usize = 256;

/// Recently embedded queries, least recently used first:
/// `(model, caller's filter, text) → vector`.
type QueryCache = std::collections::VecDeque<((String, String, String), std::sync::Arc<Vec<f32>>)>;

/// The query's vector, from a bounded LRU cache of the last
/// [`QUERY_CACHE`] queries (a dialogue query embeds in tens of
/// milliseconds; a client repeating a recall pays once). The key holds the
/// caller's filter, so one caller's query never speeds up another's (a
/// timing difference would tell that someone searched it).
pub(crate) fn query_vector(
    embedder: &dyn Embedder,
    text: &str,
    filter: &crate::index::filter::Filter,
) -> Result<Vec<f32>> {
    static CACHE: std::sync::LazyLock<std::sync::Mutex<QueryCache>> =
        std::sync::LazyLock::new(Default::default);
    // Who may see what, without the request's clock (every request's
    // `unexpired_at` is its own now).
    let mut who = filter.clone();
    for scope in &mut who.any_of {
        scope.unexpired_at = None;
    }
    let key = (
        embedder.model_id().to_string(),
        format!("{who:?}"),
        text.to_string(),
    );
    let lock = || {
        CACHE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    {
        let mut cache = lock();
        if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
            let entry = cache.remove(i).expect("position is in range");
            let v = entry.1.as_ref().clone();
            cache.push_back(entry);
            return Ok(v);
        }
    }
    let v = embedder
        .embed_queries(&[text])?
        .pop()
        .ok_or_else(|| Error::Internal("embedder returned no vector".into()))?;
    let mut cache = lock();
    if !cache.iter().any(|(k, _)| *k == key) {
        cache.push_back((key, std::sync::Arc::new(v.clone())));
        while cache.len() > QUERY_CACHE {
            cache.pop_front();
        }
    }
    Ok(v)
}

/// What a full-text hit brings to the fusion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TextVote {
    /// `search.fulltextWeight`, or 0 for a hit in the other script without
    /// evidence of what the query says (see the module docs).
    pub(crate) weight: f32,
    /// Its evidence, in `[0, 1]` (0 without a vote).
    pub(crate) evidence: f32,
}

/// The vote of each full-text hit, in order (see the module docs).
pub(crate) fn votes(cx: &Context<'_>, text: &[TextScored]) -> Result<Vec<TextVote>> {
    let script = cx.evidence.script();
    let unsure = |h: &TextScored| scripts_differ_milli(h.script, script) && h.translated <= 0.0;
    let question = !cx.plan.dialogue;
    let ids: Vec<String> = text
        .iter()
        .filter(|h| question || unsure(h))
        .map(|h| h.id.clone())
        .collect();
    let bodies = if ids.is_empty() {
        Default::default()
    } else {
        cx.index.meta.bodies_of(&ids, cx.filter)?
    };
    Ok(text
        .iter()
        .map(|h| {
            let content = bodies
                .get(&h.id)
                .map_or(0.0, |b| cx.evidence.content_coverage(b));
            if unsure(h) && content < OTHER_SCRIPT_VOTE {
                return TextVote {
                    weight: 0.0,
                    evidence: 0.0,
                };
            }
            let score = h.score.clamp(0.0, 1.0);
            TextVote {
                weight: cx.cfg.fulltext_weight,
                evidence: if question { score.max(content) } else { score },
            }
        })
        .collect())
}

/// Fuses the two rankings (see the module docs), best first. `votes` are
/// those of the full-text hits ([`votes`]).
pub(crate) fn fuse(
    text: &[TextScored],
    votes: &[TextVote],
    semantic: &[(String, f32)],
    cfg: &SearchConfig,
) -> Vec<Scored> {
    let mut out: Vec<Scored> = Vec::with_capacity(text.len() + semantic.len());
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, (h, vote)) in text.iter().zip(votes).enumerate() {
        let rank = (i + 1) as f32;
        let score = vote.weight / (cfg.rrf_k + rank) + EVIDENCE_WEIGHT * vote.evidence;
        at.insert(h.id.as_str(), out.len());
        out.push(Scored {
            id: h.id.clone(),
            score,
            own: h.own,
            pass: h.pass,
            cosine: None,
        });
    }
    for (i, (id, cosine)) in semantic.iter().enumerate() {
        let add = cfg.semantic_weight / (cfg.rrf_k + (i + 1) as f32);
        match at.get(id.as_str()) {
            Some(&j) => {
                out[j].score += add;
                out[j].cosine = Some(*cosine);
            }
            None => {
                at.insert(id.as_str(), out.len());
                out.push(Scored {
                    id: id.clone(),
                    score: add,
                    own: 0.0,
                    pass: Pass::Semantic,
                    cosine: Some(*cosine),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.own.total_cmp(&a.own))
    });
    out
}

/// One hybrid candidate: a memory from either ranking with the features the
/// learned fusion reads ([`fusion::FEATURES`]) and what describes it beyond
/// them (exported by `memd eval --features`, not used by the model).
#[derive(Debug, Clone, serde::Serialize)]
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
    /// The hybrid score of the fusion in use without the learned model.
    pub fused: f32,
    /// Its full-text score (own + weighted translated evidence), if full text found it.
    pub(crate) text_score: Option<f32>,
    /// Its own-language evidence in full text.
    pub(crate) own_evidence: f32,
    /// Its translated evidence in full text.
    pub(crate) translated_evidence: f32,
    /// It is written in the other script than the query.
    pub(crate) other_script: bool,
    /// The memory's importance.
    pub(crate) importance: f32,
    /// The memory's tier, if it has one.
    pub(crate) tier: Option<String>,
    /// The memory's stage.
    pub(crate) stage: String,
    /// Days between the memory's time and the newest candidate's.
    pub(crate) age_days: f32,
    /// The memory's session, if it has one.
    pub(crate) session: Option<String>,
    /// The second stage's features ([`crate::rerank::FEATURES`]; exported
    /// by name, not here).
    #[serde(skip)]
    pub rerank: crate::rerank::Features,
}

/// The candidates of a hybrid search (the full-text and semantic lists,
/// each `HYBRID_DEPTH.max(limit)` deep) with their features, full-text
/// hits first in their order, then semantic-only hits in theirs.
pub(crate) fn candidates(
    cx: &super::Context<'_>,
    embedder: &dyn Embedder,
    req: &SearchRequest,
    limit: usize,
) -> Result<Vec<Candidate>> {
    Ok(candidates_and_vector(cx, embedder, req, limit, true)?.1)
}

/// [`candidates`] and the query's vector, with the second stage's features
/// (the dialogue model's own only when `dialogue`).
fn candidates_and_vector(
    cx: &super::Context<'_>,
    embedder: &dyn Embedder,
    req: &SearchRequest,
    limit: usize,
    dialogue: bool,
) -> Result<(Vec<f32>, Vec<Candidate>)> {
    let (index, plan, evidence, cfg) = (cx.index, cx.plan, cx.evidence, cx.cfg);
    let depth = HYBRID_DEPTH.max(limit);
    let (text, query) = text_beside_vector(cx, embedder, req, depth);
    let text = text?;
    let votes = votes(cx, &text)?;
    let (qvec, semantic) = neighbours(index, embedder, query?, req, depth)?;
    let fused: std::collections::HashMap<String, f32> = fuse(&text, &votes, &semantic, cfg)
        .into_iter()
        .map(|s| (s.id, s.score))
        .collect();
    let mut ids: Vec<String> = text.iter().map(|h| h.id.clone()).collect();
    for (id, _) in &semantic {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    let rows = index.meta.get_many(&ids, &req.filter)?;
    let vectors = index.vectors_of(&ids, embedder.model_id())?;
    let best_cos = semantic.first().map_or(0.0, |h| h.1);
    let query_share = evidence.script() as f32 / 1000.0;
    let newest = rows.values().map(|m| m.ts).max();
    let rrf = |rank: usize| cfg.rrf_k / (cfg.rrf_k + rank as f32);
    let query_lower = req.query.to_lowercase();
    let mut out: Vec<Candidate> = ids
        .into_iter()
        .filter_map(|id| {
            let m = rows.get(&id)?;
            let t = text.iter().position(|h| h.id == id);
            let s = semantic.iter().position(|h| h.0 == id);
            let text_weight = t.map_or(0.0, |i| votes[i].weight);
            let text_rrf = t.map_or(0.0, |i| text_weight * rrf(i + 1));
            let sem_rrf = s.map_or(0.0, |i| cfg.semantic_weight * rrf(i + 1));
            let cosine = vectors.get(&id).map(|v| dot(&qvec, v));
            let body = crate::relevance::indexed_text(m);
            let text_evidence = if text_weight > 0.0 { 1.0 } else { 0.0 };
            let features = [
                text_rrf,
                sem_rrf,
                cosine.unwrap_or(0.0),
                cosine.map_or(-1.0, |c| c - best_cos),
                text_evidence * f32::from(t.is_some_and(|i| text[i].pass == Pass::And)),
                text_evidence * evidence.coverage(&body),
                if plan.conversational { text_rrf } else { 0.0 },
                query_share * sem_rrf,
                text_evidence * f32::from(t.is_some() && s.is_some()),
            ];
            Some(Candidate {
                pass: t.map_or(Pass::Semantic, |i| text[i].pass),
                features,
                text_rank: t.map(|i| i + 1),
                semantic_rank: s.map(|i| i + 1),
                fused: fused.get(&id).copied().unwrap_or(0.0),
                text_score: t.map(|i| text[i].score),
                own_evidence: t.map_or(0.0, |i| text[i].own),
                translated_evidence: t.map_or(0.0, |i| text[i].translated),
                other_script: scripts_differ_milli(
                    crate::analysis::tokenizer::script_milli(&body),
                    evidence.script(),
                ),
                importance: m.importance,
                tier: m.tier.map(|t| t.as_str().to_string()),
                stage: m.stage.as_str().to_string(),
                age_days: newest.map_or(0.0, |n| (n - m.ts).num_seconds() as f32 / 86400.0),
                session: m.setting.session.clone(),
                rerank: own_features(
                    &[
                        t.map_or(100.0, |i| (i + 1) as f32),
                        s.map_or(100.0, |i| (i + 1) as f32),
                        // The semantic list's cosine where it has one (as `fuse` keeps).
                        s.map(|i| semantic[i].1).or(cosine).unwrap_or(0.0),
                        cosine.map_or(-1.0, |c| c - best_cos),
                        t.map_or(0.0, |i| text[i].score),
                        t.map_or(0.0, |i| text[i].own),
                        t.map_or(0.0, |i| text[i].translated),
                        evidence.coverage(&body),
                        evidence.content_coverage(&body),
                        f32::from(t.is_some_and(|i| text[i].pass == Pass::And)),
                    ],
                    m.setting
                        .speaker
                        .as_deref()
                        .is_some_and(|sp| named(&query_lower, sp)),
                ),
                id,
            })
        })
        .collect();
    list_features(&mut out, plan.dialogue, query_share);
    if dialogue {
        dialogue_features(&mut out, cx, &rows);
    }
    Ok((qvec, out))
}

/// Whether `speaker` (two characters or more) is named in the lowercased query.
fn named(query_lower: &str, speaker: &str) -> bool {
    let s = speaker.trim().to_lowercase();
    s.chars().count() >= 2 && query_lower.contains(&s)
}

/// A candidate's own second-stage features: `own` holds text rank,
/// semantic rank, cosine, cosine gap, text score, own, translated,
/// coverage, content coverage and AND pass (see [`crate::rerank::FEATURES`]);
/// the features of the list are set by [`list_features`].
fn own_features(own: &[f32; 10], speaker_named: bool) -> crate::rerank::Features {
    let mut x = [0.0; crate::rerank::N_FEATURES];
    x[2..12].copy_from_slice(own);
    x[18] = f32::from(speaker_named);
    x
}

/// Sets the features that depend on the whole candidate list: the fused
/// score and rank, the scripts, the query's kind, the session's candidates
/// and the age.
fn list_features(out: &mut [Candidate], dialogue: bool, query_cjk: f32) {
    let best = out.iter().map(|c| c.fused).fold(0.0f32, f32::max);
    let norm = |f: f32| if best > 0.0 { f / best } else { 0.0 };
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| out[b].fused.total_cmp(&out[a].fused));
    let mut sessions: std::collections::HashMap<&str, (f32, f32, f32)> = Default::default();
    for c in out.iter() {
        if let Some(s) = c.session.as_deref() {
            let e = sessions.entry(s).or_insert((0.0, 0.0, 0.0));
            let f = norm(c.fused);
            *e = (e.0.max(f), e.1 + f, e.2 + 1.0);
        }
    }
    let sessions: std::collections::HashMap<String, (f32, f32, f32)> = sessions
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let oldest = out.iter().map(|c| c.age_days).fold(0.0f32, f32::max);
    for (rank, &i) in order.iter().enumerate() {
        let c = &mut out[i];
        let f = norm(c.fused);
        let (s_best, s_sum, s_n) = c
            .session
            .as_deref()
            .and_then(|s| sessions.get(s).copied())
            .unwrap_or((f, f, 1.0));
        let x = &mut c.rerank;
        x[0] = f;
        x[1] = (rank + 1) as f32;
        x[12] = f32::from(c.other_script);
        x[13] = f32::from(dialogue);
        x[14] = query_cjk;
        x[15] = s_best;
        x[16] = s_sum / s_n;
        x[17] = s_n;
        x[19] = if oldest > 0.0 {
            c.age_days / oldest
        } else {
            0.0
        };
    }
}

/// Sets the dialogue model's features (see [`crate::rerank::FEATURES`]):
/// of a conversation whose last turn a person spoke, that turn's own
/// full-text evidence in each candidate (BM25, coverage, content coverage,
/// translated) and the candidate's rank by its BM25; of a conversation, the
/// evidence of its person's turns alone (BM25, content coverage,
/// translated).
fn dialogue_features(
    out: &mut [Candidate],
    cx: &super::Context<'_>,
    rows: &std::collections::HashMap<String, crate::model::Memory>,
) {
    const AT: usize = crate::rerank::QUESTION_FEATURES;
    for c in out.iter_mut() {
        let Some(m) = rows.get(&c.id) else { continue };
        if let Some(last) = cx.last_turn {
            let e = last.of(m, None);
            c.rerank[AT..AT + 4].copy_from_slice(&[e.bm25, e.coverage, e.content, e.translated]);
        }
        if let Some(user) = cx.user_turns {
            let e = user.of(m, None);
            c.rerank[AT + 5..AT + 8].copy_from_slice(&[e.bm25, e.content, e.translated]);
        }
    }
    if cx.last_turn.is_some() {
        let mut order: Vec<usize> = (0..out.len()).collect();
        order.sort_by(|&a, &b| out[b].rerank[AT].total_cmp(&out[a].rerank[AT]));
        for (rank, &i) in order.iter().enumerate() {
            out[i].rerank[AT + 4] = (rank + 1) as f32;
        }
    }
}

/// The hybrid ranking reordered by the second stage ([`crate::rerank`],
/// when enabled), `limit` long, the query's vector and the second stage's
/// evidence of each hit (for the relevance decision). Each hit's cosine is
/// the semantic list's, as in [`fuse`], so the relevance decision sees the
/// same evidence.
pub(crate) fn reranked(
    cx: &super::Context<'_>,
    embedder: &dyn Embedder,
    req: &SearchRequest,
    limit: usize,
) -> Result<(Vec<Scored>, Vec<f32>, Stages)> {
    let model = crate::rerank::enabled_for(cx.plan.dialogue)
        .ok_or_else(|| Error::Internal("the second stage is not enabled".into()))?;
    // The dialogue model's own features only when it reads them.
    let dialogue = model.features.len() > crate::rerank::QUESTION_FEATURES;
    let (qvec, candidates) = candidates_and_vector(cx, embedder, req, limit, dialogue)?;
    let sigmoid = |raw: f64| (1.0 / (1.0 + (-raw).exp())) as f32;
    let raw: Vec<f32> = candidates
        .iter()
        .map(|c| sigmoid(model.raw(&c.rerank)))
        .collect();
    let best = raw.iter().copied().fold(0.0, f32::max);
    let mean = raw.iter().sum::<f32>() / raw.len().max(1) as f32;
    let mut stages = Stages::new();
    let mut scored: Vec<Scored> = candidates
        .into_iter()
        .zip(raw)
        .map(|(c, score)| {
            stages.insert(
                c.id.clone(),
                crate::relevance::Stage {
                    // Quantised: a few ulps never change a decision.
                    score: crate::index::text::quantise(score),
                    best: crate::index::text::quantise(best),
                    mean: crate::index::text::quantise(mean),
                    text_rank: c.rerank[2],
                    sem_rank: c.rerank[3],
                    fused: crate::index::text::quantise(c.rerank[0]),
                },
            );
            Scored {
                // Quantised like BM25 scores, so that a few ulps never reorder hits.
                score: crate::index::text::quantise(model.score(&c.rerank)),
                own: c.own_evidence,
                pass: c.pass,
                cosine: c.semantic_rank.map(|_| c.rerank[4]),
                id: c.id,
            }
        })
        .collect();
    scored.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.own.total_cmp(&a.own))
    });
    scored.truncate(limit);
    stages.retain(|id, _| scored.iter().any(|s| &s.id == id));
    Ok((scored, qvec, stages))
}

/// The second stage's evidence of each hit it ranked, by memory id.
pub(crate) type Stages = std::collections::HashMap<String, crate::relevance::Stage>;

/// The cosine similarity of two vectors (0 when either is zero).
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let d: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n =
        a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 { d / n } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EmbedError;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The hash embedder, counting the queries it embeds.
    struct Counting(crate::embed::hash::HashEmbedder, AtomicUsize, &'static str);

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            self.2
        }
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn embed_queries(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
            self.1.fetch_add(texts.len(), Ordering::SeqCst);
            self.0.embed_queries(texts)
        }
        fn embed_passages(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
            self.0.embed_passages(texts)
        }
    }

    #[test]
    fn a_query_is_embedded_once_per_text_caller_and_model_within_the_cache() {
        use crate::index::filter::Filter;
        // A model id of this test alone: the cache is shared by the process.
        let e = Counting(
            crate::embed::hash::HashEmbedder::new(16),
            AtomicUsize::new(0),
            "test-query-cache",
        );
        let all = Filter::all();
        let first = query_vector(&e, "where is the picnic", &all).unwrap();
        // A later request of the same caller (its clock has moved on).
        let mut later = Filter::all();
        later.any_of[0].unexpired_at = Some(chrono::Utc::now());
        let again = query_vector(&e, "where is the picnic", &later).unwrap();
        assert_eq!(first, again);
        assert_eq!(
            e.1.load(Ordering::SeqCst),
            1,
            "the second search hit the cache"
        );
        // Another caller's filter is another key: no timing tells it what was searched.
        let other = Filter::scope(crate::index::filter::Scope {
            scenes: vec![crate::model::Scene::parse("qq:group:1").unwrap()],
            ..Default::default()
        });
        assert_eq!(
            query_vector(&e, "where is the picnic", &other).unwrap(),
            first
        );
        assert_eq!(e.1.load(Ordering::SeqCst), 2);
        // Bounded: after QUERY_CACHE other texts the first is embedded again.
        for i in 0..QUERY_CACHE {
            query_vector(&e, &format!("filler {i}"), &all).unwrap();
        }
        let before = e.1.load(Ordering::SeqCst);
        query_vector(&e, "where is the picnic", &all).unwrap();
        assert_eq!(
            e.1.load(Ordering::SeqCst),
            before + 1,
            "evicted, least recently used first"
        );
    }
}
