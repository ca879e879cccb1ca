//! The device id of a root: which journal directory this process appends to.
//!
//! Every device appends only to its own files, `memories/facts/<device>/YYYY-MM.jsonl`,
//! and reads every other device's (and the legacy flat `facts/YYYY-MM.jsonl`).
//! The id is `device` from `config.json` when set, else one generated the
//! first time a writer opens the root and kept in `ROOT/device.json`, outside
//! `memories/`, so a file-sync tool that replicates `memories/` never copies
//! it to another device. It is always a safe path component ([`is_device_name`]).
//!
//! Also the names below `memories/facts/` that the journal and the archive
//! share: device directories, month files and the archive directory.

use std::path::Path;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result};
use crate::layout::Layout;

/// The file, directly under the root, that keeps the generated id.
pub(crate) const FILE: &str = "device.json";

/// Longest device id.
const MAX_LEN: usize = 64;

#[derive(Debug, Serialize, Deserialize)]
struct DeviceFile {
    device: String,
    created: chrono::DateTime<Utc>,
}

/// The directory of compressed journal months below `memories/facts/`
/// (see [`crate::store::archive`]); never a device id.
pub(crate) const ARCHIVE_DIR: &str = "archive";

/// Whether `name` looks like a journal month file.
pub fn is_journal_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".jsonl") else {
        return false;
    };
    let b = stem.as_bytes();
    b.len() == 7
        && b[4] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || c.is_ascii_digit())
}

/// Device directories below `facts/`, by name (links to directories are not).
pub fn device_dirs(facts: &Path) -> Result<Vec<String>> {
    if crate::store::links::is_link(facts) {
        tracing::warn!(path = %facts.display(), "symbolic link, not followed; no journal read through it");
        return Ok(Vec::new());
    }
    let entries = match std::fs::read_dir(facts) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("cannot list journal directory", facts),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.ctx("cannot list journal directory", facts)?;
        // `file_type` does not follow links: a linked directory is skipped
        // (see `store::links`), never read as a device's journal.
        let kind = entry
            .file_type()
            .ctx("cannot list journal directory", facts)?;
        if let Some(name) = entry.file_name().to_str()
            && is_device_name(name)
        {
            if kind.is_dir() {
                out.push(name.to_string());
            } else if kind.is_symlink() {
                tracing::warn!(path = %entry.path().display(), "symbolic link, not followed; skipped as a device directory");
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether `name` can be a device directory below `memories/facts/`:
/// 1-64 of `[A-Za-z0-9._-]`, not starting with `.`, not `archive`, and not
/// shaped like a journal month file.
pub fn is_device_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && !name.starts_with('.')
        && name != ARCHIVE_DIR
        && !is_journal_name(name)
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `name` made into a device id: unsafe characters become `-`, cut to 64
/// bytes. `None` if nothing usable is left.
pub(crate) fn sanitize(name: &str) -> Option<String> {
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

/// The device id for `layout`, given the configured device name (`device` in
/// `config.json`, empty for none). With `create` (the writer),
/// a missing or unreadable `device.json` is (re)written with a new id;
/// without it, an id that cannot be read is reported as `unknown`.
pub(crate) fn resolve(layout: &Layout, configured: &str, create: bool) -> Result<String> {
    if !configured.trim().is_empty() {
        if let Some(id) = sanitize(configured) {
            return Ok(id);
        }
        tracing::warn!(config.device = %configured, "config device is not usable as a directory name; using the root's generated id");
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
    let id = generate(&if configured.is_empty() {
        host_name()
    } else {
        configured.to_string()
    });
    let file = DeviceFile {
        device: id.clone(),
        created: Utc::now(),
    };
    let bytes = serde_json::to_vec_pretty(&file)
        .map_err(|e| crate::error::Error::Internal(format!("device file: {e}")))?;
    crate::base::durable::write_atomic(&path, &bytes)?;
    tracing::info!(device = %id, "generated the device id of this root");
    Ok(id)
}

/// The host name, else `unknown`.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
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
        assert_eq!(resolve(&layout, "", false).unwrap(), "unknown");
        let id = resolve(&layout, "", true).unwrap();
        assert!(is_device_name(&id));
        assert_eq!(resolve(&layout, "", true).unwrap(), id);
        assert_eq!(resolve(&layout, "", false).unwrap(), id);
        assert_eq!(resolve(&layout, "studio", true).unwrap(), "studio");
        // A damaged file is replaced, never fatal.
        std::fs::write(dir.path().join(FILE), "{").unwrap();
        let again = resolve(&layout, "", true).unwrap();
        assert!(is_device_name(&again));
    }
}
