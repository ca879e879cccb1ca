//! `config.json`: composes the sub-configs of the modules it configures.
//!
//! The root is chosen `--root DIR` > env `MEMD_ROOT` > current directory. Under
//! it live `memories/` (source of truth), `data/` (derived) and an optional
//! `config.json`. Every key has a default; `config.example.json` at the repo
//! root lists them all with their defaults and a test keeps the two equal.
//! Unknown keys are refused, so a typo never silently falls back to a default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::content::PrivacyConfig;
pub use crate::embed::EmbedderConfig;
use crate::error::{Error, IoContext, Result};
pub use crate::layout::{Layout, create_private, open_mode, private_umask, tighten_tree};
pub use crate::search::SearchConfig;
pub use crate::store::markdown::DocsConfig;
pub use crate::sync::SyncConfig;
use crate::timetable::{Period, Schedule};

/// The whole configuration. Each component receives only its sub-config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Address `memd serve` listens on.
    pub listen: String,
    /// Whether `memd serve` may listen beyond loopback (it then also needs at
    /// least one active token). Off: a non-loopback `listen` is refused.
    pub(crate) allow_remote: bool,
    /// Name recorded as the writing device; empty means the host name.
    pub(crate) device: String,
    /// Search tuning.
    pub search: SearchConfig,
    /// Audiences that sensitive and secret memories are pinned to.
    pub(crate) privacy: PrivacyConfig,
    /// Markdown documents.
    pub(crate) docs: DocsConfig,
    /// Backups.
    pub(crate) backup: BackupConfig,
    /// Short-term chat from `/v1/ingest`.
    pub ingest: IngestConfig,
    /// The HTTP server.
    pub(crate) http: HttpConfig,
    /// The search gate: each token's share of the search capacity.
    pub(crate) search_gate: SearchGateConfig,
    /// The local embedding model for semantic search.
    pub embedder: EmbedderConfig,
    /// Retention tiers, promotion, dedup and archive.
    pub lifecycle: crate::lifecycle::LifecycleConfig,
    /// Nightly consolidation of short-term chat into long-term memory.
    pub(crate) sleep: SleepConfig,
    /// MCP sessions at `/mcp` of `memd serve`.
    pub(crate) mcp: McpConfig,
    /// The local Syncthing that replicates `memories/` (`memd sync`).
    pub(crate) sync: SyncConfig,
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
pub(crate) struct HttpConfig {
    /// Requests one token may send per minute; 0 means no limit.
    pub(crate) rate_limit_per_minute: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            rate_limit_per_minute: 6000,
        }
    }
}

/// The search gate (read per search): searches run about one per core,
/// queued per token and served fairly between tokens, so one token's heavy
/// load delays only itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SearchGateConfig {
    /// Searches one token may run at once; 0 means one per core but one
    /// (at least one), so a core is always left to the other tokens.
    pub(crate) concurrency_per_token: usize,
    /// Searches one token may have waiting for their turn; the next one is
    /// refused with `429 RATE_LIMITED` and `Retry-After` (at least 1).
    pub(crate) queue_per_token: usize,
}

impl Default for SearchGateConfig {
    fn default() -> Self {
        SearchGateConfig {
            concurrency_per_token: 0,
            queue_per_token: 16,
        }
    }
}

/// Short-term chat from `/v1/ingest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct IngestConfig {
    /// Hours an ingested message stays searchable (1-168).
    pub(crate) ttl_hours: u32,
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
            search_gate: SearchGateConfig::default(),
            embedder: EmbedderConfig::default(),
            lifecycle: Default::default(),
            sleep: SleepConfig::default(),
            mcp: McpConfig::default(),
            sync: SyncConfig::default(),
        }
    }
}

/// Backups of `memories/`, tokens and config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BackupConfig {
    /// Where archives go; empty means `ROOT/backups`.
    pub(crate) dir: String,
    /// Whether `memd serve` makes one backup per day.
    pub(crate) daily: bool,
    /// Archives older than this many days are deleted after a daily backup.
    pub(crate) keep_days: u32,
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

impl BackupConfig {
    /// The backup directory for a root.
    pub(crate) fn dir_for(&self, layout: &Layout) -> PathBuf {
        if self.dir.is_empty() {
            layout.root.join("backups")
        } else {
            layout.root.join(&self.dir)
        }
    }
}

/// `sleep` in `config.json`: nightly consolidation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SleepConfig {
    /// Whether `memd serve` runs it on its schedule (`memd consolidate` always works).
    pub enabled: bool,
    /// Local time of day after which it runs (`HH:MM`).
    pub at: String,
    /// day, week (Mondays), month (the 1st) or year (January 1st).
    pub period: Period,
    /// First retry delay after a failure, in minutes; doubles per failure.
    pub retry_minutes: u32,
    /// Short-term lines at least this similar (CJK-bigram Jaccard) fold into one.
    pub fold_similarity: f64,
    /// Short-term lines at least this important are promoted even if never recalled.
    pub promote_importance: f64,
    /// Long-term memories untouched this many days (importance < 0.5, no category) are reported stale.
    pub decay_after_days: u32,
    /// The optional model pass.
    pub model: ModelConfig,
}

impl Default for SleepConfig {
    fn default() -> Self {
        SleepConfig {
            enabled: false,
            at: "03:00".into(),
            period: Period::Day,
            retry_minutes: 30,
            fold_similarity: 0.8,
            promote_importance: 0.7,
            decay_after_days: 90,
            model: ModelConfig::default(),
        }
    }
}

/// Which consolidator proposes operations besides the deterministic pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// No model: the deterministic pass only.
    None,
    /// An OpenAI-compatible `POST {baseUrl}/chat/completions` (`http://` or `https://`).
    Openai,
    /// An external command: JSON on stdin, JSON operations on stdout.
    Command,
}

/// `sleep.model` in `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelConfig {
    /// none, openai or command.
    pub kind: ModelKind,
    /// e.g. `http://127.0.0.1:8080/v1` (a local llama.cpp or Ollama server).
    pub base_url: String,
    /// Model name sent in the request.
    pub model: String,
    /// Name of the environment variable holding the API key (empty: no key).
    pub api_key_env: String,
    /// Program and arguments for `kind: command`.
    pub command: Vec<String>,
    /// Seconds to wait for an answer.
    pub timeout_seconds: u64,
    /// Kept so older configs still load; must be false: `secret` memories are never sent.
    pub send_secret: bool,
    /// Whether `sensitive` memories are sent, and then only those in a scene of
    /// `privacy.sensitiveAudiences` (the owner's own audiences).
    pub send_sensitive: bool,
    /// At most this many memories are sent per run.
    pub(crate) max_memories: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            kind: ModelKind::None,
            base_url: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            command: Vec::new(),
            timeout_seconds: 120,
            send_secret: false,
            send_sensitive: false,
            max_memories: 200,
        }
    }
}

impl SleepConfig {
    /// Checks values that serde cannot.
    pub fn validate(&self) -> Result<()> {
        crate::timetable::parse_at(&self.at)
            .map_err(|e| Error::invalid(format!("sleep.at: {e}")))?;
        if !(0.0..=1.0).contains(&self.fold_similarity) || self.fold_similarity == 0.0 {
            return Err(Error::invalid("sleep.foldSimilarity must be in (0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.promote_importance) {
            return Err(Error::invalid("sleep.promoteImportance must be in [0, 1]"));
        }
        if self.model.send_secret {
            return Err(Error::invalid(
                "sleep.model.sendSecret is no longer supported: secret memories are never sent to \
                 the consolidation model (remove the key or set it to false)",
            ));
        }
        match self.model.kind {
            ModelKind::Openai
                if !(self.model.base_url.starts_with("http://")
                    || self.model.base_url.starts_with("https://")) =>
            {
                Err(Error::invalid(
                    "sleep.model.baseUrl must be an http:// or https:// URL",
                ))
            }
            // Credentials belong in `apiKeyEnv`, never in a URL that is logged
            // and stored in run reports; `{baseUrl}/chat/completions` needs a
            // URL without query or fragment.
            ModelKind::Openai if base_url_carries_more(&self.model.base_url) => {
                Err(Error::invalid(
                    "sleep.model.baseUrl may not hold a user name, password, query or fragment \
                     (put the key in the variable named by apiKeyEnv)",
                ))
            }
            ModelKind::Command if self.model.command.is_empty() => Err(Error::invalid(
                "sleep.model.command must name the program to run",
            )),
            _ => Ok(()),
        }
    }

    /// The scheduler's view of `at`, `period` and `retryMinutes`.
    pub(crate) fn schedule(&self) -> Result<Schedule> {
        Ok(Schedule {
            at: crate::timetable::parse_at(&self.at)?,
            period: self.period,
            retry_minutes: self.retry_minutes,
        })
    }
}

impl Config {
    /// Reads `config.json` under the layout's root, or the defaults if it does not exist.
    pub fn load(layout: &Layout) -> Result<Config> {
        Self::load_file(&layout.config())
    }

    /// Reads a config file, or the defaults if it does not exist.
    pub(crate) fn load_file(path: &Path) -> Result<Config> {
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
        if !(1..=10_000).contains(&self.search_gate.queue_per_token) {
            return Err(Error::invalid(
                "searchGate.queuePerToken must be between 1 and 10000",
            ));
        }
        if self.search_gate.concurrency_per_token > 1024 {
            return Err(Error::invalid(
                "searchGate.concurrencyPerToken must be at most 1024 (0: one per core but one)",
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
}

/// Whether a model URL carries user info (`user:pass@`), a query or a fragment.
fn base_url_carries_more(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    authority.contains('@') || rest.contains('?') || rest.contains('#')
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
