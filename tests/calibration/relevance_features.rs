//! Training rows of the relevance model ([`memory_hub::eval::training`]).
//!
//! ```text
//! cargo run --release --example relevance_features -- EVAL_DIR OFF_TOPIC.jsonl OUT.jsonl
//!     [--vector-cache FILE] [--large 10000,100000] [--seed 7]
//! ```
//!
//! Searches roots built from the dev sets (5 memories to `--large`, the
//! large ones filled up with the bench's everyday notes, `tests/bench/corpus.rs`:
//! the peers' notes speak of taxes and server outages, which some
//! off-topic questions ask about)
//! with the installed model and writes one JSON line per hit for
//! `scripts/train-relevance.py`.
#![allow(clippy::print_stdout)]

#[path = "../bench/corpus.rs"]
#[allow(dead_code)]
mod corpus;

use std::path::PathBuf;
use std::sync::Arc;

use memory_hub::config::Config;
use memory_hub::embed::onnx::OnnxEmbedder;
use memory_hub::eval::precision::read_off_topic;
use memory_hub::eval::training::{TrainingOptions, export};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert!(
        args.len() >= 3,
        "usage: EVAL_DIR OFF_TOPIC.jsonl OUT.jsonl [options]"
    );
    let large: Vec<usize> = arg("--large")
        .unwrap_or_else(|| "10000".into())
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("--large takes comma-separated sizes"))
        .collect();
    let max = large.iter().copied().max().unwrap_or(0);
    let notes = corpus::generate(max, 99);
    let options = TrainingOptions {
        vector_cache: arg("--vector-cache").map(PathBuf::from),
        off_topic: read_off_topic(&PathBuf::from(&args[1])).expect("off-topic questions"),
        filler: notes.into_iter().map(|n| n.text).collect(),
        large,
        seed: arg("--seed").map_or(7, |s| s.parse().expect("--seed N")),
    };
    let config = Config::default();
    let model =
        OnnxEmbedder::load(&config.embedder).expect("the installed model (scripts/setup.sh)");
    let rows = export(
        &PathBuf::from(&args[0]),
        &PathBuf::from(&args[2]),
        &config,
        Arc::new(model),
        &options,
    )
    .expect("export");
    println!("{rows} rows");
}
