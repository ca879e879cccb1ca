//! Shared helpers: temp roots, hubs, tokens, a test clock, the CLI binary,
//! a `memd serve` child and its guards. Raw HTTP to a served daemon is in
//! `wire.rs`; the in-process `/v1` router in `http_support.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use memory_hub::auth::{self, IssueRequest};
use memory_hub::config::{Config, Layout};
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::embed::{Embedder, EmbedderSlot};
use memory_hub::hub::{CatchUpReport, Hub, Mode, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::model::Scene;
use memory_hub::search::{SearchMode, SearchRequest};

/// A temporary root, removed on drop.
pub struct TempRoot {
    pub dir: tempfile::TempDir,
}

impl TempRoot {
    pub fn new() -> Self {
        TempRoot {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn layout(&self) -> Layout {
        Layout::new(self.path())
    }

    /// A writer hub with the deterministic hash embedder (tests that are not
    /// about the model itself should not depend on it).
    pub fn hub(&self) -> Hub {
        self.hub_with(Arc::new(HashEmbedder::new(384)))
    }

    /// A writer hub with this embedder (a fake one, or the model).
    pub fn hub_with(&self, embedder: Arc<dyn Embedder>) -> Hub {
        self.open(Config::default(), EmbedderSlot::ready(embedder))
    }

    /// A writer hub with this config and the hash embedder.
    pub fn hub_configured(&self, config: Config) -> Hub {
        self.open(
            config,
            EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        )
    }

    /// A writer hub with this config and this embedder.
    pub fn hub_configured_with(&self, config: Config, embedder: Arc<dyn Embedder>) -> Hub {
        self.open(config, EmbedderSlot::ready(embedder))
    }

    fn open(&self, config: Config, embedder: EmbedderSlot) -> Hub {
        Hub::open_with(self.layout(), config, Mode::Write, embedder, &mut |_| {})
            .expect("open hub")
            .0
    }

    /// Rebuilds the index from `memories/` (as `memd reindex` does) with this
    /// config and the hash embedder; the hub that results and what it read.
    pub fn reindex(&self, config: Config) -> (Hub, CatchUpReport) {
        Hub::reindex_with(
            self.layout(),
            config,
            EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
            &mut |_| {},
        )
        .expect("reindex")
    }

    /// Issues a token from a preset straight into `tokens.json`; its secret.
    pub fn token(&self, name: &str, preset: &str) -> String {
        self.issue(IssueRequest {
            name: name.into(),
            preset: Some(preset.into()),
            ..Default::default()
        })
    }

    /// Issues a token with explicit scopes and scenes; its secret.
    pub fn custom_token(&self, name: &str, scopes: &[&str], scenes: &[&str]) -> String {
        self.issue(IssueRequest {
            name: name.into(),
            preset: None,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            scenes: scenes.iter().map(|s| s.to_string()).collect(),
        })
    }

    fn issue(&self, request: IssueRequest) -> String {
        auth::issue(&self.layout().tokens(), &request, Utc::now())
            .expect("issue a token")
            .1
    }

    /// Issues a token from a preset with `memd token issue`, as a person
    /// does; its secret.
    pub fn cli_token(&self, name: &str, preset: &str) -> String {
        self.memd_json(&["token", "issue", "--name", name, "--preset", preset])["secret"]
            .as_str()
            .expect("the secret")
            .to_string()
    }

    /// Writes `config.json` (JSON text, or a `json!` value).
    pub fn write_config(&self, config: impl std::fmt::Display) {
        std::fs::write(self.path().join("config.json"), config.to_string()).unwrap();
    }

    /// Writes a Markdown document under memories/.
    pub fn write_doc(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path().join("memories").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs the real binary against this root, without an embedding model
    /// (hybrid search runs as full text), so CLI tests do not load the model.
    pub fn memd(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_memd"))
            .args(args)
            .env("MEMD_ROOT", self.path())
            .env("MEMD_MODELS_DIR", self.path().join("no-models"))
            .env_remove("MEMD_LOG")
            .output()
            .expect("run memd")
    }

    /// Runs the real binary with the installed models (`scripts/setup.sh`).
    pub fn memd_with_models(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_memd"))
            .args(args)
            .env("MEMD_ROOT", self.path())
            .env_remove("MEMD_LOG")
            .output()
            .expect("run memd")
    }

    /// Runs the binary (as [`TempRoot::memd`]) and asserts success.
    pub fn memd_ok(&self, args: &[&str]) -> Output {
        assert_ok(self.memd(args))
    }

    /// Runs the binary with `--json`, asserts success, parses stdout.
    pub fn memd_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.memd(&all);
        assert!(
            out.status.success(),
            "memd {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
    }

    /// `memd backup create --out DIR`; its JSON reply (`path`, `manifest`).
    pub fn backup_to(&self, dir: &Path) -> serde_json::Value {
        self.memd_json(&["backup", "create", "--out", dir.to_str().unwrap()])
    }

    /// Every plain journal file (`memories/facts/*.jsonl` and
    /// `memories/facts/<device>/*.jsonl`), by path.
    pub fn journal_files(&self) -> Vec<PathBuf> {
        let dir = self.path().join("memories/facts");
        let list = |d: &Path| -> Vec<PathBuf> {
            std::fs::read_dir(d)
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default()
        };
        let mut files = Vec::new();
        for p in list(&dir) {
            if p.is_dir() && p.file_name().is_some_and(|n| n != "archive") {
                files.extend(list(&p).into_iter().filter(|f| f.is_file()));
            } else if p.is_file() {
                files.push(p);
            }
        }
        files.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
        files.sort();
        files
    }

    /// All journal lines, in file order.
    pub fn journal_lines(&self) -> Vec<String> {
        self.journal_files()
            .iter()
            .flat_map(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// Asserts that a finished command succeeded (its stderr in the failure).
pub fn assert_ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn scene(s: &str) -> Scene {
    Scene::parse(s).unwrap()
}

pub fn write(hub: &Hub, scene_name: &str, text: &str) -> String {
    hub.append(WriteRequest::new(scene(scene_name), text, "test"))
        .unwrap()
        .id
}

/// Ids found by full-text search for `query` across all scenes.
pub fn search_ids(hub: &Hub, query: &str, limit: usize) -> Vec<String> {
    search_ids_in(hub, query, limit, SearchMode::Fulltext)
}

/// Ids ranked for `query` across all scenes by full-text search with the
/// relevance decision off (`min_score: 0`): for tests of what the index
/// finds and in which order, not of what is about the query.
pub fn ranked_ids(hub: &Hub, query: &str, limit: usize) -> Vec<String> {
    ranked_ids_in(hub, query, limit, SearchMode::Fulltext)
}

/// [`ranked_ids`] in `mode`.
pub fn ranked_ids_in(hub: &Hub, query: &str, limit: usize, mode: SearchMode) -> Vec<String> {
    hub.search_filtered(&SearchRequest {
        query: query.into(),
        filter: Filter::all(),
        limit: Some(limit),
        mode: Some(mode),
        min_score: Some(0.0),
    })
    .unwrap()
    .hits
    .into_iter()
    .map(|h| h.memory.id)
    .collect()
}

/// Ids found for `query` across all scenes in `mode`.
pub fn search_ids_in(hub: &Hub, query: &str, limit: usize, mode: SearchMode) -> Vec<String> {
    hub.search_filtered(&SearchRequest {
        query: query.into(),
        filter: Filter::all(),
        limit: Some(limit),
        mode: Some(mode),
        min_score: None,
    })
    .unwrap()
    .hits
    .into_iter()
    .map(|h| h.memory.id)
    .collect()
}

/// The address a starting `memd serve` child announces on its first stdout
/// line (`listening on http://ADDR`); the child must have a piped stdout.
pub fn serve_addr(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("read the first line of memd serve");
    line.trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string()
}

/// Runs the categories use case (`/v1/categories`) as the local operator;
/// `fields` is the JSON request (`{"action": "set", "name": …}`).
pub fn categories(
    hub: &Hub,
    fields: serde_json::Value,
) -> memory_hub::Result<memory_hub::hub::categories::CategoriesReply> {
    let body = serde_json::from_value(fields).expect("a valid categories request");
    hub.categories(&hub.operator(), body)
}

/// The one category of a `get` or `set` reply.
pub fn one_category(
    reply: memory_hub::hub::categories::CategoriesReply,
) -> memory_hub::hub::categories::Category {
    match reply {
        memory_hub::hub::categories::CategoriesReply::One(c) => c,
        other => panic!("expected one category, got {other:?}"),
    }
}

/// Expired memories whose text contains `query`, as the local operator sees the archive.
pub fn archive_search(
    hub: &Hub,
    query: &str,
    limit: usize,
) -> memory_hub::Result<Vec<memory_hub::model::Memory>> {
    let body = memory_hub::api::ArchiveSearchBody {
        query: query.into(),
        limit: Some(limit),
    };
    Ok(hub.archive_search(&hub.operator(), body)?.items)
}

/// Restores an expired memory as the local operator.
pub fn archive_restore(hub: &Hub, id: &str) -> memory_hub::Result<memory_hub::model::Memory> {
    let body = memory_hub::api::RestoreBody { id: id.into() };
    hub.archive_restore(&hub.operator(), body)
}

/// Edits a fact's tags and importance as the local operator (`/v1/tags`).
pub fn edit_tags(
    hub: &Hub,
    id: &str,
    add: &[&str],
    remove: &[&str],
    importance: Option<f32>,
) -> memory_hub::Result<memory_hub::api::TagsReply> {
    let body = memory_hub::api::TagsBody {
        id: id.into(),
        add: add.iter().map(|s| s.to_string()).collect(),
        remove: remove.iter().map(|s| s.to_string()).collect(),
        importance,
    };
    hub.tags(&hub.operator(), body)
}

/// The check named `name` in a `memd doctor --json` report.
pub fn doctor_check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("a doctor report")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

/// A clock the test moves by hand, installed into hubs.
#[derive(Clone)]
pub struct TestClock(Arc<Mutex<DateTime<Utc>>>);

impl TestClock {
    /// Stopped at `rfc3339`.
    pub fn at(rfc3339: &str) -> Self {
        let t = DateTime::parse_from_rfc3339(rfc3339).expect("an RFC 3339 instant");
        TestClock(Arc::new(Mutex::new(t.with_timezone(&Utc))))
    }

    pub fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }

    pub fn advance(&self, d: chrono::Duration) {
        *self.0.lock().unwrap() += d;
    }

    /// Makes `hub` read the time from this clock.
    pub fn install(&self, hub: &Hub) {
        let c = self.clone();
        hub.set_clock(Arc::new(move || c.now()));
    }
}

/// A gate where threads wait until the test opens it: a fake embedder
/// holds a search or a write at the point under test with one.
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    pub fn new(open: bool) -> Self {
        Gate {
            open: Mutex::new(open),
            opened: Condvar::new(),
        }
    }

    /// Returns once the gate is open.
    pub fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    pub fn close(&self) {
        *self.open.lock().unwrap() = false;
    }
}

/// The fields a new version takes from the one it replaces when the
/// request leaves them out.
pub const INHERITED: &[&str] = &[
    "scene",
    "kind",
    "title",
    "tags",
    "privacy",
    "subject",
    "importance",
    "tier",
    "stage",
    "time",
    "time_at",
    "session",
    "speaker",
];

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child run by [`run_within`]: finished, or killed at its time limit.
pub struct Finished {
    what: String,
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Finished {
    pub fn assert_success(&self) {
        assert!(
            self.status.is_some_and(|s| s.success()),
            "{} {} after {:.1} s\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what,
            match self.status {
                Some(s) => format!("failed ({s})"),
                None => "was killed: it ran past its time limit".to_string(),
            },
            self.took.as_secs_f64(),
            self.stdout,
            self.stderr
        );
    }

    pub fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs `cmd` to the end or kills it after `limit`; output goes through files,
/// so a chatty client can never block on a full pipe.
pub fn run_within(mut cmd: Command, limit: Duration, what: &str) -> Finished {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("stdout");
    let err = dir.path().join("stderr");
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Finished {
        what: what.to_string(),
        status,
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        took: started.elapsed(),
    }
}

/// Runs `scripts/NAME` (an idempotent installer that prints `key=value`
/// lines, such as where it put a venv's python) within ten minutes and
/// returns those lines.
pub fn setup_script(name: &str) -> std::collections::HashMap<String, String> {
    let mut cmd = Command::new("bash");
    cmd.arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts")
            .join(name),
    );
    let done = run_within(cmd, Duration::from_secs(600), &format!("scripts/{name}"));
    done.assert_success();
    done.stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `memd serve --listen 127.0.0.1:0` on `root` without an embedding model
/// (as [`TempRoot::memd`] runs the CLI): stdin closed, stdout piped for
/// [`Served::start`], stderr discarded. A test changes what it needs
/// (`.env("MEMD_LOG", "info")`, `.stderr(…)`) before starting it.
pub fn serve_command(root: &Path) -> Command {
    let mut cmd = serve_on_config(root);
    cmd.args(["--listen", "127.0.0.1:0"]);
    cmd
}

/// [`serve_command`] on the address the root's `config.json` names.
pub fn serve_on_config(root: &Path) -> Command {
    let mut cmd = serve_with_models(root);
    cmd.env("MEMD_MODELS_DIR", root.join("no-models"));
    cmd
}

/// `memd serve` on `root` with the installed models (`scripts/setup.sh`),
/// on the address its `config.json` names unless the caller adds `--listen`.
pub fn serve_with_models(root: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memd"));
    cmd.arg("serve")
        .env("MEMD_ROOT", root)
        .env_remove("MEMD_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// A `memd serve` child and the address it listens on, stopped with SIGTERM
/// (a clean stop) on drop.
pub struct Served {
    pub child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Served {
    /// Starts `cmd` (see [`serve_command`]) and reads the address it announces.
    pub fn start(cmd: &mut Command) -> Served {
        let mut child = cmd.spawn().expect("start memd serve");
        let addr = serve_addr(&mut child);
        Served { child, addr }
    }

    /// Stops the daemon cleanly (SIGTERM) and waits for it.
    pub fn stop(mut self) -> ExitStatus {
        self.terminate()
    }

    /// SIGTERM; the exit status and what the daemon wrote to its stderr (if
    /// piped). Fails the test unless it exits within `limit`.
    pub fn stop_within(mut self, limit: Duration) -> (ExitStatus, String) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + limit;
        let exit = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "memd serve did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
        }
        (exit, stderr)
    }

    /// Kills the daemon (SIGKILL: no clean stop) and waits for it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn terminate(&mut self) -> ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for memd serve") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().expect("wait for memd serve");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

impl TempRoot {
    /// Starts [`serve_command`] on this root and waits until it has recorded
    /// its address.
    pub fn serve(&self) -> Served {
        let served = Served::start(&mut serve_command(self.path()));
        assert!(
            self.path().join(".memd.addr").is_file(),
            "memd serve records its address before it announces it"
        );
        served
    }
}

/// Stops whichever `memd serve` holds the root's writer lock when dropped
/// (including a daemon that `memd mcp` started), and waits until it is gone.
pub struct DaemonGuard(pub PathBuf);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let lock = self.0.join(".memd.lock");
        let Ok(pid) = std::fs::read_to_string(&lock) else {
            return;
        };
        let pid = pid.trim().to_string();
        if pid.is_empty() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10)
            && Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
