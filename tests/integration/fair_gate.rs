//! The fair search gate under the starvation scenario: one token runs six
//! threads of 2,000-character hybrid searches while another token's short
//! searches are timed, idle and then under that load, over loopback against
//! the in-process server with the real embedding model. The short searches'
//! median under load must stay within 3× their idle median (a ratio within
//! one run, idle and loaded phases alternated: absolute times depend on the
//! machine and on what else runs on it). The refusal of a full queue is in
//! `search_gate.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use memory_hub::auth::{self, IssueRequest};
use memory_hub::config::Config;
use memory_hub::hub::{Hub, Mode};
use serde_json::{Value, json};

use crate::support::{TempRoot, write};

/// Memories in the root.
const MEMORIES: usize = 2000;
/// Short searches timed idle and again under load (over all rounds).
const SHORT_SEARCHES: usize = 40;
/// Threads of the heavy token.
const HEAVY_THREADS: usize = 6;
/// Idle and loaded phases, alternated.
const ROUNDS: usize = 4;

/// What the heavy token's threads do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Paused,
    Running,
    Done,
}

const SUBJECTS: &[&str] = &[
    "Anna",
    "the landlord",
    "my sister",
    "the dentist",
    "Tom",
    "the plumber",
    "grandma",
    "the team lead",
    "Lucas",
    "the neighbour",
];
const VERBS: &[&str] = &[
    "booked",
    "cancelled",
    "asked about",
    "paid for",
    "forgot",
    "moved",
    "recommended",
    "returned",
    "planned",
    "complained about",
];
const OBJECTS: &[&str] = &[
    "the piano lesson",
    "a train ticket to Lyon",
    "the quarterly invoice",
    "the garden fence",
    "a birthday cake",
    "the violin repair",
    "the harbour tour",
    "a yoga class",
    "the car insurance",
    "the orchard visit",
    "a lantern festival trip",
    "the canyon hike",
];
const WHEN: &[&str] = &[
    "on Monday",
    "last week",
    "before the holidays",
    "in March",
    "after work",
    "on the weekend",
    "yesterday",
];

/// A deterministic pseudo-random sequence (no seed file, no dependency).
struct Lcg(u64);

impl Lcg {
    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        list[((self.0 >> 33) as usize) % list.len()]
    }
}

fn sentence(rng: &mut Lcg, i: usize) -> String {
    format!(
        "{} {} {} {} (note {i})",
        rng.pick(SUBJECTS),
        rng.pick(VERBS),
        rng.pick(OBJECTS),
        rng.pick(WHEN)
    )
}

/// A query of about 1,950 characters on one line (under the 2,000 limit),
/// so the whole of it is embedded (the model reads its first 512 tokens).
fn long_query(rng: &mut Lcg, k: usize) -> String {
    let mut q = String::new();
    let mut i = k * 1000;
    loop {
        let s = sentence(rng, i);
        if q.chars().count() + s.chars().count() + 1 > 1950 {
            return q;
        }
        q.push_str(&s);
        q.push(' ');
        i += 1;
    }
}

/// A short question: an object and a subject.
fn short_query(rng: &mut Lcg) -> String {
    format!("{} {}", rng.pick(OBJECTS), rng.pick(SUBJECTS))
}

/// A keep-alive HTTP/1.1 connection to the server.
pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
    addr: String,
    token: String,
}

/// A reply: status, headers (lowercase names) and JSON body.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Conn {
    pub(crate) fn open(addr: &str, token: &str) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(stream),
            addr: addr.to_string(),
            token: token.to_string(),
        }
    }

    pub(crate) fn post(&mut self, path: &str, body: &Value) -> Reply {
        let (status, headers, raw) = self.request("POST", path, &body.to_string());
        Reply {
            status,
            headers,
            body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
        }
    }

    /// `GET path`: the status and the body as text.
    pub(crate) fn get_text(&mut self, path: &str) -> (u16, String) {
        let (status, _, raw) = self.request("GET", path, "");
        (status, String::from_utf8(raw).expect("a text body"))
    }

    fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            self.token,
            body.len()
        );
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).unwrap();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').expect("a header line");
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut raw = vec![0u8; len];
        self.reader.read_exact(&mut raw).unwrap();
        (status, headers, raw)
    }
}

/// Issues a token of `preset` named `name` and returns its secret.
pub(crate) fn issue(root: &TempRoot, name: &str, preset: &str) -> String {
    auth::issue(
        &root.layout().tokens(),
        &IssueRequest {
            name: name.into(),
            preset: Some(preset.into()),
            ..Default::default()
        },
        chrono::Utc::now(),
    )
    .unwrap()
    .1
}

/// The `/v1` API of `hub` served in process on a loopback port; stops when
/// the returned runtime is dropped.
pub(crate) fn serve(hub: Arc<Hub>) -> (tokio::runtime::Runtime, String) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    rt.spawn(memory_hub::http::serve(
        listener,
        memory_hub::http::AppState::new(hub),
        std::future::pending(),
    ));
    (rt, addr)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Times each search of `queries` from one connection (all must succeed).
fn timed(conn: &mut Conn, queries: &[String]) -> Vec<Duration> {
    queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            let r = conn.post(
                "/v1/search",
                &json!({"query": q, "mode": "hybrid", "limit": 10}),
            );
            let took = t.elapsed();
            assert_eq!(r.status, 200, "{}", r.body);
            assert!(!r.body["hits"].as_array().unwrap().is_empty(), "{q}");
            took
        })
        .collect()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn a_token_with_six_threads_of_long_hybrid_searches_slows_only_itself() {
    let root = TempRoot::new();
    let hub = Arc::new(Hub::open(root.layout(), Config::default(), Mode::Write).expect("open hub"));
    let mut rng = Lcg(7);
    for i in 0..MEMORIES {
        write(&hub, "main", &sentence(&mut rng, i));
    }
    hub.embed_pending(usize::MAX);
    let owner = issue(&root, "owner", "dsh-desktop");
    let heavy = issue(&root, "heavy", "dsh-desktop");
    let (_rt, addr) = serve(Arc::clone(&hub));

    let short: Vec<String> = (0..SHORT_SEARCHES).map(|_| short_query(&mut rng)).collect();
    let long: Vec<String> = (0..12).map(|k| long_query(&mut rng, k)).collect();
    let mut conn = Conn::open(&addr, &owner);
    // Warm up (the model, the indexes' caches).
    timed(&mut conn, &short[..10]);

    // The heavy token's threads run while `load` says so, and park between.
    let load = Arc::new((Mutex::new(Phase::Paused), Condvar::new()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let heavy_done = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..HEAVY_THREADS)
        .map(|t| {
            let (addr, heavy, long) = (addr.clone(), heavy.clone(), long.clone());
            let (load, in_flight) = (load.clone(), in_flight.clone());
            let (done, refused) = (heavy_done.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr, &heavy);
                let mut i = t;
                loop {
                    {
                        let (phase, changed) = &*load;
                        let mut phase = phase.lock().unwrap();
                        while *phase == Phase::Paused {
                            phase = changed.wait(phase).unwrap();
                        }
                        if *phase == Phase::Done {
                            return;
                        }
                        in_flight.fetch_add(1, Ordering::SeqCst);
                    }
                    let q = &long[i % long.len()];
                    let r = conn.post(
                        "/v1/search",
                        &json!({"query": q, "mode": "hybrid", "limit": 10}),
                    );
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    match r.status {
                        200 => done.fetch_add(1, Ordering::SeqCst),
                        429 => refused.fetch_add(1, Ordering::SeqCst),
                        other => panic!("heavy search: {other} {}", r.body),
                    };
                    i += HEAVY_THREADS;
                }
            })
        })
        .collect();
    let set = |p: Phase| {
        *load.0.lock().unwrap() = p;
        load.1.notify_all();
    };

    // Idle and loaded phases alternate, so that other work on the machine
    // weighs on both alike; the medians are over all rounds.
    let per_round = SHORT_SEARCHES / ROUNDS;
    let (mut idle, mut loaded) = (Vec::new(), Vec::new());
    let mut during = 0;
    for round in 0..ROUNDS {
        let qs = &short[round * per_round..(round + 1) * per_round];
        // Idle: no heavy search in flight.
        set(Phase::Paused);
        let deadline = Instant::now() + Duration::from_secs(120);
        while in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            in_flight.load(Ordering::SeqCst),
            0,
            "the heavy load drained"
        );
        idle.extend(timed(&mut conn, qs));
        // Loaded: once the heavy token has finished two more searches.
        let before = heavy_done.load(Ordering::SeqCst);
        set(Phase::Running);
        let deadline = Instant::now() + Duration::from_secs(120);
        while heavy_done.load(Ordering::SeqCst) < before + 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            heavy_done.load(Ordering::SeqCst) >= before + 2,
            "the heavy token made progress"
        );
        let start = heavy_done.load(Ordering::SeqCst);
        loaded.extend(timed(&mut conn, qs));
        during += heavy_done.load(Ordering::SeqCst) - start;
    }
    set(Phase::Done);
    for t in threads {
        t.join().unwrap();
    }
    let (idle, loaded) = (median(idle), median(loaded));
    let ratio = loaded.as_secs_f64() / idle.as_secs_f64();
    eprintln!(
        "owner median idle {:.1} ms, under load {:.1} ms ({ratio:.2}×); heavy searches done \
         while the owner was timed: {during}, refused: {}",
        idle.as_secs_f64() * 1e3,
        loaded.as_secs_f64() * 1e3,
        refused.load(Ordering::SeqCst)
    );
    assert!(
        ratio <= 3.0,
        "the owner's median went from {idle:?} idle to {loaded:?} under the heavy token's load"
    );
}
