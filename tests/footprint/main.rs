//! `cargo bench --bench footprint -- [--facts N] [--embed M] [--sessions S]`: the
//! memory footprint of the local embedder beside a hub holding many memories,
//! and cold embedding throughput, on the seeded synthetic zh/en corpus of the
//! `memd` bench. Needs the model installed by `scripts/setup.sh`.
//!
//! One process, in order (RSS is the kernel's `VmRSS`, peak is `VmHWM`, split
//! into anonymous memory and file-backed pages, `RssAnon` / `RssFile`):
//! 1. `--facts N` memories (default 100000) written and given vectors by the
//!    deterministic hash embedder (same 384 dimensions as e5), then 200 hybrid
//!    searches: the baseline, a hub at this size without the model.
//! 2. The e5 model (the installed one, `embedder.sessions` from
//!    `--sessions`, default the config's) loaded in the same process, then 200
//!    queries and 1000 memories embedded with it: RSS with the model and N memories.
//! 3. A restarted daemon: a child process (this bench, `--reopen ROOT`) opens
//!    the root written in 1, runs the same searches, then loads and uses the
//!    model as in 2. Its RSS is what serving N memories takes, without what
//!    writing them left in the allocator of the first process.
//! 4. `--embed M` facts (default 10000) embedded cold by `Hub::embed_pending`
//!    through the real model in a fresh hub (wall and CPU time), after the
//!    embedder alone on up to 2000 of them: one run per text against
//!    length-sorted batches of `--batch-tokens T` padded tokens (default the
//!    embedder's), with the lowest cosine between the two vectors of a text.
#![allow(clippy::print_stdout)]

#[path = "../bench/corpus.rs"]
#[allow(dead_code)]
mod corpus;
#[path = "../bench/procfs.rs"]
mod procfs;

use std::sync::Arc;
use std::time::Instant;

use memory_hub::config::{Config, Layout};
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::embed::onnx::OnnxEmbedder;
use memory_hub::embed::{Embedder, EmbedderSlot};
use memory_hub::hub::{Hub, Mode};
use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Runs each query as a hybrid search over every scene, top 10.
fn hybrid_searches(hub: &Hub, queries: &[String]) {
    for q in queries {
        hub.search_filtered(&SearchRequest {
            query: q.clone(),
            filter: Filter::all(),
            limit: Some(10),
            mode: Some(SearchMode::Hybrid),
            min_score: None,
        })
        .unwrap();
    }
}

/// A writer hub on `root` with `config` and `embedder`.
fn open_hub(root: &std::path::Path, config: &Config, embedder: EmbedderSlot) -> Hub {
    Hub::open_with(
        Layout::new(root.to_path_buf()),
        config.clone(),
        Mode::Write,
        embedder,
        &mut |_| {},
    )
    .unwrap()
    .0
}

/// Step 3, in a child process: opens `root`, searches, loads and uses the
/// model, and prints the table rows.
fn reopen(root: &std::path::Path, config: &Config, n: usize) {
    let hub = open_hub(
        root,
        config,
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
    );
    let queries = corpus::queries(200, 7);
    hybrid_searches(&hub, &queries);
    let (anon_hub, file_hub) = (procfs::own_mib("RssAnon:"), procfs::own_mib("RssFile:"));
    let e5 =
        OnnxEmbedder::load(&config.embedder).expect("the model is installed by scripts/setup.sh");
    let q: Vec<&str> = queries.iter().map(String::as_str).collect();
    for chunk in q.chunks(8) {
        e5.embed_queries(chunk).unwrap();
    }
    let passages: Vec<String> = corpus::generate(1000, 42)
        .into_iter()
        .map(|i| i.text)
        .collect();
    let passages: Vec<&str> = passages.iter().map(String::as_str).collect();
    for chunk in passages.chunks(64) {
        e5.embed_passages(chunk).unwrap();
    }
    let (anon_used, file_used) = (procfs::own_mib("RssAnon:"), procfs::own_mib("RssFile:"));
    println!(
        "| restarted on the root: RSS, {n} memories, no model (anonymous + file-backed) | {:.0} MiB ({anon_hub:.0} + {file_hub:.0}) | — |",
        anon_hub + file_hub
    );
    println!(
        "| restarted on the root: RSS, {n} memories + e5 after use (anonymous + file-backed) | **{:.0} MiB** ({anon_used:.0} + {file_used:.0}) | +{:.0} MiB over the hub alone; goal ≤ 300 MiB |",
        anon_used + file_used,
        anon_used + file_used - anon_hub - file_hub
    );
}

fn main() {
    let n: usize = arg("--facts").map_or(100_000, |v| v.parse().expect("--facts N"));
    let m: usize = arg("--embed").map_or(10_000, |v| v.parse().expect("--embed M"));
    let mut config = Config::default();
    if let Some(s) = arg("--sessions") {
        config.embedder.sessions = s.parse().expect("--sessions N");
    }
    if let Some(root) = arg("--reopen") {
        reopen(std::path::Path::new(&root), &config, n);
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "footprint bench: {n} facts, {m} embedded cold, {} embedder session(s), {cores} cores",
        config.embedder.sessions
    );
    let rss_start = procfs::own_mib("VmRSS:");

    // 1. The hub at size n, no model.
    let tmp = tempfile::tempdir().unwrap();
    let hub = open_hub(
        &tmp.path().join("root"),
        &config,
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
    );
    let items = corpus::generate(n, 42);
    let t = Instant::now();
    corpus::write_all(&hub, &items);
    let written = t.elapsed();
    assert_eq!(hub.embed_pending(usize::MAX) as usize, n);
    let queries = corpus::queries(200, 7);
    hybrid_searches(&hub, &queries);
    let passages: Vec<String> = items.iter().take(1000).map(|i| i.text.clone()).collect();
    drop(items);
    let rss_hub = procfs::own_mib("VmRSS:");
    let peak_hub = procfs::own_mib("VmHWM:");
    let (anon_hub, file_hub) = (procfs::own_mib("RssAnon:"), procfs::own_mib("RssFile:"));

    // 2. The model loaded beside it, and used.
    let t = Instant::now();
    let e5 =
        OnnxEmbedder::load(&config.embedder).expect("the model is installed by scripts/setup.sh");
    let load = t.elapsed();
    let rss_loaded = procfs::own_mib("VmRSS:");
    let q: Vec<&str> = queries.iter().map(String::as_str).collect();
    for chunk in q.chunks(8) {
        e5.embed_queries(chunk).unwrap();
    }
    let passages: Vec<&str> = passages.iter().map(String::as_str).collect();
    for chunk in passages.chunks(64) {
        e5.embed_passages(chunk).unwrap();
    }
    let rss_used = procfs::own_mib("VmRSS:");
    let peak_used = procfs::own_mib("VmHWM:");
    let (anon_used, file_used) = (procfs::own_mib("RssAnon:"), procfs::own_mib("RssFile:"));
    drop(e5);

    println!("| figure | value | baseline |");
    println!("|---|---|---|");
    println!(
        "| RSS, {n} memories (hash vectors, 200 hybrid searches), no model | {rss_hub:.0} MiB (peak {peak_hub:.0}) | {rss_start:.0} MiB at start; written in {:.1} s |",
        written.as_secs_f64()
    );
    println!(
        "| RSS, {n} memories + e5 loaded | {rss_loaded:.0} MiB | {rss_hub:.0} MiB without the model; load {:.2} s |",
        load.as_secs_f64()
    );
    println!(
        "| RSS, {n} memories + e5 after 200 queries and 1000 memories embedded | {rss_used:.0} MiB (peak {peak_used:.0}) | +{:.0} MiB over the hub alone |",
        rss_used - rss_hub
    );
    // File-backed pages (the memory-mapped SQLite and tantivy files) count in
    // RSS but are page cache the kernel can reclaim; anonymous memory cannot be.
    println!(
        "| of which anonymous / file-backed (mapped index files), {n} memories, no model | {anon_hub:.0} / {file_hub:.0} MiB | — |"
    );
    println!(
        "| of which anonymous / file-backed, {n} memories + e5 after use | {anon_used:.0} / {file_used:.0} MiB | +{:.0} MiB anonymous over the hub alone |",
        anon_used - anon_hub
    );
    drop(hub);

    // 3. A restarted daemon on the same root, in a process of its own.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .arg("--reopen")
        .arg(tmp.path().join("root"))
        .args(["--facts", &n.to_string()]);
    if let Some(s) = arg("--sessions") {
        child.args(["--sessions", &s]);
    }
    let status = child.status().expect("cannot start the reopening child");
    assert!(status.success(), "the reopening child failed: {status}");

    // 5 (first, on a quiet process). The embedder alone: one run per text
    // against length-sorted batches of `--batch-tokens` padded tokens.
    if m > 0 {
        let budget: usize = arg("--batch-tokens")
            .map_or(memory_hub::embed::onnx::BATCH_TOKENS, |v| {
                v.parse().expect("--batch-tokens T")
            });
        let texts: Vec<String> = corpus::generate(m.min(2000), 44)
            .into_iter()
            .map(|i| i.text)
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut per_text = Vec::new();
        for (label, tokens) in [("one run per text", 1), ("batched", budget)] {
            let e5 = OnnxEmbedder::load(&config.embedder)
                .expect("the model is installed by scripts/setup.sh")
                .with_batch_tokens(tokens);
            let cpu = procfs::cpu_seconds("self");
            let t = Instant::now();
            let vectors = e5.index_passages(&texts).unwrap();
            let wall = t.elapsed().as_secs_f64();
            let cpu = procfs::cpu_seconds("self") - cpu;
            per_text.push(vectors);
            println!(
                "| embed {} texts, {label} ({tokens} padded tokens per run) | {:.0} texts/s | {:.2} ms CPU per text, {wall:.1} s wall |",
                texts.len(),
                texts.len() as f64 / wall,
                cpu * 1000.0 / texts.len() as f64
            );
        }
        let worst = per_text[0]
            .iter()
            .zip(&per_text[1])
            .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>())
            .fold(1.0f32, f32::min);
        println!("| lowest cosine between a text's vector alone and batched | {worst:.4} | — |");
    }

    // 4. Cold embedding throughput through the hub's own path.
    if m > 0 {
        let tmp = tempfile::tempdir().unwrap();
        let hub = open_hub(
            &tmp.path().join("root"),
            &config,
            EmbedderSlot::from_config(&config.embedder),
        );
        corpus::write_all(&hub, &corpus::generate(m, 43));
        // Load outside the timing (the hub loads lazily).
        hub.embedder().unwrap();
        let cpu = procfs::cpu_seconds("self");
        let t = Instant::now();
        assert_eq!(hub.embed_pending(usize::MAX) as usize, m);
        let wall = t.elapsed().as_secs_f64();
        let cpu = procfs::cpu_seconds("self") - cpu;
        println!(
            "| embed {m} facts cold (e5, Hub::embed_pending) | {wall:.1} s | {:.2} ms per fact; {cpu:.1} CPU s ({:.1} of {cores} cores busy) |",
            wall * 1000.0 / m as f64,
            cpu / wall
        );
    }
}
