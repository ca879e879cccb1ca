//! `memd serve`: the `/v1` HTTP API, MCP at `/mcp` and the web console at `/` on loopback until SIGINT or SIGTERM.
//!
//! Takes the writer lock, catches the index up (on a disk too full for
//! that, serves reads from the index as it is and refuses writes with
//! `STORAGE_FULL` until there is room: [`Mode::WriteOrWait`]), starts the
//! file watcher with its catch-up loop and
//! the scheduler (index commits every second, daily backup, nightly
//! consolidation when `sleep.enabled`), binds `listen` (config, or
//! `--listen`; beyond loopback only with `allowRemote` and an active token),
//! records the bound address with a local credential in `ROOT/.memd.addr`
//! (so the CLI goes through this daemon, see `cmd/daemon.rs`), prints
//! `listening on http://ADDR` on stdout, and serves. On SIGINT/SIGTERM it
//! stops accepting, lets in-flight requests finish (every acknowledged write
//! is already fsync'd in the journal), fsyncs the audit log, removes the
//! address file, releases the lock and exits 0.

use std::sync::Arc;

use anyhow::Context;

/// How long an idle thread of the blocking pool (where every request's
/// work runs) waits for more before it exits. tokio's ten seconds made a
/// new thread for most bursts and every consolidation; each new thread's id
/// picks another slot of the regular expressions' cache pools, so caches of
/// every pattern crept into all eight slots over the first hour. Threads
/// that stay reuse the slots they have.
const BLOCKING_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

use crate::config::{Config, Layout};
use crate::http::{self, AppState};
use crate::hub::{Hub, Mode};
use crate::scheduler;

/// Arguments of `memd serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address to listen on (default: config `listen`, 127.0.0.1:8787). Port 0 picks a free port.
    #[arg(long)]
    listen: Option<String>,
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// Refuses a listen address beyond loopback unless `allowRemote` is set and
/// at least one token is active: an open port without tokens would answer
/// anyone's health probe and invite token guessing.
fn check_listen(listen: &str, allow_remote: bool, active_tokens: usize) -> crate::Result<()> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<std::net::SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| crate::Error::invalid(format!("listen address {listen:?} is not valid: {e}")))?
        .collect();
    if addrs.iter().all(|a| a.ip().is_loopback()) {
        return Ok(());
    }
    if !allow_remote {
        return Err(crate::Error::invalid(format!(
            "listen address {listen} is reachable from other machines; memd serves loopback only \
             unless config.json sets \"allowRemote\": true (and at least one token is issued). \
             Use 127.0.0.1:PORT, or set allowRemote"
        )));
    }
    if active_tokens == 0 {
        return Err(crate::Error::invalid(format!(
            "listen address {listen} is reachable from other machines but no token is active; \
             issue one first with `memd token issue --name NAME --preset PRESET`"
        )));
    }
    Ok(())
}

pub(super) fn run(layout: Layout, config: Config, args: &Args) -> anyhow::Result<()> {
    let listen = args.listen.clone().unwrap_or_else(|| config.listen.clone());
    let active = crate::auth::list(&layout.tokens())?
        .iter()
        .filter(|t| t.revoked_at.is_none())
        .count();
    check_listen(&listen, config.allow_remote, active)?;
    if active == 0 {
        eprintln!(
            "memd: no active tokens; every route but /v1/health will answer 401. Issue one with \
             `memd token issue --name dsh-desktop --preset dsh-desktop`."
        );
    }
    let backup = config.backup.clone();
    let sleep = config.sleep.clone();
    let hub = Arc::new(Hub::open(layout, config, Mode::WriteOrWait)?);
    hub.set_access_tracking(true);
    // The consolidation routes of /v1 run the scheduler's code.
    hub.install_consolidation(crate::consolidate::service::service());
    // Background work: documents and foreign journal lines reach the index
    // within a second, and a catch-up that fails (a full disk) is retried
    // until it succeeds; periodic jobs (daily backup) run on their schedule.
    // A watcher that cannot start (e.g. the inotify instance limit) costs
    // freshness, not correctness: its loop rescans every 30 s instead.
    let watcher = crate::watch::spawn(Arc::clone(&hub))
        .inspect_err(|e| tracing::warn!(error = %e, "file watcher not running; edits under memories/ apply on the next start"))
        .ok();
    warm_vectors(&hub)?;
    let jobs = jobs(&hub, backup, sleep)?;
    let scheduler = scheduler::spawn(Arc::clone(&hub), jobs)?;
    let credential = super::daemon::Credential::new();
    let state = AppState::new(Arc::clone(&hub)).with_operator_secret(credential.secret());
    let root = hub.layout().clone();
    // Editable keys of a changed config.json apply without a restart.
    let reload = Arc::clone(&hub);
    let config_watcher = crate::watch::spawn_config(&hub.layout().root, move || {
        match reload.reload_config() {
            Ok(()) => tracing::info!("config.json changed; editable keys applied"),
            Err(e) => {
                tracing::warn!(error = %e, "config.json changed but is invalid; keeping the running settings")
            }
        }
    })
    .inspect_err(|e| tracing::warn!(error = %e, "config.json watcher not running; use POST /v1/config for live changes"))
    .ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        // The CLI finds this daemon (and its credential) here; removed on a clean stop.
        // Not fatal: a daemon started on a full disk still serves reads, and the
        // CLI then finds it by `--addr` or the configured `listen`.
        let _recorded = credential
            .record(&root, addr)
            .inspect_err(|e| tracing::warn!(error = %e, "cannot record the address for the CLI in ROOT/.memd.addr; pass --addr to memd commands"))
            .ok();
        if !addr.ip().is_loopback() {
            // Only with allowRemote and a token (checked above); no Host check then.
            tracing::warn!(listen.addr = %addr, "listening beyond loopback (allowRemote): anyone who can reach this address can try tokens");
        }
        // Serving is useful even if nobody reads the announcement any more.
        if let Err(e) = super::write_line(format_args!("listening on http://{addr}")) {
            tracing::warn!(error = %e, "cannot announce the address on stdout");
        }
        tracing::info!(listen.addr = %addr, "serving /v1");
        // Cancelled on shutdown so open MCP event streams do not hold the server up.
        let mcp_sessions = tokio_util::sync::CancellationToken::new();
        let mcp = crate::mcp::http::router(state.clone(), mcp_sessions.clone());
        let shutdown = async move {
            shutdown_signal().await;
            mcp_sessions.cancel();
        };
        // The console's static files at `/` (its data comes from `/v1` with the signed-in token).
        let extra = mcp.merge(crate::console::router());
        http::serve_with(listener, state, extra, shutdown).await?;
        anyhow::Ok(())
    })?;
    // Stop the background threads, then drop the runtime (and with it the
    // last handle on the hub), which commits the index and releases the lock.
    drop(config_watcher);
    drop(watcher);
    drop(scheduler);
    drop(runtime);
    Ok(())
}

/// Loads the in-process vector copy on a thread of its own. It loads on the
/// first semantic search otherwise (about 1.3 s at 100k memories, holding up
/// other vector searches meanwhile); loading it now costs nothing a request
/// waits for.
fn warm_vectors(hub: &Arc<Hub>) -> crate::Result<()> {
    let warm = Arc::clone(hub);
    std::thread::Builder::new()
        .name("memd-warm-vectors".into())
        .spawn(move || match warm.index().warm_vectors() {
            Ok((rows, bytes)) => tracing::info!(rows, bytes, "vector copy loaded"),
            Err(e) => tracing::warn!(error = %e, "vector copy not loaded; the first semantic search loads it"),
        })
        .map(drop)
        .map_err(|e| crate::error::Error::Internal(format!("cannot start a thread: {e}")))
}

/// The periodic jobs the configuration asks for: daily backup, journal
/// archive, nightly consolidation.
fn jobs(
    hub: &Hub,
    backup: crate::config::BackupConfig,
    sleep: crate::consolidate::SleepConfig,
) -> crate::Result<Vec<scheduler::Job>> {
    let mut jobs = Vec::new();
    if backup.daily {
        jobs.push(scheduler::backup_job(
            backup.dir_for(hub.layout()),
            backup.keep_days,
        ));
    }
    if hub.config().lifecycle.archive_after_months > 0 {
        jobs.push(scheduler::archive_job());
    }
    if sleep.enabled {
        jobs.push(scheduler::sleep_job(sleep)?);
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_listen_needs_allow_remote_and_a_token() {
        assert!(check_listen("127.0.0.1:0", false, 0).is_ok());
        assert!(check_listen("[::1]:0", false, 0).is_ok());
        let err = check_listen("0.0.0.0:0", false, 3).unwrap_err();
        assert_eq!(err.code().as_str(), "INVALID_INPUT");
        assert!(err.to_string().contains("allowRemote"), "{err}");
        let err = check_listen("0.0.0.0:0", true, 0).unwrap_err();
        assert!(err.to_string().contains("no token is active"), "{err}");
        assert!(check_listen("0.0.0.0:0", true, 1).is_ok());
        assert!(check_listen("not an address", false, 0).is_err());
    }
}
