//! MCP driven by a client this project did not write: the official Python
//! MCP SDK from PyPI (pinned in `tests/mcp_client/requirements.txt`,
//! installed by `scripts/setup-test-clients.sh`), through
//! `tests/mcp_client/check.py`, against the real binary over stdio
//! (`memd mcp`) and streamable HTTP (`/mcp` of `memd serve`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TempRoot;

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
        let out = Command::new("bash")
            .arg(repo().join("scripts/setup-test-clients.sh"))
            .output()
            .expect("run scripts/setup-test-clients.sh");
        assert!(
            out.status.success(),
            "scripts/setup-test-clients.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let line = stdout.lines().last().unwrap_or_default();
        PathBuf::from(line.strip_prefix("python=").expect("python=<path> line"))
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

pub(crate) fn issue(root: &TempRoot, name: &str, preset: &str) -> String {
    root.memd_json(&["token", "issue", "--name", name, "--preset", preset])["secret"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A root whose config makes the daemon listen on its own free port.
pub(crate) fn root_with_port() -> (TempRoot, u16) {
    let root = TempRoot::new();
    root.write_doc(
        "user/identity.md",
        "---\ntitle: Identity\n---\n\nThe owner is Lin, a botanist who answers in short sentences.\n",
    );
    let port = free_port();
    std::fs::write(
        root.path().join("config.json"),
        json!({"listen": format!("127.0.0.1:{port}")}).to_string(),
    )
    .unwrap();
    (root, port)
}

/// Stops whichever `memd serve` holds the root's writer lock when dropped
/// (including a daemon that `memd mcp` started), and waits until it is gone.
pub(crate) struct DaemonGuard(pub(crate) PathBuf);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let lock = self.0.join(".memd.lock");
        let Ok(pid) = std::fs::read_to_string(&lock) else {
            return;
        };
        let pid = pid.trim().to_string();
        if pid.is_empty() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10)
            && Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `memd serve` on the root's configured port (or `listen`), waited for.
fn serve(root: &TempRoot, listen: Option<&str>) -> (Child, String, DaemonGuard) {
    let mut cmd = Command::new(MEMD);
    cmd.arg("serve");
    if let Some(l) = listen {
        cmd.args(["--listen", l]);
    }
    let mut child = cmd
        .env("MEMD_ROOT", root.path())
        .env("MEMD_MODELS_DIR", root.path().join("no-models"))
        .env_remove("MEMD_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start memd serve");
    let addr = crate::support::serve_addr(&mut child);
    (child, addr, DaemonGuard(root.path().to_path_buf()))
}

/// A raw HTTP request; returns the status code.
fn status_of(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

const TOOLS: &[&str] = &[
    "memory_bootstrap",
    "memory_call",
    "memory_category",
    "memory_forget",
    "memory_get",
    "memory_recall",
    "memory_recent",
    "memory_restore",
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
    let hits: Vec<&str> = r["search"]["json"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert_eq!(hits, vec![id]);
    let inject = r["inject"].as_str().unwrap();
    assert!(inject.contains(marker) && inject.contains(id), "{inject}");

    // Retries with one idempotency key give one memory; supersede links show in the timeline.
    let idem = &r["idempotent"];
    assert_eq!(idem[0]["json"]["id"], idem[1]["json"]["id"], "{idem}");
    let kayak = idem[0]["json"]["id"].as_str().unwrap();
    let blue = r["supersede"]["json"]["id"].as_str().unwrap();
    let items: Vec<&Value> = r["timeline"]["json"]["months"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["items"].as_array().unwrap())
        .collect();
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
            "memory://inject"
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
    let after: Vec<&str> = r["search_after_forget"]["json"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert!(!after.contains(&id), "{after:?}");
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn stdio_with_the_python_sdk_starts_the_daemon() {
    let (root, _port) = root_with_port();
    let _daemon = DaemonGuard(root.path().to_path_buf());
    let token = issue(&root, "dsh", "dsh-desktop");
    let root_dir = root.path().to_str().unwrap();
    // The first session starts the daemon; the legacy-handshake one finds it running.
    for mode in ["auto", "legacy"] {
        let marker = format!("zebrafinch{mode}");
        let r = check(&[
            "--transport",
            "stdio",
            "--memd",
            MEMD,
            "--root",
            root_dir,
            "--token",
            &token,
            "--mode",
            mode,
            "--marker",
            &marker,
        ]);
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
    let token = issue(&root, "dsh", "dsh-desktop");
    let (_child, addr, _guard) = serve(&root, Some("127.0.0.1:0"));
    let url = format!("http://{addr}/mcp");
    // Modern (stateless 2026-07-28) and legacy (initialize + session) clients.
    for mode in ["auto", "legacy"] {
        let marker = format!("quokka{mode}");
        let r = check(&[
            "--transport",
            "http",
            "--url",
            &url,
            "--token",
            &token,
            "--mode",
            mode,
            "--marker",
            &marker,
        ]);
        assert_basic(&r, &marker);
        if mode == "legacy" {
            assert_eq!(r["protocol_version"], "2025-11-25");
        }
    }
    // The bearer check sits in front of the MCP layer.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let headers =
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
    assert_eq!(status_of(&addr, "POST", "/mcp", headers, init), 401);
    let bad = format!("{headers}Authorization: Bearer mh_not_a_token\r\n");
    assert_eq!(status_of(&addr, "POST", "/mcp", &bad, init), 401);
    let ok = format!("{headers}Authorization: Bearer {token}\r\n");
    assert_eq!(status_of(&addr, "POST", "/mcp", &ok, init), 200);
}

/// A group token sees and does over MCP exactly what it may over `/v1`.
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn both_transports_keep_the_token_rights() {
    let (root, _port) = root_with_port();
    let owner = issue(&root, "dsh", "dsh-desktop");
    let group = issue(&root, "group", "qq-group-42");
    let (_child, addr, _guard) = serve(&root, None);
    let url = format!("http://{addr}/mcp");
    let root_dir = root.path().to_str().unwrap();

    let seeded = check(&[
        "--transport",
        "http",
        "--url",
        &url,
        "--token",
        &owner,
        "--scenario",
        "calls",
        "--extra",
        r#"memory_write={"text":"owner platypus diary entry","privacy":"personal"}"#,
    ]);
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
    let common: Vec<&str> = steps.iter().flat_map(|s| ["--extra", s.as_str()]).collect();
    let stdio: Vec<&str> = [
        "--transport",
        "stdio",
        "--memd",
        MEMD,
        "--root",
        root_dir,
        "--token",
        &group,
        "--scenario",
        "calls",
    ]
    .into_iter()
    .chain(common.iter().copied())
    .collect();
    let http: Vec<&str> = [
        "--transport",
        "http",
        "--url",
        &url,
        "--token",
        &group,
        "--scenario",
        "calls",
    ]
    .into_iter()
    .chain(common.iter().copied())
    .collect();
    for (name, args) in [("stdio", stdio), ("http", http)] {
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
            spawn_check(&[
                "--transport",
                "stdio",
                "--memd",
                MEMD,
                "--root",
                root_dir,
                "--token",
                token,
                "--scenario",
                "writes",
                "--marker",
                "wombat",
                "--label",
                &format!("agent{i}"),
                "--count",
                &count,
            ])
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
    let token = issue(&root, "dsh", "dsh-desktop");
    let (_child, addr, _guard) = serve(&root, None);
    let ids = assert_writes(three_writers(&root, &token, 15), 15);
    assert_eq!(ids.len(), 45);
    let journal = root.journal_lines();
    assert_eq!(journal.len(), 45, "one journal line per acknowledged write");
    for id in &ids {
        assert_eq!(
            journal.iter().filter(|l| l.contains(id.as_str())).count(),
            1
        );
    }
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /v1/health HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let body: Value = serde_json::from_str(raw.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    // Counts are shown to admin tokens only.
    assert_eq!(body["facts"], 45);
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the Python MCP SDK (scripts/setup-test-clients.sh)"
)]
#[test]
fn three_stdio_sessions_without_a_daemon_start_exactly_one() {
    let (root, _port) = root_with_port();
    let _daemon = DaemonGuard(root.path().to_path_buf());
    let token = issue(&root, "dsh", "dsh-desktop");
    let ids = assert_writes(three_writers(&root, &token, 10), 10);
    assert_eq!(root.journal_lines().len(), ids.len());
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
    let (root, _port) = root_with_port();
    let _daemon = DaemonGuard(root.path().to_path_buf());
    let token = issue(&root, "dsh", "dsh-desktop");
    let r = check(&[
        "--transport",
        "stdio",
        "--memd",
        MEMD,
        "--root",
        root.path().to_str().unwrap(),
        "--token",
        &token,
        "--scenario",
        "calls",
        "--extra",
        r#"memory_write={"text":"before the crash: narwhal"}"#,
        "--extra",
        "kill-daemon",
        "--extra",
        r#"memory_write={"text":"after the crash: narwhal"}"#,
        "--extra",
        r#"memory_search={"query":"narwhal","mode":"fulltext"}"#,
    ]);
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
