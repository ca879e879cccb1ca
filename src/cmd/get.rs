//! `memd get`: one memory by id, as the local operator, through the same
//! use case as `POST /v1/get` (an expired short-term memory is gone from
//! `get`; `memd archive search` finds it). An older version says so and
//! names the newest one.

use super::daemon::Target;
use crate::api::GetBody;

/// Arguments of `memd get`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Fact id, chunk id (`doc-xxxxxxxx#n`) or document id (`doc-xxxxxxxx`).
    id: String,
    /// The memory as it stood at this instant: RFC 3339, or a date (the end of that day, UTC).
    #[arg(long)]
    as_of: Option<String>,
}

pub(super) fn run(cli: &super::Cli, target: Target, args: &Args) -> anyhow::Result<()> {
    let body = GetBody {
        id: args.id.clone(),
        as_of: args.as_of.clone(),
        ..GetBody::default()
    };
    let reply = target.call("/v1/get", body, |hub, c, body| hub.get(c, body))?;
    if cli.json {
        return super::print_json(&reply);
    }
    let memory = &reply.memory;
    outln!("id:       {}", memory.id);
    if let Some(t) = &memory.title {
        outln!("title:    {t}");
    }
    outln!("scene:    {}", memory.scene);
    outln!(
        "kind:     {}  stage: {}  privacy: {}",
        memory.kind,
        memory.stage,
        memory.privacy
    );
    outln!("time:     {}", memory.ts.to_rfc3339());
    if let Some(at) = reply.as_of {
        outln!("as of:    {}", at.to_rfc3339());
    }
    if !memory.tags.is_empty() {
        outln!("tags:     {}", memory.tags.join(", "));
    }
    if let Some(p) = &memory.path {
        outln!("path:     memories/{p}");
    }
    if let Some(t) = memory.tier {
        outln!("tier:     {t}");
    }
    if let Some(t) = memory.expires_at {
        outln!("expires:  {}", t.to_rfc3339());
    }
    if let Some(old) = &memory.supersedes {
        outln!("supersedes:    {old}");
    }
    if !reply.superseded_by.is_empty() {
        outln!("superseded_by: {}", reply.superseded_by.join(", "));
    }
    if reply.superseded {
        match (&reply.newest, &reply.newest_forgotten) {
            (Some(newest), _) => outln!("version:  older; the newest is {newest}"),
            (None, Some(gone)) => outln!(
                "version:  older; the newest, {gone}, was forgotten (`memd restore {gone}` \
                 undoes that, `memd restore {}` brings this one back)",
                memory.id
            ),
            (None, None) => outln!("version:  older; a newer version replaced it"),
        }
    }
    outln!("\n{}", memory.text);
    Ok(())
}
