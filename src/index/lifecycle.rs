//! Lifecycle state in the index: supersede marks, access counts and the
//! content hash used for dedup.
//!
//! - A fact named in another fact's `supersedes` is *superseded*: its row
//!   keeps `superseded_by`, and in tantivy and vec0 its expiry is the epoch,
//!   so every search (which always carries an expiry bound) skips it inside
//!   the query, while `get` and the timeline (SQL) still show it. The mark is
//!   derived from the rows that name the fact (`SUCCESSOR`), so replaying
//!   the journal in any batching gives the same marks.
//! - Versions form a line, and forgetting a newer version never brings an
//!   older one back: a successor counts whether or not it is forgotten. The
//!   one exception is an explicit restore: a `put` of the older fact written
//!   after its successor was forgotten (its `put_at` is later than the
//!   successor's `forgotten_at`) makes it current again. Nothing but a
//!   restore writes such a line: edits of an older version are refused by
//!   the writer.
//! - A `touch` record counts one access per id and slides its expiry
//!   ([`crate::lifecycle::LifecycleConfig::touch`]). It is idempotent: a row
//!   remembers the time of the last touch applied (`last_access`) and older or
//!   equal touches are skipped, so a catch-up that replays lines twice
//!   changes nothing. A later `put` of the same id carries the access count in
//!   the fact and resets the row.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Result;
use crate::lifecycle::{LifecycleConfig, TouchState};
use crate::model::{Memory, Stage, Tier};

/// The condition on a row `s` that makes it a successor counted in the
/// supersede mark of the fact whose id is bound as `?1`: it names that fact
/// in `supersedes`, and it is live, or was forgotten no earlier than that
/// fact's own newest `put` (a restore written after the forget does not
/// count it).
pub(crate) const SUCCESSOR: &str = "s.supersedes = ?1 AND s.origin = 'fact' \
     AND (s.forgotten_at IS NULL OR s.forgotten_at >= \
     (SELECT COALESCE(o.put_at, o.ts) FROM memories o WHERE o.id = ?1))";

/// The searchable expiry of a superseded memory.
pub(crate) fn superseded_expiry() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

/// The memory as tantivy and vec0 should see it.
pub(crate) fn effective(m: &Memory, superseded: bool) -> Memory {
    let mut m = m.clone();
    if superseded {
        m.expires_at = Some(superseded_expiry());
    }
    m
}

/// After a fact row was (re)written: recomputes its own supersede mark and, if
/// it supersedes another fact, marks that one (whose vector is re-stored).
pub(crate) fn after_upsert(tx: &Transaction<'_>, m: &Memory) -> Result<()> {
    tx.prepare_cached(&format!(
        "UPDATE memories SET superseded_by = (SELECT s.id FROM memories s \
         WHERE {SUCCESSOR} ORDER BY s.ts, s.id LIMIT 1) WHERE id = ?1"
    ))?
    .execute([&m.id])?;
    if let Some(old) = &m.supersedes {
        let n = tx
            .prepare_cached(
                "UPDATE memories SET superseded_by = ?, vector_model = NULL \
                 WHERE id = ? AND superseded_by IS NULL AND origin = 'fact'",
            )?
            .execute(params![m.id, old])?;
        if n > 0 {
            crate::index::vector::delete(tx, std::slice::from_ref(old))?;
        }
    }
    Ok(())
}

/// Whether some fact applied so far supersedes `id` (`SUCCESSOR`).
pub(crate) fn is_superseded(conn: &rusqlite::Connection, id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT 1 FROM memories s WHERE {SUCCESSOR} LIMIT 1"
        ))?
        .exists([id])?)
}

/// Applies one access at `at` to each of `ids`. Returns the ids tantivy must
/// refresh from their rows (changed now or by an earlier replay of this line).
pub fn touch(
    tx: &Transaction<'_>,
    ids: &[String],
    at: DateTime<Utc>,
    cfg: &LifecycleConfig,
) -> Result<Vec<String>> {
    let at_ms = at.timestamp_millis();
    let mut changed = Vec::new();
    for id in ids {
        let row = tx
            .prepare_cached(
                "SELECT stage, tier, accesses, expires_at, last_access FROM memories \
                 WHERE id = ? AND origin = 'fact' AND forgotten_at IS NULL",
            )?
            .query_row([id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                ))
            })
            .optional()?;
        let Some((stage, tier, accesses, expires, last)) = row else {
            continue;
        };
        if stage != Stage::Long.as_str() {
            continue;
        }
        if last.is_some_and(|l| l >= at_ms) {
            // Already applied (a catch-up replaying lines); tantivy may not
            // have committed it, so it is refreshed from this row anyway.
            changed.push(id.clone());
            continue;
        }
        let Some(tier) = tier.and_then(|t| t.parse::<Tier>().ok()) else {
            continue;
        };
        let next = cfg.touch(
            TouchState {
                tier,
                accesses: u32::try_from(accesses).unwrap_or(u32::MAX),
                expires_at: expires.and_then(DateTime::<Utc>::from_timestamp_millis),
            },
            at,
        );
        let new_expires = next.expires_at.map(|t| t.timestamp_millis());
        tx.prepare_cached(
            "UPDATE memories SET tier = ?, accesses = ?, expires_at = ?, last_access = ? WHERE id = ?",
        )?
        .execute(params![
            next.tier.as_str(),
            i64::from(next.accesses),
            new_expires,
            at_ms,
            id
        ])?;
        if new_expires != expires {
            set_vector_expiry(tx, id, new_expires)?;
        }
        changed.push(id.clone());
    }
    Ok(changed)
}

/// Moves a stored vector's expiry (its vec0 metadata column); if the table
/// refuses the update, the vector is dropped and re-stored by the next sync.
pub(crate) fn set_vector_expiry(
    tx: &Transaction<'_>,
    id: &str,
    expires: Option<i64>,
) -> Result<()> {
    let superseded: bool = tx
        .prepare_cached("SELECT superseded_by IS NOT NULL FROM memories WHERE id = ?")?
        .query_row([id], |r| r.get(0))?;
    let value = if superseded {
        superseded_expiry().timestamp_millis()
    } else {
        expires.unwrap_or(i64::MAX)
    };
    let exists: bool = tx
        .prepare_cached("SELECT 1 FROM sqlite_master WHERE name = 'memory_vectors'")?
        .exists([])?;
    if !exists {
        return Ok(());
    }
    if crate::index::vector::set_expires(tx, id, value).is_err() {
        crate::index::vector::delete(tx, &[id.to_string()])?;
        tx.execute("UPDATE memories SET vector_model = NULL WHERE id = ?", [id])?;
    }
    Ok(())
}

/// Clears the expiry of every long-term fact row that has one (used when
/// `lifecycle.tierExpiry` is off, for rows indexed by builds that expired
/// tiers by default). Returns the ids changed; tantivy must follow.
pub(crate) fn clear_long_term_expiry(tx: &Transaction<'_>) -> Result<Vec<String>> {
    let ids: Vec<String> = tx
        .prepare_cached(
            "SELECT id FROM memories WHERE origin = 'fact' AND stage = 'long' \
             AND expires_at IS NOT NULL",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for id in &ids {
        tx.prepare_cached("UPDATE memories SET expires_at = NULL WHERE id = ?")?
            .execute([id])?;
        set_vector_expiry(tx, id, None)?;
    }
    Ok(ids)
}

/// The active, unexpired fact with this content hash, if any.
pub(crate) fn find_by_content(
    conn: &rusqlite::Connection,
    hash: &str,
    now: DateTime<Utc>,
) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT id FROM memories WHERE content_hash = ? AND origin = 'fact' \
             AND forgotten_at IS NULL AND superseded_by IS NULL \
             AND (expires_at IS NULL OR expires_at > ?) ORDER BY ts, id LIMIT 1",
        )?
        .query_row(params![hash, now.timestamp_millis()], |r| r.get(0))
        .optional()?)
}

/// Active long-term facts per tier: `(tier, total, unexpired at now, inside
/// the tier's warning window)`.
pub(crate) fn tier_counts(
    conn: &rusqlite::Connection,
    warning: &crate::lifecycle::Warning,
) -> Result<Vec<(String, u64, u64, u64)>> {
    let now = warning.now.timestamp_millis();
    // The end of each tier's window; a tier without a lifetime has none (`now`).
    let soon = |tier: Tier| {
        warning
            .tiers
            .iter()
            .find(|(t, _)| *t == tier)
            .map_or(now, |(_, w)| (warning.now + *w).timestamp_millis())
    };
    let mut stmt = conn.prepare_cached(
        "SELECT tier, COUNT(*), \
         SUM(CASE WHEN expires_at IS NULL OR expires_at > ?1 THEN 1 ELSE 0 END), \
         SUM(CASE WHEN expires_at > ?1 AND expires_at <= (CASE tier WHEN 't1' THEN ?2 \
         WHEN 't2' THEN ?3 WHEN 't3' THEN ?4 ELSE ?1 END) THEN 1 ELSE 0 END) \
         FROM memories WHERE origin = 'fact' AND stage = 'long' AND forgotten_at IS NULL \
         AND tier IS NOT NULL AND superseded_by IS NULL GROUP BY tier ORDER BY tier",
    )?;
    let rows = stmt.query_map(
        params![now, soon(Tier::T1), soon(Tier::T2), soon(Tier::T3)],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)? as u64,
                r.get::<_, i64>(2)? as u64,
                r.get::<_, i64>(3)? as u64,
            ))
        },
    )?;
    rows.map(|r| r.map_err(Into::into)).collect()
}

/// Expired facts the journal still holds, per class: `short` (chat past
/// its TTL) or the tier of a long-term one.
pub(crate) fn expired_counts(
    conn: &rusqlite::Connection,
    now: DateTime<Utc>,
) -> Result<Vec<(String, u64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT CASE WHEN stage = 'short' THEN 'short' ELSE COALESCE(tier, 'none') END, \
         COUNT(*) FROM memories WHERE origin = 'fact' AND forgotten_at IS NULL \
         AND superseded_by IS NULL AND expires_at IS NOT NULL AND expires_at <= ?1 \
         GROUP BY 1 ORDER BY 1",
    )?;
    let rows = stmt.query_map(params![now.timestamp_millis()], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
    })?;
    rows.map(|r| r.map_err(Into::into)).collect()
}

/// Access counts of facts.
#[cfg(test)]
pub(crate) fn accesses(conn: &rusqlite::Connection, id: &str) -> Result<u32> {
    Ok(conn
        .prepare_cached("SELECT accesses FROM memories WHERE id = ?")?
        .query_row([id], |r| r.get::<_, i64>(0))
        .optional()?
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::meta::{FactExtras, MetaDb, tx as mtx};
    use crate::model::{Origin, Privacy, Scene, Subject};

    #[test]
    fn touch_moves_the_vector_expiry_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(&dir.path().join("m.db"), true).unwrap();
        let at = DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        let cfg = LifecycleConfig {
            tier_expiry: true,
            ..LifecycleConfig::default()
        };
        let m = Memory {
            id: "fact-main-a-1".into(),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: at,
            scene: Scene::parse("main").unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            text: "t".into(),
            tags: vec![],
            privacy: Privacy::Normal,
            subject: Subject::Owner,
            source: "test".into(),
            importance: 0.5,
            tier: Some(Tier::T3),
            supersedes: None,
            expires_at: cfg.expiry(Tier::T3, at),
            setting: Default::default(),
        };
        db.write(|t| {
            mtx::upsert_memory(t, &m, None, &FactExtras::default())?;
            crate::index::vector::ensure_model(t, "m", 2)?;
            let pending = crate::index::vector::pending(t, 10)?;
            let rows: Vec<(&crate::index::vector::Pending, &[f32])> =
                pending.iter().map(|p| (p, &[1.0f32, 0.0][..])).collect();
            crate::index::vector::store(t, "m", &rows)
        })
        .unwrap();
        let later = at + chrono::Duration::days(10);
        let changed = db
            .write(|t| touch(t, std::slice::from_ref(&m.id), later, &cfg))
            .unwrap();
        assert_eq!(changed, std::slice::from_ref(&m.id));
        let (expires, model): (i64, Option<String>) = db
            .with_reader(|c| {
                let e = c.query_row(
                    "SELECT expires FROM memory_vectors WHERE id = ?",
                    [&m.id],
                    |r| r.get(0),
                )?;
                let model = c.query_row(
                    "SELECT vector_model FROM memories WHERE id = ?",
                    [&m.id],
                    |r| r.get(0),
                )?;
                Ok((e, model))
            })
            .unwrap();
        assert_eq!(
            expires,
            (later + chrono::Duration::days(30)).timestamp_millis()
        );
        assert_eq!(
            model.as_deref(),
            Some("m"),
            "updated in place, not re-embedded"
        );
        // Replaying the same touch changes nothing but asks tantivy to refresh.
        let again = db
            .write(|t| touch(t, std::slice::from_ref(&m.id), later, &cfg))
            .unwrap();
        assert_eq!(again, std::slice::from_ref(&m.id));
        assert_eq!(
            db.with_reader(|c| accesses(c, &m.id)).unwrap(),
            1,
            "counted once"
        );
    }
}
