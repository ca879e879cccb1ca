//! Privacy without side channels: what the open health route shows, archive
//! routes under the token's privacy scopes, credential refusal, private file
//! modes, and the HTTP server's timeouts, bind rule and Host check.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use memory_hub::hub::WriteRequest;
use memory_hub::model::{Privacy, Stage, Subject};
use serde_json::{Value, json};

use crate::http_support::{Api, ids};
use crate::support::{TempRoot, scene};

/// Issue 2: the open `/v1/health` lists no counts and no scene names (QQ
/// numbers); counts and `/metrics` need an admin token.
#[tokio::test]
async fn health_shows_counts_and_scenes_to_admin_tokens_only() {
    let api = Api::new();
    api.write(
        "qq:private:918273645",
        "私聊 birthday plans",
        Privacy::Personal,
        Subject::Other,
    );
    api.write("main", "保险箱 safe hint", Privacy::Secret, Subject::Owner);
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    for token in [None, Some(pet.as_str())] {
        let (status, v) = api.get("/v1/health", token).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["status"], "ok");
        assert_eq!(v["writer"], true);
        let text = v.to_string();
        for leak in [
            "918273645",
            "qq:",
            "secret",
            "counts",
            "memories",
            "jobs",
            "tiers",
        ] {
            assert!(!text.contains(leak), "{leak} in public health: {text}");
        }
        for (name, c) in v["components"].as_object().unwrap() {
            assert_eq!(
                c.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["status"],
                "{name}: only the state, no detail with counts"
            );
        }
    }
    let (status, v) = api.get("/v1/health", Some("mh_unknown")).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (401, Some("UNAUTHORIZED"))
    );
    let (status, v) = api.get("/v1/health", Some(&root)).await;
    assert_eq!(status, 200);
    assert_eq!(v["counts"]["by_scene"]["qq:private:918273645"], 1, "{v}");
    assert_eq!(v["counts"]["by_privacy"]["secret"], 1, "{v}");
    assert!(v["components"]["journal"]["detail"].is_string());

    let (status, v) = api.get("/metrics", Some(&pet)).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("FORBIDDEN"))
    );
    let (status, text) = api.raw_text("GET", "/metrics", Some(&root)).await;
    assert_eq!(status, 200);
    assert!(text.contains("memd_memories 2"), "{text}");
    // What SQLite holds: its page caches and statements, never nothing
    // once the index has been read.
    let held: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("memd_sqlite_heap_bytes "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no SQLite gauge in {text}"));
    assert!(held > 0, "{text}");
}

/// Issue 3: a `*` + `read` token without `sensitive:read`/`secret:read` gets
/// no expired sensitive or secret memory from the archive routes.
#[tokio::test]
async fn archive_routes_keep_the_privacy_scopes_of_the_token() {
    let api = Api::new();
    let expiring = |text: &str, privacy: Privacy| {
        let mut req = WriteRequest::new(scene("main"), text, "test");
        req.privacy = privacy;
        // Only short-term chat expires by default.
        req.stage = Stage::Short;
        req.expires_at = Some(Utc::now() + chrono::Duration::hours(1));
        api.hub.append(req).unwrap().id
    };
    let normal = expiring("archive probe normal note", Privacy::Normal);
    let sensitive = expiring("archive probe salary figure", Privacy::Sensitive);
    let secret = expiring("archive probe safe combination hint", Privacy::Secret);
    api.set_now(Some(Utc::now() + chrono::Duration::days(3650)));
    let star = api.custom_token("star", &["*", "read", "write"], &["main"]);
    let root = api.token("root", "dsh-desktop");
    let q = json!({"query": "archive probe"});

    let v = api.ok("/v1/archive/search", &star, q.clone()).await;
    assert_eq!(ids(&v["items"]), std::slice::from_ref(&normal), "{v}");
    let mut all = ids(&api.ok("/v1/archive/search", &root, q).await["items"]);
    all.sort();
    let mut want = vec![normal.clone(), sensitive.clone(), secret.clone()];
    want.sort();
    assert_eq!(all, want);

    for hidden in [&sensitive, &secret] {
        let (status, v) = api
            .post("/v1/archive/restore", &star, json!({"id": hidden}))
            .await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (404, Some("NOT_FOUND")),
            "{v}"
        );
        assert!(!v.to_string().contains("salary") && !v.to_string().contains("combination"));
    }
    let back = api
        .ok("/v1/archive/restore", &star, json!({"id": normal}))
        .await;
    assert_eq!(back["id"], normal.as_str());
    let back = api
        .ok("/v1/archive/restore", &root, json!({"id": secret}))
        .await;
    assert_eq!(back["privacy"], "secret");
}

/// Issue 8: credentials in text, title or tags are refused with a message
/// that names the field and never the value; nothing reaches the journal. A
/// `privacy: secret` write by a token with `secret:write` may keep one.
#[tokio::test]
async fn credentials_are_refused_in_text_title_and_tags_unless_secret() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    let probes = [
        json!({"text": "my password is hunter22xyz"}),
        json!({"text": "password：hunter22xyz"}),
        json!({"text": "PIN: 847362"}),
        json!({"text": "支付密码 883920"}),
        json!({"text": "key sk\u{2011}abc123def456ghi"}),
        json!({"text": "akiaiosfodnn7example"}),
        json!({"text": "postgres://user:pass@db.example.com/app"}),
        json!({"text": "Authorization: Basic dXNlcjpwYXNzd29yZA=="}),
        json!({"text": "a note", "title": "glpat-abcdefghij0123456789"}),
        json!({"text": "a note", "tags": ["AIzaSyA1234567890abcdefghijklmnop"]}),
    ];
    let before = api.root.journal_lines().len();
    for body in &probes {
        let (status, v) = api.post("/v1/write", &pet, body.clone()).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("INVALID_INPUT")),
            "{body} -> {v}"
        );
        let message = v["error"]["message"].as_str().unwrap();
        for secret in [
            "hunter22",
            "847362",
            "883920",
            "abc123def456",
            "dXNlcjpw",
            "abcdefghij0123",
            "1234567890abcdefghij",
        ] {
            assert!(
                !message.contains(secret),
                "the refusal echoes the secret: {message}"
            );
        }
        assert!(message.contains("secret:write"), "{message}");
    }
    let (_, v) = api
        .post(
            "/v1/write",
            &pet,
            json!({"text": "ok", "title": "password: hunter22xyz"}),
        )
        .await;
    assert!(
        v["error"]["message"].as_str().unwrap().contains("title"),
        "{v}"
    );
    assert_eq!(
        api.root.journal_lines().len(),
        before,
        "nothing refused was written"
    );

    // Ordinary sentences about passwords are kept.
    for text in [
        "I forgot my password yesterday",
        "密码学课程很有意思",
        "PIN code of the door is on the note in the kitchen",
    ] {
        api.ok("/v1/write", &pet, json!({"text": text})).await;
    }
    // Tags added later are checked too.
    let id = api
        .ok(
            "/v1/write",
            &root,
            json!({"text": "wifi router in the hall"}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _) = api
        .post(
            "/v1/tags",
            &root,
            json!({"id": id, "add": ["ghp_abcdefghijklmnopqrstuvwxyz0123"]}),
        )
        .await;
    assert_eq!(status, 400);

    // The secret level may hold one on purpose, in its pinned audience only.
    let kept = api
        .ok(
            "/v1/write",
            &root,
            json!({"text": "bank app PIN: 847362", "privacy": "secret"}),
        )
        .await;
    assert_eq!(kept["action"], "ADD");
    let (status, _) = api
        .post(
            "/v1/write",
            &pet,
            json!({"text": "bank app PIN: 847362", "privacy": "secret"}),
        )
        .await;
    assert_eq!(status, 403, "secret needs secret:write");
    let owner = api.token("owner", "qq-owner");
    let (status, v) = api
        .post(
            "/v1/write",
            &owner,
            json!({"text": "bank app PIN: 847362", "privacy": "secret"}),
        )
        .await;
    assert_eq!(
        status, 400,
        "secret memories stay pinned to their audience: {v}"
    );
}

/// Every file and directory memd made under `dir` that others can read.
fn open_to_others(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.permissions().mode() & 0o077 != 0 {
            out.push(format!("{} {:o}", p.display(), meta.permissions().mode()));
        }
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

/// Issue 9: tokens, journals, the index, the audit log, members and backups
/// are created 0600 in 0700 directories.
#[test]
fn everything_memd_creates_is_private() {
    let root = TempRoot::new();
    let secret = root.cli_token("root", "dsh-desktop");
    root.memd_json(&[
        "write",
        "--scene",
        "main",
        "--text",
        "the boiler service is due in May",
    ]);
    root.memd_json(&["backup", "create"]);
    let served = crate::support::Served::start(&mut crate::support::serve_command(root.path()));
    let (status, reply) = crate::wire::call(
        &served.addr,
        "POST",
        "/v1/members",
        Some(&secret),
        &json!({"group": "qq:group:5", "add": [{"id": "42", "name": "A"}]}),
    );
    assert_eq!(status, 200, "{reply}");
    served.kill();
    for must in ["tokens.json", "data/audit.jsonl", "data/index", "backups"] {
        assert!(root.path().join(must).exists(), "{must}");
    }
    assert!(
        std::fs::read_dir(root.path().join("memories/facts"))
            .unwrap()
            .count()
            > 0
    );
    let mut open = open_to_others(&root.path().join("memories"));
    open.extend(open_to_others(&root.path().join("data")));
    open.extend(open_to_others(&root.path().join("backups")));
    open.extend(open_to_others(&root.path().join("tokens.json")));
    assert!(open.is_empty(), "readable by others: {open:#?}");
}

/// A root made by an older memd (0755/0644) is reported by doctor with the
/// fix, and tightened by the next writer.
#[test]
fn open_roots_are_reported_and_tightened() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        crate::support::write(&hub, "main", "an old memory");
    }
    std::fs::write(
        root.path().join("tokens.json"),
        r#"{"version":1,"tokens":[]}"#,
    )
    .unwrap();
    for (p, mode) in [("memories", 0o755), ("data", 0o755), ("tokens.json", 0o644)] {
        std::fs::set_permissions(root.path().join(p), std::fs::Permissions::from_mode(mode))
            .unwrap();
    }
    let doctor = |root: &TempRoot| {
        // Without a model installed doctor exits 1 (model check); the report is still printed.
        let out = root.memd(&["doctor", "--shallow", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        crate::support::doctor_check(&report, "permissions").clone()
    };
    let before = doctor(&root);
    assert_eq!(before["status"], "warn", "{before}");
    assert!(
        before["hint"].as_str().unwrap().contains("chmod -R go-rwx"),
        "{before}"
    );
    assert!(
        before["detail"].as_str().unwrap().contains("memories"),
        "{before}"
    );
    root.memd_json(&["write", "--scene", "main", "--text", "a new memory"]);
    assert!(open_to_others(&root.path().join("memories")).is_empty());
    assert!(open_to_others(&root.path().join("data")).is_empty());
    let after = doctor(&root);
    assert_eq!(after["status"], "ok", "{after}");
}

/// Issue 11: a non-loopback listen address is refused without
/// `allowRemote` (and without a token even with it).
#[test]
fn serve_refuses_remote_binds_without_allow_remote_and_a_token() {
    // A server that starts anyway is killed after a bounded wait, and the test fails.
    fn refused(root: &TempRoot) -> (Option<i32>, String) {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memd"))
            .args(["serve", "--listen", "0.0.0.0:0"])
            .env("MEMD_ROOT", root.path())
            .env("MEMD_MODELS_DIR", root.path().join("no-models"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        for _ in 0..300 {
            if child.try_wait().unwrap().is_some() {
                let out = child.wait_with_output().unwrap();
                return (
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).to_string(),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("memd serve --listen 0.0.0.0:0 started instead of refusing");
    }
    let root = TempRoot::new();
    let (code, err) = refused(&root);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("INVALID_INPUT") && err.contains("allowRemote"),
        "{err}"
    );
    root.write_config(r#"{"allowRemote": true}"#);
    let (code, err) = refused(&root);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no token is active"), "{err}");
}

/// Sends raw bytes, reads to the end; status and body.
fn request(addr: &str, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// Issue 11: half-sent requests and idle keep-alive connections are closed
/// by the header timeout; on loopback only loopback Host names are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_closed_and_foreign_hosts_refused() {
    let root = TempRoot::new();
    let hub = std::sync::Arc::new(root.hub());
    let state = memory_hub::http::AppState::new(hub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = memory_hub::http::ServeOptions {
        grace: Duration::from_secs(1),
        header_timeout: Duration::from_millis(500),
    };
    let server = tokio::spawn(memory_hub::http::serve_with_options(
        listener,
        state,
        async {
            let _ = stopped.await;
        },
        options,
    ));
    let a = addr.clone();
    tokio::task::spawn_blocking(move || {
        // 50 clients that never finish their headers, and one idle keep-alive.
        let mut half: Vec<TcpStream> = (0..50)
            .map(|_| {
                let mut s = TcpStream::connect(&a).unwrap();
                s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    .unwrap();
                s
            })
            .collect();
        let mut idle = TcpStream::connect(&a).unwrap();
        idle.write_all(format!("GET /v1/health HTTP/1.1\r\nHost: {a}\r\n\r\n").as_bytes())
            .unwrap();
        half.push(idle);
        for (i, s) in half.iter_mut().enumerate() {
            // The server closes each one: the read ends (EOF or reset) instead of waiting.
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut buf = Vec::new();
            match s.read_to_end(&mut buf) {
                Ok(_) => {}
                Err(e) => assert!(
                    e.kind() == std::io::ErrorKind::ConnectionReset,
                    "connection {i} was not closed: {e}"
                ),
            }
        }
        for host in [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            format!("LOCALHOST:{port}"),
        ] {
            let (status, body) = request(
                &a,
                &format!("GET /v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
            );
            assert_eq!(status, 200, "{host}: {body}");
        }
        for host in [
            format!("evil.example:{port}"),
            "127.0.0.1".to_string(),
            format!("127.0.0.1:{}", port.wrapping_add(1)),
            format!("localhost.evil.example:{port}"),
        ] {
            let (status, body) = request(
                &a,
                &format!("GET /v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
            );
            assert_eq!(status, 403, "{host}: {body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["error"]["code"], "FORBIDDEN");
        }
        // Red-team finding: an absolute-form target named our address while
        // the Host header named another, and with two Host headers the first won.
        for raw in [
            format!(
                "GET http://127.0.0.1:{port}/v1/health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
            ),
            format!(
                "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
            ),
        ] {
            let (status, body) = request(&a, &raw);
            assert_eq!(status, 403, "{raw}: {body}");
        }
        let (status, body) = request(
            &a,
            &format!(
                "GET http://127.0.0.1:{port}/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!(status, 200, "{body}");
    })
    .await
    .unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// Red-team finding: a client with a valid token that sends its headers and
/// then trickles its body held the connection until shutdown. The body must
/// arrive within `BODY_READ_TIMEOUT`; then the request is refused and the
/// connection closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_body_is_refused_and_its_connection_closed() {
    let root = TempRoot::new();
    let secret =
        root.memd_json(&["token", "issue", "--name", "t", "--preset", "dsh-desktop"])["secret"]
            .as_str()
            .unwrap()
            .to_string();
    let hub = std::sync::Arc::new(root.hub());
    let state = memory_hub::http::AppState::new(hub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(memory_hub::http::serve_with_options(
        listener,
        state,
        async {
            let _ = stopped.await;
        },
        memory_hub::http::ServeOptions {
            grace: Duration::from_secs(1),
            header_timeout: Duration::from_secs(10),
        },
    ));
    let a = addr.clone();
    let (status, closed) = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(&a).unwrap();
        s.write_all(
            format!(
                "POST /v1/search HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {secret}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            )
            .as_bytes(),
        )
        .unwrap();
        // Bounded: the server answers after BODY_READ_TIMEOUT (10 s).
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut buf = Vec::new();
        let closed = match s.read_to_end(&mut buf) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        let text = String::from_utf8_lossy(&buf).to_string();
        let status: u16 = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, closed)
    })
    .await
    .unwrap();
    assert_eq!(status, 400);
    assert!(closed, "the connection stayed open");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
