//! `memd serve`: the `/v1` HTTP API and MCP at `/mcp` on loopback until SIGINT or SIGTERM.
//!
//! Takes the writer lock, catches the index up, binds `listen` (config, or
//! `--listen`), prints `listening on http://ADDR` on stdout, and serves. On
//! SIGINT/SIGTERM it stops accepting, lets in-flight requests finish (every
//! acknowledged write is already fsync'd in the journal), fsyncs the audit
//! log, releases the lock and exits 0.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;

use crate::config::{Config, Layout};
use crate::http::{self, AppState};
use crate::hub::{Hub, Mode};

/// Arguments of `memd serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
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

pub(super) fn run(layout: Layout, config: Config, args: &Args) -> anyhow::Result<()> {
    let listen = args.listen.clone().unwrap_or_else(|| config.listen.clone());
    let hub = Arc::new(Hub::open(layout, config, Mode::Write)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        println!("listening on http://{addr}");
        std::io::stdout().flush()?;
        tracing::info!(listen.addr = %addr, "serving /v1");
        let state = AppState::new(hub);
        // Cancelled on shutdown so open MCP event streams do not hold the server up.
        let mcp_sessions = tokio_util::sync::CancellationToken::new();
        let mcp = crate::mcp::http::router(state.clone(), mcp_sessions.clone());
        let shutdown = async move {
            shutdown_signal().await;
            mcp_sessions.cancel();
        };
        http::serve_with(listener, state, mcp, shutdown).await?;
        anyhow::Ok(())
    })?;
    // The runtime (and with it the last handle on the hub) is dropped here,
    // which releases the writer lock.
    drop(runtime);
    Ok(())
}
