//! The `memd` command line: one file per subcommand. The only code that
//! writes to stdout (besides the MCP transport); logs go to stderr.
//!
//! Every command works on the root chosen by `--root` > `MEMD_ROOT` > the
//! platform's data directory ([`crate::layout::default_root`], e.g.
//! `~/.local/share/memd`; never the current directory). `--json` makes a
//! command print exactly one JSON document on stdout, errors included
//! (`{"error":{code,message,retryable}}`).
//!
//! One CLI whether or not a daemon runs: `write`, `forget`, `search`, `get`,
//! `ingest`, `consolidate`, `reindex`, `list`, `tier`, `gc`, `audit`,
//! `category`, `stats --expiring` and `archive list` go through the root's running `memd serve`
//! when there is one (found through the address file it records, with its
//! local credential, see `daemon.rs`), else open the root themselves; both
//! ways build the same `/v1` request, run the same use case and print the
//! same output. `health`, `doctor` and `mcp` find the daemon the same way.
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
mod audit;
mod backup;
mod category;
mod conflict;
mod consolidate;
mod daemon;
mod doctor;
mod eval;
mod export;
mod forget;
mod gc;
mod get;
mod health;
mod import;
mod ingest;
mod list;
mod mcp;
mod reindex;
mod restore;
mod rollback;
mod search;
mod serve;
mod setup;
mod stats;
mod sync;
mod tier;
mod token;
mod write;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, Layout};
use crate::error::Error;
use crate::hub::{Hub, Mode};
use daemon::Target;

/// memd — local-first memory service for AI agents.
#[derive(Debug, Parser)]
#[command(name = "memd", version, about)]
pub struct Cli {
    /// Root directory holding memories/, data/ and config.json [default: the
    /// platform's data directory, e.g. ~/.local/share/memd].
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
    /// Install the embedding model, ONNX Runtime and the lexicon (once per machine).
    Setup(setup::Args),
    /// Write a memory (through the running daemon if there is one).
    Write(write::Args),
    /// Search, hybrid (full text + semantic) by default (through the running daemon if there is one).
    Search(search::Args),
    /// Show one memory by id (through the running daemon if there is one).
    Get(get::Args),
    /// Forget a memory: appends a tombstone (through the running daemon if there is one).
    Forget(forget::Args),
    /// Undo a forget, or make an older version current again (through the running daemon if there is one).
    Restore(restore::Args),
    /// Settle a conflict link: dismiss it, undo a dismiss, or accept the newer memory as the
    /// new version of the older (through the running daemon if there is one).
    Conflict(conflict::Args),
    /// Remember one chat message as short-term memory (through the running daemon if there is one).
    Ingest(ingest::Args),
    /// Counts, sizes and unreadable lines; `--expiring`: the memories expiring soon (safe next to a running server).
    Stats(stats::Args),
    /// The memories, newest first, a page at a time (through the running daemon if there is one).
    List(list::Args),
    /// A memory's tier: show, set, or list one tier (through the running daemon if there is one).
    Tier(tier::Args),
    /// Run the cleanup now: journal retrievals, compress old journal months, count expired
    /// memories; `--dry-run`, `--tier` (through the running daemon if there is one).
    Gc(gc::Args),
    /// Recent audit lines of the daemon's requests, by token and operation (through the running
    /// daemon if there is one).
    Audit(audit::Args),
    /// Categories (standing rules): list, get, set (through the running daemon if there is one).
    Category(category::Args),
    /// Rebuild the index from memories/ (in the running daemon if there is one).
    Reindex,
    /// Import our JSONL, loose JSON lines, Markdown or plain text (needs the writer lock).
    Import(import::Args),
    /// Export the live facts as JSONL or Markdown (safe next to a running server).
    Export(export::Args),
    /// Health: components, counts and jobs (of the running daemon, else of the root read here).
    ///
    /// Each component's status, and with the right credential also counts (by stage, scene,
    /// privacy, tier), pending vectors, scheduled jobs, tier budgets and consolidation.
    ///
    /// Without --token it shows everything when it acts as the local operator: with the root's
    /// running daemon (found through ROOT/.memd.addr, on any port, asked with the local credential
    /// it records there), or, when no daemon runs, with the root read by this process. A daemon
    /// reached only through --addr or config `listen` shows each component's status only.
    ///
    /// With --token, the daemon shows what that token may see: everything for an admin token,
    /// the status only for any other.
    Health(health::Args),
    /// Readiness checks with a hint for each problem (safe next to a running daemon).
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
    /// Nightly consolidation by hand (through the running daemon if there is one).
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
    if let Command::Setup(args) = &cli.command {
        return setup::run(cli, args);
    }
    let layout = Layout::new(root(cli)?);
    if let Command::Doctor(args) = &cli.command {
        return doctor::run(cli, layout, args);
    }
    let config = Config::load(&layout)?;
    let target = |mode| Target::open(&layout, &config, mode);
    match &cli.command {
        Command::Setup(_) => unreachable!("handled before the root is chosen"),
        Command::Write(args) => write::run(cli, target(Mode::Write)?, args),
        Command::Search(args) => search::run(cli, target(Mode::ReadPreferWrite)?, args),
        Command::Get(args) => get::run(cli, target(Mode::ReadPreferWrite)?, args),
        Command::Forget(args) => forget::run(cli, target(Mode::Write)?, args),
        Command::Restore(args) => restore::run(cli, target(Mode::Write)?, args),
        Command::Conflict(args) => conflict::run(cli, target(Mode::Write)?, args),
        Command::Ingest(args) => ingest::run(cli, target(Mode::Write)?, args),
        Command::Stats(args) => stats::run(cli, layout, config, args),
        Command::List(args) => list::run(cli, target(Mode::ReadPreferWrite)?, args),
        Command::Tier(args) => tier::run(cli, target(args.mode())?, args),
        Command::Gc(args) => gc::run(cli, target(Mode::Write)?, args),
        Command::Audit(args) => audit::run(cli, target(Mode::ReadPreferWrite)?, args),
        Command::Category(args) => category::run(cli, target(args.mode())?, args),
        Command::Reindex => reindex::run(cli, layout, config),
        Command::Import(args) => import::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Export(args) => {
            export::run(cli, open(layout, config, Mode::ReadPreferWrite)?, args)
        }
        Command::Doctor(_) => unreachable!("handled before the config is loaded"),
        Command::Health(args) => health::run(cli, &layout, &config, args),
        Command::Backup { action } => backup::run(cli, layout, config, action),
        Command::Serve(args) => serve::run(layout, config, args),
        Command::Mcp(args) => mcp::run(layout, config, args),
        Command::Token(args) => token::run(cli, &layout, args),
        Command::Eval(args) => eval::run(cli, config, args),
        Command::Archive(args) if args.is_list() => {
            archive::list(cli, target(Mode::ReadPreferWrite)?, args)
        }
        Command::Archive(args) => archive::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Consolidate(args) => {
            let mode = if args.dry_run() {
                Mode::ReadPreferWrite
            } else {
                Mode::Write
            };
            consolidate::run(cli, target(mode)?, &config, args)
        }
        Command::Rollback(args) => rollback::run(cli, open(layout, config, Mode::Write)?, args),
        Command::Sync(args) => sync::run(cli, layout, config, args),
    }
}

fn open(layout: Layout, config: Config, mode: Mode) -> crate::Result<Hub> {
    Hub::open(layout, config, mode)
}

/// The root: `--root`/`MEMD_ROOT`, else the platform's data directory.
fn root(cli: &Cli) -> anyhow::Result<PathBuf> {
    if let Some(r) = cli.root.as_ref().filter(|r| !r.as_os_str().is_empty()) {
        return Ok(r.clone());
    }
    let root = crate::layout::default_root()?;
    note_old_root(&root);
    Ok(root)
}

/// Earlier builds used the current directory as the default root. When the
/// default root holds no memories yet and the current directory looks like
/// such a root, say how to keep using it (stderr only: the command goes on).
fn note_old_root(default: &std::path::Path) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    if cwd == default || default.join("memories").exists() {
        return;
    }
    let old = Layout::new(&cwd);
    if old.facts().is_dir() || old.tokens().is_file() {
        eprintln!(
            "memd: note: using the root {} (the default); {} holds a root of an earlier memd, \
             which used the current directory: pass --root {} or set MEMD_ROOT to keep using it, \
             or move it (see docs/operations.md#the-root)",
            default.display(),
            cwd.display(),
            cwd.display()
        );
    }
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
