//! MCP driven by a client this project did not write: the official Python
//! MCP SDK from PyPI (pinned in `tests/mcp_client/requirements.txt`,
//! installed by `scripts/setup-test-clients.sh`), through
//! `tests/mcp_client/check.py`, against the real binary over stdio
//! (`memd mcp`) and streamable HTTP (`/mcp` of `memd serve`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::http_support::{ids, timeline_items};
use crate::support::{
    DaemonGuard, Served, TempRoot, free_port, serve_command, serve_on_config, setup_script,
};

pub(crate) const MEMD: &str = env!("CARGO_BIN_EXE_memd");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv python with the MCP SDK: `MEMD_MCP_PYTHON`, else whatever
/// `scripts/setup-test-clients.sh` installs (idempotent, cached under $HOME).
fn python() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Some(p) = std::env::var_os("MEMD_MCP_PYTHON") {
            return PathBuf::from(p);
        }
        let setup = setup_script("setup-test-clients.sh");
        PathBuf::from(setup.get("python").expect("a python=<path> line"))
    })
}

/// A `check.py` run, not yet waited for.
fn spawn_check(args: &[&str]) -> Child {
    Command::new(python())
        .arg(repo().join("tests/mcp_client/check.py"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start check.py")
}

/// The JSON report of a finished `check.py`.
fn report(out: Output) -> (Value, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("check.py printed no JSON ({e}): {stdout}\nstderr: {stderr}"));
    assert!(
        v.get("fatal").is_none(),
        "check.py failed: {}\nstderr: {stderr}",
        v["fatal"]
    );
    (v, stderr)
}

pub(crate) fn check(args: &[&str]) -> Value {
    report(spawn_check(args).wait_with_output().unwrap()).0
}

/// `check.py` arguments for a session over stdio (`memd mcp` on
/// `root_dir`) as `token`, then `more`.
fn stdio<'a>(root_dir: &'a str, token: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--transport",
        "stdio",
        "--memd",
        MEMD,
        "--root",
        root_dir,
        "--token",
        token,
    ];
    args.extend_from_slice(more);
    args
}

/// `check.py` arguments for a session over streamable HTTP at `url` as
/// `token`, then `more`.
fn http<'a>(url: &'a str, token: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--transport", "http", "--url", url, "--token", token];
    args.extend_from_slice(more);
    args
}

/// One stdio session of the `calls` scenario as `token`: each step is a
/// tool call (`memory_write={…}`), a resource read or `kill-daemon`;
/// the report with a reply per step.
pub(crate) fn stdio_calls(root: &TempRoot, token: &str, steps: &[&str]) -> Value {
    let root_dir = root.path().to_str().unwrap();
    let mut args = stdio(root_dir, token, &["--scenario", "calls"]);
    for step in steps {
        args.extend(["--extra", step]);
    }
    check(&args)
}

/// A root whose config makes the daemon listen on its own free port.
pub(crate) fn root_with_port() -> (TempRoot, u16) {
    let root = TempRoot::new();
    root.write_doc(
        "user/identity.md",
        "---\ntitle: Identity\n---\n\nThe owner is Lin, a botanist who answers in short sentences.\n",
    );
    let port = free_port();
    root.write_config(json!({"listen": format!("127.0.0.1:{port}")}));
    (root, port)
}

/// A root whose config makes the daemon listen on its own free port, the
/// guard that stops whichever daemon a stdio session starts there, and a
/// `dsh-desktop` token named `name`.
pub(crate) fn stdio_root(name: &str) -> (TempRoot, DaemonGuard, String) {
    let (root, _port) = root_with_port();
    let guard = DaemonGuard(root.path().to_path_buf());
    let token = root.cli_token(name, "dsh-desktop");
    (root, guard, token)
}

/// The status of a raw `POST /mcp` with these header lines.
fn mcp_status(addr: &str, headers: &str, body: &str) -> u16 {
    crate::wire::exchange(addr, "POST", "/mcp", headers, body).status
}

const TOOLS: &[&str] = &[
    "memory_bootstrap",
    "memory_call",
    "memory_category",
    "memory_forget",
    "memory_get",
    "memory_profile",
    "memory_recall",
    "memory_recent",
    "memory_restore",
    "memory_scenes",
    "memory_search",
    "memory_tag",
    "memory_timeline",
    "memory_write",
];

/// What every transport must do for a root token (see `check.py basic`).
fn assert_basic(r: &Value, marker: &str) {
    assert_eq!(r["server_name"], "memory-hub");
    let instructions = r["instructions"].as_str().unwrap();
    for word in [
        "memory_bootstrap",
        "memory_search",
        "memory_write",
        "memory_forget",
    ] {
        assert!(instructions.contains(word), "instructions lack {word}");
    }
    assert_eq!(r["tools"], json!(TOOLS));
    assert_eq!(r["tools_described"], true);
    let privacy = r["write_schema"]["$defs"]["PrivacyArg"].to_string();
    for p in [
        "normal",
        "personal",
        "sensitive",
        "secret",
        "work",
        "financial",
    ] {
        assert!(privacy.contains(p), "privacy enum lacks {p}: {privacy}");
    }
    for field in ["supersedes", "idempotency_key", "source", "tags"] {
        assert!(
            r["write_schema"]["properties"].get(field).is_some(),
            "memory_write lacks {field}"
        );
    }

    assert_eq!(r["write"]["is_error"], false, "{}", r["write"]);
    let id = r["write"]["json"]["id"].as_str().unwrap();
    assert!(id.starts_with("fact-main-"), "{id}");
    assert_eq!(ids(&r["search"]["json"]["hits"]), vec![id]);
    let inject = r["inject"].as_str().unwrap();
    assert!(inject.contains(marker) && inject.contains(id), "{inject}");

    // Retries with one idempotency key give one memory; supersede links show in the timeline.
    let idem = &r["idempotent"];
    assert_eq!(idem[0]["json"]["id"], idem[1]["json"]["id"], "{idem}");
    let kayak = idem[0]["json"]["id"].as_str().unwrap();
    let blue = r["supersede"]["json"]["id"].as_str().unwrap();
    let items = timeline_items(&r["timeline"]["json"]);
    let old = items
        .iter()
        .find(|i| i["id"] == kayak)
        .expect("kayak in timeline");
    assert_eq!(old["superseded_by"], json!([blue]), "{old}");
    let block = r["recall"]["json"]["block"].as_str().unwrap_or_default();
    assert!(block.contains("kayak"), "recall block: {}", r["recall"]);
    assert_eq!(r["recent"]["json"]["items"][0]["id"], blue);

    // The payload starts with who the user is and respects its budget.
    assert!(
        inject.find("botanist") < inject.find("coding-standards"),
        "identity first: {inject}"
    );
    let small = r["inject_small"].as_str().unwrap();
    assert!(
        small.chars().count() <= 300 && small.contains("truncated"),
        "{small}"
    );

    // Categories: a T0 document, listed, injected, then deleted.
    assert_eq!(
        r["category_set"]["is_error"], false,
        "{}",
        r["category_set"]
    );
    assert_eq!(r["category_set"]["json"]["slot"], "coding-requirements");
    let names = |v: &Value| -> Vec<String> {
        v["categories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&r["category_list"]["json"]), vec!["coding-standards"]);
    assert_eq!(names(&r["category_resource"]), vec!["coding-standards"]);
    assert!(
        inject.contains(&format!("{marker}-rule")) && inject.contains("coding-standards"),
        "{inject}"
    );
    assert!(
        inject.find("coding-standards") < inject.find(id),
        "categories come before recent memories: {inject}"
    );
    assert!(
        r["category_bad_slot"]["text"]
            .as_str()
            .unwrap()
            .starts_with("INVALID_INPUT")
    );
    assert_eq!(r["category_delete"]["json"]["ok"], true);
    assert!(
        r["category_gone"]["text"]
            .as_str()
            .unwrap()
            .starts_with("NOT_FOUND")
    );

    assert_eq!(
        r["resources"],
        json!([
            "category://list",
            "collection://list",
            "health://status",
            "memory://inject",
            "memory://list"
        ])
    );
    assert_eq!(
        r["templates"],
        json!(["category://{name}", "collection://{scene}", "memory://{id}"])
    );
    // `degraded` when this test machine's daemon runs without the model.
    assert!(
        ["ok", "degraded"].contains(&r["health"]["status"].as_str().unwrap()),
        "{}",
        r["health"]
    );
    assert!(r["health"]["components"]["journal"]["status"].is_string());

    for (step, code) in [
        ("bad_empty_text", "INVALID_INPUT"),
        ("bad_type", "INVALID_INPUT"),
        ("bad_privacy", "INVALID_INPUT"),
        ("credential", "INVALID_INPUT"),
        ("call_unknown", "INVALID_INPUT"),
        ("missing", "NOT_FOUND"),
    ] {
        assert_eq!(r[step]["is_error"], true, "{step}: {}", r[step]);
        let text = r[step]["text"].as_str().unwrap();
        assert!(text.starts_with(&format!("{code}: ")), "{step}: {text}");
    }
    assert_eq!(r["bootstrap"]["is_error"], false);
    assert_eq!(r["bootstrap"]["json"]["scene"], "main");
    assert_eq!(
        r["call_capabilities"]["json"]["token"]["scenes"],
        json!(["main"])
    );

    // Tags: the fact keeps its id; a new journal line carries the new tag set.
    assert_eq!(r["tag"]["is_error"], false, "{}", r["tag"]);
    assert_eq!(r["tag"]["json"]["tags"], json!(["alps"]));
    assert_eq!(r["tag"]["json"]["id"], id);
    assert_eq!(r["resource_memory"]["id"], id);
    assert_eq!(r["resource_memory"]["tags"], json!(["alps"]));
    assert_eq!(r["forget"]["json"]["forgotten"], true);
    let after = ids(&r["search_after_forget"]["json"]["hits"]);
    assert!(!after.iter().any(|a| a == id), "{after:?}");
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn stdio_with_the_python_sdk_starts_the_daemon() {
    let (root, _daemon, token) = stdio_root("dsh");
    let root_dir = root.path().to_str().unwrap();
    // The first session starts the daemon; the legacy-handshake one finds it running.
    for mode in ["auto", "legacy"] {
        let marker = format!("zebrafinch{mode}");
        let r = check(&stdio(
            root_dir,
            &token,
            &["--mode", mode, "--marker", &marker],
        ));
        assert_basic(&r, &marker);
    }
    // The stdio process did not open the root: the daemon it started did.
    let pid = std::fs::read_to_string(root.path().join(".memd.lock")).unwrap();
    assert!(!pid.trim().is_empty());
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn streamable_http_with_the_python_sdk() {
    let (root, _port) = root_with_port();
    let token = root.cli_token("dsh", "dsh-desktop");
    let served = Served::start(&mut serve_command(root.path()));
    let addr = &served.addr;
    let url = format!("http://{addr}/mcp");
    // Modern (stateless 2026-07-28) and legacy (initialize + session) clients.
    for mode in ["auto", "legacy"] {
        let marker = format!("quokka{mode}");
        let r = check(&http(&url, &token, &["--mode", mode, "--marker", &marker]));
        assert_basic(&r, &marker);
        if mode == "legacy" {
            assert_eq!(r["protocol_version"], "2025-11-25");
        }
    }
    // The bearer check sits in front of the MCP layer.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let headers =
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
    assert_eq!(mcp_status(addr, headers, init), 401);
    let bad = format!("{headers}Authorization: Bearer mh_not_a_token\r\n");
    assert_eq!(mcp_status(addr, &bad, init), 401);
    let ok = format!("{headers}Authorization: Bearer {token}\r\n");
    assert_eq!(mcp_status(addr, &ok, init), 200);
}

/// A group token sees and does over MCP exactly what it may over `/v1`.
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn both_transports_keep_the_token_rights() {
    let (root, _port) = root_with_port();
    let owner = root.cli_token("dsh", "dsh-desktop");
    let group = root.cli_token("group", "qq-group-42");
    let served = Served::start(&mut serve_on_config(root.path()));
    let _others = DaemonGuard(root.path().to_path_buf());
    let url = format!("http://{}/mcp", served.addr);
    let root_dir = root.path().to_str().unwrap();

    let seeded = check(&http(
        &url,
        &owner,
        &[
            "--scenario",
            "calls",
            "--extra",
            r#"memory_write={"text":"owner platypus diary entry","privacy":"personal"}"#,
        ],
    ));
    let owner_id = seeded["calls"][0]["json"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let steps = [
        r#"memory_search={"query":"platypus","mode":"fulltext"}"#.to_string(),
        format!(r#"memory_get={{"id":"{owner_id}"}}"#),
        r#"memory_write={"text":"group platypus","scene":"main"}"#.to_string(),
        r#"memory_write={"text":"group platypus secret","privacy":"secret"}"#.to_string(),
        format!(r#"memory_forget={{"id":"{owner_id}"}}"#),
        r#"memory_write={"text":"group platypus plan","source":"sleep"}"#.to_string(),
        r#"memory_call={"route":"GET /v1/tokens"}"#.to_string(),
        format!("resource:memory://{owner_id}"),
        r#"memory_write={"text":"group platypus picnic on sunday"}"#.to_string(),
        r#"memory_search={"query":"platypus","mode":"fulltext"}"#.to_string(),
    ];
    let calls: Vec<&str> = ["--scenario", "calls"]
        .into_iter()
        .chain(steps.iter().flat_map(|s| ["--extra", s.as_str()]))
        .collect();
    let over_stdio = stdio(root_dir, &group, &calls);
    let over_http = http(&url, &group, &calls);
    for (name, args) in [("stdio", over_stdio), ("http", over_http)] {
        let r = check(&args);
        let calls = r["calls"].as_array().unwrap();
        let code = |i: usize| {
            let c = &calls[i];
            assert_eq!(c["is_error"], true, "{name} step {i}: {c}");
            c["text"]
                .as_str()
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_string()
        };
        // The owner's memory never shows up, whatever the group wrote before.
        let first = calls[0]["json"]["hits"].as_array().unwrap();
        assert!(
            first.iter().all(|h| h["scene"] == "qq:group:42"),
            "{name}: {first:?}"
        );
        assert_eq!(code(1), "NOT_FOUND", "{name}");
        assert_eq!(code(2), "FORBIDDEN", "{name}");
        assert_eq!(code(3), "FORBIDDEN", "{name}");
        assert_eq!(code(4), "NOT_FOUND", "{name}");
        assert_eq!(code(5), "FORBIDDEN", "{name}");
        assert_eq!(code(6), "FORBIDDEN", "{name}");
        assert!(
            calls[7]["text"].as_str().unwrap().contains("NOT_FOUND"),
            "{name}: {}",
            calls[7]
        );
        assert_eq!(calls[8]["is_error"], false, "{name}: {}", calls[8]);
        let hits = calls[9]["json"]["hits"].as_array().unwrap();
        assert!(
            hits.iter().all(|h| h["scene"] == "qq:group:42"),
            "{name}: {hits:?}"
        );
        assert!(!hits.is_empty(), "{name}");
    }
    // Every MCP call was audited under the group token's name, never its secret.
    let audit = std::fs::read_to_string(root.path().join("data/audit.jsonl")).unwrap();
    assert!(audit.contains("\"group\"") && !audit.contains(&group));
}

fn assert_writes(outputs: Vec<Output>, per_session: usize) -> Vec<String> {
    let mut all = Vec::new();
    for out in outputs {
        let (r, stderr) = report(out);
        assert_eq!(r["errors"], json!([]), "{stderr}");
        assert!(
            !stderr.contains("ROOT_LOCKED") && !stderr.contains("writer lock"),
            "lock trouble: {stderr}"
        );
        let ids = r["ids"].as_array().unwrap();
        assert_eq!(ids.len(), per_session);
        all.extend(ids.iter().map(|i| i.as_str().unwrap().to_string()));
    }
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), all.len(), "duplicate ids");
    all
}

fn three_writers(root: &TempRoot, token: &str, per_session: usize) -> Vec<Output> {
    let count = per_session.to_string();
    let root_dir = root.path().to_str().unwrap();
    let children: Vec<Child> = (0..3)
        .map(|i| {
            let label = format!("agent{i}");
            spawn_check(&stdio(
                root_dir,
                token,
                &[
                    "--scenario",
                    "writes",
                    "--marker",
                    "wombat",
                    "--label",
                    &label,
                    "--count",
                    &count,
                ],
            ))
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn three_stdio_sessions_write_at_once_next_to_serve() {
    let (root, _port) = root_with_port();
    let token = root.cli_token("dsh", "dsh-desktop");
    let served = Served::start(&mut serve_on_config(root.path()));
    let _others = DaemonGuard(root.path().to_path_buf());
    let ids = assert_writes(three_writers(&root, &token, 15), 15);
    assert_eq!(ids.len(), 45);
    // The notes differ only in their number, so they are also linked as
    // likely contradicting each other (`link` lines): count the memories.
    let journal: Vec<String> = root
        .journal_lines()
        .into_iter()
        .filter(|l| l.contains(r#""op":"put""#))
        .collect();
    assert_eq!(journal.len(), 45, "one journal line per acknowledged write");
    for id in &ids {
        assert_eq!(
            journal.iter().filter(|l| l.contains(id.as_str())).count(),
            1
        );
    }
    let (_, body) = crate::wire::get(&served.addr, "/v1/health", &token);
    // Counts are shown to admin tokens only.
    assert_eq!(body["facts"], 45);
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn three_stdio_sessions_without_a_daemon_start_exactly_one() {
    let (root, _daemon, token) = stdio_root("dsh");
    let ids = assert_writes(three_writers(&root, &token, 10), 10);
    let puts = root
        .journal_lines()
        .iter()
        .filter(|l| l.contains(r#""op":"put""#))
        .count();
    assert_eq!(puts, ids.len());
    // Only one `memd serve` was started: no other one ran into the writer lock.
    let log = std::fs::read_to_string(root.path().join("data/serve.log")).unwrap_or_default();
    assert!(!log.contains("ROOT_LOCKED"), "{log}");
}

/// A daemon killed mid-session is started again by the next tool call, and
/// what was acknowledged before the crash is still there.
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn stdio_session_survives_a_daemon_crash() {
    let (root, _daemon, token) = stdio_root("dsh");
    let r = stdio_calls(
        &root,
        &token,
        &[
            r#"memory_write={"text":"before the crash: narwhal"}"#,
            "kill-daemon",
            r#"memory_write={"text":"after the crash: narwhal"}"#,
            r#"memory_search={"query":"narwhal","mode":"fulltext"}"#,
        ],
    );
    let calls = r["calls"].as_array().unwrap();
    let log = std::fs::read_to_string(root.path().join("data/serve.log")).unwrap_or_default();
    for c in calls {
        assert_eq!(c["is_error"], false, "{c}\nserve.log:\n{log}");
    }
    assert_eq!(calls[3]["json"]["hits"].as_array().unwrap().len(), 2);
    assert_eq!(root.journal_lines().len(), 2);
    let pid = std::fs::read_to_string(root.path().join(".memd.lock")).unwrap();
    assert_ne!(
        pid.trim(),
        calls[1]["pid"].to_string(),
        "a new daemon holds the root"
    );
}
