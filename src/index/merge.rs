//! Merge rules: how journal lines from several devices become one state,
//! whatever order they are applied in.
//!
//! Each device appends only to its own files (`facts/<device>/YYYY-MM.jsonl`)
//! and a file-sync tool copies them around, so a daemon sees other devices'
//! lines late, in any order, and one device's files may arrive before or
//! after another's. The index must not depend on that order: every daemon
//! reaches the same state from the same files. The rules:
//!
//! - **Puts: the later `(at, device)` wins.** Each `put` line has a version
//!   `(at, device, file, line)`: `at` is the line's `at` field (when it was
//!   written; old lines without it use the fact's `ts`), `device` the
//!   directory of its journal file (the fact's `device` for a legacy flat
//!   file), and the file name and line number break the remaining ties. A
//!   put is applied only if its version is not older than the row's; an
//!   older put arriving late changes nothing. Replaying the same line is
//!   harmless (equal versions).
//! - **A forget wins over any older put.** A `forget` records its `ts` per id
//!   (table `forgets`, kept even when the fact has not arrived yet). The row
//!   is forgotten while the newest forget is at or after its put's `at`;
//!   `forgotten_at` is that forget's `ts`. A put newer than every forget (a
//!   restore) brings the fact back; an older put arriving after the forget
//!   does not.
//! - **Supersede and touch lines commute.** The supersede mark
//!   (`superseded_by`) is recomputed from the rows that name the fact (the
//!   oldest by `(ts, id)` among those `index::lifecycle::SUCCESSOR`
//!   counts: live ones, and forgotten ones unless the fact was put again
//!   after the forget), never accumulated. Touches are kept per
//!   journal line (table `touches`); a row's tier, access count and expiry
//!   are its winning put's values folded with every touch later than that
//!   put, in time order, so a touch arriving late is folded in its place.
//!   Touches of one instant give the same result in either order.
//! - **A device's clock going backwards does not reorder its own lines.**
//!   The writer stamps each `put` with `at` no earlier than one millisecond
//!   after the newest version or forget it has of that id, and each `forget`
//!   with a `ts` no earlier than the put it forgets
//!   ([`crate::hub::Hub`] does this when appending): a line always outranks
//!   the lines its device had seen, whatever the clock says.
//!
//! - **Links: the later line of a pair decides.** A `link` or `unlink` line
//!   of a pair and relation (table `links`) is applied when its `ts` is
//!   later than the row's, an `unlink` winning a tie; whether both memories
//!   are live and current is decided when the link is read.
//!
//! - **No line moves a memory or makes it less private.** A `put` of an id
//!   whose row is in another scene, or at a higher privacy, is not applied:
//!   it is *quarantined* (table `quarantine`: file, line, id, reason) and
//!   reported with the journal's issues (`memd stats`, health, doctor). The
//!   writer never writes such a line (a new scene or a lower privacy is a new
//!   version with its own id), so only another device's line, or a hand
//!   edit, can be one. Lines arriving out of order are judged the same way:
//!   an older put arriving after a newer one that is *less* private than it
//!   puts the older one back and quarantines the newer; for the scene, the
//!   scene written into the id ([`crate::ids::fact_id`]) says which of two
//!   disagreeing lines is the moved one.
//!
//! Concurrent changes to one id on two devices that had not seen each other
//! are decided by the version alone; the loser's change is not merged (a
//! touch counted only in a losing rewrite is lost, for instance). Rows
//! indexed by builds before these rules have no base values for touches; a
//! touch of such a row is applied as before (newer touches only) until the
//! row is written again or the index is rebuilt.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Result;
use crate::index::meta::{FactExtras, tx};
use crate::lifecycle::{LifecycleConfig, TouchState};
use crate::model::{Memory, Privacy, Stage, Tier};
use crate::store::journal;

/// The merge order of `put` lines for one id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PutVersion {
    /// When the line was written (ms).
    pub(crate) at: i64,
    /// The writing device.
    pub(crate) device: String,
    /// Journal file (relative to `facts/`).
    pub(crate) file: String,
    /// 1-based line.
    pub(crate) line: u64,
}

impl PutVersion {
    /// The version of a put of `m` with `extras` written at `at` (ms).
    pub(crate) fn of(at: i64, extras: &FactExtras) -> PutVersion {
        let (file, line) = extras.journal.clone().unwrap_or_default();
        let device =
            journal::device_of(&file).map_or_else(|| extras.device.clone(), str::to_string);
        PutVersion {
            at,
            device,
            file,
            line,
        }
    }
}

/// The ids that the lines applied so far in a bulk load have named: put,
/// forgotten, touched or superseded. An id not named has no row, forget or
/// touch and no fact superseding it, so its put can take [`put_fresh`]. Kept
/// as 64-bit hashes (16 MB per million ids): a collision only sends a put
/// down the full path of [`put`].
#[derive(Default)]
pub(crate) struct Named(std::collections::HashSet<u64>);

impl Named {
    /// Records `id` as named; returns whether it was not named before.
    pub(crate) fn first(&mut self, id: &str) -> bool {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        self.0
            .insert(BuildHasherDefault::<DefaultHasher>::default().hash_one(id))
    }
}

/// The stored version of fact `id`, if it has a row.
fn stored_version(t: &Transaction<'_>, id: &str) -> Result<Option<PutVersion>> {
    Ok(t.prepare_cached(
        "SELECT COALESCE(put_at, ts), COALESCE(device, ''), COALESCE(journal_file, ''), \
         COALESCE(journal_line, 0) FROM memories WHERE id = ? AND origin = 'fact'",
    )?
    .query_row([id], |r| {
        let file: String = r.get(2)?;
        let device: String = r.get(1)?;
        Ok(PutVersion {
            at: r.get(0)?,
            device: journal::device_of(&file).map_or(device, str::to_string),
            file,
            line: r.get::<_, i64>(3)? as u64,
        })
    })
    .optional()?)
}

/// A fact's stored row as the merge rules judge a new `put` of it.
struct StoredRow {
    version: PutVersion,
    scene: String,
    privacy: Option<Privacy>,
}

/// The stored row of fact `id`, if it has one.
fn stored_row(t: &Transaction<'_>, id: &str) -> Result<Option<StoredRow>> {
    let Some(version) = stored_version(t, id)? else {
        return Ok(None);
    };
    let (scene, privacy): (String, String) = t
        .prepare_cached("SELECT scene, privacy FROM memories WHERE id = ? AND origin = 'fact'")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(Some(StoredRow {
        version,
        scene,
        privacy: privacy.parse().ok(),
    }))
}

/// What to do with a `put` of an id that has a row.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Newer than the row: applied.
    Apply,
    /// Older than the row: changes nothing (an out-of-order arrival).
    Ignore,
    /// The line moves the memory or makes it less private: not applied,
    /// recorded as quarantined.
    Quarantine(String),
    /// The row's own line was the bad one (it arrived first): it is
    /// quarantined and this older line takes its place.
    Replace(String),
}

/// Judges a `put` of `m` at `version` against the row the index holds (see
/// the module docs: no line moves a memory to another scene or lowers its
/// privacy, whatever order lines arrive in).
fn judge(row: &StoredRow, m: &Memory, version: &PutVersion) -> Verdict {
    let newer = *version >= row.version;
    if row.scene != m.scene.as_str() {
        // The scene the id was made in says which line moved it; without
        // one (an id of another scheme) the line that came second is refused.
        let made_in = scene_of_id(&m.id);
        let row_moved = made_in.is_some_and(|s| s != row.scene.replace(':', "-"))
            && made_in == Some(m.scene.id_part().as_str());
        return if row_moved {
            Verdict::Replace(format!(
                "moved {} from scene {} to {}; not applied",
                m.id, m.scene, row.scene
            ))
        } else {
            Verdict::Quarantine(format!(
                "would move {} from scene {} to {}; not applied",
                m.id, row.scene, m.scene
            ))
        };
    }
    if let Some(stored) = row.privacy {
        let (older, newer_privacy) = if newer {
            (stored, m.privacy)
        } else {
            (m.privacy, stored)
        };
        if newer_privacy < older {
            return if newer {
                Verdict::Quarantine(format!(
                    "would lower the privacy of {} from {older} to {newer_privacy}; not applied",
                    m.id
                ))
            } else {
                Verdict::Replace(format!(
                    "lowered the privacy of {} from {older} to {newer_privacy}; not applied",
                    m.id
                ))
            };
        }
    }
    if newer {
        Verdict::Apply
    } else {
        Verdict::Ignore
    }
}

/// The scene part of a fact id made by [`crate::ids::fact_id`]
/// (`<origin>-<scene with : as ->-<time36>-<rand4>`), if it has that shape.
fn scene_of_id(id: &str) -> Option<&str> {
    let mut parts = id.rsplitn(3, '-');
    let rand4 = parts.next()?;
    let time36 = parts.next()?;
    let rest = parts.next()?;
    let shaped = rand4.len() == 4
        && rand4.bytes().all(|b| b.is_ascii_hexdigit())
        && !time36.is_empty()
        && time36
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
    let (_, scene) = rest.split_once('-')?;
    (shaped && !scene.is_empty()).then_some(scene)
}

/// Records a line that was not applied (see [`Verdict`]; replay records
/// lines that hold a credential here too). Replaying it records the same
/// row again.
pub(crate) fn quarantine(
    t: &Transaction<'_>,
    file: &str,
    line: u64,
    id: &str,
    reason: &str,
) -> Result<()> {
    tracing::warn!(journal.file = %file, journal.line = line, fact.id = %id, reason = %reason, "journal line quarantined");
    t.prepare_cached(
        "INSERT OR REPLACE INTO quarantine (file, line, id, reason) VALUES (?, ?, ?, ?)",
    )?
    .execute(params![file, line as i64, id, reason])?;
    Ok(())
}

/// The newest forget of `id` (ms), if any.
pub(crate) fn tombstone(t: &rusqlite::Connection, id: &str) -> Result<Option<i64>> {
    Ok(t.prepare_cached("SELECT at FROM forgets WHERE id = ?")?
        .query_row([id], |r| r.get(0))
        .optional()?)
}

/// The newest time the writer has of `id`: its put's `at`, a forget of it,
/// or a forget of a fact that supersedes it, whichever is later. A new line
/// about `id` must be stamped after it (a restore of an older version must
/// come after the forget of the version that replaced it).
pub(crate) fn floor(c: &rusqlite::Connection, id: &str) -> Result<Option<i64>> {
    let put: Option<i64> = c
        .prepare_cached(
            "SELECT COALESCE(put_at, ts) FROM memories WHERE id = ? AND origin = 'fact'",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?;
    let successor_forgotten: Option<i64> = c
        .prepare_cached(
            "SELECT MAX(f.at) FROM memories s JOIN forgets f ON f.id = s.id \
             WHERE s.supersedes = ? AND s.origin = 'fact'",
        )?
        .query_row([id], |r| r.get(0))?;
    Ok(put.max(tombstone(c, id)?).max(successor_forgotten))
}

/// Applies a `put` by the rules. Returns the ids whose row (or searchable
/// state) changed, empty if a newer put of the id is already applied.
pub(crate) fn put(
    t: &Transaction<'_>,
    m: &Memory,
    extras: &FactExtras,
    at: DateTime<Utc>,
    cfg: &LifecycleConfig,
) -> Result<Vec<String>> {
    let version = PutVersion::of(at.timestamp_millis(), extras);
    if let Some(row) = stored_row(t, &m.id)? {
        match judge(&row, m, &version) {
            Verdict::Apply => {}
            Verdict::Ignore => return Ok(Vec::new()),
            Verdict::Quarantine(reason) => {
                let (file, line) = extras.journal.clone().unwrap_or_default();
                quarantine(t, &file, line, &m.id, &reason)?;
                return Ok(Vec::new());
            }
            Verdict::Replace(reason) => {
                quarantine(t, &row.version.file, row.version.line, &m.id, &reason)?;
            }
        }
    }
    let before: Option<String> = t
        .prepare_cached("SELECT supersedes FROM memories WHERE id = ?")?
        .query_row([&m.id], |r| r.get(0))
        .optional()?
        .flatten();
    // The row is replaced with `vector_model` NULL: its vector is stale
    // (possibly with other visibility values) until it is embedded again.
    crate::index::vector::delete(t, std::slice::from_ref(&m.id))?;
    tx::write_row(t, m, None, extras, Some(version.at))?;
    crate::index::lifecycle::after_upsert(t, m)?;
    if let Some(gone) = tombstone(t, &m.id)?.filter(|&f| f >= version.at) {
        hide(t, &m.id, gone)?;
    } else if touched_after(t, &m.id, version.at)? {
        // Without a later touch the fold gives the put's own values, which
        // the row was just written with: most puts (every one of a rebuild
        // without touches) skip it.
        fold_touches(t, &m.id, cfg)?;
    }
    let mut changed = vec![m.id.clone()];
    for other in [before, m.supersedes.clone()].into_iter().flatten() {
        remark(t, &other)?;
        changed.push(other);
    }
    remark(t, &m.id)?;
    Ok(changed)
}

/// Applies a `put` of an id that nothing applied so far has named (no put,
/// forget or touch of it, no fact superseding it): what [`put`] does, without
/// the reads that find nothing. Only a bulk load knows this (it starts empty
/// and sees every line; see `Index::apply`). Returns the ids whose row changed.
pub(crate) fn put_fresh(
    t: &Transaction<'_>,
    m: &Memory,
    extras: &FactExtras,
    at: DateTime<Utc>,
) -> Result<Vec<String>> {
    let version = PutVersion::of(at.timestamp_millis(), extras);
    tx::write_row(t, m, None, extras, Some(version.at))?;
    let mut changed = vec![m.id.clone()];
    if let Some(old) = &m.supersedes {
        remark(t, old)?;
        changed.push(old.clone());
    }
    Ok(changed)
}

/// Applies a `link` (`on`) or `unlink` line: the later `ts` of a pair's
/// lines decides, an `unlink` winning a tie, so the order they arrive in
/// changes nothing. Whether either memory is live is decided when the
/// link is read, so a forget or a supersede ends its effect.
pub(crate) fn link(t: &Transaction<'_>, link: &crate::model::Link, on: bool) -> Result<()> {
    t.prepare_cached(
        "INSERT INTO links (a, b, rel, reason, at, live) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT(a, b, rel) DO UPDATE SET reason = coalesce(excluded.reason, reason), \
         at = excluded.at, live = excluded.live \
         WHERE excluded.at > at OR (excluded.at = at AND excluded.live = 0)",
    )?
    .execute(params![
        link.a,
        link.b,
        link.rel,
        link.reason,
        link.ts.timestamp_millis(),
        on
    ])?;
    Ok(())
}

/// Applies a `forget` by the rules. Returns the ids whose row changed.
pub(crate) fn forget(t: &Transaction<'_>, id: &str, at: DateTime<Utc>) -> Result<Vec<String>> {
    t.prepare_cached(
        "INSERT INTO forgets (id, at) VALUES (?1, ?2) \
         ON CONFLICT(id) DO UPDATE SET at = max(at, excluded.at)",
    )?
    .execute(params![id, at.timestamp_millis()])?;
    let gone = tombstone(t, id)?.unwrap_or(at.timestamp_millis());
    let Some(version) = stored_version(t, id)? else {
        return Ok(vec![id.to_string()]);
    };
    let mut changed = vec![id.to_string()];
    if version.at <= gone {
        hide(t, id, gone)?;
        let old: Option<String> = t
            .prepare_cached("SELECT supersedes FROM memories WHERE id = ?")?
            .query_row([id], |r| r.get(0))?;
        if let Some(old) = old {
            remark(t, &old)?;
            changed.push(old);
        }
    }
    Ok(changed)
}

/// Marks a row forgotten at `gone` and drops its vector.
fn hide(t: &Transaction<'_>, id: &str, gone: i64) -> Result<()> {
    t.prepare_cached("UPDATE memories SET forgotten_at = ? WHERE id = ?")?
        .execute(params![gone, id])?;
    crate::index::vector::delete(t, &[id.to_string()])?;
    Ok(())
}

/// Recomputes the supersede mark of `id` from the facts naming it that
/// count ([`crate::index::lifecycle::SUCCESSOR`]): the oldest by `(ts, id)`.
/// A changed mark drops the vector (re-stored with the new expiry by the
/// next embedding pass).
pub(crate) fn remark(t: &Transaction<'_>, id: &str) -> Result<()> {
    let row: Option<Option<String>> = t
        .prepare_cached("SELECT superseded_by FROM memories WHERE id = ? AND origin = 'fact'")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    let Some(before) = row else {
        return Ok(());
    };
    let after: Option<String> = t
        .prepare_cached(&format!(
            "SELECT s.id FROM memories s WHERE {} ORDER BY s.ts, s.id LIMIT 1",
            crate::index::lifecycle::SUCCESSOR
        ))?
        .query_row([id], |r| r.get(0))
        .optional()?;
    if before != after {
        t.prepare_cached(
            "UPDATE memories SET superseded_by = ?, vector_model = NULL WHERE id = ?",
        )?
        .execute(params![after, id])?;
        crate::index::vector::delete(t, &[id.to_string()])?;
    }
    Ok(())
}

/// Applies a `touch` line (`file`, `line`) of `ids` at `at`. Returns the ids
/// tantivy must refresh.
pub(crate) fn touch(
    t: &Transaction<'_>,
    ids: &[String],
    at: DateTime<Utc>,
    origin: Option<&(String, u64)>,
    cfg: &LifecycleConfig,
) -> Result<Vec<String>> {
    let mut changed = Vec::new();
    let mut legacy = Vec::new();
    for id in ids {
        let (file, line) = origin.cloned().unwrap_or_default();
        t.prepare_cached("INSERT OR IGNORE INTO touches (id, at, file, line) VALUES (?,?,?,?)")?
            .execute(params![id, at.timestamp_millis(), file, line as i64])?;
        let has_base: Option<bool> = t
            .prepare_cached(
                "SELECT put_at IS NOT NULL FROM memories WHERE id = ? AND origin = 'fact'",
            )?
            .query_row([id], |r| r.get(0))
            .optional()?;
        match has_base {
            None => {}
            Some(true) => {
                fold_touches(t, id, cfg)?;
                changed.push(id.clone());
            }
            Some(false) => legacy.push(id.clone()),
        }
    }
    changed.extend(crate::index::lifecycle::touch(t, &legacy, at, cfg)?);
    Ok(changed)
}

/// Whether a touch of `id` later than `put_at` (ms) is recorded.
fn touched_after(t: &Transaction<'_>, id: &str, put_at: i64) -> Result<bool> {
    Ok(
        t.prepare_cached("SELECT 1 FROM touches WHERE id = ? AND at > ? LIMIT 1")?
            .exists(params![id, put_at])?,
    )
}

/// Sets a row's tier, accesses and expiry to its put's values folded with
/// every touch after the put, in time order.
fn fold_touches(t: &Transaction<'_>, id: &str, cfg: &LifecycleConfig) -> Result<()> {
    let row = t
        .prepare_cached(
            "SELECT stage, base_tier, base_accesses, base_expires, put_at, expires_at \
             FROM memories WHERE id = ? AND origin = 'fact' AND forgotten_at IS NULL \
             AND put_at IS NOT NULL",
        )?
        .query_row([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        })
        .optional()?;
    let Some((stage, base_tier, base_accesses, base_expires, put_at, expires_now)) = row else {
        return Ok(());
    };
    if stage != Stage::Long.as_str() {
        return Ok(());
    }
    let Some(tier) = base_tier.and_then(|x| x.parse::<Tier>().ok()) else {
        return Ok(());
    };
    let times: Vec<i64> = t
        .prepare_cached("SELECT at FROM touches WHERE id = ? AND at > ? ORDER BY at")?
        .query_map(params![id, put_at], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut state = TouchState {
        tier,
        accesses: u32::try_from(base_accesses.unwrap_or(0)).unwrap_or(u32::MAX),
        expires_at: base_expires.and_then(DateTime::<Utc>::from_timestamp_millis),
    };
    for &ms in &times {
        if let Some(when) = DateTime::<Utc>::from_timestamp_millis(ms) {
            state = cfg.touch(state, when);
        }
    }
    let expires = state.expires_at.map(|e| e.timestamp_millis());
    t.prepare_cached(
        "UPDATE memories SET tier = ?, accesses = ?, expires_at = ?, last_access = ? WHERE id = ?",
    )?
    .execute(params![
        state.tier.as_str(),
        i64::from(state.accesses),
        expires,
        times.last(),
        id
    ])?;
    if expires != expires_now {
        crate::index::lifecycle::set_vector_expiry(t, id, expires)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Origin, Scene, Subject};

    fn memory(id: &str, scene: &str, privacy: Privacy) -> Memory {
        Memory {
            id: id.into(),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: DateTime::from_timestamp(1_780_000_000, 0).unwrap(),
            scene: Scene::parse(scene).unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            title: None,
            text: "t".into(),
            tags: vec![],
            privacy,
            subject: Subject::Owner,
            source: "test".into(),
            importance: 0.5,
            tier: Some(Tier::T2),
            supersedes: None,
            expires_at: None,
            setting: Default::default(),
        }
    }

    fn version(at: i64, file: &str, line: u64) -> PutVersion {
        PutVersion {
            at,
            device: journal::device_of(file).unwrap_or_default().to_string(),
            file: file.into(),
            line,
        }
    }

    fn row(scene: &str, privacy: Privacy, v: PutVersion) -> StoredRow {
        StoredRow {
            version: v,
            scene: scene.into(),
            privacy: Some(privacy),
        }
    }

    #[test]
    fn ids_name_the_scene_they_were_made_in() {
        // As `ids::fact_id` makes them (a layer above the index).
        assert_eq!(
            scene_of_id("chat-qq-group-12-mqz8k2p1-0f3c"),
            Some("qq-group-12")
        );
        assert_eq!(scene_of_id("fact-main-mqz8k2p1-a1b2"), Some("main"));
        for other in [
            "fact-main-x",
            "doc-1a2b3c4d#0",
            "fact-main-mqz8k2p1-zz",
            "main-abc-0123",
        ] {
            assert_eq!(scene_of_id(other), None, "{other}");
        }
    }

    #[test]
    fn a_line_may_neither_move_a_memory_nor_lower_its_privacy() {
        use Privacy::*;
        let id = "fact-main-mqz8k2p1-a1b2";
        let old = version(1, "home/2026-06.jsonl", 1);
        let new = version(2, "laptop/2026-06.jsonl", 1);
        let quarantined = |v: &Verdict| matches!(v, Verdict::Quarantine(_));
        let replaced = |v: &Verdict| matches!(v, Verdict::Replace(_));
        // A newer line: applied, unless it moves the memory or lowers its privacy.
        let stored = row("main", Personal, old.clone());
        assert_eq!(
            judge(&stored, &memory(id, "main", Personal), &new),
            Verdict::Apply
        );
        assert_eq!(
            judge(&stored, &memory(id, "main", Secret), &new),
            Verdict::Apply
        );
        assert!(quarantined(&judge(
            &stored,
            &memory(id, "qq:group:9", Personal),
            &new
        )));
        assert!(quarantined(&judge(
            &stored,
            &memory(id, "main", Normal),
            &new
        )));
        // The same line replayed changes nothing.
        assert_eq!(
            judge(&stored, &memory(id, "main", Personal), &old),
            Verdict::Apply
        );
        // An older line arriving late: ignored, unless the row it finds was the bad one.
        let moved = row("qq:group:9", Personal, new.clone());
        assert!(replaced(&judge(
            &moved,
            &memory(id, "main", Personal),
            &old
        )));
        let lowered = row("main", Normal, new.clone());
        assert!(replaced(&judge(
            &lowered,
            &memory(id, "main", Personal),
            &old
        )));
        let raised = row("main", Secret, new.clone());
        assert_eq!(
            judge(&raised, &memory(id, "main", Personal), &old),
            Verdict::Ignore
        );
        // A backdated line cannot move a memory: the id says where it was made.
        let home = row("main", Personal, new);
        assert!(quarantined(&judge(
            &home,
            &memory(id, "pet", Personal),
            &old
        )));
        // An id of another scheme: whichever disagreeing line comes second is refused.
        let legacy = row("main", Personal, version(1, "home/2026-06.jsonl", 1));
        assert!(quarantined(&judge(
            &legacy,
            &memory("legacy-42", "pet", Personal),
            &version(2, "laptop/2026-06.jsonl", 1)
        )));
    }
}
