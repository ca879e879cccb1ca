//! Tokens: who may call the service, in which scenes, with which scopes.
//!
//! A token is a name, a set of scopes and a set of scenes. Its secret is shown
//! once when issued; `ROOT/tokens.json` stores only the sha256 of it (secrets
//! are 256 random bits, so a fast hash is enough). The file is replaced
//! atomically (temp file + rename) on every change, and a running server
//! re-reads it whenever its modification time or size changes, so issuing and
//! revoking take effect without a restart. Secrets are compared by hash in
//! constant time and never logged.
//!
//! What a `Grant` may see and do in a request (scene resolution, the
//! filters of reads and writes) is decided by the hub's
//! [`Caller`](crate::hub::Caller); this module only says who the caller is.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::base::durable::write_atomic;
use crate::error::{Error, IoContext, Result};
use crate::ids::sha256_hex;
use crate::model::Scene;

/// Scope names a token may carry.
pub mod scope {
    /// Search, get, recall, recent, timeline, bootstrap, audience in the token's scenes.
    pub(crate) const READ: &str = "read";
    /// Write, forget and ingest in the token's scenes.
    pub(crate) const WRITE: &str = "write";
    /// Read every scene (the whole library), not only the token's own.
    pub(crate) const ALL: &str = "*";
    /// Read `sensitive` memories.
    pub(crate) const SENSITIVE_READ: &str = "sensitive:read";
    /// Read `secret` memories.
    pub(crate) const SECRET_READ: &str = "secret:read";
    /// Write and forget `secret` memories.
    pub(crate) const SECRET_WRITE: &str = "secret:write";
    /// Read one group's recent chat for a member asking in private (`/v1/disclose`).
    pub(crate) const DISCLOSE: &str = "disclose:group";
    /// Honour `from_owner`: the owner's own memories become readable in the scene for one request.
    pub(crate) const FROM_OWNER: &str = "from_owner";
    /// Manage tokens and the configuration.
    pub(crate) const ADMIN: &str = "admin";

    /// Every scope name, for validation and documentation.
    pub(crate) const KNOWN: &[&str] = &[
        READ,
        WRITE,
        ALL,
        SENSITIVE_READ,
        SECRET_READ,
        SECRET_WRITE,
        DISCLOSE,
        FROM_OWNER,
        ADMIN,
    ];
}

/// Preset names, as listed in help and errors (`<id>` is a QQ number).
pub(crate) const PRESETS: &[&str] = &[
    "dsh-desktop",
    "qq-owner",
    "pet",
    "qq-group-<id>",
    "qq-private-<id>",
    "qq-disclose",
];

/// One token as stored in `tokens.json` (the hash, never the secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenRecord {
    /// Unique name, shown in audit lines and logs.
    pub(crate) name: String,
    /// Lowercase hex sha256 of the secret.
    pub(crate) hash: String,
    /// Scopes, see [`scope`].
    pub(crate) scopes: Vec<String>,
    /// Scenes the token may act in; the first is the default.
    pub(crate) scenes: Vec<Scene>,
    /// The preset it was issued from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) preset: Option<String>,
    /// When it was issued.
    pub(crate) created_at: DateTime<Utc>,
    /// When it was revoked; a revoked token authenticates nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) revoked_at: Option<DateTime<Utc>>,
}

/// What a token shows about itself: everything but the hash.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenInfo {
    /// Name.
    pub(crate) name: String,
    /// Scopes.
    pub(crate) scopes: Vec<String>,
    /// Scenes.
    pub(crate) scenes: Vec<Scene>,
    /// Preset, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) preset: Option<String>,
    /// Issued at.
    pub(crate) created_at: DateTime<Utc>,
    /// Revoked at, if revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) revoked_at: Option<DateTime<Utc>>,
}

impl From<&TokenRecord> for TokenInfo {
    fn from(t: &TokenRecord) -> Self {
        TokenInfo {
            name: t.name.clone(),
            scopes: t.scopes.clone(),
            scenes: t.scenes.clone(),
            preset: t.preset.clone(),
            created_at: t.created_at,
            revoked_at: t.revoked_at,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    version: u32,
    tokens: Vec<TokenRecord>,
}

/// The rights of an authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    /// Token name (safe to log).
    pub(crate) name: String,
    /// Scopes.
    pub(crate) scopes: BTreeSet<String>,
    /// Scenes, the first being the default.
    pub(crate) scenes: Vec<Scene>,
    /// Scenes it may write, forget and edit in: its scenes minus the ones its
    /// preset only reads ([`preset_read_only`]); the first is the default.
    pub(crate) write_scenes: Vec<Scene>,
    /// Acts in any scene, listed or not (the local operator only; a token's
    /// scenes are always a list).
    pub(crate) any_scene: bool,
}

impl Grant {
    /// Whether the token carries `scope`.
    pub(crate) fn has(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    /// A grant for a token record.
    pub(crate) fn from_record(t: &TokenRecord) -> Grant {
        let read_only = t.preset.as_deref().map(preset_read_only).unwrap_or(&[]);
        Grant {
            name: t.name.clone(),
            scopes: t.scopes.iter().cloned().collect(),
            scenes: t.scenes.clone(),
            write_scenes: t
                .scenes
                .iter()
                .filter(|s| !read_only.contains(&s.as_str()))
                .cloned()
                .collect(),
            any_scene: false,
        }
    }

    /// The local operator (the CLI): every scope, every scene (`main` by
    /// default), named `cli`.
    pub(crate) fn operator() -> Grant {
        let main = Scene::parse("main").expect("built-in scene names are valid");
        Grant {
            name: "cli".into(),
            scopes: scope::KNOWN.iter().map(|s| s.to_string()).collect(),
            scenes: vec![main.clone()],
            write_scenes: vec![main],
            any_scene: true,
        }
    }
}

/// The local credential of one `memd serve`: a random secret it records for
/// the CLI beside the root (`ROOT/.memd.addr`, private to the user) and
/// accepts as the local operator (`Grant::operator`). Never stored hashed
/// in `tokens.json`: it lives as long as the daemon.
#[derive(Clone)]
pub struct OperatorSecret(std::sync::Arc<str>);

impl std::fmt::Debug for OperatorSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorSecret(..)")
    }
}

impl OperatorSecret {
    /// The secret a daemon accepts.
    pub fn new(secret: &str) -> Self {
        OperatorSecret(std::sync::Arc::from(secret))
    }

    /// Whether `presented` is this secret (compared in constant time).
    pub(crate) fn matches(&self, presented: &str) -> bool {
        crate::base::bytes::constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

/// Scenes a preset reads but never writes in. The pet reads the owner's
/// `main` and `qq:owner` (recall, live chat) but writes, forgets and edits
/// only in `pet`. Derived from the preset name at authentication, so tokens
/// issued before this rule follow it too; scenes added to a preset with
/// `--scene` stay writable.
pub(crate) fn preset_read_only(preset: &str) -> &'static [&'static str] {
    match preset {
        "pet" => &["main", "qq:owner"],
        _ => &[],
    }
}

/// Scopes and scenes of a preset.
pub fn preset(name: &str) -> Result<(Vec<String>, Vec<Scene>)> {
    use scope::*;
    let owner_like = [ALL, READ, WRITE, SENSITIVE_READ, SECRET_READ, SECRET_WRITE];
    let (scopes, scenes): (Vec<&str>, Vec<String>) = match name {
        "dsh-desktop" => (
            owner_like.iter().copied().chain([ADMIN]).collect(),
            vec!["main".into()],
        ),
        "qq-owner" => (owner_like.to_vec(), vec!["qq:owner".into()]),
        "pet" => (
            vec![READ, WRITE],
            vec!["main".into(), "qq:owner".into(), "pet".into()],
        ),
        "qq-disclose" => (vec![DISCLOSE], vec!["qq:bridge".into()]),
        other => {
            let chat = |prefix: &str, kind: &str| {
                other
                    .strip_prefix(prefix)
                    .filter(|id| !id.is_empty())
                    .map(|id| format!("qq:{kind}:{id}"))
            };
            match chat("qq-group-", "group").or_else(|| chat("qq-private-", "private")) {
                Some(scene) => (vec![READ, WRITE, FROM_OWNER], vec![scene]),
                None => {
                    return Err(Error::invalid(format!(
                        "unknown preset {other:?}; presets are {}",
                        PRESETS.join(", ")
                    )));
                }
            }
        }
    };
    let scenes = scenes
        .iter()
        .map(|s| Scene::parse(s))
        .collect::<Result<Vec<_>>>()?;
    Ok((scopes.into_iter().map(String::from).collect(), scenes))
}

fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "token name {name:?} is not valid: use 1-64 letters, digits, '-', '_', '.', ':'"
        )))
    }
}

/// Hash of a presented secret, as stored.
pub(crate) fn hash_secret(secret: &str) -> String {
    sha256_hex(secret.as_bytes())
}

fn read_file(path: &Path) -> Result<TokenFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(TokenFile {
                version: 1,
                tokens: Vec::new(),
            });
        }
        Err(e) => return Err(e).ctx("cannot read tokens", path),
    };
    // A broken token table is the operator's problem, not the caller's: it is
    // reported as an internal error (and refuses everyone) until it is fixed.
    serde_json::from_str(&text).map_err(|e| {
        Error::Internal(format!(
            "{} is unreadable: {e}; fix it or move it away and reissue tokens",
            path.display()
        ))
    })
}

fn write_file(path: &Path, file: &TokenFile) -> Result<()> {
    let text = serde_json::to_string_pretty(file).expect("token file serialises");
    write_atomic(path, text.as_bytes())
}

/// What to issue.
#[derive(Debug, Clone, Default)]
pub struct IssueRequest {
    /// Token name.
    pub name: String,
    /// Preset to start from.
    pub preset: Option<String>,
    /// Extra scopes (all scopes when no preset is given).
    pub scopes: Vec<String>,
    /// Extra scenes (all scenes when no preset is given).
    pub scenes: Vec<String>,
}

/// Issues a token at `now` and returns its record and the secret (shown
/// once, never stored).
pub fn issue(path: &Path, req: &IssueRequest, now: DateTime<Utc>) -> Result<(TokenInfo, String)> {
    validate_name(&req.name)?;
    let (mut scopes, mut scenes) = match &req.preset {
        Some(p) => preset(p)?,
        None => (Vec::new(), Vec::new()),
    };
    for s in &req.scopes {
        let s = s.trim();
        if !scope::KNOWN.contains(&s) {
            return Err(Error::invalid(format!(
                "unknown scope {s:?}; scopes are {}",
                scope::KNOWN.join(", ")
            )));
        }
        if !scopes.iter().any(|x| x == s) {
            scopes.push(s.to_string());
        }
    }
    for s in &req.scenes {
        let s = Scene::parse(s)?;
        if !scenes.contains(&s) {
            scenes.push(s);
        }
    }
    if scopes.is_empty() {
        scopes = vec![scope::READ.into(), scope::WRITE.into()];
    }
    if scenes.is_empty() {
        return Err(Error::invalid(
            "a token needs at least one scene: give --preset or --scene",
        ));
    }
    let mut file = read_file(path)?;
    if file
        .tokens
        .iter()
        .any(|t| t.name == req.name && t.revoked_at.is_none())
    {
        return Err(Error::invalid(format!(
            "a token named {:?} exists; revoke it first or choose another name",
            req.name
        )));
    }
    file.tokens.retain(|t| t.name != req.name);
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let secret = format!("mh_{}", crate::base::bytes::hex(&raw));
    let record = TokenRecord {
        name: req.name.clone(),
        hash: hash_secret(&secret),
        scopes,
        scenes,
        preset: req.preset.clone(),
        created_at: now,
        revoked_at: None,
    };
    let info = TokenInfo::from(&record);
    file.version = 1;
    file.tokens.push(record);
    write_file(path, &file)?;
    Ok((info, secret))
}

/// Revokes the token named `name` at `now`.
pub fn revoke(path: &Path, name: &str, now: DateTime<Utc>) -> Result<TokenInfo> {
    let mut file = read_file(path)?;
    let token = file
        .tokens
        .iter_mut()
        .find(|t| t.name == name && t.revoked_at.is_none())
        .ok_or_else(|| Error::not_found("token", name))?;
    token.revoked_at = Some(now);
    let info = TokenInfo::from(&*token);
    write_file(path, &file)?;
    Ok(info)
}

/// Every token, revoked ones included, without hashes.
pub(crate) fn list(path: &Path) -> Result<Vec<TokenInfo>> {
    Ok(read_file(path)?
        .tokens
        .iter()
        .map(TokenInfo::from)
        .collect())
}

#[derive(Debug, Default)]
struct Loaded {
    stamp: Option<(SystemTime, u64)>,
    tokens: Vec<TokenRecord>,
}

/// The token table of a running server, re-read when the file changes.
#[derive(Debug)]
pub(crate) struct TokenStore {
    path: PathBuf,
    loaded: RwLock<Loaded>,
}

impl TokenStore {
    /// A store over `ROOT/tokens.json` (which may not exist yet).
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        TokenStore {
            path: path.into(),
            loaded: RwLock::new(Loaded::default()),
        }
    }

    fn stamp(&self) -> Option<(SystemTime, u64)> {
        let meta = std::fs::metadata(&self.path).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    }

    fn refresh(&self) -> Result<()> {
        let stamp = self.stamp();
        if self.loaded.read().expect("token table poisoned").stamp == stamp && stamp.is_some() {
            return Ok(());
        }
        let file = read_file(&self.path)?;
        let mut loaded = self.loaded.write().expect("token table poisoned");
        loaded.stamp = stamp;
        loaded.tokens = file.tokens;
        Ok(())
    }

    /// The grant of the active token whose secret this is, if any.
    pub(crate) fn authenticate(&self, secret: &str) -> Result<Option<Grant>> {
        self.refresh()?;
        let presented = hash_secret(secret);
        let loaded = self.loaded.read().expect("token table poisoned");
        // Every active token is compared, so timing does not reveal which one matched.
        let mut found = None;
        for t in loaded.tokens.iter().filter(|t| t.revoked_at.is_none()) {
            if crate::base::bytes::constant_time_eq(t.hash.as_bytes(), presented.as_bytes()) {
                found = Some(Grant::from_record(t));
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_match_the_token_table() {
        let check = |name: &str, scope: &str, scenes: &[&str]| {
            let (scopes, got) = preset(name).unwrap();
            assert!(scopes.iter().any(|s| s == scope), "{name}: {scopes:?}");
            let got: Vec<&str> = got.iter().map(Scene::as_str).collect();
            assert_eq!(got, scenes, "{name}");
        };
        check("dsh-desktop", "admin", &["main"]);
        check("qq-owner", "secret:read", &["qq:owner"]);
        check("pet", "read", &["main", "qq:owner", "pet"]);
        check("qq-group-42", "from_owner", &["qq:group:42"]);
        check("qq-private-7", "write", &["qq:private:7"]);
        check("qq-disclose", "disclose:group", &["qq:bridge"]);
        assert!(preset("qq-group-").is_err());
        assert!(preset("nope").is_err());
        let (pet, _) = preset("pet").unwrap();
        assert!(!pet.iter().any(|s| s.starts_with("secret") || s == "*"));
    }

    #[test]
    fn issue_authenticate_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let store = TokenStore::new(&path);
        assert_eq!(store.authenticate("mh_x").unwrap(), None);
        let req = IssueRequest {
            name: "g".into(),
            preset: Some("qq-group-1".into()),
            ..Default::default()
        };
        let (info, secret) = issue(&path, &req, Utc::now()).unwrap();
        assert_eq!(info.scenes[0].as_str(), "qq:group:1");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&secret), "the secret is never stored");
        assert_eq!(store.authenticate(&secret).unwrap().unwrap().name, "g");
        assert!(issue(&path, &req, Utc::now()).is_err(), "names are unique");
        revoke(&path, "g", Utc::now()).unwrap();
        assert_eq!(store.authenticate(&secret).unwrap(), None);
        let (_, again) = issue(&path, &req, Utc::now()).unwrap();
        assert!(store.authenticate(&again).unwrap().is_some());
    }
}
