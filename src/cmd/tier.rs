//! `memd tier`: a memory's retention tier, through the same use cases as
//! `POST /v1/tier` and `POST /v1/list` (through the running daemon if there
//! is one). `show` says its tier, retrievals and the promotion they lead to,
//! its expiry and warning window; `set` moves it to another tier (a new
//! `put` line, same id); `list` pages through one tier, newest first.

use super::daemon::Target;
use crate::api::{ListBody, TierBody, TierReply};
use crate::model::Tier;

/// Arguments of `memd tier`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    action: Action,
}

/// `memd tier` actions.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// A memory's tier, retrievals, promotion, expiry and warning window.
    Show {
        /// The fact id.
        id: String,
    },
    /// Move a memory to another tier (t0 pins it).
    Set {
        /// The fact id.
        id: String,
        /// t0, t1, t2 or t3.
        tier: Tier,
    },
    /// The memories of one tier, newest first.
    List {
        /// t0, t1, t2 or t3.
        tier: Tier,
        /// Rows per page (1-100).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Continue after this cursor.
        #[arg(long)]
        cursor: Option<String>,
    },
}

impl Args {
    /// `set` writes; `show` and `list` only read.
    pub(super) fn mode(&self) -> crate::hub::Mode {
        match self.action {
            Action::Set { .. } => crate::hub::Mode::Write,
            _ => crate::hub::Mode::ReadPreferWrite,
        }
    }
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let (id, set) = match &args.action {
        Action::List {
            tier,
            limit,
            cursor,
        } => {
            let body = ListBody {
                tier: Some(*tier),
                limit: Some(*limit),
                cursor: cursor.clone(),
                ..ListBody::default()
            };
            let reply = super::list::list(&target, body)?;
            if cli.json {
                return super::print_json(&reply);
            }
            return super::list::print_page(&reply);
        }
        Action::Show { id } => (id, None),
        Action::Set { id, tier } => (id, Some(*tier)),
    };
    let body = TierBody {
        id: id.clone(),
        set,
    };
    let reply: TierReply = target.call("/v1/tier", body, |hub, c, body| hub.tier(c, body))?;
    if cli.json {
        return super::print_json(&reply);
    }
    print(&reply)
}

fn print(r: &TierReply) -> anyhow::Result<()> {
    outln!("id:        {}", r.id);
    outln!("scene:     {}", r.scene);
    let changed = if r.changed { " (changed)" } else { "" };
    outln!("tier:      {}{changed}", r.tier);
    match (r.promotes_to, r.accesses_to_promotion) {
        (Some(up), Some(left)) => outln!(
            "accesses:  {} (promoted to {up} after {}: {left} more)",
            r.accesses,
            r.promote_after
        ),
        _ => outln!("accesses:  {} (no promotion from {})", r.accesses, r.tier),
    }
    match r.lifetime_days {
        Some(days) => outln!(
            "lifetime:  {days} days after the last retrieval; warned in the last {} hours",
            r.warning_hours.unwrap_or(0)
        ),
        None => outln!("lifetime:  does not expire"),
    }
    if let Some(t) = r.expires_at {
        let soon = if r.expiring_soon {
            " (expiring soon)"
        } else {
            ""
        };
        outln!("expires:   {}{soon}", t.to_rfc3339());
    }
    Ok(())
}
