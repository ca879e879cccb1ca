//! `memd doctor` on healthy and broken roots.

use crate::support::{TempRoot, assert_ok, doctor_check, write};

fn doctor(root: &TempRoot, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["doctor", "--json"];
    args.extend(extra);
    // With the installed model (scripts/setup.sh), as on a real machine.
    let out = root.memd_with_models(&args);
    let report = serde_json::from_slice(&out.stdout).expect("doctor prints one JSON document");
    (out.status.code().unwrap(), report)
}

fn status<'a>(report: &'a serde_json::Value, name: &str) -> &'a str {
    doctor_check(report, name)["status"].as_str().unwrap()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "counts the installed model as ready (scripts/setup.sh)"
)]
#[test]
fn healthy_root_is_ready() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        write(&hub, "main", "doctor test memory");
    }
    // Point the daemon check at a closed port so it is a warning, not a hang.
    root.write_config(r#"{"listen": "127.0.0.1:9"}"#);
    let (code, report) = doctor(&root, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["ready"], true);
    for name in [
        "model",
        "config",
        "directories",
        "writer_lock",
        "tokens",
        "journal",
        "index",
        "vector_side_file",
        "documents",
    ] {
        assert_eq!(status(&report, name), "ok", "{name}: {report}");
    }
    assert_eq!(status(&report, "daemon"), "warn");
    // The lexicon is optional: a warning when absent, never a failure.
    assert_ne!(status(&report, "lexicon"), "fail", "{report}");
    let (code, shallow) = doctor(&root, &["--shallow"]);
    assert_eq!(code, 0);
    assert!(
        shallow["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "daemon")
    );
}

#[test]
fn a_missing_model_is_named() {
    let root = TempRoot::new();
    root.write_config(r#"{"embedder": {"modelDir": "/nonexistent/model"}}"#);
    let (code, report) = doctor(&root, &["--shallow"]);
    assert_eq!(code, 1);
    assert_eq!(status(&report, "model"), "fail");
    let model = doctor_check(&report, "model");
    assert!(
        model["detail"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/model"),
        "{model}"
    );
    assert!(model["hint"].as_str().unwrap().contains("memd setup"));
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "counts the installed model as ready (scripts/setup.sh)"
)]
#[test]
fn broken_roots_name_the_fault() {
    let root = TempRoot::new();
    root.write_config(r#"{"search": {"maxLimit": "ten"}}"#);
    let (code, report) = doctor(&root, &["--shallow"]);
    assert_eq!(code, 1);
    assert_eq!(report["ready"], false);
    assert_eq!(status(&report, "config"), "fail");
    let config = doctor_check(&report, "config");
    assert!(
        config["detail"]
            .as_str()
            .unwrap()
            .contains("config.json: invalid type"),
        "{config}"
    );
    assert!(
        config["hint"]
            .as_str()
            .unwrap()
            .contains("config.example.json")
    );

    let root = TempRoot::new();
    std::fs::write(root.path().join("data"), "not a dir").unwrap();
    let (code, report) = doctor(&root, &["--shallow"]);
    assert_eq!(code, 1);
    assert_eq!(status(&report, "directories"), "fail");

    let root = TempRoot::new();
    {
        let hub = root.hub();
        write(&hub, "main", "fine line");
    }
    let file = root.journal_files().remove(0);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"garbage\n"))
        .unwrap();
    std::fs::write(root.path().join("tokens.json"), "{oops").unwrap();
    let (code, report) = doctor(&root, &["--shallow"]);
    assert_eq!(code, 1);
    assert_eq!(status(&report, "tokens"), "fail");
    std::fs::remove_file(root.path().join("tokens.json")).unwrap();
    root.write_config(r#"{"listen": "127.0.0.1:9"}"#);
    let (code, report) = doctor(&root, &[]);
    assert_eq!(code, 0, "a bad journal line is a warning: memd skips it");
    assert_eq!(status(&report, "journal"), "warn");
    let journal = doctor_check(&report, "journal");
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        journal["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("{name}:2:")),
        "{journal}"
    );
    assert_eq!(
        status(&report, "index"),
        "warn",
        "the bad line is not applied yet"
    );
}

#[test]
fn the_service_installer_writes_a_restarting_unit() {
    let home = tempfile::tempdir().unwrap();
    let root = TempRoot::new();
    assert_ok(
        std::process::Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/install-service.sh"
            ))
            .args([
                "--root",
                root.path().to_str().unwrap(),
                "--bin",
                env!("CARGO_BIN_EXE_memd"),
                "--no-enable",
            ])
            .env("XDG_CONFIG_HOME", home.path())
            .output()
            .unwrap(),
    );
    let unit = std::fs::read_to_string(home.path().join("systemd/user/memd.service")).unwrap();
    assert!(
        unit.contains(&format!("ExecStart={} serve", env!("CARGO_BIN_EXE_memd"))),
        "{unit}"
    );
    assert!(
        unit.contains(&format!(
            "Environment=MEMD_ROOT={}",
            root.path().canonicalize().unwrap().display()
        )),
        "{unit}"
    );
    assert!(unit.contains("Restart=always"));
    assert!(unit.contains("WantedBy=default.target"));
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "counts the installed model as ready (scripts/setup.sh)"
)]
#[test]
fn doctor_reads_documents_itself() {
    // A bad file added while no writer runs is reported before any index sees it.
    let root = TempRoot::new();
    root.write_config(r#"{"listen": "127.0.0.1:9"}"#);
    root.write_doc("fine.md", "# Fine\nok\n");
    let (_, report) = doctor(&root, &[]);
    assert_eq!(status(&report, "documents"), "ok", "{report}");
    root.write_doc("notes/open.md", "---\nprivacy: secret\nno closing fence\n");
    std::os::unix::fs::symlink("/etc/hostname", root.path().join("memories/link.md")).unwrap();
    let (code, report) = doctor(&root, &[]);
    assert_eq!(code, 0, "a document problem is a warning: {report}");
    assert_eq!(status(&report, "documents"), "warn", "{report}");
    let detail = doctor_check(&report, "documents")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.starts_with("2 documents not indexed: link.md: symbolic link"),
        "{detail}"
    );
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "counts the installed model as ready (scripts/setup.sh)"
)]
#[test]
fn a_shallow_check_sees_a_missing_index_a_lagging_one_and_a_damaged_membership_table() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        write(&hub, "main", "shallow doctor memory");
    }
    let (code, report) = doctor(&root, &["--shallow"]);
    assert_eq!(
        (code, &report["ready"]),
        (0, &serde_json::json!(true)),
        "{report}"
    );
    assert_eq!(status(&report, "index"), "ok", "{report}");
    assert_eq!(status(&report, "members"), "ok", "{report}");

    // Lines the index has not applied: a warning with the byte count.
    let facts = root.path().join("memories/facts/laptop-0a1b2c");
    std::fs::create_dir_all(&facts).unwrap();
    std::fs::write(
        facts.join("2026-11.jsonl"),
        r#"{"op":"put","v":1,"id":"fact-main-laptop-1","ts":"2026-11-30T08:00:00Z","scene":"main","kind":"note","stage":"long","text":"from the laptop","privacy":"normal","subject":"owner","source":"laptop","importance":0.5}
"#,
    )
    .unwrap();
    let (_, report) = doctor(&root, &["--shallow"]);
    assert_eq!(status(&report, "index"), "warn", "{report}");

    // The metadata store deleted: not ready.
    std::fs::remove_file(root.path().join("data/index/meta.db")).unwrap();
    let (code, report) = doctor(&root, &["--shallow"]);
    assert_ne!(code, 0, "{report}");
    assert_eq!(report["ready"], false, "{report}");
    assert_eq!(status(&report, "index"), "fail", "{report}");

    // A damaged membership table: disclosure refuses everything, so not ready.
    let members = root.path().join("memories/groups/members.json");
    std::fs::create_dir_all(members.parent().unwrap()).unwrap();
    std::fs::write(&members, "{\"version\": 1, \"groups\": ").unwrap();
    let (_, report) = doctor(&root, &["--shallow"]);
    assert_eq!(status(&report, "members"), "fail", "{report}");
}
