//! `memd eval`: recall@5, recall@10, MRR@10 and latency on a labelled
//! dataset. Works in a temporary root of its own, so it is safe next to a
//! running server; search and embedder settings come from this root's config.

use std::path::PathBuf;

use crate::config::Config;
use crate::embed::EmbedderSlot;
use crate::search::SearchMode;

/// Arguments of `memd eval`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Directory with corpus.jsonl and queries.jsonl.
    dataset: PathBuf,
    /// fulltext, semantic or hybrid (repeatable); all three when omitted.
    #[arg(long)]
    mode: Vec<String>,
    /// Write each query's ranked ids, relevant ids and first-hit rank here (JSONL).
    #[arg(long, value_name = "FILE")]
    per_query: Option<PathBuf>,
    /// A vector cache file shared across runs, so a corpus is embedded once.
    #[arg(long, value_name = "FILE")]
    vector_cache: Option<PathBuf>,
    /// Hits fetched per query (at least 10; deeper lists go to the per-query file).
    #[arg(long, value_name = "N")]
    depth: Option<usize>,
    /// Write every hybrid candidate with its learned-fusion features here
    /// (JSONL, for scripts/train-fusion.py; needs the embedder).
    #[arg(long, value_name = "FILE")]
    features: Option<PathBuf>,
}

pub(super) fn run(cli: &super::Cli, config: Config, args: &Args) -> anyhow::Result<()> {
    let mut modes = args
        .mode
        .iter()
        .map(|m| m.parse::<SearchMode>())
        .collect::<crate::Result<Vec<_>>>()?;
    if modes.is_empty() {
        modes = vec![
            SearchMode::Fulltext,
            SearchMode::Semantic,
            SearchMode::Hybrid,
        ];
    }
    // Full text alone needs no vectors; skip loading the model and embedding the corpus.
    let slot = if args.features.is_none() && modes.iter().all(|m| *m == SearchMode::Fulltext) {
        EmbedderSlot::none("not needed for a full-text evaluation")
    } else {
        EmbedderSlot::from_config(&config.embedder)
    };
    let options = crate::eval::EvalOptions {
        per_query: args.per_query.clone(),
        vector_cache: args.vector_cache.clone(),
        depth: args.depth,
        features: args.features.clone(),
    };
    let reports = crate::eval::run_with(&args.dataset, &modes, &config, slot, &options)?;
    if cli.json {
        return super::print_json(&reports);
    }
    outln!(
        "{:<16} {:<9} {:>6} {:>7} {:>9} {:>9} {:>10} {:>7} {:>8} {:>8} {:>8}",
        "dataset",
        "mode",
        "corpus",
        "queries",
        "recall@5",
        "r@5 floor",
        "recall@10",
        "MRR@10",
        "p50 ms",
        "p95 ms",
        "load ms"
    );
    for r in &reports {
        let mode = if r.ran == r.mode {
            r.mode.to_string()
        } else {
            format!("{}→{}", r.mode, r.ran)
        };
        outln!(
            "{:<16} {:<9} {:>6} {:>7} {:>9.3} {:>9.3} {:>10.3} {:>7.3} {:>8.1} {:>8.1} {:>8}",
            r.dataset,
            mode,
            r.corpus,
            r.queries,
            r.recall_at_5,
            r.recall_at_5_with_floor,
            r.recall_at_10,
            r.mrr_at_10,
            r.latency_p50_ms,
            r.latency_p95_ms,
            r.load_ms
        );
        for (category, c) in &r.by_category {
            outln!(
                "{:<16} {:<9} {:>14} {:>9.3}",
                format!("  category {category}"),
                "",
                c.queries,
                c.recall_at_5
            );
        }
    }
    Ok(())
}
