//! `memd write`: write one memory as the local operator, through the same
//! use case as `POST /v1/write` (the CLI builds the same request body).

use super::daemon::Target;
use crate::api::WriteBody;

/// Arguments of `memd write`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scene (audience) the memory lives in, e.g. main, qq:owner, qq:group:123 (default: main;
    /// with --supersedes, the replaced memory's).
    #[arg(long)]
    scene: Option<String>,
    /// The memory text (may start with '-').
    #[arg(long, allow_hyphen_values = true)]
    text: String,
    /// Kind: note (default), fact, preference, event, todo, …
    #[arg(long)]
    kind: Option<String>,
    /// Comma-separated tags (with --supersedes: default the replaced memory's; "" clears them).
    #[arg(long, value_delimiter = ',')]
    tags: Option<Vec<String>>,
    /// normal (default) | personal | sensitive | secret (work, financial = sensitive).
    #[arg(long)]
    privacy: Option<String>,
    /// Optional title.
    #[arg(long)]
    title: Option<String>,
    /// owner (default) | self | other.
    #[arg(long)]
    subject: Option<String>,
    /// Importance between 0 and 1 (default 0.5).
    #[arg(long)]
    importance: Option<f32>,
    /// Retention tier t0-t3 (default: chosen from kind, source and content).
    #[arg(long)]
    tier: Option<String>,
    /// long (default) or short (expires after ingest.ttlHours, like chat).
    #[arg(long)]
    stage: Option<String>,
    /// Id of the memory this one replaces; what is not given is kept from it (only the newest
    /// version can be replaced).
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

impl Args {
    /// The `/v1/write` body these arguments stand for.
    fn body(&self) -> crate::Result<WriteBody> {
        Ok(WriteBody {
            text: self.text.clone(),
            scene: self.scene.clone(),
            kind: self.kind.clone(),
            title: self.title.clone(),
            tags: self.tags.as_ref().map(|t| {
                t.iter()
                    .map(|t| t.trim())
                    .filter(|t| !t.is_empty())
                    .map(String::from)
                    .collect()
            }),
            privacy: self.privacy.as_deref().map(str::parse).transpose()?,
            subject: self.subject.as_deref().map(str::parse).transpose()?,
            importance: self.importance,
            tier: self.tier.as_deref().map(str::parse).transpose()?,
            stage: self.stage.as_deref().map(str::parse).transpose()?,
            supersedes: self.supersedes.clone(),
            idempotency_key: self.idempotency_key.clone(),
            // What the operator writes is recorded as written from the CLI.
            source: Some("cli".into()),
            time: self.time.clone(),
            session: self.session.clone(),
            speaker: self.speaker.clone(),
        })
    }
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let outcome = target.call("/v1/write", args.body()?, |hub, c, body| hub.write(c, body))?;
    if cli.json {
        super::print_json(&outcome)
    } else {
        outln!("{}", outcome.id);
        Ok(())
    }
}
