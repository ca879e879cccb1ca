//! Full-text latency by kind of query (`--kinds-only`): the library call
//! (`Hub::search_filtered`, full text, top 10, every scene) on `--facts N`
//! memories of the seeded corpus, for short queries in either language,
//! Chinese natural-language questions (the cross-lingual pass's input),
//! seven-turn dialogues (a chat bridge's recall) and long one-line queries of about 1,900 characters; each beside SQLite FTS5
//! over the same bigram terms, in the same run; then the same queries in
//! hybrid mode with the hash embedder (no model cost: the full-text side of
//! hybrid search, which always runs the cross-lingual pass, and the fusion).
//! `--repeat R` runs each set R times, `--kind WORD` keeps the kinds whose label holds it (for a
//! profiler). The performance table (`--table`) ends with the full-text rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::hub::{Hub, Mode};
use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::issue::Goal;
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

/// One kind of query measured: p50 and p95 in milliseconds.
struct Measured {
    label: &'static str,
    key: &'static str,
    queries: usize,
    fulltext: (f64, f64),
    fts5: (f64, f64),
    hybrid: (f64, f64),
}

fn p50_p95(v: &[Duration]) -> (f64, f64) {
    (ms(percentile(v, 0.5)), ms(percentile(v, 0.95)))
}

/// Measures each kind whose label holds `only` (all without it).
fn measure(n: usize, nq: usize, repeat: usize, only: Option<&str>) -> Vec<Measured> {
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
    let kinds: Vec<(&str, &str, Vec<String>)> = vec![
        ("short queries", "short", corpus::queries(nq, 7)),
        (
            "Chinese questions",
            "zh_questions",
            corpus::zh_questions(nq.min(300)),
        ),
        (
            "seven-turn dialogues",
            "dialogues",
            corpus::dialogues(&items, nq.min(100)),
        ),
        (
            "~1,900-character queries",
            "long",
            corpus::long_queries(&items, 12),
        ),
    ]
    .into_iter()
    .filter(|(label, _, _)| only.is_none_or(|o| label.contains(o)))
    .collect();
    kinds
        .into_iter()
        .map(|(label, key, queries)| {
            // Warm up: the lexicon, the searchers, the page cache.
            for q in queries.iter().take(5) {
                search(&hub, SearchMode::Fulltext, q);
            }
            let fulltext = timed(&queries, repeat, |q| search(&hub, SearchMode::Fulltext, q));
            let fts5 = timed(&queries, 1, |q| {
                fts.search(q);
            });
            let hybrid = timed(&queries, repeat, |q| search(&hub, SearchMode::Hybrid, q));
            Measured {
                label,
                key,
                queries: queries.len(),
                fulltext: p50_p95(&fulltext),
                fts5: p50_p95(&fts5),
                hybrid: p50_p95(&hybrid),
            }
        })
        .collect()
}

/// The rows: p50 / p95 per kind of query, memd against FTS5.
/// `only` keeps the kinds whose label holds it (e.g. `Chinese`).
pub fn run(n: usize, nq: usize, repeat: usize, only: Option<&str>) -> Vec<Row> {
    let measured = measure(n, nq, repeat, only);
    let mut rows: Vec<Row> = measured
        .iter()
        .map(|m| {
            let ((m50, m95), (b50, b95)) = (m.fulltext, m.fts5);
            row(
                format!("full-text p50 / p95, {} ({}), library", m.label, m.queries),
                format!("{m50:.3} / {m95:.3} ms"),
                format!("{b50:.3} / {b95:.3} ms FTS5 bigram"),
                Some(m50 / b50.max(1e-6)),
            )
        })
        .collect();
    rows.extend(measured.iter().map(|m| {
        let (h50, h95) = m.hybrid;
        row(
            format!("hybrid p50 / p95, {}, hash embedder, library", m.label),
            format!("{h50:.3} / {h95:.3} ms"),
            "—".into(),
            None,
        )
    }));
    rows
}

/// The full-text rows of the performance table (`--table`): informative,
/// the library call beside FTS5 for each kind of query.
pub fn table(n: usize, nq: usize) -> Vec<Goal> {
    measure(n, nq, 1, None)
        .into_iter()
        .map(|m| {
            let ((m50, m95), (b50, b95)) = (m.fulltext, m.fts5);
            Goal {
                key: match m.key {
                    "short" => "kinds_fulltext_short_p50_ms",
                    "zh_questions" => "kinds_fulltext_zh_questions_p50_ms",
                    "dialogues" => "kinds_fulltext_dialogues_p50_ms",
                    _ => "kinds_fulltext_long_p50_ms",
                },
                figure: format!(
                    "full-text p50 / p95 by kind, {} ({}), library call, {n}",
                    m.label, m.queries
                ),
                value: format!("{m50:.2} / {m95:.2} ms ({:.1}× FTS5)", m50 / b50.max(1e-6)),
                number: m50,
                unit: "ms",
                baseline: format!("{b50:.2} / {b95:.2} ms FTS5 bigram"),
                goal: "—".into(),
                met: None,
            }
        })
        .collect()
}
