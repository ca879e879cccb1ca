//! `memd ingest`: remember one chat message as short-term memory, as the
//! local operator, through the same use case as `POST /v1/ingest` (sent to
//! the running daemon's `/v1/ingest` when there is one).

use chrono::{DateTime, FixedOffset};

use super::daemon::Target;
use crate::api::{IngestBody, Sender};

/// Arguments of `memd ingest`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The provider's message id (repeats of the same message answer NOOP).
    #[arg(long)]
    message_id: String,
    /// What was said (may start with '-').
    #[arg(long, allow_hyphen_values = true)]
    text: String,
    /// The scene it was said in (default: main).
    #[arg(long)]
    scene: Option<String>,
    /// Who said it: provider user id.
    #[arg(long)]
    sender_id: Option<String>,
    /// Who said it: display name (needs --sender-id).
    #[arg(long, requires = "sender_id")]
    sender_name: Option<String>,
    /// The owner said it.
    #[arg(long)]
    from_owner: bool,
    /// The agent said it.
    #[arg(long)]
    from_self: bool,
    /// When it was said (RFC 3339); the TTL counts from here.
    #[arg(long)]
    sent_at: Option<DateTime<FixedOffset>>,
    /// Hours to keep it searchable (1-168, default ingest.ttlHours).
    #[arg(long)]
    ttl_hours: Option<u32>,
    /// The conversation it belongs to.
    #[arg(long)]
    session: Option<String>,
}

impl Args {
    /// The `/v1/ingest` body these arguments stand for.
    fn body(&self) -> IngestBody {
        IngestBody {
            message_id: self.message_id.clone(),
            text: self.text.clone(),
            scene: self.scene.clone(),
            sender: self.sender_id.as_ref().map(|id| Sender {
                id: id.clone(),
                name: self.sender_name.clone(),
            }),
            from_owner: self.from_owner,
            from_self: self.from_self,
            sent_at: self.sent_at,
            ttl_hours: self.ttl_hours,
            session: self.session.clone(),
        }
    }
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let outcome = target.call("/v1/ingest", args.body(), |hub, c, body| {
        hub.ingest(c, body)
    })?;
    if cli.json {
        return super::print_json(&outcome);
    }
    match (&outcome.id, &outcome.reason) {
        (Some(id), _) => outln!("{id}"),
        (None, Some(reason)) => outln!("skipped: {reason}"),
        (None, None) => outln!("skipped"),
    }
    Ok(())
}
