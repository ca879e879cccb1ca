//! `--asof-only`: what an `as_of` search costs (full text, top 10, the local
//! operator, no embedder) on `--facts N` memories of the seeded corpus, the
//! second half written after the instant asked about:
//!
//! - the first `as_of` read of a process reads every journal line's time
//!   (kept for the next reads);
//! - at the newest instant nothing is later, so the live index answers; the
//!   extra cost is proving it: a stat of each journal file and document, the
//!   journal's line times kept from the first read (beside a plain search);
//! - at the middle instant the first search builds a temporary index of the
//!   journal cut (half the facts), timed once beside a full-text reindex of
//!   the whole root in the same run;
//! - searches at that instant again reuse the kept cut (beside a plain search).

use std::time::{Duration, Instant};

use memory_hub::api::SearchBody;
use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::hub::{Hub, Mode};
use memory_hub::search::SearchMode;

use crate::{Row, corpus, ms, percentile, row};

fn search(hub: &Hub, q: &str, as_of: Option<&str>) {
    let body = SearchBody {
        query: q.into(),
        limit: Some(10),
        mode: Some(SearchMode::Fulltext),
        as_of: as_of.map(str::to_string),
        ..SearchBody::default()
    };
    hub.search(&hub.operator(), body).unwrap();
}

fn p50(queries: &[String], f: impl Fn(&str)) -> f64 {
    let mut out: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            f(q);
            t.elapsed()
        })
        .collect();
    out.sort();
    ms(percentile(&out, 0.5))
}

pub fn run(n: usize, nq: usize) -> Vec<Row> {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path());
    let open = || {
        Hub::open_with(
            layout.clone(),
            Config::default(),
            Mode::Write,
            EmbedderSlot::none("full-text bench"),
            &mut |_| {},
        )
        .unwrap()
        .0
    };
    let hub = open();
    let items = corpus::generate(n, 42);
    corpus::write_all(&hub, &items[..n / 2]);
    std::thread::sleep(Duration::from_millis(5));
    let middle = chrono::Utc::now().to_rfc3339();
    std::thread::sleep(Duration::from_millis(5));
    corpus::write_all(&hub, &items[n / 2..]);
    let queries = corpus::queries(nq.min(200), 7);
    let now = hub.now().to_rfc3339();
    let plain = p50(&queries, |q| search(&hub, q, None));
    let t = Instant::now();
    search(&hub, &queries[0], Some(&now));
    let first = t.elapsed();
    let live = p50(&queries, |q| search(&hub, q, Some(&now)));
    let t = Instant::now();
    search(&hub, &queries[0], Some(&middle));
    let build = t.elapsed();
    let kept = p50(&queries, |q| search(&hub, q, Some(&middle)));
    drop(hub);
    let t = Instant::now();
    drop(
        Hub::reindex_with(
            layout.clone(),
            Config::default(),
            EmbedderSlot::none("bench"),
            &mut |_| {},
        )
        .unwrap(),
    );
    let reindex = t.elapsed();
    vec![
        row(
            "as_of search, the first of the process (reads every journal line's time)",
            format!("{:.1} ms", ms(first)),
            format!("{plain:.2} ms plain search"),
            Some(ms(first) / plain.max(1e-6)),
        ),
        row(
            "as_of search, nothing later (live index, files statted), p50",
            format!("{live:.1} ms"),
            format!("{plain:.2} ms plain search"),
            Some(live / plain.max(1e-6)),
        ),
        row(
            format!("as_of search, first at the middle ({} facts cut)", n / 2),
            format!("{:.2} s", build.as_secs_f64()),
            format!("{:.2} s full-text reindex of {n}", reindex.as_secs_f64()),
            Some(build.as_secs_f64() / reindex.as_secs_f64().max(1e-6)),
        ),
        row(
            "as_of search, the middle again (kept cut), p50",
            format!("{kept:.1} ms"),
            format!("{plain:.2} ms plain search"),
            Some(kept / plain.max(1e-6)),
        ),
    ]
}
