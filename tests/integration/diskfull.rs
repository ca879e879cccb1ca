//! A full disk through the HTTP API: a write is refused with a retryable
//! `507 STORAGE_FULL` and leaves nothing behind; every acknowledged write
//! survives; the index catches up and health returns to ok once space is
//! freed — all without a restart.
//!
//! Needs root for `mount -t tmpfs` (CI runs as root). By hand:
//! `sudo cargo test --test integration diskfull`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http_support::Api;
use crate::support::{Served, TempRoot, assert_ok, serve_command};

/// A small tmpfs, unmounted on drop.
struct Tmpfs {
    dir: Mount,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::mount_on(size, dir.path());
        Tmpfs {
            dir: Mount::Own(dir),
        }
    }

    /// A small tmpfs mounted on an existing directory (unmounted on drop).
    fn mount_at(size: &str, at: &Path) -> Tmpfs {
        Self::mount_on(size, at);
        Tmpfs {
            dir: Mount::At(at.to_path_buf()),
        }
    }

    fn mount_on(size: &str, at: &Path) {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test needs `mount -t tmpfs` (run it as root, as CI does): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self) -> &Path {
        match &self.dir {
            Mount::Own(d) => d.path(),
            Mount::At(p) => p,
        }
    }
}

/// Where a [`Tmpfs`] is mounted: a temp dir of its own, or a given directory.
enum Mount {
    Own(tempfile::TempDir),
    At(PathBuf),
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let at = self.path().to_path_buf();
        let ok = Command::new("umount")
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&at).status();
        }
    }
}

/// Fills the file system holding `path` to the last byte; returns the filler.
fn fill_disk(dir: &Path) -> PathBuf {
    fill_disk_with(dir, "filler")
}

/// [`fill_disk`] with a filler of this name (a second one beside the first).
fn fill_disk_with(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    for size in [1 << 16, 4096, 1] {
        let chunk = vec![0u8; size];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
    }
    let _ = f.sync_all();
    path
}

/// Every line of every journal file parses as JSON.
fn assert_journal_readable(root: &TempRoot) {
    for file in root.journal_files() {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            bytes.is_empty() || bytes.ends_with(b"\n"),
            "{} ends in a fragment",
            file.display()
        );
        for (i, line) in String::from_utf8(bytes).unwrap().lines().enumerate() {
            assert!(
                serde_json::from_str::<Value>(line).is_ok(),
                "{}:{}: unreadable line {line:?}",
                file.display(),
                i + 1
            );
        }
    }
}

/// A text of `n` words, all distinct from every other text's (so that no
/// write is deduplicated against another), starting with `word`.
fn text_for(word: &str, n: usize) -> String {
    let mut words = vec![word.to_string()];
    words.extend((0..n).map(|i| format!("{word}w{i}")));
    words.join(" ")
}

/// More than a page, so its append always needs new disk space.
fn big_text(word: &str) -> String {
    text_for(word, 900)
}

#[tokio::test]
async fn writes_on_a_full_disk_are_refused_retryably_and_nothing_acknowledged_is_lost() {
    let fs = Tmpfs::mount("12m");
    let root = TempRoot {
        dir: tempfile::tempdir_in(fs.path()).unwrap(),
    };
    let api = Api::over(root);
    let t = api.token("owner", "qq-owner");
    // Health details (the index component's reason) are for admin tokens.
    let admin = api.token("admin", "dsh-desktop");
    // (id, text, distinctive word) of every acknowledged write.
    let mut acked: Vec<(String, String, String)> = Vec::new();
    let mut write = async |text: String, word: &str| -> (u16, Value) {
        let (status, v) = api.post("/v1/write", &t, json!({ "text": text })).await;
        if status == 200 {
            assert_eq!(v["action"], "ADD", "{v}");
            acked.push((v["id"].as_str().unwrap().to_string(), text, word.into()));
        }
        (status, v)
    };
    for i in 0..3 {
        let word = format!("baseline{i}");
        let (status, v) = write(text_for(&word, 6), &word).await;
        assert_eq!(status, 200, "{v}");
    }
    for episode in 0..3 {
        // Written with space left, not committed to the text index yet.
        let word = format!("pending{episode}");
        let (status, v) = write(text_for(&word, 6), &word).await;
        assert_eq!(status, 200, "{v}");

        let filler = fill_disk(api.root.path());
        let word = format!("refused{episode}");
        let big = big_text(&word);
        let (status, v) = api.post("/v1/write", &t, json!({ "text": big })).await;
        assert_eq!(status, 507, "episode {episode}: {v}");
        assert_eq!(v["error"]["code"], "STORAGE_FULL");
        assert_eq!(v["error"]["retryable"], true);
        assert!(
            v["error"]["message"].as_str().unwrap().contains("full"),
            "{v}"
        );
        assert_journal_readable(&api.root);

        // Health says the disk is short instead of ok, and search still
        // answers from the index.
        let (status, health) = api.get("/v1/health", Some(&admin)).await;
        assert_eq!(status, 200, "{health}");
        assert_eq!(health["status"], "degraded", "{health}");
        let disk = &health["components"]["disk"];
        assert_eq!(disk["status"], "degraded", "{health}");
        assert!(
            disk["detail"].as_str().unwrap().contains("refused"),
            "{disk}"
        );
        let (status, v) = api
            .post(
                "/v1/search",
                &t,
                json!({"query": "baseline0", "mode": "fulltext"}),
            )
            .await;
        assert_eq!(status, 200, "{v}");

        // A small write may still fit the journal's last page; if it is
        // acknowledged it must survive like any other.
        let word = format!("squeezed{episode}");
        let (status, v) = write(text_for(&word, 6), &word).await;
        assert!(
            status == 200 || (status == 507 && v["error"]["code"] == "STORAGE_FULL"),
            "{status} {v}"
        );
        assert_journal_readable(&api.root);

        // Space returns: the same write now succeeds, no restart.
        std::fs::remove_file(&filler).unwrap();
        let (status, v) = write(big, &format!("refused{episode}")).await;
        assert_eq!(status, 200, "episode {episode} after freeing space: {v}");
        let (_, health) = api.get("/v1/health", Some(&admin)).await;
        assert_eq!(
            health["components"]["index"]["status"], "ok",
            "episode {episode}: {health}"
        );
    }

    // Everything acknowledged is there, exactly, and searchable.
    assert_journal_readable(&api.root);
    for (id, text, word) in &acked {
        let got = api.ok("/v1/get", &t, json!({ "id": id })).await;
        assert_eq!(got["text"].as_str().unwrap(), text.trim(), "{id}");
        let hits = api
            .search_ids(&t, json!({ "query": word, "limit": 5 }))
            .await;
        assert!(hits.contains(id), "{word}: {id} not in {hits:?}");
    }
    let (_, health) = api.get("/v1/health", Some(&admin)).await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["issues"], 0, "{health}");
}

// ---- A real `memd serve` on small file systems, with concurrent clients. ----

/// Settings for the served roots below: no model (full text only), no
/// daily backup, no rate limit (the clients are fast).
const SERVE_CONFIG: &str = r#"{"backup": {"daily": false}, "embedder": {"enabled": false}, "http": {"rateLimitPerMinute": 0}}"#;

/// A running `memd serve`, stopped on drop; its log goes to `log`.
struct Daemon {
    served: Served,
    addr: String,
}

impl Daemon {
    fn start(root: &Path, log: &Path) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let served = Served::start(serve_command(root).env("MEMD_LOG", "info").stderr(log));
        Daemon {
            addr: served.addr.clone(),
            served,
        }
    }

    /// SIGTERM, and the exit status within 20 s.
    fn stop(self) -> std::process::ExitStatus {
        self.served.stop_within(Duration::from_secs(20)).0
    }

    fn call(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        crate::wire::call(&self.addr, "POST", path, Some(token), &body)
    }

    /// `id` reads back with `text`.
    fn assert_reads(&self, token: &str, id: &str, text: &str) {
        let (status, v) = self.call("/v1/get", token, json!({ "id": id }));
        assert_eq!((status, v["text"].as_str()), (200, Some(text)), "{v}");
    }

    /// A full-text search for `word` answers 200 and finds `id`.
    fn assert_finds(&self, token: &str, word: &str, id: &str) {
        let (status, v) = self.call(
            "/v1/search",
            token,
            json!({ "query": word, "mode": "fulltext" }),
        );
        assert_eq!(status, 200, "{v}");
        assert!(
            crate::http_support::ids(&v["hits"]).iter().any(|h| h == id),
            "{v}"
        );
    }
}

/// A root on `dir` with the settings above and an admin token.
fn served_root(dir: &Path) -> (PathBuf, String) {
    let root = dir.to_path_buf();
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("config.json"), SERVE_CONFIG).unwrap();
    let out = assert_ok(
        Command::new(env!("CARGO_BIN_EXE_memd"))
            .args([
                "token",
                "issue",
                "--name",
                "owner",
                "--preset",
                "dsh-desktop",
                "--json",
            ])
            .env("MEMD_ROOT", &root)
            .output()
            .unwrap(),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (root, v["secret"].as_str().unwrap().to_string())
}

/// Acknowledged writes: (id, text, distinctive word).
type Acked = Arc<Mutex<Vec<(String, String, String)>>>;

/// Writers and readers running against a daemon until stopped. Every
/// answer must be one the contract allows: writes 200 or a retryable
/// `507 STORAGE_FULL`; reads always 200, and `get` of an acknowledged write
/// finds it (from the journal while the index catches up).
struct Clients {
    stop: Arc<AtomicBool>,
    acked: Acked,
    refused: Arc<AtomicU64>,
    problems: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Clients {
    /// `writers` threads writing texts of `words` words, pausing `pace`
    /// after each acknowledged write, and `readers` threads reading them back.
    fn start(
        addr: &str,
        token: &str,
        (writers, readers): (usize, usize),
        words: usize,
        pace: Duration,
    ) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Acked = Default::default();
        let refused = Arc::new(AtomicU64::new(0));
        let problems: Arc<Mutex<Vec<String>>> = Default::default();
        let mut threads = Vec::new();
        for w in 0..writers {
            let (addr, token) = (addr.to_string(), token.to_string());
            let (stop, acked, refused, problems) = (
                stop.clone(),
                acked.clone(),
                refused.clone(),
                problems.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    let word = format!("wr{w}n{i}z{}", std::process::id());
                    let text = text_for(&word, words);
                    let (status, v) = crate::wire::call(
                        &addr,
                        "POST",
                        "/v1/write",
                        Some(&token),
                        &json!({ "text": text }),
                    );
                    match status {
                        200 => {
                            acked.lock().unwrap().push((
                                v["id"].as_str().unwrap().to_string(),
                                text,
                                word,
                            ));
                            std::thread::sleep(pace);
                        }
                        507 if v["error"]["code"] == "STORAGE_FULL"
                            && v["error"]["retryable"] == true =>
                        {
                            refused.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        _ => problems
                            .lock()
                            .unwrap()
                            .push(format!("write answered {status} {v}")),
                    }
                }
            }));
        }
        for r in 0..readers {
            let (addr, token) = (addr.to_string(), token.to_string());
            let (stop, acked, problems) = (stop.clone(), acked.clone(), problems.clone());
            threads.push(std::thread::spawn(move || {
                let mut n = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let pick = {
                        let a = acked.lock().unwrap();
                        (!a.is_empty()).then(|| a[(n * 7919 + r) % a.len()].clone())
                    };
                    let Some((id, text, word)) = pick else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let (status, v) = crate::wire::call(
                        &addr,
                        "POST",
                        "/v1/get",
                        Some(&token),
                        &json!({ "id": id }),
                    );
                    if status != 200 || v["text"].as_str() != Some(text.as_str()) {
                        problems
                            .lock()
                            .unwrap()
                            .push(format!("get {id} answered {status} {v}"));
                    }
                    let (status, v) = crate::wire::call(
                        &addr,
                        "POST",
                        "/v1/search",
                        Some(&token),
                        &json!({ "query": word, "mode": "fulltext" }),
                    );
                    if status != 200 {
                        problems
                            .lock()
                            .unwrap()
                            .push(format!("search answered {status} {v}"));
                    }
                }
            }));
        }
        Clients {
            stop,
            acked,
            refused,
            problems,
            threads,
        }
    }

    fn acked(&self) -> Vec<(String, String, String)> {
        self.acked.lock().unwrap().clone()
    }

    fn finish(self) -> (Vec<(String, String, String)>, u64) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        let problems = self.problems.lock().unwrap().clone();
        assert!(
            problems.is_empty(),
            "{} bad answers: {problems:#?}",
            problems.len()
        );
        let acked = self.acked.lock().unwrap().clone();
        (acked, self.refused.load(Ordering::SeqCst))
    }
}

/// Polls until every write in `acked` reads back by `get` and is found by
/// full-text search for its word, or `deadline` passes. Searches go ten
/// words at a time (no memory holds two of them: the OR pass finds the ten).
fn assert_readable(addr: &str, token: &str, acked: &[(String, String, String)], deadline: Instant) {
    let call = |path: &str, body: Value| crate::wire::call(addr, "POST", path, Some(token), &body);
    let mut unread: Vec<&(String, String, String)> = acked.iter().collect();
    let mut unfound: Vec<Vec<&(String, String, String)>> =
        acked.chunks(10).map(|c| c.iter().collect()).collect();
    let mut sweeps = 0;
    loop {
        unread.retain(|(id, text, _)| {
            let (status, v) = call("/v1/get", json!({ "id": id }));
            status != 200 || v["text"].as_str() != Some(text.as_str())
        });
        unfound.retain(|group| {
            let words: Vec<&str> = group.iter().map(|(_, _, w)| w.as_str()).collect();
            let (status, v) = call(
                "/v1/search",
                // Each memory holds one word of ten: weak evidence the
                // decision drops; whether the index holds them is under test.
                json!({ "query": words.join(" "), "mode": "fulltext", "limit": group.len(), "min_score": 0 }),
            );
            let hits = crate::http_support::ids(&v["hits"]);
            status != 200 || group.iter().any(|(id, _, _)| !hits.contains(id))
        });
        sweeps += 1;
        if unread.is_empty() && unfound.is_empty() {
            eprintln!("{} writes read back in {sweeps} sweeps", acked.len());
            return;
        }
        assert!(
            Instant::now() < deadline,
            "of {} acknowledged writes, {} do not read back (e.g. {:?}) and {} groups of ten are not all found (e.g. {:?})",
            acked.len(),
            unread.len(),
            unread.first(),
            unfound.len(),
            unfound
                .first()
                .map(|g| g.iter().map(|(id, _, _)| id).collect::<Vec<_>>()),
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Lines of the daemon's log that contain `needle`.
fn log_lines(log: &Path, needle: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

#[test]
fn a_whole_root_on_a_small_disk_catches_up_without_a_restart_and_starts_on_a_full_disk() {
    let fs = Tmpfs::mount("16m");
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("serve.log");
    let (root, token) = served_root(&fs.path().join("root"));
    let daemon = Daemon::start(&root, &log);
    let clients = Clients::start(&daemon.addr, &token, (3, 2), 12, Duration::from_millis(40));
    let mut checked = 0;
    for episode in 0..3 {
        std::thread::sleep(Duration::from_millis(600));
        let filler = fill_disk(fs.path());
        std::thread::sleep(Duration::from_millis(800));
        std::fs::remove_file(&filler).unwrap();
        let space_back = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        // Every write acknowledged so far, including those around the
        // moment the disk filled, reads back within 5 s of space returning.
        let acked = clients.acked();
        assert_readable(
            &daemon.addr,
            &token,
            &acked[checked..],
            space_back + Duration::from_secs(5),
        );
        eprintln!(
            "episode {episode}: {} acknowledged so far, readable {:?} after space returned",
            acked.len(),
            space_back.elapsed()
        );
        checked = acked.len();
    }
    let (acked, refused) = clients.finish();
    assert!(refused > 0, "the disk never refused a write");
    assert!(acked.len() > 30, "only {} writes acknowledged", acked.len());
    assert_readable(
        &daemon.addr,
        &token,
        &acked,
        Instant::now() + Duration::from_secs(5),
    );
    let (status, health) =
        crate::wire::call(&daemon.addr, "GET", "/v1/health", Some(&token), &json!({}));
    assert_eq!(status, 200);
    assert_eq!(health["components"]["index"]["status"], "ok", "{health}");
    assert_eq!(health["issues"], 0, "{health}");
    assert!(daemon.stop().success());

    // A restart on a full disk: reads are served from the index as it was,
    // writes are refused, and resume by themselves once there is room.
    // Without its shared-memory file (a clean stop that closed the last
    // connection removes it) SQLite cannot open normally on a full disk.
    let _ = std::fs::remove_file(root.join("data/index/meta.db-shm"));
    let filler = fill_disk(fs.path());
    let daemon = Daemon::start(&root, &log);
    assert_eq!(log_lines(&log, "serving reads from the index as it is"), 1);
    let (id, text, word) = acked.last().unwrap().clone();
    daemon.assert_reads(&token, &id, &text);
    daemon.assert_finds(&token, &word, &id);
    let (status, v) = daemon.call(
        "/v1/write",
        &token,
        json!({ "text": "written on a full disk" }),
    );
    assert_eq!(
        (status, &v["error"]["code"]),
        (507, &json!("STORAGE_FULL")),
        "{v}"
    );
    let (_, health) =
        crate::wire::call(&daemon.addr, "GET", "/v1/health", Some(&token), &json!({}));
    assert_eq!(
        health["components"]["disk"]["status"], "degraded",
        "{health}"
    );
    std::fs::remove_file(&filler).unwrap();
    let space_back = Instant::now();
    let after = loop {
        let (status, v) = daemon.call(
            "/v1/write",
            &token,
            json!({ "text": "written once space returned" }),
        );
        if status == 200 {
            break v["id"].as_str().unwrap().to_string();
        }
        assert_eq!(status, 507, "{v}");
        assert!(
            space_back.elapsed() < Duration::from_secs(5),
            "writes did not resume: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let (status, v) = daemon.call("/v1/get", &token, json!({ "id": after }));
    assert_eq!(status, 200, "{v}");
    let (_, health) =
        crate::wire::call(&daemon.addr, "GET", "/v1/health", Some(&token), &json!({}));
    assert_eq!(health["components"]["index"]["status"], "ok", "{health}");
    assert!(daemon.stop().success());
    eprintln!(
        "log: {} index failures, {} catch-ups after a storage error",
        log_lines(&log, "index update failed"),
        log_lines(&log, "index caught up with the journal"),
    );
    // Failures that repeat on every request were logged a few times, not per request.
    for needle in [
        "cannot write audit line",
        "index update failed",
        "journal append failed",
    ] {
        let n = log_lines(&log, needle);
        assert!(n <= 6, "{needle:?} logged {n} times");
    }
}

#[test]
fn only_data_on_a_small_disk_refuses_writes_before_the_index_cannot_grow() {
    let home = tempfile::tempdir().unwrap();
    let (root, token) = served_root(&home.path().join("root"));
    std::fs::create_dir_all(root.join("data")).unwrap();
    let fs = Tmpfs::mount_at("8m", &root.join("data"));
    let log = home.path().join("serve.log");
    let daemon = Daemon::start(&root, &log);
    // Leave about 2.5 MiB: the writers reach the reserve in seconds.
    let filler = fill_disk(fs.path());
    let (free, _) = space(fs.path());
    shrink(&filler, 2_600_000u64.saturating_sub(free));
    let clients = Clients::start(&daemon.addr, &token, (2, 1), 400, Duration::ZERO);
    let start = Instant::now();
    while clients.refused.load(Ordering::SeqCst) < 20 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "writes were never refused ({} acknowledged)",
            clients.acked().len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (acked, _) = clients.finish();
    assert!(!acked.is_empty());
    // The index stopped growing before its file system was full.
    let (free, total) = space(fs.path());
    assert!(free >= total / 256, "only {free} bytes left of {total}");
    assert_readable(
        &daemon.addr,
        &token,
        &acked,
        Instant::now() + Duration::from_secs(5),
    );
    assert!(daemon.stop().success());

    // A restart on that disk serves reads and refuses writes ...
    let daemon = Daemon::start(&root, &log);
    let (id, text, word) = acked[acked.len() / 2].clone();
    daemon.assert_reads(&token, &id, &text);
    daemon.assert_finds(&token, &word, &id);
    // Writes are refused while data/ is below its reserve (stopping may
    // have given some back: the write-ahead log); one acknowledged reads back.
    let text = text_for("afterrestart", 400);
    let (status, v) = daemon.call("/v1/write", &token, json!({ "text": text }));
    match status {
        507 => assert_eq!(v["error"]["code"], "STORAGE_FULL", "{v}"),
        200 => {
            let id = v["id"].as_str().unwrap();
            let (status, v) = daemon.call("/v1/get", &token, json!({ "id": id }));
            assert_eq!((status, v["text"].as_str()), (200, Some(text.as_str())));
        }
        _ => panic!("{status} {v}"),
    }
    assert!(daemon.stop().success());
    // ... and so does one on that disk filled to the last byte, which
    // refuses every write until there is room.
    let _ = std::fs::remove_file(root.join("data/index/meta.db-shm"));
    let more = fill_disk_with(fs.path(), "more");
    let daemon = Daemon::start(&root, &log);
    let (status, v) = daemon.call("/v1/get", &token, json!({ "id": id }));
    assert_eq!(status, 200, "{v}");
    daemon.assert_finds(&token, &word, &id);
    let (status, v) = daemon.call("/v1/write", &token, json!({ "text": "on a full data/" }));
    assert_eq!(
        (status, &v["error"]["code"]),
        (507, &json!("STORAGE_FULL")),
        "{v}"
    );
    std::fs::remove_file(&more).unwrap();
    std::fs::remove_file(&filler).unwrap();
    let space_back = Instant::now();
    loop {
        let (status, v) = daemon.call("/v1/write", &token, json!({ "text": "room again on data" }));
        if status == 200 {
            break;
        }
        assert_eq!(status, 507, "{v}");
        assert!(
            space_back.elapsed() < Duration::from_secs(5),
            "writes did not resume: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(daemon);
}

/// Free and total bytes of the file system holding `path`.
fn space(path: &Path) -> (u64, u64) {
    let s = fs4::statvfs(path).unwrap();
    (s.available_space(), s.total_space())
}

/// Gives `bytes` of a filler back to its file system.
fn shrink(filler: &Path, bytes: u64) {
    let len = std::fs::metadata(filler).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(filler)
        .unwrap();
    f.set_len(len.saturating_sub(bytes)).unwrap();
}

#[tokio::test]
async fn an_as_of_read_that_would_eat_into_the_reserve_is_refused() {
    let api = Api::new();
    let owner = api.custom_token("owner", &["*", "read", "write"], &["main"]);
    let t0 = chrono::Utc::now() - chrono::Duration::days(3);
    for day in 0..3 {
        api.set_now(Some(t0 + chrono::Duration::days(day)));
        let text = text_for(&format!("harbor{day}"), 40);
        api.ok("/v1/write", &owner, json!({ "text": text })).await;
    }
    api.set_now(None);
    let tmp = api.root.path().join("data/tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let fs = Tmpfs::mount_at("8m", &tmp);
    // Just above the reserve (1 MiB of 8): not enough for an index.
    let filler = fill_disk(fs.path());
    let (free, _) = space(fs.path());
    shrink(&filler, (1024 * 1024 + 64 * 1024u64).saturating_sub(free));
    let at = (t0 + chrono::Duration::hours(1)).to_rfc3339();
    let body = json!({"query": "harbor0", "mode": "fulltext", "as_of": at});
    let (status, v) = api.post("/v1/search", &owner, body.clone()).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (507, &json!("STORAGE_FULL")),
        "{v}"
    );
    let left: Vec<_> = std::fs::read_dir(fs.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("asof-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // With room again, the same read is answered.
    std::fs::remove_file(&filler).unwrap();
    let v = api.ok("/v1/search", &owner, body).await;
    assert_eq!(v["hits"].as_array().unwrap().len(), 1, "{v}");
    drop(api);
    drop(fs);
}
