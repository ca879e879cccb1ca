//! `memd audit`: recent audit lines of the daemon's requests, newest first,
//! through the same use case as `POST /v1/audit` (through the running
//! daemon if there is one, else from `data/audit.jsonl` directly).

use super::daemon::Target;
use crate::api::{AuditBody, AuditReply};

/// Arguments of `memd audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only requests of this token (by name; the CLI through the daemon is `cli`).
    #[arg(long)]
    token: Option<String>,
    /// Only this operation: `write`, `search`, `archive/search`, or `POST /v1/write`.
    #[arg(long)]
    action: Option<String>,
    /// At most this many lines (1-1000).
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = AuditBody {
        token: args.token.clone(),
        action: args.action.clone(),
        limit: Some(args.limit),
    };
    let r: AuditReply = target.call("/v1/audit", body, |hub, c, body| hub.audit(c, body))?;
    if cli.json {
        return super::print_json(&r);
    }
    if r.entries.is_empty() {
        outln!("no audit lines");
    }
    for e in &r.entries {
        let scene = e.scene.as_deref().unwrap_or("-");
        let denied = if e.denied > 0 { " denied" } else { "" };
        outln!(
            "{}  {}  {}  {}  {}{denied}  {} ms  {} ids",
            e.ts.format("%Y-%m-%d %H:%M:%S"),
            e.token.as_deref().unwrap_or("-"),
            e.route,
            scene,
            e.status,
            e.duration_ms,
            e.hits.len()
        );
    }
    if r.unreadable > 0 {
        outln!("{} unreadable lines skipped", r.unreadable);
    }
    Ok(())
}
