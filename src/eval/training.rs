//! Training data of the relevance model ([`crate::relevance`]): every hit
//! of many searches, with its evidence and whether it is about its query.
//!
//! [`export`] builds roots of very different sizes from the dev sets and
//! searches them in full-text, hybrid and semantic mode with the decision
//! off (`min_score` 0), writing one JSON line per hit ([`Row`]):
//!
//! - **labelled**: each dev set as its own root, each query under its scene;
//!   a hit is relevant when the dataset labels it so.
//! - **other-user** / **other-conversation**: the same queries under another
//!   scene (the other MADial user, the next LoCoMo conversation): nothing
//!   there is about them.
//! - **other-set**: the queries of another dev set (MADial's dialogues on
//!   the LoCoMo root, LoCoMo's questions on each MADial root), asked of the
//!   whole root in hybrid mode: held-out off-topic searches the trainer
//!   never fits on (it reports how many keep a hit).
//! - **off-topic**: questions no root is about (`split` says whether the
//!   trainer may fit on them).
//! - **span**: distinctive spans copied from memories of the mixed root
//!   ([`super::precision`]), relevant only to the memory they come from.
//! - **keyword**: one or two rare words of a memory (a Latin word of four
//!   letters or more, or a Chinese word), as a person searches for a word
//!   they remember; relevant to every memory holding them (dataset
//!   `<root>:keyword`, counted as labelled).
//! - **translated**: on the cross-language sets, each memory's version in
//!   the other language (the same id in `madial-zh-dev` or `madial-en-dev`)
//!   as the query, under the memory's scene; relevant to that memory only
//!   (dataset `<set>:translated`, counted as labelled).
//! - **small** roots (5 and 20 memories of one scene, half of them with
//!   [`CHATTER`] beside): random ones, and ones built around a query (its
//!   relevant memories and others of its scene), so that short questions
//!   and translations on small roots are represented; and **large** roots (a
//!   dev set's scenes filled up with `filler` texts), with the labelled
//!   queries whose relevant memories they hold. The mixed root holds the
//!   chatter too.
//!
//! Off-topic questions are asked alone and three at a time as the turns of
//! a conversation (what recall sends).
//!
//! `group` names the conversation, dialogue, user or question a row belongs
//! to, so that the trainer cross-validates with groups held out together.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use serde::Serialize;

use super::precision::{OffTopic, distinctive_span};
use super::{CorpusLine, EvalRoot, QueryLine, load_corpus, read_jsonl};
use crate::config::Config;
use crate::embed::{EmbedError, Embedder, EmbedderSlot};
use crate::error::{Error, IoContext, Result};
use crate::hub::Hub;
use crate::index::filter::{Filter, Scope};
use crate::index::tokenizer::normalize;
use crate::model::Scene;
use crate::search::{SearchMode, SearchRequest};

/// Hits kept per search.
const DEPTH: usize = 10;

/// Group-chat filler that answers nothing (the small and mixed roots hold
/// it, in the queries' scene): a hit on it is never relevant.
pub const CHATTER: [&str; 24] = [
    "哈哈哈笑死我了",
    "笑死我了哈哈哈哈",
    "我也要我也要",
    "今天天气不错",
    "好的没问题",
    "你们在干嘛呢",
    "来了来了",
    "晚点再说吧",
    "太真实了吧",
    "我先去吃饭了",
    "有人在吗",
    "这个表情包哪来的",
    "lol that's hilarious",
    "omg same",
    "who's up for lunch",
    "brb",
    "sounds good to me",
    "see you guys later",
    "haha no way",
    "did anyone see that meme",
    "that's so true lmao",
    "ok cool thanks",
    "anyone awake?",
    "gonna grab coffee",
];

/// One hit of one search.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Which root: `dev:<set>`, `mixed`, `small-<n>:<set>:<sample>`, `large-<n>:<set>`.
    pub root: String,
    /// Memories in the root.
    pub root_size: usize,
    /// The dataset the query comes from (or `off-topic`, `span`).
    pub dataset: String,
    /// Query id.
    pub qid: String,
    /// Cross-validation group (conversation, dialogue, user or question).
    pub group: String,
    /// `labelled`, `other-user`, `other-conversation`, `other-set`, `off-topic` or `span`.
    pub kind: String,
    /// `tune` or `test` for off-topic questions, else `dev`.
    pub split: String,
    /// The query's language (`zh` or `en`).
    pub lang: String,
    /// The mode that ran.
    pub mode: SearchMode,
    /// Rank of the hit, from 1.
    pub rank: usize,
    /// Relevant memories the query has in this root (recall's denominator).
    pub relevant_total: usize,
    /// Whether the hit is one of them.
    pub relevant: bool,
    /// Every feature of [`crate::relevance::FEATURES`] and
    /// [`crate::relevance::STAGE_FEATURES`] by name, of the whole query.
    pub features: serde_json::Map<String, serde_json::Value>,
    /// In a conversation whose last turn a person spoke, the features of
    /// the last turn alone, which the hit is judged on too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_turn: Option<serde_json::Map<String, serde_json::Value>>,
    /// Whether the hit had a cosine of the calibrated model.
    pub has_cosine: bool,
    /// Whether the second stage of hybrid search ranked the hit.
    pub has_stage: bool,
    /// What the checked-in model says.
    pub relevance: f32,
    /// The hit is group-chat filler ([`CHATTER`]).
    pub chatter: bool,
}

/// What [`export`] reads besides the dev sets.
#[derive(Debug, Clone, Default)]
pub struct TrainingOptions {
    /// A vector cache shared across runs.
    pub vector_cache: Option<PathBuf>,
    /// Off-topic questions (every split; rows say which).
    pub off_topic: Vec<OffTopic>,
    /// Texts that fill the large roots.
    pub filler: Vec<String>,
    /// Sizes of the large roots (full text and hybrid up to
    /// [`LARGE_HYBRID_MAX`], full text only above).
    pub large: Vec<usize>,
    /// Seed of the small roots and spans.
    pub seed: u64,
}

/// The largest root searched in hybrid and semantic mode (embedding more costs minutes per 10k).
pub const LARGE_HYBRID_MAX: usize = 20_000;

/// Small roots built around a query, per dataset and size.
pub const SMALL_AROUND_QUERIES: usize = 8;

/// The set holding the other-language version of a cross-language set's
/// memories (the same ids).
fn counterpart(set: &str) -> Option<&'static str> {
    match set {
        "madial-zh2en-dev" => Some("madial-zh-dev"),
        "madial-en2zh-dev" => Some("madial-en-dev"),
        _ => None,
    }
}

/// Remembers query vectors: the same query is embedded once across modes and roots.
struct RememberedQueries {
    model: Arc<dyn Embedder>,
    queries: Mutex<HashMap<String, Vec<f32>>>,
}

impl Embedder for RememberedQueries {
    fn model_id(&self) -> &str {
        self.model.model_id()
    }
    fn dim(&self) -> usize {
        self.model.dim()
    }
    fn embed_queries(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for text in texts {
            let known = self
                .queries
                .lock()
                .expect("query vectors poisoned")
                .get(*text)
                .cloned();
            let v = match known {
                Some(v) => v,
                None => {
                    let v = self
                        .model
                        .embed_queries(&[text])?
                        .pop()
                        .ok_or_else(|| EmbedError::Inference("no vector".into()))?;
                    self.queries
                        .lock()
                        .expect("query vectors poisoned")
                        .insert(text.to_string(), v.clone());
                    v
                }
            };
            out.push(v);
        }
        Ok(out)
    }
    fn embed_passages(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
        self.model.embed_passages(texts)
    }
}

/// A query to run on a root.
struct Probe {
    dataset: String,
    qid: String,
    group: String,
    kind: &'static str,
    split: String,
    lang: String,
    query: String,
    filter: Filter,
    relevant: Vec<String>,
}

struct Writer<'a> {
    out: std::io::BufWriter<std::fs::File>,
    path: &'a Path,
    rows: usize,
}

impl Writer<'_> {
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        hub: &Hub,
        root: &str,
        root_size: usize,
        corpus_id_of: &HashMap<String, String>,
        probes: &[Probe],
        modes: &[SearchMode],
    ) -> Result<()> {
        for p in probes {
            for &mode in modes {
                let results = hub.search_filtered(&SearchRequest {
                    query: p.query.clone(),
                    filter: p.filter.clone(),
                    limit: Some(DEPTH),
                    mode: Some(mode),
                    min_score: Some(0.0),
                })?;
                for (i, h) in results.hits.iter().enumerate() {
                    let cid = corpus_id_of.get(&h.memory.id).cloned().unwrap_or_default();
                    // The whole query's evidence, and the last turn's when it was judged too.
                    let (whole, last) = match h.judged_twice.as_deref() {
                        Some([whole, last]) => (whole, Some(last)),
                        None => (&h.evidence, None),
                    };
                    let row = Row {
                        root: root.to_string(),
                        root_size,
                        dataset: p.dataset.clone(),
                        qid: p.qid.clone(),
                        group: p.group.clone(),
                        kind: p.kind.to_string(),
                        split: p.split.clone(),
                        lang: p.lang.clone(),
                        mode: results.mode,
                        rank: i + 1,
                        relevant_total: p.relevant.len(),
                        relevant: p.relevant.contains(&cid),
                        features: features_of(whole),
                        last_turn: last.map(features_of),
                        has_cosine: whole.cosine.is_some(),
                        has_stage: whole.stage.is_some(),
                        relevance: h.relevance,
                        chatter: cid.starts_with("chatter-"),
                    };
                    let line = serde_json::to_string(&row)
                        .map_err(|e| Error::Internal(format!("training row: {e}")))?;
                    writeln!(self.out, "{line}").ctx("cannot write", self.path)?;
                    self.rows += 1;
                }
            }
        }
        Ok(())
    }
}

/// Every feature of `e` by name ([`Row::features`]).
fn features_of(e: &crate::relevance::Evidence) -> serde_json::Map<String, serde_json::Value> {
    crate::relevance::FEATURES
        .iter()
        .chain(&crate::relevance::STAGE_FEATURES)
        .map(|f| {
            (
                f.to_string(),
                serde_json::json!(e.feature(f).unwrap_or(0.0)),
            )
        })
        .collect()
}

fn scene_filter(scene: &str) -> Result<Filter> {
    Ok(Filter::scope(Scope {
        scenes: vec![Scene::parse(scene)?],
        ..Scope::default()
    }))
}

/// The language of a dev set's queries.
fn lang_of(dataset: &str) -> &'static str {
    if dataset.starts_with("madial-zh") {
        "zh"
    } else {
        "en"
    }
}

/// The scene a query is checked against instead of its own: the other
/// MADial user, the next LoCoMo conversation.
fn other_scene(scene: &str) -> Option<(String, &'static str)> {
    match scene {
        "madial-u1" => Some(("madial-u2".into(), "other-user")),
        "madial-u2" => Some(("madial-u1".into(), "other-user")),
        s => {
            let n: usize = s.strip_prefix("locomo-")?.parse().ok()?;
            Some((format!("locomo-{}", (n + 1) % 5), "other-conversation"))
        }
    }
}

/// The group of a dev query: its LoCoMo conversation, else its MADial dialogue.
fn group_of(q: &QueryLine) -> String {
    match q.scene.as_deref() {
        Some(s) if s.starts_with("locomo-") => s.to_string(),
        _ => format!("dialogue-{}", q.qid),
    }
}

/// The translated probes of a cross-language set (see the module docs) for
/// the memories in `held`.
fn translated_probes(
    set: &str,
    corpus: &[CorpusLine],
    other: &HashMap<String, String>,
    held: Option<&[String]>,
) -> Result<Vec<Probe>> {
    let lang = if set == "madial-zh2en-dev" {
        "zh"
    } else {
        "en"
    };
    let mut probes = Vec::new();
    for line in corpus {
        if held.is_some_and(|h| !h.contains(&line.id)) {
            continue;
        }
        let (Some(query), Some(scene)) = (other.get(&line.id), line.scene.as_deref()) else {
            continue;
        };
        probes.push(Probe {
            dataset: format!("{set}:translated"),
            qid: format!("translated-{}", line.id),
            group: format!("memory-{scene}-{}", line.id),
            kind: "labelled",
            split: "dev".into(),
            lang: lang.into(),
            query: query.clone(),
            filter: scene_filter(scene)?,
            relevant: vec![line.id.clone()],
        });
    }
    Ok(probes)
}

/// Keyword probes (see the module docs) for up to `max` memories of
/// `corpus` (those in `held` when given), each searched under `filter`.
fn keyword_probes(
    dataset: &str,
    corpus: &[CorpusLine],
    held: Option<&[String]>,
    filter: &Filter,
    rng: &mut StdRng,
    max: usize,
) -> Vec<Probe> {
    use crate::analysis::tokenizer::{Term, cjk_words, is_stop_word, script_milli, tokenize};
    let terms: Vec<std::collections::HashSet<String>> = corpus
        .iter()
        .map(|c| tokenize(&c.text).into_iter().map(|t| t.text).collect())
        .collect();
    let holds = |i: usize, query: &[Term]| query.iter().all(|t| terms[i].contains(&t.text));
    let mut order: Vec<usize> = (0..corpus.len())
        .filter(|&i| held.is_none_or(|h| h.contains(&corpus[i].id)))
        .filter(|&i| !corpus[i].id.starts_with("chatter-"))
        .collect();
    order.shuffle(rng);
    let mut probes = Vec::new();
    for i in order {
        if probes.len() >= max {
            break;
        }
        let text = &corpus[i].text;
        let mut words: Vec<String> = if script_milli(text) > 500 {
            cjk_words(text)
                .into_iter()
                .filter(|w| w.chars().count() >= 2)
                .collect()
        } else {
            text.split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.chars().count() >= 4 && w.chars().all(char::is_alphabetic))
                .map(str::to_lowercase)
                .collect()
        };
        words.retain(|w| {
            let t = tokenize(w);
            !t.is_empty() && !t.iter().any(is_stop_word)
        });
        words.sort();
        words.dedup();
        // Rare words only: held by at most three memories.
        let rare: Vec<(String, Vec<Term>)> = words
            .into_iter()
            .map(|w| {
                let t = tokenize(&w);
                (w, t)
            })
            .filter(|(_, t)| (0..corpus.len()).filter(|&j| holds(j, t)).count() <= 3)
            .collect();
        let Some(first) = rare.choose(rng).cloned() else {
            continue;
        };
        // Every other probe asks for two words of the memory.
        let (query, tokens) = match rare.iter().find(|(w, _)| *w != first.0) {
            Some(second) if probes.len() % 2 == 1 => (
                format!("{} {}", first.0, second.0),
                first.1.iter().chain(&second.1).cloned().collect::<Vec<_>>(),
            ),
            _ => first.clone(),
        };
        let relevant: Vec<String> = (0..corpus.len())
            .filter(|&j| holds(j, &tokens))
            .map(|j| corpus[j].id.clone())
            .collect();
        probes.push(Probe {
            dataset: format!("{dataset}:keyword"),
            qid: format!("keyword-{}", corpus[i].id),
            group: format!("keyword-{}", corpus[i].id),
            kind: "labelled",
            split: "dev".into(),
            lang: if script_milli(&query) > 500 {
                "zh"
            } else {
                "en"
            }
            .into(),
            query,
            filter: filter.clone(),
            relevant,
        });
    }
    probes
}

fn off_topic_probes(questions: &[OffTopic]) -> Vec<Probe> {
    let mut probes: Vec<Probe> = questions
        .iter()
        .enumerate()
        .map(|(i, q)| Probe {
            dataset: "off-topic".into(),
            qid: format!("off-topic-{i}"),
            group: format!("off-topic-{i}"),
            kind: "off-topic",
            split: q.split.clone(),
            lang: q.lang.clone(),
            query: q.query.clone(),
            filter: Filter::all(),
            relevant: Vec::new(),
        })
        .collect();
    let mut by_kind: std::collections::BTreeMap<(String, String), Vec<usize>> = Default::default();
    for (i, q) in questions.iter().enumerate() {
        by_kind
            .entry((q.lang.clone(), q.split.clone()))
            .or_default()
            .push(i);
    }
    for ((lang, split), ids) in by_kind {
        for turns in ids.chunks(3).filter(|c| c.len() == 3) {
            let query = turns
                .iter()
                .zip(["A", "B", "A"])
                .map(|(&i, who)| format!("{who}: {}", questions[i].query))
                .collect::<Vec<_>>()
                .join("\n");
            probes.push(Probe {
                dataset: "off-topic".into(),
                qid: format!("off-topic-dialogue-{}", turns[0]),
                // Held out with the question it begins with.
                group: format!("off-topic-{}", turns[0]),
                kind: "off-topic",
                split: split.clone(),
                lang: lang.clone(),
                query,
                filter: Filter::all(),
                relevant: Vec::new(),
            });
        }
    }
    probes
}

/// How many queries of other sets are asked of a dev root (see the module docs: other-set).
pub const OTHER_SET_QUERIES: usize = 200;

/// The other-set probes of the root of `set` (see the module docs): at most
/// [`OTHER_SET_QUERIES`] queries of the sets about other people, asked of
/// every memory, relevant to none.
fn other_set_probes(eval_dir: &Path, set: &str) -> Result<Vec<Probe>> {
    let strangers: &[&str] = if set == "locomo-dev" {
        &["madial-zh-dev", "madial-en-dev"]
    } else {
        &["locomo-dev"]
    };
    let mut probes = Vec::new();
    for &other in strangers {
        let queries: Vec<QueryLine> = read_jsonl(&eval_dir.join(other).join("queries.jsonl"))?;
        let step = queries
            .len()
            .div_ceil(OTHER_SET_QUERIES / strangers.len())
            .max(1);
        probes.extend(queries.iter().step_by(step).map(|q| Probe {
            dataset: other.to_string(),
            qid: format!("other-set-{}", q.qid),
            group: format!("other-set-{other}-{}", q.qid),
            kind: "other-set",
            split: "test".into(),
            lang: lang_of(other).into(),
            query: q.query.clone(),
            filter: Filter::all(),
            relevant: Vec::new(),
        }));
    }
    Ok(probes)
}

/// [`CHATTER`] as corpus lines of `scene`.
fn chatter(scene: Option<&str>) -> Vec<CorpusLine> {
    CHATTER
        .iter()
        .enumerate()
        .map(|(i, text)| CorpusLine {
            id: format!("chatter-{i}"),
            text: text.to_string(),
            scene: scene.map(String::from),
            time: None,
            speaker: None,
            session: None,
        })
        .collect()
}

/// The modes every probe runs in.
const ALL_MODES: [SearchMode; 3] = [
    SearchMode::Fulltext,
    SearchMode::Hybrid,
    SearchMode::Semantic,
];

/// The dev sets, in the order the rows are written.
const SETS: [&str; 5] = [
    "madial-zh-dev",
    "madial-en-dev",
    "madial-zh2en-dev",
    "madial-en2zh-dev",
    "locomo-dev",
];

/// One dev set as read for training.
struct DevSet<'s> {
    name: &'s str,
    corpus: Vec<CorpusLine>,
    queries: Vec<QueryLine>,
    /// The other-language version of each memory (the translated probes).
    other: HashMap<String, String>,
}

impl<'s> DevSet<'s> {
    fn read(eval_dir: &Path, name: &'s str) -> Result<DevSet<'s>> {
        let dir = eval_dir.join(name);
        let other = match counterpart(name) {
            Some(c) => read_jsonl::<CorpusLine>(&eval_dir.join(c).join("corpus.jsonl"))?
                .into_iter()
                .map(|l| (l.id, l.text))
                .collect(),
            None => HashMap::new(),
        };
        Ok(DevSet {
            name,
            corpus: read_jsonl(&dir.join("corpus.jsonl"))?,
            queries: read_jsonl(&dir.join("queries.jsonl"))?,
            other,
        })
    }

    /// A probe of query `q` (`kind` labelled, or the other scene's kind
    /// with `scene` given, relevant to nothing there).
    fn labelled(&self, q: &QueryLine, kind: &'static str, scene: Option<&str>) -> Result<Probe> {
        Ok(Probe {
            dataset: self.name.to_string(),
            qid: q.qid.clone(),
            group: group_of(q),
            kind,
            split: "dev".into(),
            lang: lang_of(self.name).into(),
            query: q.query.clone(),
            filter: match scene.or(q.scene.as_deref()) {
                Some(s) => scene_filter(s)?,
                None => Filter::all(),
            },
            relevant: if kind == "labelled" {
                q.relevant.clone()
            } else {
                Vec::new()
            },
        })
    }

    /// The labelled probes of the queries of `scene` whose relevant
    /// memories `held` holds, relevant to those only.
    fn held_probes(&self, scene: &str, held: &[String]) -> Result<Vec<Probe>> {
        let mut probes = Vec::new();
        for q in self
            .queries
            .iter()
            .filter(|q| q.scene.as_deref() == Some(scene))
        {
            let mut p = self.labelled(q, "labelled", None)?;
            p.relevant.retain(|r| held.contains(r));
            if !p.relevant.is_empty() {
                probes.push(p);
            }
        }
        Ok(probes)
    }

    /// Its scenes, sorted.
    fn scenes(&self) -> Vec<String> {
        let mut s: Vec<String> = self.corpus.iter().filter_map(|c| c.scene.clone()).collect();
        s.sort_unstable();
        s.dedup();
        s
    }
}

/// What [`export`] works with.
struct Exporter<'a> {
    w: Writer<'a>,
    config: Config,
    embedder: Arc<dyn Embedder>,
    options: &'a TrainingOptions,
    off_topic: Vec<Probe>,
    rng: StdRng,
}

impl Exporter<'_> {
    fn open(&self) -> Result<EvalRoot> {
        EvalRoot::open(
            self.config.clone(),
            EmbedderSlot::ready(self.embedder.clone()),
            self.options.vector_cache.as_deref(),
        )
    }

    /// The dev set as its own root: its queries under their own scene and
    /// another's, its translations, the off-topic questions.
    fn dev_root(&mut self, eval_dir: &Path, set: &DevSet<'_>) -> Result<()> {
        let root = self.open()?;
        let ids = load_corpus(&root.hub, set.name, &set.corpus, None)?;
        let name = format!("dev:{}", set.name);
        let size = set.corpus.len();
        let probes = set
            .queries
            .iter()
            .map(|q| set.labelled(q, "labelled", None))
            .collect::<Result<Vec<_>>>()?;
        self.w
            .run(&root.hub, &name, size, &ids, &probes, &ALL_MODES)?;
        let translated = translated_probes(set.name, &set.corpus, &set.other, None)?;
        self.w
            .run(&root.hub, &name, size, &ids, &translated, &ALL_MODES)?;
        let mut others = Vec::new();
        for q in &set.queries {
            if let Some((scene, kind)) = q.scene.as_deref().and_then(other_scene) {
                others.push(set.labelled(q, kind, Some(&scene))?);
            }
        }
        let text_modes = [SearchMode::Fulltext, SearchMode::Hybrid];
        self.w
            .run(&root.hub, &name, size, &ids, &others, &text_modes)?;
        let strangers = other_set_probes(eval_dir, set.name)?;
        self.w.run(
            &root.hub,
            &name,
            size,
            &ids,
            &strangers,
            &[SearchMode::Hybrid],
        )?;
        self.w
            .run(&root.hub, &name, size, &ids, &self.off_topic, &ALL_MODES)?;
        root.close()
    }

    /// Small roots: a few random memories of one scene, with the queries they answer.
    fn small_random(&mut self, set: &DevSet<'_>) -> Result<()> {
        let scenes = set.scenes();
        for n in [5usize, 20] {
            for sample in 0..3 {
                let scene = scenes[sample % scenes.len()].as_str();
                let mut lines: Vec<&CorpusLine> = set
                    .corpus
                    .iter()
                    .filter(|c| c.scene.as_deref() == Some(scene))
                    .collect();
                lines.shuffle(&mut self.rng);
                let mut picked: Vec<CorpusLine> = lines.into_iter().take(n).cloned().collect();
                let held: Vec<String> = picked.iter().map(|c| c.id.clone()).collect();
                // Every other small root also holds group-chat filler.
                if sample % 2 == 1 {
                    picked.extend(chatter(Some(scene)));
                }
                let root = self.open()?;
                let ids = load_corpus(&root.hub, set.name, &picked, None)?;
                let probes = set.held_probes(scene, &held)?;
                let name = format!("small-{n}:{}:{sample}", set.name);
                let size = picked.len();
                self.w
                    .run(&root.hub, &name, size, &ids, &probes, &ALL_MODES)?;
                self.w
                    .run(&root.hub, &name, size, &ids, &self.off_topic, &ALL_MODES)?;
                root.close()?;
            }
        }
        Ok(())
    }

    /// Small roots built around a query: its relevant memories (at most
    /// half the root) and others of its scene; every query, translation and
    /// keyword whose relevant memories they hold is asked.
    fn small_around(&mut self, set: &DevSet<'_>) -> Result<()> {
        for n in [5usize, 20] {
            for sample in 0..SMALL_AROUND_QUERIES {
                let Some(q) = set.queries.choose(&mut self.rng) else {
                    break;
                };
                let Some(scene) = q.scene.as_deref() else {
                    continue;
                };
                let mut held: Vec<String> = q.relevant.iter().take(n / 2).cloned().collect();
                let mut rest: Vec<&CorpusLine> = set
                    .corpus
                    .iter()
                    .filter(|c| c.scene.as_deref() == Some(scene) && !held.contains(&c.id))
                    .collect();
                rest.shuffle(&mut self.rng);
                held.extend(rest.into_iter().take(n - held.len()).map(|c| c.id.clone()));
                let mut picked: Vec<CorpusLine> = set
                    .corpus
                    .iter()
                    .filter(|c| held.contains(&c.id))
                    .cloned()
                    .collect();
                if sample % 2 == 1 {
                    picked.extend(chatter(Some(scene)));
                }
                let root = self.open()?;
                let ids = load_corpus(&root.hub, set.name, &picked, None)?;
                let mut probes = set.held_probes(scene, &held)?;
                probes.extend(translated_probes(
                    set.name,
                    &set.corpus,
                    &set.other,
                    Some(&held),
                )?);
                probes.extend(keyword_probes(
                    set.name,
                    &picked,
                    None,
                    &scene_filter(scene)?,
                    &mut self.rng,
                    3,
                ));
                let name = format!("small-{n}:{}:q{sample}", set.name);
                let size = picked.len();
                self.w
                    .run(&root.hub, &name, size, &ids, &probes, &ALL_MODES)?;
                if sample % 2 == 0 {
                    self.w
                        .run(&root.hub, &name, size, &ids, &self.off_topic, &ALL_MODES)?;
                }
                root.close()?;
            }
        }
        Ok(())
    }

    /// Large roots: the dev set's scenes filled up with other texts.
    fn large(&mut self, set: &DevSet<'_>) -> Result<()> {
        let scenes = set.scenes();
        for &n in &self.options.large {
            let fill = n
                .saturating_sub(set.corpus.len())
                .min(self.options.filler.len());
            let mut all = set.corpus.clone();
            all.extend(
                self.options.filler[..fill]
                    .iter()
                    .enumerate()
                    .map(|(i, text)| CorpusLine {
                        id: format!("filler-{i}"),
                        text: text.clone(),
                        scene: Some(scenes[i % scenes.len()].clone()),
                        time: None,
                        speaker: None,
                        session: None,
                    }),
            );
            let full_text = [SearchMode::Fulltext];
            let (root, modes): (EvalRoot, &[SearchMode]) = if n > LARGE_HYBRID_MAX {
                let slot = EmbedderSlot::none("full text only at this size");
                (EvalRoot::open(self.config.clone(), slot, None)?, &full_text)
            } else {
                (self.open()?, &ALL_MODES)
            };
            let ids = load_corpus(&root.hub, set.name, &all, None)?;
            let probes = set
                .queries
                .iter()
                .map(|q| set.labelled(q, "labelled", None))
                .collect::<Result<Vec<_>>>()?;
            let name = format!("large-{n}:{}", set.name);
            self.w
                .run(&root.hub, &name, all.len(), &ids, &probes, modes)?;
            self.w
                .run(&root.hub, &name, all.len(), &ids, &self.off_topic, modes)?;
            root.close()?;
        }
        Ok(())
    }

    /// The mixed root of the precision figures, with spans and keywords of
    /// its own seed.
    fn mixed(&mut self, eval_dir: &Path) -> Result<()> {
        let mut corpus: Vec<CorpusLine> = Vec::new();
        for (set, scene) in [
            ("locomo-dev", "locomo-0"),
            ("madial-zh-dev", "madial-u1"),
            ("madial-en-dev", "madial-u2"),
        ] {
            let lines: Vec<CorpusLine> = read_jsonl(&eval_dir.join(set).join("corpus.jsonl"))?;
            corpus.extend(
                lines
                    .into_iter()
                    .filter(|l| l.scene.as_deref() == Some(scene)),
            );
        }
        corpus.extend(chatter(None));
        let main = Scene::parse("main")?;
        let root = self.open()?;
        let ids = load_corpus(&root.hub, "mixed", &corpus, Some(&main))?;
        let mut probes = span_probes(&corpus, &mut self.rng);
        probes.extend(keyword_probes(
            "mixed",
            &corpus,
            None,
            &Filter::all(),
            &mut self.rng,
            160,
        ));
        let size = corpus.len();
        self.w
            .run(&root.hub, "mixed", size, &ids, &probes, &ALL_MODES)?;
        self.w
            .run(&root.hub, "mixed", size, &ids, &self.off_topic, &ALL_MODES)?;
        root.close()
    }
}

/// Span probes for up to 160 memories of `corpus` (not the chatter).
fn span_probes(corpus: &[CorpusLine], rng: &mut StdRng) -> Vec<Probe> {
    let normalised: Vec<String> = corpus.iter().map(|l| normalize(&l.text)).collect();
    let mut order: Vec<usize> = (0..corpus.len()).collect();
    order.shuffle(rng);
    let mut probes = Vec::new();
    for i in order
        .into_iter()
        .filter(|&i| !corpus[i].id.starts_with("chatter-"))
        .take(160)
    {
        let others: Vec<&str> = normalised
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, t)| t.as_str())
            .collect();
        if let Some(span) = distinctive_span(&corpus[i].text, &others, rng) {
            probes.push(Probe {
                dataset: "span".into(),
                qid: format!("span-{}", corpus[i].id),
                group: format!("span-{}", corpus[i].id),
                kind: "span",
                split: "dev".into(),
                lang: if crate::analysis::tokenizer::script_milli(&span) > 500 {
                    "zh".into()
                } else {
                    "en".into()
                },
                query: span,
                filter: Filter::all(),
                relevant: vec![corpus[i].id.clone()],
            });
        }
    }
    probes
}

/// Writes the training rows (see the module docs) to `out`; returns how many.
pub fn export(
    eval_dir: &Path,
    out: &Path,
    config: &Config,
    embedder: Arc<dyn Embedder>,
    options: &TrainingOptions,
) -> Result<usize> {
    let mut config = config.clone();
    config.search.max_limit = config.search.max_limit.max(DEPTH);
    let mut ex = Exporter {
        w: Writer {
            out: std::io::BufWriter::new(std::fs::File::create(out).ctx("cannot create", out)?),
            path: out,
            rows: 0,
        },
        config,
        embedder: Arc::new(RememberedQueries {
            model: embedder,
            queries: Mutex::default(),
        }),
        options,
        off_topic: off_topic_probes(&options.off_topic),
        rng: StdRng::seed_from_u64(options.seed),
    };
    for name in SETS {
        let set = DevSet::read(eval_dir, name)?;
        ex.dev_root(eval_dir, &set)?;
        if name == "madial-zh-dev" || name == "madial-en-dev" || name == "locomo-dev" {
            ex.small_random(&set)?;
        }
        ex.small_around(&set)?;
        if name == "locomo-dev" || name == "madial-zh-dev" {
            ex.large(&set)?;
        }
    }
    ex.mixed(eval_dir)?;
    ex.w.out.flush().ctx("cannot write", out)?;
    Ok(ex.w.rows)
}
