//! `memd dismiss`: end the conflict link between two memories as the local
//! operator (or, with `--undo`, link them again), through the same use case
//! as `POST /v1/conflicts/dismiss` (an `unlink` or `link` journal line).

use super::daemon::Target;
use crate::api::DismissConflictBody;

/// Arguments of `memd dismiss`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// One memory of the pair.
    id: String,
    /// The other memory of the pair.
    other: String,
    /// Link them again (undo an earlier dismiss).
    #[arg(long)]
    undo: bool,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = DismissConflictBody {
        id: args.id.clone(),
        other: args.other.clone(),
        undo: args.undo,
    };
    let done = target.call("/v1/conflicts/dismiss", body, |hub, c, body| {
        hub.dismiss_conflict(c, body)
    })?;
    if cli.json {
        super::print_json(&done)
    } else if done.linked {
        outln!("linked {} and {} again", done.id, done.other);
        Ok(())
    } else {
        outln!("dismissed the conflict between {} and {}", done.id, done.other);
        Ok(())
    }
}
