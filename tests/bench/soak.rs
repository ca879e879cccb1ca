//! The soak (`scripts/soak.sh`, or `cargo bench --bench memd -- --soak
//! SECONDS`): a real `memd serve` process under a steady mixed load for an
//! hour by default, its resident set sampled all along. Passes when, after
//! the warm-up (`--warmup SECONDS`, default 300), every sample stays within
//! 10% of the first sample after it.
//!
//! The load, each on its own client thread at its own pace: writes (2/s),
//! chat ingest (2/s), forgets of what the load added (up to 5/s, paced to
//! the adds: everything but the newest [`KEPT_ADDED`] writes, ingested
//! messages and consolidation promotions is forgotten, oldest first, so the
//! live set stays the same size and the soak measures a steady workload,
//! not a growing one), full-text, semantic and hybrid searches (one client
//! each, back to back with 50 ms pauses), recall from a conversation (1/s),
//! and a consolidation run every 5 minutes (forgets wait while it runs: it
//! folds some of the same lines). The server starts on `--facts N` memories
//! (default 2000) written through it. Samples (with the slower operations
//! in flight at that moment, and what SQLite's allocator holds, from
//! `/metrics`) go to stdout as they are taken and, with the summary, to
//! `--json PATH` (default `target/bench/soak.json`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memory_hub::config::Layout;
use serde_json::{Value, json};

use crate::corpus;
use crate::http::Client;
use crate::issue::{Server, issue_token};
use crate::procfs::status_mib;

/// Per-operation counts: done, and failed (non-200 answers).
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
    /// A request of this operation is in flight.
    busy: AtomicBool,
}

/// Makes the body of a loop's `n`th request (`None`: skip this turn).
type BodyFn = Box<dyn FnMut(u64) -> Option<String> + Send>;
/// Reads each answer of a loop.
type SeenFn = Box<dyn FnMut(&[u8]) + Send>;

/// One operation's client loop: calls `body(i)` every `pace` until `stop`,
/// posting it to `path`, and hands each answer to `seen`.
#[allow(clippy::too_many_arguments)]
fn spawn_loop(
    name: &'static str,
    addr: std::net::SocketAddr,
    token: String,
    path: &'static str,
    pace: Duration,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    mut body: impl FnMut(u64) -> Option<String> + Send + 'static,
    mut seen: impl FnMut(&[u8]) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("soak-{name}"))
        .spawn(move || {
            let mut client = Client::connect(addr, &token);
            let mut i = 0u64;
            let mut reported = 0;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                if let Some(b) = body(i) {
                    // The server closes a keep-alive connection left idle (the
                    // forget client waits for writes to forget): one new
                    // connection and one retry before counting a failure.
                    counts.busy.store(true, Ordering::Relaxed);
                    let answer = client.try_post(path, &b).or_else(|_| {
                        client = Client::connect(addr, &token);
                        client.try_post(path, &b)
                    });
                    let (status, answer) = match answer {
                        Ok(a) => a,
                        Err(e) => {
                            client = Client::connect(addr, &token);
                            (0, e.to_string().into_bytes())
                        }
                    };
                    if status == 200 {
                        counts.ok.fetch_add(1, Ordering::Relaxed);
                        // Still busy while the answer is read: the forget
                        // client waits for what a consolidation folded.
                        seen(&answer);
                        counts.busy.store(false, Ordering::Relaxed);
                    } else {
                        counts.failed.fetch_add(1, Ordering::Relaxed);
                        counts.busy.store(false, Ordering::Relaxed);
                        if reported < 3 {
                            reported += 1;
                            eprintln!(
                                "soak: {name} answered {status}: {}",
                                String::from_utf8_lossy(&answer)
                            );
                        }
                    }
                }
                i += 1;
                // Paced in steps of at most a second: a soak that ends
                // between two consolidations (5 minutes apart) stops now.
                while let Some(rest) = pace.checked_sub(started.elapsed()) {
                    if stop.load(Ordering::Relaxed) || rest.is_zero() {
                        break;
                    }
                    std::thread::sleep(rest.min(Duration::from_secs(1)));
                }
            }
        })
        .unwrap()
}

/// Runs the soak for `seconds`, sampling every `sample` seconds; returns
/// whether RSS stayed flat after `warmup` seconds.
pub fn run(
    seconds: u64,
    warmup: u64,
    sample: u64,
    seed_facts: usize,
    json_path: &std::path::Path,
) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let layout = Layout::new(root.clone());
    let token = issue_token(&layout, "soak");
    let server = Server::start(&root, &[]);
    let addr = server.addr;
    println!(
        "soak: memd serve pid {} on {addr}, {seconds} s, warm-up {warmup} s",
        server.pid()
    );

    // The starting corpus, through the server.
    let items = corpus::generate(seed_facts, 42);
    std::thread::scope(|s| {
        for c in 0..4 {
            let (items, token) = (&items, &token);
            s.spawn(move || {
                let mut client = Client::connect(addr, token);
                for it in items.iter().skip(c).step_by(4) {
                    let body = json!({"text": it.text, "scene": it.scene}).to_string();
                    assert_eq!(client.post("/v1/write", &body).0, 200);
                }
            });
        }
    });

    let stop = Arc::new(AtomicBool::new(false));
    let (names, counts, threads) = start_load(addr, &token, &stop);

    let started = Instant::now();
    let mut samples: Vec<(f64, f64, f64, f64)> = Vec::new();
    let mut sqlite: Vec<f64> = Vec::new();
    let mut in_flight: Vec<Vec<&'static str>> = Vec::new();
    let mut metrics = Client::connect(addr, &token);
    println!(
        "| s | RSS MiB | anonymous | file-backed | SQLite heap | ops so far | in flight (slow operations) |"
    );
    println!("|---|---|---|---|---|---|---|");
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(sample).min(
            Duration::from_secs(seconds).saturating_sub(started.elapsed())
                + Duration::from_millis(1),
        ));
        let pid = server.pid();
        let s = (
            started.elapsed().as_secs_f64(),
            status_mib(pid, "VmRSS:"),
            status_mib(pid, "RssAnon:"),
            status_mib(pid, "RssFile:"),
        );
        let held = sqlite_heap_mib(&mut metrics);
        let ops: u64 = counts.iter().map(|c| c.ok.load(Ordering::Relaxed)).sum();
        let busy: Vec<&'static str> = names
            .iter()
            .zip(&counts)
            .filter(|(n, c)| !n.starts_with("search") && c.busy.load(Ordering::Relaxed))
            .map(|(n, _)| *n)
            .collect();
        println!(
            "| {:.0} | {:.1} | {:.1} | {:.1} | {held:.1} | {ops} | {} |",
            s.0,
            s.1,
            s.2,
            s.3,
            busy.join(", ")
        );
        samples.push(s);
        sqlite.push(held);
        in_flight.push(busy);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let peak = server.peak_mib();
    let wal = layout.index().join("meta.db-wal");
    server.stop();
    let wal_after = std::fs::metadata(&wal).map_or(0, |m| m.len());

    let after: Vec<&(f64, f64, f64, f64)> =
        samples.iter().filter(|s| s.0 >= warmup as f64).collect();
    let reference = after.first().map_or(0.0, |s| s.1);
    let (lo, hi) = after
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), s| (lo.min(s.1), hi.max(s.1)));
    let flat = !after.is_empty() && lo >= reference * 0.9 && hi <= reference * 1.1;
    let failed: u64 = counts
        .iter()
        .map(|c| c.failed.load(Ordering::Relaxed))
        .sum();
    println!();
    println!("| operation | done | failed |");
    println!("|---|---|---|");
    for (n, c) in names.iter().zip(&counts) {
        println!(
            "| {n} | {} | {} |",
            c.ok.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed)
        );
    }
    println!();
    println!(
        "soak: RSS {:.1} MiB at {:.0} s (first sample after the warm-up), {lo:.1}–{hi:.1} MiB after it ({:+.1}% / {:+.1}%), peak {peak:.1} MiB; write-ahead log after the clean stop {wal_after} bytes; {failed} failed requests: {}",
        reference,
        after.first().map_or(0.0, |s| s.0),
        (lo / reference.max(1e-9) - 1.0) * 100.0,
        (hi / reference.max(1e-9) - 1.0) * 100.0,
        if flat {
            "FLAT (within 10%)"
        } else {
            "NOT FLAT"
        }
    );
    let doc = json!({
        "seconds": seconds,
        "warmup_seconds": warmup,
        "seed_facts": seed_facts,
        "reference_rss_mib": reference,
        "min_rss_mib_after_warmup": lo,
        "max_rss_mib_after_warmup": hi,
        "peak_rss_mib": peak,
        "flat_within_10_percent": flat,
        "wal_bytes_after_clean_stop": wal_after,
        "failed_requests": failed,
        "operations": names.iter().zip(&counts).map(|(n, c)| json!({
            "operation": n,
            "done": c.ok.load(Ordering::Relaxed),
            "failed": c.failed.load(Ordering::Relaxed),
        })).collect::<Vec<_>>(),
        "samples": samples.iter().zip(&in_flight).zip(&sqlite).map(|((s, busy), held)| json!({
            "t": s.0, "rss_mib": s.1, "anon_mib": s.2, "file_mib": s.3,
            "sqlite_heap_mib": held, "in_flight": busy,
        })).collect::<Vec<_>>(),
    });
    if let Some(dir) = json_path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(json_path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    println!("soak: wrote {}", json_path.display());
    flat && failed == 0
}

/// Memories the load added (writes, ingested messages, consolidation's
/// promotions), oldest first: what the forget client takes from.
type Added = Arc<Mutex<VecDeque<String>>>;

/// How many of the newest added memories the forget client leaves alone:
/// about two and a half minutes of adds, so searches, recall and
/// consolidation see fresh memories while the live set stays the same size.
const KEPT_ADDED: usize = 600;

/// The memory id in a write or ingest answer.
fn answer_id(answer: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(answer)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_string))
}

/// Starts every client loop of the load; returns their names, counts and
/// threads (they run until `stop`).
fn start_load(
    addr: std::net::SocketAddr,
    token: &str,
    stop: &Arc<AtomicBool>,
) -> (
    Vec<&'static str>,
    Vec<Arc<Counts>>,
    Vec<std::thread::JoinHandle<()>>,
) {
    let mut names: Vec<&'static str> = Vec::new();
    let mut counts: Vec<Arc<Counts>> = Vec::new();
    let mut threads = Vec::new();
    let added: Added = Arc::default();
    let fresh = Arc::new(corpus::generate(100_000, 1234));
    let queries = Arc::new(corpus::queries(1000, 99));
    let consolidating = Arc::new(Counts::default());
    let mut add = |name: &'static str,
                   path: &'static str,
                   pace_ms: u64,
                   c: Arc<Counts>,
                   body: BodyFn,
                   seen: SeenFn| {
        names.push(name);
        counts.push(Arc::clone(&c));
        threads.push(spawn_loop(
            name,
            addr,
            token.to_string(),
            path,
            Duration::from_millis(pace_ms),
            Arc::clone(stop),
            c,
            body,
            seen,
        ));
    };
    {
        let (fresh, added) = (Arc::clone(&fresh), Arc::clone(&added));
        add(
            "write",
            "/v1/write",
            500,
            Arc::default(),
            Box::new(move |i| {
                let it = &fresh[i as usize % fresh.len()];
                Some(json!({"text": format!("{} #{i}", it.text), "scene": it.scene}).to_string())
            }),
            Box::new(move |answer| added.lock().unwrap().extend(answer_id(answer))),
        );
    }
    {
        let (added, consolidating) = (Arc::clone(&added), Arc::clone(&consolidating));
        add(
            "forget",
            "/v1/forget",
            200,
            Arc::default(),
            Box::new(move |_| {
                // Not while a consolidation runs: it may fold (forget) the
                // same lines; its answer takes them off the list first.
                if consolidating.busy.load(Ordering::Relaxed) {
                    return None;
                }
                let mut a = added.lock().unwrap();
                // The oldest added memory still remembered goes first.
                let id = (a.len() > KEPT_ADDED).then(|| a.pop_front()).flatten();
                id.map(|id| json!({"id": id}).to_string())
            }),
            Box::new(|_| {}),
        );
    }
    {
        let (fresh, added) = (Arc::clone(&fresh), Arc::clone(&added));
        add(
            "ingest",
            "/v1/ingest",
            500,
            Arc::default(),
            Box::new(move |i| {
                let it = &fresh[(i as usize * 7 + 13) % fresh.len()];
                Some(
                    json!({
                        "message_id": format!("m{i}"),
                        "text": it.text,
                        "scene": "qq:group:1",
                        "sender": {"id": format!("u{}", i % 17), "name": "someone"},
                    })
                    .to_string(),
                )
            }),
            Box::new(move |answer| added.lock().unwrap().extend(answer_id(answer))),
        );
    }
    for mode in ["fulltext", "semantic", "hybrid"] {
        let queries = Arc::clone(&queries);
        let name: &'static str = match mode {
            "fulltext" => "search fulltext",
            "semantic" => "search semantic",
            _ => "search hybrid",
        };
        add(
            name,
            "/v1/search",
            50,
            Arc::default(),
            Box::new(move |i| {
                let q = &queries[i as usize % queries.len()];
                Some(json!({"query": q, "limit": 10, "mode": mode}).to_string())
            }),
            Box::new(|_| {}),
        );
    }
    {
        let fresh = Arc::clone(&fresh);
        add(
            "recall",
            "/v1/recall",
            1000,
            Arc::default(),
            Box::new(move |i| {
                let turns: Vec<&str> = (0..4)
                    .map(|k| fresh[(i as usize * 5 + k) % fresh.len()].text.as_str())
                    .collect();
                Some(json!({"messages": turns, "limit": 8, "format": "block"}).to_string())
            }),
            Box::new(|_| {}),
        );
    }
    add(
        "consolidate",
        "/v1/consolidation/run",
        300_000,
        consolidating,
        Box::new(|i| (i > 0).then(|| "{}".to_string())),
        Box::new(move |answer| consolidated(&added, answer)),
    );
    (names, counts, threads)
}

/// A consolidation's answer: what it wrote joins the added memories (the
/// forget client takes it in turn), what it folded leaves them.
fn consolidated(added: &Added, answer: &[u8]) {
    let Ok(report) = serde_json::from_slice::<Value>(answer) else {
        return;
    };
    let ids = |key: &str, field: Option<&str>| -> Vec<String> {
        report[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| field.map_or(v, |f| &v[f]).as_str().map(str::to_string))
            .collect()
    };
    let folded: std::collections::HashSet<String> =
        ids("forgotten", Some("id")).into_iter().collect();
    let mut a = added.lock().unwrap();
    a.retain(|id| !folded.contains(id));
    a.extend(ids("written", None));
}

/// What SQLite holds in the server (`memd_sqlite_heap_bytes` of
/// `/metrics`), in MiB; 0 when the scrape fails.
fn sqlite_heap_mib(client: &mut Client) -> f64 {
    let (status, body) = client.get("/metrics");
    if status != 200 {
        return 0.0;
    }
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("memd_sqlite_heap_bytes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0.0, |b| b / (1024.0 * 1024.0))
}
