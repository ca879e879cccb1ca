//! `memd mcp`: the MCP tools over stdio, for agent hosts that launch one
//! server process per session.
//!
//! Many sessions may run at once, so this process never opens the root
//! itself: every tool call goes over loopback HTTP to the `memd serve` of
//! the same root (the single writer), with the bearer token from
//! `--token`/`MEMD_TOKEN` or `--token-file`/`MEMD_TOKEN_FILE`. The daemon is
//! the one the root's address file names (whatever port it listens on),
//! else the one at `--url`/`MEMD_URL`, else at config `listen`. If it does
//! not answer `/v1/health`, it is started as a detached `memd serve` for the
//! same root (log in `data/serve.log`) and waited for; a daemon that goes
//! away mid-session is started again by the next tool call. stdout carries
//! the MCP protocol and nothing else; logs go to stderr.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::ServiceExt;

use crate::config::{Config, Layout};
use crate::mcp::{MemoryServer, Upstream};

/// How long to wait for a daemon to answer `/v1/health` after starting it.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Arguments of `memd mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Bearer token for the daemon's /v1 API (issue one with `memd token issue`).
    #[arg(long, env = "MEMD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file whose first line is the token (used when no --token/MEMD_TOKEN is given).
    #[arg(long, env = "MEMD_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// The daemon's base URL when the root records none (default: http:// + config `listen`).
    #[arg(long, env = "MEMD_URL")]
    url: Option<String>,
    /// Fail instead of starting `memd serve` when the daemon is not reachable.
    #[arg(long)]
    no_start: bool,
}

/// The token from the flag, the environment or the token file.
fn token(args: &Args) -> anyhow::Result<String> {
    if let Some(t) = args
        .token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return Ok(t.to_string());
    }
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the token file {}", path.display()))?;
        if let Some(t) = text.lines().map(str::trim).find(|l| !l.is_empty()) {
            return Ok(t.to_string());
        }
        bail!("the token file {} is empty", path.display());
    }
    Err(crate::Error::invalid(
        "memd mcp needs a token: set MEMD_TOKEN (or --token, or --token-file / MEMD_TOKEN_FILE); \
         issue one with `memd token issue --name dsh-desktop --preset dsh-desktop`",
    )
    .into())
}

/// `http://host:port` for a listen address; wildcard addresses become loopback.
fn base_url(listen: &str) -> String {
    let listen = listen
        .replace("0.0.0.0:", "127.0.0.1:")
        .replace("[::]:", "[::1]:");
    format!("http://{listen}")
}

/// Starts `memd serve` for this root, detached, listening where `base` points.
fn start_daemon(layout: &Layout, base: &str) -> anyhow::Result<PathBuf> {
    let log_path = layout.data().join("serve.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let listen = base.trim_start_matches("http://").trim_end_matches('/');
    let exe = std::env::current_exe().context("cannot find the memd executable")?;
    let mut child = Command::new(exe)
        .arg("--root")
        .arg(&layout.root)
        .args(["serve", "--listen", listen])
        // The daemon authenticates every request itself; it needs no session token.
        .env_remove("MEMD_TOKEN")
        .env_remove("MEMD_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        // Its own process group: the daemon outlives this session and its signals.
        .process_group(0)
        .spawn()
        .context("cannot start memd serve")?;
    tracing::info!(pid = child.id(), listen, "started memd serve");
    // Reap it if it exits early (e.g. another session started one first).
    std::thread::spawn(move || child.wait());
    Ok(log_path)
}

async fn healthy(upstream: &Upstream) -> bool {
    upstream.call("GET", "/v1/health", None, None).await.is_ok()
}

/// Makes sure a daemon answers at `upstream`, starting one if allowed.
///
/// Sessions launched together serialise on `data/mcp-start.lock`, so only the
/// first starts a daemon and the others find it healthy.
async fn ensure_daemon(layout: &Layout, upstream: &Upstream, start: bool) -> anyhow::Result<()> {
    if healthy(upstream).await {
        return Ok(());
    }
    let base = upstream.base().unwrap_or_default().to_string();
    if !start {
        bail!("no memd daemon answers at {base} (start `memd serve`, or drop --no-start)");
    }
    layout.create_dirs()?;
    let lock_path = layout.data().join("mcp-start.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    let lock = tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
        .await
        .context("lock task failed")?
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    if healthy(upstream).await {
        return Ok(());
    }
    let log = start_daemon(layout, &base)?;
    let started = Instant::now();
    while started.elapsed() < START_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if healthy(upstream).await {
            drop(lock);
            return Ok(());
        }
    }
    bail!(
        "started memd serve but {base} did not become healthy within {}s; see {}",
        START_TIMEOUT.as_secs(),
        log.display()
    )
}

pub(super) fn run(layout: Layout, config: Config, args: &Args) -> anyhow::Result<()> {
    let token = token(args)?;
    let base = super::daemon::Daemon::find(&layout)
        .map(|d| d.base_url())
        .or_else(|| args.url.clone())
        .unwrap_or_else(|| base_url(&config.listen));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let start = !args.no_start;
        let probe = Arc::new(Upstream::loopback(base.clone()));
        ensure_daemon(&layout, &probe, start).await?;
        let mut upstream = Upstream::loopback(base);
        if start {
            // A daemon that was stopped or crashed mid-session is started again
            // by the next tool call (sessions serialise on the start lock).
            let (layout, probe) = (layout.clone(), probe.clone());
            upstream = upstream.with_revive(Arc::new(move || {
                let (layout, probe) = (layout.clone(), probe.clone());
                Box::pin(async move {
                    match ensure_daemon(&layout, &probe, true).await {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::error!(error = %e, "cannot start the memd daemon again");
                            false
                        }
                    }
                })
            }));
        }
        let upstream = Arc::new(upstream);
        if let Err(e) = upstream
            .call("GET", "/v1/capabilities", Some(&token), None)
            .await
        {
            tracing::warn!(error = %e, "the token is not accepted by the daemon; tool calls will fail");
        }
        let server = MemoryServer::new(upstream, Some(token));
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .context("MCP initialisation over stdio failed")?;
        running.waiting().await.context("MCP session failed")?;
        anyhow::Ok(())
    })?;
    // Stdin may still be blocked in a read; do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(base_url("127.0.0.1:8787"), "http://127.0.0.1:8787");
        assert_eq!(base_url("0.0.0.0:9000"), "http://127.0.0.1:9000");
        assert_eq!(base_url("[::]:9000"), "http://[::1]:9000");
    }
}
