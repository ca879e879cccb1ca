//! Exact-first and off-topic figures on the mixed root of the dev sets
//! ([`memory_hub::eval::precision`]), printed as JSON.
//!
//! ```text
//! cargo run --release --example precision -- EVAL_DIR OFF_TOPIC.jsonl [--split test|tune|all]
//!     [--spans 80] [--seed 1] [--min-score X] [--vector-cache FILE] [--out REPORT.json]
//! ```
//!
//! The root holds LoCoMo conversation `locomo-0`, the memories of MADial
//! user `madial-u1` in Chinese and of `madial-u2` in English, all in scene
//! `main`; searches and recall run with the installed model and the
//! defaults a client gets (or `--min-score`).
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use memory_hub::config::Config;
use memory_hub::embed::EmbedderSlot;
use memory_hub::eval::precision::{MixedSource, PrecisionOptions, precision, read_off_topic};
use memory_hub::search::SearchMode;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert!(args.len() >= 2, "usage: EVAL_DIR OFF_TOPIC.jsonl [options]");
    let eval = PathBuf::from(&args[0]);
    let split = arg("--split").unwrap_or_else(|| "test".into());
    let off_topic: Vec<_> = read_off_topic(&PathBuf::from(&args[1]))
        .expect("off-topic questions")
        .into_iter()
        .filter(|q| split == "all" || q.split == split)
        .collect();
    let sources = [
        ("locomo-dev", "locomo-0"),
        ("madial-zh-dev", "madial-u1"),
        ("madial-en-dev", "madial-u2"),
    ]
    .map(|(dir, scene)| MixedSource {
        dir: eval.join(dir),
        scene: scene.into(),
    });
    let config = Config::default();
    let options = PrecisionOptions {
        spans: arg("--spans").map_or(80, |s| s.parse().expect("--spans N")),
        seed: arg("--seed").map_or(1, |s| s.parse().expect("--seed N")),
        vector_cache: arg("--vector-cache").map(PathBuf::from),
        modes: vec![
            SearchMode::Fulltext,
            SearchMode::Hybrid,
            SearchMode::Semantic,
        ],
        min_score: arg("--min-score").map(|s| s.parse().expect("--min-score X")),
    };
    let report = precision(
        &sources,
        &off_topic,
        &config,
        EmbedderSlot::from_config(&config.embedder),
        &options,
    )
    .expect("precision run");
    if let Some(out) = arg("--out") {
        std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    }
    println!(
        "{}",
        serde_json::json!({
            "memories": report.memories,
            "spans": report.spans.len(),
            "exactFirst": options.modes.iter().map(|m| (m.to_string(), report.exact_first(*m))).collect::<std::collections::BTreeMap<_, _>>(),
            "offTopic": off_topic.len(),
            "offTopicAnswered": options.modes.iter().map(|m| (m.to_string(), report.off_topic_answered(*m))).collect::<std::collections::BTreeMap<_, _>>(),
            "offTopicRecalled": report.off_topic_recalled(),
        })
    );
}
