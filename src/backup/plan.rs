//! What a restore is about to do, shown before anything moves: the files it
//! adds or extends under `memories/`, and the tokens and config keys it
//! changes when asked to take the archive's `tokens.json` or `config.json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::signing::Origin;
use crate::config::Config;
use crate::error::{Error, IoContext, Result};

/// A token whose entry a restore adds, removes or changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TokenChange {
    /// Token name.
    pub(crate) name: String,
    /// `added`, `removed` or `changed`.
    pub(crate) change: &'static str,
    /// Scopes after the restore (before, for a removed token).
    pub(crate) scopes: Vec<String>,
    /// Scenes after the restore (before, for a removed token).
    pub(crate) scenes: Vec<String>,
    /// For `changed`: which fields differ (`scopes`, `scenes`, `secret`, `revoked_at`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) fields: Vec<String>,
}

/// A config key whose effective value a restore changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ConfigChange {
    /// Dotted key, e.g. `sleep.model.command`.
    pub(crate) key: String,
    /// The value on this root now.
    pub(crate) before: serde_json::Value,
    /// The value from the archive.
    pub(crate) after: serde_json::Value,
}

/// What a restore does, shown before anything moves.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RestorePlan {
    /// Who made the archive.
    pub(crate) origin: Origin,
    /// Files this root lacks, added from the archive.
    pub(crate) added: Vec<String>,
    /// Journal files the archive holds a longer copy of (this root's is a prefix of it).
    pub(crate) extended: Vec<String>,
    /// Archive files identical to this root's, or that this root holds a longer journal of.
    pub(crate) unchanged: usize,
    /// `tokens.json` changes (only with `with_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens: Option<Vec<TokenChange>>,
    /// `config.json` changes (only with `with_config`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) config: Option<Vec<ConfigChange>>,
    /// Items in the archive left as they are on this root, and why.
    pub(crate) not_restored: Vec<String>,
}

impl RestorePlan {
    /// An empty plan for an archive of this origin.
    pub(super) fn new(origin: Origin) -> Self {
        RestorePlan {
            origin,
            added: Vec::new(),
            extended: Vec::new(),
            unchanged: 0,
            tokens: None,
            config: None,
            not_restored: Vec::new(),
        }
    }

    /// The files a restore moves into place, relative to the root.
    pub(super) fn moves(&self) -> Vec<&str> {
        let mut moves: Vec<&str> = self
            .added
            .iter()
            .chain(&self.extended)
            .map(String::as_str)
            .collect();
        if self.tokens.is_some() {
            moves.push("tokens.json");
        }
        if self.config.is_some() {
            moves.push("config.json");
        }
        moves
    }
}

/// The token table's entries by name, from a `tokens.json` (missing: empty).
fn token_entries(path: &Path) -> Result<BTreeMap<String, serde_json::Value>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e).ctx("cannot read", path),
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(format!("{}: not a token table: {e}", path.display())))?;
    let tokens = value["tokens"].as_array().ok_or_else(|| {
        Error::invalid(format!(
            "{}: not a token table (no tokens list)",
            path.display()
        ))
    })?;
    tokens
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .map(|n| (n.to_string(), t.clone()))
                .ok_or_else(|| {
                    Error::invalid(format!("{}: a token without a name", path.display()))
                })
        })
        .collect()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Names, scopes and scenes of the tokens a restore adds, removes or changes.
pub(super) fn token_diff(current: &Path, incoming: &Path) -> Result<Vec<TokenChange>> {
    let before = token_entries(current)?;
    let after = token_entries(incoming)?;
    let mut out = Vec::new();
    for (name, new) in &after {
        let change = |change, fields| TokenChange {
            name: name.clone(),
            change,
            scopes: strings(&new["scopes"]),
            scenes: strings(&new["scenes"]),
            fields,
        };
        match before.get(name) {
            None => out.push(change("added", Vec::new())),
            Some(old) if old != new => {
                let mut keys: BTreeSet<&String> = BTreeSet::new();
                for v in [old, new] {
                    if let Some(o) = v.as_object() {
                        keys.extend(o.keys());
                    }
                }
                let fields = keys
                    .into_iter()
                    .filter(|k| old[k.as_str()] != new[k.as_str()])
                    .map(|k| {
                        if k == "hash" {
                            "secret".into()
                        } else {
                            k.clone()
                        }
                    })
                    .collect();
                out.push(change("changed", fields));
            }
            Some(_) => {}
        }
    }
    for (name, old) in &before {
        if !after.contains_key(name) {
            out.push(TokenChange {
                name: name.clone(),
                change: "removed",
                scopes: strings(&old["scopes"]),
                scenes: strings(&old["scenes"]),
                fields: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// The effective config keys a restore changes (both files must be valid configs).
pub(super) fn config_diff(current: &Path, incoming: &Path) -> Result<Vec<ConfigChange>> {
    // A broken config here is what a restore may be meant to fix: compare with the defaults.
    let before = Config::load_file(current).unwrap_or_default();
    let after = Config::load_file(incoming)
        .map_err(|e| Error::invalid(format!("the archive's config.json is not valid here: {e}")))?;
    let mut a = BTreeMap::new();
    let mut b = BTreeMap::new();
    flatten(
        "",
        &serde_json::to_value(&before).expect("config serialises"),
        &mut a,
    );
    flatten(
        "",
        &serde_json::to_value(&after).expect("config serialises"),
        &mut b,
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    Ok(keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| ConfigChange {
            key: k.clone(),
            before: a.get(k).cloned().unwrap_or(serde_json::Value::Null),
            after: b.get(k).cloned().unwrap_or(serde_json::Value::Null),
        })
        .collect())
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, serde_json::Value>) {
    match v.as_object() {
        Some(o) => {
            for (k, v) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        None => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}
