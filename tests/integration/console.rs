//! The web console, driven in headless Chromium: sign in, write, search in
//! Chinese, open, supersede, forget, keep a chat memory, render a Markdown
//! document with raw HTML, and a group token that sees only its scene. The
//! browser side is `tests/console/drive.py` (selenium, pinned, with Debian's
//! chromium and chromedriver, installed by `scripts/setup-browser.sh`); it
//! writes a screenshot of every page under `target/console-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TempRoot, run_within, setup_script};
use crate::wire::{exchange, json_headers};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `(python, chromedriver)` from `scripts/setup-browser.sh` (idempotent).
fn browser_setup() -> &'static (PathBuf, PathBuf) {
    static SETUP: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let setup = setup_script("setup-browser.sh");
        let value = |key: &str| {
            setup
                .get(key)
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("no {key}= line in {setup:?}"))
        };
        (value("python"), value("chromedriver"))
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
    let r = exchange(addr, method, path, &json_headers(token), body);
    (r.status, r.head.to_lowercase(), r.body)
}

fn post(addr: &str, path: &str, token: &str, body: &Value) -> Value {
    let (status, _, text) = http(addr, "POST", path, Some(token), &body.to_string());
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
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
    let served = root.serve();
    let addr = served.addr.clone();
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
    let admin = root.cli_token("root", "dsh-desktop");
    let group = root.cli_token("group", "qq-group-1");
    let spare = root.cli_token("spare", "pet");
    let served = root.serve();
    let addr = served.addr.clone();

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

    let consolidated = post(&addr, "/v1/consolidation/run", &admin, &json!({}));
    assert!(consolidated["run"].is_string(), "{consolidated}");
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
    let mut drive = Command::new(python);
    drive
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
        .arg(chromedriver);
    // Bounded: a hung browser fails the test instead of holding the suite.
    let done = run_within(drive, Duration::from_secs(300), "drive.py");
    done.assert_success();
    let out = done.stdout;
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
