//! `memd serve` as a real process on loopback: tokens from the CLI take
//! effect without a restart, and SIGTERM shuts down cleanly with every
//! acknowledged write in the journal and no write-ahead log left behind.

use std::io::Write;
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Served, TempRoot, serve_with_models};
use crate::wire::call;

/// `memd serve` with the installed models, logging requests to a piped stderr.
fn serve_logged(root: &TempRoot) -> Served {
    Served::start(
        serve_with_models(root.path())
            .args(["--listen", "127.0.0.1:0"])
            .env("MEMD_LOG", "info")
            .stderr(Stdio::piped()),
    )
}

#[test]
fn serve_tokens_and_graceful_shutdown() {
    let root = TempRoot::new();
    let secret = root.cli_token("root", "dsh-desktop");
    let listed = root.memd_json(&["token", "list"]);
    assert_eq!(listed["tokens"][0]["name"], "root");
    assert!(!listed.to_string().contains(&secret));
    assert!(
        !std::fs::read_to_string(root.path().join("tokens.json"))
            .unwrap()
            .contains(&secret)
    );

    let served = serve_logged(&root);
    let addr = served.addr.clone();

    let (status, health) = call(&addr, "GET", "/v1/health", None, &json!({}));
    assert_eq!((status, health["writer"].as_bool()), (200, Some(true)));

    // Concurrent acknowledged writes.
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (addr, secret) = (addr.clone(), secret.clone());
            std::thread::spawn(move || {
                let (status, v) = call(
                    &addr,
                    "POST",
                    "/v1/write",
                    Some(&secret),
                    &json!({"text": format!("shutdown test memory {i}")}),
                );
                assert_eq!(status, 200, "{v}");
                v["id"].as_str().unwrap().to_string()
            })
        })
        .collect();
    let ids: Vec<String> = writers.into_iter().map(|h| h.join().unwrap()).collect();

    // A token issued and revoked by the CLI while the server runs.
    let pet = root.cli_token("pet", "pet");
    assert_eq!(
        call(&addr, "GET", "/v1/capabilities", Some(&pet), &json!({})).0,
        200
    );
    root.memd_json(&["token", "revoke", "pet"]);
    assert_eq!(
        call(&addr, "GET", "/v1/capabilities", Some(&pet), &json!({})).0,
        401
    );

    // SIGTERM: exits 0 after finishing in-flight work.
    let (exit, stderr) = served.stop_within(Duration::from_secs(20));
    assert!(exit.success(), "exit {exit:?}: {stderr}");
    assert!(
        stderr.contains("POST /v1/write") && stderr.contains("\"root\""),
        "requests are logged: {stderr}"
    );
    assert!(
        !stderr.contains(&secret) && !stderr.contains(&pet),
        "secrets never reach the log"
    );

    let journal = root.journal_lines().join("\n");
    for id in &ids {
        assert!(
            journal.contains(id.as_str()),
            "{id} missing from the journal"
        );
    }
    // The index's write-ahead log was checkpointed and truncated: a clean
    // stop used to leave the whole log behind (52 MB after a catch-up).
    let wal = root.path().join("data/index/meta.db-wal");
    assert_eq!(
        std::fs::metadata(&wal).map_or(0, |m| m.len()),
        0,
        "{} left behind",
        wal.display()
    );
    // The writer lock was released.
    let w = root.memd_json(&["write", "--scene", "main", "--text", "after shutdown"]);
    assert_eq!(w["action"], "ADD");
    // The audit log names tokens, not secrets.
    let audit = std::fs::read_to_string(root.path().join("data/audit.jsonl")).unwrap();
    assert!(audit.contains("\"token\":\"root\"") && !audit.contains(&secret));
}

#[test]
fn token_cli_refuses_bad_input() {
    let root = TempRoot::new();
    for args in [
        vec!["token", "issue", "--name", "x", "--preset", "nope"],
        vec!["token", "issue", "--name", "x", "--scope", "god"],
        vec!["token", "issue", "--name", "x"],
        vec!["token", "issue", "--name", "bad name", "--preset", "pet"],
        vec!["token", "revoke", "missing"],
    ] {
        let out = root.memd(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("INVALID_INPUT") || stderr.contains("NOT_FOUND"),
            "{args:?}: {stderr}"
        );
    }
    let custom = root.memd_json(&[
        "token", "issue", "--name", "tool", "--scope", "read", "--scene", "main,pet",
    ]);
    assert_eq!(custom["scenes"], json!(["main", "pet"]));
    assert_eq!(custom["scopes"], json!(["read"]));
    let plain = root.memd(&["token", "issue", "--name", "g", "--preset", "qq-group-7"]);
    let secret = String::from_utf8_lossy(&plain.stdout).trim().to_string();
    assert!(
        secret.starts_with("mh_") && secret.len() == 3 + 64,
        "{secret}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_function_takes_a_listener_and_a_shutdown_future() {
    use std::sync::Arc;

    let root = TempRoot::new();
    let hub = Arc::new(root.hub());
    let secret = root.token("root", "dsh-desktop");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(memory_hub::http::serve(
        listener,
        memory_hub::http::AppState::new(hub.clone()),
        async {
            let _ = stopped.await;
        },
    ));
    let a = addr.clone();
    let (status, v) = tokio::task::spawn_blocking(move || {
        call(
            &a,
            "POST",
            "/v1/write",
            Some(&secret),
            &json!({"text": "in process"}),
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{v}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert!(TcpStream::connect(&addr).is_err(), "the listener is closed");
    assert!(
        root.journal_lines()
            .iter()
            .any(|l| l.contains("in process"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_client_cannot_hold_shutdown_forever() {
    use std::sync::Arc;

    let root = TempRoot::new();
    let hub = Arc::new(root.hub());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(memory_hub::http::serve_with_grace(
        listener,
        memory_hub::http::AppState::new(hub),
        async {
            let _ = stopped.await;
        },
        Duration::from_millis(300),
    ));
    let secret = root.token("root", "dsh-desktop");
    // An authenticated request whose body never arrives: its handler waits for it.
    let mut stuck = TcpStream::connect(&addr).unwrap();
    write!(
        stuck,
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}\r\nContent-Length: 100\r\n\r\n{{"
    )
    .unwrap();
    let (status, _) = tokio::task::spawn_blocking({
        let addr = addr.clone();
        move || call(&addr, "GET", "/v1/health", None, &json!({}))
    })
    .await
    .unwrap();
    assert_eq!(status, 200);
    let started = Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("serve returns after the grace period")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(stuck);
}

/// Regression: SIGTERM right after a write found the scheduler loading the
/// model for that write's vector, and shutdown waited for the load (seconds).
/// The server must still exit 0 on its own, without the grace period's
/// "stopping anyway", and the acknowledged write must be there afterwards.
#[test]
fn sigterm_right_after_a_write_exits_cleanly_and_keeps_it() {
    let root = TempRoot::new();
    let secret = root.cli_token("root", "dsh-desktop");
    let served = serve_logged(&root);
    let addr = served.addr.clone();
    let (status, v) = call(
        &addr,
        "POST",
        "/v1/write",
        Some(&secret),
        &json!({"text": "acknowledged just before the stop"}),
    );
    assert_eq!(status, 200, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    // Give the scheduler a round to notice the memory without a vector.
    std::thread::sleep(Duration::from_millis(1500));
    let (exit, stderr) = served.stop_within(Duration::from_secs(60));
    assert!(exit.success(), "exit {exit:?}: {stderr}");
    assert!(
        !stderr.contains("stopping anyway"),
        "shutdown waited out the grace period: {stderr}"
    );
    let got = root.memd_json(&["get", &id]);
    assert_eq!(got["text"], "acknowledged just before the stop", "{got}");
}
