//! Credentials on every path in (issue 30, item 5): the probe set, every
//! field of a write, a forget, an ingest and a membership change over HTTP
//! on a real `memd serve`, a peer device's journal lines and a `--foreign`
//! restore that extends a journal (quarantined on replay, never served),
//! Markdown documents (quarantined, not copied by an import), and journal
//! imports. A refusal never shows the value: not in the reply, the log or
//! the audit line.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memory_hub::content::detect_credential;
use memory_hub::index::filter::Filter;
use serde_json::{Value, json};

use crate::support::{Served, TempRoot, search_ids};
use crate::wire::call;

/// Tokens shaped like the real ones, invented for these tests.
const GITHUB: &str = "ghp_R7kQ2mZx9LvT4wN8bY3cF6hJ1sD5gA0pE2uK";
const MH_HEX: &str = "6488cf3a6b1d4e2f8a9c0b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f";

/// The kinds of credential the issue found stored as ordinary memories.
fn issue_probes() -> Vec<String> {
    let dashed: Vec<&str> = (0..4).map(|i| &MH_HEX[i * 16..i * 16 + 16]).collect();
    vec![
        "The password for my MySQL box: mysql -u root -phunter2".into(),
        "curl -u user:pass https://api.internal.example/v1/export".into(),
        format!("memd token mh_{}", dashed.join("-")),
        format!("memd token mh_{}\n{}", &MH_HEX[..30], &MH_HEX[30..]),
        "Aliyun AccessKey ID LTAI5tQ7kZx9mLvT4wN8bY3c for the OSS bucket".into(),
        "腾讯云 SecretId: AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA".into(),
        "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=q8Vt3kR2mZx9LvT4wN8bY3cF6hJ1sD5gA0pE2uKq8Vt3kR2mZx9LvT4wN8bY3cF6hJ1sD5gA0pE2uKq8Vt3kR2mZx9==;EndpointSuffix=core.windows.net".into(),
        "SENDGRID_API_KEY=SG.q8Vt3kR2mZx9LvT4wN8bY3.cF6hJ1sD5gA0pE2uKq8Vt3kR2mZx9LvT4wN8bY3cF6hJ".into(),
        "telegram bot 5829301746:AAq8Vt3kR2mZx9LvT4wN8bY3cF6hJ1sD5gA".into(),
        "discord bot MTA5NzY4OTQyMzE1NjgzMjMwOA.GhT3kQ.q8Vt3kR2mZx9LvT4wN8bY3cF6hJ1sD5gA0pE".into(),
    ]
}

/// The probe set: at least 100 credentials and 100 hard benign lines, in
/// English and Chinese; at least 95% of the credentials refused and not
/// one benign line.
#[test]
fn probe_set_refuses_credentials_and_keeps_every_benign_line() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/credential-probes.jsonl"),
    )
    .unwrap();
    let (mut refused, mut credentials, mut benign) = (0usize, 0usize, 0usize);
    let mut missed = Vec::new();
    let mut wrongly = Vec::new();
    let mut langs = std::collections::BTreeSet::new();
    for line in text.lines() {
        let probe: Value = serde_json::from_str(line).unwrap();
        let text = probe["text"].as_str().unwrap();
        langs.insert((
            probe["label"].as_str().unwrap().to_string(),
            probe["lang"].as_str().unwrap().to_string(),
        ));
        let hit = detect_credential(text);
        match probe["label"].as_str().unwrap() {
            "credential" => {
                credentials += 1;
                match hit {
                    Some(_) => refused += 1,
                    None => missed.push(text.to_string()),
                }
            }
            "benign" => {
                benign += 1;
                if let Some(what) = hit {
                    wrongly.push(format!("{text} ({what})"));
                }
            }
            other => panic!("unknown label {other}"),
        }
    }
    let rate = refused as f64 / credentials as f64;
    eprintln!(
        "credential probes: {refused}/{credentials} refused ({:.1}%), {}/{benign} benign lines refused",
        rate * 100.0,
        wrongly.len()
    );
    assert!(
        credentials >= 100 && benign >= 100,
        "{credentials} / {benign}"
    );
    for label in ["credential", "benign"] {
        for lang in ["en", "zh"] {
            assert!(
                langs.contains(&(label.into(), lang.into())),
                "no {lang} {label} probes"
            );
        }
    }
    assert!(rate >= 0.95, "missed: {missed:#?}");
    assert!(wrongly.is_empty(), "benign lines refused: {wrongly:#?}");
    for probe in issue_probes() {
        assert!(detect_credential(&probe).is_some(), "{probe}");
    }
}

/// `memd serve` with its log in a file we can search afterwards.
fn serve_logged(root: &TempRoot) -> (Served, std::path::PathBuf) {
    let log = root.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("MEMD_ROOT", root.path())
        .env("MEMD_MODELS_DIR", root.path().join("no-models"))
        .env("MEMD_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start memd serve");
    let addr = crate::support::serve_addr(&mut child);
    (Served { child, addr }, log)
}

fn issue(root: &TempRoot, name: &str, preset: &str) -> String {
    root.memd_json(&["token", "issue", "--name", name, "--preset", preset])["secret"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A refusal: 400 `INVALID_INPUT` naming `field`, without the value.
fn refused(reply: (u16, Value), field: &str, secret: &str) {
    let (status, v) = reply;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("INVALID_INPUT")),
        "{field}: {v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(field), "{field}: {message}");
    assert!(
        !v.to_string().contains(secret),
        "{field}: the refusal echoes it: {v}"
    );
}

/// Issue 30 (5): every field of a write, a forget's reason, every field of
/// an ingest and of a membership change, over HTTP on a real server: each
/// credential is refused without echo, and nothing of it reaches the
/// journal, the membership table, the index, the log or the audit lines.
#[test]
fn issue_30_credentials_are_refused_in_every_field_over_http() {
    let root = TempRoot::new();
    let owner = issue(&root, "owner", "dsh-desktop");
    let group = issue(&root, "group", "qq-group-42");
    let (served, log) = serve_logged(&root);
    let addr = served.addr.clone();
    let post = |token: &str, path: &str, body: Value| call(&addr, "POST", path, Some(token), &body);

    // The kinds the issue found stored, in the text.
    for probe in issue_probes() {
        refused(
            post(&owner, "/v1/write", json!({"text": probe})),
            "text",
            "hunter2",
        );
    }
    // Every other field of a write.
    for field in ["speaker", "session", "time", "idempotency_key", "title"] {
        let body = json!({"text": format!("likes green tea ({field})"), field: GITHUB});
        refused(post(&owner, "/v1/write", body), field, GITHUB);
    }
    refused(
        post(
            &owner,
            "/v1/write",
            json!({"text": "likes green tea", "tags": ["ok", GITHUB]}),
        ),
        "tags",
        GITHUB,
    );
    // A forget's reason: refused, and the memory stays.
    let (status, kept) = post(&owner, "/v1/write", json!({"text": "the kettle is blue"}));
    assert_eq!(status, 200, "{kept}");
    let id = kept["id"].as_str().unwrap().to_string();
    refused(
        post(
            &owner,
            "/v1/forget",
            json!({"id": id, "reason": format!("leaked {GITHUB}")}),
        ),
        "reason",
        GITHUB,
    );
    // An ingest: text, message id, sender id and name, session.
    let message = |extra: Value| {
        let mut body = json!({"message_id": "m-1", "text": "明天下午三点开会",
            "sender": {"id": "10001", "name": "小王"}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    for (field, extra) in [
        ("text", json!({"text": format!("token {GITHUB}")})),
        ("message_id", json!({"message_id": GITHUB})),
        ("session", json!({"session": GITHUB})),
        (
            "sender.id",
            json!({"sender": {"id": GITHUB, "name": "小王"}}),
        ),
        (
            "sender.name",
            json!({"sender": {"id": "10001", "name": GITHUB}}),
        ),
    ] {
        refused(post(&group, "/v1/ingest", message(extra)), field, GITHUB);
    }
    // Membership events: ids and names.
    refused(
        post(&group, "/v1/members", json!({"add": [GITHUB]})),
        "member id",
        GITHUB,
    );
    refused(
        post(
            &group,
            "/v1/members",
            json!({"add": [{"id": "10002", "name": GITHUB}]}),
        ),
        "member name",
        GITHUB,
    );
    refused(
        post(
            &group,
            "/v1/members",
            json!({"set": [{"id": "10002", "name": format!("pw {GITHUB}")}]}),
        ),
        "member name",
        GITHUB,
    );
    // Benign lines go in as before.
    for text in [
        "I forgot my password yesterday",
        "密码学课程很有意思",
        "commit 3f2c9a1b7e4d8f6a0c5b2e9d1a7f3c8b6e4d2a0f",
    ] {
        let (status, v) = post(&owner, "/v1/write", json!({"text": text}));
        assert_eq!(
            (status, v["action"].as_str()),
            (200, Some("ADD")),
            "{text}: {v}"
        );
    }
    let (status, v) = post(&group, "/v1/ingest", message(json!({})));
    assert_eq!((status, v["action"].as_str()), (200, Some("ADD")), "{v}");
    let (status, found) = post(&owner, "/v1/search", json!({"query": "ghp"}));
    assert_eq!(status, 200);
    assert_eq!(found["hits"].as_array().map(Vec::len), Some(0), "{found}");
    drop(served);

    let secrets = [
        GITHUB,
        "hunter2",
        "user:pass",
        "LTAI5tQ7k",
        "AKIDz8krb",
        "SG.q8Vt3",
        MH_HEX,
        &MH_HEX[..30],
    ];
    let journal = root.journal_lines().join("\n");
    let members = std::fs::read_to_string(root.path().join("memories/groups/members.json"))
        .unwrap_or_default();
    let audit = std::fs::read_to_string(root.path().join("data/audit.jsonl")).unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        audit.contains("/v1/write") && logged.contains("POST /v1/write"),
        "{logged}"
    );
    for secret in secrets {
        for (place, text) in [
            ("journal", &journal),
            ("members", &members),
            ("audit", &audit),
            ("log", &logged),
        ] {
            assert!(!text.contains(secret), "{secret} in the {place}");
        }
    }
    assert!(journal.contains("the kettle is blue") && members.contains("10001"));
}

/// A `put` line as another device writes it (an older build, a hand edit).
fn peer_line(id: &str, scene: &str, text: &str, extra: Value) -> String {
    let mut v = json!({
        "op": "put", "v": 1, "id": id, "ts": "2026-06-01T08:00:00Z",
        "at": "2026-06-01T08:00:00Z", "scene": scene, "kind": "chat", "stage": "long",
        "text": text, "privacy": "normal", "subject": "other", "source": "qq",
        "importance": 0.5, "tier": "t2", "device": "laptop",
    });
    for (k, val) in extra.as_object().unwrap() {
        v[k] = val.clone();
    }
    v.to_string()
}

/// Polls `f` until it is true (a running server catches up on its own).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Issue 30 (5): a peer device's journal lines that hold a credential (in
/// the text, in `speaker`) arrive at a running server: they are
/// quarantined, reported in health, stats and doctor, and never served to
/// the group's token, while the clean line beside them is; a forget whose
/// reason holds one still forgets.
#[test]
fn issue_30_replayed_peer_lines_with_credentials_are_quarantined_not_served() {
    let root = TempRoot::new();
    let owner = issue(&root, "owner", "dsh-desktop");
    let group = issue(&root, "group", "qq-group-42");
    let served = root.serve();
    let addr = served.addr.clone();
    let scene = "qq:group:42";
    let lines = [
        peer_line(
            "chat-qq-group-42-mqz8k2p1-0001",
            scene,
            "周六去爬山，带水",
            json!({}),
        ),
        peer_line(
            "chat-qq-group-42-mqz8k2p1-0002",
            scene,
            &format!("repo token {GITHUB} for the bot"),
            json!({}),
        ),
        peer_line(
            "chat-qq-group-42-mqz8k2p1-0003",
            scene,
            "who has the projector cable",
            json!({"speaker": GITHUB}),
        ),
        peer_line(
            "chat-qq-group-42-mqz8k2p1-0004",
            scene,
            "the projector cable is in room 3",
            json!({}),
        ),
        json!({"op": "forget", "v": 1, "id": "chat-qq-group-42-mqz8k2p1-0004",
            "ts": "2026-06-01T09:00:00Z", "reason": format!("pasted {GITHUB}"), "source": "qq"})
        .to_string(),
    ];
    let dir = root.path().join("memories/facts/laptop");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("2026-06.jsonl"),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let health = || call(&addr, "GET", "/v1/health", Some(&owner), &json!({})).1;
    eventually("the peer's lines to be read", || {
        health()["components"]["journal"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("3 lines quarantined"))
    });
    let h = health();
    assert_eq!(h["components"]["journal"]["status"], "degraded", "{h}");
    assert!(!h.to_string().contains(GITHUB), "{h}");
    // The group's token finds the clean line only.
    let search = |q: &str| {
        let (status, v) = call(
            &addr,
            "POST",
            "/v1/search",
            Some(&group),
            &json!({"query": q}),
        );
        assert_eq!(status, 200, "{v}");
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(search("爬山"), ["chat-qq-group-42-mqz8k2p1-0001"]);
    assert!(search("repo token bot").is_empty());
    assert!(
        search("projector cable").is_empty(),
        "0003 quarantined, 0004 forgotten"
    );
    for id in [
        "chat-qq-group-42-mqz8k2p1-0002",
        "chat-qq-group-42-mqz8k2p1-0003",
    ] {
        let (status, v) = call(&addr, "POST", "/v1/get", Some(&group), &json!({"id": id}));
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (404, Some("NOT_FOUND")),
            "{id}: {v}"
        );
        assert!(!v.to_string().contains(GITHUB));
    }
    drop(served);
    // `memd stats` lists each line, `memd doctor` counts them; neither shows the value.
    let stats = root.memd(&["stats"]);
    let text = String::from_utf8_lossy(&stats.stdout);
    for line in 2..=3 {
        assert!(
            text.contains(&format!("facts/laptop/2026-06.jsonl:{line}: quarantined")),
            "{text}"
        );
    }
    assert!(
        text.contains("facts/laptop/2026-06.jsonl:5: quarantined"),
        "{text}"
    );
    assert!(text.contains("speaker") && !text.contains(GITHUB), "{text}");
    let doctor = root.memd(&["doctor", "--json"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("3 journal lines quarantined"), "{text}");
    assert!(!text.contains(GITHUB), "{text}");
    // A rebuild quarantines the same lines.
    let hub = root.hub();
    assert_eq!(hub.stats().unwrap().counts.quarantined, 3);
    assert!(search_ids(&hub, "token bot", 10).is_empty());
    assert!(
        hub.fetch("chat-qq-group-42-mqz8k2p1-0002", &Filter::all())
            .is_err(),
        "never indexed"
    );
}

/// Issue 30 (5): a `--foreign` restore that extends a journal with a line
/// holding a credential (an archive from another root, written there by a
/// build without the check): the restore keeps every line, and replay
/// quarantines that one.
#[test]
fn issue_30_a_foreign_restore_that_extends_a_journal_quarantines_the_line() {
    let here = TempRoot::new();
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    ok(here.memd(&["write", "--scene", "main", "--text", "the kettle is blue"]));
    // The other root starts as a copy of this one (same journal file), then grows.
    let there = TempRoot::new();
    copy_tree(
        &here.path().join("memories"),
        &there.path().join("memories"),
    );
    let file = here.journal_files().pop().unwrap();
    let rel = file.strip_prefix(here.path()).unwrap().to_path_buf();
    let mut line: Value = serde_json::from_str(here.journal_lines().last().unwrap()).unwrap();
    line["id"] = json!("fact-main-mqz8k2p1-beef");
    line["text"] = json!(format!("ci token {GITHUB}"));
    line.as_object_mut().unwrap().remove("crc");
    let mut grown = std::fs::read_to_string(there.path().join(&rel)).unwrap();
    grown.push_str(&format!("{line}\n"));
    std::fs::write(there.path().join(&rel), grown).unwrap();
    let made = there.memd_json(&[
        "backup",
        "create",
        "--out",
        there.path().join("b").to_str().unwrap(),
    ]);
    let archive = made["path"].as_str().unwrap().to_string();

    ok(here.memd(&["backup", "restore", &archive, "--foreign"]));
    assert!(
        std::fs::read_to_string(here.path().join(&rel))
            .unwrap()
            .contains("fact-main-mqz8k2p1-beef"),
        "the restore kept the line"
    );
    let hub = here.hub();
    let stats = hub.stats().unwrap();
    assert_eq!(stats.counts.quarantined, 1, "{:?}", stats.issues);
    assert!(search_ids(&hub, "ci token", 10).is_empty());
    assert_eq!(search_ids(&hub, "kettle", 10).len(), 1);
    assert!(stats.issues.iter().all(|i| !i.contains(GITHUB)));
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Issue 30 (5): a Markdown document that holds a credential is
/// quarantined (reported, never indexed, never served to the group it is
/// written for); a `secret` one may hold it on purpose; `memd import
/// --format markdown` does not copy one in.
#[test]
fn issue_30_markdown_documents_with_credentials_are_quarantined() {
    let root = TempRoot::new();
    root.write_doc(
        "notes/bot.md",
        &format!("---\nscene: qq:group:42\n---\n# Bot setup\n\nThe bot logs in with {GITHUB}.\n"),
    );
    root.write_doc(
        "notes/vault.md",
        &format!("---\nprivacy: secret\n---\n# Vault\n\nbackup token {GITHUB}\n"),
    );
    root.write_doc(
        "notes/hike.md",
        "---\nscene: qq:group:42\n---\n# Hike\n\n周六去爬山\n",
    );
    let hub = root.hub();
    hub.sync_documents().unwrap();
    let issues = hub.document_issues().unwrap();
    let why = issues.get("notes/bot.md").expect("reported");
    assert!(
        why.contains("quarantined") && why.contains("GitHub token"),
        "{why}"
    );
    assert!(!why.contains(GITHUB), "{why}");
    assert!(search_ids(&hub, "bot logs", 10).is_empty(), "never indexed");
    assert_eq!(search_ids(&hub, "爬山", 10).len(), 1);
    assert_eq!(
        search_ids(&hub, "backup token", 10).len(),
        1,
        "secret documents may"
    );
    let health = serde_json::to_value(hub.health().unwrap()).unwrap();
    assert_eq!(health["components"]["documents"]["status"], "degraded");
    drop(hub);
    let doctor = String::from_utf8_lossy(&root.memd(&["doctor", "--json"]).stdout).into_owned();
    assert!(
        doctor.contains("notes/bot.md") && !doctor.contains(GITHUB),
        "{doctor}"
    );

    // An import does not copy such a file into memories/.
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("keys.md");
    std::fs::write(&file, format!("# Keys\n\nprod key {GITHUB}\n")).unwrap();
    let report = root.memd_json(&["import", "--format", "markdown", file.to_str().unwrap()]);
    assert_eq!(
        (report["added"].as_u64(), report["failed"].as_u64()),
        (Some(0), Some(1)),
        "{report}"
    );
    assert!(!report.to_string().contains(GITHUB), "{report}");
    assert!(!root.path().join("memories/import/keys.md").exists());
}

/// Issue 30 (5): journal lines and loose lines imported from a file are
/// checked field by field like a write; the clean ones go in.
#[test]
fn issue_30_imports_refuse_credentials_in_any_field() {
    let root = TempRoot::new();
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("in.jsonl");
    let journal = |id: &str, extra: Value| {
        let mut v = json!({"op": "put", "v": 1, "id": id, "ts": "2026-06-01T08:00:00Z",
            "scene": "main", "kind": "note", "stage": "long", "text": "likes green tea",
            "privacy": "normal", "subject": "owner", "source": "import", "importance": 0.5,
            "tier": "t2"});
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        v.to_string()
    };
    let lines = [
        journal("fact-main-imp-0001", json!({})),
        journal("fact-main-imp-0002", json!({"speaker": GITHUB})),
        journal("fact-main-imp-0003", json!({"idempotency_key": GITHUB})),
        json!({"text": "likes oolong", "time": GITHUB}).to_string(),
        json!({"text": format!("curl -u admin:{}", "S3cr3tPass")}).to_string(),
        json!({"text": "likes oolong"}).to_string(),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let report = root.memd_json(&["import", file.to_str().unwrap()]);
    assert_eq!(
        (report["added"].as_u64(), report["failed"].as_u64()),
        (Some(2), Some(4)),
        "{report}"
    );
    let text = report.to_string();
    for field in [
        "speaker",
        "idempotency_key",
        "time",
        "password on a command line",
    ] {
        assert!(text.contains(field), "{field}: {text}");
    }
    assert!(
        !text.contains(GITHUB) && !text.contains("S3cr3tPass"),
        "{text}"
    );
    let journal = root.journal_lines().join("\n");
    assert!(!journal.contains(GITHUB) && !journal.contains("S3cr3tPass"));
}
