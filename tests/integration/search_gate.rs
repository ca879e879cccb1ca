//! The search gate (about one search per core, the others queued in arrival
//! order): concurrent searches all complete with the results of serial ones,
//! and a write completes while searches hold the gate and others wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memory_hub::config::Config;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::embed::{EmbedError, Embedder};
use memory_hub::hub::Hub;
use memory_hub::search::SearchMode;

use crate::fair_gate::{Conn, issue, serve};
use crate::support::{Gate, TempRoot, search_ids, search_ids_in, write};

const WORDS: &[&str] = &[
    "river", "garden", "invoice", "piano", "harbour", "lantern", "meadow", "orchard", "violin",
    "canyon", "ledger", "compass",
];

/// Sixty facts over a dozen words, two or three words each.
fn fill(hub: &Hub) {
    for i in 0..60 {
        let a = WORDS[i % WORDS.len()];
        let b = WORDS[(i * 5 + 3) % WORDS.len()];
        let c = WORDS[(i * 7 + 1) % WORDS.len()];
        let text = if i % 3 == 0 {
            format!("note {i}: the {a} near the {b}")
        } else {
            format!("note {i}: {a} {b} {c}")
        };
        write(hub, "main", &text);
    }
}

fn queries() -> Vec<String> {
    let mut qs: Vec<String> = WORDS.iter().map(|w| w.to_string()).collect();
    qs.extend(
        WORDS
            .windows(2)
            .map(|w| format!("{} {}", w[0], w[1]))
            .collect::<Vec<_>>(),
    );
    qs
}

#[test]
fn concurrent_searches_return_what_serial_ones_do() {
    let root = TempRoot::new();
    let hub = Arc::new(root.hub());
    fill(&hub);
    hub.embed_pending(usize::MAX);
    let qs = queries();
    let modes = [SearchMode::Fulltext, SearchMode::Hybrid];
    let serial: Vec<Vec<Vec<String>>> = modes
        .iter()
        .map(|&m| qs.iter().map(|q| search_ids_in(&hub, q, 10, m)).collect())
        .collect();
    assert!(serial[0].iter().all(|ids| !ids.is_empty()));
    // 16 threads (well above the cores of any test machine), every query in
    // both modes, each thread starting at another query.
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (hub, qs) = (Arc::clone(&hub), qs.clone());
            std::thread::spawn(move || {
                let mut got = vec![vec![Vec::new(); qs.len()]; modes.len()];
                for k in 0..qs.len() {
                    let q = (k + t) % qs.len();
                    for (m, &mode) in modes.iter().enumerate() {
                        got[m][q] = search_ids_in(&hub, &qs[q], 10, mode);
                    }
                }
                got
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), serial);
    }
}

/// The hash embedder, whose query embedding waits until the test opens it:
/// a hybrid search embedding its query is a search holding the gate.
struct HeldQueries {
    inner: HashEmbedder,
    gate: Gate,
    inside: AtomicUsize,
    most_inside: AtomicUsize,
    entered: AtomicUsize,
}

impl HeldQueries {
    fn release(&self) {
        self.gate.open();
    }
}

impl Embedder for HeldQueries {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_inside.fetch_max(now, Ordering::SeqCst);
        self.entered.fetch_add(1, Ordering::SeqCst);
        self.gate.pass();
        self.inside.fetch_sub(1, Ordering::SeqCst);
        self.inner.embed_queries(texts)
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_passages(texts)
    }
}

impl HeldQueries {
    /// The hash embedder behind a closed gate, with no search inside yet.
    fn closed() -> Arc<HeldQueries> {
        Arc::new(HeldQueries {
            inner: HashEmbedder::new(384),
            gate: Gate::new(false),
            inside: AtomicUsize::new(0),
            most_inside: AtomicUsize::new(0),
            entered: AtomicUsize::new(0),
        })
    }
}

#[test]
fn a_write_completes_while_searches_hold_the_gate() {
    let root = TempRoot::new();
    let embedder = HeldQueries::closed();
    let hub = Arc::new(root.hub_with(embedder.clone()));
    fill(&hub);
    hub.embed_pending(usize::MAX);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // In-process searches share one queue, which holds all permits but one
    // (at least one): they are taken and three more searches queue behind.
    let inside = (cores - 1).max(1);
    let searches: Vec<_> = (0..inside + 3)
        .map(|i| {
            let hub = Arc::clone(&hub);
            std::thread::spawn(move || {
                search_ids_in(&hub, WORDS[i % WORDS.len()], 5, SearchMode::Hybrid)
            })
        })
        .collect();
    while embedder.entered.load(Ordering::SeqCst) < inside {
        std::thread::yield_now();
    }
    // The gate holds the rest back.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(embedder.entered.load(Ordering::SeqCst), inside);

    // A write neither waits for the searches in nor for those queued; it is
    // acknowledged and durable now (a hang here is the failure).
    let id = write(&hub, "main", "the lighthouse keeper logs the storm");
    assert_eq!(root.journal_lines().len(), 61);
    assert_eq!(embedder.entered.load(Ordering::SeqCst), inside);

    embedder.release();
    for s in searches {
        assert!(!s.join().unwrap().is_empty());
    }
    assert_eq!(embedder.entered.load(Ordering::SeqCst), inside + 3);
    assert!(embedder.most_inside.load(Ordering::SeqCst) <= inside);
    assert_eq!(search_ids(&hub, "lighthouse", 5), vec![id]);
}

#[test]
fn a_token_whose_queue_is_full_gets_429_and_another_token_is_served() {
    let root = TempRoot::new();
    let embedder = HeldQueries::closed();
    let config: Config = serde_json::from_value(serde_json::json!({
        "searchGate": {"concurrencyPerToken": 1, "queuePerToken": 2}
    }))
    .unwrap();
    let hub = Arc::new(root.hub_configured_with(config, embedder.clone()));
    fill(&hub);
    hub.embed_pending(usize::MAX);
    let busy = issue(&root, "busy", "dsh-desktop");
    let other = issue(&root, "other", "dsh-desktop");
    let (_rt, addr) = serve(Arc::clone(&hub));
    let hybrid = |q: &str| serde_json::json!({"query": q, "mode": "hybrid", "limit": 5});

    // busy's first search holds its one permit (embedding its query, held
    // open by the test); its next two wait in its queue.
    let mut held = Vec::new();
    for (i, word) in WORDS.iter().take(3).enumerate() {
        let (addr, busy) = (addr.clone(), busy.clone());
        let body = hybrid(word);
        held.push(std::thread::spawn(move || {
            Conn::open(&addr, &busy).post("/v1/search", &body).status
        }));
        // Each in turn: the first holds the permit, then one more waits.
        while hub.search_gate_load() != (1, i) {
            std::thread::yield_now();
        }
    }
    // busy's queue holds two: its next search is refused at once.
    let mut conn = Conn::open(&addr, &busy);
    let refused = conn.post("/v1/search", &hybrid("river"));
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "RATE_LIMITED");
    assert_eq!(refused.body["error"]["retryable"], true);
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!(wait >= 1, "{wait}");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"busy\""),
        "{}",
        refused.body
    );

    // Another token is not refused; with a second core it is served at once
    // (a full-text search, while busy's hybrid searches are held).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (a, o) = (addr.clone(), other.clone());
    let others = std::thread::spawn(move || {
        let mut c = Conn::open(&a, &o);
        (0..5)
            .map(|_| {
                c.post(
                    "/v1/search",
                    &serde_json::json!({"query": "garden", "mode": "fulltext"}),
                )
                .status
            })
            .collect::<Vec<u16>>()
    });
    if cores >= 2 {
        assert_eq!(others.join().unwrap(), vec![200; 5]);
        embedder.release();
    } else {
        embedder.release();
        assert_eq!(others.join().unwrap(), vec![200; 5]);
    }
    for h in held {
        assert_eq!(h.join().unwrap(), 200);
    }
    // busy's searches ran one at a time, and its queue takes searches again.
    assert_eq!(embedder.most_inside.load(Ordering::SeqCst), 1);
    assert_eq!(conn.post("/v1/search", &hybrid("river")).status, 200);
}

/// The number of requests `/metrics` says were refused with `RATE_LIMITED`.
fn rate_limited_total(addr: &str, admin: &str) -> u64 {
    let (status, text) = Conn::open(addr, admin).get_text("/metrics");
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("memd_rate_limited_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no memd_rate_limited_total in {text}"))
}

#[test]
fn searches_the_gate_refuses_are_counted_as_rate_limited() {
    let root = TempRoot::new();
    let embedder = HeldQueries::closed();
    let config: Config = serde_json::from_value(serde_json::json!({
        "searchGate": {"concurrencyPerToken": 1, "queuePerToken": 1}
    }))
    .unwrap();
    let hub = Arc::new(root.hub_configured_with(config, embedder.clone()));
    fill(&hub);
    hub.embed_pending(usize::MAX);
    let busy = issue(&root, "busy", "dsh-desktop");
    let admin = issue(&root, "admin", "dsh-desktop");
    let (_rt, addr) = serve(Arc::clone(&hub));
    let hybrid = |q: &str| serde_json::json!({"query": q, "mode": "hybrid", "limit": 5});
    assert_eq!(rate_limited_total(&addr, &admin), 0);

    // busy's first search holds its permit (its query's embedding held
    // open), its second waits in its queue of one.
    let mut held = Vec::new();
    for (i, word) in WORDS.iter().take(2).enumerate() {
        let (addr, busy) = (addr.clone(), busy.clone());
        let body = hybrid(word);
        held.push(std::thread::spawn(move || {
            Conn::open(&addr, &busy).post("/v1/search", &body).status
        }));
        while hub.search_gate_load() != (1, i) {
            std::thread::yield_now();
        }
    }
    // Its next two are refused at once, and counted.
    let mut conn = Conn::open(&addr, &busy);
    for word in ["river", "garden"] {
        let refused = conn.post("/v1/search", &hybrid(word));
        assert_eq!(refused.status, 429, "{}", refused.body);
        assert_eq!(refused.body["error"]["code"], "RATE_LIMITED");
    }
    assert_eq!(rate_limited_total(&addr, &admin), 2);

    embedder.release();
    for h in held {
        assert_eq!(h.join().unwrap(), 200);
    }
    // Searches served are not refusals.
    assert_eq!(conn.post("/v1/search", &hybrid("river")).status, 200);
    assert_eq!(rate_limited_total(&addr, &admin), 2);
}

/// The `as_of` index directories under `data/tmp/`.
fn cut_dirs(root: &TempRoot) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.path().join("data/tmp")) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("asof-"))
        .collect();
    out.sort();
    out
}

#[test]
fn an_as_of_build_waits_in_its_callers_queue() {
    let root = TempRoot::new();
    let embedder = HeldQueries::closed();
    let config: Config = serde_json::from_value(serde_json::json!({
        "searchGate": {"concurrencyPerToken": 1, "queuePerToken": 1}
    }))
    .unwrap();
    let hub = Arc::new(root.hub_configured_with(config, embedder.clone()));
    fill(&hub);
    hub.embed_pending(usize::MAX);
    let busy = issue(&root, "busy", "dsh-desktop");
    let other = issue(&root, "other", "dsh-desktop");
    let (_rt, addr) = serve(Arc::clone(&hub));
    let hybrid = |q: &str| serde_json::json!({"query": q, "mode": "hybrid", "limit": 5});
    // Before every write: an instant whose index must be built.
    let past = serde_json::json!({"query": "garden", "mode": "fulltext", "as_of": "2020-01-01"});

    // busy's first search holds its one permit, its second waits.
    let mut held = Vec::new();
    for (i, word) in WORDS.iter().take(2).enumerate() {
        let (addr, busy) = (addr.clone(), busy.clone());
        let body = hybrid(word);
        held.push(std::thread::spawn(move || {
            Conn::open(&addr, &busy).post("/v1/search", &body).status
        }));
        while hub.search_gate_load() != (1, i) {
            std::thread::yield_now();
        }
    }
    // Building the index of a past instant is busy's work too: with its
    // queue full it is refused at once, and nothing is built.
    let mut conn = Conn::open(&addr, &busy);
    let refused = conn.post("/v1/search", &past);
    let built = cut_dirs(&root);

    // Another token's read of that instant is served.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (a, o, body) = (addr.clone(), other.clone(), past.clone());
    let others = std::thread::spawn(move || Conn::open(&a, &o).post("/v1/search", &body).status);
    if cores >= 2 {
        assert_eq!(others.join().unwrap(), 200);
        embedder.release();
    } else {
        embedder.release();
        assert_eq!(others.join().unwrap(), 200);
    }
    for h in held {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "RATE_LIMITED");
    assert!(built.is_empty(), "{built:?}");
    assert_eq!(conn.post("/v1/search", &past).status, 200);
    assert_eq!(cut_dirs(&root).len(), 1, "{:?}", cut_dirs(&root));
}
