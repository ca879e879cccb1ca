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

use serde_json::{Value, json};

use crate::http_support::Api;
use crate::support::TempRoot;

/// A small tmpfs, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test needs `mount -t tmpfs` (run it as root, as CI does): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Fills the file system holding `path` to the last byte; returns the filler.
fn fill_disk(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
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
