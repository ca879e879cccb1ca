//! The file watcher of a running `memd serve`: Markdown edits and journal lines
//! appended by another process become searchable without a restart.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::TempRoot;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(root: &TempRoot) -> (Server, String) {
    // The daily backup would wait until 04:00 anyway; keep the test root clean.
    std::fs::write(
        root.path().join("config.json"),
        r#"{"backup": {"daily": false}}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("MEMD_ROOT", root.path())
        .env_remove("MEMD_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start memd serve");
    let addr = crate::support::serve_addr(&mut child);
    (Server(child), addr)
}

/// Polls full-text search (through the CLI, which reads the daemon's index)
/// until `pred` holds; returns how long it took.
fn wait_for(root: &TempRoot, query: &str, pred: impl Fn(usize) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        let v = root.memd_json(&["search", query, "--mode", "fulltext"]);
        let n = v["hits"].as_array().unwrap().len();
        if pred(n) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{query}: still {n} hits"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn edits_and_foreign_appends_reach_the_running_index() {
    let root = TempRoot::new();
    let (_server, addr) = serve(&root);

    // `memd health` asks the running daemon; counts need an admin token.
    let (_, admin) = memory_hub::auth::issue(
        &root.layout().tokens(),
        &memory_hub::auth::IssueRequest {
            name: "root".into(),
            preset: Some("dsh-desktop".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let public = root.memd_json(&["health", "--addr", &addr]);
    assert!(public.get("pending_vectors").is_none(), "{public}");
    let health = root.memd_json(&["health", "--addr", &addr, "--token", &admin]);
    assert_eq!(health["writer"], true);
    for c in ["journal", "index", "embedder", "disk"] {
        assert!(
            health["components"][c]["status"].is_string(),
            "{c}: {health}"
        );
    }
    assert!(health["pending_vectors"].is_u64());

    let doc = root.write_doc("notes/garden.md", "# Garden\nTomatoes need staking.\n");
    let added = wait_for(&root, "tomatoes", |n| n == 1);

    std::fs::write(&doc, "# Garden\nCucumbers climb the trellis.\n").unwrap();
    let edited = wait_for(&root, "cucumbers", |n| n == 1);
    wait_for(&root, "tomatoes", |n| n == 0);

    let moved = root.path().join("memories/notes/veg.md");
    std::fs::rename(&doc, &moved).unwrap();
    wait_for(&root, "cucumbers", |n| n == 1);
    std::fs::remove_file(&moved).unwrap();
    let removed = wait_for(&root, "cucumbers", |n| n == 0);

    // A file sync tool appends a line written on another device.
    let facts = root.path().join("memories/facts");
    std::fs::create_dir_all(&facts).unwrap();
    let line = r#"{"op":"put","v":1,"id":"fact-main-synced-0001","ts":"2026-11-30T08:00:00Z","scene":"main","kind":"note","stage":"long","text":"synced from the laptop 同步","privacy":"normal","subject":"owner","source":"laptop","importance":0.5}"#;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(facts.join("2026-11.jsonl"))
        .unwrap();
    writeln!(f, "{line}").unwrap();
    drop(f);
    let synced = wait_for(&root, "同步", |n| n == 1);
    eprintln!(
        "watch latency: add {added:?}, edit {edited:?}, delete {removed:?}, journal {synced:?}"
    );
}

#[test]
fn a_changed_config_file_applies_editable_keys_without_restart() {
    let root = TempRoot::new();
    let (_server, addr) = serve(&root);
    let token = root.memd_json(&[
        "token",
        "issue",
        "--name",
        "root",
        "--preset",
        "dsh-desktop",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let limit = || {
        let r = memory_hub::loopback::get(
            &addr,
            "/v1/config-state",
            Some(&token),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        v["values"]["search.defaultLimit"].as_u64().unwrap()
    };
    assert_eq!(limit(), 5);
    std::fs::write(
        root.path().join("config.json"),
        r#"{"backup": {"daily": false}, "search": {"defaultLimit": 3}}"#,
    )
    .unwrap();
    let start = Instant::now();
    while limit() != 3 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "config change not applied"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // An invalid file is refused and the running settings stay.
    std::fs::write(
        root.path().join("config.json"),
        r#"{"search": {"defaultLimit": 0}}"#,
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(limit(), 3);
}
