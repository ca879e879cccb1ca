//! `memd archive`: compress old journal months, search expired memories, and
//! restore one (each needs the writer lock; refused while a server runs).

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
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    match &args.action {
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
