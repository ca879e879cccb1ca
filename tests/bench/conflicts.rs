//! The cost of conflict detection on a write (`--conflicts-only`): single
//! writes through the write use case (`Hub::write`, which compares each new
//! long-term memory with the newest 300 live memories of its scene and
//! subject) beside the same kind of writes through the driver's append (no
//! detection), on a hub seeded with `n` facts of the corpus in one scene.
//! The writes are the labelled set's texts (`tests/fixtures/contradictions.jsonl`),
//! so many of them do contradict an earlier one and append a `link` line.

use std::time::{Duration, Instant};

use memory_hub::api::WriteBody;
use memory_hub::config::{Config, Layout};
use memory_hub::hub::{Hub, Mode, WriteRequest};
use memory_hub::model::Scene;

use crate::{Row, corpus, ms, percentile, row};

/// The labelled set's texts, older then newer of each pair.
fn texts() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/contradictions.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .flat_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            [
                v["a"].as_str().unwrap().to_string(),
                v["b"].as_str().unwrap().to_string(),
            ]
        })
        .collect()
}

/// Write p50/p99 with and without conflict detection.
pub fn run(n: usize, writes: usize) -> Vec<Row> {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"));
    let hub = Hub::open(layout, Config::default(), Mode::Write).unwrap();
    let seed: Vec<corpus::Item> = corpus::generate(n, 42)
        .into_iter()
        .map(|mut i| {
            i.scene = "main";
            i
        })
        .collect();
    corpus::write_all(&hub, &seed);
    let texts = texts();
    let op = hub.operator();
    // Each write is a new memory (numbered apart from every other, so that
    // exact dedup never answers NOOP).
    let time = |from: usize, f: &dyn Fn(String)| -> Vec<Duration> {
        let mut out: Vec<Duration> = (from..from + writes)
            .map(|i| {
                let text = format!("{} ({i})", texts[i % texts.len()]);
                let t = Instant::now();
                f(text);
                t.elapsed()
            })
            .collect();
        out.sort();
        out
    };
    let plain = time(0, &|text| {
        hub.append(WriteRequest::new(
            Scene::parse("main").unwrap(),
            text,
            "bench",
        ))
        .unwrap();
    });
    let detected = time(writes, &|text| {
        let body = WriteBody {
            text,
            ..Default::default()
        };
        let out = hub.write(&op, body).unwrap();
        assert_eq!(out.action, memory_hub::hub::WriteAction::Add);
    });
    let mut rows = Vec::new();
    for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
        let (d, b) = (ms(percentile(&detected, p)), ms(percentile(&plain, p)));
        rows.push(row(
            format!(
                "write {name} with conflict detection (300 candidates; baseline: append without)"
            ),
            format!("{d:.2} ms"),
            format!("{b:.2} ms"),
            Some(d / b.max(1e-9)),
        ));
    }
    rows
}
