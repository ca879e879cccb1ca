//! `memd restore`: bring a memory back as the local operator, through the
//! same use case as `POST /v1/restore`: undo a forget (the same id is
//! current again), or make an older version current again (its content
//! becomes a new version replacing the newest one).

use super::daemon::Target;
use crate::api::{RestoreAction, RestoreVersionBody, RestoreVersionReply};

/// Arguments of `memd restore`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The fact id: a forgotten memory, or an older version.
    id: String,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = RestoreVersionBody {
        id: args.id.clone(),
        scene: None,
    };
    let done: RestoreVersionReply =
        target.call("/v1/restore", body, |hub, c, body| hub.restore(c, body))?;
    if cli.json {
        return super::print_json(&done);
    }
    match done.action {
        RestoreAction::Restored => outln!("restored {}", done.id),
        RestoreAction::NewVersion => {
            outln!("restored {} as a new version: {}", done.restored, done.id)
        }
        RestoreAction::Noop => outln!("{} is current already", done.id),
    }
    Ok(())
}
