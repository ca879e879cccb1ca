//! Root layout and `config.json`.
//!
//! The root is chosen `--root DIR` > env `MEMD_ROOT` > current directory. Under
//! it live `memories/` (source of truth), `data/` (derived) and an optional
//! `config.json`. Every key has a default; `config.example.json` at the repo
//! root lists them all with their defaults and a test keeps the two equal.
//! Unknown keys are refused, so a typo never silently falls back to a default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::embed::Pooling;
use crate::error::{Error, IoContext, Result};
use crate::model::Scene;
use crate::search::SearchMode;

/// Paths under one root.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The root directory.
    pub root: PathBuf,
}

impl Layout {
    /// A layout for `root` (not created yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    /// `memories/`: documents and the fact journal.
    pub fn memories(&self) -> PathBuf {
        self.root.join("memories")
    }

    /// `memories/facts/`: the journal.
    pub fn facts(&self) -> PathBuf {
        self.memories().join("facts")
    }

    /// `data/`: derived files only.
    pub fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    /// `data/index/`: the rebuildable index (tantivy + SQLite).
    pub fn index(&self) -> PathBuf {
        self.data().join("index")
    }

    /// `data/cache/`: derived caches that survive `memd reindex` (vectors).
    pub fn cache(&self) -> PathBuf {
        self.data().join("cache")
    }

    /// `config.json`.
    pub fn config(&self) -> PathBuf {
        self.root.join("config.json")
    }

    /// `tokens.json`: issued tokens, hashed.
    pub fn tokens(&self) -> PathBuf {
        self.root.join("tokens.json")
    }

    /// `data/audit.jsonl`: the HTTP audit log.
    pub fn audit(&self) -> PathBuf {
        self.data().join("audit.jsonl")
    }

    /// The writer lock file.
    pub fn lock(&self) -> PathBuf {
        self.root.join(".memd.lock")
    }

    /// Creates `memories/facts/` and `data/` if missing, and makes the root's
    /// own files private (see [`Layout::tighten`]).
    pub fn create_dirs(&self) -> Result<()> {
        for dir in [self.facts(), self.data()] {
            std::fs::create_dir_all(&dir).ctx("cannot create directory", &dir)?;
        }
        self.tighten();
        Ok(())
    }

    /// What memd keeps under the root and must be readable by its user only:
    /// directories (walked) and single files.
    pub fn private_paths(&self) -> Vec<PathBuf> {
        vec![
            self.memories(),
            self.data(),
            self.root.join("backups"),
            self.tokens(),
            self.config(),
            self.lock(),
        ]
    }

    /// Removes group and other permissions from memd's files under the root:
    /// directories become 0700, files 0600 (execute bits of the owner kept).
    /// A tree is walked only when its top still has such bits (a root made by
    /// an older memd), so this costs one `stat` per path on every open.
    /// Failures (a file owned by someone else) are logged, not fatal:
    /// `memd doctor` reports what is left.
    pub fn tighten(&self) {
        for path in self.private_paths() {
            match open_mode(&path) {
                Some(mode) if mode & 0o077 != 0 => {
                    if let Err(e) = tighten_tree(&path) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot make private");
                    }
                }
                _ => {}
            }
        }
    }
}

/// The permission bits of `path` (not following symlinks), if it exists.
pub fn open_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// Removes group and other permissions from `path` and, for a directory,
/// everything under it. Symlinks are left alone.
pub fn tighten_tree(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            tighten_tree(&entry?.path())?;
        }
    }
    Ok(())
}

/// Makes every file and directory this process creates private to its user
/// (umask 077): SQLite, tantivy, the journal, backups and temp files alike.
/// `memd` calls it first thing; libraries embedding the hub may too.
pub fn private_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Creates (or truncates) `path` readable and writable by its owner only,
/// whatever the umask.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// The whole configuration. Each component receives only its sub-config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Address `memd serve` listens on.
    pub listen: String,
    /// Whether `memd serve` may listen beyond loopback (it then also needs at
    /// least one active token). Off: a non-loopback `listen` is refused.
    pub allow_remote: bool,
    /// Name recorded as the writing device; empty means the host name.
    pub device: String,
    /// Search tuning.
    pub search: SearchConfig,
    /// Audiences that sensitive and secret memories are pinned to.
    pub privacy: PrivacyConfig,
    /// Markdown documents.
    pub docs: DocsConfig,
    /// Backups.
    pub backup: BackupConfig,
    /// Short-term chat from `/v1/ingest`.
    pub ingest: IngestConfig,
    /// The HTTP server.
    pub http: HttpConfig,
    /// The local embedding model for semantic search.
    pub embedder: EmbedderConfig,
    /// Retention tiers, promotion, dedup and archive.
    pub lifecycle: crate::lifecycle::LifecycleConfig,
    /// Nightly consolidation of short-term chat into long-term memory.
    pub sleep: crate::consolidate::SleepConfig,
    /// MCP sessions at `/mcp` of `memd serve`.
    pub mcp: McpConfig,
    /// The local Syncthing that replicates `memories/` (`memd sync`).
    pub sync: SyncConfig,
}

/// The local Syncthing that replicates `memories/` between devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SyncConfig {
    /// Syncthing's REST address (plain http on loopback).
    pub syncthing_url: String,
    /// Syncthing's API key (its GUI settings); empty: `memd sync` only writes
    /// `.stignore` and reports what memd itself knows.
    pub syncthing_api_key: String,
    /// The Syncthing folder id used for `memories/`.
    pub folder_id: String,
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

/// MCP sessions at `/mcp` of `memd serve` (read at start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct McpConfig {
    /// Open sessions one token may hold; 0 means no limit.
    pub max_sessions_per_token: usize,
    /// Open sessions of all tokens together; 0 means no limit.
    pub max_sessions: usize,
    /// `initialize` requests one token may send per minute; 0 means no limit.
    pub initialize_per_minute: u32,
    /// Minutes without a request after which a session is closed (at least 1).
    pub idle_minutes: u32,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            max_sessions_per_token: 16,
            max_sessions: 256,
            initialize_per_minute: 30,
            idle_minutes: 30,
        }
    }
}

/// The HTTP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct HttpConfig {
    /// Requests one token may send per minute; 0 means no limit.
    pub rate_limit_per_minute: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            rate_limit_per_minute: 6000,
        }
    }
}

/// Short-term chat from `/v1/ingest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct IngestConfig {
    /// Hours an ingested message stays searchable (1-168).
    pub ttl_hours: u32,
    /// Provider user ids of the owner: an ingested message whose sender is
    /// one of them is the owner's (`subject: owner`), as with `from_owner`.
    pub owner_ids: Vec<String>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            ttl_hours: 24,
            owner_ids: Vec::new(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:8787".into(),
            allow_remote: false,
            device: String::new(),
            search: SearchConfig::default(),
            privacy: PrivacyConfig::default(),
            docs: DocsConfig::default(),
            backup: BackupConfig::default(),
            ingest: IngestConfig::default(),
            http: HttpConfig::default(),
            embedder: EmbedderConfig::default(),
            lifecycle: Default::default(),
            sleep: crate::consolidate::SleepConfig::default(),
            mcp: McpConfig::default(),
            sync: SyncConfig::default(),
        }
    }
}

/// Search tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchConfig {
    /// Results returned when the request gives no limit.
    pub default_limit: usize,
    /// Largest limit a request may ask for.
    pub max_limit: usize,
    /// When the AND pass finds fewer hits than this, an OR pass fills up.
    pub or_fallback_min_hits: usize,
    /// Mode of a request that names none: `fulltext`, `semantic` or `hybrid`.
    pub mode: SearchMode,
    /// The `K` of reciprocal rank fusion: `score = Σ weight / (K + rank)`.
    pub rrf_k: f32,
    /// Weight of the full-text ranking in hybrid fusion.
    pub fulltext_weight: f32,
    /// Weight of the semantic ranking in hybrid fusion.
    pub semantic_weight: f32,
    /// Score multiplier of short-term hits (1 disables the penalty).
    pub short_weight: f32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            default_limit: 5,
            max_limit: 10,
            or_fallback_min_hits: 3,
            mode: SearchMode::Hybrid,
            rrf_k: 60.0,
            fulltext_weight: 1.0,
            semantic_weight: 1.0,
            short_weight: 0.5,
        }
    }
}

/// Audiences that sensitive and secret memories are pinned to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PrivacyConfig {
    /// Scenes a `sensitive` memory may live in.
    pub sensitive_audiences: Vec<Scene>,
    /// Scenes a `secret` memory may live in.
    pub secret_audiences: Vec<Scene>,
}

impl Default for PrivacyConfig {
    fn default() -> Self {
        let scene = |s: &str| Scene::parse(s).expect("built-in scene names are valid");
        PrivacyConfig {
            sensitive_audiences: vec![scene("main"), scene("qq:owner")],
            secret_audiences: vec![scene("main")],
        }
    }
}

impl PrivacyConfig {
    /// Refuses a `sensitive` or `secret` memory outside the audiences its level is pinned to.
    pub fn check_pinned(&self, privacy: crate::model::Privacy, scene: &Scene) -> crate::Result<()> {
        use crate::model::Privacy;
        let pinned = match privacy {
            Privacy::Sensitive => Some(("sensitive", &self.sensitive_audiences)),
            Privacy::Secret => Some(("secret", &self.secret_audiences)),
            _ => None,
        };
        if let Some((name, allowed)) = pinned
            && !allowed.contains(scene)
        {
            let list: Vec<&str> = allowed.iter().map(Scene::as_str).collect();
            return Err(crate::Error::invalid(format!(
                "{name} memories may only live in [{}]; scene {scene} is not one of them",
                list.join(", "),
            )));
        }
        Ok(())
    }
}

/// Markdown documents under `memories/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct DocsConfig {
    /// Scene of a document whose front matter names none.
    pub default_scene: Scene,
    /// Sections longer than this many characters are split at paragraph breaks.
    pub max_chunk_chars: usize,
}

impl Default for DocsConfig {
    fn default() -> Self {
        DocsConfig {
            default_scene: Scene::parse("main").expect("built-in scene names are valid"),
            max_chunk_chars: 1200,
        }
    }
}

/// Backups of `memories/`, tokens and config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct BackupConfig {
    /// Where archives go; empty means `ROOT/backups`.
    pub dir: String,
    /// Whether `memd serve` makes one backup per day.
    pub daily: bool,
    /// Archives older than this many days are deleted after a daily backup.
    pub keep_days: u32,
}

impl Default for BackupConfig {
    fn default() -> Self {
        BackupConfig {
            dir: String::new(),
            daily: true,
            keep_days: 14,
        }
    }
}

/// The local embedding model (an ONNX encoder run through ONNX Runtime).
///
/// Missing or unloadable files never stop the service: full-text search keeps
/// working, hybrid search falls back to full text, and semantic search answers
/// `EMBEDDING_UNAVAILABLE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct EmbedderConfig {
    /// Whether to load the model at all.
    pub enabled: bool,
    /// Directory with `model_int8.onnx` (or `model.onnx`) and `tokenizer.json`;
    /// empty means `$MEMD_MODELS_DIR/multilingual-e5-small`, with
    /// `$MEMD_MODELS_DIR` defaulting to `~/.cache/memory-hub/models`.
    pub model_dir: String,
    /// The ONNX Runtime shared library; empty means `onnxruntime/libonnxruntime.so`
    /// in the models directory.
    pub runtime_path: String,
    /// Prepended to every query before embedding.
    pub query_prefix: String,
    /// Prepended to every memory before embedding.
    pub passage_prefix: String,
    /// How token vectors become one vector: `mean` (over the attention mask) or `cls`.
    pub pooling: Pooling,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub max_tokens: usize,
    /// Inference sessions run in parallel (each holds its own copy of the graph).
    pub sessions: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig {
            enabled: true,
            model_dir: String::new(),
            runtime_path: String::new(),
            query_prefix: "query: ".into(),
            passage_prefix: "passage: ".into(),
            pooling: Pooling::Mean,
            max_tokens: 512,
            sessions: 2,
        }
    }
}

impl BackupConfig {
    /// The backup directory for a root.
    pub fn dir_for(&self, layout: &Layout) -> PathBuf {
        if self.dir.is_empty() {
            layout.root.join("backups")
        } else {
            layout.root.join(&self.dir)
        }
    }
}

impl EmbedderConfig {
    /// `$MEMD_MODELS_DIR`, else `~/.cache/memory-hub/models`.
    pub fn models_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("MEMD_MODELS_DIR").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
        PathBuf::from(home).join(".cache/memory-hub/models")
    }

    /// The model directory in force.
    pub fn resolved_model_dir(&self) -> PathBuf {
        if self.model_dir.is_empty() {
            Self::models_dir().join("multilingual-e5-small")
        } else {
            PathBuf::from(&self.model_dir)
        }
    }

    /// The ONNX Runtime library in force.
    pub fn resolved_runtime_path(&self) -> PathBuf {
        if self.runtime_path.is_empty() {
            Self::models_dir().join("onnxruntime/libonnxruntime.so")
        } else {
            PathBuf::from(&self.runtime_path)
        }
    }
}

impl Config {
    /// Reads `config.json` under the layout's root, or the defaults if it does not exist.
    pub fn load(layout: &Layout) -> Result<Config> {
        Self::load_file(&layout.config())
    }

    /// Reads a config file, or the defaults if it does not exist.
    pub fn load_file(path: &Path) -> Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => return Err(e).ctx("cannot read config", path),
        };
        let config: Config = serde_json::from_str(&text)
            .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks cross-field rules once, at load.
    pub fn validate(&self) -> Result<()> {
        let s = &self.search;
        if s.default_limit == 0 || s.default_limit > s.max_limit {
            return Err(Error::invalid(
                "search.defaultLimit must be between 1 and search.maxLimit",
            ));
        }
        if s.max_limit > 1000 {
            return Err(Error::invalid("search.maxLimit must be at most 1000"));
        }
        if !(1..=168).contains(&self.ingest.ttl_hours) {
            return Err(Error::invalid("ingest.ttlHours must be between 1 and 168"));
        }
        if !(1..=10_080).contains(&self.mcp.idle_minutes) {
            return Err(Error::invalid(
                "mcp.idleMinutes must be between 1 and 10080 (a week)",
            ));
        }
        if !(s.rrf_k >= 0.0 && s.rrf_k.is_finite()) {
            return Err(Error::invalid("search.rrfK must be a finite number >= 0"));
        }
        for (name, w) in [
            ("search.fulltextWeight", s.fulltext_weight),
            ("search.semanticWeight", s.semantic_weight),
        ] {
            if !(w >= 0.0 && w.is_finite()) {
                return Err(Error::invalid(format!(
                    "{name} must be a finite number >= 0"
                )));
            }
        }
        let e = &self.embedder;
        if !(8..=8192).contains(&e.max_tokens) {
            return Err(Error::invalid(
                "embedder.maxTokens must be between 8 and 8192",
            ));
        }
        if !(1..=16).contains(&e.sessions) {
            return Err(Error::invalid("embedder.sessions must be between 1 and 16"));
        }
        if !(0.0..=1.0).contains(&s.short_weight) {
            return Err(Error::invalid("search.shortWeight must be between 0 and 1"));
        }
        self.lifecycle.validate()?;
        if self.docs.max_chunk_chars < 200 {
            return Err(Error::invalid("docs.maxChunkChars must be at least 200"));
        }
        self.sleep.validate()?;
        Ok(())
    }

    /// The device name to record: `device`, else the host name, else `unknown`.
    pub fn device_name(&self) -> String {
        if !self.device.is_empty() {
            return self.device.clone();
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_lists_every_key_with_its_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let example: serde_json::Value = serde_json::from_str(&text).unwrap();
        let defaults = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(
            example, defaults,
            "config.example.json must equal the defaults"
        );
        let parsed = Config::load_file(&path).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        for (body, needle) in [
            (r#"{"lisen": "x"}"#, "unknown field"),
            (r#"{"search": {"defaultLimit": 0}}"#, "defaultLimit"),
            (r#"{"privacy": {"secretAudiences": ["Main"]}}"#, "scene"),
        ] {
            std::fs::write(&path, body).unwrap();
            let err = Config::load_file(&path).unwrap_err();
            assert_eq!(err.code().as_str(), "INVALID_INPUT");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn missing_file_gives_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        assert_eq!(Config::load(&layout).unwrap(), Config::default());
    }
}
