//! Several devices, one memory: glue to a local Syncthing that replicates
//! `memories/` (`memd sync init`, `memd sync status`).
//!
//! memd does no replication of its own. Each device appends only to its own
//! journal files, Syncthing copies files between devices, and every daemon
//! indexes the lines that arrive by the merge rules of
//! [`crate::index::merge`]. This module has the store write the folder's
//! `.stignore` ([`crate::store::syncfiles`]), configures the folder and its
//! peers through Syncthing's REST API (when an API key is configured:
//! `sync.syncthingApiKey`), and reads peer state back for `memd sync
//! status`. Only plain HTTP to a loopback Syncthing is supported.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::store::syncfiles;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Writes `memories/.stignore` unless a different one is there (kept: it is
/// the user's). Returns whether it was written.
pub(crate) fn write_stignore(layout: &Layout) -> Result<bool> {
    syncfiles::write_stignore(&layout.memories())
}

/// A Syncthing REST client for one loopback address and API key.
pub(crate) struct Syncthing {
    addr: String,
    key: String,
}

impl Syncthing {
    /// A client from the config; `None` without an API key.
    pub(crate) fn from_config(cfg: &SyncConfig) -> Result<Option<Syncthing>> {
        if cfg.syncthing_api_key.trim().is_empty() {
            return Ok(None);
        }
        let Some(rest) = cfg.syncthing_url.strip_prefix("http://") else {
            return Err(Error::invalid(
                "sync.syncthingUrl must be plain http:// (Syncthing's GUI on loopback)",
            ));
        };
        Ok(Some(Syncthing {
            addr: rest.trim_end_matches('/').to_string(),
            key: cfg.syncthing_api_key.trim().to_string(),
        }))
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let body = body.map(Value::to_string);
        let url = format!("http://{}{path}", self.addr);
        let r = client::send(&client::Request {
            service: "Syncthing",
            method,
            url: &url,
            headers: &[("X-API-Key", &self.key)],
            json: body.as_deref().map(str::as_bytes),
            timeout: TIMEOUT,
            body_limit: client::LOOPBACK_BODY_LIMIT,
        })?;
        if !(200..300).contains(&r.status) {
            return Err(Error::Internal(format!(
                "Syncthing answered {method} {path} with HTTP {}: {}",
                r.status,
                r.body.trim()
            )));
        }
        if r.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&r.body)
            .map_err(|e| Error::Internal(format!("Syncthing sent no JSON for {path}: {e}")))
    }

    /// This Syncthing's device id.
    pub(crate) fn my_id(&self) -> Result<String> {
        let v = self.call("GET", "/rest/system/status", None)?;
        v["myID"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Internal("Syncthing status has no myID".into()))
    }

    /// Shares `memories/` as folder `folder` with `peers` (added as devices
    /// if new). Existing folder settings are kept; peers are added to them.
    pub(crate) fn configure(&self, layout: &Layout, folder: &str, peers: &[String]) -> Result<()> {
        let me = self.my_id()?;
        for peer in peers {
            if peer == &me {
                continue;
            }
            let path = format!("/rest/config/devices/{peer}");
            if self.call("GET", &path, None).is_err() {
                self.call(
                    "PUT",
                    &path,
                    Some(&json!({"deviceID": peer, "addresses": ["dynamic"], "autoAcceptFolders": false})),
                )?;
            }
        }
        let path = format!("/rest/config/folders/{folder}");
        let mut cfg = match self.call("GET", &path, None) {
            Ok(v) if v.is_object() => v,
            _ => json!({
                "id": folder,
                "label": "memd memories",
                "path": layout.memories().to_string_lossy(),
                "type": "sendreceive",
                "fsWatcherEnabled": true,
                "fsWatcherDelayS": 1,
                "rescanIntervalS": 60,
                "devices": [{"deviceID": me}],
            }),
        };
        let devices = cfg["devices"].as_array().cloned().unwrap_or_default();
        let mut ids: Vec<String> = devices
            .iter()
            .filter_map(|d| d["deviceID"].as_str().map(str::to_string))
            .collect();
        for p in std::iter::once(&me).chain(peers) {
            if !ids.contains(p) {
                ids.push(p.clone());
            }
        }
        cfg["devices"] = ids.iter().map(|d| json!({"deviceID": d})).collect();
        self.call("PUT", &path, Some(&cfg))?;
        Ok(())
    }

    /// Peers of `folder`: connected, last seen and bytes they still need
    /// from us... and we from them is not reported (Syncthing reports what
    /// each remote needs).
    pub(crate) fn peers(&self, folder: &str) -> Result<Vec<Peer>> {
        let me = self.my_id()?;
        let cfg = self.call("GET", &format!("/rest/config/folders/{folder}"), None)?;
        let conns = self.call("GET", "/rest/system/connections", None)?;
        let stats = self.call("GET", "/rest/stats/device", None)?;
        let mut out = Vec::new();
        for d in cfg["devices"].as_array().cloned().unwrap_or_default() {
            let Some(id) = d["deviceID"].as_str() else {
                continue;
            };
            if id == me {
                continue;
            }
            let completion = self
                .call(
                    "GET",
                    &format!("/rest/db/completion?folder={folder}&device={id}"),
                    None,
                )
                .ok();
            out.push(Peer {
                device_id: id.to_string(),
                connected: conns["connections"][id]["connected"]
                    .as_bool()
                    .unwrap_or(false),
                last_seen: stats[id]["lastSeen"].as_str().map(str::to_string),
                need_bytes: completion.as_ref().and_then(|c| c["needBytes"].as_u64()),
                completion: completion.as_ref().and_then(|c| c["completion"].as_f64()),
            });
        }
        Ok(out)
    }
}

/// One Syncthing peer of the memories folder.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Peer {
    /// Syncthing device id.
    pub(crate) device_id: String,
    /// Connected now.
    pub(crate) connected: bool,
    /// Last seen (Syncthing's clock), if ever.
    pub(crate) last_seen: Option<String>,
    /// Bytes of the folder the peer still needs (behind).
    pub(crate) need_bytes: Option<u64>,
    /// Percent of the folder the peer has.
    pub(crate) completion: Option<f64>,
}

/// The local Syncthing that replicates `memories/` between devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SyncConfig {
    /// Syncthing's REST address (plain http on loopback).
    pub(crate) syncthing_url: String,
    /// Syncthing's API key (its GUI settings); empty: `memd sync` only writes
    /// `.stignore` and reports what memd itself knows.
    pub(crate) syncthing_api_key: String,
    /// The Syncthing folder id used for `memories/`.
    pub(crate) folder_id: String,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            syncthing_url: "http://127.0.0.1:8384".into(),
            syncthing_api_key: String::new(),
            folder_id: "memd-memories".into(),
        }
    }
}
