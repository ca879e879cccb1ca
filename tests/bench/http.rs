//! HTTP search latency (full text and hybrid, concurrency 1 and 8) against the
//! library call it wraps, reindex with a warm vector cache against a text-only
//! reindex, and peak RSS with the embedder loaded.
//!
//! The axum router runs in-process on a loopback port; each client thread
//! holds one keep-alive HTTP/1.1 connection over a plain `TcpStream`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use memory_hub::auth::{self, IssueRequest};
use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::http::AppState;
use memory_hub::hub::{Hub, Mode};
use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::{Row, corpus, ms, percentile, row, timed};

/// Which embedder the hybrid figures use.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The deterministic hashing embedder (scale runs: no model cost).
    Hash,
    /// The configured ONNX model (multilingual-e5-small).
    Real,
}

impl Model {
    fn slot(self) -> EmbedderSlot {
        match self {
            Model::Hash => EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
            Model::Real => EmbedderSlot::from_config(&Config::default().embedder),
        }
    }

    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Model::Hash => "hash embedder",
            Model::Real => "e5-small model",
        }
    }
}

/// One keep-alive HTTP/1.1 connection.
pub struct Client {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
    token: String,
    /// The `Host` header: the loopback address itself (memd refuses other names).
    host: String,
}

impl Client {
    pub fn connect(addr: SocketAddr, token: &str) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            addr,
            reader: BufReader::new(stream),
            token: token.to_string(),
            host: addr.to_string(),
        }
    }

    /// POSTs a JSON body and returns the status and response body.
    pub fn post(&mut self, path: &str, body: &str) -> (u16, Vec<u8>) {
        let req = self.post_request(path, body);
        self.request(&req)
    }

    /// The bytes of a JSON `POST path` with this client's token.
    fn post_request(&self, path: &str, body: &str) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            self.token,
            body.len()
        )
    }

    /// GETs `path` and returns the status and response body.
    pub fn get(&mut self, path: &str) -> (u16, Vec<u8>) {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.host, self.token
        );
        self.request(&req)
    }

    /// Sends `req`; a connection the server closed while it sat idle is
    /// opened again once.
    fn request(&mut self, req: &str) -> (u16, Vec<u8>) {
        self.try_request(req)
            .or_else(|_| {
                *self = Client::connect(self.addr, &self.token);
                self.try_request(req)
            })
            .unwrap_or_else(|e| panic!("HTTP request failed: {e}"))
    }

    /// POSTs a JSON body; an I/O or framing error instead of a panic (the
    /// connection is then unusable: connect again).
    pub fn try_post(&mut self, path: &str, body: &str) -> std::io::Result<(u16, Vec<u8>)> {
        let req = self.post_request(path, body);
        self.try_request(&req)
    }

    fn try_request(&mut self, req: &str) -> std::io::Result<(u16, Vec<u8>)> {
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        self.reader.get_mut().write_all(req.as_bytes())?;
        let mut status = 0;
        let mut length = 0usize;
        let mut chunked = false;
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(bad("connection closed".into()));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if status == 0 {
                status = l
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad(format!("bad status line {l:?}")))?;
            } else if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("bad length {v:?}")))?;
                } else if k.eq_ignore_ascii_case("transfer-encoding")
                    && v.trim().eq_ignore_ascii_case("chunked")
                {
                    chunked = true;
                }
            }
        }
        if !chunked {
            let mut buf = vec![0; length];
            self.reader.read_exact(&mut buf)?;
            return Ok((status, buf));
        }
        let mut buf = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim_end().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk)?;
            if size == 0 {
                return Ok((status, buf));
            }
            buf.extend_from_slice(&chunk[..size]);
        }
    }
}

/// The HTTP, reindex and RSS figures on `n` facts.
pub fn run(n: usize, nq: usize, model: Model) -> Vec<Row> {
    run_with(n, nq, model, false)
}

/// Only the HTTP full-text figures on `n` facts (`--http-fulltext-only`):
/// no embedding, no hybrid, no reindex.
pub fn run_fulltext(n: usize, nq: usize) -> Vec<Row> {
    run_with(n, nq, Model::Hash, true)
}

fn run_with(n: usize, nq: usize, model: Model, fulltext_only: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let rss_before = crate::procfs::own_mib("VmRSS:");
    let items = corpus::generate(n, 42);
    let queries = corpus::queries(nq, 7);
    // The real model embeds every query: fewer hybrid queries keep the run short.
    let hybrid_queries = &queries[..queries.len().min(match model {
        Model::Hash => 1000,
        Model::Real => 200,
    })];
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"));
    let config = Config::default();
    let (hub, _) = Hub::open_with(
        layout.clone(),
        config.clone(),
        Mode::Write,
        model.slot(),
        &mut |_| {},
    )
    .unwrap();
    corpus::write_all(&hub, &items);
    if !fulltext_only {
        let t = Instant::now();
        let embedded = hub.embed_pending(usize::MAX);
        let embed_cold = t.elapsed();
        assert_eq!(embedded as usize, n, "every fact gets a vector");
        rows.push(row(
            format!("embed the corpus, cold cache ({})", model.label()),
            format!("{:.1} s", embed_cold.as_secs_f64()),
            format!("{:.2} ms per fact", ms(embed_cold) / n as f64),
            None,
        ));
    }
    let hub = Arc::new(hub);

    let (_, secret) = auth::issue(
        &layout.tokens(),
        &IssueRequest {
            // The root preset (every scope, admin) plus every scene of the corpus.
            name: "bench".into(),
            preset: Some("dsh-desktop".into()),
            scopes: Vec::new(),
            scenes: corpus::SCENES.iter().map(|s| s.to_string()).collect(),
        },
        chrono::Utc::now(),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(memory_hub::http::serve(
        listener,
        AppState::new(Arc::clone(&hub)),
        async move {
            let _ = stopped.await;
        },
    ));

    let modes: &[(SearchMode, &[String])] = if fulltext_only {
        &[(SearchMode::Fulltext, &queries[..])]
    } else {
        &[
            (SearchMode::Fulltext, &queries[..]),
            (SearchMode::Hybrid, hybrid_queries),
        ]
    };
    for &(mode, qs) in modes {
        let label = match mode {
            SearchMode::Hybrid => format!("hybrid, {}", model.label()),
            _ => "full text".to_string(),
        };
        for threads in [1, 8] {
            let http = timed(
                threads,
                qs,
                || Client::connect(addr, &secret),
                |c, q| {
                    let body = serde_json::json!({"query": q, "limit": 10, "mode": mode.as_str()})
                        .to_string();
                    let (status, _) = c.post("/v1/search", &body);
                    assert_eq!(status, 200);
                },
            );
            let lib = timed(
                threads,
                qs,
                || (),
                |_, q| {
                    hub.search_filtered(&SearchRequest {
                        query: q.into(),
                        filter: Filter::all(),
                        limit: Some(10),
                        mode: Some(mode),
                        min_score: None,
                    })
                    .unwrap();
                },
            );
            for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
                let h = percentile(&http, p);
                let l = percentile(&lib, p);
                rows.push(row(
                    format!("HTTP {label} search {name}, concurrency {threads}"),
                    format!("{:.3} ms", ms(h)),
                    format!("{:.3} ms library call", ms(l)),
                    Some(ms(h) / ms(l).max(1e-6)),
                ));
            }
        }
    }
    let _ = stop.send(());
    rt.block_on(server).unwrap().unwrap();
    drop(rt);
    if fulltext_only {
        return rows;
    }
    let rss_model = crate::procfs::own_mib("VmHWM:");
    drop(hub);

    // Reindex: text only (no embedder) against full reindex with a warm vector cache.
    let t = Instant::now();
    let (h, _) = Hub::reindex_with(
        layout.clone(),
        config.clone(),
        EmbedderSlot::none("text-only baseline"),
        &mut |_| {},
    )
    .unwrap();
    let text_only = t.elapsed();
    drop(h);
    let t = Instant::now();
    let (h, report) = Hub::reindex_with(layout, config, model.slot(), &mut |_| {}).unwrap();
    let warm = t.elapsed();
    assert_eq!(report.vectors_stored as usize, n);
    drop(h);
    rows.push(row(
        format!("reindex with vectors, warm cache ({})", model.label()),
        format!("{:.2} s", warm.as_secs_f64()),
        format!("{:.2} s text-only reindex", text_only.as_secs_f64()),
        Some(warm.as_secs_f64() / text_only.as_secs_f64().max(1e-6)),
    ));
    rows.push(row(
        format!("peak RSS, {} loaded", model.label()),
        format!("{rss_model:.0} MiB"),
        format!("{rss_before:.0} MiB RSS before this size"),
        Some(rss_model / rss_before.max(1e-6)),
    ));
    rows
}
