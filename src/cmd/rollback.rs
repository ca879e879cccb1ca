//! `memd rollback`: undo a consolidation run (`--run`), or everything a source
//! did since an instant (`--source sleep --since T`), by appending
//! compensating journal lines. Needs the writer lock (stop the server first,
//! or run it next to no server).

use chrono::{DateTime, NaiveDate, Utc};

use crate::consolidate::rollback::{self, Target};
use crate::error::Error;
use crate::hub::Hub;

/// Arguments of `memd rollback`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The run id (see `data/consolidation/` or `GET /v1/consolidation/runs`).
    #[arg(long, conflicts_with_all = ["source", "since"])]
    run: Option<String>,
    /// Undo what this source wrote or forgot (with --since).
    #[arg(long, requires = "since")]
    source: Option<String>,
    /// RFC 3339 instant or YYYY-MM-DD (UTC midnight).
    #[arg(long, requires = "source")]
    since: Option<String>,
    /// Print what it would undo; change nothing.
    #[arg(long)]
    dry_run: bool,
}

fn parse_since(s: &str) -> Result<DateTime<Utc>, Error> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| Error::invalid(format!("--since must be RFC 3339 or YYYY-MM-DD, got {s:?}")))
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    let target = match (&args.run, &args.source, &args.since) {
        (Some(run), None, None) => Target::Run(run.clone()),
        (None, Some(source), Some(since)) => Target::SourceSince {
            source: source.clone(),
            since: parse_since(since)?,
        },
        _ => return Err(Error::invalid("give --run RUN_ID, or --source SOURCE --since T").into()),
    };
    let report = rollback::rollback(&hub, &target, args.dry_run)?;
    if cli.json {
        return super::print_json(&report);
    }
    let (forget, restore) = if report.dry_run {
        ("would forget", "would restore")
    } else {
        ("forgot", "restored")
    };
    for id in &report.forgotten {
        outln!("{forget} {id}");
    }
    for id in &report.restored {
        outln!("{restore} {id}");
    }
    outln!(
        "{}: {} forgotten, {} restored",
        report.target,
        report.forgotten.len(),
        report.restored.len()
    );
    Ok(())
}
