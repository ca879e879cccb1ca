//! Symbolic links under `memories/` are never followed (issue 30, item 6):
//! a linked peer journal is not indexed, memd never appends through a link
//! (nor creates a dangling link's target), backups say which links they
//! leave out, doctor names each link and health counts them.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{TempRoot, search_ids};
use crate::wire::call;

fn ok(out: std::process::Output) -> std::process::Output {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

fn put_line(id: &str, text: &str, device: &str) -> String {
    json!({
        "op": "put", "v": 1, "id": id, "ts": "2026-06-01T08:00:00Z", "scene": "main",
        "kind": "note", "stage": "long", "text": text, "privacy": "normal",
        "subject": "owner", "source": "sync", "importance": 0.5, "tier": "t2",
        "device": device,
    })
    .to_string()
}

/// A peer's journal outside the root: `peer/2026-06.jsonl`.
fn outside_journal(dir: &Path, text: &str) -> PathBuf {
    let peer = dir.join("peer");
    std::fs::create_dir_all(&peer).unwrap();
    let file = peer.join("2026-06.jsonl");
    std::fs::write(
        &file,
        format!("{}\n", put_line("fact-main-peer-0001", text, "peer")),
    )
    .unwrap();
    file
}

/// This root's device directory (after a first write).
fn own_device_dir(root: &TempRoot) -> PathBuf {
    std::fs::read_dir(root.path().join("memories/facts"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "archive"))
        .expect("a device directory")
}

/// Issue 30 (6): a journal linked in from outside the root (a whole device
/// directory, or one month file) is not indexed; doctor names each link,
/// health counts them and marks the journal degraded.
#[test]
fn issue_30_linked_peer_journals_are_not_indexed_and_are_reported() {
    let root = TempRoot::new();
    let outside = tempfile::tempdir().unwrap();
    let file = outside_journal(
        outside.path(),
        "the linked peer says the vault code is hidden",
    );
    let facts = root.path().join("memories/facts");
    std::fs::create_dir_all(facts.join("tablet")).unwrap();
    symlink(file.parent().unwrap(), facts.join("peer")).unwrap();
    symlink(&file, facts.join("tablet/2026-06.jsonl")).unwrap();

    let hub = root.hub();
    assert!(
        search_ids(&hub, "vault code", 10).is_empty(),
        "a linked journal is not read"
    );
    let health = serde_json::to_value(hub.health().unwrap()).unwrap();
    assert_eq!(health["links"], 2, "{health}");
    assert_eq!(health["components"]["journal"]["status"], "degraded");
    let detail = health["components"]["journal"]["detail"].as_str().unwrap();
    assert!(detail.contains("2 symbolic links not followed"), "{detail}");
    drop(hub);

    let doctor: Value = serde_json::from_slice(&root.memd(&["doctor", "--json"]).stdout).unwrap();
    let links = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "links")
        .unwrap_or_else(|| panic!("no links check: {doctor}"));
    assert_eq!(links["status"], "warn", "{links}");
    let text = links.to_string();
    assert!(
        text.contains("facts/peer") && text.contains("facts/tablet/2026-06.jsonl"),
        "{text}"
    );
}

/// Issue 30 (6): memd never appends its own journal through a link: with
/// its month file linked elsewhere, a write is refused, naming the link,
/// and the target is unchanged; with a dangling link, its target is never
/// created. Through the CLI and through a running server on loopback.
#[test]
fn issue_30_memd_never_appends_or_creates_through_a_link() {
    let root = TempRoot::new();
    ok(root.memd(&["write", "--scene", "main", "--text", "first note"]));
    let device = own_device_dir(&root);
    let month = chrono::Utc::now().format("%Y-%m.jsonl").to_string();
    let own = device.join(&month);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("elsewhere.jsonl");
    std::fs::write(&target, "").unwrap();
    // The real file moves away; a link takes its name.
    std::fs::rename(&own, outside.path().join("moved.jsonl")).unwrap();
    symlink(&target, &own).unwrap();

    let out = root.memd(&["write", "--scene", "main", "--text", "a second note"]);
    assert!(
        !out.status.success(),
        "a write through a link was acknowledged"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "",
        "nothing appended through the link"
    );

    // A dangling link: the same refusal, and its target is never created.
    std::fs::remove_file(&own).unwrap();
    let gone = outside.path().join("never-created.jsonl");
    symlink(&gone, &own).unwrap();
    let owner = root.memd_json(&[
        "token",
        "issue",
        "--name",
        "owner",
        "--preset",
        "dsh-desktop",
    ])["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let served = root.serve();
    let (status, v) = call(
        &served.addr,
        "POST",
        "/v1/write",
        Some(&owner),
        &json!({"text": "a third note"}),
    );
    assert!(status >= 500, "{status} {v}");
    assert!(!gone.exists(), "the dangling link's target was created");
    drop(served);
    let out = root.memd(&["write", "--scene", "main", "--text", "a fourth note"]);
    assert!(!out.status.success());
    assert!(!gone.exists());
}

/// Issue 30 (6): a backup leaves links out and says so: in its manifest
/// and in what `memd backup create` prints.
#[test]
fn issue_30_backups_report_the_links_they_leave_out() {
    let root = TempRoot::new();
    ok(root.memd(&["write", "--scene", "main", "--text", "the kettle is blue"]));
    let outside = tempfile::tempdir().unwrap();
    let file = outside_journal(outside.path(), "a linked journal");
    symlink(
        file.parent().unwrap(),
        root.path().join("memories/facts/peer"),
    )
    .unwrap();
    std::fs::write(outside.path().join("note.md"), "# Linked\n").unwrap();
    symlink(
        outside.path().join("note.md"),
        root.path().join("memories/linked.md"),
    )
    .unwrap();

    let dir = root.path().join("b");
    let made = root.memd_json(&["backup", "create", "--out", dir.to_str().unwrap()]);
    assert_eq!(
        made["manifest"]["links_left_out"],
        json!(["memories/facts/peer", "memories/linked.md"]),
        "{made}"
    );
    assert!(
        made["manifest"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !f["path"].as_str().unwrap().contains("peer")),
        "{made}"
    );
    let out = ok(root.memd(&["backup", "create", "--out", dir.to_str().unwrap()]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 symbolic links under memories/ left out")
            && text.contains("memories/linked.md"),
        "{text}"
    );
    // The archive verifies, and the links are still named when it is listed.
    ok(root.memd(&["backup", "verify", made["path"].as_str().unwrap()]));
}
