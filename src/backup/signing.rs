//! The root's signing key (`ROOT/backup.key`, 32 random bytes as hex, owner
//! only, made on first use and never archived) and the manifest signature
//! (HMAC-SHA256 from the `hmac` crate over the manifest's exact bytes).
//!
//! A signature names its key by a short public id, so an archive signed by
//! another root is told apart ([`Origin::Foreign`]) from one that claims
//! this root's key and does not match it (refused as altered).

use std::path::PathBuf;

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::manifest::{ManifestMac, damaged};
use crate::base::bytes::{from_hex, hex};
use crate::base::durable;
use crate::config::Layout;
use crate::error::{Error, IoContext, Result};

/// The per-root signing key's file name, next to `memories/`.
pub(crate) const KEY_FILE: &str = "backup.key";

/// The one signature algorithm.
pub(super) const MAC_ALG: &str = "hmac-sha256";

type HmacSha256 = Hmac<Sha256>;

/// Where an archive comes from, as far as its signature tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Origin {
    /// Signed with this root's `backup.key`.
    ThisRoot,
    /// Signed with another key (another root, or a lost key).
    Foreign,
    /// Not signed at all (format 1, or not made by `memd backup create`).
    Unsigned,
}

impl Origin {
    /// How the CLI says it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Origin::ThisRoot => "made on this root",
            Origin::Foreign => "NOT made on this root (signed with another key)",
            Origin::Unsigned => "NOT made on this root (unsigned)",
        }
    }
}

/// The path of this root's signing key.
pub(crate) fn key_path(layout: &Layout) -> PathBuf {
    layout.root.join(KEY_FILE)
}

/// This root's signing key, if it has one.
pub(super) fn load_key(layout: &Layout) -> Result<Option<Vec<u8>>> {
    let path = key_path(layout);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("cannot read backup key", &path),
    };
    let key = from_hex(text.trim()).filter(|k| k.len() == 32);
    key.map(Some).ok_or_else(|| {
        Error::invalid(format!(
            "{} is not 64 hex digits; restore it from where you keep it, or delete it \
             (archives signed with it will then count as foreign)",
            path.display()
        ))
    })
}

/// This root's signing key, made (32 random bytes, owner-only) on first use.
pub(super) fn key_or_create(layout: &Layout) -> Result<Vec<u8>> {
    if let Some(key) = load_key(layout)? {
        return Ok(key);
    }
    let key: [u8; 32] = rand::random();
    std::fs::create_dir_all(&layout.root).ctx("cannot create root", &layout.root)?;
    let path = key_path(layout);
    if durable::create_new(&path, format!("{}\n", hex(&key)).as_bytes())? {
        return Ok(key.to_vec());
    }
    // Another process made it first: use theirs.
    load_key(layout)?.ok_or_else(|| Error::Internal(format!("{} vanished", path.display())))
}

/// A short public name of a key (it reveals nothing about the key).
fn key_id(key: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"memd backup key id\0");
    h.update(key);
    hex(&h.finalize()[..8])
}

fn hmac(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length")
}

/// HMAC-SHA256 of `msg` under `key`.
fn mac(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut m = hmac(key);
    m.update(msg);
    m.finalize().into_bytes().into()
}

/// The signature entry for a manifest's bytes.
pub(super) fn sign(key: &[u8], manifest_bytes: &[u8]) -> ManifestMac {
    ManifestMac {
        alg: MAC_ALG.into(),
        key_id: key_id(key),
        mac: hex(&mac(key, manifest_bytes)),
    }
}

/// Who made an archive, from its signature entry (if any) and this root's
/// key (if any). A signature that names this root's key but does not match
/// (compared in constant time by `hmac`) is refused: the archive was altered.
pub(super) fn origin(
    signature: Option<&ManifestMac>,
    key: Option<&[u8]>,
    manifest_bytes: &[u8],
) -> Result<Origin> {
    match (signature, key) {
        (None, _) => Ok(Origin::Unsigned),
        (Some(s), Some(key)) if s.key_id == key_id(key) => {
            let mut m = hmac(key);
            m.update(manifest_bytes);
            let matches = s.alg == MAC_ALG
                && from_hex(&s.mac).is_some_and(|tag| m.verify_slice(&tag).is_ok());
            if !matches {
                return Err(damaged(
                    "its manifest claims this root's signature but the signature does not match \
                     (the archive was altered after it was made)",
                ));
            }
            Ok(Origin::ThisRoot)
        }
        (Some(_), _) => Ok(Origin::Foreign),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 2 and 6 (a key longer than the block).
        assert_eq!(
            hex(&mac(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&mac(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn signatures_tell_this_root_from_others_and_refuse_alterations() {
        let (key, other) = ([7u8; 32], [8u8; 32]);
        let s = sign(&key, b"manifest");
        assert_eq!(
            origin(Some(&s), Some(&key), b"manifest").unwrap(),
            Origin::ThisRoot
        );
        assert_eq!(
            origin(Some(&s), Some(&other), b"manifest").unwrap(),
            Origin::Foreign
        );
        assert_eq!(
            origin(Some(&s), None, b"manifest").unwrap(),
            Origin::Foreign
        );
        assert_eq!(
            origin(None, Some(&key), b"manifest").unwrap(),
            Origin::Unsigned
        );
        let altered = origin(Some(&s), Some(&key), b"manifesT").unwrap_err();
        assert_eq!(altered.code().as_str(), "INVALID_INPUT");
        let mut bad_hex = s.clone();
        bad_hex.mac = "zz".into();
        assert!(origin(Some(&bad_hex), Some(&key), b"manifest").is_err());
    }

    #[test]
    fn the_key_is_owner_only_and_stable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let a = key_or_create(&layout).unwrap();
        assert_eq!(key_or_create(&layout).unwrap(), a);
        let mode = std::fs::metadata(key_path(&layout))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(key_path(&layout), "not hex").unwrap();
        assert_eq!(
            key_or_create(&layout).unwrap_err().code().as_str(),
            "INVALID_INPUT"
        );
    }
}
