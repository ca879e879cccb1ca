//! Offline salience on the labelled chat set
//! (`tests/fixtures/salience/chat-lines.jsonl`, 319 lines, zh and en):
//! held-out precision and keep-recall of the calibration procedure (5-fold
//! cross-validation), the shipped calibrations, and the whole path — ingest
//! as chat, `consolidate` with no model, search the long-term layer.
//!
//! Print the figures: `cargo test --test integration salience -- --nocapture`.

// The figures are the point of these tests: they are printed for the report.
#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{Duration, Utc};
use memory_hub::config::{Config, EmbedderConfig};
use memory_hub::consolidate::salience::{self, Signals};
use memory_hub::consolidate::{self, RunOptions, SleepConfig, Window};
use memory_hub::embed::onnx::OnnxEmbedder;
use memory_hub::embed::{Embedder, EmbedderSlot};
use memory_hub::hub::{Hub, IngestAction, Mode};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::Stage;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::support::{TempRoot, scene};

/// One labelled line.
#[derive(serde::Deserialize, Clone)]
pub struct Line {
    pub id: String,
    pub text: String,
    pub speaker: String,
    #[serde(default)]
    pub name: Option<String>,
    pub label: String,
    pub category: String,
}

pub fn lines() -> Vec<Line> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/salience/chat-lines.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn samples(lines: &[Line], e: Option<&dyn Embedder>) -> Vec<(Signals, bool)> {
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    salience::signals(&texts, e)
        .into_iter()
        .zip(lines)
        .map(|(s, l)| (s, l.label == "keep"))
        .collect()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn salience_meets_its_figures() {
    let lines = lines();
    assert!(lines.len() >= 300);
    let e = OnnxEmbedder::load(&EmbedderConfig::default())
        .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)");
    let with = samples(&lines, Some(&e));
    let without = samples(&lines, None);
    let cv = salience::cross_validate(&with, &salience::WEIGHTS, 5);
    let cv_rules = salience::cross_validate(&without, &[0.0], 5);
    let full = salience::calibrate(&with, &salience::WEIGHTS);
    let full_rules = salience::calibrate(&without, &[0.0]);
    let shipped = salience::measure(&with, salience::WITH_EMBEDDER);
    let shipped_rules = salience::measure(&without, salience::RULES_ONLY);
    println!("5-fold held-out, rules + embedder: {cv:?}");
    println!("5-fold held-out, rules only:       {cv_rules:?}");
    println!("tuned on all lines: {full:?} / rules only {full_rules:?}");
    println!("shipped on all lines: {shipped:?} / rules only {shipped_rules:?}");
    for (s, l) in with.iter().map(|(s, _)| s).zip(&lines) {
        let v = salience::judge(s, salience::WITH_EMBEDDER);
        if v.keep != (l.label == "keep") {
            println!(
                "  miss {} {} {:.2} {:?}: {}",
                l.id, l.category, v.score, s.margin, l.text
            );
        }
    }
    // The shipped calibrations are what the procedure picks on all lines.
    let close = |a: salience::Calibration, b: salience::Calibration| {
        (a.weight - b.weight).abs() < 1e-3 && (a.threshold - b.threshold).abs() < 1e-3
    };
    assert!(close(full, salience::WITH_EMBEDDER), "{full:?}");
    assert!(close(full_rules, salience::RULES_ONLY), "{full_rules:?}");
    // Floors a little under the figures reached (reported with the command
    // in the module docs): a change to the rules or prototypes that loses
    // them fails here.
    for (what, f) in [
        ("held-out", cv),
        ("held-out, rules only", cv_rules),
        ("shipped", shipped),
        ("shipped, rules only", shipped_rules),
    ] {
        assert!(f.recall >= 0.95 && f.precision >= 0.88, "{what}: {f:?}");
    }
}

fn real_hub(root: &TempRoot) -> Hub {
    let e = OnnxEmbedder::load(&EmbedderConfig::default())
        .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)");
    Hub::open_with(
        root.layout(),
        Config::default(),
        Mode::Write,
        EmbedderSlot::ready(Arc::new(e)),
        &mut |_| {},
    )
    .unwrap()
    .0
}

/// Ingests every labelled line as chat (the owner's in `qq:owner`, the
/// others' in a group under their names), consolidates with no model, and
/// measures which lines became long-term memories found by searching their
/// own words. Returns (precision, recall).
fn chat_to_memory(hub: &Hub) -> (f64, f64) {
    let lines = lines();
    let mut chat_ids: HashMap<String, &Line> = HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        let owner = l.speaker == "owner";
        let out = hub
            .ingest(
                &hub.operator(),
                memory_hub::api::IngestBody {
                    scene: Some(if owner { "qq:owner" } else { "qq:group:42" }.into()),
                    message_id: format!("m{i}"),
                    text: l.text.clone(),
                    sender: (!owner).then(|| format!("u{}", i % 6)).map(|id| {
                        memory_hub::api::Sender {
                            id,
                            name: l.name.clone(),
                        }
                    }),
                    from_owner: owner,
                    from_self: false,
                    sent_at: None,
                    ttl_hours: Some(24),
                    session: None,
                },
            )
            .unwrap();
        if out.action == IngestAction::Add {
            chat_ids.insert(out.id.unwrap(), l);
        } else {
            assert_eq!(l.label, "drop", "ingest skipped a keep-line: {}", l.text);
        }
    }
    let now = Utc::now();
    let report = consolidate::run(
        hub,
        &SleepConfig::default(),
        &RunOptions {
            window: Window {
                from: now - Duration::hours(1),
                to: now + Duration::minutes(1),
            },
            dry_run: false,
            now,
        },
    )
    .unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    let promoted: HashMap<&str, &str> = report
        .promoted
        .iter()
        .map(|p| (p.from.as_str(), p.id.as_deref().unwrap()))
        .collect();
    let long_only = Filter::scope(Scope {
        stages: vec![Stage::Long],
        ..Scope::default()
    });
    let (mut tp, mut fp, mut want) = (0, 0, 0);
    for (chat, l) in &chat_ids {
        let keep = l.label == "keep";
        want += usize::from(keep);
        let Some(id) = promoted.get(chat.as_str()) else {
            continue;
        };
        if !keep {
            fp += 1;
            continue;
        }
        let hits = hub
            .search_filtered(&SearchRequest {
                query: l.text.clone(),
                filter: long_only.clone(),
                limit: Some(5),
                mode: Some(SearchMode::Fulltext),
                min_score: None,
            })
            .unwrap();
        if hits.hits.iter().any(|h| h.memory.id == *id) {
            tp += 1;
        } else {
            println!("  not found by its words: {}", l.text);
        }
    }
    let precision = tp as f64 / (tp + fp).max(1) as f64;
    let recall = tp as f64 / want.max(1) as f64;
    (precision, recall)
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn chat_becomes_long_term_memory_without_a_model() {
    let root = TempRoot::new();
    let (p, r) = chat_to_memory(&real_hub(&root));
    println!("chat -> long-term, rules + embedder: precision {p:.3}, recall {r:.3}");
    assert!(r >= 0.95 && p >= 0.88, "precision {p}, recall {r}");
}

#[test]
fn chat_becomes_long_term_memory_without_an_embedder() {
    // The hash embedder is not the calibrated model: the rules decide alone.
    let root = TempRoot::new();
    let (p, r) = chat_to_memory(&root.hub());
    println!("chat -> long-term, rules only: precision {p:.3}, recall {r:.3}");
    assert!(r >= 0.95 && p >= 0.88, "precision {p}, recall {r}");
}

fn ingest(hub: &Hub, id: &str, text: &str) -> memory_hub::hub::IngestOutcome {
    hub.ingest(
        &hub.operator(),
        memory_hub::api::IngestBody {
            scene: Some("qq:owner".into()),
            message_id: id.into(),
            text: text.into(),
            sender: Some(memory_hub::api::Sender {
                id: "10001".into(),
                name: None,
            }),
            from_owner: true,
            from_self: false,
            sent_at: None,
            ttl_hours: Some(24),
            session: None,
        },
    )
    .unwrap()
}

/// The reproduction: with no model configured, `memd consolidate`
/// keeps the allergy as a standalone long-term statement linked to its chat
/// line, the reported fold is written (and rolled back), and noise never
/// reaches the journal.
#[test]
fn the_allergy_survives_consolidation_without_a_model() {
    let root = TempRoot::new();
    let (allergy, again) = {
        let hub = root.hub();
        let a = ingest(&hub, "1", "我对花生过敏，千万记住");
        assert_eq!(a.action, IngestAction::Add);
        let lines = root.journal_lines().len();
        for (i, noise) in [
            "好",
            "哈哈哈",
            "[图片]",
            "[CQ:face,id=178]",
            "+1",
            "https://example.com/x",
        ]
        .iter()
        .enumerate()
        {
            let out = ingest(&hub, &format!("n{i}"), noise);
            assert_eq!(out.action, IngestAction::Skip, "{noise}");
            assert!(out.reason.is_some() && out.id.is_none());
        }
        assert_eq!(root.journal_lines().len(), lines, "noise wrote no line");
        let b = ingest(&hub, "2", "我对花生过敏，千万记住！");
        ingest(&hub, "3", "今天地铁好挤");
        let line: serde_json::Value =
            serde_json::from_str(root.journal_lines().last().unwrap()).unwrap();
        assert_eq!(line["subject"], "owner");
        (a.id.unwrap(), b.id.unwrap())
    };
    let report = root.memd_json(&["consolidate"]);
    let promoted = report["promoted"].as_array().unwrap();
    assert_eq!(promoted.len(), 1, "{report:#}");
    assert_eq!(promoted[0]["text"], "主人对花生过敏");
    assert!(promoted[0]["reason"].as_str().unwrap().contains("salient"));
    let new_id = promoted[0]["id"].as_str().unwrap().to_string();
    let run = report["run"].as_str().unwrap().to_string();
    // The fold it reports is in the journal: one survivor, the other forgotten.
    let folded = &report["folded"][0];
    let gone = folded["ids"][0].as_str().unwrap().to_string();
    let kept = folded["into"].as_str().unwrap().to_string();
    assert!([&allergy, &again].contains(&&gone) && [&allergy, &again].contains(&&kept));
    assert_eq!(report["forgotten"][0]["id"], gone.as_str());
    let lines: Vec<serde_json::Value> = root
        .journal_lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let put = lines.iter().rfind(|v| v["id"] == new_id.as_str()).unwrap();
    assert_eq!(put["stage"], "long");
    assert_eq!(put["run"], run.as_str());
    assert_eq!(put["supersedes"], kept.as_str());
    assert!(
        lines
            .iter()
            .any(|v| v["id"] == gone.as_str() && v["op"] == "forget"),
        "the folded line has a tombstone"
    );
    {
        let hub = root.hub();
        let long = hub
            .search_filtered(&SearchRequest {
                query: "花生过敏".into(),
                filter: Filter::scope(Scope {
                    stages: vec![Stage::Long],
                    ..Scope::default()
                }),
                limit: Some(5),
                mode: Some(SearchMode::Fulltext),
                min_score: None,
            })
            .unwrap();
        assert_eq!(long.hits[0].memory.id, new_id);
    }
    let undone = root.memd_json(&["rollback", "--run", &run]);
    assert_eq!(undone["forgotten"][0], new_id.as_str());
    assert_eq!(undone["restored"][0], gone.as_str());
}

/// Short-term chat found by a recall query is shown as recent chat, never
/// under the long-term heading.
#[test]
fn recall_block_labels_short_term_chat_as_recent_chat() {
    let root = TempRoot::new();
    let hub = root.hub();
    ingest(&hub, "1", "周末想去西湖划船");
    hub.append(memory_hub::hub::WriteRequest::new(
        scene("qq:owner"),
        "主人喜欢西湖边的茶馆",
        "main",
    ))
    .unwrap();
    let out = hub
        .recall(
            &hub.operator(),
            memory_hub::api::RecallBody {
                query: Some("西湖".into()),
                limit: Some(5),
                format: Some(memory_hub::api::Format::Block),
                ..Default::default()
            },
        )
        .unwrap()
        .body;
    let block = out.block.unwrap();
    let (recent, long) = block
        .split_once("【长期记忆】")
        .expect("a long-term section");
    assert!(
        recent.contains("【近期聊天】") && recent.contains("西湖划船"),
        "{block}"
    );
    assert!(long.contains("茶馆") && !long.contains("划船"), "{block}");
}

/// A client written for the Node memory-hub asks for more than the maximum
/// (there: default 5, at most 10): the limit is lowered, with a header
/// saying so, instead of refused.
#[tokio::test]
async fn a_limit_above_the_maximum_is_clamped_with_a_header() {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    let api = crate::http_support::Api::new();
    let token = api.token("desk", "dsh-desktop");
    for i in 0..15 {
        api.hub
            .append(memory_hub::hub::WriteRequest::new(
                scene("main"),
                format!("第{i}次去西湖划船"),
                "main",
            ))
            .unwrap();
    }
    for (path, body) in [
        (
            "/v1/search",
            serde_json::json!({"query": "西湖划船", "limit": 50}),
        ),
        (
            "/v1/recall",
            serde_json::json!({"query": "西湖划船", "limit": 50}),
        ),
    ] {
        let req = Request::builder()
            .method("POST")
            .uri(path)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let res = api.router.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert_eq!(
            res.headers()["x-memd-limit-clamped"].to_str().unwrap(),
            "50; max=10",
            "{path}"
        );
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["hits"].as_array().unwrap().len(), 10, "{path}: {v}");
    }
    let (status, _) = api
        .post(
            "/v1/search",
            &token,
            serde_json::json!({"query": "西湖", "limit": 0}),
        )
        .await;
    assert_eq!(status, 400, "zero is still an error");
}
