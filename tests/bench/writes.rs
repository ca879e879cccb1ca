//! Write latency while hybrid searches run: single acknowledged writes from
//! one client, first alone (the baseline), then while 8 threads search in
//! hybrid mode. Every write leaves a memory pending, so every search finds
//! something to embed: this is the case where searches used to hold the
//! writer for the whole embedding pass.
//!
//! `--writes-embed-ms N` (default 15, about the CPU time of e5-small int8 per
//! short text on one core) adds that much per embedded text to the hash
//! embedder, so the figure shows lock contention without the model
//! installed; `--model real` uses the installed model instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memory_hub::config::{Config, Layout};
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::embed::{EmbedError, Embedder, EmbedderSlot};
use memory_hub::hub::{Hub, Mode, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::model::Scene;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::{Row, corpus, ms, percentile, row};

/// The hash embedder with a fixed cost per text, standing in for a model,
/// once `paying` is set (the seed corpus is embedded for free: at 15 ms a
/// text, a million would take four hours).
struct CostlyEmbedder {
    inner: HashEmbedder,
    per_text: Duration,
    paying: AtomicBool,
}

impl CostlyEmbedder {
    fn pay(&self, texts: usize) {
        if self.paying.load(Ordering::Relaxed) {
            std::thread::sleep(self.per_text * texts as u32);
        }
    }
}

impl Embedder for CostlyEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pay(texts.len());
        self.inner.embed_queries(texts)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pay(texts.len());
        self.inner.embed_passages(texts)
    }
}

/// Write p50/p99 alone and under 8 hybrid readers, on a hub seeded with `n` facts.
pub fn run(n: usize, writes: usize, real: bool, embed_ms: u64) -> Vec<Row> {
    let tmp = tempfile::tempdir().unwrap();
    let costly = Arc::new(CostlyEmbedder {
        inner: HashEmbedder::new(384),
        per_text: Duration::from_millis(embed_ms),
        paying: AtomicBool::new(false),
    });
    let (slot, label) = if real {
        (
            EmbedderSlot::from_config(&Config::default().embedder),
            "e5-small model".to_string(),
        )
    } else {
        (
            EmbedderSlot::ready(Arc::clone(&costly) as Arc<dyn Embedder>),
            format!("hash embedder + {embed_ms} ms per text"),
        )
    };
    let (hub, _) = Hub::open_with(
        Layout::new(tmp.path().join("root")),
        Config::default(),
        Mode::Write,
        slot,
        &mut |_| {},
    )
    .unwrap();
    let items = corpus::generate(n + 2 * writes, 42);
    let (seed, fresh) = items.split_at(n);
    corpus::write_all(&hub, seed);
    hub.embed_pending(usize::MAX);
    costly.paying.store(true, Ordering::Relaxed);
    let queries = corpus::queries(200, 7);
    let write_all = |items: &[corpus::Item]| -> Vec<Duration> {
        let mut out: Vec<Duration> = items
            .iter()
            .map(|i| {
                let req =
                    WriteRequest::new(Scene::parse(i.scene).unwrap(), i.text.clone(), "bench");
                let t = Instant::now();
                hub.append(req).unwrap();
                t.elapsed()
            })
            .collect();
        out.sort();
        out
    };
    let (alone_items, busy_items) = fresh.split_at(writes);
    let alone = write_all(alone_items);
    hub.embed_pending(usize::MAX);
    let stop = AtomicBool::new(false);
    let searches = AtomicUsize::new(0);
    let busy = std::thread::scope(|s| {
        for t in 0..8 {
            let (hub, stop, searches, queries) = (&hub, &stop, &searches, &queries);
            s.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    hub.search_filtered(&SearchRequest {
                        query: queries[i % queries.len()].clone(),
                        filter: Filter::all(),
                        limit: Some(10),
                        mode: Some(SearchMode::Hybrid),
                        min_score: None,
                    })
                    .unwrap();
                    searches.fetch_add(1, Ordering::Relaxed);
                    i += 8;
                }
            });
        }
        let lat = write_all(busy_items);
        stop.store(true, Ordering::Relaxed);
        lat
    });
    let searches = searches.load(Ordering::Relaxed);
    let mut rows = Vec::new();
    for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
        let b = percentile(&busy, p);
        let a = percentile(&alone, p);
        rows.push(row(
            format!("write {name} under 8 hybrid readers ({label}, {searches} searches)"),
            format!("{:.2} ms", ms(b)),
            format!("{:.2} ms with no readers", ms(a)),
            Some(ms(b) / ms(a).max(1e-6)),
        ));
    }
    rows
}
