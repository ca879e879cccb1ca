//! Retrieval quality on the peers' synthetic notes (`--quality-only`):
//! recall@5 of memd's full-text and hybrid search per query kind
//! (`peers.rs`: Chinese questions, English questions, invented words),
//! against SQLite FTS5 over the same bigram terms in the same run.
//!
//! Hybrid runs with the installed e5 model up to 10k notes (`--model auto`)
//! and with the hash embedder above. Searches run with the relevance
//! decision off, so that recall measures ranking alone, and again with the
//! default decision on (what a client gets).

use std::collections::BTreeMap;
use std::sync::Arc;

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::hub::{Hub, Mode, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::model::Scene;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::{Row, baseline, peers, row};

/// Recall@5 per query kind (and `all`) of a ranking function.
fn recall(
    queries: &[peers::Query],
    mut top5: impl FnMut(&str) -> Vec<usize>,
) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for q in queries {
        let hits = top5(&q.text);
        let found =
            q.relevant.iter().filter(|i| hits.contains(i)).count() as f64 / q.relevant.len() as f64;
        for key in [q.kind.to_string(), "all".into()] {
            let e = sums.entry(key).or_default();
            e.0 += found;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .collect()
}

fn fmt(r: &BTreeMap<String, f64>) -> String {
    format!(
        "{:.3} (zh {:.3}, en {:.3}, invented {:.3})",
        r["all"],
        r.get("zh").copied().unwrap_or(0.0),
        r.get("en").copied().unwrap_or(0.0),
        r.get("invented").copied().unwrap_or(0.0)
    )
}

pub fn run(n: usize, nq: usize, real_model: bool) -> Vec<Row> {
    let per_kind = (nq / 3).max(1);
    let (notes, queries) = peers::generate(n, per_kind, 5);
    let tmp = tempfile::tempdir().unwrap();
    let slot = if real_model {
        EmbedderSlot::from_config(&Config::default().embedder)
    } else {
        EmbedderSlot::ready(Arc::new(memory_hub::embed::hash::HashEmbedder::new(384)))
    };
    let (hub, _) = Hub::open_with(
        Layout::new(tmp.path().join("root")),
        Config::default(),
        Mode::Write,
        slot,
        &mut |_| {},
    )
    .unwrap();
    let mut ids: Vec<String> = Vec::with_capacity(n);
    for chunk in notes.chunks(1000) {
        let reqs = chunk
            .iter()
            .map(|note| {
                WriteRequest::new(Scene::parse("main").unwrap(), note.text.clone(), "bench")
            })
            .collect();
        ids.extend(
            hub.append_batch(reqs)
                .unwrap()
                .into_iter()
                .map(|r| r.unwrap().id),
        );
    }
    let index_of: std::collections::HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let memd = |mode: SearchMode, min_score: Option<f32>| {
        recall(&queries, |q| {
            hub.search_filtered(&SearchRequest {
                query: q.into(),
                filter: Filter::all(),
                limit: Some(5),
                mode: Some(mode),
                min_score,
            })
            .unwrap()
            .hits
            .iter()
            .filter_map(|h| index_of.get(h.memory.id.as_str()).copied())
            .collect()
        })
    };
    let texts: Vec<String> = notes.iter().map(|n| n.text.clone()).collect();
    let fts = baseline::Fts5::build(&tmp.path().join("fts5.db"), &texts);
    let fts5 = recall(&queries, |q| fts.top(q, 5));
    let model = if real_model {
        "e5-small"
    } else {
        "hash embedder"
    };
    let mut rows = Vec::new();
    for (mode, label) in [
        (SearchMode::Fulltext, "full text".to_string()),
        (SearchMode::Hybrid, format!("hybrid ({model})")),
    ] {
        let off = memd(mode, Some(0.0));
        let on = memd(mode, None);
        rows.push(row(
            format!("peers recall@5, {label}, {} queries", queries.len()),
            fmt(&off),
            format!("{} FTS5 bigrams", fmt(&fts5)),
            Some(off["all"] / fts5["all"].max(1e-9)),
        ));
        rows.push(row(
            format!("peers recall@5, {label}, default relevance decision"),
            fmt(&on),
            format!("{} decision off", fmt(&off)),
            Some(on["all"] / off["all"].max(1e-9)),
        ));
    }
    rows
}
