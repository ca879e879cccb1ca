//! `memd search`: search as the local operator (sees every scene), through
//! the same use case as `POST /v1/search`.

use super::daemon::Target;
use crate::api::SearchBody;
use crate::search::SearchMode;

/// Arguments of `memd search`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to look for.
    query: String,
    /// Only these scenes (repeatable).
    #[arg(long)]
    scene: Vec<String>,
    /// Number of results (default from config; above search.maxLimit it is lowered to it).
    #[arg(long)]
    limit: Option<usize>,
    /// fulltext, semantic or hybrid (default from config: hybrid).
    #[arg(long)]
    mode: Option<String>,
    /// Relevance floor, 0-1: hits less likely than this to be about the query are left out
    /// (default: the calibrated threshold; 0 shows every hit).
    #[arg(long)]
    min_score: Option<f32>,
    /// Search memory as it stood at this instant: RFC 3339, or a date (the end of that day,
    /// UTC); later writes, supersedes and forgets are left out.
    #[arg(long)]
    as_of: Option<String>,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = SearchBody {
        query: args.query.clone(),
        limit: args.limit,
        mode: args
            .mode
            .as_deref()
            .map(str::parse::<SearchMode>)
            .transpose()?,
        min_score: args.min_score,
        // Every scene unless narrowed; expired short-term memories never match.
        scenes: (!args.scene.is_empty()).then(|| args.scene.clone()),
        as_of: args.as_of.clone(),
        ..SearchBody::default()
    };
    let out = target.call_limited("/v1/search", body, |hub, c, body| hub.search(c, body))?;
    if let Some(clamped) = &out.clamped {
        eprintln!("note: limit lowered to search.maxLimit ({clamped})");
    }
    let results = out.body;
    if cli.json {
        return super::print_json(&results);
    }
    if let Some(at) = results.as_of {
        eprintln!("note: as memory stood at {}", at.to_rfc3339());
    }
    if let Some(why) = &results.fallback {
        eprintln!("note: {why}; ran {} search", results.mode);
    }
    if results.hits.is_empty() {
        outln!("no results");
    }
    if results.dropped_below_floor > 0 {
        eprintln!(
            "note: {} below the relevance floor left out (--min-score 0 shows them)",
            results.dropped_below_floor
        );
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
