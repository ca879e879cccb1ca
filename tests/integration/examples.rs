//! The client examples under `examples/`, each run by its own test framework
//! against a live `memd serve` (the real binary, a temp root, a loopback port,
//! tokens issued with `memd token issue`):
//!
//! - `examples/qq-bridge`: a NoneBot2 plugin, driven by nonebug with recorded
//!   OneBot v11 events (pytest);
//! - `examples/desktop-pet`: a standard-library Python client (unittest), also
//!   against a closed port and a server that never answers;
//! - `examples/agent-mcp`: the shipped `mcpServers` configurations, loaded and
//!   driven with the official Python MCP SDK over stdio and streamable HTTP,
//!   and the `dsh-memory` Cordis plugin loaded from the shipped
//!   `cordis.patch.yml` (node's test runner).
//!
//! Their dependencies are pinned and installed by
//! `scripts/setup-test-clients.sh` (or given by `MEMD_BRIDGE_PYTHON`,
//! `MEMD_DSH_MODULES` and `MEMD_MCP_PYTHON`). Every wait is bounded: a client
//! run is killed after its limit and the test fails with its output.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TempRoot, free_port, run_within, setup_script};

const MEMD: &str = env!("CARGO_BIN_EXE_memd");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where the pinned clients are: environment overrides, else whatever
/// `scripts/setup-test-clients.sh` installs (idempotent, cached under $HOME).
fn clients() -> &'static HashMap<String, String> {
    static CLIENTS: OnceLock<HashMap<String, String>> = OnceLock::new();
    CLIENTS.get_or_init(|| {
        let given = [
            ("bridge_python", "MEMD_BRIDGE_PYTHON"),
            ("dsh_modules", "MEMD_DSH_MODULES"),
            ("python", "MEMD_MCP_PYTHON"),
        ];
        let from_env: HashMap<String, String> = given
            .iter()
            .filter_map(|(k, var)| std::env::var(var).ok().map(|v| (k.to_string(), v)))
            .collect();
        if from_env.len() == given.len() {
            return from_env;
        }
        setup_script("setup-test-clients.sh")
    })
}

fn client(key: &str) -> String {
    clients()
        .get(key)
        .unwrap_or_else(|| panic!("scripts/setup-test-clients.sh printed no {key}="))
        .clone()
}

/// `memd serve` on a temp root, stopped (with any daemon holding the root's
/// lock) when dropped.
struct Daemon {
    root: TempRoot,
    child: Child,
    url: String,
}

impl Daemon {
    /// With `in_config`, the port is written to the root's `config.json`
    /// (where `memd mcp` looks for the daemon), else `--listen 127.0.0.1:0`.
    fn start(in_config: bool) -> Daemon {
        let root = TempRoot::new();
        let mut cmd = Command::new(MEMD);
        cmd.arg("serve");
        if in_config {
            let listen = format!("127.0.0.1:{}", free_port());
            root.write_config(json!({ "listen": listen }));
        } else {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let out = root.path().join("serve.stdout");
        let err = root.path().join("serve.stderr");
        let mut child = cmd
            .env("MEMD_ROOT", root.path())
            .env("MEMD_MODELS_DIR", root.path().join("no-models"))
            .env_remove("MEMD_LOG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start memd serve");
        let started = Instant::now();
        let url = loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(addr) = text
                .lines()
                .next()
                .filter(|_| text.contains('\n'))
                .and_then(|l| l.trim().strip_prefix("listening on http://"))
            {
                break addr.to_string();
            }
            let stderr = || std::fs::read_to_string(&err).unwrap_or_default();
            if let Some(s) = child.try_wait().unwrap() {
                panic!("memd serve exited ({s}) before listening:\n{}", stderr());
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("memd serve did not listen within 60 s:\n{}", stderr());
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        Daemon { root, child, url }
    }

    fn token(&self, name: &str, preset: &str) -> String {
        self.root
            .memd_json(&["token", "issue", "--name", name, "--preset", preset])["secret"]
            .as_str()
            .expect("the secret")
            .to_string()
    }

    fn path(&self) -> &Path {
        self.root.path()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A daemon that `memd mcp` started for the root if ours was not answering.
        if let Ok(pid) = std::fs::read_to_string(self.root.path().join(".memd.lock")) {
            let pid = pid.trim();
            if !pid.is_empty() && pid != self.child.id().to_string() {
                let _ = Command::new("kill").args(["-TERM", pid]).status();
            }
        }
    }
}

/// "N passed" from pytest's summary line.
fn pytest_passed(output: &str) -> usize {
    let summary = output
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary in:\n{output}"));
    summary
        .split_whitespace()
        .zip(summary.split_whitespace().skip(1))
        .find(|(_, w)| w.trim_end_matches(',') == "passed")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable pytest summary {summary:?}"))
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the example clients (scripts/setup-test-clients.sh)"
)]
#[test]
fn qq_bridge_nonebot_plugin_on_recorded_onebot_events() {
    let d = Daemon::start(false);
    let tokens = json!({
        "group:123": d.token("qq-group-123", "qq-group-123"),
        "group:456": d.token("qq-group-456", "qq-group-456"),
        "private:10001": d.token("qq-private-10001", "qq-private-10001"),
        "owner": d.token("qq-owner", "qq-owner"),
    });
    let mut cmd = Command::new(client("bridge_python"));
    cmd.args(["-m", "pytest", "-p", "no:cacheprovider", "-v", "--color=no"])
        .current_dir(repo().join("examples/qq-bridge"))
        .env("MEMD_URL", format!("http://{}", d.url))
        .env("MEMD_TOKENS", tokens.to_string())
        .env("MEMD_DISCLOSE_TOKEN", d.token("qq-disclose", "qq-disclose"))
        .env("MEMD_SEED_TOKEN", d.token("dsh", "dsh-desktop"))
        .env("MEMD_ROOT", d.path());
    let done = run_within(
        cmd,
        Duration::from_secs(240),
        "the qq-bridge tests (pytest)",
    );
    done.assert_success();
    let out = done.output();
    assert_eq!(pytest_passed(&out), 7, "{out}");
    assert!(!out.contains(" skipped"), "{out}");

    // The source of truth agrees: the message delivered twice is one memory
    // (a recall may add a line extending its lifetime, under the same id),
    // and the sticker-only messages left none.
    let lines = d.root.journal_lines();
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    let ids: std::collections::BTreeSet<String> = lines
        .iter()
        .filter(|l| l.contains("周末去爬山吗"))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids.len(), 1, "{lines:#?}");
    assert_eq!(count("[表情]") + count("动画表情") + count("CQ:face"), 0);
    assert_eq!(count("群里周六早上八点在地铁站集合"), 1);
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the example clients (scripts/setup-test-clients.sh)"
)]
#[test]
fn desktop_pet_against_live_memd_a_closed_port_and_a_silent_one() {
    let d = Daemon::start(false);
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "unittest", "-v", "test_pet"])
        .current_dir(repo().join("examples/desktop-pet"))
        .env("MEMD_URL", format!("http://{}", d.url))
        .env("MEMD_PET_TOKEN", d.token("pet", "pet"))
        .env("MEMD_SEED_TOKEN", d.token("dsh", "dsh-desktop"));
    let done = run_within(
        cmd,
        Duration::from_secs(120),
        "the desktop-pet tests (unittest)",
    );
    done.assert_success();
    let out = done.output();
    assert!(out.contains("Ran 6 tests") && out.contains("\nOK"), "{out}");
    assert!(!out.contains("skipped"), "{out}");

    // The pet's note is in scene pet, about itself; nothing of the pet's is in main.
    let lines = d.root.journal_lines();
    let note = lines
        .iter()
        .find(|l| l.contains("主人喜欢我在早上打招呼"))
        .expect("the pet's note is in the journal");
    let note: Value = serde_json::from_str(note).unwrap();
    assert_eq!(
        (note["scene"].as_str(), note["subject"].as_str()),
        (Some("pet"), Some("self"))
    );
    assert!(!lines.iter().any(|l| l.contains("主人喜欢猫")));
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the example clients (scripts/setup-test-clients.sh)"
)]
#[test]
fn agent_mcp_configs_drive_memd_over_stdio_and_http() {
    let d = Daemon::start(true);
    let token = d.token("dsh", "dsh-desktop");
    let token_file = d.path().join("agent.token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let bin_dir = Path::new(MEMD).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = repo().join("examples/agent-mcp");
    let drive = |configs: &[&Path], token: &str| {
        let mut cmd = Command::new(client("python"));
        cmd.arg(dir.join("drive_configs.py"))
            .args(configs)
            .env("PATH", &path)
            .env("MEMD_ROOT", d.path())
            .env("MEMD_TOKEN_FILE", &token_file)
            .env("MEMD_URL", format!("http://{}", d.url))
            .env("MEMD_TOKEN", token)
            .env_remove("MEMD_LOG");
        let done = run_within(cmd, Duration::from_secs(180), "drive_configs.py");
        done.assert_success();
        let report: Value = serde_json::from_str(done.stdout.trim())
            .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{}", done.output()));
        (report, done.stderr)
    };

    let (report, stderr) = drive(
        &[&dir.join("mcp-stdio.json"), &dir.join("mcp-http.json")],
        &token,
    );
    let mut ids = Vec::new();
    for (file, transport) in [("mcp-stdio.json", "stdio"), ("mcp-http.json", "http")] {
        let r = &report[file];
        assert!(r.get("fatal").is_none(), "{file}: {}\n{stderr}", r["fatal"]);
        assert_eq!(r["transport"], transport);
        assert_eq!(r["name"], "memory-hub");
        assert_eq!(r["server"], "memory-hub");
        let tools: Vec<&str> = r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        for t in [
            "memory_bootstrap",
            "memory_search",
            "memory_recall",
            "memory_write",
            "memory_forget",
        ] {
            assert!(tools.contains(&t), "{file}: {tools:?}");
        }
        assert_eq!(
            r["bootstrap"]["json"]["scene"], "main",
            "{file}: {}",
            r["bootstrap"]
        );
        assert_eq!(
            r["write"]["json"]["action"], "ADD",
            "{file}: {}",
            r["write"]
        );
        let id = r["write"]["json"]["id"].as_str().unwrap().to_string();
        let hits: Vec<&str> = r["search"]["json"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap())
            .collect();
        assert_eq!(hits, vec![id.as_str()], "{file}");
        let marker = r["marker"].as_str().unwrap();
        let block = r["recall"]["json"]["block"].as_str().unwrap_or_default();
        assert!(block.contains(marker), "{file}: recall {}", r["recall"]);
        ids.push(id);
    }
    // Both configurations reached the same daemon: one memory each in the journal.
    let lines = d.root.journal_lines();
    for id in &ids {
        let puts = lines
            .iter()
            .filter(|l| l.contains(r#""op":"put""#) && l.contains(id.as_str()))
            .count();
        assert_eq!(puts, 1, "{id}: {lines:#?}");
    }

    // A configuration that cannot reach memd fails: a wrong bearer token.
    let (report, _) = drive(&[&dir.join("mcp-http.json")], "mh_not_a_token");
    let fatal = report["mcp-http.json"]["fatal"]
        .as_str()
        .unwrap_or_default();
    assert!(!fatal.is_empty(), "{report}");
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the example clients (scripts/setup-test-clients.sh)"
)]
#[test]
fn dsh_memory_cordis_plugin_at_pre_step() {
    let d = Daemon::start(false);
    let token = d.token("dsh", "dsh-desktop");
    let token_file = d.path().join("agent.token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let mut cmd = Command::new("node");
    cmd.args(["--test", "--test-reporter=tap", "test.mjs"])
        .current_dir(repo().join("examples/agent-mcp/dsh-memory"))
        .env("DSH_TEST_MODULES", client("dsh_modules"))
        .env("MEMD_URL", format!("http://{}", d.url))
        .env("MEMD_TOKEN_FILE", &token_file)
        .env("MEMD_SEED_TOKEN", &token);
    let done = run_within(
        cmd,
        Duration::from_secs(120),
        "the dsh-memory tests (node --test)",
    );
    done.assert_success();
    let out = done.output();
    assert!(
        out.contains("# pass 4") && out.contains("# fail 0"),
        "{out}"
    );
    assert!(
        out.contains("# skipped 0") && out.contains("# todo 0"),
        "{out}"
    );
}
