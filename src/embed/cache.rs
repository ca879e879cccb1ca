//! The vector cache: `data/cache/vectors.db`, outside the rebuildable index.
//!
//! Embedding is the slowest step of indexing (milliseconds per memory against
//! microseconds for the text index), and `memd reindex` deletes `data/index/`.
//! The cache maps `sha256(model id, passage text)` to the vector, so a rebuild
//! re-embeds only text it has never seen, and a changed model or prefix simply
//! misses. Entries are never wrong, only unused; deleting the file is always
//! safe. It grows with every distinct text ever embedded (about 1.6 KiB per
//! memory for 384 dimensions).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};

use super::{Embedder, from_bytes, to_bytes};
use crate::error::{Error, IoContext, Result};

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
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // A lost cache entry costs one re-embedding, never correctness.
        conn.pragma_update(None, "synchronous", "OFF")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID;",
        )?;
        Ok(VectorCache {
            conn: Mutex::new(conn),
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
    ) -> Result<HashMap<CacheKey, Vec<f32>>> {
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
    pub(crate) fn put_many(&self, entries: &[(CacheKey, &[f32])]) -> Result<()> {
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

/// Embeds passages, taking every vector it can from `cache` and storing the
/// new ones. A cache that fails to read or write is logged and bypassed.
pub(crate) fn embed_passages_cached(
    embedder: &dyn Embedder,
    cache: Option<&VectorCache>,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>> {
    let Some(cache) = cache else {
        return Ok(embedder.embed_passages(texts)?);
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
        let fresh = embedder.embed_passages(&todo)?;
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
