//! `--reindex-only`: reindex time at one size, full text only and with
//! vectors from a warm vector cache (hash embedder), plus disk bytes per fact.
//!
//! `--root DIR` keeps the built root (journal, index, vector cache) in `DIR`
//! and reuses it on the next run, so a 1M-fact corpus is written and embedded
//! once; without it the root lives in a temporary directory. The first run
//! also reports the batched write rate of building it, beside raw appends.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::hub::{Hub, Mode};

use crate::{Row, corpus, dir_bytes, row};

fn hash_slot() -> EmbedderSlot {
    EmbedderSlot::ready(Arc::new(HashEmbedder::new(384)))
}

/// Reindex figures on `n` facts, in `root` (kept) or a temporary directory.
pub fn run(n: usize, root: Option<PathBuf>) -> Vec<Row> {
    let mut rows = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    let base = root.unwrap_or_else(|| tmp.path().to_path_buf());
    let root_dir = base.join(format!("root-{n}"));
    let layout = Layout::new(root_dir.clone());
    let config = Config::default();
    let built = base.join(format!("root-{n}.built"));
    if !built.exists() {
        let _ = std::fs::remove_dir_all(&root_dir);
        let items = corpus::generate(n, 42);
        let (hub, _) = Hub::open_with(
            layout.clone(),
            config.clone(),
            Mode::Write,
            hash_slot(),
            &mut |_| {},
        )
        .unwrap();
        let t = Instant::now();
        corpus::write_all(&hub, &items);
        let write = t.elapsed();
        rows.push(row(
            "writes/s, batched 1000 (building the root)",
            format!("{:.0}", n as f64 / write.as_secs_f64()),
            "—".into(),
            None,
        ));
        let t = Instant::now();
        let embedded = hub.embed_pending(usize::MAX);
        assert_eq!(embedded as usize, n, "every fact gets a vector");
        rows.push(row(
            "embed the corpus, cold cache (hash embedder)",
            format!("{:.1} s", t.elapsed().as_secs_f64()),
            "—".into(),
            None,
        ));
        drop(hub);
        std::fs::write(&built, "").unwrap();
    }

    let t = Instant::now();
    let (h, report) = Hub::reindex_with(
        layout.clone(),
        config.clone(),
        EmbedderSlot::none("full-text reindex"),
        &mut |_| {},
    )
    .unwrap();
    let text_only = t.elapsed();
    assert_eq!(report.records as usize, n);
    drop(h);
    rows.push(row(
        "reindex (full text only)",
        format!("{:.2} s", text_only.as_secs_f64()),
        "—".into(),
        None,
    ));
    if std::env::args().any(|a| a == "--text-only") {
        return rows;
    }
    let t = Instant::now();
    let (h, report) = Hub::reindex_with(layout.clone(), config, hash_slot(), &mut |_| {}).unwrap();
    let warm = t.elapsed();
    assert_eq!(report.vectors_stored as usize, n);
    drop(h);
    rows.push(row(
        "reindex with vectors, warm cache (hash embedder)",
        format!("{:.2} s", warm.as_secs_f64()),
        format!("{:.2} s text-only reindex", text_only.as_secs_f64()),
        Some(warm.as_secs_f64() / text_only.as_secs_f64().max(1e-6)),
    ));
    let journal = dir_bytes(&layout.facts());
    let index = dir_bytes(&layout.index());
    let cache = dir_bytes(&root_dir.join("data/cache"));
    rows.push(row(
        "bytes on disk per fact (journal + index with vectors + vector cache)",
        format!(
            "{} + {} + {}",
            journal / n as u64,
            index / n as u64,
            cache / n as u64
        ),
        "—".into(),
        None,
    ));
    rows
}
