//! Identifier schemes: fact ids, document and chunk ids, content hashes.
//!
//! Fact id: `<origin>-<scene>-<time36>-<rand4>` where origin names how the fact
//! entered (`fact` for writes, `chat` for ingest, `sleep` for consolidation,
//! `import`), scene has `:` replaced by `-`, time36 is the write time in
//! milliseconds in base 36 and rand4 is four random hex digits.
//! Document id: `doc-<pathHash8>`, or `doc-id-<id>` when the front matter
//! gives `id:`; chunk id: `<doc id>#<n>`.

use chrono::{DateTime, Utc};
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::model::Scene;

/// Formats `n` in lowercase base 36.
pub(crate) fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut buf = Vec::new();
    loop {
        buf.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    buf.reverse();
    String::from_utf8(buf).expect("base36 digits are ASCII")
}

/// A new fact id for a fact entering through `origin` at `ts`.
pub fn fact_id(origin: &str, scene: &Scene, ts: DateTime<Utc>) -> String {
    let millis = u64::try_from(ts.timestamp_millis()).unwrap_or(0);
    let rand4: u16 = rand::rng().random();
    format!(
        "{origin}-{}-{}-{rand4:04x}",
        scene.id_part(),
        base36(millis)
    )
}

/// Lowercase hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    crate::base::bytes::hex(&Sha256::digest(bytes))
}

/// `doc-<first 8 hex of sha256(path)>` for a path relative to `memories/`, with `/` separators.
pub fn doc_id(rel_path: &str) -> String {
    format!("doc-{}", &sha256_hex(rel_path.as_bytes())[..8])
}

/// The id of a document whose front matter says `id: <id>`: `doc-id-<id>`,
/// whatever its path (it survives a rename). `<id>` is 1–64 ASCII letters,
/// digits, `_` or `-`, starting with a letter or digit ([`valid_doc_key`]);
/// the `id-` infix keeps it apart from path ids, which are hex.
pub fn doc_id_from_key(key: &str) -> String {
    format!("doc-id-{key}")
}

/// Whether `key` is an acceptable front matter `id`.
pub fn valid_doc_key(key: &str) -> bool {
    (1..=64).contains(&key.len())
        && key.starts_with(|c: char| c.is_ascii_alphanumeric())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The id of chunk `n` of a document.
pub(crate) fn chunk_id(doc_id: &str, n: usize) -> String {
    format!("{doc_id}#{n}")
}

/// Whether an id names a document or one of its chunks.
pub(crate) fn is_doc_id(id: &str) -> bool {
    id.starts_with("doc-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_values() {
        for (n, want) in [
            (0, "0"),
            (35, "z"),
            (36, "10"),
            (1_700_000_000_000, "loyw3v28"),
        ] {
            assert_eq!(base36(n), want);
        }
    }

    #[test]
    fn fact_id_shape() {
        let scene = Scene::parse("qq:group:650866701").unwrap();
        let ts = DateTime::from_timestamp_millis(1_700_000_000_000).unwrap();
        let id = fact_id("fact", &scene, ts);
        assert!(id.starts_with("fact-qq-group-650866701-loyw3v28-"), "{id}");
        assert_eq!(id.rsplit('-').next().unwrap().len(), 4);
    }

    #[test]
    fn doc_ids() {
        let d = doc_id("user/identity.md");
        assert!(d.starts_with("doc-") && d.len() == 12);
        assert_eq!(d, doc_id("user/identity.md"));
        assert_ne!(d, doc_id("user/other.md"));
        assert_eq!(chunk_id(&d, 2), format!("{d}#2"));
    }
}
