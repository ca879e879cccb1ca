//! Use cases and read rules of conflict links: two live memories of one
//! scene and subject that likely contradict each other
//! ([`crate::contradiction`]), linked by a `link` journal line
//! (`conflicts_with`, the older as `a`), never merged or hidden.
//!
//! - At write, a new long-term fact is compared with the newest
//!   [`CANDIDATES`] live, current long-term facts of its scene and subject;
//!   each likely contradiction is linked (source `write`). Consolidation
//!   compares the day's memories too and proposes a supersede.
//! - Reads: a search hit and `get` carry `conflicts_with`, the other
//!   memories the caller may read (a link to a memory it cannot read is
//!   invisible: no id, no count); a ranked list puts the newer of a pair
//!   directly before the older when both are in it; recall's block labels
//!   them (`较新`/`较早`, `newer`/`older`).
//! - A forget or a supersede of either side ends the link's effect (read
//!   time); `POST /v1/conflicts/dismiss` appends an `unlink` line (or, with
//!   `undo`, the `link` again).

use std::collections::{HashMap, HashSet};

use super::{Caller, Hub};
use crate::api::{DismissConflictBody, DismissConflictReply};
use crate::contradiction::detect;
use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::model::{CONFLICTS_WITH, ConflictRef, JOURNAL_VERSION, Link, Memory, Record, Stage};
use crate::search::SearchHit;

/// Live facts of the scene and subject a new memory is compared with (the newest).
pub const CANDIDATES: usize = 300;

impl Hub {
    /// Links the new fact `id` to the live facts it likely contradicts (see
    /// the module docs); returns how many links were written. The fact is
    /// stored whatever happens here.
    pub(crate) fn link_conflicts_of(&self, id: &str) -> Result<usize> {
        let found = self.core.index.meta.get_many(&[id.to_string()], &Filter::all())?;
        let Some(m) = found.get(id).filter(|m| m.stage == Stage::Long) else {
            return Ok(0);
        };
        let candidates =
            self.core
                .index
                .meta
                .conflict_candidates(&m.scene, m.subject, id, CANDIDATES)?;
        let now = self.now();
        let records: Vec<Record> = candidates
            .iter()
            .filter_map(|(other, text)| {
                let reason = detect(text, &m.text)?;
                Some(link_record(other, id, Some(reason.as_str()), "write", now, true))
            })
            .collect();
        let n = records.len();
        if n > 0 {
            self.writer.link(self.cx(), records)?;
        }
        Ok(n)
    }

    /// Dismisses the conflict link between two memories the caller may
    /// write (or, with `undo`, links them again); a pair without a link, or
    /// a memory outside the caller's write rights, is `NOT_FOUND`.
    pub fn dismiss_conflict(
        &self,
        caller: &Caller,
        body: DismissConflictBody,
    ) -> Result<DismissConflictReply> {
        let filter = caller.writable()?;
        let ids = [body.id.clone(), body.other.clone()];
        let visible = self.core.index.meta.get_many(&ids, &filter)?;
        let not_found = || Error::not_found("conflict link", format!("{} {}", body.id, body.other));
        if visible.len() < 2 {
            return Err(not_found());
        }
        let (a, b, live) = self
            .core
            .index
            .meta
            .link_between(&body.id, &body.other)?
            .ok_or_else(not_found)?;
        let on = body.undo;
        if live != on {
            let record = link_record(&a, &b, None, caller.name(), self.now(), on);
            self.writer.link(self.cx(), vec![record])?;
        }
        Ok(DismissConflictReply {
            id: body.id,
            other: body.other,
            linked: on,
        })
    }

    /// Writes a `conflicts_with` link between `older` and `newer` (consolidation).
    pub(crate) fn link_conflict(&self, older: &str, newer: &str, reason: &str) -> Result<()> {
        let record = link_record(older, newer, Some(reason), "sleep", self.now(), true);
        self.writer.link(self.cx(), vec![record])
    }
}

/// A `link` (`on`) or `unlink` line for the pair.
fn link_record(
    a: &str,
    b: &str,
    reason: Option<&str>,
    source: &str,
    ts: chrono::DateTime<chrono::Utc>,
    on: bool,
) -> Record {
    let link = Link {
        rel: CONFLICTS_WITH.to_string(),
        a: a.to_string(),
        b: b.to_string(),
        ts,
        reason: reason.map(str::to_string),
        source: source.to_string(),
    };
    if on {
        Record::Link {
            v: JOURNAL_VERSION,
            link,
        }
    } else {
        Record::Unlink {
            v: JOURNAL_VERSION,
            link,
        }
    }
}

/// The live conflict links of each of `ids` whose other side `filter`
/// admits (a memory the caller cannot read leaves no trace).
pub(crate) fn conflicts_of(
    hub: &Hub,
    ids: &[String],
    filter: &Filter,
) -> Result<HashMap<String, Vec<ConflictRef>>> {
    let rows = hub.core.index.meta.conflict_links(ids)?;
    if rows.is_empty() {
        return Ok(HashMap::new());
    }
    let asked: HashSet<&String> = ids.iter().collect();
    let others: Vec<String> = rows
        .iter()
        .flat_map(|r| [r.older.clone(), r.newer.clone()])
        .filter(|id| !asked.contains(id))
        .collect();
    let readable = hub.core.index.meta.get_many(&others, filter)?;
    let can_read = |id: &String| asked.contains(id) || readable.contains_key(id);
    let mut out: HashMap<String, Vec<ConflictRef>> = HashMap::new();
    for r in rows.iter().filter(|r| can_read(&r.older) && can_read(&r.newer)) {
        for (this, other, newer) in [(&r.older, &r.newer, true), (&r.newer, &r.older, false)] {
            if asked.contains(this) {
                out.entry(this.clone()).or_default().push(ConflictRef {
                    id: other.clone(),
                    newer,
                    reason: r.reason.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// Fills `conflicts_with` of each hit and puts the newer of a linked pair
/// directly before the older when both are among the hits.
pub(crate) fn annotate(hub: &Hub, hits: &mut Vec<SearchHit>, filter: &Filter) -> Result<()> {
    let ids: Vec<String> = hits.iter().map(|h| h.memory.id.clone()).collect();
    let mut found = conflicts_of(hub, &ids, filter)?;
    if found.is_empty() {
        return Ok(());
    }
    for h in hits.iter_mut() {
        h.conflicts_with = found.remove(&h.memory.id).unwrap_or_default();
    }
    newer_first(hits);
    Ok(())
}

/// Reorders `hits` so that the newer side of each linked pair present
/// comes directly before the older, at the older's rank when that is the
/// better one; every other hit keeps its order.
pub(crate) fn newer_first(hits: &mut Vec<SearchHit>) {
    let at: HashMap<String, usize> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| (h.memory.id.clone(), i))
        .collect();
    let mut taken = vec![false; hits.len()];
    let mut order = Vec::with_capacity(hits.len());
    for i in 0..hits.len() {
        if taken[i] {
            continue;
        }
        let newer = hits[i]
            .conflicts_with
            .iter()
            .filter(|c| c.newer)
            .filter_map(|c| at.get(&c.id).copied())
            .find(|&j| !taken[j]);
        if let Some(j) = newer {
            taken[j] = true;
            order.push(j);
        }
        taken[i] = true;
        order.push(i);
    }
    let mut slots: Vec<Option<SearchHit>> = std::mem::take(hits).into_iter().map(Some).collect();
    hits.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// The label of a memory in a block where the other side of one of its
/// conflict links is shown too: which is newer, in the memory's language.
pub(crate) fn block_label(m: &Memory, conflicts: &[ConflictRef], shown: &HashSet<&str>) -> &'static str {
    let Some(c) = conflicts.iter().find(|c| shown.contains(c.id.as_str())) else {
        return "";
    };
    match (crate::contradiction::is_chinese(&m.text), c.newer) {
        (true, true) => "（较早）",
        (true, false) => "（较新）",
        (false, true) => "(older) ",
        (false, false) => "(newer) ",
    }
}
