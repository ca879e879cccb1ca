//! Never lose a memory: random operation sequences against the real hub
//! (journal, SQLite, tantivy, hash embedder), checked against a small model.
//!
//! The model is the write rules written down as plainly as possible:
//!
//! - A long-term write is a `NOOP` with the existing id when a *searchable*
//!   fact (not forgotten, not superseded) has the same scene, kind,
//!   normalised text, privacy and subject; otherwise it is added. Dedup is
//!   exact only: the generated texts are made of words used nowhere else, so
//!   no semantic near-duplicate check may merge two of them.
//! - A write with an idempotency key answers the id of the non-forgotten
//!   fact written with that key, if there is one.
//! - A write with `supersedes` needs a non-forgotten fact to replace
//!   (`NOT_FOUND` otherwise) that no other fact replaced yet, forgotten or
//!   not (`CONFLICT` otherwise: versions form a line); the replaced fact
//!   stays readable by `get` but leaves search for good, even when the fact
//!   that replaced it is forgotten (only an explicit restore, which this
//!   model never does, brings it back).
//! - `forget` of a non-forgotten fact appends a tombstone; of anything else it
//!   is `NOT_FOUND`.
//! - An imported `put` is appended unless its id is known; an imported
//!   `forget` only when its id is live.
//! - Reopening, rebuilding the index and a crash (the process aborts right
//!   after its writes were acknowledged: no flush, no destructor) change
//!   nothing that was acknowledged.
//!
//! After every operation its own answer and the memories it touched are
//! checked; after reopen, reindex, crash and at the end everything is: `get`
//! of every id, a full-text search for each memory's unique word, and the
//! stats counts. Journal file paths are never looked at.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::error::Error;
use memory_hub::hub::{Hub, Mode, WriteAction, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::model::{Fact, JOURNAL_VERSION, Record};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use crate::support::{TempRoot, scene, search_ids};

/// Scenes and kinds the generator varies; together with the text they make
/// the dedup key (privacy and subject stay the defaults).
const SCENES: [&str; 2] = ["main", "pet"];
const KINDS: [&str; 2] = ["note", "event"];
/// Idempotency keys are drawn from a small pool so that they repeat.
const KEYS: [&str; 3] = ["key-a", "key-b", "key-c"];
/// Facts sharing one text, at most.
const MAX_COPIES: usize = 5;

/// One operation, with indices that pick among the memories made so far.
#[derive(Debug, Clone)]
enum Op {
    /// A fresh text.
    Write { scene: usize, kind: usize },
    /// The exact text of an earlier memory, with its scene and kind or in the other scene.
    Repeat { pick: usize, other_scene: bool },
    /// A fresh text with an idempotency key.
    WriteKeyed { key: usize },
    /// Forget an earlier memory (perhaps already forgotten).
    Forget { pick: usize },
    /// Forget an id that never existed.
    ForgetUnknown,
    /// A fresh text that supersedes an earlier memory (perhaps forgotten).
    Supersede { pick: usize },
    /// Import fresh facts, perhaps one repeating an earlier text, one reusing
    /// a known id, and a tombstone for an earlier memory.
    Import {
        fresh: usize,
        repeat: Option<usize>,
        known: Option<usize>,
        forget: Option<usize>,
    },
    /// Drop the hub and open it again.
    Reopen,
    /// Rebuild the index from the journal.
    Reindex,
    /// Another process writes fresh texts (and perhaps forgets one memory),
    /// then dies without flushing anything.
    Crash {
        writes: usize,
        forget: Option<usize>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let pick = any::<usize>();
    prop_oneof![
        6 => (0..SCENES.len(), 0..KINDS.len()).prop_map(|(scene, kind)| Op::Write { scene, kind }),
        3 => (pick, any::<bool>()).prop_map(|(pick, other_scene)| Op::Repeat { pick, other_scene }),
        2 => (0..KEYS.len()).prop_map(|key| Op::WriteKeyed { key }),
        3 => pick.prop_map(|pick| Op::Forget { pick }),
        1 => Just(Op::ForgetUnknown),
        3 => pick.prop_map(|pick| Op::Supersede { pick }),
        2 => (0..3usize, proptest::option::of(pick), proptest::option::of(pick), proptest::option::of(pick))
            .prop_map(|(fresh, repeat, known, forget)| Op::Import { fresh, repeat, known, forget }),
        1 => Just(Op::Reopen),
        1 => Just(Op::Reindex),
        1 => (1..3usize, proptest::option::of(pick)).prop_map(|(writes, forget)| Op::Crash { writes, forget }),
    ]
}

/// What the model knows of one fact.
#[derive(Debug, Clone)]
struct ModelFact {
    text: String,
    /// The one word of `text` that no other text shares (repeats aside).
    word: String,
    scene: usize,
    kind: usize,
    idempotency_key: Option<String>,
    supersedes: Option<String>,
    forgotten: bool,
}

impl ModelFact {
    /// A live fact of scene `scene` and kind `kind`, without a key, that
    /// replaces nothing.
    fn new(text: String, word: String, scene: usize, kind: usize) -> Self {
        ModelFact {
            text,
            word,
            scene,
            kind,
            idempotency_key: None,
            supersedes: None,
            forgotten: false,
        }
    }
}

#[derive(Debug, Default)]
struct Model {
    facts: BTreeMap<String, ModelFact>,
    /// Ids in the order they were made, for picking.
    order: Vec<String>,
    next_word: u32,
}

impl Model {
    /// A fresh text: three words used nowhere else; the first is its search word.
    fn fresh_text(&mut self) -> (String, String) {
        let words: Vec<String> = (0..3).map(|_| self.word()).collect();
        (words.join(" "), words[0].clone())
    }

    /// Eight letters from an alphabet without vowels or the letters light
    /// stemming strips (s, d, g), so no two words share a stem.
    fn word(&mut self) -> String {
        const LETTERS: &[u8] = b"bcfhjkmnpqrtvwxz";
        let mut n = self.next_word;
        self.next_word += 1;
        (0..8)
            .map(|_| {
                let c = LETTERS[(n % 16) as usize] as char;
                n /= 16;
                c
            })
            .collect()
    }

    fn pick(&self, i: usize) -> Option<String> {
        (!self.order.is_empty()).then(|| self.order[i % self.order.len()].clone())
    }

    /// A memory whose text may be repeated: at most [`MAX_COPIES`] facts
    /// share a text, so a search for its word (10 hits at most) sees them all.
    fn pick_to_repeat(&self, i: usize) -> Option<String> {
        self.pick(i).filter(|id| {
            let text = &self.facts[id].text;
            self.facts.values().filter(|f| &f.text == text).count() < MAX_COPIES
        })
    }

    fn add(&mut self, id: &str, fact: ModelFact) {
        assert!(
            self.facts.insert(id.to_string(), fact).is_none(),
            "{id} was handed out twice"
        );
        self.order.push(id.to_string());
    }

    fn superseded(&self, id: &str) -> bool {
        self.facts
            .values()
            .any(|f| f.supersedes.as_deref() == Some(id))
    }

    fn searchable(&self, id: &str) -> bool {
        !self.facts[id].forgotten && !self.superseded(id)
    }

    fn live(&self, id: &str) -> bool {
        self.facts.get(id).is_some_and(|f| !f.forgotten)
    }

    /// Searchable facts an exact repeat of `text` in `scene`/`kind` answers NOOP with.
    fn duplicates(&self, text: &str, scene: usize, kind: usize) -> Vec<String> {
        self.facts
            .iter()
            .filter(|(id, f)| {
                f.text == text && f.scene == scene && f.kind == kind && self.searchable(id)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn keyed(&self, key: &str) -> Option<String> {
        self.facts
            .iter()
            .find(|(_, f)| !f.forgotten && f.idempotency_key.as_deref() == Some(key))
            .map(|(id, _)| id.clone())
    }
}

/// The system under test: a root and, between reopenings, its hub.
struct Real {
    root: TempRoot,
    hub: Option<Hub>,
}

fn embedder() -> EmbedderSlot {
    EmbedderSlot::ready(Arc::new(HashEmbedder::new(64)))
}

fn open(layout: Layout) -> Hub {
    Hub::open_with(
        layout,
        Config::default(),
        Mode::Write,
        embedder(),
        &mut |_| {},
    )
    .expect("open hub")
    .0
}

impl Real {
    fn hub(&self) -> &Hub {
        self.hub.as_ref().expect("hub is open")
    }
}

fn request(model_scene: usize, kind: usize, text: &str) -> WriteRequest {
    let mut req = WriteRequest::new(scene(SCENES[model_scene]), text, "prop");
    req.kind = KINDS[kind].to_string();
    req
}

fn code(e: &Error) -> &'static str {
    e.code().as_str()
}

/// A fact as another root would have written it.
fn imported_fact(id: &str, scene_idx: usize, kind: usize, text: &str) -> Fact {
    serde_json::from_value(serde_json::json!({
        "id": id,
        "ts": "2025-01-02T03:04:05Z",
        "scene": SCENES[scene_idx],
        "kind": KINDS[kind],
        "stage": "long",
        "text": text,
        "privacy": "normal",
        "subject": "owner",
        "source": "import",
    }))
    .expect("a valid fact")
}

/// The memory `id` reads back exactly as the model says, and its word finds
/// it in search exactly when the model says it is searchable.
fn check_one(real: &Real, model: &Model, id: &str) {
    let hub = real.hub();
    let fact = &model.facts[id];
    match hub.fetch(id, &Filter::all()) {
        Ok(m) => {
            assert!(!fact.forgotten, "{id} was forgotten but get returned it");
            assert_eq!(m.text, fact.text, "{id} reads back its text");
        }
        Err(e) => {
            assert!(fact.forgotten, "{id} is live but get failed: {e}");
            assert_eq!(code(&e), "NOT_FOUND", "{id}: {e}");
        }
    }
    let found = search_ids(hub, &fact.word, 10).contains(&id.to_string());
    assert_eq!(
        found,
        model.searchable(id),
        "search for {:?} and {id} (forgotten {}, superseded {})",
        fact.word,
        fact.forgotten,
        model.superseded(id)
    );
}

fn check_all(real: &Real, model: &Model) {
    for id in model.facts.keys() {
        check_one(real, model, id);
    }
    let stats = real.hub().stats().expect("stats");
    let forgotten = model.facts.values().filter(|f| f.forgotten).count() as u64;
    assert_eq!(
        stats.counts.facts,
        model.facts.len() as u64 - forgotten,
        "live facts"
    );
    assert_eq!(stats.counts.forgotten, forgotten, "forgotten facts");
    let err = real
        .hub()
        .fetch("fact-main-zzzzzzzz-0000", &Filter::all())
        .expect_err("an id never handed out");
    assert_eq!(code(&err), "NOT_FOUND");
}

/// Applies `op` to both sides and checks the answer; returns the ids to check.
fn step(real: &mut Real, model: &mut Model, op: &Op) -> Vec<String> {
    match *op {
        Op::Write { scene, kind } => {
            let (text, word) = model.fresh_text();
            let out = real.hub().append(request(scene, kind, &text)).unwrap();
            assert_eq!(out.action, WriteAction::Add, "a fresh text is added");
            model.add(&out.id, ModelFact::new(text, word, scene, kind));
            vec![out.id]
        }
        Op::Repeat { pick, other_scene } => {
            let Some(old) = model.pick_to_repeat(pick) else {
                return Vec::new();
            };
            let f = model.facts[&old].clone();
            let scene = if other_scene { 1 - f.scene } else { f.scene };
            let out = real.hub().append(request(scene, f.kind, &f.text)).unwrap();
            let dups = model.duplicates(&f.text, scene, f.kind);
            if dups.is_empty() {
                assert_eq!(
                    out.action,
                    WriteAction::Add,
                    "no searchable fact has this text, scene and kind (repeat of {old})"
                );
                model.add(
                    &out.id,
                    ModelFact {
                        scene,
                        idempotency_key: None,
                        supersedes: None,
                        forgotten: false,
                        ..f
                    },
                );
            } else {
                assert_eq!(out.action, WriteAction::Noop, "exact repeat of {dups:?}");
                assert!(dups.contains(&out.id), "{} is not one of {dups:?}", out.id);
            }
            vec![out.id]
        }
        Op::WriteKeyed { key } => {
            let (text, word) = model.fresh_text();
            let mut req = request(0, 0, &text);
            req.idempotency_key = Some(KEYS[key].to_string());
            let out = real.hub().append(req).unwrap();
            match model.keyed(KEYS[key]) {
                Some(id) => {
                    assert_eq!(
                        (out.action, &out.id),
                        (WriteAction::Noop, &id),
                        "key {}",
                        KEYS[key]
                    );
                }
                None => {
                    assert_eq!(out.action, WriteAction::Add);
                    model.add(
                        &out.id,
                        ModelFact {
                            idempotency_key: Some(KEYS[key].to_string()),
                            ..ModelFact::new(text, word, 0, 0)
                        },
                    );
                }
            }
            vec![out.id]
        }
        Op::Forget { pick } => {
            let Some(id) = model.pick(pick) else {
                return Vec::new();
            };
            let got = real.hub().tombstone(&id, None, "prop", &Filter::all());
            if model.live(&id) {
                got.unwrap_or_else(|e| panic!("forget {id}: {e}"));
                model.facts.get_mut(&id).unwrap().forgotten = true;
            } else {
                let e = got.expect_err("a forgotten fact cannot be forgotten again");
                assert_eq!(code(&e), "NOT_FOUND", "{e}");
            }
            touched_by(model, &id)
        }
        Op::ForgetUnknown => {
            let e = real
                .hub()
                .tombstone("fact-main-zzzzzzzz-0001", None, "prop", &Filter::all())
                .expect_err("unknown id");
            assert_eq!(code(&e), "NOT_FOUND", "{e}");
            Vec::new()
        }
        Op::Supersede { pick } => {
            let Some(old) = model.pick(pick) else {
                return Vec::new();
            };
            let (text, word) = model.fresh_text();
            let mut req = request(0, 0, &text);
            req.supersedes = Some(old.clone());
            let got = real.hub().append(req);
            if !model.live(&old) {
                let e = got.expect_err("superseding a forgotten fact");
                assert_eq!(code(&e), "NOT_FOUND", "{e}");
                return Vec::new();
            }
            if model.superseded(&old) {
                let e = got.expect_err("superseding an older version");
                assert_eq!(code(&e), "CONFLICT", "{e}");
                return Vec::new();
            }
            let out = got.unwrap_or_else(|e| panic!("supersede {old}: {e}"));
            assert_eq!(out.action, WriteAction::Add);
            model.add(
                &out.id,
                ModelFact {
                    supersedes: Some(old.clone()),
                    ..ModelFact::new(text, word, 0, 0)
                },
            );
            vec![out.id, old]
        }
        Op::Import {
            fresh,
            repeat,
            known,
            forget,
        } => import(real, model, fresh, repeat, known, forget),
        Op::Reopen => {
            drop(real.hub.take());
            real.hub = Some(open(real.root.layout()));
            check_all(real, model);
            Vec::new()
        }
        Op::Reindex => {
            drop(real.hub.take());
            real.hub = Some(
                Hub::reindex_with(
                    real.root.layout(),
                    Config::default(),
                    embedder(),
                    &mut |_| {},
                )
                .expect("reindex")
                .0,
            );
            check_all(real, model);
            Vec::new()
        }
        Op::Crash { writes, forget } => {
            crash(real, model, writes, forget);
            check_all(real, model);
            Vec::new()
        }
    }
}

/// `id` and the facts whose searchability its state decides.
fn touched_by(model: &Model, id: &str) -> Vec<String> {
    let mut ids = vec![id.to_string()];
    ids.extend(model.facts[id].supersedes.clone());
    ids
}

fn import(
    real: &mut Real,
    model: &mut Model,
    fresh: usize,
    repeat: Option<usize>,
    known: Option<usize>,
    forget: Option<usize>,
) -> Vec<String> {
    let mut records = Vec::new();
    // Per record: its id, the fact if it is a new put, whether it should be appended.
    let mut expect: Vec<(String, Option<ModelFact>, bool)> = Vec::new();
    for i in 0..fresh {
        let (text, word) = model.fresh_text();
        let id = format!("fact-{}-imp{}-{i}", SCENES[i % 2], model.next_word);
        records.push(Record::Put {
            v: JOURNAL_VERSION,
            at: None,
            fact: imported_fact(&id, i % 2, 1, &text),
        });
        let f = ModelFact::new(text, word, i % 2, 1);
        expect.push((id, Some(f), true));
    }
    if let Some(old) = repeat.and_then(|p| model.pick_to_repeat(p)) {
        // Imports are not deduplicated: the same text arrives under a new id.
        let f = model.facts[&old].clone();
        let id = format!("fact-main-rep{}-0", model.next_word);
        model.next_word += 1;
        records.push(Record::Put {
            v: JOURNAL_VERSION,
            at: None,
            fact: imported_fact(&id, f.scene, f.kind, &f.text),
        });
        let f = ModelFact {
            idempotency_key: None,
            supersedes: None,
            forgotten: false,
            ..f
        };
        expect.push((id, Some(f), true));
    }
    if let Some(id) = known.and_then(|p| model.pick(p)) {
        // A known id is never overwritten by an import, forgotten or not.
        records.push(Record::Put {
            v: JOURNAL_VERSION,
            at: None,
            fact: imported_fact(&id, 0, 0, "an imported rewrite that must not land"),
        });
        expect.push((id, None, false));
    }
    if let Some(id) = forget.and_then(|p| model.pick(p)) {
        records.push(Record::Forget {
            v: JOURNAL_VERSION,
            id: id.clone(),
            ts: chrono::Utc::now(),
            reason: None,
            source: "import".into(),
        });
        let live = model.live(&id);
        expect.push((id, None, live));
    }
    let got = real.hub().import_records(records).expect("import");
    assert_eq!(got.len(), expect.len());
    let mut touched = Vec::new();
    for (r, (id, fact, appended)) in got.into_iter().zip(expect) {
        let r = r.unwrap_or_else(|e| panic!("import of {id}: {e}"));
        assert_eq!(r, appended, "import of {id} appended");
        match fact {
            Some(f) => model.add(&id, f),
            None if appended => model.facts.get_mut(&id).unwrap().forgotten = true,
            None => {}
        }
        touched.extend(touched_by(model, &id));
    }
    touched
}

/// Runs `crash_child` on the root: it writes `writes` fresh texts and maybe
/// forgets one memory, prints what it did once acknowledged, and aborts.
fn crash(real: &mut Real, model: &mut Model, writes: usize, forget: Option<usize>) {
    drop(real.hub.take());
    let texts: Vec<(String, String)> = (0..writes).map(|_| model.fresh_text()).collect();
    let forget = forget.and_then(|p| model.pick(p));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "prop::crash_child",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("MEMD_PROP_CHILD", real.root.path())
    .env(
        "MEMD_PROP_TEXTS",
        texts
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(id) = &forget {
        cmd.env("MEMD_PROP_FORGET", id);
    }
    let out = cmd.output().expect("run the crash child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "the child aborts: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout
        .lines()
        // The harness may print the test's name on the same line first.
        .filter_map(|l| l.split_once("acked ").map(|(_, rest)| rest))
        .collect();
    assert_eq!(
        lines.len(),
        writes + usize::from(forget.is_some()),
        "every operation was acknowledged before the abort: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ((text, word), id) in texts.into_iter().zip(&lines) {
        model.add(id, ModelFact::new(text, word, 0, 0));
    }
    if let Some(id) = forget {
        let answer = lines[writes];
        if model.live(&id) {
            assert_eq!(answer, "forgot", "forget {id} in the child");
            model.facts.get_mut(&id).unwrap().forgotten = true;
        } else {
            assert_eq!(answer, "NOT_FOUND", "forget {id} in the child");
        }
    }
    real.hub = Some(open(real.root.layout()));
}

/// Only does something when started by [`crash`]: writes, forgets, prints
/// each acknowledgement and aborts without running any destructor.
#[test]
fn crash_child() {
    let Ok(root) = std::env::var("MEMD_PROP_CHILD") else {
        return;
    };
    let hub = open(Layout::new(root));
    let mut out = std::io::stdout().lock();
    let texts = std::env::var("MEMD_PROP_TEXTS").unwrap_or_default();
    for text in texts.lines() {
        let w = hub.append(request(0, 0, text)).unwrap();
        assert_eq!(w.action, WriteAction::Add);
        writeln!(out, "acked {}", w.id).unwrap();
        out.flush().unwrap();
    }
    if let Ok(id) = std::env::var("MEMD_PROP_FORGET") {
        let answer = match hub.tombstone(&id, None, "prop", &Filter::all()) {
            Ok(()) => "forgot",
            Err(e) => code(&e),
        };
        writeln!(out, "acked {answer}").unwrap();
        out.flush().unwrap();
    }
    // No flush of the index, no release of the lock: the kernel does that.
    std::process::abort();
}

fn run(ops: &[Op]) {
    let root = TempRoot::new();
    let hub = open(root.layout());
    let mut real = Real {
        root,
        hub: Some(hub),
    };
    let mut model = Model::default();
    for op in ops {
        for id in step(&mut real, &mut model, op) {
            check_one(&real, &model, &id);
        }
    }
    check_all(&real, &model);
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES=500 for a deeper run by hand.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(16),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/integration/prop.proptest-regressions"
        )))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_acknowledged_memory_is_lost(ops in proptest::collection::vec(op(), 1..40)) {
        run(&ops);
    }
}

/// Found by `no_acknowledged_memory_is_lost`: A superseded by B, B forgotten
/// (A stays an older version), A superseded again (a conflict), then the
/// index rebuilt.
#[test]
fn a_second_supersede_after_a_forgotten_one_survives_reindex() {
    run(&[
        Op::Write { scene: 0, kind: 0 },
        Op::Supersede { pick: 0 },
        Op::Forget { pick: 1 },
        Op::Supersede { pick: 0 },
        Op::Reopen,
        Op::Reindex,
    ]);
}

/// Found by `no_acknowledged_memory_is_lost`: B supersedes A; another process
/// forgets B and dies before its text index is committed. The replayed
/// tombstone must leave A exactly as hidden in tantivy as in SQLite.
#[test]
fn a_tombstone_replayed_after_a_crash_keeps_the_superseded_fact_hidden() {
    run(&[
        Op::Write { scene: 0, kind: 0 },
        Op::Write { scene: 0, kind: 0 },
        Op::Write { scene: 0, kind: 0 },
        Op::Write { scene: 0, kind: 0 },
        Op::Supersede {
            pick: 353103122395267164,
        },
        Op::Supersede {
            pick: 12575916148172302157,
        },
        Op::Crash {
            writes: 1,
            forget: Some(8443842052661888621),
        },
    ]);
}
