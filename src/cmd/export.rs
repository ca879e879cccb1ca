//! `memd export`: the live facts as journal lines or Markdown (safe next to a running server).

use std::path::PathBuf;

use crate::hub::Hub;
use crate::model::Scene;
use crate::transfer::{self, ExportFormat};

/// Arguments of `memd export`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Output file (jsonl) or directory (markdown).
    #[arg(long)]
    out: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "jsonl")]
    format: ExportFormat,
    /// Only these scenes (repeatable).
    #[arg(long)]
    scene: Vec<String>,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    let scenes = args
        .scene
        .iter()
        .map(|s| Scene::parse(s))
        .collect::<crate::Result<Vec<_>>>()?;
    let spinner = indicatif::ProgressBar::new_spinner().with_message("exporting");
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let n = transfer::export(&hub, args.format, &args.out, &scenes)?;
    spinner.finish_and_clear();
    if cli.json {
        return super::print_json(&serde_json::json!({ "facts": n, "out": args.out }));
    }
    outln!("exported {n} facts to {}", args.out.display());
    Ok(())
}
