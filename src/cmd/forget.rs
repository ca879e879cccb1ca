//! `memd forget`: forget a memory as the local operator, through the same
//! use case as `POST /v1/forget` (a tombstone recorded with source `cli`).

use super::daemon::Target;
use crate::api::ForgetBody;

/// Arguments of `memd forget`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The fact id.
    id: String,
    /// Why, kept in the tombstone line.
    #[arg(long)]
    reason: Option<String>,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = ForgetBody {
        id: args.id.clone(),
        reason: args.reason.clone(),
        scene: None,
    };
    let done = target.call("/v1/forget", body, |hub, c, body| hub.forget(c, body))?;
    if cli.json {
        super::print_json(&done)
    } else {
        outln!("forgot {}", done.id);
        Ok(())
    }
}
