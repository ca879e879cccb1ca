//! `memd health`: the health of the root's daemon, or of the root itself
//! when no daemon runs, as `/v1/health` reports it.
//!
//! The daemon is found through the root's address file first (and asked
//! with the local credential: everything), then at `--addr`, then at config
//! `listen` (only if some process holds the root's writer lock, since a
//! daemon there would otherwise serve another root). With no daemon, the
//! root is opened here and its health read as the local operator would see
//! it from a daemon.

use std::time::Duration;

use super::daemon::{Daemon, Found};
use crate::api::HealthHistory;
use crate::config::{Config, Layout};
use crate::hub::{Hub, Mode};

/// Arguments of `memd health`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address of a daemon to ask when the root records none (default: config `listen`).
    #[arg(long)]
    addr: Option<String>,
    /// A token to ask with: an admin token sees counts, pending vectors and jobs;
    /// any other token sees the status of each component.
    #[arg(long, env = "MEMD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The rolling history instead (one sample a minute over the last day: counts, pending
    /// vectors, index lag, free disk, requests and median latencies); needs an admin token
    /// or the local operator.
    #[arg(long)]
    history: bool,
}

pub(super) fn run(
    cli: &super::Cli,
    layout: &Layout,
    config: &Config,
    args: &Args,
) -> anyhow::Result<()> {
    if args.history {
        return history(cli, layout, config, args);
    }
    let body = match Found::locate(layout, args.addr.as_deref(), &config.listen) {
        Found::Recorded(daemon) => match &args.token {
            Some(token) => ask(&daemon.addr, Some(token))?,
            None => from_daemon(&daemon)?,
        },
        Found::Address(addr) if args.addr.is_some() || root_locked(layout) => {
            ask(&addr, args.token.as_deref())?
        }
        Found::Address(_) => in_process(layout, config)?,
    };
    if cli.json {
        return super::print_json(&body);
    }
    outln!("{}", serde_json::to_string_pretty(&body)?);
    Ok(())
}

/// `memd health --history`: `/v1/health/history` of the daemon (as the
/// local operator, or with `--token`), else the history file of the root.
fn history(cli: &super::Cli, layout: &Layout, config: &Config, args: &Args) -> anyhow::Result<()> {
    let h: HealthHistory = match Found::locate(layout, args.addr.as_deref(), &config.listen) {
        Found::Recorded(daemon) if args.token.is_none() => daemon.get("/v1/health/history")?,
        Found::Recorded(daemon) => serde_json::from_value(ask_path(
            &daemon.addr,
            "/v1/health/history",
            args.token.as_deref(),
        )?)?,
        Found::Address(addr) if args.addr.is_some() || root_locked(layout) => {
            serde_json::from_value(ask_path(
                &addr,
                "/v1/health/history",
                args.token.as_deref(),
            )?)?
        }
        Found::Address(_) => {
            let hub = Hub::open(layout.clone(), config.clone(), Mode::ReadPreferWrite)?;
            hub.health_history(&hub.operator())?
        }
    };
    if cli.json {
        return super::print_json(&h);
    }
    if h.samples.is_empty() {
        outln!(
            "no samples yet (memd serve takes one every {} s)",
            h.interval_seconds
        );
    }
    outln!(
        "time                 memories  facts  pending  lag_bytes  free_mib  requests  search_p50  write_p50"
    );
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}ms"));
    for s in &h.samples {
        outln!(
            "{}  {:>8}  {:>5}  {:>7}  {:>9}  {:>8}  {:>8}  {:>10}  {:>9}",
            s.ts.format("%Y-%m-%d %H:%M:%S"),
            s.memories,
            s.facts,
            s.pending_vectors,
            s.index_lag_bytes,
            s.disk_free_bytes / (1024 * 1024),
            s.requests,
            ms(s.search_p50_ms),
            ms(s.write_p50_ms)
        );
    }
    Ok(())
}

/// Whether some process holds the root's writer lock (a daemon that does
/// not record its address, from an earlier build, or a command).
pub(super) fn root_locked(layout: &Layout) -> bool {
    matches!(
        crate::store::lock::WriterLock::acquire(&layout.root, &layout.lock()),
        Err(crate::Error::RootLocked { .. })
    )
}

/// `/v1/health` of the root's daemon, as the local operator.
fn from_daemon(daemon: &Daemon) -> crate::Result<serde_json::Value> {
    daemon.get("/v1/health")
}

/// `/v1/health` at `addr`, with `token` if given.
fn ask(addr: &str, token: Option<&str>) -> crate::Result<serde_json::Value> {
    ask_path(addr, "/v1/health", token)
}

/// `GET path` at `addr`, with `token` if given.
fn ask_path(addr: &str, path: &str, token: Option<&str>) -> crate::Result<serde_json::Value> {
    let response = crate::client::get(addr, path, token, Duration::from_secs(5))?;
    if response.status != 200 {
        return Err(crate::Error::from_reply(response.status, &response.body));
    }
    serde_json::from_str(&response.body).map_err(|e| crate::Error::UpstreamInvalid {
        service: format!("the memd daemon at {addr}"),
        reason: "its health answer is not JSON".into(),
        source: Some(Box::new(e)),
    })
}

/// The health of the root read by this process (no daemon runs).
fn in_process(layout: &Layout, config: &Config) -> crate::Result<serde_json::Value> {
    let hub = Hub::open(layout.clone(), config.clone(), Mode::ReadPreferWrite)?;
    let view = hub.health_view(Some(&hub.operator()))?;
    serde_json::to_value(&view).map_err(|e| crate::Error::Internal(format!("health: {e}")))
}
