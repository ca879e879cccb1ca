//! `memd search`: search as the local operator (sees every scene).

use crate::hub::Hub;
use crate::index::filter::{Filter, Scope};
use crate::model::Scene;
use crate::search::{SearchMode, SearchRequest};

/// Arguments of `memd search`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to look for.
    query: String,
    /// Only these scenes (repeatable).
    #[arg(long)]
    scene: Vec<String>,
    /// Number of results (default from config).
    #[arg(long)]
    limit: Option<usize>,
    /// fulltext, semantic or hybrid (default from config: hybrid).
    #[arg(long)]
    mode: Option<String>,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    let scenes = args
        .scene
        .iter()
        .map(|s| Scene::parse(s))
        .collect::<crate::Result<Vec<_>>>()?;
    let mode = args
        .mode
        .as_deref()
        .map(str::parse::<SearchMode>)
        .transpose()?;
    // Every scene unless narrowed; expired short-term memories never match.
    let filter = Filter::scope(Scope {
        scenes,
        unexpired_at: Some(hub.now()),
        ..Scope::default()
    });
    let results = hub.search(&SearchRequest {
        query: args.query.clone(),
        filter,
        limit: args.limit,
        mode,
        min_score: None,
    })?;
    if cli.json {
        return super::print_json(&results);
    }
    if let Some(why) = &results.fallback {
        eprintln!("note: {why}; ran {} search", results.mode);
    }
    if results.hits.is_empty() {
        outln!("no results");
    }
    for (i, hit) in results.hits.iter().enumerate() {
        let m = &hit.memory;
        let first_line = m.text.lines().next().unwrap_or("");
        outln!(
            "{:>2}. {}  [{} {} {}]  {:.3}\n    {}",
            i + 1,
            m.id,
            m.scene,
            m.kind,
            m.ts.format("%Y-%m-%d %H:%M"),
            hit.score,
            first_line
        );
    }
    Ok(())
}
