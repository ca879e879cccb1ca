//! `memd backup create|list|verify|restore`.
//!
//! `create`, `list` and `verify` are safe next to a running server. `restore`
//! takes the writer lock, so it is refused (`ROOT_LOCKED`) while `memd serve`
//! runs: stop the server, restore, start it again.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use crate::backup;
use crate::config::{Config, Layout};
use crate::hub::Hub;

/// Backup subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Write a new archive of memories/, tokens.json and config.json.
    Create {
        /// Directory for the archive (default: config backup.dir, else ROOT/backups).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List archives, newest first.
    List {
        /// Directory to list (default: the configured backup directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Check every file of an archive against its manifest.
    Verify {
        /// The archive.
        archive: PathBuf,
    },
    /// Replace the root's files with an archive's, then rebuild the index (refused while serve runs).
    Restore {
        /// The archive.
        archive: PathBuf,
    },
}

pub(super) fn run(
    cli: &super::Cli,
    layout: Layout,
    config: Config,
    action: &Action,
) -> anyhow::Result<()> {
    let default_dir = config.backup.dir_for(&layout);
    match action {
        Action::Create { out } => {
            let (path, m) = backup::create(&layout, out.as_deref().unwrap_or(&default_dir))?;
            if cli.json {
                return super::print_json(&serde_json::json!({ "path": path, "manifest": m }));
            }
            outln!(
                "{}\n  {} files ({} journal files, {} journal lines, {} documents)",
                path.display(),
                m.files.len(),
                m.journal_files,
                m.journal_lines,
                m.documents
            );
        }
        Action::List { dir } => {
            let found = backup::list(dir.as_deref().unwrap_or(&default_dir))?;
            if cli.json {
                let items: Vec<_> = found
                    .iter()
                    .map(|(p, m)| serde_json::json!({ "path": p, "manifest": m }))
                    .collect();
                return super::print_json(&items);
            }
            if found.is_empty() {
                outln!("no backups");
            }
            for (path, m) in found {
                outln!(
                    "{}  {}  {} files, {} journal lines",
                    m.created.format("%Y-%m-%d %H:%M:%S"),
                    path.display(),
                    m.files.len(),
                    m.journal_lines
                );
            }
        }
        Action::Verify { archive } => {
            let m = backup::verify(archive)?;
            if cli.json {
                return super::print_json(&serde_json::json!({ "ok": true, "manifest": m }));
            }
            outln!("ok: {} files match their checksums", m.files.len());
        }
        Action::Restore { archive } => {
            let m = backup::restore(&layout, archive)?;
            let config = Config::load(&layout)?;
            let bar = ProgressBar::new(0).with_style(
                ProgressStyle::with_template("reindex {bar:40} {bytes}/{total_bytes}")
                    .expect("static template"),
            );
            let (hub, report) = Hub::reindex(layout, config, &mut |p| {
                bar.set_length(p.total);
                bar.set_position(p.done);
            })?;
            bar.finish_and_clear();
            let memories = hub.stats()?.counts.memories;
            if cli.json {
                return super::print_json(&serde_json::json!({
                    "restored": m.files.len(),
                    "records": report.records,
                    "memories": memories,
                }));
            }
            outln!(
                "restored {} files from {}; reindexed {} records, {memories} memories searchable",
                m.files.len(),
                archive.display(),
                report.records
            );
        }
    }
    Ok(())
}
