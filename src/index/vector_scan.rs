//! The coarse vector pass, in process: an int8 copy of every stored vector,
//! scanned under the caller's filter, picks the candidates that
//! `vector::rescore` ranks by exact cosine distance in SQLite.
//!
//! [`CoarseVectors`] holds, per stored vector, the memory id, its int8 copy
//! ([`vector::quantize`], rows of one contiguous matrix) with the inverse of
//! that copy's norm (so the dot product times it ranks by cosine), its
//! visibility values interned to small integers and its expiry. A [`Filter`]
//! is compiled against the interned values and evaluated per row inside the
//! scan, before the row's distance is computed: a row the filter hides never
//! enters the candidates, and the rescoring applies the same filter again in
//! SQL (the safety net: even a stale copy cannot bring back a hidden row).
//!
//! The copy follows SQLite through `vector_log`, which every change to the
//! vector table appends to in the same transaction (see [`vector`]). Each
//! search runs in one read transaction: it reads the log's position in that
//! snapshot, applies newer log rows by re-reading those ids (present: upsert,
//! absent: remove), and reloads everything after a model change, when the
//! log was pruned past its position or when most rows changed. A rolled-back
//! write leaves no log row and so no trace; another process's writes arrive
//! through the log like this process's own. Catching up takes the write side
//! of the lock and scanning the read side; the database writer never takes it.
//! If another search has already applied changes newer than this snapshot,
//! this one is served by sqlite-vec alone (`vector::knn_sql`).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::index::vector::{self, StoredVector};

/// The visibility columns, in [`Filter::field_sets`] order.
const COLUMNS: [&str; 6] = ["scene", "privacy", "stage", "kind", "subject", "origin"];

/// The in-process int8 copy of the vector table (see the module docs).
#[derive(Debug, Default)]
pub struct CoarseVectors {
    /// Model and dimension the rows belong to; `None` until loaded (or after
    /// a failed catch-up, which forces a reload).
    model: Option<(String, usize)>,
    /// The last `vector_log` sequence number applied.
    seq: i64,
    /// Memory id per row.
    ids: Vec<Arc<str>>,
    /// Row of each id.
    rows: HashMap<Arc<str>, usize>,
    /// Row-major int8 copies, `dim` per row.
    codes: Vec<i8>,
    /// 1 / norm of each row's int8 copy (0 for a zero vector).
    inv_norm: Vec<f32>,
    /// Interned visibility values per row, in [`COLUMNS`] order.
    columns: Vec<[u32; 6]>,
    /// Expiry per row, milliseconds (`i64::MAX` for none).
    expires: Vec<i64>,
    /// Value → interned number, per column (never shrinks; a handful of values).
    values: [HashMap<String, u32>; 6],
}

/// A candidate in the bounded heap: greater is better (higher score, then smaller id).
struct Candidate<'a> {
    score: f32,
    id: &'a str,
    row: usize,
}

impl PartialEq for Candidate<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate<'_> {}
impl PartialOrd for Candidate<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.id.cmp(self.id))
    }
}

/// One scope of a filter, compiled against the interned values.
struct CompiledScope {
    /// `(column, allowed[interned value])` for each restricted column.
    sets: Vec<(usize, Vec<bool>)>,
    /// Only rows expiring after this instant (milliseconds).
    unexpired_at: Option<i64>,
}

impl CompiledScope {
    fn admits(&self, columns: &[u32; 6], expires: i64) -> bool {
        self.unexpired_at.is_none_or(|at| expires > at)
            && self
                .sets
                .iter()
                .all(|(c, allowed)| allowed[columns[*c] as usize])
    }
}

/// What a filter lets through, compiled for one scan.
enum Compiled {
    /// Every row.
    All,
    /// Rows admitted by any of these scopes (none: nothing).
    Any(Vec<CompiledScope>),
}

/// The i8 × i8 dot product, accumulated in i32: a plain loop the compiler
/// vectorises.
fn dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

fn inv_norm(code: &[i8]) -> f32 {
    let n = (dot(code, code) as f32).sqrt();
    if n > 0.0 { 1.0 / n } else { 0.0 }
}

fn to_i8(v: &[f32]) -> Vec<i8> {
    vector::quantize(v).into_iter().map(|b| b as i8).collect()
}

impl CoarseVectors {
    /// Number of rows held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no rows are held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes held by the rows (matrix, norms, visibility values, expiries
    /// and ids; hash table overhead not counted).
    pub fn bytes(&self) -> usize {
        self.codes.len()
            + self.ids.len() * (4 + 24 + 8)
            + self.ids.iter().map(|i| i.len() + 16).sum::<usize>()
    }

    fn dim(&self) -> usize {
        self.model.as_ref().map_or(0, |m| m.1)
    }

    fn clear(&mut self) {
        let values = std::mem::take(&mut self.values);
        *self = CoarseVectors {
            values,
            ..CoarseVectors::default()
        };
    }

    fn intern(&mut self, columns: &[String; 6]) -> [u32; 6] {
        let mut out = [0u32; 6];
        for (c, value) in columns.iter().enumerate() {
            let map = &mut self.values[c];
            let next = map.len() as u32;
            out[c] = *map.entry(value.clone()).or_insert(next);
        }
        out
    }

    fn upsert(&mut self, dim: usize, v: StoredVector) {
        if v.vector.len() != dim {
            self.remove(&v.id);
            return;
        }
        let code = to_i8(&v.vector);
        let columns = self.intern(&v.columns);
        let row = match self.rows.get(v.id.as_str()) {
            Some(&row) => row,
            None => {
                let id: Arc<str> = v.id.into();
                let row = self.ids.len();
                self.rows.insert(id.clone(), row);
                self.ids.push(id);
                self.codes.resize(self.codes.len() + dim, 0);
                self.inv_norm.push(0.0);
                self.columns.push([0; 6]);
                self.expires.push(0);
                row
            }
        };
        self.inv_norm[row] = inv_norm(&code);
        self.codes[row * dim..(row + 1) * dim].copy_from_slice(&code);
        self.columns[row] = columns;
        self.expires[row] = v.expires;
    }

    fn remove(&mut self, id: &str) {
        let Some(row) = self.rows.remove(id) else {
            return;
        };
        let dim = self.dim();
        let last = self.ids.len() - 1;
        if row != last {
            self.codes
                .copy_within(last * dim..(last + 1) * dim, row * dim);
            self.rows.insert(self.ids[last].clone(), row);
        }
        self.ids.swap_remove(row);
        self.inv_norm.swap_remove(row);
        self.columns.swap_remove(row);
        self.expires.swap_remove(row);
        self.codes.truncate(last * dim);
    }

    /// Reloads every row of the table in this snapshot.
    fn reload(&mut self, conn: &Connection, model: &(String, usize), seq: i64) -> Result<()> {
        self.clear();
        let dim = model.1;
        vector::for_each_stored(conn, |v| self.upsert(dim, v))?;
        self.model = Some(model.clone());
        self.seq = seq;
        Ok(())
    }

    /// Brings the copy to the snapshot `conn` reads, whose log spans
    /// `lo..=hi` and whose vectors are of `model`. `false` if the copy is
    /// already ahead of this snapshot (another search applied newer changes).
    /// A failure empties the copy's model, so the next search reloads.
    fn catch_up(
        &mut self,
        conn: &Connection,
        model: &(String, usize),
        bounds: (i64, i64),
    ) -> Result<bool> {
        let out = self.apply_log(conn, model, bounds);
        if out.is_err() {
            self.model = None;
        }
        out
    }

    fn apply_log(
        &mut self,
        conn: &Connection,
        model: &(String, usize),
        (lo, hi): (i64, i64),
    ) -> Result<bool> {
        // Another model, log rows pruned before they were applied, or an
        // empty log behind a copy that applied some (a rebuilt database).
        if self.model.as_ref() != Some(model) || lo > self.seq + 1 || (hi == 0 && self.seq > 0) {
            self.reload(conn, model, hi)?;
            return Ok(true);
        }
        if self.seq >= hi {
            return Ok(self.seq == hi);
        }
        let changes = vector::log_since(conn, self.seq)?;
        if changes.iter().any(Option::is_none) || changes.len() > self.len() / 2 + 1024 {
            self.reload(conn, model, hi)?;
            return Ok(true);
        }
        let mut seen = HashSet::new();
        for id in changes.into_iter().flatten() {
            if !seen.insert(id.clone()) {
                continue;
            }
            match vector::stored(conn, &id)? {
                Some(v) => self.upsert(model.1, v),
                None => self.remove(&id),
            }
        }
        self.seq = hi;
        Ok(true)
    }

    fn compile(&self, filter: &Filter) -> Compiled {
        let mut scopes = Vec::new();
        'scopes: for scope in &filter.any_of {
            if Filter::is_unrestricted(scope) {
                return Compiled::All;
            }
            let mut sets = Vec::new();
            for (col, allowed) in Filter::field_sets(scope) {
                let Some(c) = COLUMNS.iter().position(|n| *n == col) else {
                    continue 'scopes;
                };
                let mut mask = vec![false; self.values[c].len()];
                let mut any = false;
                for v in &allowed {
                    if let Some(&i) = self.values[c].get(v) {
                        mask[i as usize] = true;
                        any = true;
                    }
                }
                if !any {
                    // No row holds an allowed value: this scope admits nothing.
                    continue 'scopes;
                }
                sets.push((c, mask));
            }
            scopes.push(CompiledScope {
                sets,
                unexpired_at: scope.unexpired_at.map(|at| at.timestamp_millis()),
            });
        }
        Compiled::Any(scopes)
    }

    /// The ids of the `n` rows visible under `filter` with the highest int8
    /// cosine to `query` (ties by id), in no particular order.
    pub(crate) fn scan(&self, query: &[f32], filter: &Filter, n: usize) -> Vec<Arc<str>> {
        let dim = self.dim();
        if n == 0 || dim == 0 || query.len() != dim {
            return Vec::new();
        }
        let compiled = self.compile(filter);
        if matches!(&compiled, Compiled::Any(s) if s.is_empty()) {
            return Vec::new();
        }
        let q = to_i8(query);
        let mut heap: BinaryHeap<Reverse<Candidate<'_>>> = BinaryHeap::with_capacity(n + 1);
        for (row, code) in self.codes.chunks_exact(dim).enumerate() {
            if let Compiled::Any(scopes) = &compiled {
                let (columns, expires) = (&self.columns[row], self.expires[row]);
                if !scopes.iter().any(|s| s.admits(columns, expires)) {
                    continue;
                }
            }
            let score = dot(&q, code) as f32 * self.inv_norm[row];
            if heap.len() == n && score < heap.peek().map_or(f32::MIN, |w| w.0.score) {
                continue;
            }
            let c = Candidate {
                score,
                id: &self.ids[row],
                row,
            };
            if heap.len() == n {
                if heap.peek().is_some_and(|w| c <= w.0) {
                    continue;
                }
                heap.pop();
            }
            heap.push(Reverse(c));
        }
        heap.into_iter()
            .map(|Reverse(c)| self.ids[c.row].clone())
            .collect()
    }
}

/// Ends a read transaction, whatever happened inside it.
struct ReadTx<'a>(&'a Connection);

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let _ = self.0.execute_batch("ROLLBACK");
        }
    }
}

/// The `k` nearest memories visible under `filter` to `query`, a vector of
/// `model`, as `(id, exact cosine distance)`, nearest first, ties by id:
/// the in-process coarse pass, then exact rescoring in SQLite, both in one
/// read snapshot of `conn`. Nothing when no vectors are stored;
/// `EMBEDDING_UNAVAILABLE` when they are of another model.
pub(crate) fn knn(
    conn: &Connection,
    coarse: &RwLock<CoarseVectors>,
    model: &str,
    query: &[f32],
    filter: &Filter,
    k: usize,
) -> Result<Vec<(String, f32)>> {
    conn.execute_batch("BEGIN")?;
    let _tx = ReadTx(conn);
    let stored = match vector::stored_model(conn)? {
        None => return Ok(Vec::new()),
        Some((m, _)) if m != model => {
            return Err(Error::EmbeddingUnavailable(format!(
                "the index holds vectors of {m}, not of the configured {model}; \
                 start the writer (memd serve) or run memd reindex to re-embed"
            )));
        }
        Some(s) => s,
    };
    let k = k.min(vector::MAX_K);
    if k == 0 || filter.is_empty() {
        return Ok(Vec::new());
    }
    let Some(bounds) = vector::log_bounds(conn)? else {
        // A store without the change log (not migrated yet): sqlite-vec alone.
        return vector::knn_sql(conn, query, filter, k);
    };
    let n = vector::candidates(k);
    let current = {
        let held = coarse.read().expect("coarse vectors poisoned");
        (held.model.as_ref() == Some(&stored) && held.seq == bounds.1)
            .then(|| held.scan(query, filter, n))
    };
    let candidates = match current {
        Some(c) => c,
        None => {
            let mut held = coarse.write().expect("coarse vectors poisoned");
            if !held.catch_up(conn, &stored, bounds)? {
                drop(held);
                return vector::knn_sql(conn, query, filter, k);
            }
            held.scan(query, filter, n)
        }
    };
    vector::rescore(conn, query, candidates.iter().map(|s| &**s), filter, k)
}

/// Loads (or catches up) the copy now, in its own snapshot, and returns how
/// many rows it holds: for a warm start and for measuring the load.
pub(crate) fn warm(conn: &Connection, coarse: &RwLock<CoarseVectors>) -> Result<usize> {
    conn.execute_batch("BEGIN")?;
    let _tx = ReadTx(conn);
    let (Some(stored), Some(bounds)) = (vector::stored_model(conn)?, vector::log_bounds(conn)?)
    else {
        return Ok(0);
    };
    let mut held = coarse.write().expect("coarse vectors poisoned");
    held.catch_up(conn, &stored, bounds)?;
    Ok(held.len())
}
