//! `memd consolidate`: run nightly consolidation by hand (the same code the
//! scheduler of `memd serve` runs). Needs the writer lock, except with
//! `--dry-run`, which only reads and is safe next to a running server.

use chrono::NaiveDate;

use super::daemon::Target;
use crate::api::RunBody;
use crate::config::Config;
use crate::consolidate::{self, RunOptions, RunReport, Window};

/// Arguments of `memd consolidate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Consolidate the short-term chat of this local day (YYYY-MM-DD);
    /// default: the period (`sleep.period`) that ends now.
    #[arg(long)]
    date: Option<NaiveDate>,
    /// Print what it would do; change nothing.
    #[arg(long)]
    dry_run: bool,
}

impl Args {
    /// Whether nothing may change.
    pub(super) fn dry_run(&self) -> bool {
        self.dry_run
    }
}

pub(super) fn run(
    cli: &super::Cli,
    target: Target,
    config: &Config,
    args: &Args,
) -> anyhow::Result<()> {
    let body = RunBody {
        date: args.date.map(|d| d.format("%Y-%m-%d").to_string()),
        dry_run: args.dry_run,
    };
    // Through a daemon, its consolidation route runs the same code.
    let report: RunReport = target.call("/v1/consolidation/run", body, |hub, caller, _| {
        let now = caller.now();
        let window = match args.date {
            Some(d) => Window::day(d),
            None => Window::ending(config.sleep.period, now),
        };
        consolidate::run(
            hub,
            &config.sleep,
            &RunOptions {
                window,
                dry_run: args.dry_run,
                now,
            },
        )
    })?;
    if cli.json {
        return super::print_json(&report);
    }
    print_report(&report)
}

fn print_report(r: &RunReport) -> anyhow::Result<()> {
    let verb = if r.dry_run {
        "would promote"
    } else {
        "promoted"
    };
    outln!(
        "{} {} ({} .. {}){}",
        if r.dry_run { "dry run" } else { "run" },
        r.run,
        r.window.from.to_rfc3339(),
        r.window.to.to_rfc3339(),
        if r.dry_run { ": nothing changed" } else { "" }
    );
    for p in &r.promoted {
        outln!(
            "  {verb} {} -> {} [{}] ({}): {}",
            p.from,
            p.id.as_deref().unwrap_or("(new)"),
            p.scene,
            p.reason,
            crate::hub::one_line(&p.text, 80)
        );
    }
    for f in &r.folded {
        outln!("  fold {} into {}", f.ids.join(", "), f.into);
    }
    for op in &r.accepted {
        outln!("  model: {op}");
    }
    for x in &r.rejected {
        outln!("  rejected {}: {}", x.operation, x.reason);
    }
    for s in &r.skipped {
        outln!("  skipped {}: {}", s.id, s.reason);
    }
    for s in &r.stale {
        outln!(
            "  stale {} (last touched {}, importance {:.2})",
            s.id,
            s.last_touched.date_naive(),
            s.importance
        );
    }
    outln!(
        "{} promoted, {} folded, {} left to expire, {} written, {} forgotten, {} rejected, {} stale",
        r.promoted.len(),
        r.folded.len(),
        r.expiring,
        r.written.len(),
        r.forgotten.len(),
        r.rejected.len(),
        r.stale.len()
    );
    if let Some(e) = &r.model_error {
        outln!("model pass failed: {e}");
    }
    Ok(())
}
