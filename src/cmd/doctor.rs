//! `memd doctor [--shallow]`: readiness checks with a hint for each problem.

use crate::doctor::{self, Status};
use crate::layout::Layout;

/// Arguments of `memd doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Look at files only: no index, no request to the daemon.
    #[arg(long)]
    shallow: bool,
}

pub(super) fn run(cli: &super::Cli, layout: Layout, args: &Args) -> anyhow::Result<()> {
    let report = doctor::run(&layout, args.shallow);
    if cli.json {
        super::print_json(&report)?;
    } else {
        for c in &report.checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            outln!("{mark} {:<12} {}", c.name, c.detail);
            if let Some(h) = &c.hint {
                outln!("     {:<12} → {h}", "");
            }
        }
        outln!("{}", if report.ready { "ready" } else { "NOT ready" });
    }
    if report.ready {
        Ok(())
    } else {
        std::process::exit(1)
    }
}
