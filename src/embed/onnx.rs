//! The ONNX embedder: a BERT-style encoder (multilingual-e5-small by default)
//! run through ONNX Runtime, with a Hugging Face `tokenizer.json`.
//!
//! - The tokenizer is read by [`super::unigram::load`]: a Unigram vocabulary
//!   (e5's 250k XLM-R pieces) is held compactly (~7 MiB instead of ~280 MiB
//!   in `tokenizers`' own model) and gives the same ids; other models go
//!   through `tokenizers` unchanged.
//! - Each session holds its own copy of the graph's initializers (about the
//!   model file's size, ~77 MiB for the int8 e5); the sessions share one
//!   prepacked-weights container.
//! - The runtime library is loaded once per process (`ort::init_from`); ONNX
//!   Runtime allows one environment per process, so every embedder shares it.
//! - A small pool of sessions (`embedder.sessions`) runs in parallel;
//!   `Session::run` needs `&mut`, so each call borrows one session from the pool.
//! - Inputs are `input_ids` and `attention_mask` (int64 `[batch, seq]`, padded
//!   with the tokenizer's pad id); the output `last_hidden_state` is pooled
//!   (mean over the mask, or CLS) and L2-normalised.
//! - Long texts are truncated to `embedder.maxTokens` tokens (512 for e5, its
//!   position limit). Memories are short facts and heading-sized document
//!   chunks (`docs.maxChunkChars`), so truncation rarely bites; windowing and
//!   averaging would blur exactly the long chunks whose start is most telling.
//! - Each text is run as its own batch of one. The int8 graph quantises its
//!   activations per batch at run time, so a text embedded inside a batch gets
//!   a slightly different vector than alone; running texts alone makes every
//!   vector a pure function of its text, so a cold rebuild reproduces the
//!   incremental index exactly. Parallelism comes from the session pool instead.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use ort::session::Session;
use ort::session::builder::{GraphOptimizationLevel, PrepackedWeights};
use ort::value::Tensor;

use super::EmbedderConfig;
use super::unigram::{self, LoadedTokenizer};
use super::{EmbedError, Embedder, Pooling, normalize};

/// The model file names tried in order inside the model directory.
const MODEL_FILES: &[&str] = &["model_int8.onnx", "model.onnx"];

/// The tokenizer file inside the model directory.
const TOKENIZER_FILE: &str = "tokenizer.json";

/// The process-wide ONNX Runtime environment (or why it could not be created).
static ENVIRONMENT: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();

fn environment(runtime: &Path) -> Result<ort::environment::Environment, EmbedError> {
    if !runtime.is_file() {
        return Err(EmbedError::Unavailable(format!(
            "ONNX Runtime library not found at {}",
            runtime.display()
        )));
    }
    ENVIRONMENT
        .get_or_init(|| {
            let builder = ort::init_from(runtime)
                .map_err(|e| format!("cannot load ONNX Runtime from {}: {e}", runtime.display()))?;
            builder
                .with_name("memd")
                .with_telemetry(false)
                .build()
                .map_err(|e| format!("cannot create the ONNX Runtime environment: {e}"))
        })
        .clone()
        .map_err(EmbedError::Unavailable)
}

fn build_session(
    env: &ort::environment::Environment,
    model: &Path,
    threads: usize,
    prepacked: &PrepackedWeights,
) -> ort::Result<Session> {
    Session::builder(env)?
        // The sessions of the pool share one copy of the packed weight matrices.
        .with_prepacked_weights(prepacked)?
        .with_optimization_level(GraphOptimizationLevel::All)?
        .with_intra_threads(threads)?
        .with_inter_threads(1)?
        // Spinning threads halve throughput on a busy two-core machine.
        .with_intra_op_spinning(false)?
        .with_inter_op_spinning(false)?
        .commit_from_file(model)
}

/// Sessions lent out one caller at a time.
struct SessionPool {
    idle: Mutex<Vec<Session>>,
    returned: Condvar,
}

impl SessionPool {
    fn with<T>(&self, f: impl FnOnce(&mut Session) -> T) -> T {
        let mut idle = self.idle.lock().expect("session pool poisoned");
        let mut session = loop {
            if let Some(s) = idle.pop() {
                break s;
            }
            idle = self.returned.wait(idle).expect("session pool poisoned");
        };
        drop(idle);
        let out = f(&mut session);
        self.idle
            .lock()
            .expect("session pool poisoned")
            .push(session);
        self.returned.notify_one();
        out
    }
}

/// An ONNX encoder with its tokenizer and a pool of sessions.
pub struct OnnxEmbedder {
    model_id: String,
    tokenizer: LoadedTokenizer,
    pool: SessionPool,
    sessions: usize,
    pad_id: i64,
    pooling: Pooling,
    query_prefix: String,
    passage_prefix: String,
    dim: usize,
}

impl OnnxEmbedder {
    /// Loads the model, tokenizer and runtime named by `config`.
    pub fn load(config: &EmbedderConfig) -> Result<OnnxEmbedder, EmbedError> {
        let dir = config.resolved_model_dir();
        let model = MODEL_FILES
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                EmbedError::Unavailable(format!(
                    "no embedding model ({}) in {}",
                    MODEL_FILES.join(" or "),
                    dir.display()
                ))
            })?;
        let tokenizer_path = dir.join(TOKENIZER_FILE);
        let mut tokenizer = unigram::load(&tokenizer_path).map_err(|e| {
            EmbedError::Unavailable(format!(
                "cannot read tokenizer {}: {e}",
                tokenizer_path.display()
            ))
        })?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: config.max_tokens,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Unavailable(format!("tokenizer truncation: {e}")))?;
        tokenizer.with_padding(None);
        let pad_id = tokenizer
            .token_to_id("<pad>")
            .or_else(|| tokenizer.token_to_id("[PAD]"))
            .unwrap_or(1) as i64;
        let env = environment(&config.resolved_runtime_path())?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (cores / config.sessions).max(1);
        let prepacked = PrepackedWeights::new();
        let mut sessions = Vec::with_capacity(config.sessions);
        for _ in 0..config.sessions {
            sessions.push(
                build_session(&env, &model, threads, &prepacked).map_err(|e| {
                    EmbedError::Unavailable(format!("cannot load model {}: {e}", model.display()))
                })?,
            );
        }
        let size = std::fs::metadata(&model).map(|m| m.len()).unwrap_or(0);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        let file = model
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut embedder = OnnxEmbedder {
            model_id: format!(
                "onnx:{name}/{file}:{size}:{}:{}",
                config.pooling.as_str(),
                config.max_tokens
            ),
            tokenizer,
            pool: SessionPool {
                idle: Mutex::new(sessions),
                returned: Condvar::new(),
            },
            sessions: config.sessions,
            pad_id,
            pooling: config.pooling,
            query_prefix: config.query_prefix.clone(),
            passage_prefix: config.passage_prefix.clone(),
            dim: 0,
        };
        let probe = embedder.run(&[embedder.token_ids("probe")?])?;
        embedder.dim = probe.first().map_or(0, Vec::len);
        if embedder.dim == 0 {
            return Err(EmbedError::Unavailable(format!(
                "model {} returned empty vectors",
                model.display()
            )));
        }
        Ok(embedder)
    }

    /// The token ids fed to the model for `text` (special tokens added, truncated).
    pub fn token_ids(&self, text: &str) -> Result<Vec<i64>, EmbedError> {
        let ids = self
            .tokenizer
            .encode_ids(text, true)
            .map_err(|e| EmbedError::Inference(format!("tokenizer: {e}")))?;
        Ok(ids.into_iter().map(i64::from).collect())
    }

    /// Runs one padded batch and pools each row.
    fn run(&self, batch: &[Vec<i64>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let rows = batch.len();
        let seq = batch.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(rows * seq);
        let mut mask = Vec::with_capacity(rows * seq);
        for row in batch {
            ids.extend_from_slice(row);
            ids.extend(std::iter::repeat_n(self.pad_id, seq - row.len()));
            mask.extend(std::iter::repeat_n(1i64, row.len()));
            mask.extend(std::iter::repeat_n(0i64, seq - row.len()));
        }
        let shape = [rows as i64, seq as i64];
        let err = |e: ort::Error| EmbedError::Inference(e.to_string());
        let ids_t = Tensor::from_array((shape, ids)).map_err(err)?;
        let mask_t = Tensor::from_array((shape, mask.clone())).map_err(err)?;
        self.pool.with(|session| {
            let outputs = session
                .run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t])
                .map_err(err)?;
            let hidden = outputs
                .get("last_hidden_state")
                .unwrap_or(&outputs[0])
                .try_extract_tensor::<f32>()
                .map_err(err)?;
            let (out_shape, data) = hidden;
            let dim = *out_shape.last().unwrap_or(&0) as usize;
            if out_shape.len() != 3 || dim == 0 || data.len() != rows * seq * dim {
                return Err(EmbedError::Inference(format!(
                    "unexpected output shape {out_shape:?}"
                )));
            }
            let mut vectors = Vec::with_capacity(rows);
            for r in 0..rows {
                let mut v = vec![0f32; dim];
                match self.pooling {
                    Pooling::Cls => v.copy_from_slice(&data[r * seq * dim..r * seq * dim + dim]),
                    Pooling::Mean => {
                        let mut kept = 0f32;
                        for t in 0..seq {
                            if mask[r * seq + t] == 0 {
                                continue;
                            }
                            kept += 1.0;
                            let at = (r * seq + t) * dim;
                            for (acc, x) in v.iter_mut().zip(&data[at..at + dim]) {
                                *acc += x;
                            }
                        }
                        if kept > 0.0 {
                            v.iter_mut().for_each(|x| *x /= kept);
                        }
                    }
                }
                normalize(&mut v);
                vectors.push(v);
            }
            Ok(vectors)
        })
    }

    /// Embeds `texts` with `prefix`, one text per run, spread over the session pool.
    fn embed(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inputs: Vec<Vec<i64>> = texts
            .iter()
            .map(|t| self.token_ids(&format!("{prefix}{t}")))
            .collect::<Result<_, _>>()?;
        let workers = self.sessions.min(inputs.len());
        if workers <= 1 {
            return inputs
                .iter()
                .map(|ids| Ok(self.run(std::slice::from_ref(ids))?.remove(0)))
                .collect();
        }
        let next = AtomicUsize::new(0);
        type Slot = Option<Result<Vec<f32>, EmbedError>>;
        let results: Mutex<Vec<Slot>> = Mutex::new((0..inputs.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(ids) = inputs.get(i) else { break };
                        let out = self.run(std::slice::from_ref(ids)).map(|mut v| v.remove(0));
                        let failed = out.is_err();
                        results.lock().expect("results poisoned")[i] = Some(out);
                        if failed {
                            break;
                        }
                    }
                });
            }
        });
        let results = results.into_inner().expect("results poisoned");
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            match r {
                Some(v) => out.push(v?),
                None => {
                    return Err(EmbedError::Inference(
                        "a worker stopped after an earlier failure".into(),
                    ));
                }
            }
        }
        Ok(out)
    }
}

impl Embedder for OnnxEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(&self.query_prefix, texts)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(&self.passage_prefix, texts)
    }
}
