//! `memd get`: one memory by id.

use crate::hub::Hub;
use crate::index::filter::{Filter, Scope};

/// Arguments of `memd get`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Fact id, chunk id (`doc-xxxxxxxx#n`) or document id (`doc-xxxxxxxx`).
    id: String,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    // Like every reader: an expired short-term memory is gone from `get`
    // (`memd archive search` finds it).
    let filter = Filter::scope(Scope {
        unexpired_at: Some(hub.now()),
        ..Scope::default()
    });
    let memory = hub.get(&args.id, &filter)?;
    if cli.json {
        return super::print_json(&memory);
    }
    outln!("id:       {}", memory.id);
    if let Some(t) = &memory.title {
        outln!("title:    {t}");
    }
    outln!("scene:    {}", memory.scene);
    outln!(
        "kind:     {}  stage: {}  privacy: {}",
        memory.kind,
        memory.stage,
        memory.privacy
    );
    outln!("time:     {}", memory.ts.to_rfc3339());
    if !memory.tags.is_empty() {
        outln!("tags:     {}", memory.tags.join(", "));
    }
    if let Some(p) = &memory.path {
        outln!("path:     memories/{p}");
    }
    outln!("\n{}", memory.text);
    Ok(())
}
