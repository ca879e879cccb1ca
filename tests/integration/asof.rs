//! `as_of`: every answer for a past instant equals the answer of a root
//! rebuilt from the journal cut at that instant (a fresh root whose journal
//! holds only the lines written up to it, reindexed, its clock at the
//! instant, asked the same request), for random histories of writes,
//! short-term writes that expire, supersedes, forgets, rewrites (tag edits)
//! and touches; and an `as_of` read writes nothing.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use memory_hub::api::{
    ForgetBody, GetBody, RecallBody, RecentBody, SearchBody, TimelineBody, WriteBody,
};
use memory_hub::config::Config;
use memory_hub::hub::{Caller, Hub};
use memory_hub::model::Stage;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use crate::support::{TempRoot, TestClock, edit_tags};

const SCENES: [&str; 2] = ["main", "pet"];

/// One step of a history; `pick` chooses among the ids written so far.
#[derive(Debug, Clone)]
enum Op {
    Write { scene: usize, short: bool },
    Supersede { pick: usize },
    Forget { pick: usize },
    Rewrite { pick: usize },
    Touch { pick: usize },
    Wait { hours: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..SCENES.len(), any::<bool>()).prop_map(|(scene, short)| Op::Write { scene, short }),
        2 => any::<usize>().prop_map(|pick| Op::Supersede { pick }),
        2 => any::<usize>().prop_map(|pick| Op::Forget { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Rewrite { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Touch { pick }),
        2 => (1i64..30).prop_map(|hours| Op::Wait { hours }),
    ]
}

/// The words every memory shares (so one search finds them all) and its own.
fn text(n: usize) -> String {
    format!("harbor lantern note{n} zq{n}x")
}

/// Applies `op`; refusals (a forget of a forgotten id, a second supersede
/// of one version) are part of the history like any answer.
fn apply(hub: &Hub, clock: &TestClock, ids: &mut Vec<String>, op: &Op) {
    let caller = hub.operator();
    let pick = |p: usize| (!ids.is_empty()).then(|| ids[p % ids.len()].clone());
    match op {
        Op::Write { scene, short } => {
            let body = WriteBody {
                text: text(ids.len()),
                scene: Some(SCENES[*scene].into()),
                stage: short.then_some(Stage::Short),
                ..WriteBody::default()
            };
            ids.push(hub.write(&caller, body).expect("write").id);
        }
        Op::Supersede { pick: p } => {
            if let Some(old) = pick(*p) {
                let body = WriteBody {
                    text: text(ids.len()),
                    supersedes: Some(old),
                    ..WriteBody::default()
                };
                if let Ok(out) = hub.write(&caller, body) {
                    ids.push(out.id);
                }
            }
        }
        Op::Forget { pick: p } => {
            if let Some(id) = pick(*p) {
                let _ = hub.forget(
                    &caller,
                    ForgetBody {
                        id,
                        ..ForgetBody::default()
                    },
                );
            }
        }
        Op::Rewrite { pick: p } => {
            if let Some(id) = pick(*p) {
                let _ = edit_tags(hub, &id, &["edited"], &[], Some(0.9));
            }
        }
        Op::Touch { pick: p } => {
            if let Some(id) = pick(*p) {
                let agent = caller.clone();
                let _ = hub.get(
                    &agent,
                    GetBody {
                        id,
                        touch: true,
                        ..GetBody::default()
                    },
                );
                hub.flush_accesses(true).expect("touch line");
            }
        }
        Op::Wait { hours } => clock.advance(Duration::hours(*hours)),
    }
    clock.advance(Duration::minutes(7));
}

/// A fresh root at `into` whose journal holds the lines of `from` written
/// at or before `at` (a put's `at`, else its `ts`; a forget's or touch's
/// `ts`), in the same files and order: what the issue calls the cut.
fn cut_journal(from: &Path, into: &Path, at: DateTime<Utc>) {
    let facts = from.join("memories/facts");
    for entry in walk(&facts) {
        let rel = entry.strip_prefix(&facts).unwrap();
        let kept: String = std::fs::read_to_string(&entry)
            .unwrap()
            .lines()
            .filter(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let when = v.get("at").unwrap_or(&v["ts"]).as_str().unwrap();
                DateTime::parse_from_rfc3339(when).unwrap() <= at
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let out = into.join("memories/facts").join(rel);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(out, kept).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out
}

/// What the reads answer, as comparable values: search and recall hits in
/// order, recent and the timeline (with supersede marks), `get` of every id.
fn answers(hub: &Hub, caller: &Caller, as_of: Option<String>, ids: &[String]) -> serde_json::Value {
    let search = hub
        .search(
            caller,
            SearchBody {
                query: "harbor lantern".into(),
                limit: Some(50),
                min_score: Some(0.0),
                as_of: as_of.clone(),
                ..SearchBody::default()
            },
        )
        .expect("search");
    let recall = hub
        .recall(
            caller,
            RecallBody {
                query: Some("lantern".into()),
                // The rebuilt root is asked as a person looking: its recall
                // must not keep chat alive either (as_of never does).
                touch: Some(false),
                limit: Some(50),
                min_score: Some(0.0),
                as_of: as_of.clone(),
                ..RecallBody::default()
            },
        )
        .expect("recall");
    let recent = hub
        .recent(
            caller,
            RecentBody {
                limit: Some(100),
                as_of: as_of.clone(),
                ..RecentBody::default()
            },
        )
        .expect("recent");
    let timeline = hub
        .timeline(
            caller,
            TimelineBody {
                limit: Some(100),
                as_of: as_of.clone(),
                ..TimelineBody::default()
            },
        )
        .expect("timeline");
    let gets: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            let body = GetBody {
                id: id.clone(),
                as_of: as_of.clone(),
                ..GetBody::default()
            };
            match hub.get(caller, body) {
                Ok(r) => serde_json::json!([r.memory.text, r.memory.tags, r.superseded, r.newest]),
                Err(e) => serde_json::json!(e.code().as_str()),
            }
        })
        .collect();
    let timeline = serde_json::to_value(&timeline).unwrap();
    serde_json::json!({
        "search": search.body.hits.iter().map(|h| &h.memory.id).collect::<Vec<_>>(),
        "recall": recall.body.ids(),
        "recent": recent.items.iter().map(|m| (&m.id, &m.tags, m.expires_at)).collect::<Vec<_>>(),
        "timeline": timeline["months"],
        "get": gets,
    })
}

/// The answers of a root rebuilt from the cut of `root` at `at`.
fn rebuilt_answers(root: &TempRoot, at: DateTime<Utc>, ids: &[String]) -> serde_json::Value {
    let fresh = TempRoot::new();
    cut_journal(root.path(), fresh.path(), at);
    let (hub, _) = fresh.reindex(Config::default());
    let clock = TestClock::at(&at.to_rfc3339());
    clock.install(&hub);
    answers(&hub, &hub.operator(), None, ids)
}

fn journal_bytes(root: &TempRoot) -> Vec<u8> {
    let mut files = walk(&root.path().join("memories/facts"));
    files.sort();
    files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn as_of_equals_the_rebuilt_cut(ops in proptest::collection::vec(op(), 4..16), picks in proptest::collection::vec(0usize..1000, 3), midway in 0usize..1000) {
        let root = TempRoot::new();
        let hub = root.hub();
        let clock = TestClock::at("2026-11-01T08:00:00Z");
        clock.install(&hub);
        let mut ids = Vec::new();
        let mut instants = vec![clock.now()];
        for (i, op) in ops.iter().enumerate() {
            apply(&hub, &clock, &mut ids, op);
            instants.push(clock.now() - Duration::minutes(3));
            // Asked midway too, so later reads see the journal grown since
            // (line times read on from where they stopped, a kept cut reused
            // or not).
            if i == midway % ops.len() {
                let at = instants[midway % instants.len()];
                let got = answers(&hub, &hub.operator(), Some(at.to_rfc3339()), &ids);
                prop_assert_eq!(&got, &rebuilt_answers(&root, at, &ids), "midway, as_of {}", at);
            }
        }
        instants.push(clock.now());
        let mut asked: Vec<DateTime<Utc>> = picks.iter().map(|p| instants[p % instants.len()]).collect();
        asked.push(clock.now());
        let before = journal_bytes(&root);
        for at in asked {
            let got = answers(&hub, &hub.operator(), Some(at.to_rfc3339()), &ids);
            let want = rebuilt_answers(&root, at, &ids);
            prop_assert_eq!(&got, &want, "as_of {}", at);
        }
        prop_assert_eq!(journal_bytes(&root), before, "an as_of read writes nothing");
    }
}

/// Over HTTP: the reply says which instant it answers for, a token without a
/// scene gets nothing from it at any instant, a future or unreadable
/// `as_of` is `INVALID_INPUT`, and no `as_of` read writes a line.
#[tokio::test]
async fn as_of_over_http_is_scoped_and_read_only() {
    use crate::http_support::{Api, ids, timeline_items};
    use serde_json::json;

    let api = Api::new();
    let clock = TestClock::at("2026-11-01T08:00:00Z");
    clock.install(&api.hub);
    let op = api.hub.operator();
    let write = |scene: &str, text: &str, supersedes: Option<String>| {
        let body = WriteBody {
            text: text.into(),
            scene: Some(scene.into()),
            supersedes,
            ..WriteBody::default()
        };
        api.hub.write(&api.hub.operator(), body).expect("write").id
    };
    let old = write("main", "harbor plan: sail on friday", None);
    let group = write("qq:group:1", "harbor dinner with the group", None);
    let early = clock.now() + Duration::minutes(30);
    clock.advance(Duration::hours(1));
    let new = write("main", "harbor plan: sail on saturday", Some(old.clone()));
    api.hub
        .forget(
            &op,
            ForgetBody {
                id: group.clone(),
                ..ForgetBody::default()
            },
        )
        .expect("forget");
    clock.advance(Duration::hours(1));
    api.set_now(Some(clock.now()));
    let root = api.token("root", "dsh-desktop");
    let g1 = api.token("g1", "qq-group-1");
    let lines = api.root.journal_lines();

    let at = early.to_rfc3339();
    let q = |as_of: &str| json!({"query": "harbor", "mode": "fulltext", "min_score": 0, "as_of": as_of});
    let v = api.ok("/v1/search", &root, q(&at)).await;
    let mut got = ids(&v["hits"]);
    got.sort();
    let mut want = vec![old.clone(), group.clone()];
    want.sort();
    assert_eq!(got, want, "before the supersede and the forget");
    assert_eq!(v["as_of"], json!("2026-11-01T08:30:00Z"));
    let v = api
        .ok("/v1/search", &root, q(&clock.now().to_rfc3339()))
        .await;
    assert_eq!(ids(&v["hits"]), vec![new.clone()], "now");
    let v = api
        .ok(
            "/v1/get",
            &root,
            json!({"id": old, "as_of": at, "touch": true}),
        )
        .await;
    assert!(
        v.get("superseded").is_none(),
        "not yet replaced at that instant: {v}"
    );
    let (status, _) = api
        .post("/v1/get", &root, json!({"id": new, "as_of": at}))
        .await;
    assert_eq!(status, 404, "written later");
    let v = api
        .ok("/v1/recent", &root, json!({"as_of": "2026-11-01"}))
        .await;
    assert_eq!(
        ids(&v["items"]),
        vec![new.clone()],
        "a date is the end of that day"
    );
    let v = api.ok("/v1/timeline", &root, json!({"as_of": at})).await;
    assert_eq!(timeline_items(&v).len(), 2);
    let v = api
        .ok(
            "/v1/recall",
            &root,
            json!({"query": "harbor", "min_score": 0, "as_of": at}),
        )
        .await;
    assert_eq!(ids(&v["hits"]).len(), 2, "{v}");

    // The group's token sees its own memory then, and never the owner's.
    for instant in [at.clone(), clock.now().to_rfc3339()] {
        let hits = ids(&api.ok("/v1/search", &g1, q(&instant)).await["hits"]);
        assert!(
            !hits.contains(&old) && !hits.contains(&new),
            "{instant}: {hits:?}"
        );
        let (status, _) = api
            .post("/v1/get", &g1, json!({"id": old, "as_of": instant}))
            .await;
        assert_eq!(status, 404);
        let recent = api.ok("/v1/recent", &g1, json!({"as_of": instant})).await;
        assert!(ids(&recent["items"]).iter().all(|id| *id == group));
    }
    assert_eq!(
        ids(&api.ok("/v1/search", &g1, q(&at)).await["hits"]),
        vec![group.clone()]
    );

    for bad in ["2026-11-02", "2026-11-01T11:00:00Z", "last week"] {
        let (status, v) = api.post("/v1/search", &root, q(bad)).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("INVALID_INPUT")),
            "{bad}: {v}"
        );
    }
    api.hub.flush_accesses(true).expect("flush");
    assert_eq!(api.root.journal_lines(), lines, "as_of reads touch nothing");
}

/// `memd search --as-of` and `memd get --as-of` in process, then
/// `memory_search` and `memory_get` with `as_of` over MCP stdio next to `memd serve`.
#[test]
fn as_of_from_the_cli_and_mcp() {
    use std::io::{BufRead, BufReader, Write};
    let root = TempRoot::new();
    let id = root.memd_json(&["write", "--text", "the heron nests by the old mill"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let at = Utc::now().to_rfc3339();
    std::thread::sleep(std::time::Duration::from_millis(20));
    root.memd_ok(&["forget", &id]);
    let search = |more: &[&str]| {
        let mut args = vec!["search", "heron", "--mode", "fulltext", "--min-score", "0"];
        args.extend_from_slice(more);
        crate::http_support::ids(&root.memd_json(&args)["hits"])
    };
    assert!(search(&[]).is_empty(), "forgotten now");
    assert_eq!(
        search(&["--as-of", &at]),
        vec![id.clone()],
        "not yet forgotten then"
    );
    let got = root.memd_json(&["get", &id, "--as-of", &at]);
    assert_eq!(got["id"], id.as_str());
    assert!(got["as_of"].is_string(), "{got}");

    let token = root.memd_json(&[
        "token",
        "issue",
        "--name",
        "agent",
        "--preset",
        "dsh-desktop",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let served = root.serve();
    let mut mcp = std::process::Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["mcp", "--no-start"])
        .env("MEMD_ROOT", root.path())
        .env("MEMD_TOKEN", &token)
        .env_remove("MEMD_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = mcp.stdin.take().unwrap();
    let call = |n: u32, tool: &str, args: serde_json::Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": tool, "arguments": args}})
        .to_string()
    };
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        call(2, "memory_search", serde_json::json!({"query": "heron", "mode": "fulltext", "min_score": 0, "as_of": at})),
        call(3, "memory_get", serde_json::json!({"id": id, "as_of": at})),
        call(4, "memory_search", serde_json::json!({"query": "heron", "as_of": "not a time"})),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut replies = std::collections::BTreeMap::new();
    for line in BufReader::new(mcp.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(n) = v["id"].as_u64().filter(|n| *n >= 2) {
            replies.insert(n, v["result"].to_string());
            if replies.len() == 3 {
                break;
            }
        }
    }
    drop(stdin);
    let _ = mcp.wait();
    drop(served);
    assert!(
        replies[&2].contains(&id) && replies[&2].contains("as_of"),
        "{}",
        replies[&2]
    );
    assert!(
        replies[&3].contains(&id) && replies[&3].contains("as_of"),
        "{}",
        replies[&3]
    );
    assert!(replies[&4].contains("INVALID_INPUT"), "{}", replies[&4]);
}

/// The `as_of` index directories under `data/tmp/`.
fn cut_dirs(root: &TempRoot) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.path().join("data/tmp")) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("asof-"))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn as_of_indexes_never_pile_up_under_data_tmp() {
    use crate::http_support::Api;
    use serde_json::json;

    let api = Api::new();
    let owner = api.custom_token("owner", &["*", "read", "write"], &["main"]);
    let t0 = Utc::now() - Duration::days(10);
    for day in 0..4 {
        api.set_now(Some(t0 + Duration::days(day)));
        let text = format!("harbor log of day {day}");
        api.ok("/v1/write", &owner, json!({"text": text})).await;
    }
    api.set_now(None);
    // What a crashed process left: one of another process, one of a process
    // that had this process's id (a restarted container's daemon often has).
    let tmp = api.root.path().join("data/tmp");
    let crashed = [
        "asof-1-0".to_string(),
        format!("asof-{}-5", std::process::id()),
    ];
    for left in &crashed {
        std::fs::create_dir_all(tmp.join(left).join("memories")).unwrap();
    }
    // Three instants with different cuts, each read twice.
    for day in [0, 1, 2, 0, 1, 2] {
        let at = (t0 + Duration::days(day) + Duration::hours(1)).to_rfc3339();
        let body = json!({"query": "harbor", "mode": "fulltext", "as_of": at});
        let v = api.ok("/v1/search", &owner, body).await;
        assert_eq!(v["hits"].as_array().unwrap().len() as i64, day + 1, "{v}");
    }
    let left = cut_dirs(&api.root);
    assert!(
        left.len() <= 2 && !crashed.iter().any(|c| left.contains(c)),
        "{left:?}"
    );
}
