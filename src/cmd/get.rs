//! `memd get`: one memory by id.

use crate::hub::Hub;
use crate::index::filter::Filter;

/// Arguments of `memd get`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Fact id, chunk id (`doc-xxxxxxxx#n`) or document id (`doc-xxxxxxxx`).
    id: String,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    let memory = hub.get(&args.id, &Filter::all())?;
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
