//! Nightly consolidation (issue #7): the deterministic pass, the model pass
//! against a fake OpenAI-compatible server on loopback, rollback, dry runs,
//! the scheduler job and the API.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Local, TimeZone, Utc};
use memory_hub::consolidate::rollback::{Target, rollback};
use memory_hub::consolidate::{self, ModelKind, RunOptions, SleepConfig, Window, report};
use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::model::{Privacy, Stage};
use memory_hub::scheduler::{self, sleep_job};
use serde_json::json;

use crate::http_support::Api;
use crate::support::{TempRoot, scene, search_ids};

/// Writes a short-term chat line the way ingest does.
fn chat(hub: &Hub, scene_name: &str, text: &str, importance: f32) -> String {
    let mut req = WriteRequest::new(scene(scene_name), text, "qq");
    req.origin = "chat".into();
    req.kind = "chat".into();
    req.stage = Stage::Short;
    req.importance = importance;
    req.expires_at = Some(Utc::now() + Duration::hours(24));
    hub.append(req).unwrap().id
}

fn long(hub: &Hub, scene_name: &str, text: &str) -> String {
    hub.append(WriteRequest::new(scene(scene_name), text, "main"))
        .unwrap()
        .id
}

fn options(dry_run: bool) -> RunOptions {
    let now = Utc::now();
    RunOptions {
        window: Window {
            from: now - Duration::hours(1),
            to: now + Duration::minutes(1),
        },
        dry_run,
        now,
    }
}

fn fact_line(root: &TempRoot, id: &str) -> serde_json::Value {
    root.journal_lines()
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|v| v["id"] == id && v["op"] == "put")
        .unwrap_or_else(|| panic!("no put line for {id}"))
}

#[test]
fn deterministic_pass_folds_promotes_and_rolls_back() {
    let root = TempRoot::new();
    let hub = root.hub();
    let recalled = chat(
        &hub,
        "qq:owner",
        "我下周三要去北京出差，记得提醒我带充电器",
        0.5,
    );
    let near_dup = chat(
        &hub,
        "qq:owner",
        "我下周三要去北京出差，记得提醒我带充电器！",
        0.5,
    );
    let important = chat(
        &hub,
        "qq:owner",
        "I prefer window seats on long flights",
        0.9,
    );
    let noise = chat(&hub, "qq:owner", "哈哈哈好的", 0.3);
    let elsewhere = chat(&hub, "qq:group:7", "今天群里在聊火锅", 0.3);
    // A recall pushes the expiry out: the journal gets a later put line.
    assert_eq!(
        hub.extend_short_ttl(
            std::slice::from_ref(&recalled),
            Duration::hours(72),
            Utc::now()
        )
        .unwrap(),
        1
    );
    let before = search_ids(&hub, "北京出差", 10);

    let cfg = SleepConfig::default();
    let r = consolidate::run(&hub, &cfg, &options(false)).unwrap();
    let from: Vec<&str> = r.promoted.iter().map(|p| p.from.as_str()).collect();
    assert_eq!(from.len(), 2, "{r:#?}");
    assert!(from.contains(&important.as_str()));
    // The cluster's representative is the longer line; its near-duplicate folds into it.
    assert!(from.contains(&near_dup.as_str()) || from.contains(&recalled.as_str()));
    assert!(
        r.folded.iter().any(|f| f.ids.len() == 1
            && [recalled.as_str(), near_dup.as_str()].contains(&f.into.as_str()))
    );
    assert_eq!(
        r.expiring, 2,
        "noise and the group chat expire: {noise} {elsewhere}"
    );
    assert_eq!(r.written.len(), 2);
    for id in &r.written {
        let line = fact_line(&root, id);
        assert_eq!(line["source"], "sleep");
        assert_eq!(line["stage"], "long");
        assert_eq!(line["run"], r.run.as_str());
        assert!(id.starts_with("sleep-qq-owner-"), "{id}");
        assert!(line["supersedes"].is_string());
    }
    assert!(
        root.path()
            .join(format!("data/consolidation/{}.json", r.run))
            .exists()
    );
    // A second run over the same chat promotes nothing new.
    let again = consolidate::run(&hub, &cfg, &options(false)).unwrap();
    assert!(again.written.is_empty(), "{again:#?}");

    let start = r.started - Duration::seconds(1);
    let undone = rollback(&hub, &Target::Run(r.run.clone()), false).unwrap();
    assert_eq!(undone.forgotten.len(), 2);
    // The same memories come back. (Their order may differ: tantivy's BM25
    // statistics count the promoted facts' deleted documents until segments
    // merge, and these two chats score within a hair of each other.)
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(
        sorted(search_ids(&hub, "北京出差", 10)),
        sorted(before.clone())
    );
    let saved = report::load(&root.layout(), &r.run).unwrap();
    assert!(saved.rolled_back.is_some());
    // Rolling back twice finds nothing left to undo.
    let twice = rollback(&hub, &Target::Run(r.run.clone()), false).unwrap();
    assert!(twice.forgotten.is_empty() && twice.restored.is_empty());
    // Once rolled back, the chat can be promoted again; rolling back by
    // source and time undoes every run since.
    let third = consolidate::run(&hub, &cfg, &options(false)).unwrap();
    assert_eq!(third.written.len(), 2);
    let by_source = Target::SourceSince {
        source: "sleep".into(),
        since: start,
    };
    let lines = root.journal_lines().len();
    let preview = rollback(&hub, &by_source, true).unwrap();
    assert_eq!(preview.forgotten.len(), 2);
    assert_eq!(
        root.journal_lines().len(),
        lines,
        "a dry run appends nothing"
    );
    drop(hub);
    let out = root.memd(&[
        "rollback",
        "--source",
        "sleep",
        "--since",
        &start.to_rfc3339(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "北京出差", 10), before);
}

#[test]
fn stale_long_term_memories_are_reported_only() {
    let root = TempRoot::new();
    let hub = root.hub();
    let mut req = WriteRequest::new(scene("main"), "an old unimportant note", "main");
    req.importance = 0.2;
    req.ts = Some(Utc::now() - Duration::days(200));
    let old = hub.append(req).unwrap().id;
    let fresh = long(&hub, "main", "a fresh note");
    let lines = root.journal_lines().len();
    let r = consolidate::run(&hub, &SleepConfig::default(), &options(false)).unwrap();
    let stale: Vec<&str> = r.stale.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(stale, [old.as_str()], "{fresh} is not stale");
    assert_eq!(root.journal_lines().len(), lines, "flagging writes nothing");
}

#[test]
fn a_forgotten_chat_line_is_neither_promoted_nor_folded() {
    let root = TempRoot::new();
    let hub = root.hub();
    let gone = chat(
        &hub,
        "main",
        "remember that the dentist moved to Friday",
        0.9,
    );
    let kept = chat(
        &hub,
        "main",
        "remember that the car insurance renews in March",
        0.9,
    );
    let twin = chat(
        &hub,
        "main",
        "remember that the dentist moved to Friday!",
        0.9,
    );
    hub.tombstone(
        &gone,
        None,
        "main",
        &memory_hub::index::filter::Filter::all(),
    )
    .unwrap();
    let r = consolidate::run(&hub, &SleepConfig::default(), &options(true)).unwrap();
    let from: Vec<&str> = r.promoted.iter().map(|p| p.from.as_str()).collect();
    assert!(from.contains(&kept.as_str()), "{from:?}");
    assert!(from.contains(&twin.as_str()), "{from:?}");
    assert!(!from.contains(&gone.as_str()), "{from:?}");
    assert!(
        r.folded.iter().all(|f| !f.ids.contains(&gone)),
        "{:?}",
        r.folded
    );
}

#[test]
fn dry_run_changes_nothing() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        chat(
            &hub,
            "main",
            "remember that the car insurance renews in March",
            0.9,
        );
        chat(&hub, "main", "ok", 0.1);
    }
    let journal = |root: &TempRoot| {
        let mut all = Vec::new();
        for p in root.journal_files() {
            all.extend(std::fs::read(p).unwrap());
        }
        all
    };
    let bytes = journal(&root);
    let today = Local::now().date_naive().to_string();
    let out = root.memd(&["consolidate", "--dry-run", "--date", &today]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("would promote"), "{stdout}");
    assert!(stdout.contains("car insurance"), "{stdout}");
    assert!(stdout.contains("nothing changed"), "{stdout}");
    assert_eq!(journal(&root), bytes, "the journal is byte-identical");
    assert!(!root.path().join("data/consolidation").exists());
    // The real run through the CLI writes, and says so in JSON.
    let v = root.memd_json(&["consolidate", "--date", &today]);
    assert_eq!(v["written"].as_array().unwrap().len(), 1, "{v}");
    assert_ne!(journal(&root), bytes);
}

/// A one-connection-at-a-time fake chat-completions server on loopback that
/// answers every request with `content` and keeps the request bodies.
fn fake_model(content: String) -> (String, Arc<Mutex<Vec<String>>>) {
    fake_model_with(move |_| content.clone())
}

/// The scene and memories of a request the fake model received.
fn request_input(body: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    serde_json::from_str(v["messages"][1]["content"].as_str().unwrap()).unwrap()
}

/// The scene and memories of every request the fake model received.
fn request_inputs(seen: &Mutex<Vec<String>>) -> Vec<serde_json::Value> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|b| request_input(b))
        .collect()
}

/// A fake model that answers `ops` for `scene` and no operations for any
/// other scene.
fn fake_model_for(
    scene: &'static str,
    ops: serde_json::Value,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let ops = ops.to_string();
    fake_model_with(move |s| {
        if s == scene {
            ops.clone()
        } else {
            r#"{"operations": []}"#.into()
        }
    })
}

/// [`fake_model`] answering each request with `answer(its scene)`.
fn fake_model_with(
    answer: impl Fn(&str) -> String + Send + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let bodies = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let mut length = 0usize;
            let mut path = String::new();
            loop {
                line.clear();
                reader.read_line(&mut line).unwrap();
                if path.is_empty() {
                    path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                }
                let l = line.trim().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let body = String::from_utf8(body).unwrap();
            let content = request_input(&body)["scene"]
                .as_str()
                .map(&answer)
                .unwrap_or_default();
            bodies.lock().unwrap().push(body);
            let answer = json!({
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
            })
            .to_string();
            let status = if path == "/v1/chat/completions" {
                "200 OK"
            } else {
                "404 Not Found"
            };
            let mut s = stream;
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (format!("http://{addr}/v1"), seen)
}

#[test]
fn model_pass_applies_valid_operations_and_rollback_restores_search() {
    let root = TempRoot::new();
    let queries = ["乌龙茶", "上海", "杭州", "带伞", "聚餐", "保险箱"];
    let (umbrella, before, run) = {
        let hub = root.hub();
        let tea = chat(&hub, "main", "我喜欢喝乌龙茶，不加糖", 0.5);
        let moved = long(&hub, "main", "主人住在上海");
        let umbrella = long(&hub, "main", "临时：明天出门带伞");
        let party = chat(&hub, "qq:group:7", "群里说周五一起聚餐", 0.5);
        let mut req = WriteRequest::new(scene("main"), "保险箱的位置在书房", "main");
        req.privacy = Privacy::Secret;
        let secret = hub.append(req).unwrap().id;
        let ops = json!({ "operations": [
            { "op": "write", "from": [tea], "text": "主人喜欢无糖乌龙茶", "kind": "preference", "importance": 0.8 },
            { "op": "supersede", "id": moved, "text": "主人搬到了杭州" },
            { "op": "forget", "id": umbrella, "reason": "过期的临时提醒" },
            { "op": "write", "from": [tea, party], "text": "跨场景合并" },
            { "op": "write", "from": [tea], "text": "搬到群里", "scene": "qq:group:7" },
            { "op": "supersede", "id": moved, "text": "降低隐私", "privacy": "normal", "scene": "pet" },
            { "op": "forget", "id": secret },
            { "op": "write", "text": 5 },
            { "op": "explode", "id": tea },
            "not even an object",
        ]});
        // Only the request for `main` gets the operations; any other scene's gets none.
        let (base_url, seen) = fake_model_with(move |scene| {
            if scene == "main" {
                format!("```json\n{ops}\n```")
            } else {
                r#"{"operations": []}"#.into()
            }
        });
        let mut cfg = SleepConfig::default();
        cfg.model.kind = ModelKind::Openai;
        cfg.model.base_url = base_url;
        cfg.model.model = "test-model".into();
        let before: Vec<Vec<String>> = queries.iter().map(|q| search_ids(&hub, q, 10)).collect();

        let r = consolidate::run(&hub, &cfg, &options(false)).unwrap();
        assert_eq!(r.proposed, 10);
        assert_eq!(r.accepted.len(), 3, "{r:#?}");
        assert_eq!(r.rejected.len(), 7, "{r:#?}");
        let reasons: Vec<&str> = r.rejected.iter().map(|x| x.reason.as_str()).collect();
        assert_eq!(
            reasons.iter().filter(|x| x.contains("cross-scene")).count(),
            2,
            "{reasons:#?}"
        );
        assert!(reasons.iter().any(|x| x.contains("malformed")));
        // The group line is not in main's request, so a write from both is refused, as is the secret.
        assert_eq!(
            reasons
                .iter()
                .filter(|x| x.contains("not one of the memories given to the model for scene main"))
                .count(),
            2,
            "{reasons:#?}"
        );
        assert_eq!(r.written.len(), 2);
        assert_eq!(r.superseded.len(), 1);
        assert_eq!(r.forgotten.len(), 1);
        assert_eq!(r.forgotten[0].before.text, "临时：明天出门带伞");
        // The secret memory never left the process.
        let sent = seen.lock().unwrap().join("\n");
        assert!(
            sent.contains("乌龙茶") && !sent.contains("保险箱"),
            "{sent}"
        );
        assert!(sent.contains("\"model\":\"test-model\""));
        assert_eq!(
            seen.lock().unwrap().len(),
            2,
            "one request for main, one for the group"
        );
        // The new facts are in search, the forgotten one is not.
        assert!(!search_ids(&hub, "杭州", 10).is_empty());
        assert!(search_ids(&hub, "带伞", 10).is_empty());
        let new_tea = fact_line(&root, &r.written[0]);
        assert_eq!(new_tea["scene"], "main");
        assert_eq!(new_tea["source"], "sleep");
        assert_eq!(new_tea["run"], r.run.as_str());
        let after: Vec<Vec<String>> = queries.iter().map(|q| search_ids(&hub, q, 10)).collect();
        assert_ne!(after, before);
        (umbrella, before, r.run)
    };
    // Roll back through the real binary, then search again.
    let lines = root.journal_lines().len();
    let out = root.memd(&["rollback", "--run", &run]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Restored: the forgotten reminder, and the memory the run superseded
    // (forgetting the run's new version alone does not bring it back).
    assert!(stdout.contains("2 forgotten, 2 restored"), "{stdout}");
    assert_eq!(root.journal_lines().len(), lines + 4, "append-only");
    let hub = root.hub();
    let restored: Vec<Vec<String>> = queries.iter().map(|q| search_ids(&hub, q, 10)).collect();
    assert_eq!(
        restored, before,
        "rollback restores the exact prior results"
    );
    let line = fact_line(&root, &umbrella);
    assert_eq!(line["text"], "临时：明天出门带伞");
}

#[test]
fn model_pass_through_a_command_and_its_failures() {
    let root = TempRoot::new();
    let hub = root.hub();
    let note = chat(&hub, "main", "周末要去爬山", 0.5);
    let mut cfg = SleepConfig::default();
    cfg.model.kind = ModelKind::Command;
    let mut req = WriteRequest::new(scene("main"), "主人的体检报告显示血压偏高", "main");
    req.privacy = Privacy::Personal;
    let personal = hub.append(req).unwrap().id;
    let mut req = WriteRequest::new(scene("main"), "主人的名字叫小林", "main");
    req.tier = Some(memory_hub::model::Tier::T0);
    let pinned = hub.append(req).unwrap().id;
    let answer = json!({"operations": [
        {"op": "write", "from": [note], "text": "主人周末爬山"},
        {"op": "write", "from": [personal], "text": "主人血压偏高", "privacy": "normal"},
        {"op": "write", "from": [note, personal], "text": "主人周末爬山，注意血压"},
        {"op": "forget", "id": pinned},
    ]});
    cfg.model.command = vec![
        "sh".into(),
        "-c".into(),
        format!("cat >/dev/null; echo '{answer}'"),
    ];
    let r = consolidate::run(&hub, &cfg, &options(false)).unwrap();
    assert_eq!(r.written.len(), 2, "{r:#?}");
    assert!(r.rejected[0].reason.contains("less private"), "{r:#?}");
    assert!(r.rejected[1].reason.contains("pinned"), "{r:#?}");
    // A write from a personal and a normal line is personal.
    assert_eq!(fact_line(&root, &r.written[1])["privacy"], "personal");
    // A consolidator that answers nonsense fails the run (the scheduler retries).
    cfg.model.command = vec!["sh".into(), "-c".into(), "echo 'I am a teapot'".into()];
    let err = consolidate::run(&hub, &cfg, &options(false)).unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
}

fn local(s: &str) -> DateTime<Utc> {
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap();
    Local
        .from_local_datetime(&naive)
        .earliest()
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn sleep_job_runs_once_per_day_retries_and_survives_restarts() {
    let root = TempRoot::new();
    let hub = root.hub();
    chat(&hub, "main", "remember to water the plants", 0.9);
    let path = scheduler::state_path(&hub);
    let mut cfg = SleepConfig {
        enabled: true,
        retry_minutes: 30,
        ..SleepConfig::default()
    };
    // First the model is missing: the run fails and is retried with backoff.
    cfg.model.kind = ModelKind::Command;
    cfg.model.command = vec!["/nonexistent/consolidator".into()];
    let failing = || vec![sleep_job(cfg.clone()).unwrap()];
    assert_eq!(
        scheduler::tick(&hub, &failing(), &path, local("2026-11-30 02:59")),
        Vec::<&str>::new()
    );
    assert_eq!(
        scheduler::tick(&hub, &failing(), &path, local("2026-11-30 03:05")),
        ["sleep"]
    );
    let status = consolidate::status(&hub, &cfg, local("2026-11-30 03:06"));
    assert_eq!(status.result, Some("error"));
    assert_eq!(status.next_run, Some(local("2026-11-30 03:35")));
    assert!(scheduler::tick(&hub, &failing(), &path, local("2026-11-30 03:20")).is_empty());
    // The model is fixed and the daemon restarted: the retry succeeds...
    cfg.model.kind = ModelKind::None;
    let jobs = || vec![sleep_job(cfg.clone()).unwrap()];
    assert_eq!(
        scheduler::tick(&hub, &jobs(), &path, local("2026-11-30 03:40")),
        ["sleep"]
    );
    // ... and never runs twice that day, across restarts.
    assert!(scheduler::tick(&hub, &jobs(), &path, local("2026-11-30 03:41")).is_empty());
    assert!(scheduler::tick(&hub, &jobs(), &path, local("2026-11-30 23:59")).is_empty());
    let status = consolidate::status(&hub, &cfg, local("2026-11-30 12:00"));
    assert_eq!(status.result, Some("ok"));
    assert_eq!(status.next_run, Some(local("2026-12-01 03:00")));
    assert_eq!(
        scheduler::tick(&hub, &jobs(), &path, local("2026-12-01 03:00")),
        ["sleep"]
    );
    let runs = report::list(&root.layout()).unwrap();
    assert_eq!(runs.len(), 3, "two runs and the failed one: {runs:#?}");
    assert_eq!(runs.iter().map(|r| r.written).sum::<usize>(), 1);
}

#[tokio::test]
async fn api_lists_runs_and_reports_for_admins_only_and_health_shows_the_job() {
    let api = Api::new();
    chat(&api.hub, "main", "the wifi password changed last week", 0.9);
    let r = consolidate::run(&api.hub, &SleepConfig::default(), &options(false)).unwrap();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    let (status, v) = api.get("/v1/consolidation/runs", Some(&root)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["runs"][0]["run"], r.run.as_str());
    assert_eq!(v["runs"][0]["promoted"], 1);
    let (status, _) = api.get("/v1/consolidation/runs", Some(&pet)).await;
    assert_eq!(status, 403);
    let v = api
        .ok("/v1/consolidation/report", &root, json!({ "run": r.run }))
        .await;
    assert_eq!(v["written"].as_array().unwrap().len(), 1);
    let (status, _) = api
        .post(
            "/v1/consolidation/report",
            &root,
            json!({ "run": "run-nope" }),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = api
        .post("/v1/consolidation/report", &root, json!({ "run": "../x" }))
        .await;
    assert_eq!(status, 400);
    // Rolling back and running again over HTTP, while the daemon holds the lock.
    let preview = api
        .ok(
            "/v1/consolidation/rollback",
            &root,
            json!({ "run": r.run, "dry_run": true }),
        )
        .await;
    assert_eq!(preview["forgotten"].as_array().unwrap().len(), 1);
    let done = api
        .ok("/v1/consolidation/rollback", &root, json!({ "run": r.run }))
        .await;
    assert_eq!(done["forgotten"], preview["forgotten"]);
    let (status, _) = api
        .post(
            "/v1/consolidation/rollback",
            &root,
            json!({ "source": "sleep" }),
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = api
        .post("/v1/consolidation/rollback", &pet, json!({ "run": r.run }))
        .await;
    assert_eq!(status, 403);
    let (status, _) = api.post("/v1/consolidation/run", &pet, json!({})).await;
    assert_eq!(status, 403);
    // A POST without a body is refused and runs nothing.
    let (status, v) = api
        .raw("POST", "/v1/consolidation/run", Some(&root), Vec::new())
        .await;
    assert_eq!(status, 400, "{v}");
    let (_, runs) = api.get("/v1/consolidation/runs", Some(&root)).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    let dry = api
        .ok("/v1/consolidation/run", &root, json!({ "dry_run": true }))
        .await;
    assert_eq!(dry["promoted"].as_array().unwrap().len(), 1);
    assert!(dry["written"].as_array().unwrap().is_empty());
    let again = api.ok("/v1/consolidation/run", &root, json!({})).await;
    assert_eq!(again["written"].as_array().unwrap().len(), 1);
    let (_, health) = api.get("/v1/health", Some(&root)).await;
    assert_eq!(health["consolidation"]["enabled"], false, "{health}");
    assert_eq!(health["consolidation"]["failures"], 0);
}

#[test]
fn serve_runs_the_enabled_sleep_job_and_health_reports_it() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        chat(
            &hub,
            "main",
            "the dentist appointment moved to Thursday",
            0.9,
        );
    }
    // At 00:00 the job is due as soon as the daemon starts.
    root.write_config(
        json!({ "sleep": { "enabled": true, "at": "00:00" }, "backup": { "daily": false } }),
    );
    // Counts, jobs and consolidation are shown to admin tokens only.
    let admin = root.token("root", "dsh-desktop");
    let served = crate::support::Served::start(&mut crate::support::serve_command(root.path()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let health = loop {
        let (_, health) = crate::wire::get(&served.addr, "/v1/health", &admin);
        if health["consolidation"]["result"] == "ok" || std::time::Instant::now() > deadline {
            break health;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    served.kill();
    let c = &health["consolidation"];
    assert_eq!(c["enabled"], true, "{health}");
    assert_eq!(c["result"], "ok", "{health}");
    let next: DateTime<Utc> = c["next_run"].as_str().unwrap().parse().unwrap();
    assert!(next > Utc::now(), "next run is tomorrow: {health}");
    let runs = report::list(&root.layout()).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].promoted, 1);
}

#[test]
fn a_fact_restored_in_a_later_month_survives_a_reindex() {
    let root = TempRoot::new();
    let run = {
        let hub = root.hub();
        let mut req = WriteRequest::new(
            scene("main"),
            "old reminder about the boiler service",
            "main",
        );
        req.ts = Some(Utc::now() - Duration::days(40));
        let old = hub.append(req).unwrap().id;
        let mut cfg = SleepConfig::default();
        cfg.model.kind = ModelKind::Command;
        let answer = json!({"operations": [{"op": "forget", "id": old}]});
        cfg.model.command = vec![
            "sh".into(),
            "-c".into(),
            format!("cat >/dev/null; echo '{answer}'"),
        ];
        let mut opts = options(false);
        opts.window.from = Utc::now() - Duration::days(60);
        let r = consolidate::run(&hub, &cfg, &opts).unwrap();
        assert_eq!(r.forgotten.len(), 1, "{r:#?}");
        assert!(search_ids(&hub, "boiler", 10).is_empty());
        let undone = rollback(&hub, &Target::Run(r.run.clone()), false).unwrap();
        assert_eq!(undone.restored, [old]);
        assert_eq!(search_ids(&hub, "boiler", 10).len(), 1);
        r.run
    };
    root.memd_ok(&["reindex"]);
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "boiler", 10).len(), 1, "after {run}");
}

// --- Issue "Privacy without side channels", item 14: the model pass keeps scenes apart. ---

fn openai_cfg(base_url: String) -> SleepConfig {
    let mut cfg = SleepConfig::default();
    cfg.model.kind = ModelKind::Openai;
    cfg.model.base_url = base_url;
    cfg.model.model = "test-model".into();
    cfg
}

fn write_as(hub: &Hub, scene_name: &str, text: &str, privacy: Privacy) -> String {
    let mut req = WriteRequest::new(scene(scene_name), text, "main");
    req.privacy = privacy;
    hub.append(req).unwrap().id
}

#[test]
fn model_pass_sends_one_request_per_scene_and_never_secret_or_by_default_sensitive() {
    let root = TempRoot::new();
    let hub = root.hub();
    write_as(&hub, "main", "owner note about the garden", Privacy::Normal);
    write_as(
        &hub,
        "main",
        "owner's salary is confidential",
        Privacy::Sensitive,
    );
    write_as(
        &hub,
        "main",
        "the safe code is in the drawer",
        Privacy::Secret,
    );
    write_as(
        &hub,
        "qq:owner",
        "owner asked about the weekend",
        Privacy::Normal,
    );
    write_as(
        &hub,
        "qq:owner",
        "owner's medical appointment",
        Privacy::Sensitive,
    );
    chat(&hub, "qq:group:7", "group chat about hotpot", 0.5);
    let (base_url, seen) = fake_model(r#"{"operations": []}"#.into());
    let cfg = openai_cfg(base_url);
    consolidate::run(&hub, &cfg, &options(true)).unwrap();
    let requests = request_inputs(&seen);
    let mut scenes: Vec<&str> = requests
        .iter()
        .map(|r| r["scene"].as_str().unwrap())
        .collect();
    scenes.sort();
    assert_eq!(
        scenes,
        ["main", "qq:group:7", "qq:owner"],
        "one request per scene"
    );
    for r in &requests {
        for m in r["memories"].as_array().unwrap() {
            assert_eq!(m["scene"], r["scene"], "only its own scene's memories: {r}");
        }
    }
    let all = seen.lock().unwrap().join("\n");
    for never in ["safe code", "salary", "medical"] {
        assert!(!all.contains(never), "{never} was sent: {all}");
    }
    assert!(all.contains("garden") && all.contains("hotpot"));

    // With sendSensitive, sensitive memories go out, but only in their own scene's request.
    let (base_url, seen) = fake_model(r#"{"operations": []}"#.into());
    let mut cfg = openai_cfg(base_url);
    cfg.model.send_sensitive = true;
    consolidate::run(&hub, &cfg, &options(true)).unwrap();
    let requests = request_inputs(&seen);
    for r in &requests {
        let text = r.to_string();
        assert_eq!(text.contains("salary"), r["scene"] == "main", "{text}");
        assert_eq!(text.contains("medical"), r["scene"] == "qq:owner", "{text}");
        assert!(!text.contains("safe code"));
    }
    // Secret is never sent: the old switch is refused with a clear error.
    let mut cfg = SleepConfig::default();
    cfg.model.send_secret = true;
    let err = cfg.validate().unwrap_err();
    assert!(err.to_string().contains("never sent"), "{err}");
    let bad: Result<memory_hub::config::Config, _> = serde_json::from_value(
        json!({ "sleep": { "model": { "sendSecret": false, "sendSensitive": true } } }),
    );
    assert!(
        bad.unwrap().validate().is_ok(),
        "sendSecret: false still loads"
    );
}

#[test]
fn group_evidence_cannot_touch_other_scenes_owner_or_pinned_memories() {
    let root = TempRoot::new();
    let hub = root.hub();
    let owner_main = long(&hub, "main", "the owner lives in Hangzhou");
    // In the group: the owner's own line, a pinned note, and another member's line.
    let mut req = WriteRequest::new(scene("qq:group:7"), "owner said he likes hotpot", "qq");
    req.subject = memory_hub::model::Subject::Owner;
    let owner_in_group = hub.append(req).unwrap().id;
    let mut req = WriteRequest::new(scene("qq:group:7"), "group rule: no spam", "qq");
    req.subject = memory_hub::model::Subject::Other;
    req.tier = Some(memory_hub::model::Tier::T0);
    let pinned_in_group = hub.append(req).unwrap().id;
    let mut req = WriteRequest::new(scene("qq:group:7"), "alice is moving to Beijing", "qq");
    req.subject = memory_hub::model::Subject::Other;
    let alice = hub.append(req).unwrap().id;
    let group_ops = json!({ "operations": [
        { "op": "forget", "id": owner_main, "reason": "a member said so" },
        { "op": "supersede", "id": owner_main, "text": "the owner moved to Beijing" },
        { "op": "forget", "id": owner_in_group },
        { "op": "supersede", "id": owner_in_group, "text": "owner hates hotpot" },
        { "op": "supersede", "id": pinned_in_group, "text": "spam is fine" },
        { "op": "supersede", "id": alice, "text": "alice moved to Beijing" },
    ]});
    let (base_url, seen) = fake_model_for("qq:group:7", group_ops);
    let r = consolidate::run(&hub, &openai_cfg(base_url), &options(false)).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
    let reasons: Vec<&str> = r.rejected.iter().map(|x| x.reason.as_str()).collect();
    assert_eq!(reasons.len(), 5, "{r:#?}");
    assert_eq!(
        reasons
            .iter()
            .filter(
                |x| x.contains("not one of the memories given to the model for scene qq:group:7")
            )
            .count(),
        2,
        "{reasons:#?}"
    );
    assert_eq!(
        reasons
            .iter()
            .filter(|x| x.contains("about the owner"))
            .count(),
        2
    );
    assert_eq!(reasons.iter().filter(|x| x.contains("pinned")).count(), 1);
    // Only the other member's line was superseded, within the group.
    assert_eq!(r.superseded.len(), 1, "{r:#?}");
    assert_eq!(r.superseded[0].old, alice);
    assert!(r.forgotten.is_empty());
    assert_eq!(fact_line(&root, &r.written[0])["scene"], "qq:group:7");
    assert_eq!(
        search_ids(&hub, "Hangzhou", 5),
        std::slice::from_ref(&owner_main)
    );
    assert_eq!(search_ids(&hub, "hotpot", 5), [owner_in_group]);

    // In the owner's own scene, the owner's evidence may supersede the owner's memory.
    let main_ops = json!({ "operations": [
        { "op": "supersede", "id": owner_main, "text": "the owner moved to Suzhou" },
    ]});
    let (base_url, _) = fake_model_for("main", main_ops);
    let r = consolidate::run(&hub, &openai_cfg(base_url), &options(false)).unwrap();
    assert_eq!(r.superseded.len(), 1, "{r:#?}");
}

// --- Issue "Everyday correctness", item 4: consolidation writes what the person meant. ---

/// Thursday 2026-12-03, 10:00 in China.
const THURSDAY: &str = "2026-12-03T10:00:00+08:00";

/// Ingests a message from the owner into `qq:owner`, sent at `sent_at`.
fn said(hub: &Hub, message_id: &str, text: &str, sent_at: &str) -> String {
    hub.ingest(
        &hub.operator(),
        memory_hub::api::IngestBody {
            scene: Some("qq:owner".into()),
            message_id: message_id.into(),
            text: text.into(),
            sender: None,
            from_owner: true,
            from_self: false,
            sent_at: Some(DateTime::parse_from_rfc3339(sent_at).unwrap()),
            ttl_hours: Some(168),
            session: None,
        },
    )
    .unwrap()
    .id
    .expect("stored")
}

/// The promotion of chat line `from` in a report.
fn promoted_from<'a>(r: &'a report::RunReport, from: &str) -> &'a report::Promotion {
    r.promoted
        .iter()
        .find(|p| p.from == from)
        .unwrap_or_else(|| panic!("{from} not promoted: {r:#?}"))
}

#[test]
fn issue_4_a_relative_date_becomes_the_date_the_person_meant() {
    let root = TempRoot::new();
    let hub = root.hub();
    let chat = said(&hub, "m1", "下周五是我妈妈的生日，千万记住", THURSDAY);
    let r = consolidate::run(&hub, &SleepConfig::default(), &options(false)).unwrap();
    let p = promoted_from(&r, &chat);
    let id = p.id.clone().unwrap();
    // Before: "下周五是主人的妈妈的生日", no `time`, stamped with the run's time.
    let line = fact_line(&root, &id);
    assert_eq!(
        line["text"], "2026-12-11（周五）是主人的妈妈的生日",
        "{line}"
    );
    assert_eq!(line["time"], "2026-12-11", "{line}");
    assert_eq!(line["time_at"], "2026-12-11T00:00:00Z", "{line}");
    // A birthday named by its day is a fact, not a passing event, and not chat.
    assert_eq!(line["kind"], "fact");
    assert_eq!(line["stage"], "long");
    // Read a week later (or any time), the memory names the same Friday.
    let m = hub
        .fetch(&id, &memory_hub::index::filter::Filter::all())
        .unwrap();
    assert!(
        m.text.contains("2026-12-11") && !m.text.contains("下周"),
        "{}",
        m.text
    );
    assert_eq!(
        m.setting.time_at.unwrap().to_rfc3339(),
        "2026-12-11T00:00:00+00:00"
    );
}

#[test]
fn issue_4_the_senders_day_decides_what_tomorrow_is() {
    let root = TempRoot::new();
    let hub = root.hub();
    // 00:30 on Friday in China is still Thursday in UTC.
    let chat = said(&hub, "m1", "记得明天带护照", "2026-12-04T00:30:00+08:00");
    let r = consolidate::run(&hub, &SleepConfig::default(), &options(false)).unwrap();
    let line = fact_line(&root, promoted_from(&r, &chat).id.as_ref().unwrap());
    assert_eq!(line["text"], "2026-12-05（周六）带护照", "{line}");
    assert_eq!(line["time"], "2026-12-05");
}

#[test]
fn issue_4_cues_particles_plans_and_kinds() {
    let root = TempRoot::new();
    let hub = root.hub();
    let cases = [
        // (said, text written, kind, time, tier)
        (
            "记得下周五交季度报告",
            "2026-12-11（周五）交季度报告",
            "event",
            "2026-12-11",
            "t3",
        ),
        ("我搬家到杭州啦", "主人搬家到杭州", "fact", THURSDAY, "t2"),
        (
            "周六不去聚餐了，要加班",
            "2026-12-05（周六）不去聚餐了，要加班",
            "event",
            "2026-12-05",
            "t3",
        ),
        (
            "I'm working late tonight",
            "The owner is working late on the evening of 2026-12-03 (Thursday)",
            "event",
            "2026-12-03",
            "t3",
        ),
        (
            "我喜欢喝乌龙茶，不加糖哦",
            "主人喜欢喝乌龙茶，不加糖",
            "preference",
            THURSDAY,
            "t2",
        ),
    ];
    let ids: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| said(&hub, &format!("m{i}"), c.0, THURSDAY))
        .collect();
    let r = consolidate::run(&hub, &SleepConfig::default(), &options(false)).unwrap();
    for (id, (text, want, kind, time, tier)) in ids.iter().zip(cases) {
        let line = fact_line(&root, promoted_from(&r, id).id.as_ref().unwrap());
        assert_eq!(
            (
                line["text"].as_str(),
                line["kind"].as_str(),
                line["time"].as_str(),
                line["tier"].as_str()
            ),
            (Some(want), Some(kind), Some(time), Some(tier)),
            "{text}: {line}"
        );
    }
    // Nothing promoted keeps `kind: chat`; every promotion carries a time.
    for id in &r.written {
        let line = fact_line(&root, id);
        assert_ne!(line["kind"], "chat", "{line}");
        assert!(line["time_at"].is_string(), "{line}");
    }
    // Rollback still restores exactly: the promotions leave, the chat stays.
    let undone = rollback(&hub, &Target::Run(r.run.clone()), false).unwrap();
    assert_eq!(undone.forgotten.len(), ids.len());
    for id in &ids {
        assert_eq!(
            hub.fetch(id, &memory_hub::index::filter::Filter::all())
                .unwrap()
                .stage,
            Stage::Short
        );
    }
}

#[tokio::test]
async fn issue_4_a_recall_in_the_first_hour_counts() {
    let api = Api::new();
    let owner = api.token("o", "qq-owner");
    let sent = Utc::now().to_rfc3339();
    let ingest = |n: &'static str, text: &'static str| {
        let body = json!({"message_id": n, "text": text, "sent_at": sent});
        let (api, owner) = (&api, &owner);
        async move {
            let v = api.ok("/v1/ingest", owner, body).await;
            v["id"].as_str().unwrap().to_string()
        }
    };
    let recalled = ingest("1", "那家店的招牌是酸菜鱼").await;
    // Recalled a minute after it was said.
    let r = api
        .ok("/v1/recall", &owner, json!({"messages": ["酸菜鱼"]}))
        .await;
    assert!(r["hits"].to_string().contains(&recalled), "{r}");
    // A second recall right away writes nothing more.
    let lines = api.root.journal_lines().len();
    api.ok("/v1/recall", &owner, json!({"messages": ["酸菜鱼"]}))
        .await;
    assert_eq!(api.root.journal_lines().len(), lines);
    // Said as well, never recalled.
    ingest("2", "楼下新开了一家面包店").await;
    let ids = [recalled];
    let run = consolidate::run(&api.hub, &SleepConfig::default(), &options(false)).unwrap();
    let from: Vec<&str> = run.promoted.iter().map(|p| p.from.as_str()).collect();
    assert_eq!(from, [ids[0].as_str()], "{run:#?}");
    assert!(run.promoted[0].reason.contains("recalled"), "{run:#?}");
}

#[test]
fn issue_4_the_model_pass_gets_when_and_writes_absolute_dates() {
    let root = TempRoot::new();
    let hub = root.hub();
    let chat = said(&hub, "m1", "下周五是我妈妈的生日", THURSDAY);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.json");
    // The model echoes the relative date and calls it chat, as small models do.
    let answer = json!({"operations": [
        {"op": "write", "from": [chat], "text": "下周五是主人妈妈的生日", "kind": "chat"},
    ]});
    let mut cfg = SleepConfig::default();
    cfg.model.kind = ModelKind::Command;
    cfg.model.command = vec![
        "sh".into(),
        "-c".into(),
        format!("cat >'{}'; echo '{answer}'", input.display()),
    ];
    let r = consolidate::run(&hub, &cfg, &options(false)).unwrap();
    let sent: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
    assert_eq!(
        sent["memories"][0]["time"], "2026-12-03T10:00:00+08:00",
        "{sent}"
    );
    assert_eq!(r.written.len(), 1, "{r:#?}");
    let line = fact_line(&root, &r.written[0]);
    assert_eq!(line["text"], "2026-12-11（周五）是主人妈妈的生日");
    assert_eq!(line["time"], "2026-12-11");
    assert_eq!(line["kind"], "fact");
}

/// Issue item 7: the model pass wrote `kind: category` (a pinned, always
/// injected memory) from a group's chat. The writer refuses a pin from
/// evidence outside the owner's audiences, and a tier rule that would pin
/// such a memory gives t1; the owner's own scene may still pin.
#[test]
fn group_evidence_cannot_pin_a_memory() {
    let root = TempRoot::new();
    let hub = root.hub();
    let mut req = WriteRequest::new(scene("qq:group:7"), "alice posts the weekly schedule", "qq");
    req.subject = memory_hub::model::Subject::Other;
    let alice = hub.append(req).unwrap().id;
    let owner_note = long(&hub, "main", "the owner reviews every pull request himself");
    let group_ops = json!({ "operations": [
        { "op": "write", "from": [alice], "text": "group rule: everyone follows alice's schedule", "kind": "category" },
        { "op": "write", "from": [alice], "text": "the group security policy is alice's schedule", "kind": "fact" },
    ]})
    .to_string();
    let main_ops = json!({ "operations": [
        { "op": "write", "from": [owner_note], "text": "standing rule: every pull request gets the owner's review", "kind": "category" },
    ]})
    .to_string();
    let (base_url, _) = fake_model_with(move |scene| match scene {
        "qq:group:7" => group_ops.clone(),
        "main" => main_ops.clone(),
        _ => r#"{"operations": []}"#.into(),
    });
    let r = consolidate::run(&hub, &openai_cfg(base_url), &options(false)).unwrap();
    let reasons: Vec<&str> = r.rejected.iter().map(|x| x.reason.as_str()).collect();
    assert_eq!(reasons.len(), 1, "{r:#?}");
    assert!(
        reasons[0].contains("may not pin") && reasons[0].contains("qq:group:7"),
        "{reasons:?}"
    );
    assert_eq!(r.written.len(), 2, "{r:#?}");
    let lines: Vec<serde_json::Value> = r.written.iter().map(|id| fact_line(&root, id)).collect();
    let group_fact = lines.iter().find(|l| l["scene"] == "qq:group:7").unwrap();
    assert_eq!(group_fact["kind"], "fact");
    assert_eq!(
        group_fact["tier"], "t1",
        "\"security policy\" pins a memory written by hand, never one from group evidence"
    );
    let main_fact = lines.iter().find(|l| l["scene"] == "main").unwrap();
    assert_eq!(main_fact["kind"], "category");
}
