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
        let hits = search_ids_in(
            &hub,
            "Which novel did she borrow from the library?",
            3,
            mode,
        );
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
    for mode in [SearchMode::Fulltext, SearchMode::Hybrid] {
        let results = hub
            .search_filtered(&SearchRequest {
                query: "我想看魔术表演".into(),
                filter: main_only.clone(),
                limit: Some(10),
                mode: Some(mode),
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
