//! The vector cache: `data/cache/vectors.db`, outside the rebuildable index.
//!
//! Embedding is the slowest step of indexing (milliseconds per memory against
//! microseconds for the text index), and `memd reindex` deletes `data/index/`.
//! The cache maps `sha256(model id, passage text)` to the vector, so a rebuild
//! re-embeds only text it has never seen, and a changed model or prefix simply
//! misses. Entries are never wrong, only unused; deleting the file is always
//! safe. It grows with every distinct text ever embedded (about 1.7 KiB per
//! memory for 384 dimensions, in 16 KiB pages).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::{Embedder, from_bytes, to_bytes};
use crate::error::{Coded, Error, ErrorCode, IoContext, Result, chain_is_full};

/// A failure of the cache's own SQLite database. The cache only ever saves
/// work, so its readers and writers log this and embed instead; only
/// opening it reports it (`STORAGE`, or `STORAGE_FULL` on a full disk).
#[derive(Debug, thiserror::Error)]
#[error("vector cache: {0}")]
pub struct CacheError(#[from] rusqlite::Error);

impl Coded for CacheError {
    fn code(&self) -> ErrorCode {
        let full = matches!(
            self.0.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DiskFull)
        ) || chain_is_full(&self.0);
        if full {
            ErrorCode::StorageFull
        } else {
            ErrorCode::Storage
        }
    }
}

impl From<CacheError> for Error {
    fn from(e: CacheError) -> Self {
        Error::typed(e)
    }
}

/// A cache key: sha256 of the model id and the passage text.
pub(crate) type CacheKey = [u8; 32];

/// The persistent cache of passage vectors.
pub struct VectorCache {
    conn: Mutex<Connection>,
}

impl VectorCache {
    /// Opens (creating if needed) the cache database at `path`.
    pub(crate) fn open(path: &Path) -> Result<VectorCache> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ctx("cannot create cache directory", dir)?;
        }
        Ok(VectorCache {
            conn: Mutex::new(connect(path)?),
        })
    }

    /// The key of `passage` embedded by `model_id`.
    pub(crate) fn key(model_id: &str, passage: &str) -> CacheKey {
        let mut h = Sha256::new();
        h.update(model_id.as_bytes());
        h.update([0u8]);
        h.update(passage.as_bytes());
        h.finalize().into()
    }

    /// The cached vectors among `keys` that have `dim` components.
    pub(crate) fn get_many(
        &self,
        keys: &[CacheKey],
        dim: usize,
    ) -> Result<HashMap<CacheKey, Vec<f32>>, CacheError> {
        let conn = self.conn.lock().expect("cache connection poisoned");
        let mut stmt = conn.prepare_cached("SELECT vector FROM vectors WHERE key = ?")?;
        let mut out = HashMap::new();
        for key in keys {
            let mut rows = stmt.query([&key[..]])?;
            if let Some(row) = rows.next()? {
                let blob: Vec<u8> = row.get(0)?;
                if let Some(v) = from_bytes(&blob).filter(|v| v.len() == dim) {
                    out.insert(*key, v);
                }
            }
        }
        Ok(out)
    }

    /// Stores vectors.
    pub(crate) fn put_many(&self, entries: &[(CacheKey, &[f32])]) -> Result<(), CacheError> {
        let mut conn = self.conn.lock().expect("cache connection poisoned");
        let tx = conn.transaction()?;
        {
            let mut stmt =
                tx.prepare_cached("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)")?;
            for (key, v) in entries {
                stmt.execute(params![&key[..], to_bytes(v)])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// The cache's page size. A row (a 1.5 KiB vector, its key and rowid) is
/// about 1,580 bytes: a 4 KiB page holds two and leaves a quarter empty
/// (2,098 bytes per vector measured at 10k), a 16 KiB page holds ten
/// (about 1,690 bytes per vector with the key index).
const PAGE_SIZE: i64 = 16 * 1024;

/// Opens the database at `path` in WAL mode and brings its table up to date.
fn connect(path: &Path) -> Result<Connection, CacheError> {
    let mut conn = Connection::open(path)?;
    // Takes effect on a new file only; an older cache is moved by `repage`.
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // A lost cache entry costs one re-embedding, never correctness.
    conn.pragma_update(None, "synchronous", "OFF")?;
    // A bulk store (a reindex) grows the log to its size; truncated back after it.
    conn.pragma_update(None, "journal_size_limit", 4 * 1024 * 1024)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    migrate(&mut conn)?;
    repage(&conn);
    Ok(conn)
}

/// Rewrites a cache of smaller pages with [`PAGE_SIZE`] pages (once: a
/// `VACUUM`, which WAL mode allows only after leaving it). The cache works
/// as it is when that fails (another process has it open, a full disk).
fn repage(conn: &Connection) {
    let size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap_or(PAGE_SIZE);
    if size >= PAGE_SIZE {
        return;
    }
    tracing::info!("rewriting the vector cache with {PAGE_SIZE}-byte pages (once)");
    let moved = conn.execute_batch(&format!(
        "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE; \
         PRAGMA page_size = {PAGE_SIZE}; VACUUM;"
    ));
    if let Err(e) = moved {
        tracing::warn!(error = %e, "vector cache kept with its smaller pages");
    }
    if let Err(e) = conn.pragma_update(None, "journal_mode", "WAL") {
        tracing::warn!(error = %e, "vector cache left out of WAL mode until it is opened again");
    }
}

/// The cache table: a rowid table with a unique index on the key. Each
/// vector (1.5 KiB at 384 dimensions) sits in a table leaf of its own size,
/// and the key index is small and dense. The first layout (a `WITHOUT ROWID`
/// table keyed by the blob) kept each vector inside its key's B-tree cell:
/// about 2.2 times the bytes per vector, and slower bulk reads.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, \
     key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL);";

/// Creates the table, or moves a cache of the first layout into it: one
/// transaction, so a crash leaves the old table whole and the next open
/// starts the move again.
fn migrate(conn: &mut Connection) -> Result<(), CacheError> {
    let old: Option<String> = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'vectors'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    match old {
        None => conn.execute_batch(SCHEMA)?,
        Some(sql) if sql.to_ascii_uppercase().contains("WITHOUT ROWID") => {
            tracing::info!("moving the vector cache to its smaller layout (once)");
            let tx = conn.transaction()?;
            tx.execute_batch(
                "DROP TABLE IF EXISTS vectors_new; \
                 CREATE TABLE vectors_new (id INTEGER PRIMARY KEY, \
                 key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL); \
                 INSERT INTO vectors_new (key, vector) SELECT key, vector FROM vectors; \
                 DROP TABLE vectors; \
                 ALTER TABLE vectors_new RENAME TO vectors;",
            )?;
            tx.commit()?;
            // Give the old table's pages back to the file system.
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); VACUUM;")?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// Embeds passages, taking every vector it can from `cache` and storing the
/// new ones. A cache that fails to read or write is logged and bypassed.
pub(crate) fn embed_passages_cached(
    embedder: &dyn Embedder,
    cache: Option<&VectorCache>,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>> {
    let Some(cache) = cache else {
        return Ok(embedder.index_passages(texts)?);
    };
    let keys: Vec<CacheKey> = texts
        .iter()
        .map(|t| VectorCache::key(embedder.model_id(), t))
        .collect();
    let mut found = cache.get_many(&keys, embedder.dim()).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "vector cache unreadable; embedding everything");
        HashMap::new()
    });
    let missing: Vec<usize> = (0..texts.len())
        .filter(|&i| !found.contains_key(&keys[i]))
        .collect();
    if !missing.is_empty() {
        let todo: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
        let fresh = embedder.index_passages(&todo)?;
        if fresh.len() != todo.len() {
            return Err(Error::Internal(format!(
                "embedder returned {} vectors for {} texts",
                fresh.len(),
                todo.len()
            )));
        }
        let entries: Vec<(CacheKey, &[f32])> = missing
            .iter()
            .zip(&fresh)
            .map(|(&i, v)| (keys[i], v.as_slice()))
            .collect();
        if let Err(e) = cache.put_many(&entries) {
            tracing::warn!(error = %e, "cannot write the vector cache");
        }
        for (&i, v) in missing.iter().zip(fresh) {
            found.insert(keys[i], v);
        }
    }
    keys.iter()
        .map(|k| {
            found
                .get(k)
                .cloned()
                .ok_or_else(|| Error::Internal("vector missing after embedding".into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_of_small_pages_is_rewritten_with_large_ones_and_keeps_its_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.db");
        let keys: Vec<CacheKey> = (0..40)
            .map(|i| VectorCache::key("m", &format!("text {i}")))
            .collect();
        let v: Vec<f32> = (0..384).map(|i| i as f32).collect();
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "page_size", 4096).unwrap();
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            for k in &keys {
                conn.execute(
                    "INSERT INTO vectors (key, vector) VALUES (?, ?)",
                    params![&k[..], to_bytes(&v)],
                )
                .unwrap();
            }
        }
        let cache = VectorCache::open(&path).unwrap();
        let got = cache.get_many(&keys, 384).unwrap();
        assert_eq!(got.len(), keys.len());
        assert_eq!(got[&keys[3]], v);
        let conn = cache.conn.lock().unwrap();
        let page: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!((page, mode.as_str()), (PAGE_SIZE, "wal"));
        drop(conn);
        // A new cache starts with them.
        let fresh = VectorCache::open(&dir.path().join("new.db")).unwrap();
        let page: i64 = fresh
            .conn
            .lock()
            .unwrap()
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(page, PAGE_SIZE);
    }

    #[test]
    fn a_cache_of_the_first_layout_is_moved_and_keeps_its_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.db");
        let keys: Vec<CacheKey> = (0..50)
            .map(|i| VectorCache::key("m", &format!("text {i}")))
            .collect();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID;",
            )
            .unwrap();
            for (i, k) in keys.iter().enumerate() {
                conn.execute(
                    "INSERT INTO vectors (key, vector) VALUES (?, ?)",
                    params![&k[..], to_bytes(&[i as f32, 1.0, 2.0])],
                )
                .unwrap();
            }
        }
        let cache = VectorCache::open(&path).unwrap();
        let got = cache.get_many(&keys, 3).unwrap();
        assert_eq!(got.len(), keys.len());
        assert_eq!(got[&keys[7]], vec![7.0, 1.0, 2.0]);
        // The new layout: rowid table, and storing again replaces by key.
        cache.put_many(&[(keys[7], &[9.0, 9.0, 9.0][..])]).unwrap();
        assert_eq!(
            cache.get_many(&keys[7..8], 3).unwrap()[&keys[7]],
            vec![9.0; 3]
        );
        drop(cache);
        let conn = Connection::open(&path).unwrap();
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'vectors'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!sql.to_ascii_uppercase().contains("WITHOUT ROWID"), "{sql}");
        let n: i64 = conn
            .query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 50);
        // Opening again changes nothing.
        drop(conn);
        let cache = VectorCache::open(&path).unwrap();
        assert_eq!(cache.get_many(&keys, 3).unwrap().len(), 50);
    }
}
