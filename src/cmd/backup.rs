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
pub(crate) enum Action {
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
    /// Add what this root lacks from an archive, then rebuild the index (refused while serve runs).
    ///
    /// Nothing on the root is deleted or overwritten: files it lacks are added, journal files
    /// the archive holds a longer copy of are extended, and any other difference refuses the
    /// whole restore. tokens.json and config.json stay as they are unless asked for.
    Restore {
        /// The archive.
        archive: PathBuf,
        /// Also replace tokens.json with the archive's (the changed tokens are listed first).
        #[arg(long)]
        with_tokens: bool,
        /// Also replace config.json with the archive's (the changed keys are listed first).
        #[arg(long)]
        with_config: bool,
        /// Accept an archive that this root did not make (not signed with ROOT/backup.key).
        #[arg(long)]
        foreign: bool,
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
            if !m.links_left_out.is_empty() {
                outln!(
                    "  {} symbolic links under memories/ left out (memd never follows links; \
                     replace each by the file or directory it points to):",
                    m.links_left_out.len()
                );
                for link in &m.links_left_out {
                    outln!("    {link}");
                }
            }
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
            let c = backup::verify(&layout, archive)?;
            if cli.json {
                return super::print_json(&serde_json::json!({
                    "ok": true,
                    "origin": c.origin,
                    "manifest": c.manifest,
                }));
            }
            outln!(
                "ok: {} files match their checksums; {}",
                c.manifest.files.len(),
                c.origin.describe()
            );
        }
        Action::Restore {
            archive,
            with_tokens,
            with_config,
            foreign,
        } => {
            let opts = backup::RestoreOptions {
                with_tokens: *with_tokens,
                with_config: *with_config,
                foreign: *foreign,
                limits: backup::Limits::default(),
            };
            return restore(cli, layout, archive, &opts);
        }
    }
    Ok(())
}

/// `memd backup restore`: restores the archive, then rebuilds the index.
fn restore(
    cli: &super::Cli,
    layout: Layout,
    archive: &std::path::Path,
    opts: &backup::RestoreOptions,
) -> anyhow::Result<()> {
    let json = cli.json;
    let (m, plan) = backup::restore(&layout, archive, opts, &mut |plan| {
        if !json {
            // The restore goes on whatever happens to stdout; a closed
            // pipe ends the command at its next line of output.
            let _ = print_plan(plan);
        }
    })?;
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
            "restored": plan.added.len() + plan.extended.len(),
            "archived": m.files.len(),
            "plan": plan,
            "records": report.records,
            "memories": memories,
        }));
    }
    outln!(
        "restored {} of {} files from {}; reindexed {} records, {memories} memories searchable",
        plan.added.len() + plan.extended.len(),
        m.files.len(),
        archive.display(),
        report.records
    );
    Ok(())
}

/// Prints what a restore is about to do, before it does it.
fn print_plan(plan: &backup::RestorePlan) -> anyhow::Result<()> {
    outln!("archive: {}", plan.origin.describe());
    outln!(
        "memories: {} added, {} journal files extended, {} unchanged",
        plan.added.len(),
        plan.extended.len(),
        plan.unchanged
    );
    if let Some(tokens) = &plan.tokens {
        outln!(
            "tokens.json will be replaced ({} token changes):",
            tokens.len()
        );
        for t in tokens {
            let fields = if t.fields.is_empty() {
                String::new()
            } else {
                format!(" [{}]", t.fields.join(", "))
            };
            outln!(
                "  {} {}: scopes {} scenes {}{fields}",
                t.change,
                t.name,
                t.scopes.join(","),
                t.scenes.join(",")
            );
        }
    }
    if let Some(config) = &plan.config {
        outln!(
            "config.json will be replaced ({} keys change):",
            config.len()
        );
        for c in config {
            outln!("  {}: {} -> {}", c.key, c.before, c.after);
        }
    }
    for note in &plan.not_restored {
        outln!("not restored: {note}");
    }
    Ok(())
}
