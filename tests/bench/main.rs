//! `cargo bench --bench memd` (or `scripts/bench.sh`): throughput, latency,
//! reindex time, disk and memory on a seeded synthetic zh/en corpus, each
//! figure printed beside a baseline measured in the same run.
//!
//! Options (after `--`): `--facts 10000,100000` corpus sizes (default; add
//! `1000000` for the opt-in large run), `--queries N`, `--model auto|real|hash`
//! (the embedder behind the hybrid figures; `auto` uses the installed e5 model
//! up to 10k facts and the deterministic hash embedder above), `--no-http`,
//! `--writes N` single writes timed alone and under 8 hybrid readers (default
//! 200; 0 skips them, see `writes.rs` for `--writes-embed-ms`), `--writes-only`,
//! `--http-fulltext-only` (only the HTTP full-text figures, see `http.rs`),
//! `--no-vectors` / `--vectors-only` (vector search at scale: recall of the
//! 1-bit pass, KNN and hybrid latency, disk breakdown; see `vectors.rs`),
//! `--reindex-only [--root DIR] [--text-only]` (reindex with and without
//! vectors from a warm cache, on a root kept in `DIR`; see `reindex.rs`),
//! `--conflicts-only` (write latency with and without conflict detection,
//! see `conflicts.rs`), `--quality-only` (recall@5 on the peers' synthetic notes against FTS5;
//! see `quality.rs`), `--kinds-only [--repeat R]` (full-text latency by kind
//! of query: short, Chinese questions, ~1,900-character lines; see `kinds.rs`),
//! `--asof-only` (what an `as_of` search costs: nothing later, the first at an
//! older instant, the same instant again; see `asof.rs`).
#![allow(clippy::print_stdout)]

mod asof;
mod baseline;
mod conflicts;
mod corpus;
mod filtered;
mod http;
mod issue;
mod kinds;
mod peers;
mod procfs;
mod quality;
mod reindex;
mod soak;
mod vectors;
mod writes;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_hub::config::{Config, Layout};
use memory_hub::hub::{Hub, Mode, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::model::Scene;
use memory_hub::search::{SearchMode, SearchRequest};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(p) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            if e.path().is_dir() {
                dir_bytes(&e.path())
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}

struct Row {
    name: String,
    value: String,
    baseline: String,
    ratio: String,
}

fn row(name: impl Into<String>, value: String, baseline: String, ratio: Option<f64>) -> Row {
    Row {
        name: name.into(),
        value,
        baseline,
        ratio: ratio.map_or("—".into(), |r| format!("{r:.2}×")),
    }
}

/// Latencies of `f` over `queries`, run by `threads` threads.
fn latencies(threads: usize, queries: &[String], f: impl Fn(&str) + Sync) -> Vec<Duration> {
    timed(threads, queries, || (), |_, q| f(q))
}

/// Latencies of `f(state, query)` over `queries`, split over `threads` threads,
/// each with its own state from `init`.
pub fn timed<S>(
    threads: usize,
    queries: &[String],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &str) + Sync,
) -> Vec<Duration> {
    let chunks: Vec<&[String]> = queries.chunks(queries.len().div_ceil(threads)).collect();
    let mut all: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let (init, f) = (&init, &f);
                s.spawn(move || {
                    let mut state = init();
                    chunk
                        .iter()
                        .map(|q| {
                            let t = Instant::now();
                            f(&mut state, q);
                            t.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    all.sort();
    all
}

/// Appends `lines` to a file with one fdatasync per group of `group` lines.
fn raw_append(path: &std::path::Path, lines: &[String], group: usize) -> Duration {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let t = Instant::now();
    for chunk in lines.chunks(group) {
        let mut buf = String::new();
        for l in chunk {
            buf.push_str(l);
            buf.push('\n');
        }
        f.write_all(buf.as_bytes()).unwrap();
        f.sync_data().unwrap();
    }
    t.elapsed()
}

fn run(n: usize, nq: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let items = corpus::generate(n, 42);
    let queries = corpus::queries(nq, 7);
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"));
    let hub = Arc::new(Hub::open(layout.clone(), Config::default(), Mode::Write).unwrap());
    let req = |i: &corpus::Item| {
        WriteRequest::new(Scene::parse(i.scene).unwrap(), i.text.clone(), "bench")
    };

    // Single client, one acknowledged (fsync'd) write at a time.
    let single = 300.min(n);
    let t = Instant::now();
    for item in &items[..single] {
        hub.append(req(item)).unwrap();
    }
    let memd_single = single as f64 / t.elapsed().as_secs_f64();
    let lines: Vec<String> = items[..single]
        .iter()
        .map(|i| format!("{{\"text\":{:?}}}", i.text))
        .collect();
    let raw = single as f64 / raw_append(&tmp.path().join("raw1.jsonl"), &lines, 1).as_secs_f64();
    rows.push(row(
        "writes/s, single client (fsync each)",
        format!("{memd_single:.0}"),
        format!("{raw:.0} raw append+fdatasync"),
        Some(memd_single / raw),
    ));

    // Concurrent clients share fsyncs (group commit).
    let t = Instant::now();
    std::thread::scope(|s| {
        for c in 0..8 {
            let hub = Arc::clone(&hub);
            let items = &items;
            s.spawn(move || {
                for item in items[single..].iter().skip(c).step_by(8).take(40) {
                    hub.append(req(item)).unwrap();
                }
            });
        }
    });
    let concurrent = 320.0 / t.elapsed().as_secs_f64();
    rows.push(row(
        "writes/s, 8 concurrent clients",
        format!("{concurrent:.0}"),
        format!("{raw:.0} raw append+fdatasync"),
        Some(concurrent / raw),
    ));

    // Batched: the rest of the corpus in groups of 1000.
    let rest = &items[(single + 320).min(n)..];
    let t = Instant::now();
    for chunk in rest.chunks(1000) {
        for r in hub.append_batch(chunk.iter().map(req).collect()).unwrap() {
            r.unwrap();
        }
    }
    let batched = rest.len() as f64 / t.elapsed().as_secs_f64();
    let lines: Vec<String> = rest
        .iter()
        .map(|i| format!("{{\"text\":{:?}}}", i.text))
        .collect();
    let raw_b =
        rest.len() as f64 / raw_append(&tmp.path().join("rawb.jsonl"), &lines, 1000).as_secs_f64();
    rows.push(row(
        "writes/s, batched 1000",
        format!("{batched:.0}"),
        format!("{raw_b:.0} raw append+fdatasync"),
        Some(batched / raw_b),
    ));

    // Full-text search latency, library path, against raw tantivy and FTS5.
    let texts: Vec<String> = items.iter().map(|i| i.text.clone()).collect();
    let raw_t = baseline::RawTantivy::build(
        &{
            let d = tmp.path().join("raw-tantivy");
            std::fs::create_dir_all(&d).unwrap();
            d
        },
        &texts,
    );
    let fts = baseline::Fts5::build(&tmp.path().join("fts5.db"), &texts);
    for threads in [1, 8] {
        let memd = latencies(threads, &queries, |q| {
            hub.search_filtered(&SearchRequest {
                query: q.into(),
                filter: Filter::all(),
                limit: Some(10),
                mode: Some(SearchMode::Fulltext),
                min_score: None,
            })
            .unwrap();
        });
        let tv = latencies(threads, &queries, |q| {
            raw_t.search(q);
        });
        // A rusqlite connection is not Sync: FTS5 is measured on one thread only.
        let fts_lat = if threads == 1 {
            let mut v: Vec<Duration> = queries
                .iter()
                .map(|q| {
                    let t = Instant::now();
                    fts.search(q);
                    t.elapsed()
                })
                .collect();
            v.sort();
            v
        } else {
            Vec::new()
        };
        for (p, label) in [(0.5, "p50"), (0.99, "p99")] {
            let m = percentile(&memd, p);
            let b = percentile(&tv, p);
            let mut base = format!("{:.3} ms raw tantivy", ms(b));
            if !fts_lat.is_empty() {
                base.push_str(&format!(", {:.3} ms FTS5", ms(percentile(&fts_lat, p))));
            }
            rows.push(row(
                format!("full-text search {label}, concurrency {threads} (library)"),
                format!("{:.3} ms", ms(m)),
                base,
                Some(ms(m) / ms(b).max(1e-6)),
            ));
        }
    }
    drop(hub);

    // Reindex from the files (full text only: vectors are measured in `http`).
    let t = Instant::now();
    let (hub, _) = Hub::reindex_with(
        layout.clone(),
        Config::default(),
        memory_hub::embed::EmbedderSlot::none("full-text reindex"),
        &mut |_| {},
    )
    .unwrap();
    let reindex = t.elapsed();
    rows.push(row(
        "reindex (full text only)",
        format!("{:.2} s", reindex.as_secs_f64()),
        "—".into(),
        None,
    ));
    let journal = dir_bytes(&layout.facts());
    let index = dir_bytes(&layout.index());
    let raw_bytes: u64 = texts.iter().map(|t| t.len() as u64).sum();
    rows.push(row(
        "bytes on disk per fact (journal + index)",
        format!("{} + {}", journal / n as u64, index / n as u64),
        format!("{} raw text", raw_bytes / n as u64),
        Some((journal + index) as f64 / raw_bytes as f64),
    ));
    drop(hub);
    rows.push(second_stage_row());
    rows.push(row(
        "peak RSS",
        format!("{:.0} MiB", peak_rss_mib()),
        "—".into(),
        None,
    ));
    rows
}

/// The second stage of hybrid search scoring one query's candidates (100,
/// the most a query has), median of 200 runs.
fn second_stage_row() -> Row {
    let Some(model) = memory_hub::rerank::model() else {
        return row(
            "second stage, 100 candidates",
            "no model".into(),
            "—".into(),
            None,
        );
    };
    let candidates: Vec<memory_hub::rerank::Features> = (0..100)
        .map(|i| {
            let mut x = [0.0; memory_hub::rerank::N_FEATURES];
            for (j, v) in x.iter_mut().enumerate() {
                *v = ((i * 31 + j * 17) % 100) as f32 / 100.0;
            }
            x[1] = (i + 1) as f32;
            x
        })
        .collect();
    let mut runs: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let s: f32 = candidates.iter().map(|x| model.score(x)).sum();
            std::hint::black_box(s);
            t.elapsed()
        })
        .collect();
    runs.sort();
    row(
        "second stage, 100 candidates (goal ≤ 2 ms)",
        format!("{:.1} µs", runs[runs.len() / 2].as_secs_f64() * 1e6),
        "—".into(),
        None,
    )
}

fn main() {
    if let Some(seconds) = arg("--soak") {
        let seconds: u64 = seconds.parse().expect("--soak takes seconds");
        let warmup: u64 =
            arg("--warmup").map_or(300, |s| s.parse().expect("--warmup takes seconds"));
        let sample: u64 =
            arg("--sample").map_or(10, |s| s.parse().expect("--sample takes seconds"));
        let facts: usize =
            arg("--facts").map_or(2000, |s| s.parse().expect("--facts takes a number"));
        let json = arg("--json").unwrap_or_else(|| "target/bench/soak.json".into());
        let ok = soak::run(seconds, warmup, sample, facts, std::path::Path::new(&json));
        std::process::exit(if ok { 0 } else { 1 });
    }
    if std::env::args().any(|a| a == "--table") {
        let n: usize = arg("--facts").map_or(10_000, |s| {
            s.parse().expect("--facts takes one number with --table")
        });
        let nq: usize =
            arg("--queries").map_or(500, |s| s.parse().expect("--queries takes a number"));
        println!("\n## Performance table: {n} facts, {nq} queries\n");
        let mut rows = issue::run(n, nq);
        for g in kinds::table(n, nq) {
            issue::print(&g);
            rows.push(g);
        }
        let json = arg("--json").unwrap_or_else(|| "target/bench/table.json".into());
        let path = std::path::Path::new(&json);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            path,
            serde_json::to_string_pretty(&issue::to_json(n, &rows)).unwrap(),
        )
        .unwrap();
        println!("\nwrote {}", path.display());
        return;
    }
    let sizes: Vec<usize> = arg("--facts")
        .unwrap_or_else(|| "10000,100000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("--facts takes comma-separated numbers")
        })
        .collect();
    let nq: usize = arg("--queries").map_or(1000, |s| s.parse().expect("--queries takes a number"));
    let model_arg = arg("--model").unwrap_or_else(|| "auto".into());
    let with_http = !std::env::args().any(|a| a == "--no-http");
    let writes_only = std::env::args().any(|a| a == "--writes-only");
    let fulltext_only = std::env::args().any(|a| a == "--http-fulltext-only");
    let vectors_only = std::env::args().any(|a| a == "--vectors-only");
    let filtered_only = std::env::args().any(|a| a == "--filtered-only");
    let reindex_only = std::env::args().any(|a| a == "--reindex-only");
    let quality_only = std::env::args().any(|a| a == "--quality-only");
    let kinds_only = std::env::args().any(|a| a == "--kinds-only");
    let asof_only = std::env::args().any(|a| a == "--asof-only");
    let conflicts_only = std::env::args().any(|a| a == "--conflicts-only");
    let repeat: usize = arg("--repeat").map_or(1, |s| s.parse().expect("--repeat takes a number"));
    let with_vectors = !std::env::args().any(|a| a == "--no-vectors");
    let writes: usize =
        arg("--writes").map_or(200, |s| s.parse().expect("--writes takes a number"));
    let embed_ms: u64 = arg("--writes-embed-ms")
        .map_or(15, |s| s.parse().expect("--writes-embed-ms takes a number"));
    let model_installed = std::fs::read_dir(Config::default().embedder.resolved_model_dir())
        .map(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "onnx"))
        })
        .unwrap_or(false);
    for n in sizes {
        println!("\n## {n} facts, {nq} queries\n");
        println!("| figure | memd | baseline (same run) | ratio |");
        println!("|---|---|---|---|");
        let only = if fulltext_only {
            Some(http::run_fulltext(n, nq))
        } else if vectors_only {
            Some(vectors::run(n, nq))
        } else if filtered_only {
            Some(filtered::run(n, nq))
        } else if reindex_only {
            Some(reindex::run(n, arg("--root").map(std::path::PathBuf::from)))
        } else if kinds_only {
            Some(kinds::run(n, nq, repeat.max(1), arg("--kind").as_deref()))
        } else if asof_only {
            Some(asof::run(n, nq))
        } else if conflicts_only {
            Some(conflicts::run(n, writes))
        } else if quality_only {
            let real = match model_arg.as_str() {
                "real" => true,
                "hash" => false,
                _ => n <= 10_000 && model_installed,
            };
            Some(quality::run(n, nq, real))
        } else {
            None
        };
        if let Some(rows) = only {
            for r in rows {
                println!(
                    "| {} | {} | {} | {} |",
                    r.name, r.value, r.baseline, r.ratio
                );
            }
            continue;
        }
        // Each section's rows are printed as soon as it ends: a long run
        // shows what it has measured so far.
        let print = |rows: Vec<Row>| {
            for r in rows {
                println!(
                    "| {} | {} | {} | {} |",
                    r.name, r.value, r.baseline, r.ratio
                );
            }
            std::io::stdout().flush().unwrap();
        };
        if !writes_only {
            print(run(n, nq));
        }
        if with_vectors && !writes_only {
            print(vectors::run(n, nq));
        }
        if writes > 0 {
            print(writes::run(n, writes, model_arg == "real", embed_ms));
        }
        if with_http && !writes_only {
            let model = match model_arg.as_str() {
                "real" => http::Model::Real,
                "hash" => http::Model::Hash,
                _ if n <= 10_000 && model_installed => http::Model::Real,
                _ => http::Model::Hash,
            };
            print(http::run(n, nq, model));
        }
    }
}
