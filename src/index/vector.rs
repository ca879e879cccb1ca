//! Vectors in sqlite-vec: one `vec0` table in the metadata database.
//!
//! `memory_vectors` holds one row per embedded memory, keyed by the memory id
//! (a vec0 text primary key, so ids never depend on SQLite rowids, which
//! `INSERT OR REPLACE` on `memories` changes). The visibility fields (scene,
//! privacy, stage, kind, subject, origin) are vec0 *metadata columns*, so a
//! [`Filter`] becomes part of sqlite-vec's KNN query itself (the exact
//! reference KNN and the fallback below) and `k` visible rows come back even
//! when invisible rows are nearer. sqlite-vec applies `IN` inside
//! the KNN but not `OR` across columns, so a filter with several scopes runs
//! one KNN per scope and the results are merged by distance.
//!
//! Search is two passes. The coarse pass runs in process
//! ([`crate::index::vector_scan`]): one bit per component of every vector
//! (its sign around the corpus mean) with its visibility values, scanned
//! under the filter, picks [`candidates`] rows; `rescore`
//! then reads those rows' float vectors here, under the same filter in SQL,
//! and ranks them by the exact cosine distance, which is the distance
//! returned. When no more than that many rows are visible the result is
//! exact; on a large index the coarse pass can miss a true neighbour ranked
//! just outside the candidates (recall against exact KNN is measured by
//! `cargo bench --bench memd -- --vectors-only`).
//!
//! Every change to `memory_vectors` (store, delete, expiry, a model change)
//! appends a row to `vector_log` in the same transaction, so the in-process
//! copy, in this process or another one on the same root, catches up from
//! the log inside the snapshot of each search (see `vector_scan`).
//!
//! Tables made by earlier builds also hold `coarse`, an int8 column the
//! sqlite-vec KNN used to scan; it is still filled for such tables and used
//! by `knn_sql` (the fallback when the in-process copy cannot serve a
//! snapshot), and new tables are made without it (385 bytes less per vector
//! and less to write per store): the fallback then runs sqlite-vec's exact
//! KNN, which at 100k vectors is faster than its int8 KNN anyway (sqlite-vec
//! 0.1.9 selects the top k in k passes per chunk and accumulates int8
//! distances in floats). `memd reindex` rebuilds an old table without it.
//!
//! Which rows still need a vector is tracked by `memories.vector_model`
//! (`NULL` = not embedded by the current model): every upsert of a memory
//! resets it, forgetting or removing a memory deletes its vector, and the hub
//! embeds whatever is pending after each applied batch. The table is created
//! with the embedder's dimension on first use and rebuilt when the model
//! changes (`vector_meta` records which model the vectors come from).

use std::collections::HashMap;
use std::sync::Once;

use rusqlite::{Connection, OptionalExtension, Transaction, params, params_from_iter};

use crate::embed::to_bytes;
use crate::error::{Error, Result};
use crate::index::filter::Filter;

/// sqlite-vec refuses larger `k`.
pub(crate) const MAX_K: usize = 4096;

/// Extra neighbours fetched per KNN so ties at the cut are broken by id.
const TIE_MARGIN: usize = 32;

/// The vec0 table.
const TABLE: &str = "memory_vectors";

/// How many rows the in-process coarse pass hands to exact rescoring for
/// `k` neighbours: four times `k` plus 256. The 1-bit estimate cannot order
/// the near-duplicates around a query (e5 vectors of one topic differ by
/// less than its error), so the candidates must cover the whole close
/// neighbourhood; on the bench's e5-derived vectors at 1M rows 200
/// candidates held 99.6% of the true top 10 and 500 all of the top 50.
pub fn candidates(k: usize) -> usize {
    (4 * k + 256).min(MAX_K)
}

/// How many of the [`candidates`], ranked exactly, the in-process pass
/// checks against the filter in SQL (`visible`) and, when it has no float
/// copies, rescores in sqlite-vec (which reads each row's float vector from a
/// chunk, ~180 µs apiece without a memory map: a blob read walks the chunk's
/// overflow pages): twice `k` plus the tie margin.
pub fn rescored(k: usize) -> usize {
    (2 * k + TIE_MARGIN).min(MAX_K)
}

/// How many rows sqlite-vec's int8 KNN (tables of earlier builds) hands to
/// exact rescoring: twice `k` plus the tie margin (int8 orders near rows
/// far better than one bit per component).
fn int8_candidates(k: usize) -> usize {
    (2 * k + TIE_MARGIN).min(MAX_K)
}

/// The int8 copy of a vector the coarse pass scans: scaled so its largest
/// component is ±127 (cosine distance ignores the scale), rounded.
pub fn quantize(v: &[f32]) -> Vec<u8> {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return vec![0; v.len()];
    }
    let scale = 127.0 / max;
    v.iter()
        .map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8 as u8)
        .collect()
}

/// How the table is laid out: `None` when it does not exist yet,
/// `Some(true)` with the coarse int8 column, `Some(false)` for a table made
/// before it (searched exactly).
fn layout(conn: &Connection) -> Result<Option<bool>> {
    let sql: Option<String> = conn
        .prepare_cached("SELECT sql FROM sqlite_master WHERE name = ?")?
        .query_row([TABLE], |r| r.get(0))
        .optional()?;
    Ok(sql.map(|s| s.contains(" coarse int8[")))
}

/// Registers sqlite-vec with every SQLite connection this process opens from now on.
#[allow(unsafe_code)]
pub(crate) fn register_extension() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `sqlite3_vec_init` is the extension entry point sqlite-vec
        // exports, with exactly the signature `sqlite3_auto_extension` expects
        // (`int (*)(sqlite3*, char**, const sqlite3_api_routines*)`); the
        // crate declares it without parameters, hence the transmute between
        // two `extern "C"` function pointer types. It is statically linked, so
        // it lives as long as the process, and registering once is idempotent.
        unsafe {
            type EntryPoint = unsafe extern "C" fn(
                *mut rusqlite::ffi::sqlite3,
                *mut *mut std::os::raw::c_char,
                *const rusqlite::ffi::sqlite3_api_routines,
            ) -> std::os::raw::c_int;
            let init = std::mem::transmute::<unsafe extern "C" fn(), EntryPoint>(
                sqlite_vec::sqlite3_vec_init,
            );
            rusqlite::ffi::sqlite3_auto_extension(Some(init));
        }
    });
}

/// Bytes SQLite's allocator holds for the whole process: every
/// connection's page cache, prepared statements and schema. Here beside
/// the registration, the one other call into SQLite's C interface.
#[allow(unsafe_code)]
pub(crate) fn sqlite_heap_bytes() -> u64 {
    // SAFETY: reads SQLite's global memory counter; it takes no arguments
    // and may be called from any thread at any time.
    let used = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    u64::try_from(used).unwrap_or(0)
}

/// The model and dimension of the stored vectors, if the table exists.
pub(crate) fn stored_model(conn: &Connection) -> Result<Option<(String, usize)>> {
    Ok(conn
        .query_row(
            "SELECT model, dim FROM vector_meta WHERE one = 1",
            [],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize)),
        )
        .optional()?)
}

/// Makes sure the table holds vectors of `model` with `dim` components:
/// creates it, or drops every vector of another model and marks all memories
/// pending. Returns whether anything was reset.
pub(crate) fn ensure_model(tx: &Transaction<'_>, model: &str, dim: usize) -> Result<bool> {
    if stored_model(tx)?.is_some_and(|(m, d)| m == model && d == dim) {
        return Ok(false);
    }
    tx.execute_batch(&format!("DROP TABLE IF EXISTS {TABLE}"))?;
    tx.execute_batch(&format!(
        "CREATE VIRTUAL TABLE {TABLE} USING vec0(\
         id TEXT PRIMARY KEY, \
         embedding float[{dim}] distance_metric=cosine, \
         scene TEXT, privacy TEXT, stage TEXT, kind TEXT, subject TEXT, origin TEXT, \
         expires INTEGER)"
    ))?;
    tx.execute(
        "INSERT OR REPLACE INTO vector_meta (one, model, dim) VALUES (1, ?, ?)",
        params![model, dim as i64],
    )?;
    tx.execute("UPDATE memories SET vector_model = NULL", [])?;
    log(tx, None)?;
    Ok(true)
}

/// Drops every vector and the model they belong to (a rebuild in place);
/// the next store creates the table again ([`ensure_model`]). Logged as a
/// change of everything, so the coarse pass reloads.
pub(crate) fn reset(tx: &Transaction<'_>) -> Result<()> {
    tx.execute_batch(&format!("DROP TABLE IF EXISTS {TABLE}"))?;
    tx.execute("DELETE FROM vector_meta", [])?;
    log(tx, None)
}

fn table_exists(conn: &Connection) -> Result<bool> {
    Ok(layout(conn)?.is_some())
}

/// Deletes the vectors of these memory ids (a no-op for ids without one).
pub(crate) fn delete(tx: &Transaction<'_>, ids: &[String]) -> Result<()> {
    if ids.is_empty() || !table_exists(tx)? {
        return Ok(());
    }
    let mut stmt = tx.prepare_cached(&format!("DELETE FROM {TABLE} WHERE id = ?"))?;
    for id in ids {
        if stmt.execute([id])? > 0 {
            log(tx, Some(id))?;
        }
    }
    Ok(())
}

/// Moves a stored vector's expiry (its metadata column), logged like every
/// change. An error leaves the caller to delete the vector instead.
pub(crate) fn set_expires(tx: &Transaction<'_>, id: &str, expires: i64) -> Result<()> {
    let n = tx
        .prepare_cached(&format!("UPDATE {TABLE} SET expires = ? WHERE id = ?"))?
        .execute(params![expires, id])?;
    if n > 0 {
        log(tx, Some(id))?;
    }
    Ok(())
}

/// The change log of `memory_vectors` (created by a migration of the
/// metadata store): one row per changed id, `NULL` for "everything changed".
const LOG: &str = "vector_log";

/// Log rows kept: a reader further behind reloads everything.
const LOG_KEEP: i64 = 100_000;

/// Appends a change of `id` (`None`: the whole table) to the log, in the
/// transaction that makes the change, and prunes the log's oldest rows.
fn log(tx: &Transaction<'_>, id: Option<&str>) -> Result<()> {
    tx.prepare_cached(&format!("INSERT INTO {LOG} (id) VALUES (?)"))?
        .execute([id])?;
    let seq = tx.last_insert_rowid();
    if seq % 1024 == 0 {
        tx.prepare_cached(&format!("DELETE FROM {LOG} WHERE seq <= ?"))?
            .execute([seq - LOG_KEEP])?;
    }
    Ok(())
}

/// The lowest and highest sequence numbers in the change log (`(0, 0)` when
/// empty), or `None` if the store has no log (a database not migrated yet).
pub(crate) fn log_bounds(conn: &Connection) -> Result<Option<(i64, i64)>> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM sqlite_master WHERE name = ?")?
        .exists([LOG])?;
    if !exists {
        return Ok(None);
    }
    Ok(Some(conn.query_row(
        // Two subqueries: each of MIN and MAX alone is one b-tree seek, both
        // in one SELECT scan the whole log.
        &format!("SELECT IFNULL((SELECT MIN(seq) FROM {LOG}), 0), IFNULL((SELECT MAX(seq) FROM {LOG}), 0)"),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?))
}

/// The changes logged after `seq`, oldest first: `None` means the whole table.
pub(crate) fn log_since(conn: &Connection, seq: i64) -> Result<Vec<Option<String>>> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT id FROM {LOG} WHERE seq > ? ORDER BY seq"))?;
    let rows = stmt.query_map([seq], |r| r.get(0))?;
    rows.map(|r| r.map_err(Error::from)).collect()
}

/// A stored vector with its visibility values, as the coarse pass holds it.
#[derive(Debug, Clone)]
pub(crate) struct StoredVector {
    /// Memory id.
    pub(crate) id: String,
    /// The float vector.
    pub(crate) vector: Vec<f32>,
    /// Visibility values in [`Filter::field_sets`] order (see [`Pending::columns`]).
    pub(crate) columns: [String; 6],
    /// Expiry in milliseconds since the epoch, `i64::MAX` for none.
    pub(crate) expires: i64,
}

const STORED_COLUMNS: &str = "id, embedding, scene, privacy, stage, kind, subject, origin, expires";

fn stored_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredVector> {
    let blob: Vec<u8> = r.get(1)?;
    Ok(StoredVector {
        id: r.get(0)?,
        vector: crate::embed::from_bytes(&blob).unwrap_or_default(),
        columns: [
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ],
        expires: r.get(8)?,
    })
}

/// Calls `f` with every stored vector (nothing if the table does not exist).
pub(crate) fn for_each_stored(conn: &Connection, mut f: impl FnMut(StoredVector)) -> Result<()> {
    if !table_exists(conn)? {
        return Ok(());
    }
    let mut stmt = conn.prepare(&format!("SELECT {STORED_COLUMNS} FROM {TABLE}"))?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        f(stored_row(r)?);
    }
    Ok(())
}

/// The stored vector of `id`, if it has one.
pub(crate) fn stored(conn: &Connection, id: &str) -> Result<Option<StoredVector>> {
    if !table_exists(conn)? {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {STORED_COLUMNS} FROM {TABLE} WHERE id = ?"
        ))?
        .query_row([id], stored_row)
        .optional()?)
}

/// A memory waiting for its vector: id, text to embed and visibility columns.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// Memory id.
    pub(crate) id: String,
    /// Title and text, as embedded.
    pub(crate) text: String,
    /// Visibility values in [`Filter::field_sets`] order: scene, privacy,
    /// stage, kind, subject, origin.
    pub(crate) columns: [String; 6],
    /// Expiry in milliseconds since the epoch, `i64::MAX` for none.
    pub(crate) expires: i64,
}

/// The columns of a memory waiting for its vector (`pending_row` reads them).
const PENDING_COLUMNS: &str = "SELECT id, title, text, scene, privacy, stage, kind, subject, origin, \
     CASE WHEN superseded_by IS NOT NULL THEN 0 ELSE expires_at END FROM memories \
     WHERE vector_model IS NULL AND forgotten_at IS NULL";

fn pending_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Pending> {
    let title: Option<String> = r.get(1)?;
    let text: String = r.get(2)?;
    Ok(Pending {
        id: r.get(0)?,
        text: passage_text(title.as_deref(), &text),
        columns: [
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ],
        expires: r.get::<_, Option<i64>>(9)?.unwrap_or(i64::MAX),
    })
}

/// Up to `limit` searchable memories without a vector of the current model.
pub(crate) fn pending(conn: &Connection, limit: usize) -> Result<Vec<Pending>> {
    let mut stmt = conn.prepare_cached(&format!("{PENDING_COLUMNS} ORDER BY id LIMIT ?"))?;
    let rows = stmt.query_map([limit as i64], pending_row)?;
    rows.map(|r| r.map_err(Error::from)).collect()
}

/// The text embedded for a memory: its title (if any) on the first line, then the text.
pub(crate) fn passage_text(title: Option<&str>, text: &str) -> String {
    match title.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => format!("{t}\n{text}"),
        None => text.to_string(),
    }
}

/// Stores vectors for pending memories and marks them embedded by `model`;
/// returns how many were stored.
///
/// Vectors are computed outside any lock, so the writer may have changed a
/// memory since [`pending`] read it: each one is read again here, in the
/// storing transaction. A memory forgotten or already embedded meanwhile
/// gets nothing; one whose text changed stays pending for the next pass; the
/// visibility columns stored are the current ones, never the ones read before.
#[cfg(test)]
pub(crate) fn store(tx: &Transaction<'_>, model: &str, rows: &[(&Pending, &[f32])]) -> Result<u64> {
    store_logged(tx, model, rows, false)
}

/// Stores as `store` does. With `bulk` (a new index being loaded: one thread
/// reads the pending rows and stores their vectors, nothing writes between,
/// and no pending row has a stored vector), the rows are not read again and
/// no old vector is deleted, and the change log gets one "everything changed"
/// row for the whole batch instead of one row per vector (no reader follows
/// a bulk load vector by vector).
pub(crate) fn store_logged(
    tx: &Transaction<'_>,
    model: &str,
    rows: &[(&Pending, &[f32])],
    bulk: bool,
) -> Result<u64> {
    let mut current = tx.prepare_cached(&format!("{PENDING_COLUMNS} AND id = ?"))?;
    let mut del = tx.prepare_cached(&format!("DELETE FROM {TABLE} WHERE id = ?"))?;
    let coarse = layout(tx)? == Some(true);
    let mut ins = tx.prepare_cached(&if coarse {
        format!(
            "INSERT INTO {TABLE} (id, embedding, scene, privacy, stage, kind, subject, origin, \
             expires, coarse) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, vec_int8(?))"
        )
    } else {
        format!(
            "INSERT INTO {TABLE} (id, embedding, scene, privacy, stage, kind, subject, origin, \
             expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
    })?;
    let mut mark = tx.prepare_cached(
        "UPDATE memories SET vector_model = ? WHERE id = ? AND forgotten_at IS NULL",
    )?;
    let mut stored = 0;
    for &(read, v) in rows {
        let now;
        let p = if bulk {
            read
        } else {
            let Some(p) = current.query_row([&read.id], pending_row).optional()? else {
                continue;
            };
            if p.text != read.text {
                continue;
            }
            del.execute([&p.id])?;
            now = p;
            &now
        };
        let [scene, privacy, stage, kind, subject, origin] = &p.columns;
        let mut values: Vec<rusqlite::types::Value> = vec![
            p.id.clone().into(),
            to_bytes(v).into(),
            scene.clone().into(),
            privacy.clone().into(),
            stage.clone().into(),
            kind.clone().into(),
            subject.clone().into(),
            origin.clone().into(),
            p.expires.into(),
        ];
        if coarse {
            values.push(quantize(v).into());
        }
        ins.execute(params_from_iter(values))?;
        mark.execute(params![model, p.id])?;
        if !bulk {
            log(tx, Some(&p.id))?;
        }
        stored += 1;
    }
    if bulk && stored > 0 {
        log(tx, None)?;
    }
    Ok(stored)
}

/// The `k` nearest visible memories to `query` as `(id, cosine distance)`,
/// nearest first, ties by id, by sqlite-vec KNN alone: on the int8 `coarse`
/// column with exact rescoring where the table has one (tables of earlier
/// builds), else exact. The filter is applied inside each KNN. Used when the
/// in-process coarse pass cannot serve a read (see `vector_scan`).
pub(crate) fn knn_sql(
    conn: &Connection,
    query: &[f32],
    filter: &Filter,
    k: usize,
) -> Result<Vec<(String, f32)>> {
    match layout(conn)? {
        None => Ok(Vec::new()),
        Some(coarse) => knn_with(conn, query, filter, k, coarse),
    }
}

/// The visibility filter as a `WHERE` term over the vector table's own
/// metadata columns (an OR of scopes, each an AND of `IN` sets and the expiry).
fn filter_clause(filter: &Filter) -> (String, Vec<rusqlite::types::Value>) {
    filter_clause_on(filter, "", "expires")
}

/// [`filter_clause`] with each visibility column prefixed (`+` keeps it out
/// of index selection) and `expires` read from an expression.
fn filter_clause_on(
    filter: &Filter,
    prefix: &str,
    expires: &str,
) -> (String, Vec<rusqlite::types::Value>) {
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut alternatives = Vec::new();
    for scope in &filter.any_of {
        if Filter::is_unrestricted(scope) {
            return ("1".into(), Vec::new());
        }
        let mut clauses = Vec::new();
        for (col, allowed) in Filter::field_sets(scope) {
            clauses.push(format!(
                "{prefix}{col} IN ({})",
                vec!["?"; allowed.len()].join(",")
            ));
            values.extend(allowed.into_iter().map(Into::into));
        }
        if let Some(at) = scope.unexpired_at {
            clauses.push(format!("{expires} > ?"));
            values.push(at.timestamp_millis().into());
        }
        alternatives.push(format!("({})", clauses.join(" AND ")));
    }
    if alternatives.is_empty() {
        return ("0".into(), Vec::new());
    }
    (format!("({})", alternatives.join(" OR ")), values)
}

/// Which of `ids` are visible under `filter` in this snapshot, judged on
/// their memory rows with the values the vector table holds for them (its
/// expiry is the epoch for a superseded memory, see [`PENDING_COLUMNS`]):
/// the safety net of the in-process pass, one indexed statement instead of a
/// point read of sqlite-vec per id.
pub(crate) fn visible(
    conn: &Connection,
    ids: &[&str],
    filter: &Filter,
) -> Result<std::collections::HashSet<String>> {
    let mut shown = std::collections::HashSet::new();
    if ids.is_empty() || filter.is_empty() {
        return Ok(shown);
    }
    let (clause, filter_values) = filter_clause_on(
        filter,
        "+",
        "(CASE WHEN superseded_by IS NOT NULL THEN 0 \
         ELSE coalesce(expires_at, 9223372036854775807) END)",
    );
    let marks = vec!["?"; ids.len()].join(",");
    let mut stmt = conn.prepare(&format!(
        "SELECT id FROM memories WHERE id IN ({marks}) AND forgotten_at IS NULL \
         AND vector_model IS NOT NULL AND {clause}"
    ))?;
    let mut values: Vec<rusqlite::types::Value> =
        ids.iter().map(|id| id.to_string().into()).collect();
    values.extend(filter_values);
    let rows = stmt.query_map(params_from_iter(values), |r| r.get::<_, String>(0))?;
    for id in rows {
        shown.insert(id?);
    }
    Ok(shown)
}

/// Exact rescoring of the coarse pass's candidates: the `k` nearest of
/// `ids` to `query` by exact cosine distance, nearest first, ties by id,
/// among the rows `filter` shows in this snapshot. The filter is applied
/// again here, in SQL, so a candidate it hides (or one no longer stored)
/// is never returned, whatever the in-process copy held.
pub(crate) fn rescore<'a>(
    conn: &Connection,
    query: &[f32],
    ids: impl IntoIterator<Item = &'a str>,
    filter: &Filter,
    k: usize,
) -> Result<Vec<(String, f32)>> {
    if k == 0 || filter.is_empty() || !table_exists(conn)? {
        return Ok(Vec::new());
    }
    let (clause, filter_values) = filter_clause(filter);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT vec_distance_cosine(embedding, ?) FROM {TABLE} WHERE id = ? AND {clause}"
    ))?;
    let blob = to_bytes(query);
    let mut out = Vec::new();
    for id in ids {
        let mut values: Vec<rusqlite::types::Value> =
            vec![blob.clone().into(), id.to_string().into()];
        values.extend(filter_values.iter().cloned());
        // NULL: the cosine distance is undefined (a zero vector, stored or
        // queried; SQLite turns the NaN into NULL): unrankable, left out.
        let d: Option<Option<f64>> = stmt
            .query_row(params_from_iter(values), |r| r.get(0))
            .optional()?;
        if let Some(Some(d)) = d {
            out.push((id.to_string(), d as f32));
        }
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out.truncate(k);
    Ok(out)
}

/// The exact `k` nearest visible memories, scanning every float vector under
/// the filter: the reference the coarse pass is measured against.
pub(crate) fn knn_exact(
    conn: &Connection,
    query: &[f32],
    filter: &Filter,
    k: usize,
) -> Result<Vec<(String, f32)>> {
    if !table_exists(conn)? {
        return Ok(Vec::new());
    }
    knn_with(conn, query, filter, k, false)
}

fn knn_with(
    conn: &Connection,
    query: &[f32],
    filter: &Filter,
    k: usize,
    coarse: bool,
) -> Result<Vec<(String, f32)>> {
    let k = k.min(MAX_K);
    if k == 0 || filter.is_empty() {
        return Ok(Vec::new());
    }
    // Fetch a margin beyond `k` so that equal distances at the cut are
    // decided by id, not by the order rows happened to be inserted in; widen
    // it while the tie reaches the margin's end. The coarse pass widens on
    // ties of its own (int8) distance the same way.
    let exact_blob = to_bytes(query);
    let (blob, first) = if coarse {
        (quantize(query), int8_candidates(k))
    } else {
        (exact_blob.clone(), (k + TIE_MARGIN).min(MAX_K))
    };
    let mut best: HashMap<String, f32> = HashMap::new();
    for scope in &filter.any_of {
        let mut fetch = first;
        let rows = loop {
            let rows = knn_scope(conn, coarse, &blob, &exact_blob, scope, fetch)?;
            let tie_at_end = rows.len() == fetch
                && fetch < MAX_K
                && rows.get(k - 1).map(|r| r.1) == rows.last().map(|r| r.1);
            if !tie_at_end {
                break rows;
            }
            fetch = (fetch * 2).min(MAX_K);
        };
        for (id, _, d) in rows {
            // A NULL distance is undefined (a zero vector, stored or
            // queried): unrankable, left out, as in `rescore`.
            let Some(d) = d else { continue };
            let e = best.entry(id).or_insert(d);
            *e = e.min(d);
        }
    }
    let mut out: Vec<(String, f32)> = best.into_iter().collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out.truncate(k);
    Ok(out)
}

/// A row of [`knn_scope`]: id, the distance the KNN ranked by, the exact
/// cosine distance (`None` where undefined).
type KnnRow = (String, Option<f32>, Option<f32>);

/// One KNN under one scope: `fetch` rows, nearest first, as `(id, distance
/// the KNN ranked by, exact cosine distance)`. The coarse KNN ranks by the
/// int8 distance and computes the exact one for the rows it returns, in the
/// same statement (so under the same filter and the same snapshot). `None`
/// where a distance is undefined (SQLite NULL: a zero vector).
fn knn_scope(
    conn: &Connection,
    coarse: bool,
    blob: &[u8],
    exact_blob: &[u8],
    scope: &crate::index::filter::Scope,
    fetch: usize,
) -> Result<Vec<KnnRow>> {
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut sql = if coarse {
        values.push(exact_blob.to_vec().into());
        format!(
            "SELECT id, distance, vec_distance_cosine(embedding, ?) FROM {TABLE} \
             WHERE coarse MATCH vec_int8(?) AND k = ?"
        )
    } else {
        format!("SELECT id, distance, distance FROM {TABLE} WHERE embedding MATCH ? AND k = ?")
    };
    values.push(blob.to_vec().into());
    values.push((fetch as i64).into());
    for (col, allowed) in Filter::field_sets(scope) {
        let marks = vec!["?"; allowed.len()].join(",");
        sql.push_str(&format!(" AND {col} IN ({marks})"));
        values.extend(allowed.into_iter().map(Into::into));
    }
    if let Some(at) = scope.unexpired_at {
        // A range on a metadata column is applied inside the KNN too.
        sql.push_str(" AND expires > ?");
        values.push(at.timestamp_millis().into());
    }
    sql.push_str(" ORDER BY distance");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params_from_iter(values), |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<f64>>(1)?,
            r.get::<_, Option<f64>>(2)?,
        ))
    })?;
    rows.map(|r| {
        let (id, ranked, exact) = r?;
        Ok((id, ranked.map(|d| d as f32), exact.map(|d| d as f32)))
    })
    .collect()
}

/// The stored vectors of these memory ids (ids without one are left out).
pub(crate) fn vectors_of(conn: &Connection, ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
    let mut out = HashMap::new();
    if ids.is_empty() || !table_exists(conn)? {
        return Ok(out);
    }
    let mut stmt = conn.prepare_cached(&format!("SELECT embedding FROM {TABLE} WHERE id = ?"))?;
    for id in ids {
        let blob: Option<Vec<u8>> = stmt.query_row([id], |r| r.get(0)).optional()?;
        if let Some(v) = blob.as_deref().and_then(crate::embed::from_bytes) {
            out.insert(id.clone(), v);
        }
    }
    Ok(out)
}

/// Number of searchable memories still waiting for a vector of the current model.
pub(crate) fn pending_count(conn: &Connection) -> Result<u64> {
    Ok(conn.query_row(
        "SELECT COUNT(*) FROM memories WHERE vector_model IS NULL AND forgotten_at IS NULL",
        [],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// Number of stored vectors (0 when the table does not exist yet).
pub(crate) fn count(conn: &Connection) -> Result<u64> {
    if !table_exists(conn)? {
        return Ok(0);
    }
    Ok(
        conn.query_row(&format!("SELECT COUNT(*) FROM {TABLE}"), [], |r| {
            r.get::<_, i64>(0)
        })? as u64,
    )
}
