//! Calibration data for the relevance floor ([`memory_hub::relevance`]).
//!
//! ```text
//! cargo run --example floor_calibration -- OUT.jsonl UNRELATED.jsonl DATASET_DIR...
//! ```
//!
//! For every dataset (`corpus.jsonl` + `queries.jsonl`, as `memd eval` reads
//! them) the corpus is written into a fresh temporary root, every query and
//! every unrelated query (one JSON object a line with `query`, `lang`,
//! `split`) is searched in hybrid mode with the installed model, and each
//! of the top 10 hits is written to OUT as one line: dataset, query id, rank,
//! whether it is relevant, cosine, coverage, the cosine threshold, and
//! whether memd's floor keeps the response (`kept`). `scripts/floor_calibration.py --gate`
//! picks the constants from that file; `--shipped` reports what the floor in
//! the code does.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::hub::{Hub, Mode, WriteRequest};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::Scene;
use memory_hub::search::{SearchMode, SearchRequest};

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn scene(v: &serde_json::Value) -> Scene {
    Scene::parse(v["scene"].as_str().unwrap_or("main")).expect("a scene")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert!(
        args.len() >= 3,
        "usage: OUT.jsonl UNRELATED.jsonl DATASET_DIR..."
    );
    let mut out = std::fs::File::create(&args[0]).expect("output file");
    let unrelated = lines(Path::new(&args[1]));
    let config = Config::default();
    for dir in &args[2..] {
        let dir = Path::new(dir);
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let root = tempfile::tempdir().expect("temp dir");
        let (hub, _) = Hub::open_with(
            Layout::new(root.path()),
            config.clone(),
            Mode::Write,
            EmbedderSlot::from_config(&config.embedder),
            &mut |_| {},
        )
        .expect("open");
        let corpus = lines(&dir.join("corpus.jsonl"));
        let mut corpus_id: HashMap<String, String> = HashMap::new();
        for chunk in corpus.chunks(1000) {
            let reqs = chunk
                .iter()
                .map(|c| WriteRequest::new(scene(c), c["text"].as_str().unwrap(), "eval"))
                .collect();
            for (c, r) in chunk.iter().zip(hub.append_batch(reqs).expect("write")) {
                corpus_id.insert(r.expect("written").id, c["id"].as_str().unwrap().into());
            }
        }
        let embedder = hub.embedder().expect("the installed model");
        let mut queries: Vec<(String, String, Vec<String>, Filter)> =
            lines(&dir.join("queries.jsonl"))
                .iter()
                .map(|q| {
                    let filter = match q["scene"].as_str() {
                        Some(_) => Filter::scope(Scope {
                            scenes: vec![scene(q)],
                            ..Scope::default()
                        }),
                        None => Filter::all(),
                    };
                    let relevant = q["relevant"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r.as_str().unwrap().to_string())
                        .collect();
                    (
                        q["qid"].as_str().unwrap().to_string(),
                        q["query"].as_str().unwrap().to_string(),
                        relevant,
                        filter,
                    )
                })
                .collect();
        for (i, u) in unrelated.iter().enumerate() {
            queries.push((
                format!(
                    "unrelated-{i}-{}-{}",
                    u["lang"].as_str().unwrap(),
                    u["split"].as_str().unwrap()
                ),
                u["query"].as_str().unwrap().to_string(),
                Vec::new(),
                Filter::all(),
            ));
        }
        for (qid, query, relevant, filter) in &queries {
            let res = hub
                .search_filtered(&SearchRequest {
                    query: query.clone(),
                    filter: filter.clone(),
                    limit: Some(10),
                    mode: Some(SearchMode::Hybrid),
                })
                .expect("search");
            let ev = memory_hub::relevance::evidence(
                hub.index(),
                Some(embedder.as_ref()),
                query,
                filter,
                &res.hits,
            )
            .expect("evidence");
            // What memd does with the shipped constants: the response is kept
            // when its best hit reaches the default floor.
            let kept = ev
                .iter()
                .any(|e| e.relevance() >= memory_hub::relevance::DEFAULT_FLOOR);
            for (rank, (h, e)) in res.hits.iter().zip(&ev).enumerate() {
                let cid = corpus_id.get(&h.memory.id).cloned().unwrap_or_default();
                let line = serde_json::json!({
                    "dataset": name,
                    "qid": qid,
                    "nrel": relevant.len(),
                    "rank": rank,
                    "relevant": relevant.contains(&cid),
                    "cosine": e.cosine,
                    "coverage": e.coverage,
                    "threshold": e.threshold,
                    "kept": kept,
                });
                writeln!(out, "{line}").expect("write");
            }
        }
        eprintln!("{name}: {} queries", queries.len());
    }
}
