//! Issue 19: one outbound HTTP client for the daemon, Syncthing and the
//! consolidation model — TLS for `https://` model endpoints, bounded answers,
//! no redirects, and stable retryable codes when the other side is gone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use memory_hub::ErrorCode;
use memory_hub::consolidate::{self, ModelKind, RunOptions, SleepConfig, Window};
use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::model::Stage;
use serde_json::json;

use crate::support::{TempRoot, scene};

/// One request as the fake server saw it: request line, headers (lowercase
/// names) and body.
#[derive(Debug, Clone, Default)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn read_request(stream: impl Read) -> Option<Seen> {
    let mut reader = BufReader::new(stream);
    let mut seen = Seen::default();
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    seen.line = line.trim().to_string();
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let l = line.trim();
        if l.is_empty() {
            break;
        }
        let (name, value) = l.split_once(':')?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
        if name == "content-length" {
            length = value.parse().ok()?;
        }
        seen.headers.push((name, value));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    seen.body = String::from_utf8_lossy(&body).into_owned();
    Some(seen)
}

/// An OpenAI-style answer whose message content is `content`.
fn completion(content: &str) -> String {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
        .to_string()
}

fn http_answer(status: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A server on loopback that hands each of at most `connections` accepted
/// connections to `exchange` (which reads the request, answers it and
/// returns it); returns its address and the requests it saw.
fn loopback_server(
    connections: usize,
    exchange: impl Fn(TcpStream) -> Option<Seen> + Send + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(stream) = stream else { return };
            if let Some(req) = exchange(stream) {
                log.lock().unwrap().push(req);
            }
        }
    });
    (addr, seen)
}

/// A plain-HTTP server on loopback answering at most `connections`
/// connections with `answer`; returns its address and what it saw.
fn plain_server(
    connections: usize,
    answer: impl Fn(&Seen) -> Vec<u8> + Send + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    loopback_server(connections, move |mut stream| {
        let req = read_request(stream.try_clone().unwrap())?;
        let _ = stream.write_all(&answer(&req));
        Some(req)
    })
}

/// A self-signed certificate for 127.0.0.1: the PEM text and a rustls server config.
fn tls_identity() -> (String, Arc<rustls::ServerConfig>) {
    let key =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let pem = key.cert.pem();
    let der = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        key.signing_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![key.cert.der().clone()], der)
    .unwrap();
    (pem, Arc::new(config))
}

/// An HTTPS server on loopback answering at most `connections` connections.
fn tls_server(
    config: Arc<rustls::ServerConfig>,
    connections: usize,
    answer: impl Fn(&Seen) -> Vec<u8> + Send + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    loopback_server(connections, move |tcp| {
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        // An untrusted certificate fails the handshake here: nothing to answer.
        let req = read_request(&mut tls)?;
        let _ = tls.write_all(&answer(&req));
        tls.conn.send_close_notify();
        let _ = tls.flush();
        Some(req)
    })
}

fn chat(hub: &Hub, text: &str) -> String {
    let mut req = WriteRequest::new(scene("main"), text, "qq");
    req.origin = "chat".into();
    req.kind = "chat".into();
    req.stage = Stage::Short;
    req.importance = 0.5;
    req.expires_at = Some(Utc::now() + chrono::Duration::hours(24));
    hub.append(req).unwrap().id
}

fn options() -> RunOptions {
    let now = Utc::now();
    RunOptions {
        window: Window {
            from: now - chrono::Duration::hours(1),
            to: now + chrono::Duration::minutes(1),
        },
        dry_run: false,
        now,
    }
}

fn model_cfg(base_url: String, timeout_seconds: u64) -> SleepConfig {
    let mut cfg = SleepConfig::default();
    cfg.model.kind = ModelKind::Openai;
    cfg.model.base_url = base_url;
    cfg.model.model = "test-model".into();
    cfg.model.timeout_seconds = timeout_seconds;
    cfg
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn model_endpoint_over_https_is_reached_with_the_api_key() {
    let root = TempRoot::new();
    let note = {
        let hub = root.hub();
        chat(&hub, "周末要去爬山")
    };
    let (pem, config) = tls_identity();
    let ca = root.path().join("ca.pem");
    std::fs::write(&ca, &pem).unwrap();
    let answer = json!({"operations": [{"op": "write", "from": [note], "text": "主人周末爬山"}]});
    let (addr, seen) = tls_server(config, 4, move |_| {
        http_answer("200 OK", "", &completion(&answer.to_string()))
    });
    root.write_config(json!({"backup": {"daily": false}, "sleep": {"model": {
            "kind": "openai", "baseUrl": format!("https://{addr}/v1"),
            "model": "test-model", "apiKeyEnv": "MEMD_TEST_MODEL_KEY"}}}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["--json", "consolidate"])
        .env("MEMD_ROOT", root.path())
        .env("MEMD_MODELS_DIR", root.path().join("no-models"))
        .env("SSL_CERT_FILE", &ca)
        .env("MEMD_TEST_MODEL_KEY", "sk-test-123")
        .env_remove("MEMD_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["written"].as_array().unwrap().len(), 1, "{report}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one scene, one request");
    assert_eq!(seen[0].line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test-123"));
    assert!(seen[0].body.contains("周末要去爬山"), "{}", seen[0].body);
}

#[test]
fn model_endpoint_with_an_untrusted_certificate_is_a_clear_tls_error() {
    let root = TempRoot::new();
    let hub = root.hub();
    chat(&hub, "remember the plants");
    let (_pem, config) = tls_identity();
    let (addr, seen) = tls_server(config, 2, |_| http_answer("200 OK", "", "{}"));
    let err = consolidate::run(
        &hub,
        &model_cfg(format!("https://{addr}/v1"), 10),
        &options(),
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UpstreamInvalid, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("TLS") && text.contains(&addr),
        "names TLS and the endpoint: {text}"
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "the cause is kept"
    );
    assert!(seen.lock().unwrap().is_empty(), "no request got through");
}

#[test]
fn oversized_model_answer_is_refused() {
    let root = TempRoot::new();
    let hub = root.hub();
    chat(&hub, "remember the plants");
    let huge = completion(&"x".repeat(9 * 1024 * 1024));
    let (addr, _) = plain_server(2, move |_| http_answer("200 OK", "", &huge));
    let err = consolidate::run(
        &hub,
        &model_cfg(format!("http://{addr}/v1"), 30),
        &options(),
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UpstreamInvalid, "{err}");
    assert!(err.to_string().contains("larger than"), "{err}");
    assert!(!err.code().retryable());
}

#[test]
fn dead_or_silent_model_server_is_unavailable_and_retryable() {
    let root = TempRoot::new();
    let hub = root.hub();
    chat(&hub, "remember the plants");
    // Nothing listens.
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let err = consolidate::run(&hub, &model_cfg(url, 5), &options()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unavailable, "{err}");
    assert!(err.code().retryable());
    assert!(err.to_string().contains("refused"), "{err}");
    // Something listens but never answers: the call ends at the timeout.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        if let Some(Ok(s)) = listener.incoming().next() {
            keep.lock().unwrap().push(s);
        }
    });
    let err =
        consolidate::run(&hub, &model_cfg(format!("http://{addr}/v1"), 1), &options()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unavailable, "{err}");
    assert!(err.to_string().contains("no answer within"), "{err}");
}

#[test]
fn redirects_are_not_followed_so_the_api_key_stays_home() {
    let root = TempRoot::new();
    let hub = root.hub();
    chat(&hub, "remember the plants");
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let target = elsewhere.local_addr().unwrap();
    let (addr, seen) = plain_server(2, move |_| {
        http_answer(
            "307 Temporary Redirect",
            &format!("Location: http://{target}/v1/chat/completions\r\n"),
            "",
        )
    });
    let mut cfg = model_cfg(format!("http://{addr}/v1"), 5);
    cfg.model.api_key_env = "PATH".into(); // any variable that is set
    let err = consolidate::run(&hub, &cfg, &options()).unwrap_err();
    assert!(err.to_string().contains("307"), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(
        seen.lock().unwrap()[0].header("authorization").is_some(),
        "the key went to the configured host"
    );
    match elsewhere.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the redirect target was contacted: {other:?}"),
    }
}

/// Red team: a model server (or proxy) that echoes the Authorization header in
/// an error put the API key into the error, the CLI output and the run report.
#[test]
fn a_model_error_that_echoes_the_key_never_shows_it() {
    let root = TempRoot::new();
    let hub = root.hub();
    chat(&hub, "remember the plants");
    let (addr, _) = plain_server(1, |seen| {
        let auth = seen.header("authorization").unwrap_or_default().to_string();
        http_answer(
            "401 Unauthorized",
            "",
            &format!("{{\"error\":\"bad key {auth}\"}}"),
        )
    });
    let mut cfg = model_cfg(format!("http://{addr}/v1"), 5);
    cfg.model.api_key_env = "PATH".into(); // any variable that is set
    let key = std::env::var("PATH").unwrap();
    let err = consolidate::run(&hub, &cfg, &options()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::UpstreamInvalid, "{err}");
    assert!(err.to_string().contains("401"), "{err}");
    assert!(!err.to_string().contains(&key), "{err}");
    assert!(err.to_string().contains("[redacted]"), "{err}");
    // An overloaded server is worth a retry.
    let (addr, _) = plain_server(1, |_| http_answer("503 Service Unavailable", "", "busy"));
    let err =
        consolidate::run(&hub, &model_cfg(format!("http://{addr}/v1"), 5), &options()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unavailable, "{err}");
    assert!(err.code().retryable());
}

#[test]
fn cli_health_against_a_dead_daemon_is_unavailable() {
    let root = TempRoot::new();
    let addr = format!("127.0.0.1:{}", closed_port());
    let out = root.memd(&["--json", "health", "--addr", &addr]);
    assert_eq!(out.status.code(), Some(9), "UNAVAILABLE exits with 9");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "UNAVAILABLE");
    assert_eq!(v["error"]["retryable"], true);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("the memd daemon at {addr}")),
        "{v}"
    );
}

#[test]
fn cli_health_reads_the_daemons_error_envelope_back() {
    let root = TempRoot::new();
    let (addr, seen) = plain_server(1, |_| {
        http_answer(
            "401 Unauthorized",
            "",
            r#"{"error":{"code":"UNAUTHORIZED","message":"missing or unknown token","retryable":false}}"#,
        )
    });
    let out = root.memd(&["--json", "health", "--addr", &addr, "--token", "nope"]);
    assert_eq!(out.status.code(), Some(4), "UNAUTHORIZED exits with 4");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "UNAUTHORIZED");
    assert_eq!(v["error"]["message"], "missing or unknown token");
    assert_eq!(
        seen.lock().unwrap()[0].header("authorization"),
        Some("Bearer nope")
    );
}

#[test]
fn mcp_upstream_with_a_dead_daemon_is_unavailable() {
    let upstream =
        memory_hub::mcp::Upstream::loopback(format!("http://127.0.0.1:{}", closed_port()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(upstream.call("GET", "/v1/health", None, None))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Unavailable, "{err}");
    assert!(err.code.retryable(), "a client may retry");
}
