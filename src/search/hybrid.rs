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

use super::fulltext::{Context, TextScored};
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
    let query = embedder
        .embed_queries(&[plan.semantic.as_str()])?
        .pop()
        .ok_or_else(|| Error::Internal("embedder returned no vector".into()))?;
    let hits = index
        .vector_search(&query, embedder.model_id(), &req.filter, k)?
        .into_iter()
        .map(|(id, distance)| (id, 1.0 - distance))
        .collect();
    Ok((query, hits))
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
}

/// The candidates of a hybrid search (the full-text and semantic lists,
/// each `HYBRID_DEPTH.max(limit)` deep) with their features, full-text
/// hits first in their order, then semantic-only hits in theirs.
pub(crate) fn candidates(
    cx: &super::fulltext::Context<'_>,
    embedder: &dyn Embedder,
    req: &SearchRequest,
    limit: usize,
) -> Result<Vec<Candidate>> {
    let (index, plan, evidence, cfg) = (cx.index, cx.plan, cx.evidence, cx.cfg);
    let depth = HYBRID_DEPTH.max(limit);
    let text = super::fulltext::ranking(cx, depth, true)?;
    let votes = votes(cx, &text)?;
    let (qvec, semantic) = semantic_ranking(index, embedder, plan, req, depth)?;
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
    Ok(ids
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
                id,
            })
        })
        .collect())
}

/// The cosine similarity of two vectors (0 when either is zero).
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let d: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n =
        a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 { d / n } else { 0.0 }
}
