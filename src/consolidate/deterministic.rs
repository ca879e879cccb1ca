//! The pass that needs no model: fold near-duplicate chat, promote what was
//! recalled or marked important, let the rest expire, flag stale long-term
//! memories.
//!
//! Similarity is the Jaccard index of the two texts' term sets as the search
//! tokenizer sees them (CJK character bigrams, Latin words), so "the same
//! sentence said twice with different punctuation" folds, in Chinese too.
//! Everything here is a pure function of the journal view and the options.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::Duration;

use super::report::{Fold, Skipped, Stale};
use super::salience::Verdict;
use super::statement;
use super::{History, JournalView, RunOptions, SOURCE, SleepConfig};
use crate::hub::WriteRequest;
use crate::index::tokenizer;
use crate::model::{Fact, Setting, Stage, Tier};

/// Most stale candidates listed in one report.
const MAX_STALE: usize = 200;

/// A planned promotion.
#[derive(Debug, Clone)]
pub(crate) struct PlannedPromotion {
    /// The short-term id it comes from.
    pub(crate) from: String,
    /// The write that promotes it.
    pub(crate) request: WriteRequest,
    /// recalled, important, salient (with its category), or several.
    pub(crate) reason: String,
}

/// What the deterministic pass would do.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Writes of new long-term facts.
    pub(crate) promotions: Vec<PlannedPromotion>,
    /// Folded near-duplicates.
    pub(crate) folded: Vec<Fold>,
    /// Short-term lines left to expire.
    pub(crate) expiring: usize,
    /// Stale long-term memories.
    pub(crate) stale: Vec<Stale>,
    /// Left alone, and why.
    pub(crate) skipped: Vec<Skipped>,
}

/// The term set of a text (CJK bigrams, words, lone CJK characters).
pub(crate) fn terms(text: &str) -> HashSet<String> {
    tokenizer::tokenize(text)
        .into_iter()
        .map(|t| t.text)
        .collect()
}

/// Jaccard index of two term sets; two empty sets are identical.
pub(crate) fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f32 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    inter as f32 / union as f32
}

/// Chat lines alike enough to be one memory, with the terms of the first.
struct Cluster<'a> {
    members: Vec<&'a History>,
    terms: HashSet<String>,
}

/// The short-term chat a run over `opts.window` looks at, in journal order.
pub(crate) fn candidates<'a>(view: &'a JournalView, opts: &RunOptions) -> Vec<&'a History> {
    view.live()
        .filter(|h| h.first.stage == Stage::Short && opts.window.contains(h.first.ts))
        .collect()
}

/// Plans the deterministic pass over `view`; `salient` holds the offline
/// salience verdict of each candidate id ([`salience`]).
pub(crate) fn plan(
    view: &JournalView,
    cfg: &SleepConfig,
    opts: &RunOptions,
    run_id: &str,
    salient: &HashMap<String, Verdict>,
) -> Plan {
    let mut plan = Plan::default();
    // Short-term chat of the window, per scene, in journal order.
    let mut by_scene: BTreeMap<String, Vec<&History>> = BTreeMap::new();
    for h in candidates(view, opts) {
        by_scene
            .entry(h.first.scene.to_string())
            .or_default()
            .push(h);
    }
    // Long-term memories already there, per scene, for folding into them.
    let mut long_terms: BTreeMap<String, Vec<(&str, HashSet<String>)>> = BTreeMap::new();
    for h in view.live() {
        if h.last.stage == Stage::Long && by_scene.contains_key(h.last.scene.as_str()) {
            long_terms
                .entry(h.last.scene.to_string())
                .or_default()
                .push((h.last.id.as_str(), terms(&h.last.text)));
        }
    }
    let ctx = Decide {
        cfg,
        run_id,
        salient,
    };
    for (scene, lines) in &by_scene {
        let longs = long_terms.get(scene).map_or(&[][..], Vec::as_slice);
        for c in clusters(lines, cfg.fold_similarity) {
            ctx.decide(&c, longs, &mut plan);
        }
    }
    plan.stale = stale(view, cfg, opts);
    plan
}

/// Groups one scene's lines into clusters of lines at least `similarity`
/// alike (Jaccard over terms), each joining the first cluster it matches.
fn clusters<'a>(lines: &[&'a History], similarity: f64) -> Vec<Cluster<'a>> {
    let mut clusters: Vec<Cluster<'a>> = Vec::new();
    for &h in lines {
        let t = terms(&h.last.text);
        match clusters
            .iter_mut()
            .find(|c| f64::from(jaccard(&c.terms, &t)) >= similarity)
        {
            Some(c) => c.members.push(h),
            None => clusters.push(Cluster {
                members: vec![h],
                terms: t,
            }),
        }
    }
    clusters
}

/// What one run decides each cluster by.
struct Decide<'a> {
    cfg: &'a SleepConfig,
    run_id: &'a str,
    salient: &'a HashMap<String, Verdict>,
}

impl Decide<'_> {
    /// The salience verdict that keeps `h`, if any.
    fn keeps(&self, h: &History) -> Option<&Verdict> {
        self.salient.get(&h.last.id).filter(|v| v.keep)
    }

    /// The representative of a cluster: a salient line if there is one,
    /// then the longest text, the latest on ties.
    fn representative<'h>(&self, c: &Cluster<'h>) -> &'h History {
        c.members
            .iter()
            .copied()
            .max_by(|a, b| {
                self.keeps(a)
                    .is_some()
                    .cmp(&self.keeps(b).is_some())
                    .then(
                        a.last
                            .text
                            .chars()
                            .count()
                            .cmp(&b.last.text.chars().count()),
                    )
                    .then(a.last.ts.cmp(&b.last.ts))
            })
            .expect("a cluster has a member")
    }

    /// Adds to `plan` what becomes of cluster `c`: it expires (its other
    /// lines folded into one), folds into an existing long-term memory of
    /// `longs`, or is promoted with the reasons that keep it.
    fn decide(&self, c: &Cluster<'_>, longs: &[(&str, HashSet<String>)], plan: &mut Plan) {
        let recalled = c.members.iter().any(|h| h.recalled());
        let importance = c
            .members
            .iter()
            .map(|h| h.last.importance)
            .fold(0.0f32, f32::max);
        let important = f64::from(importance) >= self.cfg.promote_importance;
        let salience = c.members.iter().find_map(|h| self.keeps(h));
        let rep = self.representative(c);
        let others: Vec<String> = c
            .members
            .iter()
            .filter(|h| h.last.id != rep.last.id)
            .map(|h| h.last.id.clone())
            .collect();
        if !recalled && !important && salience.is_none() {
            plan.expiring += c.members.len();
            if !others.is_empty() {
                plan.folded.push(Fold {
                    into: rep.last.id.clone(),
                    ids: others,
                });
            }
            return;
        }
        let existing = longs
            .iter()
            .find(|(_, lt)| f64::from(jaccard(lt, &c.terms)) >= self.cfg.fold_similarity);
        if let Some((id, _)) = existing {
            let mut ids = others;
            ids.insert(0, rep.last.id.clone());
            plan.folded.push(Fold {
                into: (*id).to_string(),
                ids,
            });
            plan.skipped.push(Skipped {
                id: rep.last.id.clone(),
                reason: format!("already in long-term memory as {id}"),
            });
            return;
        }
        if !others.is_empty() {
            plan.folded.push(Fold {
                into: rep.last.id.clone(),
                ids: others,
            });
        }
        let mut reasons: Vec<String> = Vec::new();
        if recalled {
            reasons.push("recalled".into());
        }
        if important {
            reasons.push("important".into());
        }
        if let Some(v) = salience {
            reasons.push(format!("salient: {}", v.reason));
        }
        plan.promotions.push(PlannedPromotion {
            from: rep.last.id.clone(),
            request: promotion_request(&c.members, rep, importance, self.run_id),
            reason: reasons.join(", "),
        });
    }
}

fn promotion_request(
    members: &[&History],
    rep: &History,
    importance: f32,
    run_id: &str,
) -> WriteRequest {
    let f: &Fact = &rep.last;
    let mut tags: Vec<String> = Vec::new();
    for h in members {
        for t in &h.last.tags {
            if !tags.contains(t) && tags.len() < 32 {
                tags.push(t.clone());
            }
        }
    }
    // Never lower the sensitivity: the promoted fact is as private as the most
    // private line folded into it.
    let privacy = members
        .iter()
        .map(|h| h.last.privacy)
        .max()
        .unwrap_or(f.privacy);
    // The statement the person meant (see `statement`). The short-term line
    // stays linked through `supersedes`.
    let said = statement::said_at(f);
    let s = statement::rewrite(&f.text, f.subject, f.title.as_deref(), said);
    let mut req = WriteRequest::new(f.scene.clone(), s.text, SOURCE);
    req.origin = SOURCE.into();
    req.kind = s.kind.as_str().into();
    req.tier = s.tier;
    // Its `time`: the date it names, else when it was said. The speaker
    // stays; the chat session does not (a long-term fact is no chat turn).
    let time = s.time.unwrap_or_else(|| statement::message_time(f));
    req.setting = Setting::from_input(Some(&time), None, f.setting.speaker.as_deref());
    req.stage = Stage::Long;
    req.title = f.title.clone();
    req.tags = tags;
    req.privacy = privacy;
    req.subject = f.subject;
    req.importance = importance.clamp(0.0, 1.0);
    req.supersedes = Some(f.id.clone());
    req.idempotency_key = Some(format!("sleep:{}", f.id));
    req.run = Some(run_id.to_string());
    req
}

/// Long-term facts untouched for `decay_after_days`, with importance < 0.5 and
/// no category (T0 stands for "category or pinned"), oldest first.
fn stale(view: &JournalView, cfg: &SleepConfig, opts: &RunOptions) -> Vec<Stale> {
    let cutoff = opts.now - Duration::days(i64::from(cfg.decay_after_days));
    let mut out: Vec<Stale> = view
        .live()
        .filter(|h| {
            h.last.stage == Stage::Long
                && h.last.importance < 0.5
                && h.last.tier != Some(Tier::T0)
                && h.last.ts < cutoff
        })
        .map(|h| Stale {
            id: h.last.id.clone(),
            last_touched: h.last.ts,
            importance: h.last.importance,
        })
        .collect();
    out.sort_by(|a, b| a.last_touched.cmp(&b.last_touched).then(a.id.cmp(&b.id)));
    out.truncate(MAX_STALE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(a: &str, b: &str, at_least: f32, below: f32) {
        let j = jaccard(&terms(a), &terms(b));
        assert!(j >= at_least && j < below, "{a:?} vs {b:?}: {j}");
    }

    #[test]
    fn jaccard_on_cjk_bigrams() {
        check("我明天要去北京出差", "我明天要去北京出差。", 1.0, 1.1);
        check("我明天要去北京出差", "我明天要去北京出差了", 0.8, 1.0);
        check("我明天要去北京出差", "今天晚上吃火锅", 0.0, 0.1);
        check(
            "the meeting moved to friday",
            "The meeting moved to Friday!",
            1.0,
            1.1,
        );
        check("", "", 1.0, 1.1);
    }
}
