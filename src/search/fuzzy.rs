//! The fuzzy pass of full text: typos and word forms.
//!
//! When the exact pass is weak — it found fewer than `limit` memories (full
//! text mode; hybrid search's deep list has the embedder for word forms), or
//! a Latin query word of at least [`FUZZY_MIN_LETTERS`] letters is held by no
//! memory the caller may read — each Latin query word (ASCII letters, as
//! stemmed) stands also for the index terms
//! ([`crate::index::text::TextIndex::expansions`]) that start with it (a
//! stem or prefix: `deploy`, `migra`, words of at least
//! [`PREFIX_MIN_LETTERS`] letters) and, when no visible memory holds the
//! word itself, those within edit distance 1 of it (a deletion, an
//! insertion, a substitution or a transposition: `confgiuration`; words of
//! at least [`FUZZY_MIN_LETTERS`] letters). Shorter words have too many
//! neighbours to guess from. Conversational plans are left alone: their OR
//! pass already reaches deep.
//!
//! The expansions are searched (BM25, OR) under the caller's filter; a
//! memory the exact pass also found gains `FUZZY_WEIGHT ×` its fuzzy
//! evidence, any other enters with that as its score and
//! [`Pass::Fuzzy`](super::Pass::Fuzzy), after every exact hit (see
//! [`super::fulltext`]). The relevance decision judges a fuzzy hit against
//! the query with each word no visible memory holds replaced by the
//! expansion the memory holds ([`corrected`]).
//!
//! Expansions are taken only from terms some visible memory holds, counted
//! through the filter: nothing of a hidden memory shows through scores,
//! counts or the hits.

use crate::analysis::tokenizer::{Term, TermKind, tokenize};
use crate::error::Result;
use crate::index::text::TextHit;
use crate::model::Memory;
use crate::query::QueryPlan;
use crate::relevance::QueryEvidence;

use super::{Context, Pass, SearchHit};

/// Words of at least this many letters are matched within edit distance 1.
pub(crate) const FUZZY_MIN_LETTERS: usize = 5;
/// Words of at least this many letters are matched as prefixes.
pub(crate) const PREFIX_MIN_LETTERS: usize = 4;
/// How many expansions of one word are searched (the most held first).
const MAX_EXPANSIONS: usize = 8;
/// How much the fuzzy pass's evidence weighs against the exact pass's.
pub(crate) const FUZZY_WEIGHT: f32 = 0.25;

/// The index terms one query word stands for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expansion {
    /// The word's place in the plan's terms.
    pub(crate) term: usize,
    /// The terms, most held first.
    pub(crate) terms: Vec<String>,
    /// Whether some visible memory holds the word itself.
    pub(crate) held: bool,
}

/// A Latin word of the plan that may be expanded.
fn latin(term: &Term) -> bool {
    term.kind == TermKind::Word
        && term.text.len() >= PREFIX_MIN_LETTERS
        && term.text.bytes().all(|b| b.is_ascii_lowercase())
}

/// Whether the exact pass is weak enough for the fuzzy pass (see the module
/// docs): `sparse` when it found fewer memories than were asked for (never
/// said of hybrid search's deep list, whose semantic side finds word forms;
/// there only a word no visible memory holds calls for the pass).
pub(crate) fn weak(cx: &Context<'_>, sparse: bool) -> Result<bool> {
    // `MEMD_FUZZY=off` searches without the pass (to measure it).
    if std::env::var_os("MEMD_FUZZY").is_some_and(|v| v == "off") {
        return Ok(false);
    }
    if cx.plan.conversational || !cx.plan.terms.iter().any(|w| latin(&w.term)) {
        return Ok(false);
    }
    if sparse {
        return Ok(true);
    }
    for w in &cx.plan.terms {
        if latin(&w.term)
            && w.term.text.len() >= FUZZY_MIN_LETTERS
            && !cx
                .index
                .text_holds_any(std::slice::from_ref(&w.term), cx.filter)?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The expansions of the plan's Latin words (see the module docs).
pub(crate) fn expansions(cx: &Context<'_>) -> Result<Vec<Expansion>> {
    let mut out = Vec::new();
    for (i, w) in cx.plan.terms.iter().enumerate() {
        if w.speaker || !latin(&w.term) {
            continue;
        }
        let text = &w.term.text;
        let held = cx
            .index
            .text_holds_any(std::slice::from_ref(&w.term), cx.filter)?;
        let fuzzy = !held && text.len() >= FUZZY_MIN_LETTERS;
        let terms: Vec<String> = cx
            .index
            .text_expansions(text, fuzzy, true, cx.filter)?
            .into_iter()
            .take(MAX_EXPANSIONS)
            .map(|(t, _)| t)
            .collect();
        if !terms.is_empty() {
            out.push(Expansion {
                term: i,
                terms,
                held,
            });
        }
    }
    Ok(out)
}

/// The fuzzy pass: `(hit, evidence)` for memories holding an expansion,
/// evidence normalised like the exact pass's and capped at 1.
pub(crate) fn ranking(
    cx: &Context<'_>,
    expansions: &[Expansion],
    limit: usize,
) -> Result<Vec<(TextHit, f32)>> {
    let terms: Vec<(Term, f32)> = expansions
        .iter()
        .flat_map(|e| {
            let weight = cx.plan.terms[e.term].weight;
            e.terms.iter().map(move |t| {
                let term = Term {
                    text: t.clone(),
                    kind: TermKind::Word,
                };
                (term, weight)
            })
        })
        .collect();
    let max = cx.evidence.max_bm25().max(f32::EPSILON);
    Ok(cx
        .index
        .text_search_weighted(&terms, cx.filter, false, None, limit)?
        .into_iter()
        .map(|h| {
            let e = (h.score / max).min(1.0);
            (h, e)
        })
        .collect())
}

/// `plan` with each expanded word that no visible memory holds replaced by
/// the first of its expansions `memory` holds; `None` when nothing is
/// replaced. A word some memory holds is a word of its own: a longer word
/// starting with it (`plan`, `planet`) is ranked by the fuzzy pass but is
/// no evidence that the memory is about the query.
pub(crate) fn corrected(
    plan: &QueryPlan,
    expansions: &[Expansion],
    memory: &Memory,
) -> Option<QueryPlan> {
    let holds: std::collections::HashSet<String> =
        tokenize(&crate::relevance::indexed_text(memory))
            .into_iter()
            .map(|t| t.text)
            .collect();
    let mut plan = plan.clone();
    let mut changed = false;
    for e in expansions.iter().filter(|e| !e.held) {
        let word = &mut plan.terms[e.term].term.text;
        if let Some(t) = e.terms.iter().find(|t| holds.contains(t.as_str())) {
            *word = t.clone();
            changed = true;
        }
    }
    changed.then_some(plan)
}

/// Judges the hits of the fuzzy pass alone against the query corrected
/// for each memory ([`corrected`]).
pub(crate) struct Corrector<'a> {
    cx: &'a Context<'a>,
    query: &'a str,
    expansions: &'a [Expansion],
    /// The evidence of each corrected plan, by its terms.
    cache: std::cell::RefCell<std::collections::HashMap<Vec<String>, QueryEvidence>>,
}

impl<'a> Corrector<'a> {
    /// A corrector when the fuzzy pass of `cx` expanded some word.
    pub(crate) fn new(cx: &'a Context<'a>, query: &'a str) -> Option<Corrector<'a>> {
        let expansions = cx.fuzzy.get().filter(|e| !e.is_empty())?;
        Some(Corrector {
            cx,
            query,
            expansions,
            cache: Default::default(),
        })
    }

    /// Replaces the evidence of every hit of the fuzzy pass alone by that
    /// of the query corrected for its memory.
    pub(crate) fn correct(&self, hits: &mut [SearchHit]) -> Result<()> {
        for h in hits.iter_mut().filter(|h| h.pass == Pass::Fuzzy) {
            let Some(plan) = corrected(self.cx.plan, self.expansions, &h.memory) else {
                continue;
            };
            let key: Vec<String> = plan.terms.iter().map(|w| w.term.text.clone()).collect();
            let mut cache = self.cache.borrow_mut();
            let evidence = match cache.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(QueryEvidence::new(
                    self.cx.index,
                    self.query,
                    &plan,
                    self.cx.translation,
                    self.cx.filter,
                )?),
            };
            h.evidence = crate::relevance::Evidence {
                stage: h.evidence.stage,
                ..evidence.of(&h.memory, h.evidence.cosine)
            };
        }
        Ok(())
    }
}
