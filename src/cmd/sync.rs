//! `memd sync init | status`: Syncthing for `memories/` (see [`crate::sync`]).

use crate::config::{Config, Layout};
use crate::hub::{Hub, Mode};
use crate::sync::{Syncthing, write_stignore};

/// Arguments of `memd sync`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Write memories/.stignore and, with `sync.syncthingApiKey` set, share
    /// memories/ through the local Syncthing (with --peer devices).
    Init {
        /// A Syncthing device id to share the folder with (repeatable).
        #[arg(long)]
        peer: Vec<String>,
    },
    /// This device, lines applied per device, conflict copies and, when
    /// Syncthing is reachable, its peers (connected, last seen, bytes behind).
    Status,
}

pub(super) fn run(
    cli: &super::Cli,
    layout: Layout,
    config: Config,
    args: &Args,
) -> anyhow::Result<()> {
    match &args.action {
        Action::Init { peer } => {
            let wrote = write_stignore(&layout)?;
            let syncthing = Syncthing::from_config(&config.sync)?;
            let configured = match &syncthing {
                Some(st) => {
                    st.configure(&layout, &config.sync.folder_id, peer)?;
                    Some(st.my_id()?)
                }
                None => None,
            };
            if cli.json {
                return super::print_json(&serde_json::json!({
                    "stignore_written": wrote,
                    "syncthing_device_id": configured,
                    "folder_id": configured.as_ref().map(|_| &config.sync.folder_id),
                    "peers": peer,
                }));
            }
            outln!(
                "memories/.stignore {}",
                if wrote { "written" } else { "unchanged" }
            );
            match configured {
                Some(id) => {
                    outln!(
                        "Syncthing folder {} shares memories/ ({} peers added)",
                        config.sync.folder_id,
                        peer.len()
                    );
                    outln!("this Syncthing's device id: {id}");
                    outln!("on the other device: memd sync init --peer {id}");
                }
                None => outln!(
                    "no sync.syncthingApiKey in config.json: add memories/ as a Syncthing folder by hand"
                ),
            }
            Ok(())
        }
        Action::Status => {
            let hub = Hub::open(layout.clone(), config.clone(), Mode::ReadPreferWrite)?;
            let cursors = hub.index().meta.cursors()?;
            let per_device = crate::hub::health::lines_per_device(&cursors);
            let (copies, total) = crate::store::syncfiles::conflict_copies(&layout.memories(), 20);
            let peers = match Syncthing::from_config(&config.sync)? {
                Some(st) => Some(st.peers(&config.sync.folder_id).map_err(|e| e.to_string())),
                None => None,
            };
            if cli.json {
                let (peers, error) = match peers {
                    Some(Ok(p)) => (Some(p), None),
                    Some(Err(e)) => (None, Some(e)),
                    None => (None, None),
                };
                return super::print_json(&serde_json::json!({
                    "device": hub.device(),
                    "lines_per_device": per_device,
                    "conflict_copies": total,
                    "conflict_files": copies,
                    "peers": peers,
                    "syncthing_error": error,
                }));
            }
            outln!("this device: {}", hub.device());
            for (d, n) in &per_device {
                outln!("  {d}: {n} lines applied");
            }
            outln!("conflict copies: {total}");
            for c in &copies {
                outln!("  {c}");
            }
            match peers {
                None => outln!("Syncthing: no sync.syncthingApiKey configured"),
                Some(Err(e)) => outln!("Syncthing: {e}"),
                Some(Ok(peers)) => {
                    for p in peers {
                        outln!(
                            "peer {}: {}, last seen {}, {} bytes behind",
                            p.device_id,
                            if p.connected {
                                "connected"
                            } else {
                                "not connected"
                            },
                            p.last_seen.as_deref().unwrap_or("never"),
                            p.need_bytes.map_or("?".into(), |b| b.to_string())
                        );
                    }
                }
            }
            Ok(())
        }
    }
}
