//! `memd write`: append one memory.

use crate::hub::{Hub, WriteRequest};
use crate::model::{Scene, parse_kind, parse_tags};

/// Arguments of `memd write`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scene (audience) the memory lives in, e.g. main, qq:owner, qq:group:123.
    #[arg(long)]
    scene: String,
    /// The memory text (may start with '-').
    #[arg(long, allow_hyphen_values = true)]
    text: String,
    /// Kind: note, fact, preference, event, todo, …
    #[arg(long, default_value = "note")]
    kind: String,
    /// Comma-separated tags.
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// normal | personal | sensitive | secret (work, financial = sensitive).
    #[arg(long, default_value = "normal")]
    privacy: String,
    /// Optional title.
    #[arg(long)]
    title: Option<String>,
    /// owner | self | other.
    #[arg(long, default_value = "owner")]
    subject: String,
    /// Importance between 0 and 1.
    #[arg(long, default_value_t = 0.5)]
    importance: f32,
    /// Retention tier t0-t3 (default: chosen from kind, source and content).
    #[arg(long)]
    tier: Option<String>,
    /// Id of the memory this one replaces.
    #[arg(long)]
    supersedes: Option<String>,
    /// Makes retries of the same write return the same id.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// When it happened: ISO 8601 or free text ("8 May 2023", "2023年5月8日").
    #[arg(long)]
    time: Option<String>,
    /// The conversation or session it belongs to.
    #[arg(long)]
    session: Option<String>,
    /// Who said it.
    #[arg(long)]
    speaker: Option<String>,
}

pub(super) fn run(cli: &super::Cli, hub: Hub, args: &Args) -> anyhow::Result<()> {
    let mut req = WriteRequest::new(Scene::parse(&args.scene)?, args.text.clone(), "cli");
    req.kind = parse_kind(&args.kind)?;
    req.tags = parse_tags(&args.tags)?;
    req.privacy = args.privacy.parse()?;
    req.subject = args.subject.parse()?;
    req.title = args.title.clone();
    req.importance = args.importance;
    req.tier = args.tier.as_deref().map(str::parse).transpose()?;
    req.supersedes = args.supersedes.clone();
    req.idempotency_key = args.idempotency_key.clone();
    req.setting = crate::model::Setting::from_input(
        args.time.as_deref(),
        args.session.as_deref(),
        args.speaker.as_deref(),
    );
    let outcome = hub.write(req)?;
    if cli.json {
        super::print_json(&outcome)
    } else {
        outln!("{}", outcome.id);
        Ok(())
    }
}
