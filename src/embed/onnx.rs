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
//! - Memories being indexed ([`Embedder::index_passages`]) are tokenised
//!   once, sorted by length and run in batches of at most [`BATCH_TOKENS`]
//!   padded tokens (dynamic padding: each batch is padded to its own longest
//!   text), spread over the session pool: short memories run a few dozen at
//!   a time, for about half the CPU per text of one run each. The int8 graph
//!   quantises its activations per run, so a text embedded beside others
//!   gets a vector a little different from the one it gets alone (cosine ≥
//!   0.99); the vector cache under `data/cache/` keeps the vectors of a
//!   reindex the ones the live index had. Queries and
//!   [`Embedder::embed_passages`] (calibrations, evaluation) run each text
//!   alone, so their vectors are a pure function of the text.
//! - Activations are allocated per run and freed after it (no arena, no
//!   memory pattern), so one long batch does not stay resident; the runs of
//!   one indexing call in flight on the pool hold at most [`BATCH_TOKENS`]
//!   padded tokens between them (two full batches at once doubled the
//!   activations resident while a consolidation's memories were embedded).

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
        // No arena and no memory pattern: activations are allocated per run
        // and freed after it. The arena keeps the largest run's activations
        // (a 512-token batch: tens of MiB per session) for the process's life.
        .with_memory_pattern(false)?
        .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(false).build()])?
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
    /// Padded tokens per run ([`BATCH_TOKENS`]).
    batch_tokens: usize,
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
            batch_tokens: BATCH_TOKENS,
        };
        let probe = embedder.run(&[embedder.token_ids("probe")?.as_slice()])?;
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
    fn run(&self, batch: &[&[i64]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let rows = batch.len();
        let seq = batch.iter().map(|r| r.len()).max().unwrap_or(0).max(1);
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

    /// Sets the padded tokens per run of [`Embedder::index_passages`]
    /// ([`BATCH_TOKENS`] by default; 0 or 1 runs every text alone). For
    /// benchmarks comparing batch sizes.
    pub fn with_batch_tokens(mut self, tokens: usize) -> Self {
        self.batch_tokens = tokens;
        self
    }

    /// Embeds `texts` with `prefix`: each text is tokenised once, the texts
    /// are sorted by length and cut into runs of at most `batch_tokens`
    /// padded tokens ([`batches`]; 1 runs each text alone), and the runs are
    /// spread over the session pool.
    fn embed(
        &self,
        prefix: &str,
        texts: &[&str],
        batch_tokens: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inputs: Vec<Vec<i64>> = texts
            .iter()
            .map(|t| self.token_ids(&format!("{prefix}{t}")))
            .collect::<Result<_, _>>()?;
        let lengths: Vec<usize> = inputs.iter().map(Vec::len).collect();
        // Enough runs to keep every session busy: a small group of texts is
        // split over the sessions rather than run as one batch on one core.
        let total: usize = lengths.iter().sum();
        let budget = batch_tokens.min(total.div_ceil(self.sessions.max(1)).max(1));
        let groups = batches(&lengths, budget);
        let run_group = |group: &[usize]| -> Result<Vec<Vec<f32>>, EmbedError> {
            let batch: Vec<&[i64]> = group.iter().map(|&i| inputs[i].as_slice()).collect();
            self.run(&batch)
        };
        // Runs in flight at once hold at most `batch_tokens` padded tokens
        // between them (a longer run goes alone): two sessions each running
        // a full batch doubled the activations resident at a consolidation's
        // catch-up. Short memories' runs still go side by side.
        let budget = TokenBudget::new(if batch_tokens > 1 {
            batch_tokens
        } else {
            usize::MAX
        });
        let run_group = |group: &[usize]| -> Result<Vec<Vec<f32>>, EmbedError> {
            let longest = group.iter().map(|&i| lengths[i]).max().unwrap_or(0);
            let _held = budget.hold(group.len() * longest.max(1));
            run_group(group)
        };
        let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
        let workers = self.sessions.min(groups.len());
        if workers <= 1 {
            for group in &groups {
                for (&i, v) in group.iter().zip(run_group(group)?) {
                    out[i] = Some(v);
                }
            }
        } else {
            let next = AtomicUsize::new(0);
            type Slot = Option<Result<Vec<Vec<f32>>, EmbedError>>;
            let results: Mutex<Vec<Slot>> = Mutex::new((0..groups.len()).map(|_| None).collect());
            std::thread::scope(|scope| {
                for _ in 0..workers {
                    scope.spawn(|| {
                        loop {
                            let g = next.fetch_add(1, Ordering::Relaxed);
                            let Some(group) = groups.get(g) else { break };
                            let result = run_group(group);
                            let failed = result.is_err();
                            results.lock().expect("results poisoned")[g] = Some(result);
                            if failed {
                                break;
                            }
                        }
                    });
                }
            });
            let results = results.into_inner().expect("results poisoned");
            for (group, result) in groups.iter().zip(results) {
                let vectors = result.ok_or_else(|| {
                    EmbedError::Inference("a worker stopped after an earlier failure".into())
                })??;
                for (&i, v) in group.iter().zip(vectors) {
                    out[i] = Some(v);
                }
            }
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| EmbedError::Inference("embedder lost a vector".into())))
            .collect()
    }
}

/// Padded tokens that the runs of one [`OnnxEmbedder::embed`] call may hold
/// at once: a run waits while others hold tokens and its own would pass the
/// cap; a run of more than the cap waits to run alone.
struct TokenBudget {
    cap: usize,
    held: Mutex<(usize, usize)>,
    freed: Condvar,
}

/// Tokens held by one run, given back when dropped.
struct Held<'a> {
    budget: &'a TokenBudget,
    tokens: usize,
}

impl TokenBudget {
    fn new(cap: usize) -> TokenBudget {
        TokenBudget {
            cap,
            held: Mutex::new((0, 0)),
            freed: Condvar::new(),
        }
    }

    /// Waits until `tokens` (at most the cap) fit beside the runs in flight.
    fn hold(&self, tokens: usize) -> Held<'_> {
        let tokens = tokens.min(self.cap);
        let mut held = self.held.lock().expect("token budget poisoned");
        while held.0 > 0 && held.0 + tokens > self.cap {
            held = self.freed.wait(held).expect("token budget poisoned");
        }
        held.0 += tokens;
        held.1 = held.1.max(held.0);
        Held {
            budget: self,
            tokens,
        }
    }

    /// The most tokens held at once so far.
    #[cfg(test)]
    fn peak(&self) -> usize {
        self.held.lock().expect("token budget poisoned").1
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().expect("token budget poisoned");
        held.0 -= self.tokens;
        self.budget.freed.notify_all();
    }
}

/// Padded tokens per run of the model (rows × the longest row): a few dozen
/// short memories, or one long chunk. Bounding by tokens, not by texts, bounds
/// the activations a run allocates (the attention scores grow with the square
/// of the length), and sorting by length keeps padding small.
pub const BATCH_TOKENS: usize = 2048;

/// At most this many texts per run, however short.
const BATCH_ROWS: usize = 32;

/// Groups text indices into runs: sorted by token length (ties in input
/// order), cut so that no run exceeds `budget` padded tokens (a text longer
/// than the budget runs alone) or [`BATCH_ROWS`] texts. Every index appears
/// exactly once.
fn batches(lengths: &[usize], budget: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        // Sorted ascending: this text is the longest of the run so far.
        let padded = (current.len() + 1) * lengths[i].max(1);
        if !current.is_empty() && (padded > budget || current.len() >= BATCH_ROWS) {
            out.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

impl Embedder for OnnxEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(&self.query_prefix, texts, 1)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(&self.passage_prefix, texts, 1)
    }

    fn index_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(&self.passage_prefix, texts, self.batch_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_in_flight_share_one_budget_of_padded_tokens() {
        // Two workers, eight runs each: full batches go one at a time, runs
        // of half the budget side by side, and one over the cap runs alone.
        for (tokens, peak) in [(2048, 2048), (1024, 2048), (5000, 2048), (300, 600)] {
            let budget = TokenBudget::new(2048);
            let running = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    scope.spawn(|| {
                        for _ in 0..8 {
                            let _held = budget.hold(tokens);
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(2));
                            running.fetch_sub(1, Ordering::SeqCst);
                        }
                    });
                }
            });
            assert!(budget.peak() <= peak, "{tokens}: held {}", budget.peak());
            if tokens >= 2048 {
                assert_eq!(
                    most.load(Ordering::SeqCst),
                    1,
                    "{tokens} ran beside another"
                );
            }
            assert_eq!(
                budget.held.lock().unwrap().0,
                0,
                "every run gave its tokens back"
            );
        }
    }

    #[test]
    fn batches_are_sorted_by_length_and_bounded_in_padded_tokens() {
        let lengths = [10, 500, 12, 11, 600, 3, 10];
        let groups = batches(&lengths, 64);
        let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (0..lengths.len()).collect::<Vec<_>>(),
            "each text once"
        );
        for g in &groups {
            let longest = g.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(
                g.len() == 1 || g.len() * longest <= 64,
                "{g:?} pads to {} tokens",
                g.len() * longest
            );
        }
        // Short texts share runs in length order; texts over the budget run alone.
        assert_eq!(groups, [vec![5, 0, 6, 3, 2], vec![1], vec![4]]);
        assert!(batches(&[], 64).is_empty());
        // A budget of one token runs every text alone.
        assert_eq!(batches(&[5, 5], 1), [vec![0], vec![1]]);
        // At most BATCH_ROWS texts however short.
        let many = vec![1; BATCH_ROWS + 1];
        assert_eq!(batches(&many, 1 << 20).len(), 2);
    }
}
