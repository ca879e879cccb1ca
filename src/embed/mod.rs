//! Text embedders: turning queries and memories into unit vectors for semantic search.
//!
//! This module owns the [`Embedder`] trait and its implementations:
//! [`onnx::OnnxEmbedder`] (a multilingual e5-class encoder run through ONNX
//! Runtime) and [`hash::HashEmbedder`] (deterministic, for tests that are not
//! about embeddings). It also owns the [`cache::VectorCache`] under
//! `data/cache/`, which keeps vectors across `memd reindex`, and
//! [`EmbedderSlot`], which loads the configured model lazily, once, and
//! remembers why it could not be loaded. [`dictionary`] finds and loads the
//! bilingual lexicon installed next to the model (cross-lingual full text).
//!
//! Every vector an embedder returns has [`Embedder::dim`] components and unit
//! L2 norm, so cosine similarity and L2 distance order results the same way.

pub mod cache;
pub mod dictionary;
pub mod hash;
pub mod onnx;
pub mod unigram;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How the token vectors of the encoder's last layer become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Pooling {
    /// Average over the tokens the attention mask keeps (e5, bge-m3).
    Mean,
    /// The first token's vector (bge).
    Cls,
}

impl Pooling {
    /// The config spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }
}

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model or runtime could not be loaded; the message says which file and why.
    #[error("{0}")]
    Unavailable(String),
    /// Tokenizing or running the model failed for this input.
    #[error("embedding failed: {0}")]
    Inference(String),
}

impl From<EmbedError> for Error {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Unavailable(m) => Error::EmbeddingUnavailable(m),
            EmbedError::Inference(m) => Error::Internal(m),
        }
    }
}

/// Turns text into unit vectors. Implementations are thread-safe.
pub trait Embedder: Send + Sync {
    /// Identifies the model and every setting that changes its vectors; part
    /// of the vector cache key and of the index's record of what it holds.
    fn model_id(&self) -> &str;

    /// Number of components of every vector.
    fn dim(&self) -> usize;

    /// Embeds search queries (the query prefix is added here).
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Embeds memories to be searched (the passage prefix is added here).
    /// Each text's vector depends on that text alone.
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Embeds memories being indexed, as fast as the embedder can: it may
    /// run them together in batches, whose vectors may differ a little from
    /// [`Embedder::embed_passages`]' (cosine ≥ 0.99 for the ONNX model, which
    /// quantises activations per batch). The index stores these; every other
    /// use (calibrations, evaluation) takes `embed_passages`.
    fn index_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_passages(texts)
    }
}

/// Scales `v` to unit L2 norm (a zero vector stays zero).
pub(crate) fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

/// Where an [`EmbedderSlot`] stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EmbedderStatus {
    /// Loaded: the model id.
    Loaded(String),
    /// Loading failed or is disabled: why.
    Unavailable(String),
    /// Configured, loaded on first need.
    NotLoaded,
}

/// Where a hub gets its embedder from: the configured model, loaded on first
/// use (so commands that never embed never pay for it), or one given directly.
pub struct EmbedderSlot {
    config: Option<EmbedderConfig>,
    loaded: OnceLock<Result<Arc<dyn Embedder>, String>>,
    /// Held for one pass over the pending memories (see [`EmbedderSlot::pass`]).
    pass: Mutex<()>,
}

impl EmbedderSlot {
    /// The model described by `config`, loaded on first use.
    pub fn from_config(config: &EmbedderConfig) -> Self {
        EmbedderSlot {
            config: Some(config.clone()),
            loaded: OnceLock::new(),
            pass: Mutex::new(()),
        }
    }

    /// An embedder that is already loaded (tests, evaluation).
    pub fn ready(embedder: Arc<dyn Embedder>) -> Self {
        let loaded = OnceLock::new();
        let _ = loaded.set(Ok(embedder));
        EmbedderSlot {
            config: None,
            loaded,
            pass: Mutex::new(()),
        }
    }

    /// No embedder: semantic search is unavailable for the stated reason.
    pub fn none(reason: impl Into<String>) -> Self {
        let loaded = OnceLock::new();
        let _ = loaded.set(Err(reason.into()));
        EmbedderSlot {
            config: None,
            loaded,
            pass: Mutex::new(()),
        }
    }

    /// Where the embedder stands, without starting to load it.
    pub(crate) fn status(&self) -> EmbedderStatus {
        match self.loaded.get() {
            Some(Ok(e)) => EmbedderStatus::Loaded(e.model_id().to_string()),
            Some(Err(reason)) => EmbedderStatus::Unavailable(reason.clone()),
            None => EmbedderStatus::NotLoaded,
        }
    }

    /// One embedding pass over pending memories at a time: the scheduler and
    /// concurrent searches would otherwise all embed the same memories. This
    /// is not the writer: writes never take it, so they never wait for
    /// embedding.
    pub(crate) fn pass(&self) -> MutexGuard<'_, ()> {
        self.pass
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The embedder if it is already loaded; never starts loading it.
    pub(crate) fn loaded(&self) -> Option<Arc<dyn Embedder>> {
        self.loaded.get().and_then(|r| r.as_ref().ok().cloned())
    }

    /// The embedder, loading it on the first call; an `EMBEDDING_UNAVAILABLE`
    /// error says why there is none. A failed load is not retried.
    pub(crate) fn get(&self) -> Result<Arc<dyn Embedder>, Error> {
        let loaded = self.loaded.get_or_init(|| {
            let Some(config) = &self.config else {
                return Err("no embedder configured".to_string());
            };
            if !config.enabled {
                return Err("the embedder is disabled (embedder.enabled = false)".to_string());
            }
            match onnx::OnnxEmbedder::load(config) {
                Ok(e) => {
                    tracing::info!(embed.model = %e.model_id(), "embedder loaded");
                    Ok(Arc::new(e) as Arc<dyn Embedder>)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedder unavailable; semantic search is off, full text keeps working");
                    Err(e.to_string())
                }
            }
        });
        match loaded {
            Ok(e) => Ok(Arc::clone(e)),
            Err(reason) => Err(Error::EmbeddingUnavailable(format!(
                "{reason}; run `memd setup` to install the model, or search with --mode fulltext"
            ))),
        }
    }
}

/// A vector as little-endian `f32` bytes (the layout sqlite-vec reads).
pub(crate) fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`to_bytes`]; `None` if the length is not a multiple of 4.
pub(crate) fn from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
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
    pub(crate) enabled: bool,
    /// Directory with `model_int8.onnx` (or `model.onnx`) and `tokenizer.json`;
    /// empty means `$MEMD_MODELS_DIR/multilingual-e5-small`, with
    /// `$MEMD_MODELS_DIR` defaulting to `~/.cache/memory-hub/models`.
    pub model_dir: String,
    /// The ONNX Runtime shared library; empty means `onnxruntime/libonnxruntime.so`
    /// in the models directory.
    pub(crate) runtime_path: String,
    /// Prepended to every query before embedding.
    pub(crate) query_prefix: String,
    /// Prepended to every memory before embedding.
    pub(crate) passage_prefix: String,
    /// How token vectors become one vector: `mean` (over the attention mask) or `cls`.
    pub(crate) pooling: Pooling,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub(crate) max_tokens: usize,
    /// Inference sessions run in parallel (each holds its own copy of the
    /// graph, ~75 MiB resident for the int8 e5), each with `cores / sessions`
    /// intra-op threads. One by default: memories are embedded in
    /// length-sorted batches ([`onnx::BATCH_TOKENS`]), which keep one session
    /// of two threads as busy as two sessions of one, and a second session
    /// would cost a quarter of the server's memory budget. Two let two
    /// searches embed their queries at the same moment.
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
            sessions: 1,
        }
    }
}

impl EmbedderConfig {
    /// `$MEMD_MODELS_DIR`, else `~/.cache/memory-hub/models`.
    pub(crate) fn models_dir() -> PathBuf {
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
    pub(crate) fn resolved_runtime_path(&self) -> PathBuf {
        if self.runtime_path.is_empty() {
            Self::models_dir().join("onnxruntime/libonnxruntime.so")
        } else {
            PathBuf::from(&self.runtime_path)
        }
    }
}
