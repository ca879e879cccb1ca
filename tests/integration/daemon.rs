//! One CLI whether or not the daemon runs, and a root that never lands in a
//! git working tree by accident: what a new user meets in the first hour.
//!
//! - `memd write` next to a running `memd serve` succeeds (it used to answer
//!   `ROOT_LOCKED`, exit 5), through the daemon as the local operator.
//! - `memd health` and `memd doctor` find a daemon on any `--listen` port
//!   (health used to exit 9 "not reachable" while doctor reported the lock
//!   held by that very daemon).
//! - Every command that goes through the daemon prints the same output and
//!   exits with the same code as in process.
//! - `memd reindex` next to a daemon rebuilds in the daemon, the only writer.
//! - The default root is the platform's data directory, and a root in the
//!   checkout leaves `git status` clean.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{Served, TempRoot, serve_command};
use crate::wire::call;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}\n{}",
        out.status.code(),
        text(&out.stderr),
        text(&out.stdout)
    );
    text(&out.stdout)
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("stdout is one JSON document")
}

/// The audit lines the daemon wrote for `route`.
fn audited(root: &TempRoot, route: &str) -> Vec<Value> {
    std::fs::read_to_string(root.path().join("data/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["route"] == route)
        .collect()
}

#[test]
fn memd_write_next_to_a_running_daemon_succeeds() {
    let root = TempRoot::new();
    let served = root.serve();
    let out = root.memd(&[
        "write",
        "--scene",
        "main",
        "--text",
        "The team standup moved to 10:00",
        "--kind",
        "event",
        "--tags",
        "work",
    ]);
    let id = ok(&out).trim().to_string();
    assert!(id.starts_with("fact-main-"), "{id}");
    // It went through the daemon, as the local operator, and the daemon
    // stayed the root's only writer.
    let writes = audited(&root, "POST /v1/write");
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(
        (writes[0]["token"].as_str(), writes[0]["status"].as_u64()),
        (Some("cli"), Some(200))
    );
    let lock = std::fs::read_to_string(root.path().join(".memd.lock")).unwrap();
    assert_eq!(lock.trim(), served.child.id().to_string());
    let lines = root.journal_lines();
    assert_eq!(lines.len(), 1);
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(
        (line["id"].as_str(), line["source"].as_str()),
        (Some(id.as_str()), Some("cli"))
    );
    // The README's next commands work too.
    let hits = json_of(&root.memd(&["search", "standup", "--json"]));
    assert_eq!(hits["hits"][0]["id"], id.as_str());
    assert!(ok(&root.memd(&["get", &id])).contains("The team standup moved to 10:00"));
    assert_eq!(
        ok(&root.memd(&["forget", &id, "--reason", "cancelled"])).trim(),
        format!("forgot {id}")
    );
    ok(&root.memd(&["stats"]));
    // A clean stop removes the address file; the CLI then opens the root itself.
    assert!(served.stop().success());
    assert!(!root.path().join(".memd.addr").exists());
    ok(&root.memd(&[
        "write",
        "--scene",
        "main",
        "--text",
        "after the daemon stopped",
    ]));
    assert_eq!(root.journal_lines().len(), 3);
}

#[test]
fn health_and_doctor_find_a_daemon_on_any_listen_port() {
    let root = TempRoot::new();
    // No model here: doctor is ready without one when the embedder is off.
    root.write_config(json!({"embedder": {"enabled": false}}));
    // config `listen` stays 127.0.0.1:8787; the daemon listens elsewhere.
    let served = root.serve();
    assert!(!served.addr.ends_with(":8787"));
    let health = json_of(&root.memd(&["health", "--json"]));
    assert_eq!(health["writer"], true);
    assert!(
        health["counts"].is_object() && health["jobs"].is_object(),
        "{health}"
    );
    let doctor = json_of(&root.memd(&["doctor", "--json"]));
    let check = |name: &str| {
        doctor["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check in {doctor}"))
    };
    let pid = served.child.id().to_string();
    assert_eq!(check("daemon")["status"], "ok");
    let detail = check("daemon")["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains(&served.addr) && detail.contains(&pid),
        "{detail}"
    );
    let lock = check("writer_lock")["detail"].as_str().unwrap().to_string();
    assert!(lock.contains(&served.addr), "{lock}");
    // An explicit address is asked too (the root's own daemon comes first).
    let given = json_of(&root.memd(&["health", "--addr", "127.0.0.1:9", "--json"]));
    assert!(given["counts"].is_object());
    drop(served);

    // No daemon: health reads the root itself; doctor says none runs.
    let health = json_of(&root.memd(&["health", "--json"]));
    assert!(health["counts"].is_object(), "{health}");
    let doctor = json_of(&root.memd(&["doctor", "--json"]));
    let daemon = crate::support::doctor_check(&doctor, "daemon").clone();
    assert_eq!(daemon["status"], "warn");
    assert!(
        daemon["detail"]
            .as_str()
            .unwrap()
            .contains("no memd serve runs")
    );
    // An address given explicitly is asked, and says why it cannot be reached.
    let out = root.memd(&["health", "--addr", "127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(9), "{}", text(&out.stderr));
}

/// One command's result, as a user sees it.
#[derive(Debug, PartialEq)]
struct Seen {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn seen(root: &TempRoot, args: &[&str]) -> Seen {
    let out = root.memd(args);
    Seen {
        code: out.status.code(),
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
    }
}

/// `memd consolidate --json` without what names the run and its window.
fn without_run_names(mut v: Value) -> Value {
    for key in ["run", "window", "started", "finished"] {
        if let Some(o) = v.as_object_mut() {
            o.remove(key);
        }
    }
    v
}

/// `memd doctor --json` checks, except the two that say where the daemon is.
fn doctor_checks(v: &Value) -> Vec<(String, String, String)> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["name"] != "daemon" && c["name"] != "writer_lock" && c["name"] != "permissions"
        })
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A fixed instant an hour ago, the same for both sessions of a test run.
fn sent_at() -> String {
    static SENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SENT.get_or_init(|| {
        (chrono::Utc::now() - chrono::Duration::hours(1))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    })
    .clone()
}

/// What the same commands show on the same root, run in process (no
/// daemon) or through the daemon.
fn session(root: &TempRoot, own: &str) -> (Vec<Seen>, Value, Value, String) {
    // A chat line first (so both sessions search the same memories): ADD
    // the first time (only in the first session), then NOOP.
    let sent = sent_at();
    let ingest = [
        "ingest",
        "--message-id",
        "m1",
        "--text",
        "see you at the harbour at six",
        "--sent-at",
        sent.as_str(),
        "--json",
    ];
    seen(root, &ingest);
    let chat = seen(root, &ingest);
    let peanuts = [
        "write",
        "--scene",
        "main",
        "--text",
        "Alice is allergic to peanuts",
        "--kind",
        "fact",
    ];
    let peanuts_json = [&peanuts[..], &["--json"]].concat();
    let fixed = [
        // An exact repeat answers NOOP with the same id, both ways.
        &peanuts[..],
        &peanuts_json,
        &[
            "write",
            "--scene",
            "main",
            "--text",
            "x",
            "--idempotency-key",
            "k1",
        ],
        &["search", "peanuts"],
        &["search", "peanuts", "--json"],
        &["search", "peanuts", "--limit", "500", "--mode", "fulltext"],
        &["search", "peanuts", "--mode", "semantic"],
        &["get", "nope"],
        &["get", "nope", "--json"],
        &["forget", "nope", "--json"],
        &["write", "--scene", "main", "--text", "   "],
        &[
            "write",
            "--scene",
            "qq:private:1",
            "--text",
            "a",
            "--privacy",
            "secret",
        ],
        &[
            "write",
            "--scene",
            "main",
            "--text",
            "api_key=sk-live-0123456789abcdefghijklmnop",
            "--json",
        ],
        &["consolidate", "--date", "2026-13-01"],
    ];
    let mut out: Vec<Seen> = fixed.iter().map(|a| seen(root, a)).collect();
    let id = out[0].stdout.trim().to_string();
    out.push(seen(root, &["get", &id]));
    out.push(seen(root, &["get", &id, "--json"]));
    out.push(chat);
    // A memory of this session's own, forgotten again.
    let mine = ok(&root.memd(&["write", "--scene", "main", "--text", own]))
        .trim()
        .to_string();
    let forgot = ok(&root.memd(&["forget", &mine])).replace(&mine, "ID");
    let consolidated =
        without_run_names(json_of(&root.memd(&["consolidate", "--dry-run", "--json"])));
    let doctor = json_of(&root.memd(&["doctor", "--json"]));
    (out, consolidated, doctor, forgot)
}

#[test]
fn every_command_gives_the_same_output_through_the_daemon_and_in_process() {
    let root = TempRoot::new();
    // No model, so doctor is ready and hybrid runs as full text both ways.
    root.write_config(json!({"embedder": {"enabled": false}}));
    let local = session(&root, "first session's own memory");
    let rebuilt_here = json_of(&root.memd(&["reindex", "--json"]));
    let health_here = json_of(&root.memd(&["health", "--json"]));

    let served = root.serve();
    let rebuilt_there = json_of(&root.memd(&["reindex", "--json"]));
    let through = session(&root, "second session's own memory");
    let health_there = json_of(&root.memd(&["health", "--json"]));

    // Byte for byte, stdout and stderr and the exit code.
    for (i, (a, b)) in local.0.iter().zip(&through.0).enumerate() {
        assert_eq!(a, b, "command #{i} differs");
    }
    let codes: Vec<Option<i32>> = local.0.iter().map(|s| s.code).collect();
    assert_eq!(
        codes,
        [0, 0, 0, 0, 0, 0, 6, 3, 3, 3, 2, 2, 2, 2, 0, 0, 0].map(Some),
        "{:#?}",
        local.0
    );
    assert!(
        local.0[5].stderr.contains("limit lowered"),
        "{:?}",
        local.0[5]
    );
    assert_eq!(local.3, through.3);
    assert_eq!(local.3.trim(), "forgot ID");
    assert_eq!(local.1, through.1);
    assert_eq!(doctor_checks(&local.2), doctor_checks(&through.2));
    assert_eq!(local.2["ready"], true);
    assert_eq!(through.2["ready"], true);
    // The same rebuild, except how long it took.
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("elapsedMs");
        v
    };
    assert_eq!(strip(rebuilt_here), strip(rebuilt_there));
    // Health is the full view both ways (the daemon adds its jobs).
    for h in [&health_here, &health_there] {
        assert_eq!(
            (h["writer"].as_bool(), h["facts"].is_u64()),
            (Some(true), true),
            "{h}"
        );
    }
    // Every write, search, get and forget of the second session reached the
    // daemon as the local operator.
    assert!(local.0[16].stdout.contains("\"NOOP\""), "{:?}", local.0[16]);
    for route in [
        "POST /v1/ingest",
        "POST /v1/write",
        "POST /v1/search",
        "POST /v1/get",
        "POST /v1/forget",
    ] {
        let lines = audited(&root, route);
        assert!(
            !lines.is_empty() && lines.iter().all(|l| l["token"] == "cli"),
            "{route}: {lines:?}"
        );
    }
    assert!(!audited(&root, "POST /v1/consolidation/run").is_empty());
    assert!(!audited(&root, "POST /v1/reindex").is_empty());
    drop(served);
}

#[test]
fn reindex_next_to_a_daemon_rebuilds_in_it_as_the_only_writer() {
    let root = TempRoot::new();
    let served = root.serve();
    let mut ids = Vec::new();
    for i in 0..20 {
        let text = format!("note {i} about the harbour lighthouse");
        ids.push(
            ok(&root.memd(&["write", "--scene", "main", "--text", &text]))
                .trim()
                .to_string(),
        );
    }
    ok(&root.memd(&["forget", &ids[3]]));
    root.write_doc(
        "notes/boats.md",
        "# Boats\n\nThe lighthouse keeper rows a blue boat.\n",
    );
    let search = |root: &TempRoot, query: &str| {
        json_of(&root.memd(&["search", query, "--mode", "fulltext", "--json"]))["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    // The watcher indexes the document within a second or so.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while search(&root, "keeper").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the document was not indexed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let before = (search(&root, "lighthouse"), search(&root, "keeper"));
    let lines = root.journal_lines().len();
    let out = root.memd(&["reindex", "--json"]);
    let reply = json_of(&out);
    assert!(
        text(&out.stderr).contains("rebuilding in memd serve"),
        "{}",
        text(&out.stderr)
    );
    // Every journal line replayed (a rebuild, not a catch-up), in the daemon.
    assert_eq!(reply["records"], lines as u64, "{reply}");
    assert_eq!(
        (reply["documents"].as_u64(), reply["memories"].as_u64()),
        (Some(1), Some(20))
    );
    assert_eq!(
        (search(&root, "lighthouse"), search(&root, "keeper")),
        before
    );
    let lock = std::fs::read_to_string(root.path().join(".memd.lock")).unwrap();
    assert_eq!(lock.trim(), served.child.id().to_string());
    // The daemon keeps serving, writes included.
    let after = ok(&root.memd(&[
        "write",
        "--scene",
        "main",
        "--text",
        "lighthouse after the rebuild",
    ]));
    assert_eq!(search(&root, "rebuild"), [after.trim()]);
    // The same rebuild as an offline one.
    assert!(served.stop().success());
    let offline = json_of(&root.memd(&["reindex", "--json"]));
    assert_eq!(
        (offline["records"].as_u64(), offline["memories"].as_u64()),
        (Some(lines as u64 + 1), Some(21))
    );
}

#[test]
fn a_stale_address_file_is_ignored() {
    let root = TempRoot::new();
    ok(&root.memd(&["write", "--scene", "main", "--text", "before"]));
    let dead = {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    // A killed daemon's file, and one whose pid is alive but whose port is gone.
    for pid in [dead, std::process::id()] {
        let file = json!({"pid": pid, "addr": closed, "secret": "mdl_x", "version": "0"});
        std::fs::write(root.path().join(".memd.addr"), file.to_string()).unwrap();
        ok(&root.memd(&[
            "write",
            "--scene",
            "main",
            "--text",
            &format!("with a stale file of pid {pid}"),
        ]));
        ok(&root.memd(&["health"]));
    }
    // Three memories (the two later ones, differing in a number, are also
    // linked as likely contradicting each other: a `link` line).
    let puts = root
        .journal_lines()
        .iter()
        .filter(|l| l.contains(r#""op":"put""#))
        .count();
    assert_eq!(puts, 3);
}

#[test]
fn the_local_credential_is_the_operator_and_nothing_else() {
    let root = TempRoot::new();
    let served = root.serve();
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join(".memd.addr")).unwrap())
            .unwrap();
    let secret = file["secret"].as_str().unwrap();
    let (status, caps) = call(
        &served.addr,
        "GET",
        "/v1/capabilities",
        Some(secret),
        &json!({}),
    );
    assert_eq!(status, 200);
    assert_eq!(caps["token"]["name"], "cli");
    let (status, _) = call(
        &served.addr,
        "GET",
        "/v1/capabilities",
        Some("mdl_wrong"),
        &json!({}),
    );
    assert_eq!(status, 401);
    // It is not a token of /mcp, and a clean stop forgets it.
    let addr = served.addr.clone();
    drop(served);
    assert!(std::net::TcpStream::connect(&addr).is_err());
}

/// A `memd` with a temporary HOME and no root of its own in the environment.
fn memd_at_home(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env_remove("MEMD_ROOT")
        .env_remove("XDG_DATA_HOME")
        .env("MEMD_MODELS_DIR", home.join("no-models"))
        .env_remove("MEMD_LOG")
        .output()
        .expect("run memd")
}

#[test]
fn the_default_root_is_the_data_directory_never_the_current_directory() {
    let home = tempfile::tempdir().unwrap();
    let checkout = home.path().join("src/memory-hub");
    std::fs::create_dir_all(checkout.join(".git")).unwrap();
    let out = memd_at_home(
        home.path(),
        &checkout,
        &["write", "--scene", "main", "--text", "hello"],
    );
    ok(&out);
    let root = home.path().join(".local/share/memd");
    assert!(root.join("memories/facts").is_dir());
    assert!(!checkout.join("memories").exists() && !checkout.join("data").exists());
    // Not ready without a model, but the root check is what matters here.
    let out = memd_at_home(home.path(), &checkout, &["doctor", "--shallow", "--json"]);
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = crate::support::doctor_check(&doctor, "root").clone();
    assert_eq!(check["status"], "ok", "{check}");
    // A root pointed into the checkout is one `git add -A` from a push: doctor says so.
    let inside = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["doctor", "--shallow", "--json"])
        .env("MEMD_ROOT", &checkout)
        .env("MEMD_MODELS_DIR", home.path().join("no-models"))
        .output()
        .unwrap();
    let doctor: Value = serde_json::from_slice(&inside.stdout).unwrap();
    let check = crate::support::doctor_check(&doctor, "root").clone();
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("git working tree")
    );
}

#[test]
fn a_root_of_an_earlier_memd_in_the_current_directory_is_named() {
    let home = tempfile::tempdir().unwrap();
    let old = home.path().join("old-root");
    let out = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args([
            "--root",
            old.to_str().unwrap(),
            "write",
            "--scene",
            "main",
            "--text",
            "kept",
        ])
        .env("MEMD_MODELS_DIR", home.path().join("no-models"))
        .output()
        .unwrap();
    ok(&out);
    let out = memd_at_home(home.path(), &old, &["stats", "--json"]);
    let stats: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(
        stats["root"],
        home.path().join(".local/share/memd").display().to_string()
    );
    let note = text(&out.stderr);
    assert!(
        note.contains("--root") && note.contains(&old.display().to_string()),
        "{note}"
    );
}

/// Paths `git status` lists as untracked or changed in `repo`.
fn git_status(repo: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(repo)
        .output()
        .expect("git is installed");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| l[3..].to_string())
        .collect()
}

#[test]
fn a_root_in_the_checkout_leaves_git_status_clean() {
    let repo_dir = tempfile::tempdir().unwrap();
    let repo = repo_dir.path();
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for tracked in [".gitignore", "memories/.gitkeep", "data/.gitkeep"] {
        std::fs::create_dir_all(repo.join(tracked).parent().unwrap()).unwrap();
        std::fs::copy(source.join(tracked), repo.join(tracked)).unwrap();
    }
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.org")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.org")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "the checkout"]);
    assert_eq!(git_status(repo), Vec::<String>::new());

    // A day of use with the checkout as the root, as an earlier build had it.
    let no_models = repo.join("..").join("memd-test-no-models");
    let in_repo = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memd"))
            .args(args)
            .env("MEMD_ROOT", repo)
            .env("MEMD_MODELS_DIR", &no_models)
            .output()
            .unwrap()
    };
    let secret: Value = serde_json::from_str(&ok(&in_repo(&[
        "token",
        "issue",
        "--name",
        "root",
        "--preset",
        "dsh-desktop",
        "--json",
    ])))
    .unwrap();
    let secret = secret["secret"].as_str().unwrap().to_string();
    ok(&in_repo(&[
        "write",
        "--scene",
        "main",
        "--text",
        "Alice is allergic to peanuts",
    ]));
    std::fs::create_dir_all(repo.join("memories/user")).unwrap();
    std::fs::write(
        repo.join("memories/user/identity.md"),
        "# Me\n\nI live in Hangzhou.\n",
    )
    .unwrap();
    let served = Served::start(serve_command(repo).env("MEMD_MODELS_DIR", &no_models));
    let addr = served.addr.clone();
    let (status, _) = call(
        &addr,
        "POST",
        "/v1/members",
        Some(&secret),
        &json!({"group": "qq:group:42", "set": [{"id": "10001", "name": "Bob"}]}),
    );
    assert_eq!(status, 200);
    let (status, _) = call(
        &addr,
        "POST",
        "/v1/categories",
        Some(&secret),
        &json!({"action": "set", "name": "values", "slot": "company-values", "content": "Be kind."}),
    );
    assert_eq!(status, 200);
    ok(&in_repo(&[
        "write",
        "--scene",
        "main",
        "--text",
        "written next to the daemon",
    ]));
    ok(&in_repo(&["backup", "create"]));
    // Mid-session, and after a clean stop.
    let mid = git_status(repo);
    served.stop();
    let after = git_status(repo);
    // What the issue saw listed: members with QQ ids and names, categories,
    // the owner's identity, besides the journal, tokens and backups.
    for personal in [
        "memories/groups/members.json",
        "memories/user/identity.md",
        "tokens.json",
        "backups",
    ] {
        assert!(repo.join(personal).exists(), "{personal}");
    }
    assert_eq!(
        mid,
        Vec::<String>::new(),
        "personal files git would add mid-session"
    );
    assert_eq!(after, Vec::<String>::new(), "personal files git would add");
}

#[test]
fn memd_mcp_finds_the_daemon_on_any_port() {
    use std::io::{BufRead, BufReader, Write};
    let root = TempRoot::new();
    let token = json_of(&root.memd(&[
        "token",
        "issue",
        "--name",
        "agent",
        "--preset",
        "dsh-desktop",
        "--json",
    ]))["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let served = root.serve();
    // config `listen` names another port: only the address file leads there.
    let mut mcp = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["mcp", "--no-start"])
        .env("MEMD_ROOT", root.path())
        .env("MEMD_TOKEN", &token)
        .env_remove("MEMD_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = mcp.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_write","arguments":{"text":"written over MCP stdio"}}}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut reply = Value::Null;
    for line in BufReader::new(mcp.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["id"] == 2 {
            reply = v;
            break;
        }
    }
    drop(stdin);
    let _ = mcp.wait();
    assert!(reply["result"].is_object(), "{reply}");
    assert_ne!(reply["result"]["isError"], true, "{reply}");
    let writes = audited(&root, "POST /v1/write");
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["token"], "agent");
    drop(served);
}

#[test]
fn the_help_says_what_search_and_health_do_by_default() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_memd"))
            .args(args)
            .output()
            .unwrap();
        text(&out.stdout)
    };
    let search = help(&["search", "--help"]);
    assert!(
        search.contains("hybrid (full text + semantic) by default"),
        "{search}"
    );
    assert!(!search.contains("Full-text search"), "{search}");
    let health = help(&["health", "--help"]);
    for said in ["Without --token", "With --token", "status only", "counts"] {
        assert!(health.contains(said), "{said:?} in {health}");
    }
    let top = help(&["--help"]);
    assert!(
        top.contains("setup") && top.contains("~/.local/share/memd"),
        "{top}"
    );
}

#[test]
fn a_command_waits_for_a_daemon_that_is_still_starting() {
    let root = TempRoot::new();
    // Enough journal that a rebuild at start takes a moment.
    let lines: String = (0..4000)
        .map(|i| format!("{{\"text\": \"harbour note number {i}\", \"scene\": \"main\"}}\n"))
        .collect();
    let file = root.path().join("notes.jsonl");
    std::fs::write(&file, lines).unwrap();
    ok(&root.memd(&["import", file.to_str().unwrap()]));
    std::fs::remove_dir_all(root.path().join("data/index")).unwrap();
    let mut child = serve_command(root.path()).spawn().unwrap();
    // The daemon takes the lock first and binds once it has caught up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(root.path().join(".memd.lock"))
        .unwrap_or_default()
        .trim()
        != child.id().to_string()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "serve never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = root.memd(&[
        "write",
        "--scene",
        "main",
        "--text",
        "written while it started",
    ]);
    let waited = text(&out.stderr).contains("waiting for memd serve");
    ok(&out);
    eprintln!("the write waited for the starting daemon: {waited}");
    let addr = crate::support::serve_addr(&mut child);
    assert_eq!(audited(&root, "POST /v1/write").len(), 1, "through {addr}");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}
