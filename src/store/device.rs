//! The device id of a root: which journal directory this process appends to.
//!
//! Every device appends only to its own files, `memories/facts/<device>/YYYY-MM.jsonl`,
//! and reads every other device's (and the legacy flat `facts/YYYY-MM.jsonl`).
//! The id is `device` from `config.json` when set, else one generated the
//! first time a writer opens the root and kept in `ROOT/device.json`, outside
//! `memories/`, so a file-sync tool that replicates `memories/` never copies
//! it to another device. It is always a safe path component ([`is_device_name`]).

use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::config::{Config, Layout};
use crate::error::Result;

/// The file, directly under the root, that keeps the generated id.
pub const FILE: &str = "device.json";

/// Longest device id.
const MAX_LEN: usize = 64;

#[derive(Debug, Serialize, Deserialize)]
struct DeviceFile {
    device: String,
    created: chrono::DateTime<Utc>,
}

/// Whether `name` can be a device directory below `memories/facts/`:
/// 1-64 of `[A-Za-z0-9._-]`, not starting with `.`, not `archive`, and not
/// shaped like a journal month file.
pub fn is_device_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && !name.starts_with('.')
        && name != crate::store::archive::DIR
        && !crate::store::journal::is_journal_name(name)
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `name` made into a device id: unsafe characters become `-`, cut to 64
/// bytes. `None` if nothing usable is left.
pub fn sanitize(name: &str) -> Option<String> {
    let mut out: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    out = out.trim_start_matches('.').to_string();
    out.truncate(MAX_LEN);
    is_device_name(&out).then_some(out)
}

/// The device id for `layout` under `config`. With `create` (the writer),
/// a missing or unreadable `device.json` is (re)written with a new id;
/// without it, an id that cannot be read is reported as `unknown`.
pub fn resolve(layout: &Layout, config: &Config, create: bool) -> Result<String> {
    if !config.device.trim().is_empty() {
        if let Some(id) = sanitize(&config.device) {
            return Ok(id);
        }
        tracing::warn!(config.device = %config.device, "config device is not usable as a directory name; using the root's generated id");
    }
    let path = layout.root.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice::<DeviceFile>(&bytes) {
            Ok(f) if is_device_name(&f.device) => return Ok(f.device),
            Ok(_) | Err(_) => {
                tracing::warn!(path = %path.display(), "device file is unreadable; a new device id is generated")
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot read the device file"),
    }
    if !create {
        return Ok("unknown".into());
    }
    let id = generate(&config.device_name());
    let file = DeviceFile {
        device: id.clone(),
        created: Utc::now(),
    };
    let bytes = serde_json::to_vec_pretty(&file)
        .map_err(|e| crate::error::Error::Internal(format!("device file: {e}")))?;
    crate::store::atomic::write_atomic(&path, &bytes)?;
    tracing::info!(device = %id, "generated the device id of this root");
    Ok(id)
}

/// `<host>-<6 hex>`: readable, and distinct for two roots on one host.
fn generate(host: &str) -> String {
    let mut prefix = sanitize(host).unwrap_or_else(|| "device".into());
    prefix.truncate(24);
    let prefix = prefix.trim_end_matches(['.', '-']).to_ascii_lowercase();
    let prefix = if prefix.is_empty() {
        "device".to_string()
    } else {
        prefix
    };
    let n: u32 = rand::Rng::random(&mut rand::rng());
    format!("{prefix}-{:06x}", n & 0xff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_path_components() {
        for ok in ["laptop", "my-host.local", "a_b-1"] {
            assert!(is_device_name(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "archive",
            "a/b",
            "2026-11.jsonl",
            "x y",
            &"a".repeat(65),
        ] {
            assert!(!is_device_name(bad), "{bad:?}");
        }
        assert_eq!(
            sanitize("Bob's Mac/Book").as_deref(),
            Some("Bob-s-Mac-Book")
        );
        assert_eq!(sanitize("../..").as_deref(), Some("-.."));
        assert_eq!(sanitize("archive"), None);
        assert!(is_device_name(&generate("Host Name")));
        assert!(generate("").starts_with("device-"));
    }

    #[test]
    fn generated_once_per_root_and_config_wins() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let config = Config::default();
        assert_eq!(resolve(&layout, &config, false).unwrap(), "unknown");
        let id = resolve(&layout, &config, true).unwrap();
        assert!(is_device_name(&id));
        assert_eq!(resolve(&layout, &config, true).unwrap(), id);
        assert_eq!(resolve(&layout, &config, false).unwrap(), id);
        let named = Config {
            device: "studio".into(),
            ..Config::default()
        };
        assert_eq!(resolve(&layout, &named, true).unwrap(), "studio");
        // A damaged file is replaced, never fatal.
        std::fs::write(dir.path().join(FILE), "{").unwrap();
        let again = resolve(&layout, &config, true).unwrap();
        assert!(is_device_name(&again));
    }
}
