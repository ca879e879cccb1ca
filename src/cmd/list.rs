//! `memd list`: the memories the root holds, newest first, a page at a time,
//! through the same use case as `POST /v1/list` (through the running daemon
//! if there is one). `--cursor` continues where the previous page ended
//! (`next_cursor` in `--json`, the `more:` line otherwise).

use super::daemon::Target;
use crate::api::{ListBody, ListReply};
use crate::model::{Memory, Stage, Tier};

/// Arguments of `memd list`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Rows per page (1-100).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Continue after this cursor (the previous page's next_cursor).
    #[arg(long)]
    cursor: Option<String>,
    /// Only this scene (repeat for several).
    #[arg(long = "scene")]
    scenes: Vec<String>,
    /// Only long-term memories of this tier (t0, t1, t2, t3).
    #[arg(long)]
    tier: Option<Tier>,
    /// Only this stage (short, long).
    #[arg(long)]
    stage: Option<Stage>,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = ListBody {
        limit: Some(args.limit),
        cursor: args.cursor.clone(),
        tier: args.tier,
        stage: args.stage,
        scenes: (!args.scenes.is_empty()).then(|| args.scenes.clone()),
        ..ListBody::default()
    };
    let reply = list(&target, body)?;
    if cli.json {
        return super::print_json(&reply);
    }
    print_page(&reply)
}

/// One `/v1/list` page, through the daemon or in process.
pub(super) fn list(target: &Target, body: ListBody) -> crate::Result<ListReply> {
    target.call("/v1/list", body, |hub, c, body| hub.list(c, body))
}

/// Prints a page: one line per memory, then the cursor of the next page.
pub(super) fn print_page(reply: &ListReply) -> anyhow::Result<()> {
    if reply.items.is_empty() {
        outln!("no memories");
    }
    for m in &reply.items {
        outln!("{}", line(m));
    }
    if let Some(next) = &reply.next_cursor {
        outln!("more: --cursor {next}");
    }
    Ok(())
}

/// `TIME  ID  [scene stage/tier]  text`, with the expiry when there is one.
pub(super) fn line(m: &Memory) -> String {
    let class = match (m.stage, m.tier) {
        (Stage::Long, Some(t)) => t.to_string(),
        (stage, _) => stage.to_string(),
    };
    let expiry = m
        .expires_at
        .map(|t| format!("  expires {}", t.format("%Y-%m-%d %H:%M")))
        .unwrap_or_default();
    format!(
        "{}  {}  [{} {class}]{expiry}  {}",
        m.ts.format("%Y-%m-%d %H:%M"),
        m.id,
        m.scene,
        crate::hub::one_line(&m.text, 80)
    )
}
