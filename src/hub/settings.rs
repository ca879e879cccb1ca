//! Use cases: configuration edits (`GET /v1/config-schema`,
//! `/v1/config-state`, `POST /v1/config`) and the reload of a changed
//! `config.json`.
//!
//! Only the keys of `EDITABLE` change without a restart, each an integer
//! within its bounds; the edit is written to `config.json` atomically,
//! keeping the file's other keys, and swapped into the hub's one live
//! config for the next request. Reading the editable values and editing
//! them need `admin`. A `config.json` changed by hand applies its editable
//! keys the same way ([`Hub::reload_config`]), and the lists of `RELOADED`
//! too (`ingest.ownerIds`: who counts as the owner in chat); other keys
//! need a restart.

use super::{Caller, Hub};
use crate::auth::scope;
use crate::base::durable::write_atomic;
use crate::config::Config;
use crate::error::{Error, Result};

/// Keys a config edit may change: `(dotted key, minimum, maximum, description)`.
pub(crate) const EDITABLE: &[(&str, u64, u64, &str)] = &[
    (
        "search.defaultLimit",
        1,
        1000,
        "Results returned when a request gives no limit",
    ),
    (
        "search.maxLimit",
        1,
        1000,
        "Largest limit a request may ask for",
    ),
    (
        "search.orFallbackMinHits",
        0,
        1000,
        "When the AND pass finds fewer hits, an OR pass fills up",
    ),
    (
        "ingest.ttlHours",
        1,
        168,
        "Hours an ingested chat message stays searchable",
    ),
    (
        "http.rateLimitPerMinute",
        0,
        1_000_000,
        "Requests one token may send per minute (0: no limit)",
    ),
];

/// Keys a changed `config.json` applies without a restart besides
/// [`EDITABLE`]: values that are not edited over HTTP (a list is not an
/// integer within bounds) but are read per request from the live config.
pub(crate) const RELOADED: &[&str] = &["ingest.ownerIds"];

impl Hub {
    /// The JSON Schema of `config.json`, generated from the config types
    /// (doc comments become descriptions), with the editable keys and their
    /// bounds in `x-editable`.
    pub fn config_schema(&self, _caller: &Caller) -> serde_json::Value {
        let mut schema =
            serde_json::to_value(schemars::schema_for!(Config)).expect("schema serialises");
        let editable: serde_json::Map<String, serde_json::Value> = EDITABLE
            .iter()
            .map(|(key, min, max, description)| {
                (
                    (*key).to_string(),
                    serde_json::json!({ "type": "integer", "minimum": min, "maximum": max, "description": description }),
                )
            })
            .collect();
        schema["title"] = serde_json::json!("memd configuration (config.json)");
        schema["x-editable"] = serde_json::Value::Object(editable);
        schema
    }

    /// The editable keys and their values in force (`admin`).
    pub fn config_state(&self, caller: &Caller) -> Result<serde_json::Value> {
        caller.require(scope::ADMIN)?;
        Ok(serde_json::json!({ "values": editable_values(&self.config()) }))
    }

    /// Changes editable keys (`admin`): `{ "<dotted key>": value, … }`,
    /// written to `config.json` and applied to the next request.
    pub fn set_config(
        &self,
        caller: &Caller,
        body: serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value> {
        caller.require(scope::ADMIN)?;
        check_edit(&body)?;
        let path = self.layout().config();
        let mut file: serde_json::Value = match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t)
                .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
            Err(e) => {
                return Err(Error::Io {
                    context: format!("cannot read {}", path.display()),
                    source: e,
                });
            }
        };
        for (key, value) in body {
            set_dotted(&mut file, &key, value);
        }
        let applied: Config = serde_json::from_value(file.clone())
            .map_err(|e| Error::invalid(format!("config: {e}")))?;
        applied.validate()?;
        let text = serde_json::to_string_pretty(&file).expect("config serialises");
        write_atomic(&path, text.as_bytes())?;
        let values = editable_values(&applied);
        self.update_config(|current| merge_editable(current, &applied))?;
        Ok(serde_json::json!({ "values": values }))
    }

    /// Re-reads `config.json` and applies its editable keys and the
    /// `RELOADED` ones without a restart (the server's watcher calls it).
    /// Other keys need one.
    pub fn reload_config(&self) -> Result<()> {
        let from = Config::load(self.layout())?;
        self.update_config(|current| merge_editable(current, &from))?;
        Ok(())
    }
}

/// Refuses an empty edit, a key outside [`EDITABLE`] and a value outside its bounds.
fn check_edit(body: &serde_json::Map<String, serde_json::Value>) -> Result<()> {
    if body.is_empty() {
        return Err(Error::invalid("give at least one key to change"));
    }
    for (key, value) in body {
        let Some((_, min, max, _)) = EDITABLE.iter().find(|(k, ..)| k == key) else {
            let keys: Vec<&str> = EDITABLE.iter().map(|(k, ..)| *k).collect();
            return Err(Error::invalid(format!(
                "{key:?} cannot be changed over HTTP; editable keys are {}",
                keys.join(", ")
            )));
        };
        match value.as_u64() {
            Some(n) if (*min..=*max).contains(&n) => {}
            _ => {
                return Err(Error::invalid(format!(
                    "{key} must be an integer between {min} and {max}"
                )));
            }
        }
    }
    Ok(())
}

fn pointer(key: &str) -> String {
    format!("/{}", key.replace('.', "/"))
}

fn editable_values(cfg: &Config) -> serde_json::Value {
    let all = serde_json::to_value(cfg).expect("config serialises");
    let mut out = serde_json::Map::new();
    for (key, ..) in EDITABLE {
        if let Some(v) = all.pointer(&pointer(key)) {
            out.insert((*key).to_string(), v.clone());
        }
    }
    serde_json::Value::Object(out)
}

/// `current` with the editable and [`RELOADED`] keys taken from `from`:
/// what a changed `config.json` may change without a restart.
fn merge_editable(current: &Config, from: &Config) -> Result<Config> {
    let mut merged = serde_json::to_value(current).expect("config serialises");
    if let serde_json::Value::Object(values) = editable_values(from) {
        for (key, value) in values {
            set_dotted(&mut merged, &key, value);
        }
    }
    let all = serde_json::to_value(from).expect("config serialises");
    for key in RELOADED {
        if let Some(value) = all.pointer(&pointer(key)) {
            set_dotted(&mut merged, key, value.clone());
        }
    }
    let config: Config =
        serde_json::from_value(merged).map_err(|e| Error::invalid(format!("config: {e}")))?;
    config.validate()?;
    Ok(config)
}

/// Sets `value` at a dotted `key` inside a JSON object, creating parents.
fn set_dotted(root: &mut serde_json::Value, key: &str, value: serde_json::Value) {
    let mut cur = root;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = serde_json::json!({});
        }
        let map = cur.as_object_mut().expect("made an object above");
        if i + 1 == parts.len() {
            map.insert((*part).to_string(), value);
            return;
        }
        cur = map
            .entry((*part).to_string())
            .or_insert_with(|| serde_json::json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editable_keys_exist_in_the_config() {
        let values = editable_values(&Config::default());
        for (key, ..) in EDITABLE {
            assert!(values.get(*key).is_some(), "{key}");
        }
        let all = serde_json::to_value(Config::default()).unwrap();
        for key in RELOADED {
            assert!(all.pointer(&pointer(key)).is_some(), "{key}");
        }
        let mut v = serde_json::json!({"search": {"maxLimit": 10}});
        set_dotted(&mut v, "search.defaultLimit", serde_json::json!(3));
        set_dotted(&mut v, "ingest.ttlHours", serde_json::json!(2));
        assert_eq!(
            v,
            serde_json::json!({"search": {"maxLimit": 10, "defaultLimit": 3}, "ingest": {"ttlHours": 2}})
        );
    }
}
