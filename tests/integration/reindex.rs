//! A rebuilt index equals the incrementally maintained one.

use memory_hub::hub::WriteRequest;
use memory_hub::index::filter::Filter;
use memory_hub::model::Privacy;

use memory_hub::search::SearchMode;

use crate::support::{TempRoot, scene, search_ids_in};

const QUERIES: &[&str] = &[
    "公园",
    "散步",
    "咖啡",
    "coffee",
    "meeting notes",
    "park walk",
    "猫",
    "项目 deadline",
    "weekend hiking trip",
    "生日",
    "rust tantivy",
    "the",
    "学习 英语",
];

fn corpus(hub: &memory_hub::hub::Hub) -> Vec<String> {
    let zh = [
        "我今天去公园散步了",
        "早上喝了一杯咖啡",
        "猫在窗台上睡觉",
        "项目的截止日期是周五",
        "妈妈的生日在下个月",
        "周末一起学习英语",
    ];
    let en = [
        "Coffee with Sam about the meeting notes",
        "A long walk in the park after lunch",
        "Weekend hiking trip to the lake",
        "Rust and tantivy make search fast",
        "Project deadline moved to Friday",
        "Cat sleeps on the windowsill",
    ];
    let scenes = ["main", "qq:owner", "qq:group:7", "pet"];
    let mut ids = Vec::new();
    for i in 0..120 {
        let text = if i % 2 == 0 {
            format!("{} 第{i}次", zh[i % zh.len()])
        } else {
            format!("{} number {i}", en[i % en.len()])
        };
        let mut req = WriteRequest::new(scene(scenes[i % scenes.len()]), text, "test");
        req.tags = vec![format!("t{}", i % 5)];
        if i % 11 == 0 {
            req.privacy = Privacy::Personal;
        }
        ids.push(hub.append(req).unwrap().id);
    }
    ids
}

fn snapshot(hub: &memory_hub::hub::Hub) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for mode in [
        SearchMode::Fulltext,
        SearchMode::Semantic,
        SearchMode::Hybrid,
    ] {
        out.extend(QUERIES.iter().map(|q| search_ids_in(hub, q, 10, mode)));
    }
    out
}

#[test]
fn rebuilt_index_gives_the_same_results_in_the_same_order() {
    let root = TempRoot::new();
    root.write_doc(
        "notes/coffee.md",
        "# Coffee\nNotes on coffee beans.\n\n# 公园\n公园里的咖啡馆。\n",
    );
    let (before, counts_before) = {
        let hub = root.hub();
        let ids = corpus(&hub);
        for id in ids.iter().step_by(9) {
            hub.tombstone(id, None, "test", &Filter::all()).unwrap();
        }
        let snap = snapshot(&hub);
        assert!(
            snap.iter().filter(|r| !r.is_empty()).count() >= 10,
            "queries find things: {snap:?}"
        );
        let stats = hub.stats().unwrap();
        (
            snap,
            (
                stats.counts.memories,
                stats.counts.facts,
                stats.counts.forgotten,
                stats.text_documents,
            ),
        )
    };
    std::fs::remove_dir_all(root.path().join("data")).unwrap();
    let out = root.memd_json(&["reindex"]);
    assert_eq!(out["records"], 120 + 14);
    let hub = root.hub();
    assert_eq!(snapshot(&hub), before);
    let stats = hub.stats().unwrap();
    assert_eq!(
        (
            stats.counts.memories,
            stats.counts.facts,
            stats.counts.forgotten,
            stats.text_documents
        ),
        counts_before
    );
}

#[test]
fn an_unfinished_bulk_load_is_built_again() {
    use memory_hub::config::Config;
    use memory_hub::embed::EmbedderSlot;
    use memory_hub::hub::{Hub, Mode};

    let root = TempRoot::new();
    let fulltext = |hub: &memory_hub::hub::Hub| -> Vec<Vec<String>> {
        QUERIES
            .iter()
            .map(|q| search_ids_in(hub, q, 10, SearchMode::Fulltext))
            .collect()
    };
    let (before, facts) = {
        let hub = root.hub();
        corpus(&hub);
        (fulltext(&hub), hub.stats().unwrap().counts.facts)
    };
    // A rebuild that dies while loading the new index (a panic standing in
    // for a crash: the process goes away before the load ends).
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Hub::reindex_with(
            root.layout(),
            Config::default(),
            EmbedderSlot::none("test"),
            &mut |_| panic!("killed mid-build"),
        )
    }));
    assert!(died.is_err(), "the rebuild was interrupted");
    let index = root.path().join("data/index");
    assert!(index.exists(), "the interrupted build left its directory");
    assert!(
        !index.join("FORMAT").exists(),
        "an unfinished build is not marked complete"
    );
    // A reader sees no index rather than half of one.
    let err = Hub::open_with(
        root.layout(),
        Config::default(),
        Mode::ReadOnly,
        EmbedderSlot::none("test"),
        &mut |_| {},
    )
    .err()
    .expect("no index to read");
    assert!(err.to_string().contains("no index"), "{err}");
    // The next writer builds it again, completely.
    let hub = root.hub();
    assert!(index.join("FORMAT").exists());
    assert_eq!(hub.stats().unwrap().counts.facts, facts);
    assert_eq!(fulltext(&hub), before);
    // The finished store is back on its write-ahead log, with the indexes
    // the load deferred.
    let db = rusqlite::Connection::open(index.join("meta.db")).unwrap();
    let mode: String = db
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    for name in ["memories_scene_ts", "memories_content_hash"] {
        let n: i64 = db
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?",
                [name],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1, "{name}");
    }
}
