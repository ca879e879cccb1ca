//! The SQLite metadata store: every searchable memory's fields, journal
//! cursors, document bookkeeping and the issues found while reading files.
//!
//! Schema changes go through `MIGRATIONS`, applied in order on open and
//! tracked with `PRAGMA user_version`. Visibility filters become part of the
//! `WHERE` clause of every read, so a row a caller may not see is never loaded.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Row, Transaction, params, params_from_iter,
};

use crate::error::{Error, IoContext, Result};
use crate::index::filter::Filter;
use crate::model::Memory;
use crate::store::journal::{Cursor, LineIssue};

/// Ordered schema migrations; entry `i` moves `user_version` from `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE memories (
    id TEXT PRIMARY KEY,
    origin TEXT NOT NULL,
    doc_id TEXT,
    path TEXT,
    ord INTEGER,
    ts INTEGER NOT NULL,
    scene TEXT NOT NULL,
    kind TEXT NOT NULL,
    stage TEXT NOT NULL,
    privacy TEXT NOT NULL,
    subject TEXT NOT NULL,
    tier TEXT,
    source TEXT NOT NULL,
    importance REAL NOT NULL,
    title TEXT,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    supersedes TEXT,
    expires_at INTEGER,
    source_message_id TEXT,
    idempotency_key TEXT,
    device TEXT,
    journal_file TEXT,
    journal_line INTEGER,
    forgotten_at INTEGER
);
CREATE INDEX memories_scene_ts ON memories(scene, ts);
CREATE INDEX memories_doc ON memories(doc_id) WHERE doc_id IS NOT NULL;
CREATE INDEX memories_idempotency ON memories(idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE TABLE journal_cursors (
    file TEXT PRIMARY KEY,
    offset INTEGER NOT NULL,
    lines INTEGER NOT NULL
);
CREATE TABLE journal_issues (
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (file, line)
);
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    hash TEXT NOT NULL,
    title TEXT NOT NULL,
    chunks INTEGER NOT NULL
);
CREATE TABLE document_issues (
    path TEXT PRIMARY KEY,
    message TEXT NOT NULL
);
"#,
    r#"
ALTER TABLE memories ADD COLUMN vector_model TEXT;
CREATE INDEX memories_vector_pending ON memories(id) WHERE vector_model IS NULL AND forgotten_at IS NULL;
CREATE TABLE vector_meta (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    model TEXT NOT NULL,
    dim INTEGER NOT NULL
);
"#,
    // Lifecycle (see `index::lifecycle`): dedup hash, access counts, supersede marks.
    r#"
ALTER TABLE memories ADD COLUMN content_hash TEXT;
ALTER TABLE memories ADD COLUMN accesses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN last_access INTEGER;
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
CREATE INDEX memories_content_hash ON memories(content_hash) WHERE content_hash IS NOT NULL;
CREATE INDEX memories_supersedes ON memories(supersedes) WHERE supersedes IS NOT NULL;
"#,
    // Merge rules (see `index::merge`): put versions, put values touches fold
    // from, forgets by id and touches by journal line.
    r#"
ALTER TABLE memories ADD COLUMN put_at INTEGER;
ALTER TABLE memories ADD COLUMN base_tier TEXT;
ALTER TABLE memories ADD COLUMN base_accesses INTEGER;
ALTER TABLE memories ADD COLUMN base_expires INTEGER;
CREATE TABLE forgets (
    id TEXT PRIMARY KEY,
    at INTEGER NOT NULL
);
CREATE TABLE touches (
    id TEXT NOT NULL,
    at INTEGER NOT NULL,
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    PRIMARY KEY (id, file, line)
);
"#,
    // Event time, session and speaker (see `model::Setting`); sessions find
    // their turns' neighbours through the index.
    r#"
ALTER TABLE memories ADD COLUMN event_time TEXT;
ALTER TABLE memories ADD COLUMN event_at INTEGER;
ALTER TABLE memories ADD COLUMN session TEXT;
ALTER TABLE memories ADD COLUMN speaker TEXT;
CREATE INDEX memories_session ON memories(scene, session) WHERE session IS NOT NULL;
"#,
    // Every change to `memory_vectors`, written in the changing transaction:
    // the in-process coarse pass catches up from it (see `index::vector_scan`).
    r#"
CREATE TABLE vector_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT);
"#,
    // Journal lines read but not applied, and why (see `index::merge`): one
    // row per line, reported with the journal's issues. Other rules that
    // refuse a line on replay record it here too.
    r#"
CREATE TABLE quarantine (
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    id TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (file, line)
);
"#,
    // Links between facts (`link` and `unlink` lines, see `index::merge`):
    // one row per pair and relation, the later line deciding `live`.
    r#"
CREATE TABLE links (
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    rel TEXT NOT NULL,
    reason TEXT,
    at INTEGER NOT NULL,
    live INTEGER NOT NULL,
    PRIMARY KEY (a, b, rel)
);
CREATE INDEX links_b ON links(b, rel);
"#,
    // The facts a new one is compared with for conflicts (see
    // `hub::conflicts`), newest first, read from the index alone (which
    // holds the columns of its condition: the query names them too).
    r#"
CREATE INDEX memories_conflict_candidates ON memories(scene, subject, ts, id, content_hash, origin, stage, forgotten_at, superseded_by) WHERE origin = 'fact' AND stage = 'long' AND forgotten_at IS NULL AND superseded_by IS NULL;
"#,
];

pub(crate) const MEMORY_COLUMNS: &str = "id, origin, doc_id, path, ts, scene, kind, stage, privacy, subject, tier, \
     source, importance, title, text, tags, supersedes, expires_at, event_time, event_at, session, speaker";

/// Extra per-fact columns that are not part of [`Memory`].
#[derive(Debug, Clone, Default)]
pub(crate) struct FactExtras {
    /// Ingest idempotency key.
    pub(crate) source_message_id: Option<String>,
    /// Client idempotency key.
    pub(crate) idempotency_key: Option<String>,
    /// Writing device.
    pub(crate) device: String,
    /// Journal file and 1-based line of the `put`.
    pub(crate) journal: Option<(String, u64)>,
    /// Dedup key ([`crate::lifecycle::content_hash`]).
    pub(crate) content_hash: Option<String>,
    /// Accesses since the last promotion.
    pub(crate) accesses: u32,
}

/// A document's bookkeeping row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DocumentRow {
    /// `doc-<hash8>`.
    pub(crate) doc_id: String,
    /// Path relative to `memories/`.
    pub(crate) path: String,
    /// sha256 of the file.
    pub(crate) hash: String,
    /// Title.
    pub(crate) title: String,
    /// Number of chunks.
    pub(crate) chunks: usize,
}

/// Counts for `memd stats`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MetaCounts {
    /// Searchable memories.
    pub memories: u64,
    /// Facts (not forgotten).
    pub facts: u64,
    /// Forgotten facts.
    pub forgotten: u64,
    /// Document chunks.
    pub(crate) chunks: u64,
    /// Documents.
    pub documents: u64,
    /// Active memories by stage.
    pub(crate) by_stage: HashMap<String, u64>,
    /// Active memories by scene.
    pub(crate) by_scene: HashMap<String, u64>,
    /// Active memories by privacy.
    pub(crate) by_privacy: HashMap<String, u64>,
    /// Active memories by retention tier (`none` for short-term chat and untiered documents).
    pub(crate) by_tier: HashMap<String, u64>,
    /// Journal lines read but not applied (see [`crate::index::merge`]).
    pub quarantined: u64,
}

/// The SQLite store: one write connection (writer mode) and a pool of readers.
///
/// A writer that opens on a full disk (`MetaDb::open_pinned`) reads
/// through one pinned connection instead, and opens its write connection
/// later (`MetaDb::open_writer_late`).
pub struct MetaDb {
    path: std::path::PathBuf,
    /// Set at open in writer mode, or later once a full disk has room again.
    writer: std::sync::OnceLock<Mutex<Connection>>,
    readers: Mutex<Vec<Connection>>,
    /// The one connection every read uses while the disk was too full to
    /// open normally: exclusive locking keeps SQLite's WAL index in heap
    /// memory, so it needs no `-shm` file (which a full disk cannot hold).
    pinned: Mutex<Option<Connection>>,
    /// Write transactions committed since the write-ahead log was last
    /// checkpointed and truncated ([`MetaDb::checkpoint_if_idle`]).
    unflushed: std::sync::atomic::AtomicU64,
    /// When the last write transaction committed.
    last_write: Mutex<Option<std::time::Instant>>,
    /// Whether the `links` table may hold a row: a database this process
    /// writes starts with whether it did at open, and [`MetaDb::note_link`]
    /// sets it before a link is applied; one opened read-only (another
    /// process may write it) always says yes. While it says no, a search
    /// skips probing for its hits' conflict links.
    maybe_links: std::sync::atomic::AtomicBool,
}

/// Idle read connections kept for reuse; a burst of concurrent readers opens
/// more, and those beyond this many are closed when returned (each holds its
/// own page cache and prepared statements).
const IDLE_READERS: usize = 4;

/// Each read connection's page cache (SQLite's negative `cache_size`: KiB).
/// Readers go through the kernel's page cache (no memory map, see
/// `MetaDb::reader`), so every page missing from this cache is a `pread`.
/// 4 MiB holds the `memories` rows and their id index at 10,000 memories
/// (about 3.4 MB): a search reading the bodies of its ~200 candidates did
/// about 560 `pread`s with 1 MiB. Pages are allocated as they are read, so
/// a connection that reads little holds little.
const READER_CACHE_KIB: i64 = -4096;

/// After a checkpoint, a write-ahead log larger than this is truncated back
/// to it (`journal_size_limit`): one large transaction (a catch-up) no longer
/// leaves a log of its size behind.
const WAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// The write-ahead log is checkpointed and truncated once no write has
/// committed for this long ([`MetaDb::checkpoint_if_idle`]).
pub(crate) const IDLE_CHECKPOINT: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for MetaDb {
    /// A clean close leaves no write-ahead log behind: the read connections
    /// close first, then the log is checkpointed and truncated on the write
    /// connection, which closes last (SQLite removes the log when the last
    /// connection closes, but only a connection that may write can; a
    /// read-only connection closing last left the whole log on disk).
    fn drop(&mut self) {
        self.readers
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        if self.writer.get().is_some()
            && let Err(e) = self.checkpoint()
        {
            tracing::warn!(error = %e, "cannot checkpoint the metadata store's log on close; the next open does");
        }
    }
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let version = conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    if version > MIGRATIONS.len() {
        return Err(Error::Internal(format!(
            "index schema version {version} is newer than this build ({}); run `memd reindex`",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

pub(crate) fn row_to_memory(r: &Row<'_>) -> rusqlite::Result<Memory> {
    let parse_err = |i: usize, e: Error| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    };
    let enum_col = |i: usize| -> rusqlite::Result<String> { r.get::<_, String>(i) };
    let millis = |v: i64| DateTime::<Utc>::from_timestamp_millis(v).unwrap_or_default();
    let tags: String = r.get(15)?;
    Ok(Memory {
        id: r.get(0)?,
        origin: enum_col(1)?.parse().map_err(|e| parse_err(1, e))?,
        doc_id: r.get(2)?,
        path: r.get(3)?,
        ts: millis(r.get(4)?),
        scene: crate::model::Scene::parse(&enum_col(5)?).map_err(|e| parse_err(5, e))?,
        kind: r.get(6)?,
        stage: enum_col(7)?.parse().map_err(|e| parse_err(7, e))?,
        privacy: enum_col(8)?.parse().map_err(|e| parse_err(8, e))?,
        subject: enum_col(9)?.parse().map_err(|e| parse_err(9, e))?,
        tier: r
            .get::<_, Option<String>>(10)?
            .map(|t| t.parse())
            .transpose()
            .map_err(|e| parse_err(10, e))?,
        source: r.get(11)?,
        importance: r.get::<_, f64>(12)? as f32,
        title: r.get(13)?,
        text: r.get(14)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        supersedes: r.get(16)?,
        expires_at: r.get::<_, Option<i64>>(17)?.map(millis),
        setting: crate::model::Setting {
            time: r.get(18)?,
            time_at: r.get::<_, Option<i64>>(19)?.map(millis),
            session: r.get(20)?,
            speaker: r.get(21)?,
        },
    })
}

/// Builds `(sql, params)` for a visibility filter over the `memories` table.
pub(crate) fn filter_sql(filter: &Filter) -> (String, Vec<String>) {
    filter_clauses(filter, "")
}

/// [`filter_sql`] for a query whose rows are found by a key (`id IN (…)`,
/// `doc_id = ?`): the filter is checked on each row found and never chosen
/// as the way in. Without this SQLite may walk the scene index instead — at
/// 100k memories that read every memory of the caller's scenes to return ten
/// (a unary `+` keeps a column out of index selection; the text columns it
/// is put on compare their text values exactly as before).
pub(crate) fn filter_sql_on_rows(filter: &Filter) -> (String, Vec<String>) {
    filter_clauses(filter, "+")
}

/// The statement [`MetaDb::get_many`] runs for `n` ids (bound first) and its filter parameters.
fn by_ids_sql(n: usize, filter: &Filter) -> (String, Vec<String>) {
    let (where_sql, params) = filter_sql_on_rows(filter);
    let marks = vec!["?"; n].join(",");
    (
        format!(
            "SELECT {MEMORY_COLUMNS} FROM memories \
             WHERE forgotten_at IS NULL AND id IN ({marks}) AND {where_sql}"
        ),
        params,
    )
}

fn filter_clauses(filter: &Filter, column_prefix: &str) -> (String, Vec<String>) {
    let mut params = Vec::new();
    let mut alternatives = Vec::new();
    for scope in &filter.any_of {
        if Filter::is_unrestricted(scope) {
            return ("1".into(), Vec::new());
        }
        let sets = Filter::field_sets(scope);
        let mut clauses = Vec::new();
        if let Some(at) = scope.unexpired_at {
            // The column has INTEGER affinity, so SQLite compares the bound text numerically.
            // No prefix here: no index starts with it, and a `+` would drop
            // the INTEGER affinity that makes the bound text compare as a number.
            clauses.push("(expires_at IS NULL OR expires_at > ?)".to_string());
            params.push(at.timestamp_millis().to_string());
        }
        for (col, values) in sets {
            let marks = vec!["?"; values.len()].join(",");
            clauses.push(format!("{column_prefix}{col} IN ({marks})"));
            params.extend(values);
        }
        alternatives.push(format!("({})", clauses.join(" AND ")));
    }
    if alternatives.is_empty() {
        return ("0".into(), Vec::new());
    }
    (format!("({})", alternatives.join(" OR ")), params)
}

/// Turns on SQLite's query planner stability guarantee: a statement's plan
/// never depends on the values bound to it. Without it SQLite 3.54 marks some
/// statements (`supersedes = ?` with `ORDER BY … LIMIT 1`, `touches` by id
/// and time) to be compiled again whenever a parameter is bound to a new
/// value, which is every call: a fifth of a rebuild's time went to
/// re-preparing the three statements of each `put`. Our statements are
/// written for their indexes and gain nothing from value-specific plans.
fn stable_plans(conn: &Connection) -> Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// The write connection's page cache (SQLite's negative `cache_size`: KiB).
const WRITER_CACHE_KIB: i64 = -8192;

/// Secondary indexes no step of a bulk load reads (searches and writes do):
/// a bulk load drops them after the migrations and creates them again,
/// each in one sort, when it ends. The statements are the migrations' own.
const DEFERRED_INDEXES: [(&str, &str); 3] = [
    (
        "memories_scene_ts",
        "CREATE INDEX memories_scene_ts ON memories(scene, ts)",
    ),
    (
        "memories_content_hash",
        "CREATE INDEX memories_content_hash ON memories(content_hash) WHERE content_hash IS NOT NULL",
    ),
    (
        "memories_conflict_candidates",
        "CREATE INDEX memories_conflict_candidates ON memories(scene, subject, ts, id, content_hash, origin, stage, forgotten_at, superseded_by) WHERE origin = 'fact' AND stage = 'long' AND forgotten_at IS NULL AND superseded_by IS NULL",
    ),
];

/// The write connection's page cache while a rebuilt index is bulk-loaded
/// (KiB): the whole working set of a 1M-fact load stays in memory.
const BULK_CACHE_KIB: i64 = -262_144;

impl MetaDb {
    /// Opens the database at `path`; `writable` also migrates and keeps a write connection.
    pub(crate) fn open(path: &Path, writable: bool) -> Result<MetaDb> {
        Self::open_inner(path, writable, false)
    }

    /// Opens a new database for a bulk load ([`MetaDb::end_bulk_load`] ends
    /// it): a rollback journal kept in memory, no fsync and a large page
    /// cache. A crash in between can leave the file damaged, so the caller
    /// marks the index complete only after [`MetaDb::end_bulk_load`] (the
    /// index `FORMAT` file) and rebuilds an index without that mark.
    pub(crate) fn open_for_bulk_load(path: &Path) -> Result<MetaDb> {
        Self::open_inner(path, true, true)
    }

    fn open_inner(path: &Path, writable: bool, bulk: bool) -> Result<MetaDb> {
        crate::index::vector::register_extension();
        let writer = std::sync::OnceLock::new();
        if writable {
            let _ = writer.set(Mutex::new(Self::open_writer(path, bulk)?));
        }
        let db = MetaDb {
            path: path.to_path_buf(),
            writer,
            readers: Mutex::new(Vec::new()),
            pinned: Mutex::new(None),
            unflushed: std::sync::atomic::AtomicU64::new(0),
            last_write: Mutex::new(None),
            maybe_links: std::sync::atomic::AtomicBool::new(true),
        };
        let links = db.with_reader(|c| {
            Ok(c.query_row("SELECT EXISTS (SELECT 1 FROM links)", [], |r| {
                r.get::<_, bool>(0)
            })?)
        })?;
        db.maybe_links
            .store(links || !writable, std::sync::atomic::Ordering::SeqCst);
        Ok(db)
    }

    /// The write connection, set up and migrated.
    fn open_writer(path: &Path, bulk: bool) -> Result<Connection> {
        let mut conn = Connection::open(path)?;
        if bulk {
            // Every page is written once (no WAL copy, no checkpoint)
            // and nothing is synced until the load ends; transactions
            // still roll back (a failed batch, a full disk).
            conn.pragma_update(None, "journal_mode", "MEMORY")?;
            conn.pragma_update(None, "synchronous", "OFF")?;
        } else {
            conn.pragma_update(None, "journal_mode", "WAL")?;
            // The journal is the durable record; the index may lose its last
            // transactions in a power cut and catches up from the journal.
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
        }
        // Storing a vector writes into the newest sqlite-vec chunk, one
        // blob of 1024 vectors (1.5 MiB float, + 384 KiB int8 in tables
        // of earlier builds) read by
        // walking its overflow pages. SQLite's default 2 MiB page cache
        // cannot hold that walk, so every store re-read the chunk with a
        // read call per page; 8 MiB keeps it cached (half the store cost).
        conn.pragma_update(
            None,
            "cache_size",
            if bulk {
                BULK_CACHE_KIB
            } else {
                WRITER_CACHE_KIB
            },
        )?;
        stable_plans(&conn)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&mut conn)?;
        if bulk {
            // Built once at the end instead of row by row.
            for (name, _) in DEFERRED_INDEXES {
                conn.execute_batch(&format!("DROP INDEX IF EXISTS {name}"))?;
            }
        }
        Ok(conn)
    }

    /// Opens an existing database for reading on a disk too full for
    /// [`MetaDb::open`]: one read-write connection in exclusive locking
    /// mode (no `-shm` file; it reads the write-ahead log into memory)
    /// serves every read, and nothing is written until
    /// [`MetaDb::open_writer_late`] succeeds.
    pub(crate) fn open_pinned(path: &Path) -> Result<MetaDb> {
        crate::index::vector::register_extension();
        if !path.is_file() {
            return Err(Error::Internal(format!(
                "no metadata store at {}",
                path.display()
            )));
        }
        let db = MetaDb {
            path: path.to_path_buf(),
            writer: std::sync::OnceLock::new(),
            readers: Mutex::new(Vec::new()),
            pinned: Mutex::new(Some(Self::pinned_connection(path)?)),
            unflushed: std::sync::atomic::AtomicU64::new(0),
            last_write: Mutex::new(None),
            maybe_links: std::sync::atomic::AtomicBool::new(true),
        };
        db.with_reader(|c| {
            c.query_row("SELECT COUNT(*) FROM journal_cursors", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(())
        })?;
        Ok(db)
    }

    fn pinned_connection(path: &Path) -> Result<Connection> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Before the first access: the WAL index then lives in heap memory.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        stable_plans(&conn)?;
        Ok(conn)
    }

    /// Says that a link is about to be applied (before its transaction
    /// commits, so that no reader of the committed link misses it).
    pub(crate) fn note_link(&self) {
        self.maybe_links
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the `links` table may hold a row (see `maybe_links`).
    pub(crate) fn may_hold_links(&self) -> bool {
        self.maybe_links.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the write connection is open.
    pub(crate) fn is_writable(&self) -> bool {
        self.writer.get().is_some()
    }

    /// Opens the write connection of a store opened by
    /// [`MetaDb::open_pinned`], once the disk has room: the pinned
    /// connection is closed first (it holds the exclusive lock), and
    /// pinned again if the write connection still cannot open.
    pub(crate) fn open_writer_late(&self) -> Result<()> {
        if self.is_writable() {
            return Ok(());
        }
        let mut pinned = self.pinned.lock().expect("pinned connection poisoned");
        drop(pinned.take());
        match Self::open_writer(&self.path, false) {
            Ok(conn) => {
                let _ = self.writer.set(Mutex::new(conn));
                Ok(())
            }
            Err(e) => {
                *pinned = Some(Self::pinned_connection(&self.path)?);
                Err(e)
            }
        }
    }

    /// Copies the write-ahead log into the database and truncates it to
    /// nothing, giving its space back to the file system (see
    /// [`crate::disk`]). Returns the bytes the log held before.
    pub(crate) fn checkpoint_truncate(&self) -> Result<u64> {
        let wal = std::path::PathBuf::from(format!("{}-wal", self.path.display()));
        let before = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        if before == 0 {
            return Ok(0);
        }
        let writer = self
            .writer
            .get()
            .ok_or_else(|| Error::Internal("metadata store opened read-only".into()))?;
        let conn = writer.lock().expect("writer connection poisoned");
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(before)
    }

    fn reader(&self) -> Result<Connection> {
        if let Some(c) = self.readers.lock().expect("reader pool poisoned").pop() {
            return Ok(c);
        }
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "cache_size", READER_CACHE_KIB)?;
        stable_plans(&conn)?;
        // No memory map: pages a reader touches through one stay in the
        // process's resident set for as long as the connection lives, so
        // loading the in-process vector copy (which reads every vector) and
        // rescoring candidates would leave the whole vector table resident
        // (~230 MiB at 100k memories). Read calls go through the kernel's page
        // cache instead, which is not ours and is reclaimed under pressure.
        Ok(conn)
    }

    /// Runs `f` on a pooled read-only connection (on the pinned one while
    /// there is one, see [`MetaDb::open_pinned`]).
    pub(crate) fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        {
            let pinned = self.pinned.lock().expect("pinned connection poisoned");
            if let Some(conn) = pinned.as_ref() {
                return f(conn);
            }
        }
        let conn = self.reader()?;
        let out = f(&conn);
        let mut idle = self.readers.lock().expect("reader pool poisoned");
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        } else {
            drop(idle);
            drop(conn);
        }
        out
    }

    /// Idle read connections in the pool (at most [`IDLE_READERS`]).
    #[cfg(test)]
    pub(crate) fn idle_readers(&self) -> usize {
        self.readers.lock().expect("reader pool poisoned").len()
    }

    /// Runs `f` in one write transaction, begun `IMMEDIATE`: the write lock
    /// is taken (waiting up to the busy timeout) before the first read, so
    /// a transaction that reads first is never refused its upgrade to a
    /// write (`SQLITE_BUSY_SNAPSHOT`, which no busy timeout waits out).
    pub fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let writer = self
            .writer
            .get()
            .ok_or_else(|| Error::Internal("metadata store opened read-only".into()))?;
        let mut conn = writer.lock().expect("writer connection poisoned");
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        drop(conn);
        self.unflushed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.last_write.lock().expect("write clock poisoned") = Some(std::time::Instant::now());
        Ok(out)
    }

    /// Deletes every row, vectors included, in one transaction (a rebuild
    /// in place, see [`crate::index::Index::clear`]). Every table is
    /// emptied, whatever migrations add later, except the vector change
    /// log, whose sequence numbers must keep growing for the coarse pass.
    pub(crate) fn clear(&self) -> Result<()> {
        self.write(|tx| {
            crate::index::vector::reset(tx)?;
            let tables: Vec<String> = tx
                .prepare(
                    "SELECT name FROM sqlite_master WHERE type = 'table' \
                     AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'",
                )?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for table in tables.iter().filter(|t| *t != "vector_log") {
                tx.execute(&format!("DELETE FROM \"{table}\""), [])?;
            }
            Ok(())
        })
    }

    /// Checkpoints the write-ahead log into the database and truncates it to
    /// zero bytes (`PRAGMA wal_checkpoint(TRUNCATE)`). Returns whether it
    /// completed; a reader in the middle of a long read can keep it from
    /// completing (it then waits up to the busy timeout), and it is simply
    /// tried again later. Nothing to do on a read-only store.
    pub(crate) fn checkpoint(&self) -> Result<bool> {
        let Some(writer) = self.writer.get() else {
            return Ok(true);
        };
        let conn = writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = self.unflushed.load(std::sync::atomic::Ordering::Relaxed);
        // (busy, log frames, frames checkpointed); busy = 1 when readers kept it from completing.
        let (busy, _, _): (i64, i64, i64) =
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
        drop(conn);
        if busy == 0 {
            // Only the writes seen before the checkpoint are flushed (the
            // writer lock was held, so none committed meanwhile).
            self.unflushed
                .fetch_sub(before, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(busy == 0)
    }

    /// Checkpoints and truncates the write-ahead log ([`MetaDb::checkpoint`])
    /// when writes committed since the last checkpoint and none for
    /// [`IDLE_CHECKPOINT`]: an idle server holds no log on disk. Returns
    /// whether it checkpointed.
    pub(crate) fn checkpoint_if_idle(&self, idle: std::time::Duration) -> Result<bool> {
        if self.writer.get().is_none()
            || self.unflushed.load(std::sync::atomic::Ordering::Relaxed) == 0
        {
            return Ok(false);
        }
        let quiet = self
            .last_write
            .lock()
            .expect("write clock poisoned")
            .is_none_or(|t| t.elapsed() >= idle);
        if !quiet {
            return Ok(false);
        }
        self.checkpoint()
    }

    /// Ends a bulk load ([`MetaDb::open_for_bulk_load`]): the file is synced
    /// to disk, then the connection goes back to the write-ahead log, normal
    /// syncing and the normal page cache. Only after this may the index be
    /// marked complete.
    pub(crate) fn end_bulk_load(&self) -> Result<()> {
        let writer = self
            .writer
            .get()
            .ok_or_else(|| Error::Internal("metadata store opened read-only".into()))?;
        let conn = writer.lock().expect("writer connection poisoned");
        for (name, sql) in DEFERRED_INDEXES {
            let exists = conn
                .prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?")?
                .exists([name])?;
            if !exists {
                conn.execute_batch(sql)?;
            }
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::Internal(format!(
                "the metadata store stayed in journal mode {mode} after its bulk load"
            )));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
        conn.execute_batch("PRAGMA shrink_memory")?;
        drop(conn);
        std::fs::File::open(&self.path)
            .and_then(|f| f.sync_all())
            .ctx("cannot sync", &self.path)?;
        Ok(())
    }

    /// `PRAGMA quick_check`: the database file is structurally sound.
    pub(crate) fn quick_check(&self) -> Result<()> {
        let problems: Vec<String> = self.with_reader(|c| {
            let mut stmt = c.prepare("PRAGMA quick_check")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })?;
        if problems.len() == 1 && problems[0] == "ok" {
            return Ok(());
        }
        Err(Error::Internal(format!(
            "metadata store fails its integrity check: {}",
            problems
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        )))
    }

    /// Number of searchable memories (facts not forgotten, and document chunks).
    pub(crate) fn live_count(&self) -> Result<u64> {
        self.with_reader(|c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM memories WHERE forgotten_at IS NULL",
                [],
                |r| r.get::<_, i64>(0),
            )? as u64)
        })
    }

    /// Visible memories among `ids`, keyed by id.
    pub(crate) fn get_many(
        &self,
        ids: &[String],
        filter: &Filter,
    ) -> Result<HashMap<String, Memory>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let (sql, params) = by_ids_sql(ids.len(), filter);
        let mut all: Vec<String> = ids.to_vec();
        all.extend(params);
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(all.iter()), row_to_memory)?;
            let mut out = HashMap::new();
            for m in rows {
                let m = m?;
                out.insert(m.id.clone(), m);
            }
            Ok(out)
        })
    }

    /// The searchable body of each visible memory among `ids` (its title, a
    /// newline and its text; the text alone without a title), for the
    /// rankings that read what a hit says without needing the whole row.
    pub(crate) fn bodies_of(
        &self,
        ids: &[String],
        filter: &Filter,
    ) -> Result<HashMap<String, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let (where_sql, params) = filter_sql_on_rows(filter);
        let marks = vec!["?"; ids.len()].join(",");
        let sql = format!(
            "SELECT id, title, text FROM memories \
             WHERE forgotten_at IS NULL AND id IN ({marks}) AND {where_sql}"
        );
        let mut all: Vec<String> = ids.to_vec();
        all.extend(params);
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(all.iter()), |r| {
                let title: Option<String> = r.get(1)?;
                let text: String = r.get(2)?;
                let body = match title {
                    Some(t) => format!("{t}\n{text}"),
                    None => text,
                };
                Ok((r.get::<_, String>(0)?, body))
            })?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// Visible chunks of a document, in order.
    pub(crate) fn doc_chunks(&self, doc_id: &str, filter: &Filter) -> Result<Vec<Memory>> {
        let (where_sql, params) = filter_sql_on_rows(filter);
        let sql = format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE doc_id = ? AND {where_sql} ORDER BY ord"
        );
        let mut all = vec![doc_id.to_string()];
        all.extend(params);
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(all.iter()), row_to_memory)?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// The state of a fact id: `None` unknown, `Some(true)` active, `Some(false)` forgotten.
    pub(crate) fn fact_state(&self, id: &str) -> Result<Option<bool>> {
        self.with_reader(|c| {
            Ok(c.query_row(
                "SELECT forgotten_at IS NULL FROM memories WHERE id = ? AND origin = 'fact'",
                [id],
                |r| r.get::<_, bool>(0),
            )
            .optional()?)
        })
    }

    /// The active fact written with this idempotency key, if any.
    pub(crate) fn find_idempotent(&self, key: &str) -> Result<Option<String>> {
        self.with_reader(|c| {
            Ok(c.query_row(
                "SELECT id FROM memories WHERE idempotency_key = ? AND forgotten_at IS NULL",
                [key],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// How far each journal file has been applied.
    pub(crate) fn cursors(&self) -> Result<HashMap<String, Cursor>> {
        self.with_reader(|c| {
            // Cached: every search and every write reply reads the cursors.
            let mut stmt = c.prepare_cached("SELECT file, offset, lines FROM journal_cursors")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    Cursor {
                        offset: r.get::<_, i64>(1)? as u64,
                        lines: r.get::<_, i64>(2)? as u64,
                    },
                ))
            })?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// Documents as last indexed, by path.
    pub(crate) fn documents(&self) -> Result<HashMap<String, DocumentRow>> {
        self.with_reader(|c| {
            let mut stmt = c.prepare("SELECT doc_id, path, hash, title, chunks FROM documents")?;
            let rows = stmt.query_map([], |r| {
                Ok(DocumentRow {
                    doc_id: r.get(0)?,
                    path: r.get(1)?,
                    hash: r.get(2)?,
                    title: r.get(3)?,
                    chunks: r.get::<_, i64>(4)? as usize,
                })
            })?;
            let mut out = HashMap::new();
            for row in rows {
                let row = row?;
                out.insert(row.path.clone(), row);
            }
            Ok(out)
        })
    }

    /// Document issues: path relative to `memories/` → message.
    pub(crate) fn document_issues(&self) -> Result<HashMap<String, String>> {
        self.with_reader(|c| {
            let mut stmt = c.prepare("SELECT path, message FROM document_issues")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<HashMap<String, String>>>()
                .map_err(Into::into)
        })
    }

    /// Journal line issues, quarantined journal lines and document issues,
    /// as `file:line: message` strings.
    pub(crate) fn issues(&self) -> Result<Vec<String>> {
        self.with_reader(|c| {
            let mut out = Vec::new();
            let mut stmt =
                c.prepare("SELECT file, line, message FROM journal_issues ORDER BY file, line")?;
            let rows = stmt.query_map([], |r| {
                Ok(format!(
                    "facts/{}:{}: {}",
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?
                ))
            })?;
            for row in rows {
                out.push(row?);
            }
            let mut stmt =
                c.prepare("SELECT file, line, id, reason FROM quarantine ORDER BY file, line")?;
            let rows = stmt.query_map([], |r| {
                Ok(format!(
                    "facts/{}:{}: quarantined: {} ({})",
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(2)?
                ))
            })?;
            for row in rows {
                out.push(row?);
            }
            let mut stmt = c.prepare("SELECT path, message FROM document_issues ORDER BY path")?;
            let rows = stmt.query_map([], |r| {
                Ok(format!(
                    "{}: {}",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?
                ))
            })?;
            for row in rows {
                out.push(row?);
            }
            Ok(out)
        })
    }

    /// Counts for statistics.
    pub(crate) fn counts(&self) -> Result<MetaCounts> {
        self.with_reader(|c| {
            let one = |sql: &str| -> Result<u64> {
                Ok(c.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
            };
            let group = |col: &str| -> Result<HashMap<String, u64>> {
                let sql = format!(
                    "SELECT COALESCE({col}, 'none'), COUNT(*) FROM memories WHERE forgotten_at IS NULL GROUP BY 1"
                );
                let mut stmt = c.prepare(&sql)?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
                rows.map(|r| r.map_err(Error::from)).collect()
            };
            Ok(MetaCounts {
                memories: one("SELECT COUNT(*) FROM memories WHERE forgotten_at IS NULL")?,
                facts: one(
                    "SELECT COUNT(*) FROM memories WHERE origin = 'fact' AND forgotten_at IS NULL",
                )?,
                forgotten: one("SELECT COUNT(*) FROM memories WHERE forgotten_at IS NOT NULL")?,
                chunks: one("SELECT COUNT(*) FROM memories WHERE origin = 'doc'")?,
                documents: one("SELECT COUNT(*) FROM documents")?,
                by_stage: group("stage")?,
                by_scene: group("scene")?,
                by_privacy: group("privacy")?,
                by_tier: group("tier")?,
                quarantined: one("SELECT COUNT(*) FROM quarantine")?,
            })
        })
    }
}

/// Write operations, used inside [`MetaDb::write`].
pub mod tx {
    use super::*;

    /// Inserts or replaces a memory row.
    pub(crate) fn upsert_memory(
        tx: &Transaction<'_>,
        m: &Memory,
        ord: Option<usize>,
        extras: &FactExtras,
    ) -> Result<()> {
        // The row is replaced with `vector_model` NULL, so its vector is stale
        // (possibly with other visibility values) until it is embedded again.
        crate::index::vector::delete(tx, std::slice::from_ref(&m.id))?;
        write_row(tx, m, ord, extras, None)?;
        if m.origin == crate::model::Origin::Fact {
            crate::index::lifecycle::after_upsert(tx, m)?;
        }
        Ok(())
    }

    /// Writes a memory row as it is, and nothing else: no vector to drop, no
    /// supersede mark to recompute (the callers know there is none, or do it).
    /// With `put_at`, a fact's merge version and the base values touches fold
    /// into (see [`crate::index::merge`]) are written in the same statement.
    pub(crate) fn write_row(
        tx: &Transaction<'_>,
        m: &Memory,
        ord: Option<usize>,
        extras: &FactExtras,
        put_at: Option<i64>,
    ) -> Result<()> {
        let tags = serde_json::to_string(&m.tags).expect("tags serialise");
        let base = put_at.is_some();
        tx.prepare_cached(
            "INSERT OR REPLACE INTO memories (id, origin, doc_id, path, ord, ts, scene, kind, stage, \
             privacy, subject, tier, source, importance, title, text, tags, supersedes, expires_at, \
             source_message_id, idempotency_key, device, journal_file, journal_line, forgotten_at, \
             content_hash, accesses, event_time, event_at, session, speaker, \
             put_at, base_tier, base_accesses, base_expires) \
             VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,?,?,?,?,?,?,?,?,?,?)",
        )?
        .execute(params![
            m.id,
            m.origin.as_str(),
            m.doc_id,
            m.path,
            ord.map(|o| o as i64),
            m.ts.timestamp_millis(),
            m.scene.as_str(),
            m.kind,
            m.stage.as_str(),
            m.privacy.as_str(),
            m.subject.as_str(),
            m.tier.map(|t| t.as_str()),
            m.source,
            m.importance as f64,
            m.title,
            m.text,
            tags,
            m.supersedes,
            m.expires_at.map(|t| t.timestamp_millis()),
            extras.source_message_id,
            extras.idempotency_key,
            extras.device,
            extras.journal.as_ref().map(|j| j.0.clone()),
            extras.journal.as_ref().map(|j| j.1 as i64),
            extras.content_hash,
            i64::from(extras.accesses),
            m.setting.time,
            m.setting.time_at.map(|t| t.timestamp_millis()),
            m.setting.session,
            m.setting.speaker,
            put_at,
            m.tier.filter(|_| base).map(|t| t.as_str()),
            base.then_some(i64::from(extras.accesses)),
            m.expires_at.filter(|_| base).map(|t| t.timestamp_millis()),
        ])?;
        Ok(())
    }

    /// Marks a fact forgotten. Returns whether an active fact was found.
    #[cfg(test)]
    pub(crate) fn forget(tx: &Transaction<'_>, id: &str, at: DateTime<Utc>) -> Result<bool> {
        let n = tx
            .prepare_cached(
                "UPDATE memories SET forgotten_at = ? WHERE id = ? AND forgotten_at IS NULL",
            )?
            .execute(params![at.timestamp_millis(), id])?;
        crate::index::vector::delete(tx, &[id.to_string()])?;
        Ok(n > 0)
    }

    /// Records how far a journal file has been applied.
    pub(crate) fn set_cursor(tx: &Transaction<'_>, file: &str, c: Cursor) -> Result<()> {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO journal_cursors (file, offset, lines) VALUES (?,?,?)",
        )?
        .execute(params![file, c.offset as i64, c.lines as i64])?;
        Ok(())
    }

    /// Forgets the bad lines recorded for a journal file (it is being
    /// checked again from its first line).
    pub(crate) fn clear_issues(tx: &Transaction<'_>, file: &str) -> Result<()> {
        tx.prepare_cached("DELETE FROM journal_issues WHERE file = ?")?
            .execute([file])?;
        Ok(())
    }

    /// Records a bad journal line.
    pub(crate) fn add_issue(tx: &Transaction<'_>, issue: &LineIssue) -> Result<()> {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO journal_issues (file, line, message) VALUES (?,?,?)",
        )?
        .execute(params![issue.file, issue.line as i64, issue.message])?;
        Ok(())
    }

    /// Replaces a document's row and chunk rows.
    pub(crate) fn replace_document(
        tx: &Transaction<'_>,
        row: &DocumentRow,
        chunks: &[Memory],
    ) -> Result<()> {
        remove_document(tx, &row.doc_id)?;
        tx.execute(
            "INSERT INTO documents (doc_id, path, hash, title, chunks) VALUES (?,?,?,?,?)",
            params![row.doc_id, row.path, row.hash, row.title, row.chunks as i64],
        )?;
        for (ord, chunk) in chunks.iter().enumerate() {
            upsert_memory(tx, chunk, Some(ord), &FactExtras::default())?;
        }
        tx.execute("DELETE FROM document_issues WHERE path = ?", [&row.path])?;
        Ok(())
    }

    /// Removes a document and its chunks.
    pub(crate) fn remove_document(tx: &Transaction<'_>, doc_id: &str) -> Result<()> {
        let chunk_ids = tx
            .prepare_cached("SELECT id FROM memories WHERE doc_id = ?")?
            .query_map([doc_id], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        crate::index::vector::delete(tx, &chunk_ids)?;
        tx.execute("DELETE FROM memories WHERE doc_id = ?", [doc_id])?;
        tx.execute("DELETE FROM documents WHERE doc_id = ?", [doc_id])?;
        Ok(())
    }

    /// Records (or clears, with `None`) a problem with a document file.
    pub(crate) fn set_document_issue(
        tx: &Transaction<'_>,
        path: &str,
        message: Option<&str>,
    ) -> Result<()> {
        match message {
            Some(m) => tx.execute(
                "INSERT OR REPLACE INTO document_issues (path, message) VALUES (?,?)",
                params![path, m],
            )?,
            None => tx.execute("DELETE FROM document_issues WHERE path = ?", [path])?,
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::filter::Scope;
    use crate::model::{Origin, Privacy, Scene, Stage, Subject};

    fn memory(id: &str, scene: &str, privacy: Privacy) -> Memory {
        Memory {
            id: id.into(),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
            scene: Scene::parse(scene).unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            text: "t".into(),
            tags: vec!["x".into()],
            privacy,
            subject: Subject::Owner,
            source: "test".into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            expires_at: None,
            setting: Default::default(),
        }
    }

    #[test]
    fn the_writer_page_cache_holds_a_vector_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(&dir.path().join("meta.db"), true).unwrap();
        let kib = db
            .write(|t| Ok(t.query_row("PRAGMA cache_size", [], |r| r.get::<_, i64>(0))?))
            .unwrap();
        // 1024 vectors of 384 floats and their int8 copies: the chunk being filled.
        let chunk_kib = 1024 * 384 * (4 + 1) / 1024;
        assert!(-kib >= chunk_kib, "cache {kib} KiB");
    }

    /// Bytes of the write-ahead log beside `db` (0 when there is none).
    fn wal_bytes(db: &Path) -> u64 {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(std::path::PathBuf::from(wal)).map_or(0, |m| m.len())
    }

    /// Writes `n` rows (about 4 KiB of text each) in `n` transactions.
    fn fill(db: &MetaDb, from: usize, n: usize) {
        for i in from..from + n {
            let mut m = memory(&format!("m{i}"), "main", Privacy::Normal);
            m.text = "x".repeat(4096);
            db.write(|t| tx::upsert_memory(t, &m, None, &FactExtras::default()))
                .unwrap();
        }
    }

    #[test]
    fn a_clean_close_leaves_no_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.db");
        let db = MetaDb::open(&path, true).unwrap();
        fill(&db, 0, 200);
        // Readers used and returned to the pool: one of them closing last
        // used to leave the whole log behind.
        for _ in 0..3 {
            assert_eq!(db.live_count().unwrap(), 200);
        }
        assert!(wal_bytes(&path) > 100_000, "the log holds the writes");
        drop(db);
        assert_eq!(wal_bytes(&path), 0, "checkpointed and truncated on close");
        let db = MetaDb::open(&path, false).unwrap();
        assert_eq!(db.live_count().unwrap(), 200, "nothing lost");
    }

    #[test]
    fn an_idle_store_checkpoints_and_truncates_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.db");
        let db = MetaDb::open(&path, true).unwrap();
        fill(&db, 0, 100);
        assert!(wal_bytes(&path) > 100_000);
        // Not idle for an hour yet: nothing happens.
        assert!(
            !db.checkpoint_if_idle(std::time::Duration::from_secs(3600))
                .unwrap()
        );
        assert!(wal_bytes(&path) > 100_000);
        assert!(db.checkpoint_if_idle(std::time::Duration::ZERO).unwrap());
        assert_eq!(wal_bytes(&path), 0);
        // Nothing written since: nothing to do.
        assert!(!db.checkpoint_if_idle(std::time::Duration::ZERO).unwrap());
        fill(&db, 100, 1);
        assert!(db.checkpoint_if_idle(std::time::Duration::ZERO).unwrap());
        assert_eq!(db.live_count().unwrap(), 101);
    }

    #[test]
    fn a_large_transaction_does_not_leave_a_large_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.db");
        let db = MetaDb::open(&path, true).unwrap();
        // One transaction of ~16 MiB (a catch-up), then small ones.
        db.write(|t| {
            for i in 0..4000 {
                let mut m = memory(&format!("big{i}"), "main", Privacy::Normal);
                m.text = "y".repeat(4096);
                tx::upsert_memory(t, &m, None, &FactExtras::default())?;
            }
            Ok(())
        })
        .unwrap();
        assert!(wal_bytes(&path) > 16_000_000);
        // The automatic checkpoints after it bring the log back under the limit.
        fill(&db, 0, 2000);
        assert!(
            wal_bytes(&path) <= WAL_SIZE_LIMIT as u64 + 4_200_000,
            "log {} bytes",
            wal_bytes(&path)
        );
    }

    #[test]
    fn idle_read_connections_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(&dir.path().join("meta.db"), true).unwrap();
        fill(&db, 0, 1);
        let barrier = std::sync::Barrier::new(12);
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    db.with_reader(|_| {
                        // All twelve hold a connection at once.
                        barrier.wait();
                        Ok(())
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(db.idle_readers(), IDLE_READERS);
        assert_eq!(db.live_count().unwrap(), 1);
    }

    #[test]
    fn rows_by_id_are_found_by_id_whatever_the_filter() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(&dir.path().join("m.db"), true).unwrap();
        let scoped = Filter::scope(Scope {
            scenes: vec![Scene::parse("main").unwrap(), Scene::parse("pet").unwrap()],
            privacy: vec![Privacy::Normal],
            ..Scope::default()
        });
        for filter in [Filter::all(), scoped] {
            let (sql, params) = by_ids_sql(10, &filter);
            let plan: Vec<String> = db
                .with_reader(|c| {
                    let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    let mut values: Vec<String> = (0..10).map(|i| i.to_string()).collect();
                    values.extend(params.clone());
                    let rows =
                        stmt.query_map(params_from_iter(values), |r| r.get::<_, String>(3))?;
                    rows.map(|r| r.map_err(Error::from)).collect()
                })
                .unwrap();
            let plan = plan.join("; ");
            // The primary key's index, one probe per id; never a walk of a scene.
            assert!(
                plan.contains("sqlite_autoindex_memories_1 (id=?)"),
                "{plan}"
            );
            assert!(!plan.contains("memories_scene_ts"), "{plan}");
        }
    }

    #[test]
    fn filters_are_part_of_the_sql() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(&dir.path().join("m.db"), true).unwrap();
        db.write(|tx| {
            tx::upsert_memory(
                tx,
                &memory("a", "main", Privacy::Normal),
                None,
                &FactExtras::default(),
            )?;
            tx::upsert_memory(
                tx,
                &memory("b", "qq:group:1", Privacy::Normal),
                None,
                &FactExtras::default(),
            )?;
            tx::upsert_memory(
                tx,
                &memory("c", "main", Privacy::Sensitive),
                None,
                &FactExtras::default(),
            )?;
            Ok(())
        })
        .unwrap();
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let check = |filter: Filter, want: &[&str]| {
            let mut got: Vec<String> = db.get_many(&ids, &filter).unwrap().into_keys().collect();
            got.sort();
            assert_eq!(got, want, "{filter:?}");
        };
        check(Filter::all(), &["a", "b", "c"]);
        let group = Scope {
            scenes: vec![Scene::parse("qq:group:1").unwrap()],
            ..Scope::default()
        };
        check(Filter::scope(group.clone()), &["b"]);
        let main_normal = Scope {
            scenes: vec![Scene::parse("main").unwrap()],
            privacy: vec![Privacy::Normal, Privacy::Personal],
            ..Scope::default()
        };
        check(Filter::scope(main_normal.clone()), &["a"]);
        check(
            Filter {
                any_of: vec![group, main_normal],
            },
            &["a", "b"],
        );
        check(Filter { any_of: vec![] }, &[]);
        // Expiry compares as a number on rows found by id too: "b" expired
        // before the instant, "c" expires after it, "a" never does.
        let at = DateTime::from_timestamp_millis(1_800_000_000_000).unwrap();
        db.write(|tx| {
            let mut b = memory("b", "qq:group:1", Privacy::Normal);
            b.expires_at = Some(at - chrono::Duration::days(1));
            tx::upsert_memory(tx, &b, None, &FactExtras::default())?;
            let mut c = memory("c", "main", Privacy::Sensitive);
            c.expires_at = Some(at + chrono::Duration::days(1));
            tx::upsert_memory(tx, &c, None, &FactExtras::default())
        })
        .unwrap();
        check(
            Filter::scope(Scope {
                unexpired_at: Some(at),
                ..Scope::default()
            }),
            &["a", "c"],
        );
        db.write(|tx| tx::forget(tx, "a", Utc::now())).unwrap();
        check(Filter::all(), &["b", "c"]);
        assert_eq!(db.fact_state("a").unwrap(), Some(false));
        assert_eq!(db.fact_state("b").unwrap(), Some(true));
        assert_eq!(db.fact_state("zz").unwrap(), None);
    }

    #[test]
    fn an_old_database_gets_the_conflict_candidates_index_and_reads_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        {
            // The schema before the index, with a fact in it.
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for sql in &MIGRATIONS[..MIGRATIONS.len() - 1] {
                tx.execute_batch(sql).unwrap();
            }
            tx.pragma_update(None, "user_version", (MIGRATIONS.len() - 1) as i64)
                .unwrap();
            let extras = FactExtras {
                content_hash: Some("h".into()),
                ..FactExtras::default()
            };
            tx::upsert_memory(&tx, &memory("a", "main", Privacy::Normal), None, &extras).unwrap();
            tx.commit().unwrap();
        }
        let db = MetaDb::open(&path, true).unwrap();
        let plan: Vec<String> = db
            .with_reader(|c| {
                let mut stmt = c.prepare(
                    "EXPLAIN QUERY PLAN SELECT id, ts, content_hash FROM memories WHERE scene = ?1 \
                     AND origin = 'fact' AND stage = 'long' AND subject = ?2 AND id != ?3 \
                     AND forgotten_at IS NULL AND superseded_by IS NULL \
                     ORDER BY ts DESC, id DESC LIMIT ?4",
                )?;
                let rows = stmt.query_map(["main", "owner", "b", "300"], |r| r.get(3))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .unwrap();
        assert!(
            plan.iter()
                .any(|p| p.contains("COVERING INDEX memories_conflict_candidates")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|p| p.contains("TEMP B-TREE")), "{plan:?}");
        let read = |hash: Option<&str>| {
            let kept = |_: &str, h: Option<&str>| h == hash;
            db.conflict_candidates("main", "owner", "b", 300, &kept)
                .unwrap()
        };
        let found = read(None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].hash.as_deref(), Some("h"));
        assert_eq!(found[0].text.as_deref(), Some("t"));
        assert_eq!(read(Some("h"))[0].text, None, "a kept text is not read");
    }

    #[test]
    fn migrations_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        drop(MetaDb::open(&path, true).unwrap());
        let db = MetaDb::open(&path, true).unwrap();
        let v = db
            .with_reader(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))?))
            .unwrap() as usize;
        assert_eq!(v, MIGRATIONS.len());
    }
}
