//! Restore drill: write a corpus, back up, delete the root, restore, reindex:
//! every file byte-identical and every search result the same.

use std::collections::BTreeMap;
use std::path::Path;

use memory_hub::hub::WriteRequest;
use memory_hub::index::filter::Filter;

use crate::support::{TempRoot, scene, search_ids};

const QUERIES: &[&str] = &["公园", "coffee", "budget plan", "猫", "trip"];

fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.join("memories")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    for name in ["config.json", "tokens.json"] {
        if let Ok(b) = std::fs::read(root.join(name)) {
            out.insert(name.into(), b);
        }
    }
    out
}

#[test]
fn restore_drill_is_byte_identical_and_searches_the_same() {
    let root = TempRoot::new();
    std::fs::write(
        root.path().join("config.json"),
        r#"{"search": {"defaultLimit": 7}}"#,
    )
    .unwrap();
    root.write_doc("notes/trip.md", "# Trip\nA trip to the 公园 with coffee.\n");
    let before = {
        let hub = root.hub();
        let mut ids = Vec::new();
        for (i, text) in [
            "我今天去公园散步了",
            "coffee with the team",
            "budget plan for 2027",
            "猫在睡觉",
            "trip planning",
        ]
        .iter()
        .cycle()
        .take(40)
        .enumerate()
        {
            let mut req = WriteRequest::new(
                scene(if i % 2 == 0 { "main" } else { "qq:owner" }),
                format!("{text} #{i}"),
                "test",
            );
            req.tags = vec![format!("n{i}")];
            ids.push(hub.write(req).unwrap().id);
        }
        hub.forget(&ids[3], None, "test", &Filter::all()).unwrap();
        QUERIES
            .iter()
            .map(|q| search_ids(&hub, q, 10))
            .collect::<Vec<_>>()
    };
    let files_before = files_under(root.path());
    let backups = tempfile::tempdir().unwrap();
    let created = root.memd_json(&[
        "backup",
        "create",
        "--out",
        backups.path().to_str().unwrap(),
    ]);
    let archive = created["path"].as_str().unwrap().to_string();
    assert_eq!(created["manifest"]["journal_lines"], 41);
    assert_eq!(root.memd_json(&["backup", "verify", &archive])["ok"], true);
    let listed = root.memd_json(&["backup", "list", "--dir", backups.path().to_str().unwrap()]);
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // Lose everything, then restore into the same place.
    std::fs::remove_dir_all(root.path()).unwrap();
    let restored = root.memd_json(&["backup", "restore", &archive]);
    assert_eq!(restored["records"], 41);
    assert_eq!(files_under(root.path()), files_before);
    let hub = root.hub();
    let after: Vec<_> = QUERIES.iter().map(|q| search_ids(&hub, q, 10)).collect();
    assert_eq!(after, before);
    let config = memory_hub::config::Config::load(&root.layout()).unwrap();
    assert_eq!(config.search.default_limit, 7, "config.json came back too");
}

#[test]
fn damaged_archive_is_refused_and_restore_needs_the_lock() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        crate::support::write(&hub, "main", "something worth keeping");
    }
    let backups = tempfile::tempdir().unwrap();
    let archive = root.memd_json(&[
        "backup",
        "create",
        "--out",
        backups.path().to_str().unwrap(),
    ])["path"]
        .as_str()
        .unwrap()
        .to_string();

    // Restore is refused while another process writes the root.
    let holder = root.hub();
    let out = root.memd(&["backup", "restore", &archive, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(holder);

    let mut bytes = std::fs::read(&archive).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&archive, &bytes).unwrap();
    for cmd in ["verify", "restore"] {
        let out = root.memd(&["backup", cmd, &archive, "--json"]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let env: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(env["error"]["code"], "INVALID_INPUT");
        assert!(
            env["error"]["message"]
                .as_str()
                .unwrap()
                .contains("damaged")
        );
    }
    // The refused restore left the root untouched.
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "worth keeping", 5).len(), 1);
}
