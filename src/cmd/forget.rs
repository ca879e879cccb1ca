//! `memd forget`: append a tombstone for a fact.

use crate::hub::Hub;
use crate::index::filter::Filter;

/// Arguments of `memd forget`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The fact id.
    id: String,
    /// Why, kept in the tombstone line.
    #[arg(long)]
    reason: Option<String>,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    hub.forget(&args.id, args.reason.clone(), "cli", &Filter::all())?;
    if cli.json {
        super::print_json(&crate::api::ForgetReply {
            id: args.id.clone(),
            forgotten: true,
        })
    } else {
        outln!("forgot {}", args.id);
        Ok(())
    }
}
