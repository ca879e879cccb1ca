//! `memd token`: issue, list and revoke API tokens in `ROOT/tokens.json`.
//!
//! Safe next to a running server: the server re-reads the file when it
//! changes, so a new or revoked token takes effect on the next request.

use crate::auth::{self, IssueRequest};
use crate::layout::Layout;

/// Arguments of `memd token`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Issue a token; prints its secret once (only a hash is stored).
    Issue {
        /// Unique name (shown in audit lines).
        #[arg(long)]
        name: String,
        /// dsh-desktop | qq-owner | pet | qq-group-<id> | qq-private-<id> | qq-disclose.
        #[arg(long)]
        preset: Option<String>,
        /// Extra scopes (comma-separated): read, write, *, sensitive:read, secret:read,
        /// secret:write, disclose:group, from_owner, admin.
        #[arg(long, value_delimiter = ',')]
        scope: Vec<String>,
        /// Extra scenes (comma-separated); the first scene is the token's default.
        #[arg(long, value_delimiter = ',')]
        scene: Vec<String>,
    },
    /// List tokens (names, scopes, scenes; never secrets or hashes).
    List,
    /// Revoke a token by name.
    Revoke {
        /// Token name.
        name: String,
    },
}

pub(super) fn run(cli: &super::Cli, layout: &Layout, args: &Args) -> anyhow::Result<()> {
    let path = layout.tokens();
    match &args.action {
        Action::Issue {
            name,
            preset,
            scope,
            scene,
        } => {
            let (info, secret) = auth::issue(
                &path,
                &IssueRequest {
                    name: name.clone(),
                    preset: preset.clone(),
                    scopes: scope.clone(),
                    scenes: scene.clone(),
                },
                // No hub is opened (this is safe next to a running server):
                // the stamp is the system clock's.
                chrono::Utc::now(),
            )?;
            if cli.json {
                let mut v = serde_json::to_value(&info)?;
                v["secret"] = serde_json::Value::String(secret);
                return super::print_json(&v);
            }
            outln!("{secret}");
            eprintln!(
                "issued token {:?} (scopes: {}; scenes: {}). The secret above is shown only once.",
                info.name,
                info.scopes.join(", "),
                info.scenes
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(())
        }
        Action::List => {
            let tokens = auth::list(&path)?;
            if cli.json {
                return super::print_json(&serde_json::json!({ "tokens": tokens }));
            }
            for t in tokens {
                let state = if t.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                outln!(
                    "{:<24} {:<8} scenes={} scopes={}",
                    t.name,
                    state,
                    t.scenes
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    t.scopes.join(",")
                );
            }
            Ok(())
        }
        Action::Revoke { name } => {
            let info = auth::revoke(&path, name, chrono::Utc::now())?;
            if cli.json {
                return super::print_json(&info);
            }
            outln!("revoked {}", info.name);
            Ok(())
        }
    }
}
