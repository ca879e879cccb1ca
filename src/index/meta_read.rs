//! Time-ordered reads of the metadata store: recent memories, timeline pages,
//! live chat, supersede links, the versions of a memory, expired matches,
//! forgotten facts and the list of documents.
//!
//! Like every read of [`MetaDb`], each query takes a [`Filter`] that becomes
//! part of its SQL `WHERE`, so rows the caller may not see are never loaded.
//! Forgotten facts are never returned, and neither are superseded ones unless
//! the read asks for history ([`Latest::history`], the timeline only): one
//! rule for every list, block and disclosure built on [`MetaDb::latest`].

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use rusqlite::params_from_iter;

use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::index::meta::{MEMORY_COLUMNS, MetaDb, filter_sql, filter_sql_on_rows, row_to_memory};
use crate::lifecycle::Warning;
use crate::model::{Memory, Tier};

/// Which slice of the newest-first order to read.
#[derive(Debug, Clone, Default)]
pub struct Latest {
    /// At most this many rows.
    pub(crate) limit: usize,
    /// Only rows strictly before this `(ts, id)` position (a paging cursor).
    pub(crate) before: Option<(DateTime<Utc>, String)>,
    /// Only rows written at or after this instant.
    pub(crate) since: Option<DateTime<Utc>>,
    /// Also superseded rows: the history view (timeline), where a memory and
    /// what replaced it are shown side by side. Every other list leaves it off.
    pub history: bool,
    /// Only rows of this retention tier.
    pub(crate) tier: Option<Tier>,
    /// Only rows expiring after the first instant and at or before the second.
    pub(crate) expires_within: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// Only rows that expired at or before this instant (the archive).
    pub(crate) expired_at: Option<DateTime<Utc>>,
    /// Only rows inside their warning window
    /// ([`crate::lifecycle::expiring_soon`] for each row).
    pub(crate) warning: Option<Warning>,
}

/// The SQL of [`Latest::warning`]: a tier that expires by its tier's
/// window, any other row by a share of `expires_at - ts`, capped.
fn warning_sql(w: &Warning) -> (String, Vec<String>) {
    let now = w.now.timestamp_millis().to_string();
    let mut params = vec![now.clone()];
    let mut sql = String::from(" AND expires_at > ? AND (");
    let mut tiers = Vec::new();
    for (tier, window) in &w.tiers {
        sql.push_str("(tier = ? AND expires_at <= ?) OR ");
        params.push(tier.as_str().to_string());
        params.push((w.now + *window).timestamp_millis().to_string());
        tiers.push(format!("'{}'", tier.as_str()));
    }
    let others = if tiers.is_empty() {
        String::new()
    } else {
        format!("COALESCE(tier, '') NOT IN ({}) AND ", tiers.join(","))
    };
    sql.push_str(&format!(
        "({others}{} * (expires_at - ?) <= expires_at - ts AND expires_at <= ?))",
        w.share()
    ));
    params.push(now);
    params.push((w.now + w.cap).timestamp_millis().to_string());
    (sql, params)
}

impl MetaDb {
    /// Visible memories, newest first (ties by id, descending).
    pub fn latest(&self, filter: &Filter, q: &Latest) -> Result<Vec<Memory>> {
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        let (where_sql, mut params) = filter_sql(filter);
        let mut sql = format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE forgotten_at IS NULL AND {where_sql}"
        );
        if !q.history {
            sql.push_str(" AND superseded_by IS NULL");
        }
        if let Some((ts, id)) = &q.before {
            let millis = ts.timestamp_millis().to_string();
            sql.push_str(" AND (ts < ? OR (ts = ? AND id < ?))");
            params.extend([millis.clone(), millis, id.clone()]);
        }
        if let Some(since) = q.since {
            sql.push_str(" AND ts >= ?");
            params.push(since.timestamp_millis().to_string());
        }
        if let Some(tier) = q.tier {
            sql.push_str(" AND tier = ?");
            params.push(tier.as_str().to_string());
        }
        if let Some((after, until)) = q.expires_within {
            sql.push_str(" AND expires_at > ? AND expires_at <= ?");
            params.push(after.timestamp_millis().to_string());
            params.push(until.timestamp_millis().to_string());
        }
        if let Some(at) = q.expired_at {
            sql.push_str(" AND expires_at IS NOT NULL AND expires_at <= ?");
            params.push(at.timestamp_millis().to_string());
        }
        if let Some(w) = &q.warning {
            let (cond, more) = warning_sql(w);
            sql.push_str(&cond);
            params.extend(more);
        }
        // LIMIT needs an integer, not bound text; the value is ours, not the caller's string.
        sql.push_str(&format!(" ORDER BY ts DESC, id DESC LIMIT {}", q.limit));
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(params.iter()), row_to_memory)?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// Searchable memories per scene among those visible under `filter`
    /// (forgotten and superseded ones left out).
    pub(crate) fn scene_counts(&self, filter: &Filter) -> Result<HashMap<String, u64>> {
        let (where_sql, params) = filter_sql(filter);
        let sql = format!(
            "SELECT scene, COUNT(*) FROM memories WHERE forgotten_at IS NULL \
             AND superseded_by IS NULL AND {where_sql} GROUP BY scene"
        );
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(params.iter()), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })?;
            let mut out = HashMap::new();
            for row in rows {
                let (scene, n) = row?;
                out.insert(scene, u64::try_from(n).unwrap_or(0));
            }
            Ok(out)
        })
    }

    /// For each of `ids`, the visible memories that name it in `supersedes`.
    pub(crate) fn superseded_by(
        &self,
        ids: &[String],
        filter: &Filter,
    ) -> Result<HashMap<String, Vec<String>>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let (where_sql, params) = filter_sql_on_rows(filter);
        let marks = vec!["?"; ids.len()].join(",");
        let sql = format!(
            "SELECT supersedes, id FROM memories WHERE forgotten_at IS NULL \
             AND supersedes IN ({marks}) AND {where_sql} ORDER BY ts, id"
        );
        let mut all: Vec<String> = ids.to_vec();
        all.extend(params);
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(all.iter()), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?;
            let mut out: HashMap<String, Vec<String>> = HashMap::new();
            for row in rows {
                let (old, new) = row?;
                out.entry(old).or_default().push(new);
            }
            Ok(out)
        })
    }
}

/// A fact of [`MetaDb::long_facts_between`]: `(id, scene, subject, text, ts in ms)`.
pub(crate) type DayFact = (String, String, String, String, i64);

/// A fact a new one is compared with ([`MetaDb::conflict_candidates`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    /// Its id.
    pub(crate) id: String,
    /// Its time, in ms.
    pub(crate) ts: i64,
    /// Its content hash ([`crate::lifecycle::content_hash`]; none in a row
    /// indexed before there was one).
    pub(crate) hash: Option<String>,
    /// Its text, when read.
    pub(crate) text: Option<String>,
}

/// A live `conflicts_with` link between two live, current facts (neither
/// forgotten nor superseded), before any caller's filter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConflictRow {
    /// The older fact (by `(ts, id)`).
    pub(crate) older: String,
    /// The newer fact.
    pub(crate) newer: String,
    /// Why they were linked.
    pub(crate) reason: Option<String>,
}

impl MetaDb {
    /// The live conflict links with either side among `ids`, both sides
    /// live and current (a forget or a supersede ends a link's effect). No
    /// filter: the caller checks the other side against its own.
    pub(crate) fn conflict_links(&self, ids: &[String]) -> Result<Vec<ConflictRow>> {
        if ids.is_empty() || !self.may_hold_links() {
            return Ok(Vec::new());
        }
        // One cached statement per end, probed once per id: an `IN` list
        // over either end (`OR`) made SQLite build temporary tables for
        // the lists, the union and the order on every search, to find
        // nothing most of the time. Keyed by (a, b): a link between two
        // of `ids` is found from both ends, and the rows come in that order.
        let mut found: BTreeMap<(String, String), ConflictRow> = BTreeMap::new();
        self.with_reader(|c| {
            // One read transaction for every probe: each statement would
            // otherwise take and release the log's read lock by itself.
            let tx = c.unchecked_transaction()?;
            for end in ["a", "b"] {
                let mut stmt = c.prepare_cached(&format!(
                    "SELECT l.a, l.b, l.reason, x.ts, y.ts FROM links l \
                     JOIN memories x ON x.id = l.a JOIN memories y ON y.id = l.b \
                     WHERE l.{end} = ? AND l.rel = 'conflicts_with' AND l.live = 1 \
                     AND x.forgotten_at IS NULL AND y.forgotten_at IS NULL \
                     AND x.superseded_by IS NULL AND y.superseded_by IS NULL"
                ))?;
                for id in ids {
                    let mut rows = stmt.query([id])?;
                    while let Some(r) = rows.next()? {
                        let (a, b): (String, String) = (r.get(0)?, r.get(1)?);
                        let (ta, tb): (i64, i64) = (r.get(3)?, r.get(4)?);
                        let reason: Option<String> = r.get(2)?;
                        found.entry((a.clone(), b.clone())).or_insert_with(|| {
                            let (older, newer) = if (ta, &a) <= (tb, &b) { (a, b) } else { (b, a) };
                            ConflictRow {
                                older,
                                newer,
                                reason,
                            }
                        });
                    }
                }
            }
            tx.commit()?;
            Ok(())
        })?;
        Ok(found.into_values().collect())
    }

    /// The newest live, current long-term facts of `scene` and `subject`
    /// other than `id` (at most `limit`): the memories a new one is compared
    /// with, read from their index (`memories_conflict_candidates`) alone;
    /// the text of one is read only when `kept` (given its id and content
    /// hash) says the caller does not hold it already. One read
    /// transaction: a text is the one its hash was read with.
    pub(crate) fn conflict_candidates(
        &self,
        scene: &str,
        subject: &str,
        id: &str,
        limit: usize,
        kept: &dyn Fn(&str, Option<&str>) -> bool,
    ) -> Result<Vec<Candidate>> {
        self.with_reader(|c| {
            let tx = c.unchecked_transaction()?;
            let mut stmt = c.prepare_cached(
                "SELECT id, ts, content_hash FROM memories WHERE scene = ?1 AND origin = 'fact' \
                 AND stage = 'long' AND subject = ?2 AND id != ?3 AND forgotten_at IS NULL \
                 AND superseded_by IS NULL ORDER BY ts DESC, id DESC LIMIT ?4",
            )?;
            let rows =
                stmt.query_map(rusqlite::params![scene, subject, id, limit as i64], |r| {
                    Ok(Candidate {
                        id: r.get(0)?,
                        ts: r.get(1)?,
                        hash: r.get(2)?,
                        text: None,
                    })
                })?;
            let mut out = rows.collect::<rusqlite::Result<Vec<Candidate>>>()?;
            let mut text = c.prepare_cached("SELECT text FROM memories WHERE id = ?")?;
            for cand in out.iter_mut().filter(|x| !kept(&x.id, x.hash.as_deref())) {
                cand.text = Some(text.query_row([&cand.id], |r| r.get(0))?);
            }
            drop((stmt, text));
            tx.commit()?;
            Ok(out)
        })
    }

    /// The live, current long-term facts written in `[from, to)` (at most
    /// `limit`, oldest first), as `(id, scene, subject, text, ts in ms)`: the day's
    /// memories consolidation compares.
    pub(crate) fn long_facts_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<DayFact>> {
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, scene, subject, text, ts FROM memories WHERE origin = 'fact' \
                 AND stage = 'long' AND ts >= ?1 AND ts < ?2 AND forgotten_at IS NULL \
                 AND superseded_by IS NULL ORDER BY ts, id LIMIT ?3",
            )?;
            let rows = stmt.query_map(
                rusqlite::params![from.timestamp_millis(), to.timestamp_millis(), limit as i64],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// The conflict link between `x` and `y` (either order), if one was
    /// ever written.
    pub(crate) fn link_between(&self, x: &str, y: &str) -> Result<Option<LinkState>> {
        use rusqlite::OptionalExtension;
        self.with_reader(|c| {
            Ok(c.prepare_cached(
                "SELECT a, b, live, at FROM links WHERE rel = 'conflicts_with' \
                 AND ((a = ?1 AND b = ?2) OR (a = ?2 AND b = ?1))",
            )?
            .query_row([x, y], |r| {
                Ok(LinkState {
                    a: r.get(0)?,
                    b: r.get(1)?,
                    live: r.get(2)?,
                    at: r.get(3)?,
                })
            })
            .optional()?)
        })
    }
}

/// A conflict link as the index holds it: the pair as written, whether it
/// is live, and the time (ms) of the line that decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LinkState {
    pub(crate) a: String,
    pub(crate) b: String,
    pub(crate) live: bool,
    pub(crate) at: i64,
}

/// One fact's place in its line of versions (see [`crate::index::lifecycle`]).
#[derive(Debug, Clone)]
pub(crate) struct VersionRow {
    /// The fact as stored (forgotten or not).
    pub(crate) memory: Memory,
    /// Whether it is forgotten.
    pub(crate) forgotten: bool,
    /// The version that replaces it, if it is an older version.
    pub(crate) superseded_by: Option<String>,
}

/// Most versions followed from one fact to the newest of its line (a guard
/// against a cycle that no writer makes but a hand-edited journal could).
const MAX_LINE: usize = 10_000;

impl MetaDb {
    /// Fact `id` visible under `filter`, forgotten or not, with its version
    /// state. The filter is part of the `WHERE`.
    pub(crate) fn version_row(&self, id: &str, filter: &Filter) -> Result<Option<VersionRow>> {
        use rusqlite::OptionalExtension;
        let (where_sql, params) = filter_sql_on_rows(filter);
        let sql = format!(
            "SELECT {MEMORY_COLUMNS}, forgotten_at IS NOT NULL, superseded_by FROM memories \
             WHERE id = ? AND origin = 'fact' AND {where_sql}"
        );
        let mut all = vec![id.to_string()];
        all.extend(params);
        let n = MEMORY_COLUMNS.split(',').count();
        self.with_reader(|c| {
            Ok(c.prepare_cached(&sql)?
                .query_row(params_from_iter(all.iter()), |r| {
                    Ok(VersionRow {
                        memory: row_to_memory(r)?,
                        forgotten: r.get(n)?,
                        superseded_by: r.get(n + 1)?,
                    })
                })
                .optional()?)
        })
    }

    /// The supersede mark of each of `ids` that has one (no filter: the
    /// caller decides what of it to show).
    pub(crate) fn supersede_marks(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let marks = vec!["?"; ids.len()].join(",");
        let sql = format!(
            "SELECT id, superseded_by FROM memories WHERE id IN ({marks}) \
             AND superseded_by IS NOT NULL"
        );
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(ids.iter()), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// The newest version of `id`'s line: follows the supersede marks from
    /// `id` (forgotten versions included) to the version nothing replaces.
    pub(crate) fn head_of(&self, id: &str) -> Result<String> {
        use rusqlite::OptionalExtension;
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached("SELECT superseded_by FROM memories WHERE id = ?")?;
            let mut head = id.to_string();
            for _ in 0..MAX_LINE {
                let next: Option<String> =
                    stmt.query_row([&head], |r| r.get(0)).optional()?.flatten();
                match next {
                    Some(n) if n != head => head = n,
                    _ => break,
                }
            }
            Ok(head)
        })
    }

    /// Whether a fact that is not forgotten comes after `id` in its line:
    /// any fact reached from it through `supersedes` links, forks included.
    pub(crate) fn has_live_successor(&self, id: &str) -> Result<bool> {
        self.with_reader(|c| {
            Ok(c.prepare_cached(
                "WITH RECURSIVE later(id) AS ( \
                   SELECT id FROM memories WHERE supersedes = ?1 AND origin = 'fact' \
                   UNION SELECT m.id FROM memories m JOIN later l ON m.supersedes = l.id \
                   WHERE m.origin = 'fact') \
                 SELECT 1 FROM memories WHERE id IN (SELECT id FROM later) \
                 AND forgotten_at IS NULL LIMIT 1",
            )?
            .exists([id])?)
        })
    }

    /// The columns of a fact that are not part of [`Memory`], if the fact is known.
    pub(crate) fn fact_extras(&self, id: &str) -> Result<Option<crate::index::meta::FactExtras>> {
        use rusqlite::OptionalExtension;
        self.with_reader(|c| {
            Ok(c.query_row(
                "SELECT source_message_id, idempotency_key, device, accesses FROM memories \
                 WHERE id = ? AND origin = 'fact'",
                [id],
                |r| {
                    Ok(crate::index::meta::FactExtras {
                        source_message_id: r.get(0)?,
                        idempotency_key: r.get(1)?,
                        device: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        journal: None,
                        content_hash: None,
                        accesses: u32::try_from(r.get::<_, i64>(3)?).unwrap_or(u32::MAX),
                    })
                },
            )
            .optional()?)
        })
    }
}

/// One forgotten fact: the fact as it was and when it was forgotten.
#[derive(Debug, Clone)]
pub(crate) struct ForgottenRow {
    /// The fact.
    pub(crate) memory: Memory,
    /// When it was forgotten.
    pub(crate) forgotten_at: DateTime<Utc>,
}

/// One document of a list: its first chunk and its number of chunks.
#[derive(Debug, Clone)]
pub(crate) struct DocumentListRow {
    /// The first chunk (document id, path, scene, privacy, tags, time).
    pub(crate) first: Memory,
    /// The document's title as indexed.
    pub(crate) title: Option<String>,
    /// Indexed chunks.
    pub(crate) chunks: usize,
}

impl MetaDb {
    /// Forgotten facts visible under `filter`, the most recently forgotten
    /// first, strictly before the `(forgotten_at, id)` cursor if given.
    pub(crate) fn forgotten(
        &self,
        filter: &Filter,
        before: Option<&(DateTime<Utc>, String)>,
        limit: usize,
    ) -> Result<Vec<ForgottenRow>> {
        let (where_sql, mut params) = filter_sql(filter);
        let mut sql = format!(
            "SELECT {MEMORY_COLUMNS}, forgotten_at FROM memories \
             WHERE origin = 'fact' AND forgotten_at IS NOT NULL AND {where_sql}"
        );
        if let Some((at, id)) = before {
            let millis = at.timestamp_millis().to_string();
            sql.push_str(" AND (forgotten_at < ? OR (forgotten_at = ? AND id < ?))");
            params.extend([millis.clone(), millis, id.clone()]);
        }
        sql.push_str(&format!(
            " ORDER BY forgotten_at DESC, id DESC LIMIT {limit}"
        ));
        let n = MEMORY_COLUMNS.split(',').count();
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(params.iter()), |r| {
                Ok(ForgottenRow {
                    memory: row_to_memory(r)?,
                    forgotten_at: DateTime::from_timestamp_millis(r.get(n)?).unwrap_or_default(),
                })
            })?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }

    /// The bookkeeping row of document `doc_id`, if it is indexed (no
    /// filter: the caller has checked that it may read the document).
    pub(crate) fn document_row(
        &self,
        doc_id: &str,
    ) -> Result<Option<crate::index::meta::DocumentRow>> {
        use rusqlite::OptionalExtension;
        self.with_reader(|c| {
            Ok(c.prepare_cached(
                "SELECT doc_id, path, hash, title, chunks FROM documents WHERE doc_id = ?",
            )?
            .query_row([doc_id], |r| {
                Ok(crate::index::meta::DocumentRow {
                    doc_id: r.get(0)?,
                    path: r.get(1)?,
                    hash: r.get(2)?,
                    title: r.get(3)?,
                    chunks: usize::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
                })
            })
            .optional()?)
        })
    }

    /// Documents with a chunk visible under `filter`, by path, strictly
    /// after `after` if given. A document's chunks share its scene and
    /// privacy, so a document is visible whole or not at all.
    pub(crate) fn document_list(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DocumentListRow>> {
        let (where_sql, mut params) = filter_sql(filter);
        let mut sql = format!(
            "SELECT {MEMORY_COLUMNS}, \
             (SELECT d.title FROM documents d WHERE d.doc_id = memories.doc_id), \
             (SELECT COUNT(*) FROM memories c WHERE c.doc_id = memories.doc_id) \
             FROM memories WHERE origin = 'doc' AND ord = 0 AND forgotten_at IS NULL AND {where_sql}"
        );
        if let Some(after) = after {
            sql.push_str(" AND path > ?");
            params.push(after.to_string());
        }
        sql.push_str(&format!(" ORDER BY path LIMIT {limit}"));
        let n = MEMORY_COLUMNS.split(',').count();
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(params.iter()), |r| {
                Ok(DocumentListRow {
                    first: row_to_memory(r)?,
                    title: r.get(n)?,
                    chunks: usize::try_from(r.get::<_, i64>(n + 1)?).unwrap_or(0),
                })
            })?;
            rows.map(|r| r.map_err(Error::from)).collect()
        })
    }
}

/// Expired, not forgotten facts visible under `filter` whose text or title
/// contains `query`, newest first. The filter is part of the `WHERE`.
pub(crate) fn expired_matching(
    conn: &rusqlite::Connection,
    query: &str,
    now: DateTime<Utc>,
    limit: usize,
    filter: &Filter,
) -> Result<Vec<Memory>> {
    let (visible, visible_params) = filter_sql(filter);
    let pattern = format!(
        "%{}%",
        query
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    let sql = format!(
        "SELECT {} FROM memories WHERE origin = 'fact' AND forgotten_at IS NULL \
         AND expires_at IS NOT NULL AND expires_at <= ? \
         AND (text LIKE ? ESCAPE '\\' OR title LIKE ? ESCAPE '\\') AND {visible} \
         ORDER BY ts DESC, id LIMIT ?",
        MEMORY_COLUMNS
    );
    let mut values: Vec<rusqlite::types::Value> = vec![
        now.timestamp_millis().into(),
        pattern.clone().into(),
        pattern.into(),
    ];
    values.extend(visible_params.into_iter().map(rusqlite::types::Value::from));
    values.push((limit as i64).into());
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(values), row_to_memory)?;
    rows.map(|r| r.map_err(Into::into)).collect()
}
