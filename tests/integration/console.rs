//! The web console, driven in headless Chromium: sign in, write, search in
//! Chinese, open, supersede, forget, keep a chat memory, render a Markdown
//! document with raw HTML, and a group token that sees only its scene. The
//! browser side is `tests/console/drive.py` (selenium, pinned, with Debian's
//! chromium and chromedriver, installed by `scripts/setup-browser.sh`); it
//! writes a screenshot of every page under `target/console-screenshots/`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TempRoot;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `(python, chromedriver)` from `scripts/setup-browser.sh` (idempotent).
fn browser_setup() -> &'static (PathBuf, PathBuf) {
    static SETUP: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo().join("scripts/setup-browser.sh"))
            .output()
            .expect("run scripts/setup-browser.sh");
        assert!(
            out.status.success(),
            "scripts/setup-browser.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let value = |key: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("no {key} line in {stdout:?}"))
        };
        (value("python="), value("chromedriver="))
    })
}

/// One HTTP/1.1 request; returns status, lower-cased head and body.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a full response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_lowercase(), body.to_string())
}

fn post(addr: &str, path: &str, token: &str, body: &Value) -> Value {
    let (status, _, text) = http(addr, "POST", path, Some(token), &body.to_string());
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn issue(root: &TempRoot, name: &str, preset: &str) -> String {
    root.memd_json(&["token", "issue", "--name", name, "--preset", preset])["secret"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A started `memd serve`, stopped (SIGTERM, then kill) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(root: &TempRoot) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("MEMD_ROOT", root.path())
        .env("MEMD_MODELS_DIR", root.path().join("no-models"))
        .env_remove("MEMD_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start memd serve");
    let addr = crate::support::serve_addr(&mut child);
    (Server(child), addr)
}

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs selenium (scripts/setup-browser.sh)"
)]
#[test]
fn console_serves_static_files_with_a_strict_policy_and_no_api() {
    let root = TempRoot::new();
    let (_server, addr) = serve(&root);
    for path in [
        "/",
        "/assets/app.js",
        "/assets/style.css",
        "/assets/nope.js",
    ] {
        let (status, head, body) = http(&addr, "GET", path, None, "");
        assert_eq!(
            status,
            if path.ends_with("nope.js") { 404 } else { 200 },
            "{path}"
        );
        assert!(
            head.contains(&format!("content-security-policy: {}", CSP.to_lowercase())),
            "{path}: {head}"
        );
        assert!(
            head.contains("x-content-type-options: nosniff"),
            "{path}: {head}"
        );
        assert!(!head.contains("set-cookie"), "{path}: {head}");
        if path == "/" {
            assert!(body.contains("<script type=\"module\" src=\"/assets/app.js\">"));
        }
    }
    let (_, head, _) = http(&addr, "GET", "/assets/app.js", None, "");
    assert!(head.contains("content-type: text/javascript"), "{head}");
    // The console's files are open, the API still is not.
    let (status, _, body) = http(&addr, "POST", "/v1/search", None, r#"{"query":"x"}"#);
    assert_eq!(status, 401, "{body}");
    // No console path shadows the API or reaches into the root.
    for path in [
        "/assets/../tokens.json",
        "/assets/",
        "/console",
        "/index.html",
    ] {
        let (status, _, body) = http(&addr, "GET", path, None, "");
        assert_eq!(status, 404, "{path}: {body}");
    }
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs Chromium and selenium (scripts/setup-system.sh, scripts/setup-browser.sh)"
)]
#[test]
fn console_in_headless_chromium() {
    let (python, chromedriver) = browser_setup();
    let root = TempRoot::new();
    root.write_doc(
        "notes/guide.md",
        "# 西湖 guide\n\nSome **bold** words, `code`, and a [safe link](https://example.org/x).\n\n\
         <img src=x onerror=\"window.__pwned=3\">\n<script>window.__pwned=4</script>\n\n\
         - one [bad link](javascript:window.__pwned=5)\n- two\n\n## Section 二\n\nText.\n",
    );
    let admin = issue(&root, "root", "dsh-desktop");
    let group = issue(&root, "group", "qq-group-1");
    let spare = issue(&root, "spare", "pet");
    let (_server, addr) = serve(&root);

    let g = post(
        &addr,
        "/v1/write",
        &group,
        &json!({"text": "群里说西湖的荷花开了"}),
    );
    assert_eq!(g["action"], "ADD");
    post(
        &addr,
        "/v1/categories",
        &admin,
        &json!({"action": "set", "name": "coding", "slot": "coding-requirements",
                "content": "# Coding\n\n- Tests first\n- <b>raw</b> html"}),
    );

    let run = post(&addr, "/v1/consolidation/run", &admin, &json!({}));
    assert!(run["run"].is_string(), "{run}");
    // After the run: consolidation would promote this plan with a date, and
    // the inbox must still have one short-term memory to keep.
    post(
        &addr,
        "/v1/write",
        &admin,
        &json!({"text": "刚才聊到明天要交周报", "stage": "short"}),
    );
    let shots = repo().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut child = Command::new(python)
        .arg(repo().join("tests/console/drive.py"))
        .args([
            "--url",
            &format!("http://{addr}"),
            "--admin-token",
            &admin,
            "--group-token",
            &group,
        ])
        .args(["--group-scene", "qq:group:1", "--shots"])
        .arg(&shots)
        .arg("--chromedriver")
        .arg(chromedriver)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start drive.py");
    // Bounded: a hung browser fails the test instead of holding the suite.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("drive.py did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.success(),
        "drive.py failed ({status}):\n{out}\n{err}"
    );
    for check in [
        "ok XSS memory runs nothing",
        "ok Chinese search finds the memory",
        "ok search hides the superseded version",
        "ok search hides the forgotten memory",
        "ok timeline marks the superseded version",
        "ok an old version names the newest",
        "ok an old version cannot be edited or forgotten",
        "ok kept memory leaves the inbox",
        "ok document raw HTML stays text",
        "ok a group token sees only its scene",
        "ok no CSP violations",
        "ok no horizontal overflow at 360 px",
    ] {
        assert!(
            out.lines().any(|l| l == check),
            "missing {check:?} in:\n{out}"
        );
    }
    assert!(!out.contains("FAIL"), "{out}");
    for name in [
        "02-search",
        "03-memory",
        "04-timeline",
        "13-search-dark",
        "17-group-search",
    ] {
        let png = shots.join(format!("{name}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(bytes.starts_with(b"\x89PNG"), "{name} is not a PNG");
    }

    // What the browser did is what the API now says.
    let found = post(&addr, "/v1/search", &admin, &json!({"query": "雨伞"}));
    assert_eq!(found["hits"].as_array().unwrap().len(), 1, "{found}");
    let replaced = found["hits"][0]["supersedes"]
        .as_str()
        .expect("the edit superseded");
    let old = post(&addr, "/v1/get", &admin, &json!({"id": replaced}));
    assert!(old["text"].as_str().unwrap().contains("记得带相机"));
    let gone = post(&addr, "/v1/search", &admin, &json!({"query": "电话号码"}));
    assert_eq!(
        gone["hits"],
        json!([]),
        "the forgotten memory is still found"
    );
    let inbox = post(&addr, "/v1/recent", &admin, &json!({"stage": "short"}));
    assert_eq!(inbox["items"], json!([]), "keep now left it short-term");
    let (status, _, _) = http(&addr, "GET", "/v1/capabilities", Some(&spare), "");
    assert_eq!(status, 401, "revoked in the console, the token still works");
    let state = {
        let (_, _, text) = http(&addr, "GET", "/v1/config-state", Some(&admin), "");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    assert_eq!(state["values"]["search.defaultLimit"], 7, "{state}");
    let seen = post(&addr, "/v1/search", &group, &json!({"query": "西湖"}));
    assert!(
        seen["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["scene"] == "qq:group:1"),
        "{seen}"
    );
}
