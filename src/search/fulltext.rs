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
//! not when the `limit` best hits are all in the query's own script and the
//! `limit`-th passed AND or scores above `TRANSLATED_WEIGHT` (what a hit of
//! the translated pass alone scores at most), nor when no memory the caller
//! may read holds any of the translations.
//!
//! **The fuzzy pass** ([`super::fuzzy`]) runs after the own pass when that
//! is weak: a memory it finds that the own pass also found gains
//! `FUZZY_WEIGHT ×` its fuzzy evidence; any other is a hit of
//! [`Pass::Fuzzy`], ranked after every other hit (hits of the translated
//! pass included).

use std::collections::HashMap;

use super::fuzzy::{self, FUZZY_WEIGHT};
use super::{Context, Pass};
use crate::analysis::presence::{Held, Probe};
use crate::analysis::tokenizer::{Term, TermKind, scripts_differ_milli};
use crate::error::Result;
use crate::index::text::{ScriptBand, TextHit};
use crate::query::{QueryPlan, Translation};
use crate::relevance::idf;

/// How much the translated pass's evidence weighs against the query's own.
pub(crate) const TRANSLATED_WEIGHT: f32 = 0.5;

/// Long conversational queries: how far the OR pass reaches before the coverage re-rank.
pub(crate) const COVERAGE_DEPTH: usize = 200;
/// Weight of query coverage against normalised BM25 in the re-rank (seed: 6.0).
pub(crate) const COVERAGE_BOOST: f32 = 6.0;

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
    /// AND hits first, then the rest, hits of the fuzzy pass alone last.
    pub(crate) fn group(&self) -> u8 {
        match self.pass {
            Pass::And => 0,
            Pass::Fuzzy => 2,
            Pass::Or | Pass::Semantic => 1,
        }
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

/// The hits of one pass: `(hit, evidence, pass)` in the pass's order, and
/// the searchable bodies it read (those of its hits, for a conversational
/// plan's coverage re-rank; none otherwise).
type Passed = (Vec<(TextHit, f32, Pass)>, HashMap<String, String>);

/// One pass of a plan, among memories of `band` when given.
fn pass(
    cx: &Context<'_>,
    searched: &Searched<'_>,
    band: Option<ScriptBand>,
    limit: usize,
) -> Result<Passed> {
    let (index, filter, plan) = (cx.index, cx.filter, searched.plan);
    let terms: Vec<(Term, f32)> = plan
        .terms
        .iter()
        .map(|w| (w.term.clone(), w.weight))
        .collect();
    let max = searched.max.max(f32::EPSILON);
    if plan.conversational {
        return coverage_pass(cx, searched, &terms, band, limit);
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
    Ok((scored, HashMap::new()))
}

/// The OR pass of a conversational plan, `COVERAGE_DEPTH` deep, re-ranked
/// by how much of the plan each hit covers (see the module docs).
fn coverage_pass(
    cx: &Context<'_>,
    searched: &Searched<'_>,
    terms: &[(Term, f32)],
    band: Option<ScriptBand>,
    limit: usize,
) -> Result<Passed> {
    let (index, filter) = (cx.index, cx.filter);
    let max = searched.max.max(f32::EPSILON);
    let depth = COVERAGE_DEPTH.max(limit);
    let hits = index.text_search_weighted(terms, filter, false, band, depth)?;
    if hits.is_empty() {
        return Ok((Vec::new(), HashMap::new()));
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
    Ok((scored, bodies))
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
        .0
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
/// can change the first `limit` hits. The fuzzy pass runs when a word is in
/// no visible memory and, without `always_translate`, when the own pass
/// found fewer than `limit`.
pub(crate) fn ranking(
    cx: &Context<'_>,
    limit: usize,
    always_translate: bool,
) -> Result<Vec<TextScored>> {
    let mut own = own_ranking(cx, None, limit)?;
    sort(&mut own);
    if fuzzy::weak(cx, !always_translate && own.len() < limit)? {
        own = with_fuzzy(cx, own, limit)?;
    }
    let (Some(t), Some(band)) = (cx.translation, other_script(cx.evidence.script())) else {
        return Ok(own);
    };
    // A Latin-script query can only cross into Chinese memories: without any
    // in the index, the pass would find nothing to count.
    if cx.evidence.script() < 500 && !cx.index.text_has_cjk()? {
        return Ok(own);
    }
    if !always_translate && !translation_can_change(cx, &own, limit) {
        return Ok(own);
    }
    // Only memories holding a translation count (`translated_ranking`).
    if !cx.index.text_holds_any(&t.translations, cx.filter)? {
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

/// `own` (sorted) with the hits of the fuzzy pass merged in (see
/// [`super::fuzzy`]): a memory already found gains `FUZZY_WEIGHT ×` its
/// fuzzy evidence, any other enters after every exact hit.
fn with_fuzzy(cx: &Context<'_>, mut own: Vec<TextScored>, limit: usize) -> Result<Vec<TextScored>> {
    let expansions = match cx.fuzzy.get() {
        Some(e) => e,
        None => {
            let found = fuzzy::expansions(cx)?;
            cx.fuzzy.get_or_init(|| found)
        }
    };
    if expansions.is_empty() {
        return Ok(own);
    }
    let mut by_id: HashMap<String, usize> = own
        .iter()
        .enumerate()
        .map(|(i, h)| (h.id.clone(), i))
        .collect();
    for (h, e) in fuzzy::ranking(cx, expansions, limit)? {
        let add = FUZZY_WEIGHT * e;
        match by_id.get(&h.id) {
            Some(&i) => {
                own[i].score += add;
            }
            None => {
                by_id.insert(h.id.clone(), own.len());
                own.push(TextScored {
                    id: h.id,
                    score: add,
                    own: 0.0,
                    translated: 0.0,
                    pass: Pass::Fuzzy,
                    script: h.script,
                });
            }
        }
    }
    sort(&mut own);
    own.truncate(limit);
    Ok(own)
}

/// Whether the translated pass could change the first `limit` hits of
/// `own` (sorted): see the module docs. Its hits are merged into `own` (the
/// first `limit` of the own pass): a memory of the other script among them
/// gains score; any other enters as an OR hit (after every AND hit) scoring
/// `TRANSLATED_WEIGHT ×` its translated evidence, at most
/// `TRANSLATED_WEIGHT`. So it changes nothing when `own` has `limit` hits,
/// all in the query's own script, and the `limit`-th is an AND hit or
/// scores above `TRANSLATED_WEIGHT`.
fn translation_can_change(cx: &Context<'_>, own: &[TextScored], limit: usize) -> bool {
    let Some(kth) = own.get(limit.max(1) - 1) else {
        return true;
    };
    own[..limit]
        .iter()
        .any(|h| scripts_differ_milli(h.script, cx.evidence.script()))
        || (kth.pass != Pass::And && kth.score <= TRANSLATED_WEIGHT)
        || own[..limit].iter().any(|h| h.pass == Pass::Fuzzy)
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
    let max = translated_max(t, &terms, &dfs, n);
    let plan_coverage = TranslatedCoverage::new(&t.plan.terms, &dfs, n);
    // The coverage re-rank looks at each body it reads once; the filter
    // below asks the same scans.
    let probe = Probe::new(t.plan.terms.iter().map(|w| &w.term).chain(&t.translations));
    let scanned: std::cell::RefCell<HashMap<String, Held>> = Default::default();
    let coverage = |text: &str| {
        let held = probe.scan(text);
        let c = plan_coverage.of(text, &held);
        scanned.borrow_mut().insert(text.to_string(), held);
        c
    };
    let searched = Searched {
        plan: &t.plan,
        max,
        coverage: &coverage,
    };
    let (hits, mut bodies) = pass(cx, &searched, Some(band), limit)?;
    let missing: Vec<String> = hits
        .iter()
        .filter(|h| !bodies.contains_key(&h.0.id))
        .map(|h| h.0.id.clone())
        .collect();
    if !missing.is_empty() {
        bodies.extend(index.meta.bodies_of(&missing, filter)?);
    }
    let scanned = scanned.into_inner();
    // Only memories holding a translation count (not merely a name kept as it was).
    let holds_translation = |held: &Held| {
        t.translations
            .iter()
            .any(|t| t.kind != TermKind::Single && held.holds(t))
    };
    Ok(hits
        .into_iter()
        .filter(|(h, _, _)| {
            bodies.get(&h.id).is_some_and(|b| match scanned.get(b) {
                Some(held) => holds_translation(held),
                None => holds_translation(&probe.scan(b)),
            })
        })
        .map(|(h, e, _)| (h, e.min(1.0)))
        .collect())
}

/// The BM25 maximum of a translated plan (whose `terms` have the document
/// frequencies `dfs` among `n` documents): the best translation of each
/// word (a name kept as it was is its own translation).
fn translated_max(t: &Translation, terms: &[Term], dfs: &[u64], n: u64) -> f32 {
    let idf_of: HashMap<(&str, u8), f32> = terms
        .iter()
        .zip(dfs)
        .map(|(term, &df)| ((term.text.as_str(), term.kind as u8), idf(df, n)))
        .collect();
    let weight_idf = |term: &Term, w: f32| {
        w * idf_of
            .get(&(term.text.as_str(), term.kind as u8))
            .copied()
            .unwrap_or(0.0)
    };
    t.groups
        .iter()
        .map(|g| {
            g.alternatives
                .iter()
                .map(|a| a.iter().map(|(term, w)| weight_idf(term, *w)).sum::<f32>())
                .fold(0.0, f32::max)
        })
        .sum()
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

    /// The share of `text` (`held`: what a probe of the plan's terms found
    /// in it).
    fn of(&self, text: &str, held: &Held) -> f32 {
        self.terms
            .iter()
            .zip(&self.signal)
            .filter(|(w, _)| match w.term.kind {
                TermKind::Single => text.contains(w.term.text.as_str()),
                _ => held.holds(&w.term),
            })
            .map(|(_, s)| *s)
            .sum::<f32>()
            / self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;
    use crate::index::filter::Filter;
    use crate::relevance::QueryEvidence;
    use crate::search::SearchConfig;

    /// A small CC-CEDICT of the words the corpus below speaks of.
    fn lexicon() -> crate::analysis::lexicon::Lexicon {
        crate::analysis::lexicon::Lexicon::parse(
            "項目 项目 [xiang4 mu4] /project/item/\n\
             計劃 计划 [ji4 hua4] /plan/\n\
             魔術 魔术 [mo2 shu4] /magic/\n\
             表演 表演 [biao3 yan3] /performance/show/\n\
             圖書館 图书馆 [tu2 shu1 guan3] /library/\n\
             小說 小说 [xiao3 shuo1] /novel/\n\
             週末 周末 [zhou1 mo4] /weekend/\n\
             公園 公园 [gong1 yuan2] /park/\n\
             散步 散步 [san4 bu4] /walk/\n\
             釣魚 钓鱼 [diao4 yu2] /fishing/\n\
             父親 父亲 [fu4 qin1] /father/\n\
             會議 会议 [hui4 yi4] /meeting/\n\
             生日 生日 [sheng1 ri4] /birthday/\n\
             禮物 礼物 [li3 wu4] /gift/\n\
             圍巾 围巾 [wei2 jin1] /scarf/\n\
             預算 预算 [yu4 suan4] /budget/\n\
             咖啡 咖啡 [ka1 fei1] /coffee/\n\
             天氣 天气 [tian1 qi4] /weather/\n",
        )
    }

    const CORPUS: &[&str] = &[
        "Bart performed a magic trick at the party",
        "Bart went fishing with his father",
        "The project plan is due on Friday",
        "Weekend walk in the park with the dog",
        "The quarterly project review meeting moved to Monday",
        "Birthday gift for mum: a scarf",
        "project notes: budget, plan, timeline",
        "She borrowed a novel from the library",
        "project kickoff",
        "the project budget was cut",
        "a project for the garden",
        "周末的项目计划 project plan",
        "我们在公园散步",
        "Lisa 在学校图书馆借了一本小说",
        "父亲周末去钓鱼",
        "生日礼物是一条围巾",
        "项目会议推迟到下周一",
        "魔术表演很精彩",
        "群一 project 周末聚餐",
        "预算 项目 计划 周末",
    ];

    const QUERIES: &[&str] = &[
        "project",
        "project plan",
        "magic trick",
        "scarf",
        "Bart",
        "meeting",
        "fishing father",
        "library novel",
        "Which novel did she borrow from the library?",
        "walk in the park with the dog and the project plan for the weekend",
        "我想看魔术表演",
        "周末的项目计划",
        "项目",
        "公园散步",
        "生日礼物",
        "下周一",
        "xyzzy",
        "围巾和预算",
        // Translations no memory holds.
        "coffee with Bart",
        "天气",
    ];

    /// How often the translated pass was skipped, by reason: the answer
    /// could not change, no visible memory holds a translation.
    #[derive(Default)]
    struct Skipped {
        cannot_change: usize,
        nothing_holds: usize,
    }

    /// Checks that [`ranking`] gives the same answer whether it skips the
    /// translated pass or always runs it, for `query` at every limit.
    fn same_with_and_without_skipping(
        index: &Index,
        lex: &crate::analysis::lexicon::Lexicon,
        query: &str,
        skipped: &mut Skipped,
    ) {
        let (filter, cfg) = (Filter::all(), SearchConfig::default());
        let plan = crate::query::plan(query);
        let translation = crate::query::translate(query, lex);
        let evidence =
            QueryEvidence::new(index, query, &plan, translation.as_ref(), &filter).unwrap();
        let cx = Context {
            index,
            plan: &plan,
            translation: translation.as_ref(),
            evidence: &evidence,
            last_turn: None,
            user_turns: None,
            filter: &filter,
            cfg: &cfg,
            fuzzy: Default::default(),
            spare_core: false,
        };
        for limit in [1, 2, 3, 5, 10] {
            let skipping = ranking(&cx, limit, false).unwrap();
            let always = ranking(&cx, limit, true).unwrap();
            assert_eq!(skipping, always, "{query:?}, limit {limit}");
            let mut own = own_ranking(&cx, None, limit).unwrap();
            sort(&mut own);
            if let Some(t) = &translation {
                if !translation_can_change(&cx, &own, limit) {
                    skipped.cannot_change += 1;
                } else if !index.text_holds_any(&t.translations, &filter).unwrap() {
                    skipped.nothing_holds += 1;
                }
            }
        }
    }

    /// A long-term note in scene `main`.
    fn memory(i: usize, text: &str) -> crate::model::Memory {
        use crate::model::{Origin, Privacy, Scene, Stage, Subject};
        crate::model::Memory {
            id: format!("m{i:02}"),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: chrono::DateTime::from_timestamp_millis(1_700_000_000_000 + i as i64).unwrap(),
            scene: Scene::parse("main").unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            text: text.into(),
            tags: Vec::new(),
            privacy: Privacy::Normal,
            subject: Subject::Owner,
            source: "test".into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            expires_at: None,
            setting: Default::default(),
        }
    }

    /// An index holding [`CORPUS`].
    fn corpus_index(dir: &std::path::Path) -> Index {
        let index = Index::open(dir, true).unwrap();
        let changes = CORPUS
            .iter()
            .enumerate()
            .map(|(i, text)| crate::index::Change::PutFact {
                memory: memory(i, text),
                extras: Default::default(),
                at: chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
            })
            .collect();
        let batch = crate::index::Batch {
            changes,
            ..Default::default()
        };
        index.apply(&batch).unwrap();
        index.end_bulk_load().unwrap();
        index.refresh().unwrap();
        index
    }

    #[test]
    fn skipping_the_translated_pass_never_changes_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let index = &corpus_index(&dir.path().join("index"));
        let lex = lexicon();
        let mut skipped = Skipped::default();
        for query in QUERIES {
            same_with_and_without_skipping(index, &lex, query, &mut skipped);
        }
        // Both ways of skipping were exercised.
        assert!(skipped.cannot_change > 0, "the answer could always change");
        assert!(
            skipped.nothing_holds > 0,
            "some memory always held a translation"
        );
    }

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
