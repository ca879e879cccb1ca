//! `memd doctor [--shallow] [--addr HOST:PORT]`: readiness checks with a hint
//! for each problem.
//!
//! The checks read the root's files (safe next to a running daemon, which
//! they never disturb); the daemon check finds the daemon as every command
//! does: the root's address file first, then `--addr`, then config `listen`
//! (asked only if some process holds the writer lock, since a daemon there
//! would otherwise serve another root).

use super::daemon::Found;
use crate::config::Config;
use crate::doctor::{self, DaemonAt, Status};
use crate::layout::Layout;

/// Arguments of `memd doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Look at files only: no index, no request to the daemon.
    #[arg(long)]
    shallow: bool,
    /// Address of a daemon to ask when the root records none (default: config `listen`).
    #[arg(long)]
    addr: Option<String>,
}

pub(super) fn run(cli: &super::Cli, layout: Layout, args: &Args) -> anyhow::Result<()> {
    let daemon = if args.shallow {
        DaemonAt::NotRunning
    } else {
        where_is_the_daemon(&layout, args.addr.as_deref())
    };
    let report = doctor::run(&layout, args.shallow, &daemon);
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

/// The daemon the daemon check looks at.
fn where_is_the_daemon(layout: &Layout, given: Option<&str>) -> DaemonAt {
    // A config.json that does not load is the config check's failure; the
    // daemon is then looked for at the default address.
    let listen = Config::load(layout).unwrap_or_default().listen;
    match Found::locate(layout, given, &listen) {
        Found::Recorded(d) => DaemonAt::Recorded {
            addr: d.addr,
            pid: d.pid,
        },
        Found::Address(addr) if given.is_some() || super::health::root_locked(layout) => {
            DaemonAt::Address(addr)
        }
        Found::Address(_) => DaemonAt::NotRunning,
    }
}
