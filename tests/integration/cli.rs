//! The operator CLI through the real binary.

use memory_hub::config::Config;
use memory_hub::hub::{Hub, Mode};

use crate::support::TempRoot;

#[test]
fn write_then_search_chinese_and_english() {
    let root = TempRoot::new();
    let zh = root.memd_json(&["write", "--scene", "main", "--text", "我今天去公园散步了"]);
    assert_eq!(zh["action"], "ADD");
    let zh_id = zh["id"].as_str().unwrap().to_string();
    assert!(zh_id.starts_with("fact-main-"), "{zh_id}");
    let en = root.memd_json(&[
        "write",
        "--scene",
        "qq:owner",
        "--text",
        "Deployed the billing service on Friday",
        "--kind",
        "event",
        "--tags",
        "work,deploy",
        "--privacy",
        "personal",
    ]);
    let en_id = en["id"].as_str().unwrap();

    let hits = root.memd_json(&["search", "公园"]);
    assert_eq!(hits["hits"][0]["id"], zh_id.as_str());
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1);

    let hits = root.memd_json(&["search", "billing"]);
    assert_eq!(hits["hits"][0]["id"], en_id);
    assert_eq!(hits["hits"][0]["kind"], "event");
    assert_eq!(hits["hits"][0]["privacy"], "personal");
    assert_eq!(
        hits["hits"][0]["tags"],
        serde_json::json!(["work", "deploy"])
    );

    // A one-character query matches inside longer CJK runs.
    let hits = root.memd_json(&["search", "园"]);
    assert_eq!(hits["hits"][0]["id"], zh_id.as_str());

    // Scene restriction.
    let hits = root.memd_json(&["search", "billing", "--scene", "main"]);
    assert!(hits["hits"].as_array().unwrap().is_empty());

    // Plain output is human-readable and names the id.
    let out = root.memd(&["search", "散步"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&zh_id));

    let got = root.memd_json(&["get", &zh_id]);
    assert_eq!(got["text"], "我今天去公园散步了");
}

#[test]
fn forget_removes_from_search_and_keeps_the_journal_line() {
    let root = TempRoot::new();
    let id = root.memd_json(&[
        "write",
        "--scene",
        "main",
        "--text",
        "remember the blue umbrella",
    ])["id"]
        .as_str()
        .unwrap()
        .to_string();
    root.memd_json(&[
        "write",
        "--scene",
        "main",
        "--text",
        "the red umbrella stays",
    ]);
    let forgot = root.memd_json(&["forget", &id, "--reason", "wrong"]);
    assert_eq!(forgot["forgotten"], true);

    let ids = |root: &TempRoot| -> Vec<String> {
        root.memd_json(&["search", "umbrella"])["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!ids(&root).contains(&id));
    assert_eq!(ids(&root).len(), 1);
    let out = root.memd(&["get", &id, "--json"]);
    assert_eq!(out.status.code(), Some(3));

    std::fs::remove_dir_all(root.path().join("data")).unwrap();
    root.memd_json(&["reindex"]);
    assert!(!ids(&root).contains(&id));

    let lines = root.journal_lines();
    assert_eq!(lines.len(), 3);
    let original: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(original["op"], "put");
    assert_eq!(original["id"], id.as_str());
    assert_eq!(original["text"], "remember the blue umbrella");
    let tomb: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
    assert_eq!(tomb["op"], "forget");
    assert_eq!(tomb["id"], id.as_str());
    assert_eq!(tomb["reason"], "wrong");
    assert_eq!(tomb["v"], 1);

    // Forgetting twice is NOT_FOUND, not a second tombstone.
    let out = root.memd(&["forget", &id, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let env: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["error"]["code"], "NOT_FOUND");
    assert_eq!(root.journal_lines().len(), 3);
}

#[test]
fn bad_input_gets_a_stable_code_and_writes_nothing() {
    let root = TempRoot::new();
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["write", "--scene", "Main Room", "--text", "x"],
            "INVALID_INPUT",
            "scene",
        ),
        (
            &["write", "--scene", "main", "--text", "   "],
            "INVALID_INPUT",
            "empty",
        ),
        (
            &[
                "write",
                "--scene",
                "main",
                "--text",
                "x",
                "--privacy",
                "public",
            ],
            "INVALID_INPUT",
            "privacy",
        ),
        (
            &["write", "--scene", "main", "--text", "x", "--kind", "a b"],
            "INVALID_INPUT",
            "kind",
        ),
        (
            &[
                "write",
                "--scene",
                "main",
                "--text",
                "x",
                "--importance",
                "2",
            ],
            "INVALID_INPUT",
            "importance",
        ),
        (
            &[
                "write",
                "--scene",
                "qq:group:1",
                "--text",
                "x",
                "--privacy",
                "secret",
            ],
            "INVALID_INPUT",
            "secret",
        ),
        (
            &[
                "write",
                "--scene",
                "main",
                "--text",
                "x",
                "--supersedes",
                "fact-nope",
            ],
            "NOT_FOUND",
            "fact-nope",
        ),
        (&["forget", "doc-12345678"], "INVALID_INPUT", "document"),
        (
            &["write", "--scene", "main", "--text", "db password=hunter22"],
            "INVALID_INPUT",
            "credential",
        ),
        (
            &[
                "write",
                "--scene",
                "main",
                "--text",
                "-----BEGIN PRIVATE KEY-----\nabc",
            ],
            "INVALID_INPUT",
            "private key",
        ),
        (
            &["write", "--scene", "main", "--text", "x", "--tier", "t9"],
            "INVALID_INPUT",
            "tier",
        ),
        (&["search", "  "], "INVALID_INPUT", "query"),
        (&["search", "x", "--limit", "0"], "INVALID_INPUT", "limit"),
    ];
    for (args, code, needle) in cases {
        let mut all = args.to_vec();
        all.push("--json");
        let out = root.memd(&all);
        assert!(!out.status.success(), "{args:?} should fail");
        let env: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(env["error"]["code"], *code, "{args:?}: {env}");
        let msg = env["error"]["message"].as_str().unwrap();
        assert!(msg.to_lowercase().contains(needle), "{args:?}: {msg}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(code));
    }
    assert!(root.journal_lines().is_empty());
    // A limit above search.maxLimit is lowered to it, as over HTTP (one rule
    // in the search use case), and the CLI says so on stderr.
    let out = root.memd(&["search", "x", "--limit", "500"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("500; max="), "{stderr}");
}

#[test]
fn second_writer_gets_root_locked_and_readers_still_work() {
    let root = TempRoot::new();
    root.memd_json(&["write", "--scene", "main", "--text", "lock holder test"]);
    let holder = Hub::open(root.layout(), Config::default(), Mode::Write).unwrap();
    let out = root.memd(&["write", "--scene", "main", "--text", "blocked", "--json"]);
    assert_eq!(out.status.code(), Some(5));
    let env: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["error"]["code"], "ROOT_LOCKED");
    assert_eq!(env["error"]["retryable"], true);
    assert!(
        env["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&std::process::id().to_string())
    );
    let out = root.memd(&["reindex", "--json"]);
    assert_eq!(out.status.code(), Some(5));
    // Reads work next to the writer.
    let hits = root.memd_json(&["search", "holder"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1);
    let stats = root.memd_json(&["stats"]);
    assert_eq!(stats["writer"], false);
    drop(holder);
    root.memd_json(&["write", "--scene", "main", "--text", "now allowed"]);
}

#[test]
fn stats_json_and_root_flag() {
    let root = TempRoot::new();
    let r = root.path().to_str().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memd"))
        .args([
            "--root", r, "write", "--scene", "pet", "--text", "meow", "--json",
        ])
        .env_remove("MEMD_ROOT")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = root.memd_json(&["stats"]);
    assert_eq!(stats["facts"], 1);
    assert_eq!(stats["by_scene"]["pet"], 1);
    assert_eq!(stats["journal_files"], 1);
    assert!(stats["index_bytes"].as_u64().unwrap() > 0);
}

/// Runs the binary with a stdout whose reader is already gone, as in
/// `memd stats | head -c 10` once `head` has exited.
fn memd_into_closed_pipe(root: &TempRoot, args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    std::process::Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(args)
        .env("MEMD_ROOT", root.path())
        .env("MEMD_MODELS_DIR", root.path().join("no-models"))
        .env_remove("MEMD_LOG")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run memd")
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let root = TempRoot::new();
    let id = root.memd_json(&["write", "--scene", "main", "--text", "pipe survivor"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    root.memd_json(&["token", "issue", "--name", "t", "--preset", "pet"]);
    for args in [
        vec!["--json", "stats"],
        vec!["stats"],
        vec!["search", "pipe"],
        vec!["--json", "search", "pipe"],
        vec!["get", &id],
        vec!["token", "list"],
        vec![
            "write",
            "--scene",
            "main",
            "--text",
            "written before the pipe broke",
        ],
        // An error envelope on a closed stdout: still no panic.
        vec!["--json", "get", "fact-main-missing"],
    ] {
        let out = memd_into_closed_pipe(&root, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
        if args.contains(&"fact-main-missing") {
            assert!(stderr.contains("NOT_FOUND"), "{args:?}: {stderr}");
            continue;
        }
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("error["),
            "{args:?} exits quietly: {stderr}"
        );
    }
    // The write was done before its id could not be printed.
    let found = root.memd_json(&["search", "broke"]);
    assert_eq!(found["hits"].as_array().unwrap().len(), 1, "{found}");
}

/// Red-team finding: `memd search` and `memd get` showed expired short-term
/// memories that every HTTP reader hides.
#[test]
fn cli_reads_never_show_expired_short_term_memories() {
    let root = TempRoot::new();
    let file = root.path().join("old.jsonl");
    std::fs::write(
        &file,
        r#"{"op":"put","v":1,"id":"chat-main-old1-abcd","ts":"2001-01-01T00:00:00Z","scene":"main","kind":"chat","stage":"short","text":"expired zebra chat line","privacy":"normal","subject":"owner","source":"x","importance":0.5,"expires_at":"2001-01-02T00:00:00Z","device":"d"}
"#,
    )
    .unwrap();
    let out = root.memd(&["import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let v = root.memd_json(&["search", "zebra", "--mode", "fulltext"]);
    assert_eq!(v["hits"], serde_json::json!([]), "{v}");
    let out = root.memd(&["get", "chat-main-old1-abcd"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // The journal still holds it: the archive finds it.
    let out = root.memd(&["archive", "search", "zebra"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("chat-main-old1-abcd"),
        "{out:?}"
    );
}
