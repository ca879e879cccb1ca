//! Full-text latency by kind of query (`--kinds-only`): the library call
//! (`Hub::search_filtered`, full text, top 10, every scene) on `--facts N`
//! memories of the seeded corpus, for short queries in either language,
//! Chinese natural-language questions (the cross-lingual pass's input) and
//! long one-line queries of about 1,900 characters; each beside SQLite FTS5
//! over the same bigram terms, in the same run; then the same queries in
//! hybrid mode with the hash embedder (no model cost: the full-text side of
//! hybrid search, which always runs the cross-lingual pass, and the fusion).
//! `--repeat R` runs each set R times, `--kind WORD` keeps the kinds whose label holds it (for a
//! profiler).

use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::hub::{Hub, Mode};
use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::{Row, baseline, corpus, ms, percentile, row};

fn search(hub: &Hub, mode: SearchMode, q: &str) {
    hub.search_filtered(&SearchRequest {
        query: q.into(),
        filter: Filter::all(),
        limit: Some(10),
        mode: Some(mode),
        min_score: None,
    })
    .unwrap();
}

fn timed(queries: &[String], repeat: usize, f: impl Fn(&str)) -> Vec<Duration> {
    let mut out = Vec::with_capacity(queries.len() * repeat);
    for _ in 0..repeat {
        for q in queries {
            let t = Instant::now();
            f(q);
            out.push(t.elapsed());
        }
    }
    out.sort();
    out
}

/// The rows: p50 / p95 per kind of query, memd against FTS5.
/// `only` keeps the kinds whose label holds it (e.g. `Chinese`).
pub fn run(n: usize, nq: usize, repeat: usize, only: Option<&str>) -> Vec<Row> {
    let items = corpus::generate(n, 42);
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"));
    let (hub, _) = Hub::open_with(
        layout,
        Config::default(),
        Mode::Write,
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap();
    corpus::write_all(&hub, &items);
    hub.embed_pending(usize::MAX);
    let texts: Vec<String> = items.iter().map(|i| i.text.clone()).collect();
    let fts = baseline::Fts5::build(&tmp.path().join("fts5.db"), &texts);
    let kinds: Vec<(&str, Vec<String>)> = vec![
        ("short queries", corpus::queries(nq, 7)),
        ("Chinese questions", corpus::zh_questions(nq.min(300))),
        ("~1,900-character queries", corpus::long_queries(&items, 12)),
    ]
    .into_iter()
    .filter(|(label, _)| only.is_none_or(|o| label.contains(o)))
    .collect();
    let mut rows = Vec::new();
    for (label, queries) in &kinds {
        // Warm up: the lexicon, the searchers, the page cache.
        for q in queries.iter().take(5) {
            search(&hub, SearchMode::Fulltext, q);
        }
        let memd = timed(queries, repeat, |q| search(&hub, SearchMode::Fulltext, q));
        let base = timed(queries, 1, |q| {
            fts.search(q);
        });
        let (m50, m95) = (ms(percentile(&memd, 0.5)), ms(percentile(&memd, 0.95)));
        let (b50, b95) = (ms(percentile(&base, 0.5)), ms(percentile(&base, 0.95)));
        rows.push(row(
            format!("full-text p50 / p95, {label} ({}), library", queries.len()),
            format!("{m50:.3} / {m95:.3} ms"),
            format!("{b50:.3} / {b95:.3} ms FTS5 bigram"),
            Some(m50 / b50.max(1e-6)),
        ));
    }
    for (label, queries) in &kinds {
        let memd = timed(queries, repeat, |q| search(&hub, SearchMode::Hybrid, q));
        let (m50, m95) = (ms(percentile(&memd, 0.5)), ms(percentile(&memd, 0.95)));
        rows.push(row(
            format!("hybrid p50 / p95, {label}, hash embedder, library"),
            format!("{m50:.3} / {m95:.3} ms"),
            "—".into(),
            None,
        ));
    }
    rows
}
