//! One request, one rule set: the same memories written through HTTP, MCP
//! and the CLI are stored as the same records.
//!
//! Each surface gets its own root and runs the same steps: a long-term write
//! with every field set (and its retry with the same idempotency key), a
//! second write, a short-term write (the short-stage TTL used to be a rule of
//! the HTTP handler only), an ingest, a supersede of the first write that
//! sets only the text (the new version inherits every other field, checked
//! field by field), a forget of the second, a forget of the new version and
//! its undo, and a restore of the first version while the new one is live
//! (a new version with the old content). A second supersede of the first
//! write is refused on every surface with the same `CONFLICT` naming the
//! newest version. HTTP is the in-process `/v1` router with a token
//! that holds `*` (the owner's own agent); MCP is the official Python SDK
//! over stdio (`memd mcp`, which sends `/v1` requests to the daemon it
//! starts) with the same preset; the CLI is the real binary, which acts as
//! the local operator (every scope and scene, token name `cli`).
//!
//! The journal records are then compared field by field. What may differ,
//! and why ([`LEGITIMATE`]):
//!
//! - `id`, `ts`, `at`, `device`, `crc`: drawn at random, or the instant and the
//!   root each surface wrote in (and the line checksum over them).
//! - `expires_at` of a short-term memory: now + TTL, so it is compared as
//!   its distance from `ts`.
//! - `supersedes`: names the replaced memory's id in the same root, so it is
//!   compared through the mapping of ids.
//! - `source` of a write: the CLI names itself (`cli`), as a caller with `*`
//!   may; a token that names no source gets the scene's (`main`). The
//!   CLI's `source` is the only field HTTP and MCP do not share with it.
//! - `idempotency_key`: namespaced by the caller's token name
//!   (`w|<token>|<scene>|<key>`), so one caller never answers for another;
//!   compared without the token name.
//! - `source` of a forget: the caller's token name.
//!
//! HTTP and MCP run as the same token preset and must agree on everything
//! else, `source` included; the pin rule ("a pet token may not pin") gives
//! them the same refusal.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::http_support::Api;
use crate::mcp::{stdio_calls, stdio_root};
use crate::support::{INHERITED, TempRoot};

/// Fields that differ between surfaces by design (see the module docs).
const LEGITIMATE: &[&str] = &["id", "ts", "at", "device", "crc"];

/// The steps every surface runs, as `/v1` requests. `{A}` and `{B}` stand
/// for the ids the first and second writes got in that root.
fn first_steps() -> Vec<(&'static str, Value)> {
    let tea = json!({
        "text": "Lin prefers green tea in the morning",
        "kind": "preference",
        "title": "Morning tea",
        "tags": ["drink", "morning"],
        "privacy": "personal",
        "importance": 0.7,
        "idempotency_key": "tea-1",
        "time": "2026-05-08",
        "session": "breakfast",
        "speaker": "Lin",
    });
    vec![
        ("write", tea.clone()),
        // A retry with the same key is the same memory.
        ("write", tea),
        (
            "write",
            json!({"text": "the spare key is under the blue flowerpot", "kind": "fact", "tier": "t1"}),
        ),
        (
            "write",
            json!({"text": "the plumber comes back on Thursday", "stage": "short"}),
        ),
        (
            "ingest",
            json!({
                "message_id": "m-1",
                "text": "shall we go hiking on Saturday?",
                "sender": {"id": "u-7", "name": "Wang"},
                "ttl_hours": 24,
                "session": "weekend",
            }),
        ),
    ]
}

fn second_steps(a: &str, b: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "write",
            json!({
                "text": "Lin now prefers black coffee in the morning",
                "supersedes": a,
            }),
        ),
        ("forget", json!({"id": b, "reason": "the key moved"})),
    ]
}

/// `{A}` and `{A2}`: the first write and its new version.
fn third_steps(a: &str, a2: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("forget", json!({"id": a2, "reason": "wrong"})),
        ("restore", json!({"id": a2})),
        ("restore", json!({"id": a})),
    ]
}

/// The refusal of a second supersede of `{A}` once `{A3}` is the newest.
fn conflict_message(a: &str, newest: &str) -> String {
    format!("{a} is an older version; the newest version is {newest}: supersede {newest} instead")
}

/// The id in a reply to a step.
fn id_of(reply: &Value) -> String {
    reply["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {reply}"))
        .to_string()
}

/// Runs `steps` over HTTP with `token`; returns the replies.
async fn over_http(api: &Api, token: &str, steps: Vec<(&str, Value)>) -> Vec<Value> {
    let mut out = Vec::new();
    for (route, body) in steps {
        out.push(api.ok(&format!("/v1/{route}"), token, body).await);
    }
    out
}

/// Runs `steps` through MCP tools in one stdio session; returns the replies.
fn over_mcp(root: &TempRoot, token: &str, steps: Vec<(&str, Value)>) -> Vec<Value> {
    let calls: Vec<String> = steps
        .into_iter()
        .map(|(route, body)| match route {
            "write" => format!("memory_write={body}"),
            "forget" => format!("memory_forget={body}"),
            "restore" => format!("memory_restore={body}"),
            other => format!(
                "memory_call={}",
                json!({"route": format!("POST /v1/{other}"), "body": body})
            ),
        })
        .collect();
    let calls: Vec<&str> = calls.iter().map(String::as_str).collect();
    let report = stdio_calls(root, token, &calls);
    report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["is_error"], false, "{c}");
            c["json"].clone()
        })
        .collect()
}

/// The CLI arguments of a step (the same request, as flags).
fn cli_args(route: &str, body: &Value) -> Vec<String> {
    let mut args = vec![route.to_string()];
    let flag = |name: &str| format!("--{}", name.replace('_', "-"));
    for (key, value) in body.as_object().unwrap() {
        match (route, key.as_str(), value) {
            ("forget" | "restore", "id", Value::String(id)) => args.push(id.clone()),
            ("ingest", "sender", v) => {
                args.extend(["--sender-id".into(), v["id"].as_str().unwrap().into()]);
                args.extend(["--sender-name".into(), v["name"].as_str().unwrap().into()]);
            }
            (_, _, Value::Array(items)) => {
                let list: Vec<&str> = items.iter().map(|i| i.as_str().unwrap()).collect();
                args.extend([flag(key), list.join(",")]);
            }
            (_, _, Value::String(s)) => args.extend([flag(key), s.clone()]),
            (_, _, other) => args.extend([flag(key), other.to_string()]),
        }
    }
    if route == "write" {
        // `memd write` names its scene (the HTTP token's default is `main`).
        args.extend(["--scene".into(), "main".into()]);
    }
    args
}

/// Runs `steps` with the real binary; returns the replies.
fn over_cli(root: &TempRoot, steps: Vec<(&str, Value)>) -> Vec<Value> {
    steps
        .into_iter()
        .map(|(route, body)| {
            let args = cli_args(route, &body);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            root.memd_json(&args)
        })
        .collect()
}

/// The put and forget records of a root's journal, in order.
fn records(root: &TempRoot) -> Vec<Value> {
    root.journal_lines()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["op"] == "put" || r["op"] == "forget")
        .collect()
}

/// A record as it must be equal across surfaces: the legitimate differences
/// removed or put in a comparable form (see the module docs). `ids` maps
/// this root's ids to step names.
fn comparable(record: &Value, ids: &BTreeMap<String, &str>, with_source: bool) -> Value {
    let mut r = record.clone();
    let obj = r.as_object_mut().unwrap();
    if let (Some(ts), Some(exp)) = (
        record["ts"].as_str(),
        record.get("expires_at").and_then(Value::as_str),
    ) {
        let ts = chrono::DateTime::parse_from_rfc3339(ts).unwrap();
        let exp = chrono::DateTime::parse_from_rfc3339(exp).unwrap();
        // Now + TTL: the hours are the rule, the instant is not.
        let hours = ((exp - ts).num_seconds() as f64 / 3600.0).round();
        obj.insert("expires_at".into(), json!(format!("ts + {hours} h")));
    }
    for key in ["supersedes"] {
        if let Some(Value::String(id)) = obj.get(key) {
            let name = ids.get(id).copied().unwrap_or("unknown id");
            obj.insert(key.into(), json!(name));
        }
    }
    if record["op"] == "forget" {
        let name = ids.get(record["id"].as_str().unwrap()).copied();
        obj.insert("forgot".into(), json!(name));
    }
    if let Some(Value::String(key)) = obj.get("idempotency_key")
        && let Some(rest) = key.strip_prefix("w|")
    {
        let without_caller = rest.split_once('|').map_or(rest, |(_, r)| r).to_string();
        obj.insert("idempotency_key".into(), json!(without_caller));
    }
    if !with_source && record["op"] == "put" && record["origin_step"] != "ingest" {
        obj.remove("source");
    }
    if record["op"] == "forget" {
        obj.remove("source");
    }
    for key in LEGITIMATE {
        obj.remove(*key);
    }
    r
}

/// Names the records of one root by the step that wrote them.
fn named(records: &[Value], replies: &[Value]) -> (Vec<Value>, BTreeMap<String, &'static str>) {
    let names = [
        "A",
        "A again",
        "B",
        "short",
        "chat",
        "A2",
        "forget B",
        "forget A2",
        "restore A2",
        "A3",
    ];
    let mut ids = BTreeMap::new();
    for (reply, name) in replies.iter().zip(names) {
        if let Some(id) = reply["id"].as_str()
            && !ids.contains_key(id)
        {
            ids.insert(id.to_string(), name);
        }
    }
    let mut out = records.to_vec();
    for r in &mut out {
        if let Some(name) = r["id"].as_str().and_then(|id| ids.get(id))
            && r["op"] == "put"
        {
            r["origin_step"] = json!(if *name == "chat" { "ingest" } else { "write" });
        }
    }
    (out, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mcp_and_cli_store_the_same_records() {
    // HTTP: the in-process router, a `*` token.
    let api = Api::new();
    let agent = api.token("agent", "dsh-desktop");
    let mut http = over_http(&api, &agent, first_steps()).await;
    let (a, b) = (id_of(&http[0]), id_of(&http[2]));
    assert_eq!(id_of(&http[1]), a, "the retry answers with the same id");
    assert_eq!(http[1]["action"], "NOOP");
    http.extend(over_http(&api, &agent, second_steps(&a, &b)).await);
    let a2 = id_of(&http[5]);
    http.extend(over_http(&api, &agent, third_steps(&a, &a2)).await);

    // MCP: the Python SDK over stdio, the same preset.
    let (mcp_root, _daemon, mcp_token) = stdio_root("agent");
    let mut mcp = over_mcp(&mcp_root, &mcp_token, first_steps());
    let (a, b) = (id_of(&mcp[0]), id_of(&mcp[2]));
    assert_eq!(id_of(&mcp[1]), a);
    assert_eq!(mcp[1]["action"], "NOOP");
    mcp.extend(over_mcp(&mcp_root, &mcp_token, second_steps(&a, &b)));
    let a2 = id_of(&mcp[5]);
    mcp.extend(over_mcp(&mcp_root, &mcp_token, third_steps(&a, &a2)));

    // CLI: the real binary, the local operator.
    let cli_root = TempRoot::new();
    let mut cli = over_cli(&cli_root, first_steps());
    let (a, b) = (id_of(&cli[0]), id_of(&cli[2]));
    assert_eq!(id_of(&cli[1]), a);
    assert_eq!(cli[1]["action"], "NOOP");
    cli.extend(over_cli(&cli_root, second_steps(&a, &b)));
    let a2 = id_of(&cli[5]);
    cli.extend(over_cli(&cli_root, third_steps(&a, &a2)));

    let (http_records, http_ids) = named(&records(&api.root), &http);
    let (mcp_records, mcp_ids) = named(&records(&mcp_root), &mcp);
    let (cli_records, cli_ids) = named(&records(&cli_root), &cli);
    // A, B, short, chat, A2, the forget of B, the forget of A2, A2 put
    // again (its undo), A3 (A's content as the newest version); the retry
    // appended nothing.
    for (name, r, replies) in [
        ("http", &http_records, &http),
        ("mcp", &mcp_records, &mcp),
        ("cli", &cli_records, &cli),
    ] {
        assert_eq!(r.len(), 9, "{name}: {r:#?}");
        let actions: Vec<&str> = replies[8..]
            .iter()
            .map(|v| v["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, ["RESTORED", "NEW_VERSION"], "{name}");
    }
    for i in 0..9 {
        let h = comparable(&http_records[i], &http_ids, true);
        let m = comparable(&mcp_records[i], &mcp_ids, true);
        assert_eq!(h, m, "HTTP and MCP store record {i} alike");
        let h = comparable(&http_records[i], &http_ids, false);
        let c = comparable(&cli_records[i], &cli_ids, false);
        assert_eq!(h, c, "HTTP and the CLI store record {i} alike");
    }

    // The rules each record shows, met on every surface.
    let rec = |i: usize| comparable(&cli_records[i], &cli_ids, true);
    assert_eq!(rec(0)["idempotency_key"], "main|tea-1");
    assert_eq!(
        rec(0)["subject"],
        "owner",
        "a `*` caller writes as the owner"
    );
    assert_eq!(
        rec(2)["expires_at"],
        "ts + 24 h",
        "the short-stage TTL (ingest.ttlHours)"
    );
    assert_eq!(
        rec(3)["expires_at"],
        "ts + 24 h",
        "the ingest TTL (ttl_hours)"
    );
    assert_eq!(rec(3)["subject"], "other");
    assert_eq!(rec(3)["source"], "main");
    assert_eq!(rec(4)["supersedes"], "A");
    for field in INHERITED {
        assert_eq!(rec(4)[field], rec(0)[field], "A2 inherits {field}");
        assert!(!rec(0)[field].is_null(), "{field} is set on A");
    }
    assert_ne!(rec(4)["text"], rec(0)["text"]);
    assert_eq!(rec(5)["forgot"], "B");
    assert_eq!(rec(6)["forgot"], "A2");
    assert_eq!(
        rec(7)["text"],
        rec(4)["text"],
        "the undo puts A2 back as it was"
    );
    assert_eq!(
        rec(8)["text"],
        rec(0)["text"],
        "A's content, as the newest version"
    );
    assert_eq!(rec(8)["supersedes"], "A2");
    assert_eq!(cli_records[0]["source"], "cli");
    assert_eq!(http_records[0]["source"], "main");
    assert_eq!(mcp_records[5]["source"], "agent");
    assert_eq!(cli_records[5]["source"], "cli");

    // An older version is refused the same way on every surface, naming
    // the newest version of the line (A3, after the restore).
    let again = |a: &str| json!({"text": "Lin prefers green tea again", "supersedes": a});
    let (ha, ha3) = (id_of(&http[0]), id_of(&http[9]));
    let (status, err) = api.post("/v1/write", &agent, again(&ha)).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "CONFLICT");
    assert_eq!(err["error"]["message"], conflict_message(&ha, &ha3));
    let (ma, ma3) = (id_of(&mcp[0]), id_of(&mcp[9]));
    let refused = stdio_calls(
        &mcp_root,
        &mcp_token,
        &[&format!("memory_write={}", again(&ma))],
    );
    assert_eq!(refused["calls"][0]["is_error"], true, "{refused}");
    assert_eq!(
        refused["calls"][0]["text"],
        format!("CONFLICT: {}", conflict_message(&ma, &ma3))
    );
    let (ca, ca3) = (id_of(&cli[0]), id_of(&cli[9]));
    let out = cli_root.memd(&[
        "--json",
        "write",
        "--text",
        "Lin prefers green tea again",
        "--supersedes",
        &ca,
    ]);
    assert_eq!(out.status.code(), Some(11), "CONFLICT's exit code");
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["error"]["code"], "CONFLICT");
    assert_eq!(envelope["error"]["message"], conflict_message(&ca, &ca3));

    // One refusal, written once in the hub: a pet token may not pin.
    let pet = api.token("pet", "pet");
    let pin = json!({"text": "pinned by the pet", "tier": "t0"});
    let (status, err) = api.post("/v1/write", &pet, pin.clone()).await;
    assert_eq!(status, 403, "{err}");
    let message = err["error"]["message"].as_str().unwrap().to_string();
    let pet_mcp = mcp_root.cli_token("pet", "pet");
    let refused = stdio_calls(&mcp_root, &pet_mcp, &[&format!("memory_write={pin}")]);
    let text = refused["calls"][0]["text"].as_str().unwrap();
    assert_eq!(text, format!("FORBIDDEN: {message}"));
}
