//! Full text ranked by evidence: the query's own terms decide, the
//! cross-lingual pass adds.
//!
//! **The own pass** searches the query's terms in every visible memory,
//! whatever its script: an AND pass (every term must match) and, when that
//! finds fewer than `orFallbackMinHits`, an OR pass that fills the remaining
//! places; a conversational query ([`crate::query`]) goes to the OR pass
//! directly and is re-ranked by how much of the query a memory covers. A
//! hit's own evidence is its BM25 divided by the query's maximum (every term
//! once in a text of average length, [`QueryEvidence::max_bm25`]); for the
//! coverage re-rank, its re-rank score divided by the score of such a text
//! covering the whole query. Dividing by a per-query constant keeps the
//! pass's own order.
//!
//! **The translated pass** ([`crate::query::translate`], CC-CEDICT) searches
//! the query's words translated into the other language, among memories
//! written in the other script only (mostly CJK against mostly Latin), and
//! counts only for those holding a translation (not merely a name kept as
//! it was). Its evidence is normalised the same way (the maximum takes the
//! best translation of each word), capped at 1, and weighs
//! [`TRANSLATED_WEIGHT`]: a hit's score is `own + TRANSLATED_WEIGHT ×
//! translated`. So a translation adds candidates and score but outranks an
//! own-language hit only with more evidence than that hit has of its own,
//! and a memory holding the query's words is never pushed out by one
//! holding their translations.
//!
//! In full-text mode AND hits rank before everything else (hits of the OR
//! pass, of the coverage re-rank and of the translated pass, which compete
//! on score). The translated pass runs only when it can change the answer:
//! not when the `limit` best hits all passed AND in the query's own script
//! and the best own evidence of any memory in the other script that passes
//! AND is lower than the `limit`-th by more than `TRANSLATED_WEIGHT` (a
//! one-hit search of that script decides).

use std::collections::HashMap;

use super::{Pass, SearchConfig};
use crate::analysis::tokenizer::{Term, TermKind, cjk_words, scripts_differ_milli, tokenize};
use crate::error::Result;
use crate::index::Index;
use crate::index::filter::Filter;
use crate::index::text::{ScriptBand, TextHit};
use crate::query::{QueryPlan, Translation};
use crate::relevance::{QueryEvidence, idf};

/// How much the translated pass's evidence weighs against the query's own.
pub(crate) const TRANSLATED_WEIGHT: f32 = 0.5;

/// Long conversational queries: how far the OR pass reaches before the coverage re-rank.
pub(crate) const COVERAGE_DEPTH: usize = 200;
/// Weight of query coverage against normalised BM25 in the re-rank (seed: 6.0).
pub(crate) const COVERAGE_BOOST: f32 = 6.0;

/// What a full-text search works with.
pub(crate) struct Context<'a> {
    /// The index.
    pub(crate) index: &'a Index,
    /// The query's plan.
    pub(crate) plan: &'a QueryPlan,
    /// Its translation, if the lexicon has one.
    pub(crate) translation: Option<&'a Translation>,
    /// Its side of the evidence.
    pub(crate) evidence: &'a QueryEvidence,
    /// The caller's filter.
    pub(crate) filter: &'a Filter,
    /// Search settings.
    pub(crate) cfg: &'a SearchConfig,
}

/// One plan searched by [`pass`]: its BM25 maximum and how a text covers it.
struct Searched<'a> {
    plan: &'a QueryPlan,
    max: f32,
    coverage: &'a dyn Fn(&str) -> f32,
}

/// One full-text hit with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextScored {
    /// Memory id.
    pub(crate) id: String,
    /// `own + TRANSLATED_WEIGHT × translated`.
    pub(crate) score: f32,
    /// Evidence of the query's own terms.
    pub(crate) own: f32,
    /// Evidence of the translated pass (0 unless it counted).
    pub(crate) translated: f32,
    /// AND, or OR (also for hits of the translated pass only).
    pub(crate) pass: Pass,
    /// The memory's script ([`crate::analysis::tokenizer::script_milli`]).
    pub(crate) script: i64,
}

impl TextScored {
    /// AND hits first, then the rest.
    pub(crate) fn group(&self) -> u8 {
        u8::from(self.pass != Pass::And)
    }
}

/// Sorts best first: by group, score, own evidence; otherwise in the order
/// the index gave them (score, newer first, id).
fn sort(hits: &mut [TextScored]) {
    hits.sort_by(|a, b| {
        a.group()
            .cmp(&b.group())
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| b.own.total_cmp(&a.own))
    });
}

/// The memories of the other script than a query's (`script`, see
/// [`crate::analysis::tokenizer::script_milli`]); `None` for a neutral query.
pub(crate) fn other_script(script: i64) -> Option<ScriptBand> {
    if script > 500 {
        Some(ScriptBand {
            lo: 0,
            hi: script - 501,
        })
    } else if script < 500 {
        Some(ScriptBand {
            lo: script + 501,
            hi: 1000,
        })
    } else {
        None
    }
}

/// One pass of a plan: `(hit, evidence, pass)`, in the pass's order, among
/// memories of `band` when given.
fn pass(
    cx: &Context<'_>,
    searched: &Searched<'_>,
    band: Option<ScriptBand>,
    limit: usize,
) -> Result<Vec<(TextHit, f32, Pass)>> {
    let (index, filter, plan) = (cx.index, cx.filter, searched.plan);
    let terms: Vec<(Term, f32)> = plan
        .terms
        .iter()
        .map(|w| (w.term.clone(), w.weight))
        .collect();
    let max = searched.max.max(f32::EPSILON);
    if plan.conversational {
        let depth = COVERAGE_DEPTH.max(limit);
        let hits = index.text_search_weighted(&terms, filter, false, band, depth)?;
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
        let bodies = index.meta.bodies_of(&ids, filter)?;
        let best = hits.iter().map(|h| h.score).fold(f32::EPSILON, f32::max);
        // BM25 alone favours short texts that repeat one term; coverage
        // favours memories that speak of several things the conversation
        // mentions. A text with the query's maximum BM25 covering all of it
        // scores `max / best + COVERAGE_BOOST`: the divisor of the evidence.
        let full = max / best + COVERAGE_BOOST;
        let mut scored: Vec<(TextHit, f32, Pass)> = hits
            .into_iter()
            .map(|h| {
                let covered = bodies.get(&h.id).map_or(0.0, |b| (searched.coverage)(b));
                let e = (h.score / best + COVERAGE_BOOST * covered) / full;
                (h, e, Pass::Or)
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(limit);
        return Ok(scored);
    }
    let mut scored: Vec<(TextHit, f32, Pass)> = index
        .text_search_weighted(&terms, filter, true, band, limit)?
        .into_iter()
        .map(|h| {
            let e = h.score / max;
            (h, e, Pass::And)
        })
        .collect();
    if terms.len() > 1 && scored.len() < cx.cfg.or_fallback_min_hits.min(limit) {
        let or_hits = index.text_search_weighted(&terms, filter, false, band, limit)?;
        for h in or_hits {
            if scored.len() >= limit {
                break;
            }
            if !scored.iter().any(|(s, _, _)| s.id == h.id) {
                let e = h.score / max;
                scored.push((h, e, Pass::Or));
            }
        }
    }
    Ok(scored)
}

/// The query's own pass ([`pass`] over its plan), as scored hits.
pub(crate) fn own_ranking(
    cx: &Context<'_>,
    band: Option<ScriptBand>,
    limit: usize,
) -> Result<Vec<TextScored>> {
    let coverage = |text: &str| cx.evidence.coverage(text);
    let searched = Searched {
        plan: cx.plan,
        max: cx.evidence.max_bm25(),
        coverage: &coverage,
    };
    Ok(pass(cx, &searched, band, limit)?
        .into_iter()
        .map(|(h, e, pass)| TextScored {
            id: h.id,
            score: e,
            own: e,
            translated: 0.0,
            pass,
            script: h.script,
        })
        .collect())
}

/// The full-text ranking (see the module docs), `limit` deep. With
/// `always_translate` the translated pass runs whenever it has something to
/// search (hybrid search fuses the whole list); without it, only when it
/// can change the first `limit` hits.
pub(crate) fn ranking(
    cx: &Context<'_>,
    limit: usize,
    always_translate: bool,
) -> Result<Vec<TextScored>> {
    let mut own = own_ranking(cx, None, limit)?;
    sort(&mut own);
    let (Some(t), Some(band)) = (cx.translation, other_script(cx.evidence.script())) else {
        return Ok(own);
    };
    // A Latin-script query can only cross into Chinese memories: without any
    // in the index, the pass would find nothing to count.
    if cx.evidence.script() < 500 && !cx.index.text_has_cjk()? {
        return Ok(own);
    }
    if !always_translate && !translation_can_change(cx, band, &own, limit)? {
        return Ok(own);
    }
    let translated = translated_ranking(cx, t, band, limit)?;
    let mut by_id: HashMap<String, usize> = own
        .iter()
        .enumerate()
        .map(|(i, h)| (h.id.clone(), i))
        .collect();
    let mut all = own;
    for (h, e) in translated {
        let add = TRANSLATED_WEIGHT * e;
        match by_id.get(&h.id) {
            Some(&i) => {
                all[i].translated = e;
                all[i].score += add;
            }
            None => {
                by_id.insert(h.id.clone(), all.len());
                all.push(TextScored {
                    id: h.id,
                    score: add,
                    own: 0.0,
                    translated: e,
                    pass: Pass::Or,
                    script: h.script,
                });
            }
        }
    }
    sort(&mut all);
    all.truncate(limit);
    Ok(all)
}

/// Whether the translated pass could change the first `limit` hits of
/// `own` (sorted): see the module docs.
fn translation_can_change(
    cx: &Context<'_>,
    band: ScriptBand,
    own: &[TextScored],
    limit: usize,
) -> Result<bool> {
    if cx.plan.conversational
        || own.len() < limit
        || own[..limit].iter().any(|h| h.pass != Pass::And)
        || own[..limit]
            .iter()
            .any(|h| scripts_differ_milli(h.script, cx.evidence.script()))
    {
        return Ok(true);
    }
    let kth = own[limit - 1].own;
    let best_other = own_ranking(cx, Some(band), 1)?
        .into_iter()
        .filter(|h| h.pass == Pass::And)
        .map(|h| h.own)
        .next();
    Ok(best_other.is_some_and(|o| kth < o + TRANSLATED_WEIGHT))
}

/// The translated pass: `(hit, evidence)` for memories in `band` (the other
/// script) that hold one of the translations, evidence capped at 1.
fn translated_ranking(
    cx: &Context<'_>,
    t: &Translation,
    band: ScriptBand,
    limit: usize,
) -> Result<Vec<(TextHit, f32)>> {
    let (index, filter) = (cx.index, cx.filter);
    let terms: Vec<Term> = t.plan.terms.iter().map(|w| w.term.clone()).collect();
    let (dfs, n) = index.text_doc_freqs(&terms, filter)?;
    let idf_of: HashMap<(&str, u8), f32> = terms
        .iter()
        .zip(&dfs)
        .map(|(term, &df)| ((term.text.as_str(), term.kind as u8), idf(df, n)))
        .collect();
    let weight_idf = |term: &Term, w: f32| {
        w * idf_of
            .get(&(term.text.as_str(), term.kind as u8))
            .copied()
            .unwrap_or(0.0)
    };
    // The maximum: the best translation of each word (a name kept as it was
    // is its own translation).
    let max: f32 = t
        .groups
        .iter()
        .map(|g| {
            g.alternatives
                .iter()
                .map(|a| a.iter().map(|(term, w)| weight_idf(term, *w)).sum::<f32>())
                .fold(0.0, f32::max)
        })
        .sum();
    let plan_coverage = TranslatedCoverage::new(&t.plan.terms, &dfs, n);
    let coverage = |text: &str| plan_coverage.of(text);
    let searched = Searched {
        plan: &t.plan,
        max,
        coverage: &coverage,
    };
    let hits = pass(cx, &searched, Some(band), limit)?;
    let ids: Vec<String> = hits.iter().map(|h| h.0.id.clone()).collect();
    let bodies = index.meta.bodies_of(&ids, filter)?;
    Ok(hits
        .into_iter()
        .filter(|(h, _, _)| {
            bodies
                .get(&h.id)
                .is_some_and(|b| contains_any(b, &t.translations))
        })
        .map(|(h, e, _)| (h, e.min(1.0)))
        .collect())
}

/// The share of a translated plan's weight × IDF a text holds (the
/// conversational re-rank of the translated pass).
struct TranslatedCoverage<'a> {
    terms: &'a [crate::query::WeightedTerm],
    signal: Vec<f32>,
    total: f32,
}

impl<'a> TranslatedCoverage<'a> {
    fn new(terms: &'a [crate::query::WeightedTerm], dfs: &[u64], n: u64) -> Self {
        let signal: Vec<f32> = terms
            .iter()
            .zip(dfs)
            .map(|(w, &df)| w.weight * idf(df, n))
            .collect();
        let total = signal.iter().sum::<f32>().max(f32::EPSILON);
        TranslatedCoverage {
            terms,
            signal,
            total,
        }
    }

    fn of(&self, text: &str) -> f32 {
        let words: std::collections::HashSet<String> =
            tokenize(text).into_iter().map(|t| t.text).collect();
        let segments: std::collections::HashSet<String> =
            if self.terms.iter().any(|w| w.term.kind == TermKind::Segment) {
                cjk_words(text).into_iter().collect()
            } else {
                Default::default()
            };
        self.terms
            .iter()
            .zip(&self.signal)
            .filter(|(w, _)| match w.term.kind {
                TermKind::Segment => segments.contains(&w.term.text),
                TermKind::Single => text.contains(w.term.text.as_str()),
                TermKind::Word | TermKind::Bigram => words.contains(&w.term.text),
            })
            .map(|(_, s)| *s)
            .sum::<f32>()
            / self.total
    }
}

/// Whether `text` holds one of `terms` (words and bigrams as the tokenizer
/// cuts them, jieba words as the words field does).
pub(crate) fn contains_any(text: &str, terms: &[Term]) -> bool {
    let words: std::collections::HashSet<String> =
        tokenize(text).into_iter().map(|t| t.text).collect();
    if terms
        .iter()
        .any(|t| matches!(t.kind, TermKind::Word | TermKind::Bigram) && words.contains(&t.text))
    {
        return true;
    }
    terms.iter().any(|t| t.kind == TermKind::Segment)
        && cjk_words(text).iter().any(|w| {
            terms
                .iter()
                .any(|t| t.kind == TermKind::Segment && t.text == *w)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_script_band() {
        assert_eq!(other_script(1000), Some(ScriptBand { lo: 0, hi: 499 }));
        assert_eq!(other_script(0), Some(ScriptBand { lo: 501, hi: 1000 }));
        assert_eq!(other_script(800), Some(ScriptBand { lo: 0, hi: 299 }));
        assert_eq!(other_script(500), None);
        // The band is exactly the scripts that differ.
        for q in [0, 120, 499, 501, 870, 1000] {
            let band = other_script(q).unwrap();
            for d in 0..=1000 {
                assert_eq!(
                    (band.lo..=band.hi).contains(&d),
                    scripts_differ_milli(q, d),
                    "query {q}, memory {d}"
                );
            }
        }
    }
}
