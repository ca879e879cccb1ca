//! `memd gc`: run the cleanup now, through the same use case as
//! `POST /v1/gc` (through the running daemon if there is one): journal
//! buffered retrievals, compress journal months older than
//! `lifecycle.archiveAfterMonths`, and count the expired memories per class.
//! memd deletes nothing: expired memories stay in the journal, restorable
//! with `memd archive restore`.

use super::daemon::Target;
use crate::api::{GcBody, GcReply};
use crate::model::Tier;

/// Arguments of `memd gc`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Say what would be done; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Only this tier's expired memories (and no journal months).
    #[arg(long)]
    tier: Option<Tier>,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = GcBody {
        dry_run: args.dry_run,
        tier: args.tier,
    };
    let r: GcReply = target.call("/v1/gc", body, |hub, c, body| hub.gc(c, body))?;
    if cli.json {
        return super::print_json(&r);
    }
    let verb = if r.dry_run {
        "would compress"
    } else {
        "compressed"
    };
    if r.months.is_empty() {
        outln!("journal months: none to compress");
    }
    for m in &r.months {
        outln!("{verb} {m}");
    }
    if r.expired.is_empty() {
        outln!("expired: none");
    }
    for c in &r.expired {
        outln!(
            "expired {}: {} (restorable: memd archive list / restore)",
            c.class,
            c.expired
        );
    }
    if !r.dry_run {
        outln!("retrievals journaled: {}", r.accesses_journaled);
    }
    Ok(())
}
