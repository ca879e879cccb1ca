//! Session neighbours: the turns around a memory in its conversation.
//!
//! A fact with a `session` (see [`crate::model::Setting`]) has neighbours:
//! the live, not superseded facts of the same scene and session, ordered by
//! event time (`time_at`, else the write time `ts`), then `ts`, then journal
//! position and id. Its full-text document carries the text of up to
//! [`WINDOW`] neighbours on each side in a separate, lower-weight `context`
//! field, never in the stored text.
//!
//! Privacy: neighbours are counted within one class of scene, privacy,
//! stage, kind and subject — every field a visibility filter can select on —
//! so a caller who may read the memory may read the neighbour too, no token
//! finds a memory by words of one it may not read, and a hidden memory
//! between two turns does not change which turns are neighbours. (An expired short-term neighbour may still lend its
//! words until it is forgotten: expiry hides a memory from everyone alike and
//! is not a privacy boundary.)
//!
//! Keeping it exact: a memory's context depends only on its neighbours, so
//! whenever a fact's row changes (put, rewrite, forget, supersede) the facts
//! [`around`] it — computed after the change, also for a forgotten fact — are
//! indexed again. A rebuilt index therefore equals the incrementally kept one.

use rusqlite::{Connection, params};

use crate::error::Result;

/// Neighbours on each side whose text enters the context field.
pub const WINDOW: usize = 1;

/// The ordering key of a row, as SQL over table alias `m`, one part each.
const KEY_PARTS: [&str; 5] = [
    "COALESCE(m.event_at, m.ts)",
    "m.ts",
    "COALESCE(m.journal_file, '')",
    "COALESCE(m.journal_line, 0)",
    "m.id",
];

/// Live, unsuperseded facts, as SQL over alias `m`.
const LIVE: &str = "m.forgotten_at IS NULL AND m.origin = 'fact' AND NOT EXISTS \
     (SELECT 1 FROM memories s WHERE s.supersedes = m.id AND s.origin = 'fact' AND s.forgotten_at IS NULL)";

/// The condition that keeps a neighbour in the memory's own class.
const OWN_CLASS: &str = "AND m.privacy = me.privacy AND m.stage = me.stage AND m.kind = me.kind \
     AND m.subject = me.subject";

/// Before and after, each with the order that puts the closest first.
const SIDES: [(&str, &str); 2] = [("<", "DESC"), (">", "ASC")];

/// The facts up to `window` places before and after `id` in its session,
/// closest first on each side, counted separately within each class of
/// privacy, stage, kind and subject (the fields a visibility filter selects
/// on). With `own_class` only `id`'s own class is returned. Empty when `id`
/// has no session or no row.
///
/// Counting per class matters for privacy: a memory's neighbours never depend
/// on memories of another class, so whether a hidden memory sits between two
/// turns changes nothing a reader of those turns can observe.
fn neighbours(
    conn: &Connection,
    id: &str,
    window: usize,
    own_class: bool,
) -> Result<Vec<(String, String)>> {
    if window == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for side in 0..SIDES.len() {
        let mut stmt = conn.prepare_cached(side_sql_cached(side, own_class))?;
        let rows = stmt.query_map(params![id, window as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
        for row in rows {
            out.push(row?);
        }
    }
    Ok(out)
}

/// [`side_sql`] for side `side` of [`SIDES`], with or without [`OWN_CLASS`],
/// built once (formatting it on every call cost as much as running it for a
/// memory without a session).
fn side_sql_cached(side: usize, own_class: bool) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let all = SQL.get_or_init(|| {
        [false, true]
            .into_iter()
            .flat_map(|own| {
                SIDES
                    .iter()
                    .map(move |(cmp, order)| side_sql(cmp, order, if own { OWN_CLASS } else { "" }))
            })
            .collect()
    });
    &all[usize::from(own_class) * SIDES.len() + side]
}

/// The statement for one side (`cmp` `<` with `DESC`, `>` with `ASC`).
///
/// The memory's own row is a materialized CTE: as a subquery SQLite
/// flattened it into the join and made the plan depend on the bound id, so
/// the cached statement was compiled again on every call (half the cost of
/// a batched write).
fn side_sql(cmp: &str, order: &str, class_filter: &str) -> String {
    let key = KEY_PARTS.join(", ");
    let order_by = KEY_PARTS
        .iter()
        .map(|k| format!("{k} {order}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH me AS MATERIALIZED (SELECT scene, session, privacy, stage, kind, subject, \
         COALESCE(event_at, ts) AS k1, ts AS k2, \
         COALESCE(journal_file, '') AS k3, COALESCE(journal_line, 0) AS k4, id AS k5 \
         FROM memories WHERE id = ?1 AND session IS NOT NULL) \
         SELECT id, text FROM (SELECT m.id AS id, m.text AS text, ROW_NUMBER() OVER \
         (PARTITION BY m.privacy, m.stage, m.kind, m.subject ORDER BY {order_by}) AS n \
         FROM memories m, me \
         WHERE m.scene = me.scene AND m.session = me.session AND {LIVE} {class_filter} \
         AND ({key}) {cmp} (me.k1, me.k2, me.k3, me.k4, me.k5)) \
         WHERE n <= ?2 ORDER BY n, id"
    )
}

/// Ids whose context may change when `id`'s row changes: its neighbours in
/// the current state, in every class (the row itself may be forgotten by now,
/// or have changed class).
pub fn around(conn: &Connection, id: &str) -> Result<Vec<String>> {
    Ok(neighbours(conn, id, WINDOW, false)?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// The context text of `id`: the texts of its neighbours of its own class
/// (same privacy, stage, kind and subject; scene and session are the same by
/// construction), which any reader of `id` may read as well. Empty without a
/// session.
pub(crate) fn context_text(conn: &Connection, id: &str) -> Result<String> {
    let texts: Vec<String> = neighbours(conn, id, WINDOW, true)?
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    Ok(texts.join("\n"))
}

#[cfg(test)]
mod tests {
    use rusqlite::StatementStatus;

    use super::{OWN_CLASS, SIDES};

    #[test]
    fn the_statements_are_compiled_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::index::meta::MetaDb::open(&dir.path().join("m.db"), true).unwrap();
        db.write(|c| {
            for i in 0..5 {
                super::around(c, &format!("x{i}"))?;
                super::context_text(c, &format!("x{i}"))?;
            }
            for own_class in ["", OWN_CLASS] {
                for (cmp, order) in SIDES {
                    let st = c.prepare_cached(&super::side_sql(cmp, order, own_class))?;
                    assert_eq!(st.get_status(StatementStatus::RePrepare), 0);
                }
            }
            Ok(())
        })
        .unwrap();
    }
}
