//! The file watcher of a running `memd serve`: Markdown edits and journal lines
//! appended by another process become searchable without a restart.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::support::{Served, TempRoot, serve_with_models};

/// `memd serve` on `root` with the installed models; its address.
fn serve(root: &TempRoot) -> (Served, String) {
    // The daily backup would wait until 04:00 anyway; keep the test root clean.
    root.write_config(r#"{"backup": {"daily": false}}"#);
    let served = Served::start(serve_with_models(root.path()).args(["--listen", "127.0.0.1:0"]));
    let addr = served.addr.clone();
    (served, addr)
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
    let admin = root.token("root", "dsh-desktop");
    // Next to its daemon, the CLI asks as the local operator: the full view.
    let local = root.memd_json(&["health", "--addr", &addr]);
    assert!(local.get("pending_vectors").is_some(), "{local}");
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
    let token = root.cli_token("root", "dsh-desktop");
    let limit = || {
        let r = memory_hub::client::get(
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
    root.write_config(r#"{"backup": {"daily": false}, "search": {"defaultLimit": 3}}"#);
    let start = Instant::now();
    while limit() != 3 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "config change not applied"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // An invalid file is refused and the running settings stay.
    root.write_config(r#"{"search": {"defaultLimit": 0}}"#);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(limit(), 3);
}

#[test]
fn an_alias_bomb_never_stalls_the_server() {
    // Reproduction: with this 364-byte file present the server never
    // listened; added at runtime it stalled every write.
    let root = TempRoot::new();
    root.write_doc("notes/bomb.md", &crate::documents::alias_bomb("normal"));
    let (_server, addr) = serve(&root);
    let token = root.cli_token("root", "dsh-desktop");
    let health = root.memd_json(&["health", "--addr", &addr, "--token", &token]);
    assert_eq!(
        health["components"]["documents"]["status"], "degraded",
        "{health}"
    );
    assert!(
        health["components"]["documents"]["detail"]
            .as_str()
            .unwrap()
            .contains("notes/bomb.md"),
        "{health}"
    );
    post_write(&addr, &token, "first write beside a bomb");
    wait_for(&root, "beside", |n| n == 1);

    root.write_doc("notes/bomb2.md", &crate::documents::alias_bomb("secret"));
    root.write_doc("notes/after.md", "# After\nPumpkins after the bomb.\n");
    wait_for(&root, "pumpkins", |n| n == 1);
    post_write(&addr, &token, "second write beside two bombs");
    wait_for(&root, "second", |n| n == 1);
    wait_for(&root, "laughing", |n| n == 0);
    let stats = root.memd_json(&["stats"]);
    let issues: Vec<&str> = stats["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(issues.iter().all(|i| i.contains("anchors")), "{issues:?}");
    let out = root.memd(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let docs = crate::support::doctor_check(&report, "documents").to_string();
    assert!(docs.contains("2 documents not indexed"), "{docs}");
}

#[test]
fn an_idle_watcher_does_no_document_work() {
    // Reproduction: every document sync read the files, the reads came back
    // as events, and the idle daemon re-read every note every 0.3 s.
    let root = TempRoot::new();
    for i in 0..1000 {
        root.write_doc(
            &format!("notes/{:02}/n{i}.md", i % 20),
            &format!("---\ntitle: Note {i}\n---\n# Note {i}\nplain words number w{i}x\n"),
        );
    }
    let hub = std::sync::Arc::new(root.hub());
    let watcher = memory_hub::watch::spawn(hub.clone()).unwrap();
    let edited = root.path().join("memories/notes/07/n7.md");
    std::fs::write(&edited, "# Note 7\nquince jam\n").unwrap();
    let start = Instant::now();
    while crate::support::search_ids(&hub, "quince", 5).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(20), "edit not seen");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let a close event that straddled the debounce window finish its round.
    std::thread::sleep(Duration::from_secs(1));
    let after_edit = watcher.counts();
    assert!(after_edit.document_syncs >= 1, "{after_edit:?}");
    // Our own reads (a sync that re-reads every file: they are all fresh,
    // searches, stats) are not events; neither is time passing.
    let report = hub.sync_documents().unwrap();
    assert_eq!(report.documents_indexed, 0);
    assert!(report.documents_read >= 1, "{report:?}");
    for _ in 0..5 {
        crate::support::search_ids(&hub, "words", 5);
        hub.stats().unwrap();
        for i in (0..1000).step_by(97) {
            std::fs::read(
                root.path()
                    .join(format!("memories/notes/{:02}/n{i}.md", i % 20)),
            )
            .unwrap();
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(watcher.counts(), after_edit);
}

#[test]
fn reading_config_json_is_not_a_change() {
    let root = TempRoot::new();
    let config = root.path().join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let reloads = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = reloads.clone();
    let path = config.clone();
    // The handler reads the file, as the server's does.
    let watcher = memory_hub::watch::spawn_config(root.path(), move || {
        std::fs::read_to_string(&path).unwrap();
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    })
    .unwrap();
    for _ in 0..5 {
        std::fs::read_to_string(&config).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(watcher.counts().config_reloads, 0);
    std::fs::write(&config, r#"{"search": {"defaultLimit": 3}}"#).unwrap();
    let start = Instant::now();
    while reloads.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "change not seen");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The handler's own read does not start another round.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(watcher.counts().config_reloads, 1);
}

/// `POST /v1/write` to a running server; panics unless it answers 200.
fn post_write(addr: &str, token: &str, text: &str) {
    post(
        addr,
        token,
        "/v1/write",
        serde_json::json!({"scene": "main", "text": text}),
    );
}

/// `POST path` to a running daemon.
fn post(addr: &str, token: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let (status, v) = crate::wire::call(addr, "POST", path, Some(token), &body);
    assert_eq!(status, 200, "{path}: {v}");
    v
}

/// The ids of the newest facts (up to 100) a daemon serves.
fn recent_ids(addr: &str, token: &str) -> Vec<String> {
    let v = post(
        addr,
        token,
        "/v1/recent",
        serde_json::json!({ "limit": 100 }),
    );
    let mut ids = crate::http_support::ids(&v["items"]);
    ids.sort();
    ids
}

/// Waits up to 5 s for `pred`; returns how long it took.
fn within_5s(what: &str, mut pred: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !pred() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what}: not within 5 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// Copies this root's own journal files into `to` as `os.makedirs` then
/// `shutil.copyfile` do: the device directory first, then each file in it
/// (the file is created before inotify watches the new directory).
fn copy_device_files(from: &TempRoot, to: &TempRoot) {
    let facts = from.path().join("memories/facts");
    for file in from.journal_files() {
        let rel = file.strip_prefix(&facts).unwrap();
        let target = to.path().join("memories/facts").join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, &target).unwrap();
    }
}

#[test]
fn a_device_directory_created_before_its_file_is_applied_within_seconds() {
    // Another device's journal: five memories written by its own CLI.
    let laptop = TempRoot::new();
    for i in 0..5 {
        laptop.memd_json(&[
            "write",
            "--scene",
            "main",
            "--text",
            &format!("laptop note {i} about kayaks"),
        ]);
    }
    let root = TempRoot::new();
    let (_server, addr) = serve(&root);
    let token = root.cli_token("root", "dsh-desktop");
    post(
        &addr,
        &token,
        "/v1/write",
        serde_json::json!({ "text": "desktop note" }),
    );
    // Long after the start (whose first catch-up would find anything).
    std::thread::sleep(Duration::from_millis(1500));
    // The directory arrives whole (a sync tool renames it into place): one
    // event, for the directory only, whose file must be found by a scan.
    let staging = TempRoot {
        dir: tempfile::tempdir_in(root.path()).unwrap(),
    };
    copy_device_files(&laptop, &staging);
    for entry in std::fs::read_dir(staging.path().join("memories/facts")).unwrap() {
        let entry = entry.unwrap();
        let to = root.path().join("memories/facts").join(entry.file_name());
        std::fs::rename(entry.path(), to).unwrap();
    }
    let took = within_5s("the laptop's lines", || {
        let v = post(
            &addr,
            &token,
            "/v1/search",
            serde_json::json!({ "query": "kayaks", "mode": "fulltext", "limit": 10 }),
        );
        v["hits"].as_array().unwrap().len() == 5 && v.get("index_behind").is_none()
    });
    let health = root.memd_json(&["health", "--addr", &addr, "--token", &token]);
    assert_eq!(health["components"]["index"]["status"], "ok", "{health}");
    eprintln!("a new device's file applied in {took:?}");
}

#[test]
fn two_roots_exchanging_journal_files_converge() {
    let (a, b) = (TempRoot::new(), TempRoot::new());
    let (_sa, addr_a) = serve(&a);
    let (_sb, addr_b) = serve(&b);
    let (ta, tb) = (
        a.cli_token("root", "dsh-desktop"),
        b.cli_token("root", "dsh-desktop"),
    );
    for i in 0..30 {
        post(
            &addr_a,
            &ta,
            "/v1/write",
            serde_json::json!({ "text": format!("alpha fact {i} from the first root") }),
        );
        post(
            &addr_b,
            &tb,
            "/v1/write",
            serde_json::json!({ "text": format!("beta fact {i} from the second root") }),
        );
    }
    copy_device_files(&a, &b);
    copy_device_files(&b, &a);
    within_5s("both roots hold 60 facts", || {
        recent_ids(&addr_a, &ta).len() == 60 && recent_ids(&addr_b, &tb).len() == 60
    });
    assert_eq!(recent_ids(&addr_a, &ta), recent_ids(&addr_b, &tb));
    for query in ["alpha", "beta", "fact root"] {
        let body = serde_json::json!({ "query": query, "mode": "fulltext", "limit": 50 });
        let ids = |addr: &str, token: &str| -> Vec<String> {
            crate::http_support::ids(&post(addr, token, "/v1/search", body.clone())["hits"])
        };
        assert_eq!(ids(&addr_a, &ta), ids(&addr_b, &tb), "{query}");
    }
}
