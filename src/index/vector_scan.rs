//! The coarse vector pass, in process: one bit per component of every
//! stored vector, scanned under the caller's filter, picks the candidates
//! that are ranked by exact cosine distance over float copies kept in an
//! unlinked temporary file.
//!
//! [`CoarseVectors`] holds, per stored vector, the memory id, the signs of
//! the vector minus a centre (the mean of the vectors read first, see
//! `CENTRE_ROWS`), 48 bytes for 384 components, three floats that turn a
//! query's dot product with those signs into a cosine estimate (`Terms`),
//! its visibility class (the combination of its visibility values, interned)
//! and its expiry. The query stays in floats: per byte of a code a table of
//! 256 partial sums, so a row costs 48 table reads and no multiplication.
//! A [`Filter`] is compiled into one gate per class and evaluated per row
//! inside the scan, before the row's estimate is computed: a row the filter
//! hides never enters the candidates, and the best of them are checked
//! against the same filter again in SQL on their memory rows
//! (`vector::visible`: the safety net, even a stale copy cannot bring back
//! a hidden row). The estimate is coarse, so the bits keep several hundred
//! rows ([`vector::candidates`]); a second stage reads those rows' float
//! vectors from an unlinked temporary file (the kernel's page cache, not this
//! process's memory; a few µs a row, where a point read from sqlite-vec costs
//! ~180 µs without a memory map) and ranks them by exact cosine distance,
//! computed as sqlite-vec computes it. Recall against exact KNN is measured
//! by `cargo bench --bench memd -- --vectors-only`.
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

/// Rows the centre is taken from on a reload (the first ones read): enough
/// for a stable mean, little to buffer.
const CENTRE_ROWS: usize = 8192;

/// The in-process 1-bit copy of the vector table (see the module docs).
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
    /// The centre the codes are taken around: the mean of the vectors read
    /// first on the last reload (empty: the origin).
    centre: Vec<f32>,
    /// How many vectors the centre is the mean of.
    centre_rows: usize,
    /// Row-major sign bits of `v − centre`, [`code_bytes`] per row; bit `j`
    /// of byte `b` is component `8b + j` (1: above the centre).
    bits: Vec<u8>,
    /// Per row, what turns the bits into a cosine estimate (see [`Terms`]).
    terms: Vec<Terms>,
    /// Visibility class of each row: its interned values, see `classes`.
    class: Vec<u32>,
    /// Expiry per row, milliseconds (`i64::MAX` for none).
    expires: Vec<i64>,
    /// Interned visibility values of each class, in [`COLUMNS`] order, and
    /// the class of each combination (never shrink; a handful of them).
    classes: Vec<[u32; 6]>,
    class_of: HashMap<[u32; 6], u32>,
    /// Value → interned number, per column (never shrinks; a handful of values).
    values: [HashMap<String, u32>; 6],
    /// The float vectors of the rows (little-endian f32, `4 · dim` bytes at
    /// `row · 4 · dim`) in an unlinked temporary file: the second stage reads
    /// only the candidates' (page cache, not this process's memory). `None`
    /// until a reload makes one, or after a failed write or read (the
    /// candidates of the bits then go to sqlite-vec's rescoring).
    side: Option<std::fs::File>,
    /// Where the side file is made: the index directory (a disk, where the
    /// system temp directory may be memory); the temp directory without one
    /// or when that fails.
    side_dir: Option<std::path::PathBuf>,
}

/// An unlinked temporary file for the float copies, in `dir` if it can be
/// made there, else in the system temp directory.
fn side_file(dir: Option<&std::path::Path>) -> std::io::Result<std::fs::File> {
    if let Some(dir) = dir
        && let Ok(file) = side_file_in(dir)
    {
        return Ok(file);
    }
    side_file_in(&std::env::temp_dir())
}

/// Where a side file for the index in `dir` would be made now: `Ok(None)` in
/// `dir` itself, `Ok(Some(why))` only in the temp directory (why `dir`
/// refused it), `Err` nowhere (hybrid searches then rescore through
/// sqlite-vec, several times slower at scale). For `memd doctor`.
pub(crate) fn side_file_place(
    dir: &std::path::Path,
) -> std::result::Result<Option<std::io::Error>, (std::io::Error, std::io::Error)> {
    match side_file_in(dir) {
        Ok(_) => Ok(None),
        Err(in_dir) => match side_file_in(&std::env::temp_dir()) {
            Ok(_) => Ok(Some(in_dir)),
            Err(in_temp) => Err((in_dir, in_temp)),
        },
    }
}

fn side_file_in(dir: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!(
        ".memd-vectors-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, AtomicOrdering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// Bytes of sign bits per row of `dim` components.
fn code_bytes(dim: usize) -> usize {
    dim.div_ceil(8)
}

/// The per-row numbers of the estimate. With `c` the centre, `r = v − c`
/// and `s` the signs of `r` (±1), the cosine of query `q` and row `v` is
/// `(⟨q,c⟩ + ⟨c,r⟩ + ⟨q−c,r⟩) / (|q| |v|)`; only the last product is
/// estimated, as `⟨q−c, s⟩ · |r|² / |r|₁` (exact when `|r|` is spread evenly
/// over the components, and unbiased-ish otherwise: the 1-bit estimator
/// of RaBitQ without its random rotation, which did not help on e5 vectors).
/// The query side stays in floats; `|q|` is common to all rows and dropped.
#[derive(Debug, Clone, Copy, Default)]
struct Terms {
    /// `1 / |v|` (0 for a zero or non-finite vector).
    inv_norm: f32,
    /// `|r|² / |r|₁`.
    scale: f32,
    /// `⟨c, r⟩`, exact.
    centre_dot: f32,
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

/// Whether a visibility class is admitted by a compiled filter.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Gate {
    /// No scope admits the class.
    Closed,
    /// Rows of the class expiring after this instant (milliseconds).
    After(i64),
    /// Every row of the class.
    Open,
}

impl Gate {
    fn admits(self, expires: i64) -> bool {
        match self {
            Gate::Closed => false,
            Gate::Open => true,
            Gate::After(at) => expires > at,
        }
    }

    /// The gate admitting what either admits.
    fn or(self, other: Gate) -> Gate {
        match (self, other) {
            (Gate::Open, _) | (_, Gate::Open) => Gate::Open,
            (Gate::Closed, g) | (g, Gate::Closed) => g,
            (Gate::After(a), Gate::After(b)) => Gate::After(a.min(b)),
        }
    }
}

/// What a filter lets through, compiled for one scan.
enum Compiled {
    /// Every row.
    All,
    /// Rows whose class's gate admits them.
    Gates(Vec<Gate>),
}

/// One query, ready to be scored against the sign bits.
struct Query {
    /// Per byte of a code, the sum of `2·(q−c)ⱼ` over its set bits, by byte value.
    table: Vec<[f32; 256]>,
    /// `⟨q, c⟩`.
    centre_dot: f32,
    /// `Σ (q−c)ⱼ`: `⟨q−c, s⟩` is the table sum minus this.
    sum: f32,
}

impl Query {
    fn new(query: &[f32], centre: &[f32]) -> Query {
        let c = |j: usize| centre.get(j).copied().unwrap_or(0.0);
        let centred: Vec<f32> = query.iter().enumerate().map(|(j, x)| x - c(j)).collect();
        let table = centred
            .chunks(8)
            .map(|part| {
                let mut t = [0f32; 256];
                for byte in 1..256usize {
                    // The entry of `byte` is the one without its lowest bit, plus that bit's component.
                    let low = byte.trailing_zeros() as usize;
                    t[byte] = t[byte & (byte - 1)] + 2.0 * part.get(low).copied().unwrap_or(0.0);
                }
                t
            })
            .collect();
        Query {
            table,
            centre_dot: query.iter().enumerate().map(|(j, x)| x * c(j)).sum(),
            sum: centred.iter().sum(),
        }
    }

    /// The estimated `⟨q, v⟩ / |v|` of a row (see [`Terms`]).
    fn score(&self, code: &[u8], t: Terms) -> f32 {
        t.inv_norm
            * (self.centre_dot + t.centre_dot + t.scale * (table_sum(&self.table, code) - self.sum))
    }
}

/// The sum of the table entries a row's bytes select: eight running sums
/// (one per byte of a word), so the additions do not wait on each other.
fn table_sum(table: &[[f32; 256]], code: &[u8]) -> f32 {
    let (words, rest) = code.as_chunks::<8>();
    let (tables, rest_tables) = table.as_chunks::<8>();
    let mut acc = [0f32; 8];
    for (word, t) in words.iter().zip(tables) {
        for j in 0..8 {
            acc[j] += t[j][word[j] as usize];
        }
    }
    let tail: f32 = rest
        .iter()
        .zip(rest_tables)
        .map(|(&b, t)| t[b as usize])
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// The code and terms of vector `v` around `centre` (shorter: zeros).
fn encode(v: &[f32], centre: &[f32]) -> (Vec<u8>, Terms) {
    let mut code = vec![0u8; code_bytes(v.len())];
    let (mut norm2, mut res2, mut res1, mut centre_dot) = (0f32, 0f32, 0f32, 0f32);
    for (j, &x) in v.iter().enumerate() {
        let c = centre.get(j).copied().unwrap_or(0.0);
        let r = x - c;
        norm2 += x * x;
        res2 += r * r;
        res1 += r.abs();
        centre_dot += c * r;
        if r > 0.0 {
            code[j / 8] |= 1 << (j % 8);
        }
    }
    let norm = norm2.sqrt();
    let terms = if norm > 0.0 && norm.is_finite() && res1.is_finite() {
        Terms {
            inv_norm: 1.0 / norm,
            scale: if res1 > 0.0 { res2 / res1 } else { 0.0 },
            centre_dot,
        }
    } else {
        Terms::default()
    };
    (code, terms)
}

impl CoarseVectors {
    /// An empty copy whose side file will be made in `dir`.
    pub(crate) fn in_dir(dir: &std::path::Path) -> CoarseVectors {
        CoarseVectors {
            side_dir: Some(dir.to_path_buf()),
            ..CoarseVectors::default()
        }
    }

    /// Number of rows held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no rows are held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes held by the rows: the bits, the per-row terms, classes and
    /// expiries, the ids and the id → row table (its allocator overhead
    /// aside).
    pub fn bytes(&self) -> usize {
        let per_row = std::mem::size_of::<Terms>()
            + std::mem::size_of::<u32>()
            + std::mem::size_of::<i64>()
            + std::mem::size_of::<Arc<str>>();
        let id_bytes: usize = self.ids.iter().map(|i| i.len() + 16).sum();
        let table = self.rows.capacity() * (std::mem::size_of::<(Arc<str>, usize)>() + 1);
        self.bits.capacity() + self.ids.len() * per_row + id_bytes + table
    }

    fn dim(&self) -> usize {
        self.model.as_ref().map_or(0, |m| m.1)
    }

    fn clear(&mut self) {
        let values = std::mem::take(&mut self.values);
        let classes = std::mem::take(&mut self.classes);
        let class_of = std::mem::take(&mut self.class_of);
        let side_dir = self.side_dir.take();
        *self = CoarseVectors {
            values,
            classes,
            class_of,
            side_dir,
            ..CoarseVectors::default()
        };
    }

    fn intern(&mut self, columns: &[String; 6]) -> u32 {
        let mut key = [0u32; 6];
        for (c, value) in columns.iter().enumerate() {
            let map = &mut self.values[c];
            let next = map.len() as u32;
            key[c] = *map.entry(value.clone()).or_insert(next);
        }
        let next = self.classes.len() as u32;
        let class = *self.class_of.entry(key).or_insert(next);
        if class == next {
            self.classes.push(key);
        }
        class
    }

    fn upsert(&mut self, dim: usize, v: StoredVector) {
        if v.vector.len() != dim {
            self.remove(&v.id);
            return;
        }
        let (code, terms) = encode(&v.vector, &self.centre);
        let class = self.intern(&v.columns);
        let nb = code_bytes(dim);
        let row = match self.rows.get(v.id.as_str()) {
            Some(&row) => row,
            None => {
                let id: Arc<str> = v.id.into();
                let row = self.ids.len();
                self.rows.insert(id.clone(), row);
                self.ids.push(id);
                self.bits.resize(self.bits.len() + nb, 0);
                self.terms.push(Terms::default());
                self.class.push(0);
                self.expires.push(0);
                row
            }
        };
        self.terms[row] = terms;
        self.bits[row * nb..(row + 1) * nb].copy_from_slice(&code);
        self.class[row] = class;
        self.expires[row] = v.expires;
        let bytes: Vec<u8> = v.vector.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.side_write(row, &bytes);
    }

    /// Writes `row`'s float copy (`4 · dim` bytes); a failure drops the file.
    fn side_write(&mut self, row: usize, bytes: &[u8]) {
        use std::os::unix::fs::FileExt;
        let offset = (row * bytes.len()) as u64;
        if let Some(f) = &self.side
            && f.write_all_at(bytes, offset).is_err()
        {
            self.side = None;
        }
    }

    /// The float copy of `row` as written (`None`: no side file, or it failed).
    fn side_read(&self, row: usize, dim: usize) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; 4 * dim];
        self.side
            .as_ref()?
            .read_exact_at(&mut buf, (row * 4 * dim) as u64)
            .ok()?;
        Some(buf)
    }

    /// The float copy of `id`'s vector (`None`: not held, no side file, or
    /// the read failed).
    fn float_of(&self, id: &str) -> Option<Vec<f32>> {
        let row = *self.rows.get(id)?;
        let bytes = self.side_read(row, self.dim())?;
        Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }

    fn remove(&mut self, id: &str) {
        let Some(row) = self.rows.remove(id) else {
            return;
        };
        let nb = code_bytes(self.dim());
        let last = self.ids.len() - 1;
        if row != last {
            self.bits.copy_within(last * nb..(last + 1) * nb, row * nb);
            self.rows.insert(self.ids[last].clone(), row);
            match self.side_read(last, self.dim()) {
                Some(bytes) => self.side_write(row, &bytes),
                None => self.side = None,
            }
        }
        self.ids.swap_remove(row);
        self.terms.swap_remove(row);
        self.class.swap_remove(row);
        self.expires.swap_remove(row);
        self.bits.truncate(last * nb);
    }

    /// Replaces the rows by `rows`, centred on the mean of the first
    /// [`CENTRE_ROWS`] of them (held until the mean is known).
    fn fill(&mut self, dim: usize, rows: impl IntoIterator<Item = StoredVector>) {
        let mut first = Vec::new();
        let mut rows = rows.into_iter();
        for v in rows.by_ref() {
            first.push(v);
            if first.len() == CENTRE_ROWS {
                break;
            }
        }
        let mut sum = vec![0f64; dim];
        let mut counted = 0usize;
        for v in first.iter().filter(|v| v.vector.len() == dim) {
            if v.vector.iter().all(|x| x.is_finite()) {
                sum.iter_mut()
                    .zip(&v.vector)
                    .for_each(|(s, x)| *s += f64::from(*x));
                counted += 1;
            }
        }
        self.centre = if counted == 0 {
            Vec::new()
        } else {
            sum.iter().map(|s| (s / counted as f64) as f32).collect()
        };
        self.centre_rows = counted;
        for v in first.into_iter().chain(rows) {
            self.upsert(dim, v);
        }
    }

    /// Reloads every row of the table in this snapshot.
    fn reload(&mut self, conn: &Connection, model: &(String, usize), seq: i64) -> Result<()> {
        self.clear();
        self.side = side_file(self.side_dir.as_deref()).ok();
        let dim = model.1;
        // Read in blocks: the first block fixes the centre, later ones are
        // encoded as they arrive.
        let mut first = Vec::with_capacity(CENTRE_ROWS);
        let mut filled = false;
        vector::for_each_stored(conn, |v| {
            if filled {
                self.upsert(dim, v);
            } else {
                first.push(v);
                if first.len() == CENTRE_ROWS {
                    self.fill(dim, std::mem::take(&mut first));
                    filled = true;
                }
            }
        })?;
        if !filled {
            self.fill(dim, first);
        }
        // Growing by doubling leaves up to half of each vector unused.
        self.bits.shrink_to_fit();
        self.ids.shrink_to_fit();
        self.terms.shrink_to_fit();
        self.class.shrink_to_fit();
        self.expires.shrink_to_fit();
        self.rows.shrink_to_fit();
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

    /// Whether the centre was taken from too few rows for the copy as it
    /// now is: a copy that grew from a small table is reloaded (and so
    /// re-centred) each time it doubles, up to [`CENTRE_ROWS`].
    fn centre_is_stale(&self) -> bool {
        self.centre_rows < CENTRE_ROWS && self.len() >= 2 * self.centre_rows.max(64)
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
        if self.centre_is_stale() {
            self.reload(conn, model, hi)?;
        }
        Ok(true)
    }

    fn compile(&self, filter: &Filter) -> Compiled {
        let mut gates = vec![Gate::Closed; self.classes.len()];
        for scope in &filter.any_of {
            if Filter::is_unrestricted(scope) {
                return Compiled::All;
            }
            let mut sets = Vec::new();
            let mut known = true;
            for (col, allowed) in Filter::field_sets(scope) {
                let Some(c) = COLUMNS.iter().position(|n| *n == col) else {
                    known = false;
                    break;
                };
                let mut mask = vec![false; self.values[c].len()];
                for v in &allowed {
                    if let Some(&i) = self.values[c].get(v) {
                        mask[i as usize] = true;
                    }
                }
                sets.push((c, mask));
            }
            if !known {
                // A column the copy does not hold: this scope admits nothing here.
                continue;
            }
            let gate = scope
                .unexpired_at
                .map_or(Gate::Open, |at| Gate::After(at.timestamp_millis()));
            for (class, key) in self.classes.iter().enumerate() {
                if sets.iter().all(|(c, mask)| mask[key[*c] as usize]) {
                    gates[class] = gates[class].or(gate);
                }
            }
        }
        Compiled::Gates(gates)
    }

    /// The [`vector::rescored`] nearest rows to `query` visible under
    /// `filter`, as `(id, exact cosine distance)`, nearest first, ties by id:
    /// the [`vector::candidates`] best by the bits, ranked by their float
    /// copies. Rows whose distance is undefined (a zero vector) are left out,
    /// as sqlite-vec leaves them out. `None` without a side file or when a
    /// read fails: the caller rescores in SQLite instead.
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        filter: &Filter,
        k: usize,
    ) -> Option<Vec<(Arc<str>, f32)>> {
        let dim = self.dim();
        self.side.as_ref()?;
        let wide = self.scan_rows(query, filter, vector::candidates(k));
        let mut out = Vec::with_capacity(wide.len());
        for row in wide {
            let bytes = self.side_read(row, dim)?;
            let d = cosine_distance(query, &bytes);
            if !d.is_nan() {
                out.push((self.ids[row].clone(), d));
            }
        }
        out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        out.truncate(vector::rescored(k));
        Some(out)
    }

    /// The ids of the `n` rows visible under `filter` with the highest
    /// estimated cosine to `query` (ties by id), in no particular order.
    pub(crate) fn scan(&self, query: &[f32], filter: &Filter, n: usize) -> Vec<Arc<str>> {
        self.scan_rows(query, filter, n)
            .into_iter()
            .map(|r| self.ids[r].clone())
            .collect()
    }

    fn scan_rows(&self, query: &[f32], filter: &Filter, n: usize) -> Vec<usize> {
        let dim = self.dim();
        if n == 0 || dim == 0 || query.len() != dim {
            return Vec::new();
        }
        let compiled = self.compile(filter);
        if matches!(&compiled, Compiled::Gates(g) if g.iter().all(|g| *g == Gate::Closed)) {
            return Vec::new();
        }
        let q = Query::new(query, &self.centre);
        let mut heap: BinaryHeap<Reverse<Candidate<'_>>> = BinaryHeap::with_capacity(n + 1);
        let codes = self.bits.chunks_exact(code_bytes(dim));
        for (row, (code, &terms)) in codes.zip(&self.terms).enumerate() {
            if let Compiled::Gates(gates) = &compiled
                && !gates[self.class[row] as usize].admits(self.expires[row])
            {
                continue;
            }
            let score = q.score(code, terms);
            if score.is_nan()
                || (heap.len() == n && score < heap.peek().map_or(f32::MIN, |w| w.0.score))
            {
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
        heap.into_iter().map(|Reverse(c)| c.row).collect()
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
    let found = {
        let held = coarse.read().expect("coarse vectors poisoned");
        (held.model.as_ref() == Some(&stored) && held.seq == bounds.1).then(|| {
            held.nearest(query, filter, k)
                .ok_or_else(|| held.scan(query, filter, vector::candidates(k)))
        })
    };
    let found = match found {
        Some(f) => f,
        None => {
            let mut held = coarse.write().expect("coarse vectors poisoned");
            if !held.catch_up(conn, &stored, bounds)? {
                drop(held);
                return vector::knn_sql(conn, query, filter, k);
            }
            held.nearest(query, filter, k)
                .ok_or_else(|| held.scan(query, filter, vector::candidates(k)))
        }
    };
    match found {
        Ok(nearest) => {
            let ids: Vec<&str> = nearest.iter().map(|(id, _)| &**id).collect();
            let shown = vector::visible(conn, &ids, filter)?;
            Ok(nearest
                .into_iter()
                .filter(|(id, _)| shown.contains(&**id))
                .take(k)
                .map(|(id, d)| (id.to_string(), d))
                .collect())
        }
        // No usable side file: sqlite-vec rescores the bits' candidates.
        Err(ids) => vector::rescore(conn, query, ids.iter().map(|s| &**s), filter, k),
    }
}

/// The stored vectors of `ids` (those that have one of `model`; an empty
/// map when the index holds another model's), read from the copy's side
/// file while the copy is current in this snapshot (a few µs a row), the
/// rest from sqlite-vec (a point read walks a chunk's overflow pages,
/// ~180 µs a row). The copy is not caught up here: a search's KNN has just
/// done that, and a stale copy only sends the reads to SQLite.
pub(crate) fn vectors_of(
    conn: &Connection,
    coarse: &RwLock<CoarseVectors>,
    model: &str,
    ids: &[String],
) -> Result<HashMap<String, Vec<f32>>> {
    conn.execute_batch("BEGIN")?;
    let _tx = ReadTx(conn);
    let stored = match vector::stored_model(conn)? {
        Some(s) if s.0 == model => s,
        _ => return Ok(HashMap::new()),
    };
    let mut out = HashMap::new();
    let mut missing = Vec::new();
    if let Some(bounds) = vector::log_bounds(conn)? {
        let held = coarse.read().expect("coarse vectors poisoned");
        let current = held.model.as_ref() == Some(&stored) && held.seq == bounds.1;
        for id in ids {
            match current.then(|| held.float_of(id)).flatten() {
                Some(v) => {
                    out.insert(id.clone(), v);
                }
                None => missing.push(id.clone()),
            }
        }
    } else {
        missing = ids.to_vec();
    }
    out.extend(vector::vectors_of(conn, &missing)?);
    Ok(out)
}

/// The cosine distance between `query` and a float copy (little-endian f32
/// bytes), computed as sqlite-vec's `vec_distance_cosine` computes it: f32
/// sums in component order, the square roots and the quotient in double.
/// NaN when either vector is zero.
fn cosine_distance(query: &[f32], bytes: &[u8]) -> f32 {
    let (mut dot, mut a, mut b) = (0f32, 0f32, 0f32);
    for (q, c) in query.iter().zip(bytes.chunks_exact(4)) {
        let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        dot += q * v;
        a += q * q;
        b += v * v;
    }
    (1.0 - f64::from(dot) / (f64::from(a).sqrt() * f64::from(b).sqrt())) as f32
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_file_goes_beside_the_index_else_to_the_temp_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(side_file_place(dir.path()), Ok(None)));
        // A directory that cannot hold it: the temp directory takes it.
        let gone = dir.path().join("missing");
        let why = side_file_place(&gone)
            .unwrap()
            .expect("the index directory refused it");
        assert_eq!(why.kind(), std::io::ErrorKind::NotFound);
        // Nothing is left behind: the file is unlinked as soon as it is made.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
    use crate::index::filter::Scope;
    use crate::index::meta::{FactExtras, MetaDb, tx as mtx};
    use crate::model::{Memory, Origin, Privacy, Scene, Stage, Subject};
    use chrono::{DateTime, Utc};

    const DIM: usize = 16;

    /// A deterministic pseudo-random unit vector.
    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                x ^= x >> 29;
                x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
                (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter().map(|a| a / n).collect()
    }

    fn memory(id: &str, scene: &str, privacy: Privacy, expires: Option<i64>) -> Memory {
        let at = DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        Memory {
            id: id.into(),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: at,
            scene: Scene::parse(scene).unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            text: format!("text of {id}"),
            tags: vec![],
            privacy,
            subject: Subject::Owner,
            source: "test".into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            expires_at: expires.and_then(DateTime::from_timestamp_millis),
            setting: Default::default(),
        }
    }

    /// Writes `m` and stores `v` as its vector (model `m`), in one transaction.
    fn put_in(t: &rusqlite::Transaction<'_>, m: &Memory, v: &[f32]) -> Result<u64> {
        mtx::upsert_memory(t, m, None, &FactExtras::default())?;
        vector::ensure_model(t, "m", v.len())?;
        let pending = vector::pending(t, 100_000)?;
        let rows: Vec<(&vector::Pending, &[f32])> = pending
            .iter()
            .filter(|p| p.id == m.id)
            .map(|p| (p, v))
            .collect();
        vector::store(t, "m", &rows)
    }

    fn put(db: &MetaDb, m: &Memory, v: &[f32]) {
        assert_eq!(db.write(|t| put_in(t, m, v)).unwrap(), 1);
    }

    struct Handle {
        db: MetaDb,
        coarse: RwLock<CoarseVectors>,
    }

    impl Handle {
        fn open(path: &std::path::Path, writable: bool) -> Handle {
            Handle {
                db: MetaDb::open(path, writable).unwrap(),
                coarse: RwLock::default(),
            }
        }
        fn knn(&self, q: &[f32], filter: &Filter, k: usize) -> Vec<(String, f32)> {
            self.db
                .with_reader(|c| knn(c, &self.coarse, "m", q, filter, k))
                .unwrap()
        }
        fn exact(&self, q: &[f32], filter: &Filter, k: usize) -> Vec<(String, f32)> {
            self.db
                .with_reader(|c| vector::knn_exact(c, q, filter, k))
                .unwrap()
        }
        /// The in-process pass answers exactly what sqlite-vec's exact KNN does.
        fn check(&self, q: &[f32], filter: &Filter, k: usize) -> Vec<(String, f32)> {
            let got = self.knn(q, filter, k);
            assert_eq!(got, self.exact(q, filter, k), "{filter:?}, k {k}");
            got
        }
        fn held(&self) -> (usize, i64) {
            let h = self.coarse.read().unwrap();
            (h.len(), h.seq)
        }
    }

    fn scenes(s: &[&str]) -> Scope {
        Scope {
            scenes: s.iter().map(|s| Scene::parse(s).unwrap()).collect(),
            ..Scope::default()
        }
    }

    /// 40 memories over three scenes, two privacy levels and some expiries.
    fn fill(h: &Handle) -> Vec<String> {
        let mut ids = Vec::new();
        for i in 0..40u64 {
            let scene = ["main", "pet", "work"][i as usize % 3];
            let privacy = if i % 4 == 0 {
                Privacy::Sensitive
            } else {
                Privacy::Normal
            };
            let expires = (i % 5 == 0).then_some(1_000 * i as i64);
            let id = format!("fact-{i:02}");
            put(&h.db, &memory(&id, scene, privacy, expires), &unit(i, DIM));
            ids.push(id);
        }
        ids
    }

    #[test]
    fn the_pass_returns_what_exact_knn_returns_under_filters() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        let normal_main = Scope {
            privacy: vec![Privacy::Normal],
            ..scenes(&["main"])
        };
        let unexpired = Scope {
            unexpired_at: DateTime::<Utc>::from_timestamp_millis(15_000),
            ..Scope::default()
        };
        let filters = [
            Filter::all(),
            Filter::scope(scenes(&["main"])),
            Filter::scope(scenes(&["main", "work"])),
            Filter::scope(normal_main.clone()),
            Filter {
                any_of: vec![normal_main, scenes(&["pet"])],
            },
            Filter::scope(unexpired.clone()),
            Filter {
                any_of: vec![
                    Scope {
                        privacy: vec![Privacy::Sensitive],
                        ..unexpired
                    },
                    scenes(&["work"]),
                ],
            },
        ];
        for q in 100..104 {
            let q = unit(q, DIM);
            for f in &filters {
                for k in [1, 5, 10, 40] {
                    assert!(!h.check(&q, f, k).is_empty());
                }
            }
        }
        assert_eq!(h.held().0, 40, "served by the in-process copy");
        let q = unit(7, DIM);
        for nothing in [
            Filter::scope(scenes(&["qq:owner"])),
            Filter { any_of: vec![] },
            Filter::scope(Scope {
                privacy: vec![Privacy::Secret],
                ..Scope::default()
            }),
        ] {
            assert!(h.knn(&q, &nothing, 10).is_empty());
        }
    }

    #[test]
    fn vectors_come_from_the_copy_as_sqlite_vec_stores_them() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        let mut ids = fill(&h);
        ids.push("no-such-memory".into());
        let of = |model: &str| {
            h.db.with_reader(|c| vectors_of(c, &h.coarse, model, &ids))
                .unwrap()
        };
        let stored = || h.db.with_reader(|c| vector::vectors_of(c, &ids)).unwrap();
        // Before any search the copy is empty: every read goes to SQLite.
        assert_eq!(of("m"), stored());
        assert_eq!(of("m").len(), 40);
        h.knn(&unit(3, DIM), &Filter::all(), 5);
        assert_eq!(h.held().0, 40);
        assert_eq!(of("m"), stored(), "read from the side file");
        // A new vector the copy has not caught up with yet: from SQLite.
        put(
            &h.db,
            &memory("fact-03", "main", Privacy::Normal, None),
            &unit(777, DIM),
        );
        assert_eq!(of("m")["fact-03"], unit(777, DIM));
        assert_eq!(of("m"), stored());
        assert!(of("another model").is_empty());
    }

    #[test]
    fn privacy_changes_forgets_and_new_vectors_are_seen_by_the_next_knn() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        let normal = Filter::scope(Scope {
            privacy: vec![Privacy::Normal],
            ..Scope::default()
        });
        // fact-01 is the nearest normal memory to its own vector.
        let q = unit(1, DIM);
        assert_eq!(h.check(&q, &normal, 3)[0].0, "fact-01");
        put(
            &h.db,
            &memory("fact-01", "pet", Privacy::Sensitive, None),
            &unit(1, DIM),
        );
        let hits = h.check(&q, &normal, 40);
        assert!(hits.iter().all(|(id, _)| id != "fact-01"));
        assert_eq!(h.check(&q, &Filter::all(), 1)[0].0, "fact-01");
        // Forgotten: gone for everyone.
        h.db.write(|t| mtx::forget(t, "fact-01", Utc::now()))
            .unwrap();
        assert!(
            h.check(&q, &Filter::all(), 40)
                .iter()
                .all(|(id, _)| id != "fact-01")
        );
        // Re-embedded with another vector: found by its new one.
        let q2 = unit(999, DIM);
        put(&h.db, &memory("fact-02", "pet", Privacy::Normal, None), &q2);
        let top = h.check(&q2, &normal, 5);
        assert_eq!(top[0].0, "fact-02");
        assert!(top[0].1.abs() < 1e-5);
        assert_eq!(h.held().0, 39);
    }

    #[test]
    fn a_second_handle_catches_up_through_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let writer = Handle::open(&path, true);
        let ids = fill(&writer);
        let reader = Handle::open(&path, false);
        let q = unit(500, DIM);
        reader.check(&q, &Filter::all(), 10);
        let (rows, seq) = reader.held();
        assert_eq!(rows, 40);
        put(
            &writer.db,
            &memory("fact-new", "main", Privacy::Normal, None),
            &q,
        );
        writer
            .db
            .write(|t| mtx::forget(t, &ids[3], Utc::now()))
            .unwrap();
        let top = reader.check(&q, &Filter::all(), 40);
        assert_eq!(top[0].0, "fact-new");
        assert!(top.iter().all(|(id, _)| *id != ids[3]));
        let (rows, seq2) = reader.held();
        assert_eq!(rows, 40);
        assert_eq!(seq2, seq + 2, "one log row per change, applied in place");
        // The log pruned past the reader's position: a full reload.
        for i in 0..3 {
            put(
                &writer.db,
                &memory(&format!("late-{i}"), "work", Privacy::Normal, None),
                &unit(700 + i, DIM),
            );
        }
        writer
            .db
            .write(|t| {
                t.execute("DELETE FROM vector_log WHERE seq <= ?", [seq2 + 1])?;
                Ok(())
            })
            .unwrap();
        reader.check(&q, &Filter::all(), 43);
        assert_eq!(reader.held(), (43, seq2 + 3));
    }

    #[test]
    fn a_rolled_back_store_leaves_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        let q = unit(321, DIM);
        h.check(&q, &Filter::all(), 10);
        let before = h.held();
        let failed = h.db.write(|t| {
            put_in(t, &memory("ghost", "main", Privacy::Normal, None), &q)?;
            vector::delete(t, &["fact-05".to_string()])?;
            Err::<(), _>(Error::Internal("rolled back".into()))
        });
        assert!(failed.is_err());
        let hits = h.check(&q, &Filter::all(), 40);
        assert!(hits.iter().all(|(id, _)| id != "ghost"));
        assert!(hits.iter().any(|(id, _)| id == "fact-05"));
        assert_eq!(h.held(), before);
    }

    #[test]
    fn a_model_change_resets_the_copy() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        h.check(&unit(1, DIM), &Filter::all(), 10);
        assert_eq!(h.held().0, 40);
        // Another model of another dimension: every vector is dropped.
        h.db.write(|t| vector::ensure_model(t, "m2", 8)).unwrap();
        let err =
            h.db.with_reader(|c| knn(c, &h.coarse, "m", &unit(1, DIM), &Filter::all(), 5))
                .unwrap_err();
        assert!(matches!(err, Error::EmbeddingUnavailable(_)));
        h.db.write(|t| {
            let pending = vector::pending(t, 100)?;
            let vs: Vec<Vec<f32>> = (0..pending.len() as u64).map(|i| unit(i, 8)).collect();
            let rows: Vec<(&vector::Pending, &[f32])> = pending
                .iter()
                .zip(&vs)
                .take(5)
                .map(|(p, v)| (p, v.as_slice()))
                .collect();
            vector::store(t, "m2", &rows)
        })
        .unwrap();
        let got =
            h.db.with_reader(|c| knn(c, &h.coarse, "m2", &unit(2, 8), &Filter::all(), 10))
                .unwrap();
        assert_eq!(got, h.exact(&unit(2, 8), &Filter::all(), 10));
        assert_eq!(got.len(), 5);
        let held = h.coarse.read().unwrap();
        assert_eq!((held.len(), held.dim()), (5, 8));
    }

    #[test]
    fn rescoring_drops_candidates_the_filter_hides_or_that_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        let main = Filter::scope(scenes(&["main"]));
        // fact-01 is in pet; "nope" is not stored: neither comes back.
        let got =
            h.db.with_reader(|c| {
                vector::rescore(c, &unit(1, DIM), ["fact-01", "fact-00", "nope"], &main, 10)
            })
            .unwrap();
        assert_eq!(
            got.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(),
            ["fact-00"]
        );
    }

    #[test]
    fn the_safety_net_shows_only_stored_rows_the_filter_admits() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        let ids = fill(&h);
        h.db.write(|t| mtx::forget(t, &ids[3], Utc::now())).unwrap();
        let main = Filter::scope(scenes(&["main"]));
        // fact-01 is in pet, fact-03 is forgotten, "nope" is not stored.
        let shown =
            h.db.with_reader(|c| {
                vector::visible(
                    c,
                    &["fact-00", "fact-01", "fact-03", "fact-06", "nope"],
                    &main,
                )
            })
            .unwrap();
        let mut shown: Vec<_> = shown.into_iter().collect();
        shown.sort();
        assert_eq!(shown, ["fact-00", "fact-06"]);
        // fact-00 expires at 0 ms and fact-05 at 5 s: strictly after the instant.
        let later = Filter::scope(Scope {
            unexpired_at: DateTime::<Utc>::from_timestamp_millis(5_000),
            ..Scope::default()
        });
        let shown =
            h.db.with_reader(|c| vector::visible(c, &["fact-00", "fact-05", "fact-06"], &later))
                .unwrap();
        assert_eq!(shown.into_iter().collect::<Vec<_>>(), ["fact-06"]);
        let none =
            h.db.with_reader(|c| vector::visible(c, &["fact-06"], &Filter { any_of: Vec::new() }));
        assert!(none.unwrap().is_empty());
    }

    #[test]
    fn a_table_of_an_earlier_build_with_the_coarse_column_still_works() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        h.db.write(|t| {
            t.execute_batch(&format!(
                "CREATE VIRTUAL TABLE memory_vectors USING vec0(\
                 id TEXT PRIMARY KEY, \
                 embedding float[{DIM}] distance_metric=cosine, \
                 coarse int8[{DIM}] distance_metric=cosine, \
                 scene TEXT, privacy TEXT, stage TEXT, kind TEXT, subject TEXT, origin TEXT, \
                 expires INTEGER); \
                 INSERT INTO vector_meta (one, model, dim) VALUES (1, 'm', {DIM})"
            ))?;
            Ok(())
        })
        .unwrap();
        fill(&h);
        let main = Filter::scope(scenes(&["main"]));
        for f in [Filter::all(), main] {
            let q = unit(55, DIM);
            let got = h.check(&q, &f, 10);
            // The sqlite-vec path (int8 column + rescoring) agrees too.
            let sql =
                h.db.with_reader(|c| vector::knn_sql(c, &q, &f, 10))
                    .unwrap();
            assert_eq!(got, sql);
        }
        assert_eq!(h.held().0, 40);
    }

    #[test]
    fn a_copy_ahead_of_the_snapshot_declines_to_serve_it() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        h.check(&unit(3, DIM), &Filter::all(), 5);
        let (_, seq) = h.held();
        let model = ("m".to_string(), DIM);
        let mut held = h.coarse.write().unwrap();
        h.db.with_reader(|c| {
            // An older snapshot (log up to seq - 1): served by sqlite-vec instead.
            assert!(!held.catch_up(c, &model, (1, seq - 1))?);
            assert!(held.catch_up(c, &model, (1, seq))?);
            Ok(())
        })
        .unwrap();
        assert_eq!(held.seq, seq);
    }

    #[test]
    fn the_scan_keeps_the_best_rows_ties_by_id() {
        let mut c = CoarseVectors {
            model: Some(("m".into(), 2)),
            ..CoarseVectors::default()
        };
        for (id, v) in [
            ("d", [1.0, 0.0]),
            ("b", [1.0, 0.0]),
            ("c", [1.0, 0.0]),
            ("a", [0.0, 1.0]),
            ("e", [-1.0, 0.0]),
        ] {
            c.upsert(
                2,
                StoredVector {
                    id: id.into(),
                    vector: v.to_vec(),
                    columns: Default::default(),
                    expires: i64::MAX,
                },
            );
        }
        let mut got: Vec<String> = c
            .scan(&[1.0, 0.0], &Filter::all(), 2)
            .iter()
            .map(|s| s.to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["b", "c"]);
        c.remove("b");
        c.remove("e");
        let mut got: Vec<String> = c
            .scan(&[1.0, 0.0], &Filter::all(), 3)
            .iter()
            .map(|s| s.to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["a", "c", "d"]);
        assert_eq!(c.len(), 3);
    }

    // Red-team round 3: the in-process filter against the SQL one on the
    // edges (strict expiry, kinds as free strings in any case, empty and
    // unmatched sets, OR of scopes), an expiry moved in place, and k.

    /// 40 memories of `fill` plus some of other kinds, stages and origins.
    fn fill_mixed(h: &Handle) {
        fill(h);
        for (i, kind) in ["Note", "NOTE", "note ", "todo", "12"].iter().enumerate() {
            let mut m = memory(&format!("kind-{i}"), "main", Privacy::Normal, None);
            m.kind = (*kind).into();
            if i % 2 == 0 {
                m.stage = Stage::Short;
            }
            put(&h.db, &m, &unit(200 + i as u64, DIM));
        }
    }

    #[test]
    fn the_copy_filters_exactly_as_sql_on_the_edges() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill_mixed(&h);
        let at = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms);
        let kinds = |k: &[&str]| Scope {
            kinds: k.iter().map(|s| s.to_string()).collect(),
            ..Scope::default()
        };
        let filters = [
            // Strict: a memory expiring exactly at the instant is hidden.
            Filter::scope(Scope {
                unexpired_at: at(10_000),
                ..Scope::default()
            }),
            Filter::scope(Scope {
                unexpired_at: at(-1),
                ..Scope::default()
            }),
            Filter::scope(Scope {
                unexpired_at: at(0),
                ..Scope::default()
            }),
            // Kinds are free strings compared exactly (case, spaces, digits).
            Filter::scope(kinds(&["note"])),
            Filter::scope(kinds(&["Note", "12"])),
            Filter::scope(kinds(&["NOTE", "absent"])),
            Filter::scope(kinds(&["absent"])),
            // A scope admitting nothing beside one admitting some.
            Filter {
                any_of: vec![kinds(&["absent"]), scenes(&["pet"])],
            },
            Filter::scope(Scope {
                stages: vec![Stage::Short],
                ..kinds(&["Note", "note ", "todo", "note"])
            }),
            Filter::scope(Scope {
                subjects: vec![Subject::Owner],
                origins: vec![Origin::Fact],
                privacy: vec![Privacy::Normal, Privacy::Personal],
                unexpired_at: at(20_000),
                ..scenes(&["main", "work"])
            }),
            Filter {
                any_of: vec![
                    Scope {
                        unexpired_at: at(30_000),
                        ..scenes(&["main"])
                    },
                    Scope {
                        privacy: vec![Privacy::Sensitive],
                        ..Scope::default()
                    },
                ],
            },
        ];
        for q in [3, 201, 204, 500] {
            let q = unit(q, DIM);
            for f in &filters {
                for k in [1, 3, 10, 100] {
                    h.check(&q, f, k);
                }
            }
        }
        assert_eq!(h.held().0, 45, "served by the in-process copy");
    }

    #[test]
    fn an_expiry_moved_in_place_is_followed_by_the_copy() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        let q = unit(5, DIM);
        let after = |ms: i64| {
            Filter::scope(Scope {
                unexpired_at: DateTime::<Utc>::from_timestamp_millis(ms),
                ..Scope::default()
            })
        };
        // fact-05 expires at 5000: hidden at 20000.
        assert!(
            h.check(&q, &after(20_000), 40)
                .iter()
                .all(|(id, _)| id != "fact-05")
        );
        let (_, seq) = h.held();
        // A touch slides it to 50000 (the row and an UPDATE of the vec0 column, logged).
        h.db.write(|t| {
            t.execute(
                "UPDATE memories SET expires_at = 50_000 WHERE id = 'fact-05'",
                [],
            )?;
            crate::index::lifecycle::set_vector_expiry(t, "fact-05", Some(50_000))
        })
        .unwrap();
        let top = h.check(&q, &after(20_000), 5);
        assert_eq!(top[0].0, "fact-05", "the copy holds the new expiry");
        assert_eq!(h.held(), (40, seq + 1), "applied in place from the log");
        // And back before the instant: hidden again, by the copy too.
        h.db.write(|t| {
            t.execute(
                "UPDATE memories SET expires_at = 15_000 WHERE id = 'fact-05'",
                [],
            )?;
            crate::index::lifecycle::set_vector_expiry(t, "fact-05", Some(15_000))
        })
        .unwrap();
        assert!(
            h.check(&q, &after(20_000), 40)
                .iter()
                .all(|(id, _)| id != "fact-05")
        );
        let held = h.coarse.read().unwrap();
        let row = held.rows["fact-05"];
        assert_eq!(held.expires[row], 15_000);
    }

    #[test]
    fn k_of_zero_beyond_the_rows_and_beyond_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        let q = unit(77, DIM);
        assert!(h.knn(&q, &Filter::all(), 0).is_empty());
        assert_eq!(h.check(&q, &Filter::all(), 41).len(), 40);
        assert_eq!(h.check(&q, &Filter::all(), vector::MAX_K + 10).len(), 40);
        let main = Filter::scope(scenes(&["main"]));
        let all_main = h.check(&q, &main, 1_000);
        assert_eq!(all_main.len(), 14);
        // A query of another dimension finds nothing rather than failing.
        assert!(h.knn(&unit(1, DIM + 1), &Filter::all(), 5).is_empty());
    }

    #[test]
    fn a_degenerate_vector_neither_fails_nor_differs_from_exact_knn() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        fill(&h);
        // A zero vector (an embedder's output for a degenerate text): its
        // cosine distance is undefined and SQLite turns the NaN into NULL.
        put(
            &h.db,
            &memory("zero", "main", Privacy::Normal, None),
            &[0.0; DIM],
        );
        let q = unit(9, DIM);
        // Before: SQLite's NULL failed the whole search (rescoring here,
        // sqlite-vec's KNN in the fallback and the reference alike).
        let got = h.knn(&q, &Filter::all(), 10);
        assert_eq!(got, h.exact(&q, &Filter::all(), 10));
        assert_eq!(got.len(), 10);
        assert!(
            got.iter().all(|(id, _)| id != "zero"),
            "unrankable, left out"
        );
        assert_eq!(
            h.db.with_reader(|c| vector::knn_sql(c, &q, &Filter::all(), 10))
                .unwrap(),
            got
        );
        // A zero query ranks nothing, and fails nothing.
        assert!(h.knn(&[0.0; DIM], &Filter::all(), 5).is_empty());
        assert!(h.exact(&[0.0; DIM], &Filter::all(), 5).is_empty());
    }

    /// Red team 3: visibility values longer than sqlite-vec keeps inline (12
    /// bytes) that share their first 12 bytes: every path tells them apart.
    #[test]
    fn long_values_sharing_a_prefix_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        let scenes_of = ["group:family-public", "group:family-secret", "group:fam"];
        for i in 0..30u64 {
            let mut m = memory(
                &format!("fact-{i:02}"),
                scenes_of[i as usize % 3],
                Privacy::Normal,
                None,
            );
            m.kind = ["observation-public", "observation-secret", "obs"][i as usize % 3].into();
            put(&h.db, &m, &unit(i, DIM));
        }
        let kinds = |k: &str| Scope {
            kinds: vec![k.into()],
            ..Scope::default()
        };
        for f in [
            Filter::scope(scenes(&["group:family-public"])),
            Filter::scope(scenes(&["group:family-secret"])),
            Filter::scope(scenes(&["group:family-publicx"])),
            Filter::scope(scenes(&["group:fam"])),
            Filter::scope(kinds("observation-public")),
            Filter::scope(kinds("observation-publi")),
        ] {
            for q in [1, 2, 40] {
                let q = unit(q, DIM);
                let got = h.check(&q, &f, 30);
                let sql =
                    h.db.with_reader(|c| vector::knn_sql(c, &q, &f, 30))
                        .unwrap();
                assert_eq!(got, sql, "{f:?}");
            }
        }
        let public = h.check(
            &unit(1, DIM),
            &Filter::scope(scenes(&["group:family-public"])),
            30,
        );
        assert_eq!(public.len(), 10);
        assert!(public.iter().all(|(id, _)| {
            let n: usize = id[5..].parse().unwrap();
            n.is_multiple_of(3)
        }));
        assert!(
            h.knn(
                &unit(1, DIM),
                &Filter::scope(scenes(&["group:family-publicx"])),
                30
            )
            .is_empty()
        );
    }

    // The 1-bit pass on sets larger than its candidates, where it really
    // chooses: anisotropic, clustered vectors like a text embedder's.

    /// `n` unit vectors of `dim`: a shared direction (mean cosine ≈ 0.7,
    /// like e5), one of six topics, one of `clusters` subtopics and per-row
    /// noise: neighbourhoods at several scales, like a text embedder's.
    fn clustered(n: usize, dim: usize, clusters: usize, seed: u64) -> Vec<Vec<f32>> {
        let common = unit(1_000_000, dim);
        let topics: Vec<Vec<f32>> = (0..6).map(|t| unit(2_000_000 + t, dim)).collect();
        let subs: Vec<Vec<f32>> = (0..clusters as u64)
            .map(|c| unit(3_000_000 + c, dim))
            .collect();
        (0..n as u64)
            .map(|i| {
                let noise = unit(seed * 10_000_000 + i, dim);
                let sub = (i as usize * 7 + seed as usize) % clusters;
                let (topic, sub) = (&topics[sub % 6], &subs[sub]);
                let mut v: Vec<f32> = (0..dim)
                    .map(|j| 0.8 * common[j] + 0.4 * topic[j] + 0.3 * sub[j] + 0.15 * noise[j])
                    .collect();
                let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
                v.iter_mut().for_each(|a| *a /= n);
                v
            })
            .collect()
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (n(a) * n(b))
    }

    #[test]
    fn the_bit_pass_keeps_the_true_neighbours_among_its_candidates() {
        const DIM: usize = 384;
        let rows = clustered(4000, DIM, 200, 1);
        let mut c = CoarseVectors {
            model: Some(("m".into(), DIM)),
            ..CoarseVectors::default()
        };
        let scenes_of = ["main", "pet", "work"];
        c.fill(
            DIM,
            rows.iter().enumerate().map(|(i, v)| StoredVector {
                id: format!("r{i:05}"),
                vector: v.clone(),
                columns: [
                    scenes_of[i % 3].into(),
                    "normal".into(),
                    "long".into(),
                    "note".into(),
                    "owner".into(),
                    "fact".into(),
                ],
                expires: i64::MAX,
            }),
        );
        assert_eq!((c.len(), c.centre_rows), (4000, 4000));
        assert_eq!(c.bits.len(), 4000 * 48, "48 bytes per row of 384");
        let main = Filter::scope(scenes(&["main"]));
        let (mut hit, mut total) = (0, 0);
        for (qi, q) in clustered(30, DIM, 200, 2).iter().enumerate() {
            let f = if qi % 2 == 0 { &Filter::all() } else { &main };
            let only_main = qi % 2 == 1;
            let mut exact: Vec<(f32, usize)> = rows
                .iter()
                .enumerate()
                .filter(|(i, _)| !only_main || i % 3 == 0)
                .map(|(i, v)| (-cosine(q, v), i))
                .collect();
            exact.sort_by(|a, b| a.0.total_cmp(&b.0));
            let got: HashSet<String> = c
                .scan(q, f, vector::candidates(10))
                .iter()
                .map(|s| s.to_string())
                .collect();
            assert_eq!(got.len(), vector::candidates(10));
            if only_main {
                assert!(
                    got.iter()
                        .all(|id| id[1..].parse::<usize>().unwrap() % 3 == 0)
                );
            }
            total += 10;
            hit += exact[..10]
                .iter()
                .filter(|(_, i)| got.contains(&format!("r{i:05}")))
                .count();
        }
        assert!(hit * 100 >= total * 98, "recall@10 {hit}/{total}");
    }

    /// Writes `rows` (memory, vector) in one transaction (`put` one at a time
    /// reads every pending row per memory).
    fn put_many(db: &MetaDb, rows: &[(Memory, Vec<f32>)]) {
        db.write(|t| {
            for (m, _) in rows {
                mtx::upsert_memory(t, m, None, &FactExtras::default())?;
            }
            vector::ensure_model(t, "m", rows[0].1.len())?;
            let by_id: HashMap<&str, &[f32]> = rows
                .iter()
                .map(|(m, v)| (m.id.as_str(), v.as_slice()))
                .collect();
            let pending = vector::pending(t, usize::MAX >> 1)?;
            let rows: Vec<(&vector::Pending, &[f32])> = pending
                .iter()
                .filter_map(|p| by_id.get(p.id.as_str()).map(|v| (p, *v)))
                .collect();
            vector::store(t, "m", &rows)
        })
        .unwrap();
    }

    #[test]
    fn knn_over_the_bit_pass_matches_exact_knn_and_follows_deletions() {
        const DIM: usize = 64;
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        let vs = clustered(1500, DIM, 80, 3);
        let rows: Vec<(Memory, Vec<f32>)> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let scene = ["main", "pet", "work", "main", "pet"][i % 5];
                let privacy = if i % 7 == 0 {
                    Privacy::Sensitive
                } else {
                    Privacy::Normal
                };
                (memory(&format!("m{i:04}"), scene, privacy, None), v.clone())
            })
            .collect();
        put_many(&h.db, &rows);
        let two = Filter::scope(Scope {
            privacy: vec![Privacy::Normal],
            ..scenes(&["main", "pet"])
        });
        let queries = clustered(12, DIM, 80, 4);
        let (mut hit, mut total) = (0, 0);
        for q in &queries {
            for f in [&Filter::all(), &two] {
                let got = h.knn(q, f, 10);
                let exact = h.exact(q, f, 10);
                assert_eq!(got.len(), 10);
                // Whatever it returns carries its exact distance.
                for (id, d) in &got {
                    if let Some(e) = exact.iter().find(|e| &e.0 == id) {
                        assert!((e.1 - d).abs() < 1e-6);
                    }
                }
                total += 10;
                hit += got.iter().filter(|g| exact.contains(g)).count();
            }
        }
        assert!(hit * 100 >= total * 98, "recall@10 {hit}/{total}");
        assert_eq!(h.held().0, 1500, "served by the in-process copy");
        // Forget the five nearest of the first query: the copy follows, and
        // the next five come up.
        let q = &queries[0];
        let before = h.exact(q, &Filter::all(), 10);
        h.db.write(|t| {
            for (id, _) in &before[..5] {
                mtx::forget(t, id, Utc::now())?;
            }
            Ok(())
        })
        .unwrap();
        let got = h.knn(q, &Filter::all(), 10);
        assert!(got.iter().all(|g| !before[..5].contains(g)));
        assert_eq!(got[..5], before[5..]);
        assert_eq!(h.held().0, 1495);
    }

    #[test]
    fn a_copy_grown_from_a_small_table_is_centred_again() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        let vs = clustered(300, DIM, 20, 5);
        let rows: Vec<(Memory, Vec<f32>)> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| {
                (
                    memory(&format!("g{i:03}"), "main", Privacy::Normal, None),
                    v.clone(),
                )
            })
            .collect();
        put_many(&h.db, &rows[..10]);
        h.check(&vs[0], &Filter::all(), 5);
        assert_eq!(h.coarse.read().unwrap().centre_rows, 10);
        // 100 more through the log: applied in place, the centre kept.
        put_many(&h.db, &rows[10..110]);
        h.check(&vs[1], &Filter::all(), 5);
        assert_eq!(h.coarse.read().unwrap().centre_rows, 10);
        // Past twice 64 rows: reloaded, centred on all of them.
        put_many(&h.db, &rows[110..]);
        h.check(&vs[2], &Filter::all(), 5);
        let held = h.coarse.read().unwrap();
        assert_eq!((held.len(), held.centre_rows), (300, 300));
        let mean: Vec<f32> = (0..DIM)
            .map(|j| vs.iter().map(|v| v[j]).sum::<f32>() / 300.0)
            .collect();
        assert!(
            held.centre
                .iter()
                .zip(&mean)
                .all(|(a, b)| (a - b).abs() < 1e-5)
        );
    }

    #[test]
    fn the_side_file_is_made_in_the_index_directory_and_unlinked() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let file = side_file(Some(dir.path())).unwrap();
        let target = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        let target = target.to_string_lossy();
        assert!(
            target.starts_with(&*dir.path().to_string_lossy()),
            "{target}"
        );
        assert!(target.ends_with("(deleted)"), "{target}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A directory it cannot be made in: the system temp directory serves.
        assert!(side_file(Some(&dir.path().join("missing"))).is_ok());
    }

    #[test]
    fn the_side_file_of_float_copies_follows_updates_and_removals() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handle::open(&dir.path().join("m.db"), true);
        let ids = fill(&h);
        h.check(&unit(1, DIM), &Filter::all(), 5);
        // Forgotten (a swap with the last row), re-embedded in place, added.
        h.db.write(|t| {
            mtx::forget(t, &ids[3], Utc::now())?;
            mtx::forget(t, &ids[17], Utc::now())?;
            Ok(())
        })
        .unwrap();
        put(
            &h.db,
            &memory(&ids[5], "pet", Privacy::Normal, None),
            &unit(900, DIM),
        );
        put(
            &h.db,
            &memory("extra", "main", Privacy::Normal, None),
            &unit(901, DIM),
        );
        h.check(&unit(2, DIM), &Filter::all(), 5);
        let held = h.coarse.read().unwrap();
        assert!(held.side.is_some());
        assert_eq!(held.len(), 39);
        for (row, id) in held.ids.iter().enumerate() {
            let stored =
                h.db.with_reader(|c| vector::stored(c, id))
                    .unwrap()
                    .unwrap();
            let want: Vec<u8> = stored.vector.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(held.side_read(row, DIM), Some(want), "{id}");
        }
    }
}
