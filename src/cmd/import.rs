//! `memd import PATH`: our JSONL, loose JSON lines, Markdown, or plain text;
//! `memd import --from memory-hub ROOT`: a Node memory-hub root ([`crate::migrate`]).
//! Needs the writer lock.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use crate::hub::Hub;
use crate::model::{Scene, parse_kind};
use crate::transfer::{self, Format, ImportDefaults};

/// Arguments of `memd import`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// File or directory to import.
    path: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    format: Format,
    /// Scene for lines that name none.
    #[arg(long, default_value = "main")]
    scene: String,
    /// Kind for lines that name none.
    #[arg(long, default_value = "note")]
    kind: String,
    /// Migrate another system's root instead (`memory-hub`: the Node memory-hub).
    #[arg(long, value_enum)]
    from: Option<From>,
}

/// Systems `memd import --from` migrates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum From {
    /// The Node memory-hub: `memories/facts/*.jsonl` and Markdown.
    MemoryHub,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    let defaults = ImportDefaults {
        scene: Scene::parse(&args.scene)?,
        kind: parse_kind(&args.kind)?,
    };
    let report = match args.from {
        Some(From::MemoryHub) => crate::migrate::import_memory_hub(&hub, &args.path)?,
        None => import(&hub, args, &defaults)?,
    };
    if cli.json {
        return super::print_json(&report);
    }
    outln!(
        "imported {} (skipped {} already present, {} refused)",
        report.added,
        report.skipped,
        report.failed
    );
    for e in &report.errors {
        outln!("  {e}");
    }
    Ok(())
}

fn import(
    hub: &Hub,
    args: &Args,
    defaults: &ImportDefaults,
) -> anyhow::Result<transfer::ImportReport> {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("import {bar:40} {pos}/{len} lines {elapsed}")
            .expect("static template"),
    );
    let report = transfer::import(
        hub,
        &args.path,
        args.format,
        defaults,
        &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        },
    )?;
    bar.finish_and_clear();
    Ok(report)
}
