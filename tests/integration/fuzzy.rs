//! Full text forgives typos and word forms: a generated set of misspellings
//! (edit distance 1) and prefixes of English technical words, written inside
//! Chinese and English sentences among distractors. Full text only (no
//! model): hermetic.

use memory_hub::hub::Hub;
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::search::{Pass, SearchMode, SearchRequest};

use crate::support::{TempRoot, ranked_ids, scene, search_ids, write};

const WORDS: [&str; 20] = [
    "configuration",
    "deployment",
    "migration",
    "optimization",
    "authentication",
    "authorization",
    "replication",
    "encryption",
    "compression",
    "serialization",
    "virtualization",
    "synchronization",
    "initialization",
    "documentation",
    "dependency",
    "repository",
    "transaction",
    "partition",
    "scheduler",
    "allocation",
];

const DISTRACTORS: &[&str] = &[
    "We had dinner at the new noodle place downtown",
    "周末去公园散步，天气很好",
    "The cat sleeps on the windowsill every afternoon",
    "妈妈的生日礼物是一条围巾",
    "Remember to water the tomatoes before leaving",
    "The train to the airport leaves at seven",
    "我们在图书馆借了三本小说",
    "The office location moved to the third floor",
    "Bought new running shoes for the marathon",
    "下周一开会讨论预算",
    "The kids painted the fence blue",
    "He plays guitar in a small band on Fridays",
    "The station was crowded after the concert",
    "今天晚上吃饺子",
    "The coffee machine in the kitchen is broken again",
    "Her passion is collecting old maps",
];

/// The misspellings of `word` at edit distance 1 (transposition counted as
/// one): a deletion, an insertion, a substitution and a transposition, all
/// in the middle of the word.
fn misspellings(word: &str) -> Vec<String> {
    let c: Vec<char> = word.chars().collect();
    let p = c.len() / 2;
    let s = |v: Vec<char>| v.into_iter().collect::<String>();
    let mut deletion = c.clone();
    deletion.remove(p);
    let mut insertion = c.clone();
    insertion.insert(p, if c[p] == 'k' { 'j' } else { 'k' });
    let mut substitution = c.clone();
    substitution[p] = if c[p] == 'x' { 'q' } else { 'x' };
    let mut transposition = c.clone();
    let q = if c[p] == c[p + 1] { p + 1 } else { p };
    transposition.swap(q, q + 1);
    let out = vec![s(deletion), s(insertion), s(substitution), s(transposition)];
    assert!(out.iter().all(|m| m != word));
    out
}

/// A stem of `word`: its first three fifths, five letters at least.
fn prefix(word: &str) -> String {
    word[..((word.len() * 3).div_ceil(5)).max(5)].to_string()
}

/// A root holding each word in an English and a Chinese sentence, among
/// distractors; returns the hub and the ids of each word's memories.
fn corpus(root: &TempRoot) -> (Hub, Vec<[String; 2]>) {
    let hub = root.hub();
    let mut ids = Vec::new();
    for (i, w) in WORDS.iter().enumerate() {
        let en = write(
            &hub,
            "main",
            &format!("Note {i}: the {w} step of the release failed twice last week"),
        );
        let zh = write(
            &hub,
            "main",
            &format!("第{i}号备忘：{w} 这一步明天要重新检查"),
        );
        ids.push([en, zh]);
    }
    for d in DISTRACTORS {
        write(&hub, "main", d);
    }
    (hub, ids)
}

#[test]
fn misspelt_and_shortened_technical_words_are_found() {
    let root = TempRoot::new();
    let (hub, ids) = corpus(&root);
    let (mut found, mut asked) = (0usize, 0usize);
    let mut missed = Vec::new();
    for (w, targets) in WORDS.iter().zip(&ids) {
        let mut queries = misspellings(w);
        queries.push(prefix(w));
        for q in queries {
            let hits = search_ids(&hub, &q, 5);
            for t in targets {
                asked += 1;
                if hits.contains(t) {
                    found += 1;
                } else {
                    missed.push(format!("{q} ({w})"));
                }
            }
        }
    }
    let recall = found as f64 / asked as f64;
    eprintln!("fuzzy full-text recall@5: {recall:.3} over {asked}; missed: {missed:?}");
    assert!(recall >= 0.9, "recall@5 {recall:.3}; missed {missed:?}");
}

/// A phrase many memories hold fills the page with them, whether the
/// ranking's first hits already hold it (the index is then not asked) or
/// the phrase search has to find them below memories that hold its words
/// apart and more often; a phrase one memory holds puts that memory first.
#[test]
fn a_common_phrase_fills_the_page_with_its_holders_and_a_rare_one_comes_first() {
    let root = TempRoot::new();
    let hub = root.hub();
    let mut holders = Vec::new();
    for i in 0..12 {
        holders.push(write(
            &hub,
            "main",
            &format!("met friend number {i} at the coffee shop on the corner"),
        ));
    }
    for i in 0..8 {
        write(
            &hub,
            "main",
            &format!("shop {i}: coffee beans, a shop with coffee and a shop for tea"),
        );
    }
    let rare = write(
        &hub,
        "main",
        "a quiet shop with bad coffee, then the coffee shop closed early",
    );
    for limit in [5, 10] {
        let ranked = ranked_ids(&hub, "coffee shop", limit);
        assert_eq!(ranked.len(), limit);
        assert!(
            ranked.iter().all(|id| holders.contains(id) || *id == rare),
            "{ranked:?}"
        );
    }
    let ranked = ranked_ids(&hub, "the coffee shop on the corner", 10);
    assert_eq!(ranked.len(), 10);
    assert!(ranked.iter().all(|id| holders.contains(id)), "{ranked:?}");
    let ranked = ranked_ids(&hub, "then the coffee shop closed", 5);
    assert_eq!(ranked[0], rare, "{ranked:?}");
}

#[test]
fn exact_hits_and_the_exact_phrase_come_before_fuzzy_ones() {
    let root = TempRoot::new();
    let hub = root.hub();
    let phrase = write(&hub, "main", "the deployment window closes at noon");
    let exact = write(&hub, "main", "a deployment of the new build");
    let fuzzy = write(&hub, "main", "the deplyoment moved again");
    let ranked = ranked_ids(&hub, "deployment window", 5);
    assert_eq!(ranked[0], phrase, "{ranked:?}");
    let pos = |id: &String| ranked.iter().position(|r| r == id);
    assert!(pos(&exact).is_some(), "{ranked:?}");
    if let Some(f) = pos(&fuzzy) {
        assert!(f > pos(&exact).unwrap(), "{ranked:?}");
    }
    // A misspelt query: the memory holding the word itself ranks first,
    // found by the fuzzy pass.
    let hits = hub
        .search_filtered(&request("deplymoent", Filter::all()))
        .unwrap()
        .hits;
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.pass == Pass::Fuzzy), "{hits:?}");
    // An exact word finds its memories before the fuzzy pass adds any.
    let hits = hub
        .search_filtered(&request("deployment", Filter::all()))
        .unwrap()
        .hits;
    let passes: Vec<Pass> = hits.iter().map(|h| h.pass).collect();
    let first_fuzzy = passes.iter().position(|p| *p == Pass::Fuzzy);
    let last_exact = passes.iter().rposition(|p| *p != Pass::Fuzzy);
    if let (Some(f), Some(e)) = (first_fuzzy, last_exact) {
        assert!(e < f, "{passes:?}");
    }
}

/// A full-text request under `filter`, relevance decision off.
fn request(query: &str, filter: Filter) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        filter,
        limit: Some(5),
        mode: Some(SearchMode::Fulltext),
        min_score: Some(0.0),
    }
}

#[test]
fn short_words_misspelt_match_nothing() {
    let root = TempRoot::new();
    let hub = root.hub();
    write(&hub, "main", "the disk cache on each node was flushed");
    write(&hub, "main", "the file tree is ready");
    for q in ["dsik", "cahe", "ndoe", "tere", "fiel"] {
        assert!(ranked_ids(&hub, q, 5).is_empty(), "{q}");
    }
}

#[test]
fn the_fuzzy_pass_expands_only_into_what_the_caller_may_read() {
    let root = TempRoot::new();
    let hub = root.hub();
    write(&hub, "secret", "configuration of the vault");
    write(&hub, "main", "the garden needs water");
    let main = Filter::scope(Scope {
        scenes: vec![scene("main")],
        ..Scope::default()
    });
    for q in ["confgiuration", "configura"] {
        let hidden = hub.search_filtered(&request(q, main.clone())).unwrap();
        assert!(hidden.hits.is_empty(), "{q}: {:?}", hidden.hits);
        let seen = hub.search_filtered(&request(q, Filter::all())).unwrap();
        assert_eq!(seen.hits.len(), 1, "{q}");
    }
}

#[test]
fn a_longer_word_is_ranked_but_no_evidence_for_a_word_some_memory_holds() {
    let root = TempRoot::new();
    let hub = root.hub();
    let plan = write(&hub, "main", "the plan for the Monday review");
    let planet = write(&hub, "main", "we watched the planet Mars at night");
    for d in DISTRACTORS {
        write(&hub, "main", d);
    }
    assert_eq!(ranked_ids(&hub, "plan", 5), [plan.clone(), planet.clone()]);
    let kept = search_ids(&hub, "plan", 5);
    assert!(!kept.contains(&planet), "{kept:?}");
    // A typo no memory holds is evidence for the word it stands for.
    assert!(search_ids(&hub, "planex", 5).contains(&planet));
}
