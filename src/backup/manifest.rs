//! What an archive holds: the manifest (first entry), the signature entry
//! (second), the paths an archive may hold and the manifest of a root's files.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::sha256_hex;
use crate::model::JOURNAL_VERSION;
use crate::store::journal;

/// Version of the archive layout: 2 adds the signed `manifest.mac` entry.
pub(crate) const BACKUP_FORMAT: u32 = 2;
/// The oldest layout this build still reads (unsigned, so always foreign).
pub(super) const OLDEST_FORMAT: u32 = 1;

/// The manifest's entry name.
pub(super) const MANIFEST: &str = "manifest.json";
/// The signature's entry name.
pub(super) const MAC: &str = "manifest.mac";
/// Top-level items a backup may contain.
const ITEMS: &[&str] = &["memories", "tokens.json", "config.json"];

/// One file in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ManifestFile {
    /// Path relative to the root, `/`-separated.
    pub(crate) path: String,
    /// Size in bytes.
    pub(crate) size: u64,
    /// Lowercase hex sha256.
    pub(crate) sha256: String,
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// Archive layout version.
    pub(crate) format: u32,
    /// Journal line format version of the writer.
    pub(crate) journal_version: u32,
    /// The memd version that wrote it.
    pub(crate) memd_version: String,
    /// When it was made.
    pub(crate) created: DateTime<Utc>,
    /// Every file, sorted by path.
    pub(crate) files: Vec<ManifestFile>,
    /// Journal month files.
    pub(crate) journal_files: usize,
    /// Journal lines.
    pub(crate) journal_lines: u64,
    /// Markdown documents.
    pub(crate) documents: usize,
    /// Symbolic links under `memories/` that were left out (links are never
    /// followed; see [`crate::store::links`]), so a restore says what the
    /// archive does not hold. Absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) links_left_out: Vec<String>,
}

/// The `manifest.mac` entry: which key signed the manifest, and the signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ManifestMac {
    /// The signature algorithm ([`super::signing::MAC_ALG`]).
    pub(super) alg: String,
    /// The signing key's public name.
    pub(super) key_id: String,
    /// The signature, lowercase hex.
    pub(super) mac: String,
}

/// `INVALID_INPUT`: the archive is damaged or not a memd backup.
pub(super) fn damaged(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "backup archive is damaged or not a memd backup: {what}"
    ))
}

/// A journal file, at any depth under `memories/facts/` (per-device directories included).
pub(super) fn is_journal_path(rel: &str) -> bool {
    rel.strip_prefix("memories/facts/")
        .is_some_and(journal::is_journal_path)
}

/// Whether `path` is a plain relative path inside one of the items a backup holds.
pub(super) fn safe_path(path: &str) -> bool {
    !path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
        && ITEMS
            .iter()
            .any(|item| path == *item || path.starts_with(&format!("{item}/")))
}

/// The manifest of `files` (`(path, bytes)`, sorted by path), made now.
pub(super) fn manifest_for(files: &[(String, Vec<u8>)], links: Vec<String>) -> Manifest {
    let journals: Vec<&(String, Vec<u8>)> =
        files.iter().filter(|(p, _)| is_journal_path(p)).collect();
    Manifest {
        format: BACKUP_FORMAT,
        journal_version: JOURNAL_VERSION,
        memd_version: env!("CARGO_PKG_VERSION").to_string(),
        created: Utc::now(),
        files: files
            .iter()
            .map(|(path, bytes)| ManifestFile {
                path: path.clone(),
                size: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            })
            .collect(),
        journal_files: journals.len(),
        journal_lines: journals
            .iter()
            .map(|(_, b)| b.iter().filter(|&&c| c == b'\n').count() as u64)
            .sum(),
        documents: files
            .iter()
            .filter(|(p, _)| p.starts_with("memories/") && p.ends_with(".md"))
            .count(),
        links_left_out: links,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_inside_the_items_are_safe() {
        for (path, ok) in [
            ("memories/facts/2026-11.jsonl", true),
            ("tokens.json", true),
            ("config.json", true),
            ("memories", true),
            ("data/index/meta.db", false),
            ("backup.key", false),
            ("memories/../tokens.json", false),
            ("memories//x.md", false),
            ("/memories/x.md", false),
            ("memories/./x.md", false),
            ("tokens.json.bak", false),
        ] {
            assert_eq!(safe_path(path), ok, "{path}");
        }
        assert!(is_journal_path(
            "memories/facts/laptop-3fa9c2/2026-11.jsonl"
        ));
        assert!(!is_journal_path("memories/notes/2026-11.jsonl"));
    }
}
