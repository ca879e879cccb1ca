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
    println!("id:       {}", memory.id);
    if let Some(t) = &memory.title {
        println!("title:    {t}");
    }
    println!("scene:    {}", memory.scene);
    println!(
        "kind:     {}  stage: {}  privacy: {}",
        memory.kind, memory.stage, memory.privacy
    );
    println!("time:     {}", memory.ts.to_rfc3339());
    if !memory.tags.is_empty() {
        println!("tags:     {}", memory.tags.join(", "));
    }
    if let Some(p) = &memory.path {
        println!("path:     memories/{p}");
    }
    println!("\n{}", memory.text);
    Ok(())
}
