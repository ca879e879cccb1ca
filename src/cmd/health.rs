//! `memd health`: asks a running `memd serve` for `/v1/health` and prints it
//! (counts and jobs with an admin `--token`; `memd stats` reads them locally).

use std::time::Duration;

use crate::config::Config;

/// Arguments of `memd health`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address of the daemon (default: config `listen`).
    #[arg(long)]
    addr: Option<String>,
    /// An admin token: adds counts, pending vectors and scheduled jobs (without
    /// one, the daemon shows only the status of each component).
    #[arg(long, env = "MEMD_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub(super) fn run(cli: &super::Cli, config: &Config, args: &Args) -> anyhow::Result<()> {
    let addr = args.addr.clone().unwrap_or_else(|| config.listen.clone());
    let response = crate::client::get(
        &addr,
        "/v1/health",
        args.token.as_deref(),
        Duration::from_secs(5),
    )?;
    if response.status != 200 {
        anyhow::bail!(crate::Error::from_reply(response.status, &response.body));
    }
    let body: serde_json::Value =
        serde_json::from_str(&response.body).map_err(|e| crate::Error::UpstreamInvalid {
            service: format!("the memd daemon at {addr}"),
            reason: "its health answer is not JSON".into(),
            source: Some(Box::new(e)),
        })?;
    if cli.json {
        return super::print_json(&body);
    }
    outln!("{}", serde_json::to_string_pretty(&body)?);
    Ok(())
}
