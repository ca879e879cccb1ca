//! Full-text search under visibility filters (`--filtered-only`): what a
//! token scoped to some scenes pays against the unrestricted operator's view.
//! Every real client token is scoped, so this is the common case.
//!
//! Library calls (`Hub::search`, full text, top 10) on one thread; wall and
//! thread-CPU medians, with the all-scenes figure of the same run as baseline.
//!
//! `--root DIR` keeps the corpus in `DIR/<n>` and reuses it on later runs
//! (writing 1M facts takes minutes): the corpus is written only when
//! `DIR/<n>/complete` is missing. An index of another format is rebuilt
//! from the journal when the hub opens, as in production.

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::hub::{Hub, Mode};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::{Privacy, Scene};
use memory_hub::search::{SearchMode, SearchRequest};

use crate::vectors::{both, timed};
use crate::{Row, corpus, ms, row};

pub fn run(n: usize, nq: usize) -> Vec<Row> {
    let items = corpus::generate(n, 42);
    let queries = corpus::queries(nq, 7);
    let tmp = tempfile::tempdir().unwrap();
    let kept = crate::arg("--root").map(|d| std::path::PathBuf::from(d).join(n.to_string()));
    let root = kept.clone().unwrap_or_else(|| tmp.path().join("root"));
    let complete = root.join("complete");
    let (hub, _) = Hub::open_with(
        Layout::new(root),
        Config::default(),
        Mode::Write,
        EmbedderSlot::none("full-text bench"),
        &mut |_| {},
    )
    .unwrap();
    if kept.is_none() || !complete.exists() {
        corpus::write_all(&hub, &items);
        if kept.is_some() {
            hub.index().refresh().unwrap();
            std::fs::write(&complete, b"").unwrap();
        }
    }
    let scenes = |names: &[&str]| names.iter().map(|s| Scene::parse(s).unwrap()).collect();
    let filters = [
        (
            "one scene",
            Filter::scope(Scope {
                scenes: scenes(&["main"]),
                ..Scope::default()
            }),
        ),
        (
            "2 of 5 scenes",
            Filter::scope(Scope {
                scenes: scenes(&["main", "pet"]),
                ..Scope::default()
            }),
        ),
        (
            "a group token (one scene, normal and personal)",
            Filter::scope(Scope {
                scenes: scenes(&["main"]),
                privacy: vec![Privacy::Normal, Privacy::Personal],
                ..Scope::default()
            }),
        ),
    ];
    let search = |filter: &Filter, q: &String| {
        hub.search_filtered(&SearchRequest {
            query: q.clone(),
            filter: filter.clone(),
            limit: Some(10),
            mode: Some(SearchMode::Fulltext),
            min_score: None,
        })
        .unwrap();
    };
    // Warm both the unrestricted and the scoped statistics once.
    for (_, f) in &filters {
        search(f, &queries[0]);
    }
    search(&Filter::all(), &queries[0]);
    let all = timed(&queries, |q| search(&Filter::all(), q));
    let mut rows = Vec::new();
    // The tail's queries: the corpus has few distinct queries, so a slow one
    // sets the p99 by itself. Median wall time of each over its repeats.
    let mut per_query: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for q in &queries {
        let t = std::time::Instant::now();
        search(&Filter::all(), q);
        per_query.entry(q).or_default().push(ms(t.elapsed()));
    }
    let mut medians: Vec<(f64, &str)> = per_query
        .into_iter()
        .map(|(q, mut v)| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], q)
        })
        .collect();
    medians.sort_by(|a, b| b.0.total_cmp(&a.0));
    let typical = medians[medians.len() / 2].0;
    for (t, q) in medians.iter().take(3) {
        rows.push(row(
            format!(
                "full-text search median of one of the slowest queries (library, all scenes): {q:?}"
            ),
            format!("{t:.2} ms"),
            format!("{typical:.2} ms the median query"),
            Some(t / typical.max(1e-6)),
        ));
    }
    for (name, filter) in &filters {
        let t = timed(&queries, |q| search(filter, q));
        rows.push(row(
            format!("full-text search p50 (library), {name}"),
            both(t),
            format!("{} all scenes", both(all)),
            Some(ms(t.1) / ms(all.1).max(1e-6)),
        ));
    }
    rows
}
