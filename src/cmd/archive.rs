//! `memd archive`: compress old journal months, search expired memories, and
//! restore one (each needs the writer lock; refused while a server runs);
//! `archive list` pages through the expired memories, newest first, and with
//! `--months` names the compressed journal months, through the same use
//! cases as `POST /v1/list` and `POST /v1/gc` (through the running daemon if
//! there is one).

use super::daemon::Target;
use crate::api::{GcBody, GcReply, ListBody};
use crate::hub::Hub;

/// Arguments of `memd archive`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do (default: compress old months).
    #[command(subcommand)]
    action: Option<Action>,
    /// Compress months older than this many whole months (default `lifecycle.archiveAfterMonths`).
    #[arg(long)]
    older_than_months: Option<u32>,
}

/// `memd archive` actions.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// Expired memories whose text contains QUERY (the journal still holds them).
    Search {
        /// Text to look for.
        query: String,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Bring an expired memory back for another lifetime of its tier.
    Restore {
        /// The fact id.
        id: String,
    },
    /// The expired memories, newest first (or `--months`: the compressed journal months).
    List {
        /// Rows per page (1-100).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Continue after this cursor.
        #[arg(long)]
        cursor: Option<String>,
        /// The compressed journal months instead.
        #[arg(long)]
        months: bool,
    },
}

impl Args {
    /// Whether this is `archive list` (a read, through the daemon if one runs).
    pub(super) fn is_list(&self) -> bool {
        matches!(self.action, Some(Action::List { .. }))
    }
}

/// `memd archive list`.
pub(super) fn list(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let Some(Action::List {
        limit,
        cursor,
        months,
    }) = &args.action
    else {
        unreachable!("called for archive list only");
    };
    if *months {
        let body = GcBody {
            dry_run: true,
            tier: None,
        };
        let r: GcReply = target.call("/v1/gc", body, |hub, c, body| hub.gc(c, body))?;
        if cli.json {
            return super::print_json(&serde_json::json!({ "archived_months": r.archived_months }));
        }
        if r.archived_months.is_empty() {
            outln!("no compressed journal months");
        }
        for m in &r.archived_months {
            outln!("{m}");
        }
        return Ok(());
    }
    let body = ListBody {
        archived: true,
        limit: Some(*limit),
        cursor: cursor.clone(),
        ..ListBody::default()
    };
    let reply = super::list::list(&target, body)?;
    if cli.json {
        return super::print_json(&reply);
    }
    super::list::print_page(&reply)
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    match &args.action {
        Some(Action::List { .. }) => unreachable!("archive list runs through `list`"),
        None => {
            let months = hub.archive_journal(args.older_than_months)?;
            if cli.json {
                return super::print_json(&serde_json::json!({ "archived": months }));
            }
            if months.is_empty() {
                outln!("nothing to archive");
            }
            for m in months {
                outln!("archived {} ({} lines)", m.month, m.lines);
            }
            Ok(())
        }
        Some(Action::Search { query, limit }) => {
            let body = crate::api::ArchiveSearchBody {
                query: query.clone(),
                limit: Some(*limit),
            };
            let reply = hub.archive_search(&hub.operator(), body)?;
            if cli.json {
                // The same object as `POST /v1/archive/search`.
                return super::print_json(&reply);
            }
            for m in reply.items {
                let expired = m.expires_at.map(|t| t.to_rfc3339()).unwrap_or_default();
                outln!(
                    "{}  expired {expired}  {}",
                    m.id,
                    crate::hub::one_line(&m.text, 80)
                );
            }
            Ok(())
        }
        Some(Action::Restore { id }) => {
            let body = crate::api::RestoreBody { id: id.clone() };
            let m = hub.archive_restore(&hub.operator(), body)?;
            if cli.json {
                return super::print_json(&m);
            }
            let until = m.expires_at.map_or_else(
                || "never expires".to_string(),
                |t| format!("until {}", t.to_rfc3339()),
            );
            outln!("restored {} ({until})", m.id);
            Ok(())
        }
    }
}
