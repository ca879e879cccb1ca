//! The `memd` command line: one file per subcommand. The only code that
//! writes to stdout (besides the MCP transport); logs go to stderr.
//!
//! Every command works on the root chosen by `--root` > `MEMD_ROOT` > the
//! current directory. `--json` makes a command print exactly one JSON document
//! on stdout, errors included (`{"error":{code,message,retryable}}`).
//!
//! Every line goes through `outln!`: a reader that goes away early
//! (`memd stats | head -1`) ends the command quietly with exit code 141, the
//! shell's code for a broken pipe, instead of a panic.

/// `println!` for commands: writes one line to stdout and returns early from
/// the enclosing function (which returns `anyhow::Result`) when stdout fails;
/// a closed pipe becomes [`StdoutClosed`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cmd::write_line(format_args!($($arg)*))?
    };
}

mod archive;
mod backup;
mod consolidate;
mod doctor;
mod eval;
mod export;
mod forget;
mod get;
mod health;
mod import;
mod ingest;
mod mcp;
mod reindex;
mod restore;
mod rollback;
mod search;
mod serve;
mod stats;
mod sync;
mod token;
mod write;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, Layout};
use crate::error::Error;
use crate::hub::{Hub, Mode};

/// memd — local-first memory service for AI agents.
#[derive(Debug, Parser)]
#[command(name = "memd", version, about)]
pub struct Cli {
    /// Root directory holding memories/, data/ and config.json.
    #[arg(long, global = true, env = "MEMD_ROOT")]
    pub(crate) root: Option<PathBuf>,
    /// Print one JSON document on stdout.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Append a memory to the journal and index it (needs the writer lock).
    Write(write::Args),
    /// Full-text search (safe next to a running server: reads its index).
    Search(search::Args),
    /// Show one memory by id (safe next to a running server).
    Get(get::Args),
    /// Forget a memory: appends a tombstone (needs the writer lock).
    Forget(forget::Args),
    /// Undo a forget, or make an older version current again (needs the writer lock).
    Restore(restore::Args),
    /// Remember one chat message as short-term memory (needs the writer lock).
    Ingest(ingest::Args),
    /// Counts, sizes and unreadable lines (safe next to a running server).
    Stats,
    /// Delete data/index and rebuild it from memories/ (refused while a server runs).
    Reindex,
    /// Import our JSONL, loose JSON lines, Markdown or plain text (needs the writer lock).
    Import(import::Args),
    /// Export the live facts as JSONL or Markdown (safe next to a running server).
    Export(export::Args),
    /// Ask a running `memd serve` for its health (components, counts, jobs).
    Health(health::Args),
    /// Readiness checks with a hint for each problem (safe next to a running server).
    Doctor(doctor::Args),
    /// Backups of memories/, tokens and config (restore is refused while a server runs).
    Backup {
        /// What to do.
        #[command(subcommand)]
        action: backup::Action,
    },
    /// Serve the /v1 HTTP API (takes the writer lock; stops on SIGINT/SIGTERM).
    Serve(serve::Args),
    /// MCP tools over stdio, talking to the root's `memd serve` (started if needed).
    Mcp(mcp::Args),
    /// Issue, list and revoke API tokens (safe next to a running server).
    Token(token::Args),
    /// Retrieval quality on a labelled dataset, in a temporary root (safe next to a server).
    Eval(eval::Args),
    /// Compress old journal months; `archive search` / `archive restore` for expired memories
    /// (needs the writer lock).
    Archive(archive::Args),
    /// Nightly consolidation by hand (needs the writer lock; --dry-run is safe next to a server).
    Consolidate(consolidate::Args),
    /// Undo a consolidation run by appending compensating lines (needs the writer lock).
    Rollback(rollback::Args),
    /// Several devices: `.stignore` and Syncthing folder setup, peers and lines per device.
    Sync(sync::Args),
}

/// Sets up tracing on stderr; `MEMD_LOG` overrides the level.
pub fn init_logging(_cli: &Cli) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MEMD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// Runs the parsed command.
pub fn run(cli: &Cli) -> anyhow::Result<()> {
    // Everything memd creates (journal, index, tokens, backups) is private.
    crate::layout::private_umask();
    let root = match &cli.root {
        Some(r) => r.clone(),
        None => std::env::current_dir()?,
    };
    let layout = Layout::new(root);
    if let Command::Doctor(args) = &cli.command {
        return doctor::run(cli, layout, args);
    }
    let config = Config::load(&layout)?;
    match &cli.command {
        Command::Write(args) => write::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Search(args) => {
            search::run(cli, open(layout, config, Mode::ReadPreferWrite)?, args)
        }
        Command::Get(args) => get::run(cli, open(layout, config, Mode::ReadPreferWrite)?, args),
        Command::Forget(args) => forget::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Restore(args) => restore::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Ingest(args) => ingest::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Stats => stats::run(cli, open(layout, config, Mode::ReadPreferWrite)?),
        Command::Reindex => reindex::run(cli, layout, config),
        Command::Import(args) => import::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Export(args) => {
            export::run(cli, open(layout, config, Mode::ReadPreferWrite)?, args)
        }
        Command::Doctor(_) => unreachable!("handled before the config is loaded"),
        Command::Health(args) => health::run(cli, &config, args),
        Command::Backup { action } => backup::run(cli, layout, config, action),
        Command::Serve(args) => serve::run(layout, config, args),
        Command::Mcp(args) => mcp::run(layout, config, args),
        Command::Token(args) => token::run(cli, &layout, args),
        Command::Eval(args) => eval::run(cli, config, args),
        Command::Archive(args) => archive::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Consolidate(args) => {
            let mode = if args.dry_run() {
                Mode::ReadPreferWrite
            } else {
                Mode::Write
            };
            let hub = open(layout, config.clone(), mode)?;
            consolidate::run(cli, hub, &config, args)
        }
        Command::Rollback(args) => rollback::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Sync(args) => sync::run(cli, layout, config, args),
    }
}

fn open(layout: Layout, config: Config, mode: Mode) -> crate::Result<Hub> {
    Hub::open(layout, config, mode)
}

/// Prints a value as one JSON document.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The reader of stdout went away (a broken pipe): the command stops quietly.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed by its reader")]
pub(crate) struct StdoutClosed;

/// Exit code for a closed stdout: 128 + SIGPIPE, as a shell reports a process
/// killed by the signal.
const EXIT_STDOUT_CLOSED: u8 = 141;

/// Writes one line to stdout (see `outln!`).
pub(crate) fn write_line(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{args}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to stdout")),
    }
}

/// Maps the result to an exit code, printing the error (as JSON with `--json`).
pub fn exit(cli: &Cli, result: anyhow::Result<()>) -> ExitCode {
    let Err(err) = result else {
        return ExitCode::SUCCESS;
    };
    if err.downcast_ref::<StdoutClosed>().is_some() {
        return ExitCode::from(EXIT_STDOUT_CLOSED);
    }
    let (code, envelope) = match err.downcast_ref::<Error>() {
        Some(e) => (e.code(), e.envelope()),
        None => {
            let e = Error::Internal(format!("{err:#}"));
            (e.code(), e.envelope())
        }
    };
    if cli.json {
        // Nothing more can be done if stdout is gone too; stderr still says why.
        let _ = write_line(format_args!("{envelope}"));
    }
    eprintln!("error[{}]: {err:#}", code.as_str());
    ExitCode::from(code.exit_code() as u8)
}
