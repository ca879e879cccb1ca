//! Cross-lingual full text through the installed CC-CEDICT lexicon
//! (`scripts/setup.sh`): a Chinese query finds English memories and the
//! other way round, in full-text and hybrid mode, always under the caller's
//! filter. The lexicon is required, like the model: `scripts/test.sh` runs
//! `scripts/setup.sh`, which installs both.

use std::sync::Arc;

use memory_hub::index::filter::{Filter, Scope};
use memory_hub::search::{SearchMode, SearchRequest};

use crate::support::{TempRoot, scene, search_ids_in, write};

fn require_lexicon() {
    assert!(
        memory_hub::embed::dictionary::lexicon().is_some(),
        "the CC-CEDICT lexicon is installed by scripts/setup.sh (scripts/test.sh runs it)"
    );
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the CC-CEDICT lexicon (scripts/setup.sh)"
)]
#[test]
fn a_chinese_query_finds_english_memories_and_back() {
    require_lexicon();
    let root = TempRoot::new();
    let hub = root.hub_with(Arc::new(memory_hub::embed::hash::HashEmbedder::new(384)));
    let magic = write(&hub, "main", "Bart performed a magic trick at the party");
    let _other = write(&hub, "main", "Bart went fishing with his father");
    let zh = write(&hub, "main", "Lisa 在学校图书馆借了一本小说");
    for mode in [SearchMode::Fulltext, SearchMode::Hybrid] {
        let hits = search_ids_in(&hub, "我想看魔术表演", 3, mode);
        assert_eq!(hits.first(), Some(&magic), "{mode}: {hits:?}");
        // Without the model's cosine (the hash embedder here, or no model at
        // all) the relevance decision reads this question on lexical evidence
        // alone, and a translation of three of its words is not enough for
        // it; only the ranking is under test here, so the decision is off.
        let hits: Vec<String> = hub
            .search_filtered(&SearchRequest {
                query: "Which novel did she borrow from the library?".into(),
                filter: Filter::all(),
                limit: Some(3),
                mode: Some(mode),
                min_score: Some(0.0),
            })
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.memory.id)
            .collect();
        assert_eq!(hits.first(), Some(&zh), "{mode}: {hits:?}");
    }
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the CC-CEDICT lexicon (scripts/setup.sh)"
)]
#[test]
fn the_translated_pass_sees_only_what_the_filter_allows() {
    require_lexicon();
    let root = TempRoot::new();
    let hub = root.hub_with(Arc::new(memory_hub::embed::hash::HashEmbedder::new(384)));
    let hidden = write(&hub, "secret", "Bart performed a magic trick at the party");
    let visible = write(&hub, "main", "Bart performed at the school concert");
    let main_only = Filter::scope(Scope {
        scenes: vec![scene("main")],
        ..Scope::default()
    });
    // What the pass sees is under test, not whether the visible memory (a
    // concert, not a magic trick) is about the question: the decision is off.
    for mode in [SearchMode::Fulltext, SearchMode::Hybrid] {
        let results = hub
            .search_filtered(&SearchRequest {
                query: "我想看魔术表演".into(),
                filter: main_only.clone(),
                limit: Some(10),
                mode: Some(mode),
                min_score: Some(0.0),
            })
            .unwrap();
        let ids: Vec<&str> = results.hits.iter().map(|h| h.memory.id.as_str()).collect();
        assert!(!ids.contains(&hidden.as_str()), "{mode}: {ids:?}");
        assert_eq!(ids.first(), Some(&visible.as_str()), "{mode}: {ids:?}");
    }
    // With every scene visible the hidden memory is the better match.
    let all = search_ids_in(&hub, "我想看魔术表演", 10, SearchMode::Fulltext);
    assert_eq!(all.first(), Some(&hidden));
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the CC-CEDICT lexicon (scripts/setup.sh)"
)]
#[test]
fn full_text_keeps_literal_matches_in_the_other_script_when_the_translated_pass_fires() {
    require_lexicon();
    let root = TempRoot::new();
    let hub = root.hub_with(Arc::new(memory_hub::embed::hash::HashEmbedder::new(384)));
    // "project" translates to 项目, which only the first memory holds; the
    // others hold the English word itself inside Chinese text.
    let translated = write(&hub, "main", "周末的项目计划 project plan");
    let literal_a = write(&hub, "main", "群一 project 周末聚餐");
    let literal_b = write(&hub, "main", "私聊甲 project 生日");
    let hits = search_ids_in(&hub, "project", 10, SearchMode::Fulltext);
    assert_eq!(hits.first(), Some(&translated), "{hits:?}");
    for id in [&literal_a, &literal_b] {
        assert!(hits.contains(id), "{id} missing from {hits:?}");
    }
    assert_eq!(hits.len(), 3, "{hits:?}");
}

/// A hybrid hub over the real model (the fusion is what is tested, so the
/// semantic neighbours must be the real ones).
fn real_hub(root: &TempRoot) -> memory_hub::hub::Hub {
    let model =
        memory_hub::embed::onnx::OnnxEmbedder::load(&memory_hub::config::EmbedderConfig::default())
            .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)");
    memory_hub::hub::Hub::open_with(
        root.layout(),
        memory_hub::config::Config::default(),
        memory_hub::hub::Mode::Write,
        memory_hub::embed::EmbedderSlot::ready(Arc::new(model)),
        &mut |_| {},
    )
    .unwrap()
    .0
}

/// Issue item 3: a memory holding every query word, written mostly in the
/// other script, used to lose to memories holding none of them but a
/// translation of the question's other words (the own pass voted only for
/// memories of the query's script; literal matches in the other script came
/// only into the places the voted hits left).
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the CC-CEDICT lexicon and the model (scripts/setup.sh)"
)]
#[test]
fn a_memory_holding_the_query_words_in_the_other_script_comes_first() {
    require_lexicon();
    let root = TempRoot::new();
    let hub = real_hub(&root);
    let pipa = write(
        &hub,
        "main",
        "Weekly sync: the team reviewed the deploy plan and agreed on the rollout order. 备注：琵琶 蒲公英",
    );
    for n in 1..=6 {
        write(
            &hub,
            "main",
            &format!("The decision on budget item {n} was postponed until the quarterly review."),
        );
    }
    let mirror = write(
        &hub,
        "main",
        "今天下午团队讨论了发布计划，确定了上线顺序和回滚方案。wynyel xulqir",
    );
    for n in 1..=6 {
        write(
            &hub,
            "main",
            &format!("第{n}个版本的更新已经推迟到下个季度评审。"),
        );
    }
    for mode in [SearchMode::Fulltext, SearchMode::Hybrid] {
        let hits = search_ids_in(&hub, "关于琵琶和蒲公英的决定是什么", 5, mode);
        assert_eq!(hits.first(), Some(&pipa), "{mode}: {hits:?}");
        let hits = search_ids_in(&hub, "any updates regarding wynyel or xulqir?", 5, mode);
        assert_eq!(hits.first(), Some(&mirror), "{mode}: {hits:?}");
    }
}

/// Issue item 1: full text fused its own pass and the translated pass by
/// reciprocal rank, so each pass's first hit scored 1/61 whatever its BM25
/// and a Chinese memory matching one translated word tied with the English
/// turn holding every word (the tie went by id). The question below is no
/// exact phrase of either memory: evidence alone decides.
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the CC-CEDICT lexicon (scripts/setup.sh)"
)]
#[test]
fn full_text_ranks_by_evidence_not_by_rank_position() {
    require_lexicon();
    let root = TempRoot::new();
    let hub = root.hub_with(Arc::new(memory_hub::embed::hash::HashEmbedder::new(384)));
    let turn = write(
        &hub,
        "main",
        "Melanie: Look at this bowl, I made it in pottery class yesterday!",
    );
    let camp = write(&hub, "main", "Bart和班级同学一起参加夏令营，感到非常开心。");
    for text in [
        "Caroline: The support group meets every Tuesday evening.",
        "Melanie: The kids loved the beach trip last summer.",
    ] {
        write(&hub, "main", text);
    }
    let results = hub
        .search_filtered(&SearchRequest {
            query: "pottery class yesterday, made".into(),
            filter: Filter::all(),
            limit: Some(5),
            mode: Some(SearchMode::Fulltext),
            min_score: Some(0.0),
        })
        .unwrap();
    let ids: Vec<&str> = results.hits.iter().map(|h| h.memory.id.as_str()).collect();
    assert_eq!(ids.first(), Some(&turn.as_str()), "{ids:?}");
    if let Some(i) = ids.iter().position(|id| *id == camp) {
        assert!(
            results.hits[0].score > results.hits[i].score,
            "no tie: {:?}",
            results.hits.iter().map(|h| h.score).collect::<Vec<_>>()
        );
    }
}
