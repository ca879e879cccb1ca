//! The peers' synthetic zh/en notes (`tests/bench/peers.rs`) on a smaller
//! instance, with the real model: full text finds the note holding a
//! query's invented words whatever the script of note and question
//! (recall@5 ≥ 0.90), and hybrid search does at least as well.

use std::sync::Arc;

use memory_hub::config::{Config, EmbedderConfig};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::onnx::OnnxEmbedder;
use memory_hub::hub::{Hub, Mode, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::support::{TempRoot, scene};

#[path = "../bench/peers.rs"]
mod generator;

use generator as peers;

/// Recall@5 per query kind and over all queries.
fn recall(
    hub: &Hub,
    ids: &[String],
    queries: &[peers::Query],
    mode: SearchMode,
) -> Vec<(String, f64)> {
    let mut by_kind: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    for q in queries {
        let hits: Vec<String> = hub
            .search_filtered(&SearchRequest {
                query: q.text.clone(),
                filter: Filter::all(),
                limit: Some(5),
                mode: Some(mode),
                min_score: Some(0.0),
            })
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.memory.id)
            .collect();
        let found = q
            .relevant
            .iter()
            .filter(|&&i| hits.contains(&ids[i]))
            .count() as f64
            / q.relevant.len() as f64;
        if found < 1.0 {
            let wanted: Vec<&String> = q.relevant.iter().map(|&i| &ids[i]).collect();
            eprintln!("{mode:?} missed {:?}: {hits:?}, not {wanted:?}", q.text);
        }
        for key in [q.kind.to_string(), "all".to_string()] {
            let e = by_kind.entry(key).or_default();
            e.0 += found;
            e.1 += 1;
        }
    }
    by_kind
        .into_iter()
        .map(|(k, (sum, n))| (k, sum / n as f64))
        .collect()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the model and the CC-CEDICT lexicon (scripts/setup.sh)"
)]
#[test]
fn full_text_finds_invented_words_in_either_script_and_hybrid_keeps_up() {
    let root = TempRoot::new();
    let embedder = OnnxEmbedder::load(&EmbedderConfig::default())
        .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)");
    let (hub, _) = Hub::open_with(
        root.layout(),
        Config::default(),
        Mode::Write,
        EmbedderSlot::ready(Arc::new(embedder)),
        &mut |_| {},
    )
    .unwrap();
    let (notes, queries) = peers::generate(1000, 30, 11);
    let reqs = notes
        .iter()
        .map(|n| WriteRequest::new(scene("main"), n.text.clone(), "peers"))
        .collect();
    let ids: Vec<String> = hub
        .append_batch(reqs)
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap().id)
        .collect();
    let text = recall(&hub, &ids, &queries, SearchMode::Fulltext);
    let hybrid = recall(&hub, &ids, &queries, SearchMode::Hybrid);
    eprintln!("full text {text:?}\nhybrid {hybrid:?}");
    let all = |r: &[(String, f64)]| r.iter().find(|(k, _)| k == "all").unwrap().1;
    assert!(all(&text) >= 0.90, "full text recall@5 {text:?}");
    assert!(
        all(&hybrid) >= all(&text),
        "hybrid {hybrid:?} < full text {text:?}"
    );
}
