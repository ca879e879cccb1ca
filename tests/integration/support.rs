//! Shared helpers: temp roots, hubs, the CLI binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use memory_hub::config::{Config, Layout};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::hub::{Hub, Mode, WriteRequest};
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

    /// A writer hub with this embedder.
    pub fn hub_with(&self, embedder: Arc<HashEmbedder>) -> Hub {
        Hub::open_with(
            self.layout(),
            Config::default(),
            Mode::Write,
            EmbedderSlot::ready(embedder),
            &mut |_| {},
        )
        .expect("open hub")
        .0
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

/// A `memd serve` child on a free loopback port, stopped with SIGTERM (a
/// clean stop) on drop.
pub struct Served {
    pub child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Served {
    /// Stops the daemon cleanly (SIGTERM) and waits for it.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for memd serve") {
                return status;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().expect("wait for memd serve");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
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
    /// Starts `memd serve --listen 127.0.0.1:0` on this root without an
    /// embedding model (as [`TempRoot::memd`] runs the CLI), and waits until
    /// it has recorded its address.
    pub fn serve(&self) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memd"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("MEMD_ROOT", self.path())
            .env("MEMD_MODELS_DIR", self.path().join("no-models"))
            .env_remove("MEMD_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start memd serve");
        let addr = serve_addr(&mut child);
        assert!(
            self.path().join(".memd.addr").is_file(),
            "memd serve records its address before it announces it"
        );
        Served { child, addr }
    }
}
