//! `memd stats`: counts, sizes and unreadable lines; `--expiring` lists the
//! memories inside their warning window instead (the last seventh of their
//! lifetime, at most `lifecycle.expiringSoonDays`: a 24-hour chat line in
//! its last 3 h 26 min, a T3 memory in its last 4.3 days), or with `--days`
//! every memory expiring within that many days, through the same use case
//! as `POST /v1/list` (through the running daemon if there is one).

use super::daemon::Target;
use crate::api::ListBody;
use crate::config::{Config, Layout};
use crate::hub::{Hub, Mode};

/// Arguments of `memd stats`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// List the memories expiring soon (inside their warning window) instead.
    #[arg(long)]
    expiring: bool,
    /// With --expiring: every memory expiring within this many days instead.
    #[arg(long, requires = "expiring")]
    days: Option<u32>,
    /// With --expiring: rows per page (1-100).
    #[arg(long, default_value_t = 100, requires = "expiring")]
    limit: usize,
    /// With --expiring: continue after this cursor.
    #[arg(long, requires = "expiring")]
    cursor: Option<String>,
}

pub(super) fn run(
    cli: &super::Cli,
    layout: Layout,
    config: Config,
    args: &Args,
) -> anyhow::Result<()> {
    if args.expiring {
        let target = Target::open(&layout, &config, Mode::ReadPreferWrite)?;
        let body = ListBody {
            expiring_soon: args.days.is_none(),
            expiring_within_days: args.days,
            limit: Some(args.limit),
            cursor: args.cursor.clone(),
            ..ListBody::default()
        };
        let reply = super::list::list(&target, body)?;
        if cli.json {
            return super::print_json(&reply);
        }
        return super::list::print_page(&reply);
    }
    counts(cli, Hub::open(layout, config, Mode::ReadPreferWrite)?)
}

fn counts(cli: &super::Cli, hub: Hub) -> anyhow::Result<()> {
    let s = hub.stats()?;
    if cli.json {
        return super::print_json(&s);
    }
    outln!("root:        {}", s.root);
    outln!(
        "memories:    {} ({} facts, {} chunks from {} documents, {} forgotten)",
        s.counts.memories,
        s.counts.facts,
        s.counts.chunks,
        s.counts.documents,
        s.counts.forgotten
    );
    let sorted = |m: &std::collections::HashMap<String, u64>| {
        let mut v: Vec<_> = m.iter().map(|(k, n)| format!("{k}={n}")).collect();
        v.sort();
        v.join(" ")
    };
    outln!("by stage:    {}", sorted(&s.counts.by_stage));
    outln!("by scene:    {}", sorted(&s.counts.by_scene));
    outln!("by privacy:  {}", sorted(&s.counts.by_privacy));
    outln!("by tier:     {}", sorted(&s.counts.by_tier));
    outln!(
        "journal:     {} files, {} bytes",
        s.journal_files,
        s.journal_bytes
    );
    outln!(
        "index:       {} bytes, {} text documents, {} vectors",
        s.index_bytes,
        s.text_documents,
        s.vectors
    );
    if !s.writer {
        outln!("note:        another process holds the writer lock; showing its index");
    }
    if !s.issues.is_empty() {
        outln!("issues:");
        for i in &s.issues {
            outln!("  {i}");
        }
    }
    Ok(())
}
