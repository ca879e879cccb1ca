//! Retrieval evaluation: recall@k and MRR over a labelled dataset, through
//! the same write and search paths the service uses.
//!
//! A dataset is a directory with `corpus.jsonl` (`id`, `text`, optional
//! `scene`, `time`, `speaker`, …) and `queries.jsonl` (`qid`, `query`,
//! `relevant` corpus ids, optional `scene`). [`run`] loads the corpus into a
//! fresh temporary root with [`Hub::append_batch`] (so vectors are computed by
//! the normal indexing path), then runs every query with the normal
//! [`Hub::search`], restricted to the query's scene when it names one, once per
//! requested mode, with the relevance decision off; recall@5 is reported
//! both so and with the default decision on (what a client gets). The
//! temporary root is removed afterwards.
//!
//! The corpus `time`, `speaker` and `session` go through the normal write
//! path as the memory's event time, speaker and session
//! ([`crate::model::Setting`]), as an import of real history would.
//!
//! [`EvalOptions`] adds two things for inspection and speed: a per-query
//! JSONL file (each query's ranked ids, relevant ids and the rank of the first
//! relevant hit, per mode), and a vector cache file shared across runs, copied
//! into the temporary root before loading and back (atomically) afterwards,
//! so a corpus already embedded once is not embedded again.

pub mod precision;
pub mod training;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::{Config, Layout};
use crate::embed::EmbedderSlot;
use crate::error::{Error, IoContext, Result};
use crate::hub::{Hub, Mode, WriteRequest};
use crate::index::filter::{Filter, Scope};
use crate::model::Scene;
use crate::search::{SearchMode, SearchRequest};

/// Corpus lines written per group commit while loading.
const LOAD_BATCH: usize = 1000;

/// Hits fetched per query (recall@10 and MRR@10 need ten).
const TOP: usize = 10;

#[derive(Debug, Clone, Deserialize)]
struct CorpusLine {
    id: String,
    text: String,
    #[serde(default)]
    scene: Option<String>,
    /// When it happened (free text or ISO), written as the event time.
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    speaker: Option<String>,
    /// A number or a string.
    #[serde(default)]
    session: Option<serde_json::Value>,
}

/// Optional extras of [`run_with`].
#[derive(Debug, Clone, Default)]
pub struct EvalOptions {
    /// Write one JSON line per query and mode here ([`QueryRecord`]).
    pub per_query: Option<PathBuf>,
    /// A vector cache shared across runs (created when missing).
    pub vector_cache: Option<PathBuf>,
    /// Hits fetched per query when more than ten (the per-query file lists
    /// them all; the metrics look at the top ten).
    pub depth: Option<usize>,
    /// Write every hybrid candidate of every query with its learned-fusion
    /// features here ([`FeatureRecord`], JSONL), for `scripts/train-fusion.py`.
    pub features: Option<PathBuf>,
}

/// One candidate of one query, as written to the features file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureRecord {
    /// Dataset directory name.
    pub(crate) dataset: String,
    /// The query id.
    pub(crate) qid: String,
    /// The query's scene, if it names one.
    pub(crate) scene: Option<String>,
    /// Number of relevant corpus ids of the query (recall's denominator).
    pub(crate) relevant_total: usize,
    /// The candidate's corpus id.
    pub(crate) id: String,
    /// Whether it is labelled relevant.
    pub(crate) relevant: bool,
    /// Feature name → value ([`crate::index::fusion::FEATURES`]).
    pub(crate) features: serde_json::Map<String, serde_json::Value>,
    /// The candidate beyond the features (ranks, importance, tier, stage, age).
    pub(crate) candidate: crate::search::Candidate,
}

/// One query's outcome in one mode, as written to the per-query file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryRecord {
    /// Dataset directory name.
    pub(crate) dataset: String,
    /// The mode asked for.
    pub(crate) mode: SearchMode,
    /// The query id.
    pub(crate) qid: String,
    /// The query text.
    pub(crate) query: String,
    /// Corpus ids of the hits, best first.
    pub(crate) ranked: Vec<String>,
    /// The score of each hit (comparable within one query and mode only).
    pub(crate) scores: Vec<f32>,
    /// The pass that found each hit.
    pub(crate) passes: Vec<crate::search::Pass>,
    /// P(relevant) of each hit ([`crate::relevance`]).
    pub(crate) relevance: Vec<f32>,
    /// The corpus ids labelled relevant.
    pub(crate) relevant: Vec<String>,
    /// Rank (from 1) of the first relevant hit, if any is in the list.
    pub(crate) first_hit_rank: Option<usize>,
    /// |relevant ∩ top 5| / |relevant|.
    pub(crate) recall_at_5: f64,
    /// The query's category, when the dataset gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<String>,
}

#[derive(Debug, Deserialize)]
struct QueryLine {
    qid: String,
    query: String,
    relevant: Vec<String>,
    #[serde(default)]
    scene: Option<String>,
    /// The query's category, when the dataset gives one (LoCoMo: 1
    /// multi-hop, 2 temporal, 3 open-domain, 4 single-hop), a number or a word.
    #[serde(default)]
    category: Option<serde_json::Value>,
}

impl QueryLine {
    /// The category as text (`None` without one).
    fn category(&self) -> Option<String> {
        self.category.as_ref().map(|c| match c {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// The scores of one mode on one dataset.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalReport {
    /// Dataset directory name.
    pub(crate) dataset: String,
    /// The mode asked for.
    pub mode: SearchMode,
    /// The mode that ran (differs when hybrid fell back to full text).
    pub ran: SearchMode,
    /// Corpus size.
    pub corpus: usize,
    /// Queries evaluated.
    pub queries: usize,
    /// Mean over queries of |relevant ∩ top 5| / |relevant|, the relevance
    /// decision off (`min_score` 0).
    pub recall_at_5: f64,
    /// The same with the default relevance decision on: what a client gets.
    pub recall_at_5_with_floor: f64,
    /// Hits of the top 5 the default decision keeps, per query.
    pub kept_at_5: f64,
    /// Mean over queries of |relevant ∩ top 10| / |relevant|.
    pub recall_at_10: f64,
    /// Mean of 1 / rank of the first relevant hit in the top 10 (0 if none).
    pub mrr_at_10: f64,
    /// Median search latency in milliseconds.
    pub latency_p50_ms: f64,
    /// 95th percentile search latency in milliseconds.
    pub latency_p95_ms: f64,
    /// Time to write and index the corpus, in milliseconds.
    pub(crate) load_ms: u64,
    /// Recall@5 (decision off) and the number of queries of each category,
    /// when the queries carry one (empty otherwise).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub by_category: std::collections::BTreeMap<String, CategoryScore>,
}

/// Recall@5 of the queries of one category.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CategoryScore {
    /// Queries of the category.
    pub queries: usize,
    /// Mean over them of |relevant ∩ top 5| / |relevant|, the decision off.
    pub recall_at_5: f64,
}

/// Removes the temporary root when dropped.
struct TempRoot(PathBuf);

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).ctx("cannot read", path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| Error::invalid(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

fn scene_of(name: Option<&str>) -> Result<Scene> {
    Scene::parse(name.unwrap_or("main"))
}

/// Evaluates `modes` on the dataset in `dir`. `config` supplies the search
/// and embedder settings; `embedder` is the embedder to index and search with.
pub fn run(
    dir: &Path,
    modes: &[SearchMode],
    config: &Config,
    embedder: EmbedderSlot,
) -> Result<Vec<EvalReport>> {
    run_with(dir, modes, config, embedder, &EvalOptions::default())
}

/// The query's filter: its scene when it names one, else everything.
fn query_filter(q: &QueryLine) -> Result<Filter> {
    Ok(match &q.scene {
        Some(s) => Filter::scope(Scope {
            scenes: vec![scene_of(Some(s))?],
            ..Scope::default()
        }),
        None => Filter::all(),
    })
}

/// Writes every hybrid candidate of every query with its features (JSONL).
fn write_features(
    hub: &Hub,
    dataset: &str,
    queries: &[QueryLine],
    corpus_id_of: &HashMap<String, String>,
    path: &Path,
) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).ctx("cannot create", path)?);
    for q in queries {
        let candidates = hub.hybrid_candidates(&SearchRequest {
            query: q.query.clone(),
            filter: query_filter(q)?,
            limit: Some(TOP),
            mode: Some(SearchMode::Hybrid),
            min_score: None,
        })?;
        for c in candidates {
            let Some(id) = corpus_id_of.get(&c.id) else {
                continue;
            };
            let features = crate::index::fusion::FEATURES
                .iter()
                .zip(c.features)
                .map(|(name, v)| (name.to_string(), serde_json::json!(v)))
                // The second stage's, prefixed (both have a `cosine`).
                .chain(
                    crate::rerank::FEATURES
                        .iter()
                        .zip(c.rerank)
                        .map(|(name, v)| (format!("rr_{name}"), serde_json::json!(v))),
                )
                .collect();
            let record = FeatureRecord {
                dataset: dataset.to_string(),
                qid: q.qid.clone(),
                scene: q.scene.clone(),
                relevant_total: q.relevant.len(),
                id: id.clone(),
                relevant: q.relevant.iter().any(|r| r == id),
                features,
                candidate: c,
            };
            let line = serde_json::to_string(&record)
                .map_err(|e| Error::Internal(format!("feature record: {e}")))?;
            writeln!(out, "{line}").ctx("cannot write", path)?;
        }
    }
    out.flush().ctx("cannot write", path)?;
    Ok(())
}

/// [`run`] with [`EvalOptions`].
pub fn run_with(
    dir: &Path,
    modes: &[SearchMode],
    config: &Config,
    embedder: EmbedderSlot,
    options: &EvalOptions,
) -> Result<Vec<EvalReport>> {
    let corpus: Vec<CorpusLine> = read_jsonl(&dir.join("corpus.jsonl"))?;
    let queries: Vec<QueryLine> = read_jsonl(&dir.join("queries.jsonl"))?;
    if corpus.is_empty() || queries.is_empty() {
        return Err(Error::invalid(format!(
            "{}: corpus.jsonl and queries.jsonl must not be empty",
            dir.display()
        )));
    }
    let dataset = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let mut config = config.clone();
    let depth = options.depth.unwrap_or(TOP).max(TOP);
    config.search.max_limit = config.search.max_limit.max(depth);
    let mut per_query = match &options.per_query {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).ctx("cannot create", path)?,
        )),
        None => None,
    };
    let root = EvalRoot::open(config, embedder, options.vector_cache.as_deref())?;
    let hub = &root.hub;

    let started = Instant::now();
    let corpus_id_of = load_corpus(hub, &dataset, &corpus, None)?;
    let load_ms = started.elapsed().as_millis() as u64;

    if let Some(path) = &options.features {
        write_features(hub, &dataset, &queries, &corpus_id_of, path)?;
    }

    let mut reports = Vec::new();
    for &mode in modes {
        let mut run = ModeRun {
            hub,
            dataset: &dataset,
            corpus_id_of: &corpus_id_of,
            depth,
            per_query: per_query.as_mut().zip(options.per_query.as_deref()),
            totals: Totals::default(),
            ran: mode,
        };
        for q in &queries {
            run.query(q, mode)?;
        }
        let (t, ran) = (run.totals, run.ran);
        let n = queries.len() as f64;
        let mut latencies = t.latencies;
        latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
            latencies.get(i).copied().unwrap_or_default()
        };
        reports.push(EvalReport {
            dataset: dataset.clone(),
            mode,
            ran,
            corpus: corpus.len(),
            queries: queries.len(),
            recall_at_5: t.recall5 / n,
            recall_at_5_with_floor: t.recall5_floor / n,
            kept_at_5: t.kept / n,
            recall_at_10: t.recall10 / n,
            mrr_at_10: t.mrr / n,
            latency_p50_ms: pct(0.5),
            latency_p95_ms: pct(0.95),
            load_ms,
            by_category: t
                .by_category
                .into_iter()
                .map(|(c, (sum, n))| {
                    let score = CategoryScore {
                        queries: n,
                        recall_at_5: sum / n as f64,
                    };
                    (c, score)
                })
                .collect(),
        });
    }
    if let (Some(out), Some(path)) = (per_query.as_mut(), options.per_query.as_deref()) {
        use std::io::Write;
        out.flush().ctx("cannot write", path)?;
    }
    root.close()?;
    Ok(reports)
}

/// Sums over the queries of one mode.
#[derive(Default)]
struct Totals {
    recall5: f64,
    recall5_floor: f64,
    kept: f64,
    recall10: f64,
    mrr: f64,
    latencies: Vec<f64>,
    /// Category → (sum of recall@5, queries).
    by_category: std::collections::BTreeMap<String, (f64, usize)>,
}

/// One mode of [`run_with`] over a loaded root.
struct ModeRun<'a> {
    hub: &'a Hub,
    dataset: &'a str,
    corpus_id_of: &'a HashMap<String, String>,
    depth: usize,
    per_query: Option<(&'a mut std::io::BufWriter<std::fs::File>, &'a Path)>,
    totals: Totals,
    ran: SearchMode,
}

impl ModeRun<'_> {
    /// Runs `q` in `mode` (the decision off) and adds it to the totals.
    fn query(&mut self, q: &QueryLine, mode: SearchMode) -> Result<()> {
        let t = Instant::now();
        let results = self.hub.search_filtered(&SearchRequest {
            query: q.query.clone(),
            filter: query_filter(q)?,
            limit: Some(self.depth),
            mode: Some(mode),
            min_score: Some(0.0),
        })?;
        self.totals
            .latencies
            .push(t.elapsed().as_secs_f64() * 1000.0);
        self.ran = results.mode;
        let known: Vec<(&str, &crate::search::SearchHit)> = results
            .hits
            .iter()
            .filter_map(|h| {
                self.corpus_id_of
                    .get(&h.memory.id)
                    .map(|id| (id.as_str(), h))
            })
            .collect();
        let ranked: Vec<&str> = known.iter().map(|(id, _)| *id).collect();
        // What a client gets by default: the relevance decision on.
        let model = crate::relevance::model();
        let kept: Vec<&str> = known
            .iter()
            .take(5)
            .filter(|(_, h)| model.keeps(&h.evidence, h.relevance, None))
            .map(|(id, _)| *id)
            .collect();
        let is_relevant = |id: &str| q.relevant.iter().any(|r| r == id);
        if let Some((out, path)) = self.per_query.as_mut() {
            use std::io::Write;
            let hit5 = ranked.iter().take(5).filter(|id| is_relevant(id)).count();
            let record = QueryRecord {
                dataset: self.dataset.to_string(),
                mode,
                qid: q.qid.clone(),
                query: q.query.clone(),
                ranked: ranked.iter().map(|s| s.to_string()).collect(),
                scores: known.iter().map(|(_, h)| h.score).collect(),
                passes: known.iter().map(|(_, h)| h.pass).collect(),
                relevance: known.iter().map(|(_, h)| h.relevance).collect(),
                relevant: q.relevant.clone(),
                first_hit_rank: ranked.iter().position(|id| is_relevant(id)).map(|i| i + 1),
                recall_at_5: if q.relevant.is_empty() {
                    0.0
                } else {
                    hit5 as f64 / q.relevant.len() as f64
                },
                category: q.category(),
            };
            let line = serde_json::to_string(&record)
                .map_err(|e| Error::Internal(format!("per-query record: {e}")))?;
            writeln!(out, "{line}").ctx("cannot write", path)?;
        }
        if q.relevant.is_empty() {
            tracing::warn!(eval.qid = %q.qid, "query lists no relevant ids; counted as zero");
            return Ok(());
        }
        let share = |ids: &[&str]| {
            ids.iter().filter(|id| is_relevant(id)).count() as f64 / q.relevant.len() as f64
        };
        let t = &mut self.totals;
        let recall5 = share(&ranked[..ranked.len().min(5)]);
        if let Some(c) = q.category() {
            let e = t.by_category.entry(c).or_default();
            *e = (e.0 + recall5, e.1 + 1);
        }
        t.recall5 += recall5;
        t.recall5_floor += share(&kept);
        t.kept += kept.len() as f64;
        t.recall10 += share(&ranked[..ranked.len().min(10)]);
        if let Some(rank) = ranked.iter().take(TOP).position(|id| is_relevant(id)) {
            t.mrr += 1.0 / (rank + 1) as f64;
        }
        Ok(())
    }
}

/// A fresh temporary root with a writer hub, its vector cache seeded from a
/// shared one; [`EvalRoot::close`] writes the cache back.
pub(crate) struct EvalRoot {
    /// The hub over the temporary root.
    pub(crate) hub: Hub,
    local_cache: PathBuf,
    shared_cache: Option<PathBuf>,
    // Dropped last: removes the directory.
    _root: TempRoot,
}

impl EvalRoot {
    /// Opens a hub over a new temporary root.
    pub(crate) fn open(
        config: Config,
        embedder: EmbedderSlot,
        shared_cache: Option<&Path>,
    ) -> Result<EvalRoot> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let root = TempRoot(
            std::env::temp_dir().join(format!("memd-eval-{}-{nanos}", std::process::id())),
        );
        let layout = Layout::new(&root.0);
        let local_cache = layout.cache().join("vectors.db");
        if let Some(shared) = shared_cache.filter(|p| p.exists()) {
            crate::base::durable::copy_atomic(shared, &local_cache)?;
        }
        let (hub, _) = Hub::open_with(layout, config, Mode::Write, embedder, &mut |_| {})?;
        Ok(EvalRoot {
            hub,
            local_cache,
            shared_cache: shared_cache.map(Path::to_path_buf),
            _root: root,
        })
    }

    /// Closes the hub (which checkpoints the cache's write-ahead log into its
    /// file) and copies the cache back to the shared one.
    pub(crate) fn close(self) -> Result<()> {
        let EvalRoot {
            hub,
            local_cache,
            shared_cache,
            _root,
        } = self;
        drop(hub);
        if let Some(shared) = shared_cache.as_deref()
            && local_cache.exists()
        {
            crate::base::durable::copy_atomic(&local_cache, shared)?;
        }
        Ok(())
    }
}

/// Writes `corpus` through the normal write path (in `scene` when given,
/// else each line's own) and returns memory id → corpus id.
fn load_corpus(
    hub: &Hub,
    dataset: &str,
    corpus: &[CorpusLine],
    scene: Option<&Scene>,
) -> Result<HashMap<String, String>> {
    let mut corpus_id_of: HashMap<String, String> = HashMap::new();
    // One millisecond apart, in corpus order, ending now: equal scores are
    // ordered by write time then id, so two runs rank ties alike (with
    // the clock's own times a whole batch shares a millisecond and the
    // ids' random part decides).
    let first = hub.now() - chrono::Duration::milliseconds(corpus.len() as i64);
    let mut written = 0i64;
    for chunk in corpus.chunks(LOAD_BATCH) {
        let mut reqs = Vec::with_capacity(chunk.len());
        for line in chunk {
            let session = line.session.as_ref().map(|s| match s {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            let scene = match scene {
                Some(s) => s.clone(),
                None => scene_of(line.scene.as_deref())?,
            };
            let mut req = WriteRequest::new(scene, line.text.clone(), "eval");
            req.setting = crate::model::Setting::from_input(
                line.time.as_deref(),
                session.as_deref(),
                line.speaker.as_deref(),
            );
            req.ts = Some(first + chrono::Duration::milliseconds(written));
            written += 1;
            reqs.push(req);
        }
        for (line, outcome) in chunk.iter().zip(hub.append_batch(reqs)?) {
            let outcome = outcome
                .map_err(|e| Error::invalid(format!("{dataset}: corpus id {}: {e}", line.id)))?;
            corpus_id_of.insert(outcome.id, line.id.clone());
        }
    }
    Ok(corpus_id_of)
}
