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
//! - The candidates' texts are kept as the detector saw them (`SeenTexts`):
//!   consecutive writes of a scene compare with nearly the same newest facts,
//!   so each is normalised and lexed once while it stays among them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Caller, Hub};
use crate::api::{
    AcceptConflictBody, AcceptConflictReply, DismissConflictBody, DismissConflictReply,
};
use crate::contradiction::{Prepared, Reason, Seen};
use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::index::meta_read::{Candidate, LinkState};
use crate::model::{CONFLICTS_WITH, ConflictRef, JOURNAL_VERSION, Link, Memory, Record, Stage};
use crate::search::SearchHit;

/// Live facts of the scene and subject a new memory is compared with (the newest).
pub const CANDIDATES: usize = 300;

/// Texts [`SeenTexts`] keeps per generation: the newest facts of three
/// scenes and subjects being written to at once (each write compares with
/// [`CANDIDATES`]). A text lexed for comparison holds about 0.9 KiB
/// (heaptrack, LoCoMo lines), and its content hash and set of three-byte
/// runs 0.15 KiB more, so both generations stay near 2 MiB; with 4,096 a
/// server writing steadily grew by 7 MiB before the cache filled.
const SEEN_KEPT: usize = 1024;

/// The texts of the facts new ones were last compared with, by id, as the
/// detector saw them ([`Seen`]: normalised, lexed once needed). Two
/// generations: when the newer fills up it becomes the older and the old
/// older is dropped, so what stays among the candidates stays kept and the
/// whole holds at most `2 ×` [`SEEN_KEPT`]. An entry counts only for the
/// same content hash ([`crate::lifecycle::content_hash`]: the same text up
/// to compatibility forms, which the detector normalises away), or, for a
/// fact without one, the same text: a rewritten fact keeps its id.
#[derive(Default)]
pub(crate) struct SeenTexts {
    generations: Mutex<[HashMap<String, Kept>; 2]>,
}

/// One kept text and the content hash it was read with.
struct Kept {
    hash: Option<String>,
    seen: Arc<Seen>,
}

impl Kept {
    /// Whether it stands for `c` (read with its text when not kept).
    fn stands_for(&self, c: &Candidate) -> bool {
        match &c.text {
            Some(text) => self.seen.text() == text,
            None => c.hash.is_some() && self.hash == c.hash,
        }
    }
}

impl SeenTexts {
    /// The candidates `read` returns (told which ids and hashes are kept,
    /// so that it reads only the others' texts), each with its kept form,
    /// made for those not kept. The kept texts stay locked meanwhile.
    fn of(
        &self,
        read: impl FnOnce(&dyn Fn(&str, Option<&str>) -> bool) -> Result<Vec<Candidate>>,
    ) -> Result<Vec<(Candidate, Arc<Seen>)>> {
        let mut generations = self
            .generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let candidates = {
            let kept = |id: &str, hash: Option<&str>| {
                hash.is_some()
                    && generations
                        .iter()
                        .any(|g| g.get(id).is_some_and(|k| k.hash.as_deref() == hash))
            };
            read(&kept)?
        };
        let [newer, older] = &mut *generations;
        // Found before anything moves: a full newer generation pushes out
        // the older one, which may hold a later candidate's form.
        let found: Vec<(Option<Arc<Seen>>, bool)> = candidates
            .iter()
            .map(|c| match newer.get(&c.id).filter(|k| k.stands_for(c)) {
                Some(k) => (Some(Arc::clone(&k.seen)), true),
                None => (
                    older
                        .get(&c.id)
                        .filter(|k| k.stands_for(c))
                        .map(|k| Arc::clone(&k.seen)),
                    false,
                ),
            })
            .collect();
        Ok(candidates
            .into_iter()
            .zip(found)
            .filter_map(|(c, (seen, in_newer))| {
                if in_newer {
                    return Some((c, seen?));
                }
                // Not kept, so read with its text.
                let seen = match seen {
                    Some(seen) => seen,
                    None => Arc::new(Seen::new(c.text.as_deref()?)),
                };
                older.remove(&c.id);
                if newer.len() >= SEEN_KEPT {
                    *older = std::mem::take(newer);
                }
                let kept = Kept {
                    hash: c.hash.clone(),
                    seen: Arc::clone(&seen),
                };
                newer.insert(c.id.clone(), kept);
                Some((c, seen))
            })
            .collect())
    }
}

impl Hub {
    /// Links the new fact `id` to the live facts it likely contradicts (see
    /// the module docs); returns how many links were written. The fact is
    /// stored whatever happens here.
    pub(crate) fn link_conflicts_of(&self, id: &str) -> Result<usize> {
        let found = self
            .core
            .index
            .meta
            .get_many(&[id.to_string()], &Filter::all())?;
        let Some(m) = found.get(id).filter(|m| m.stage == Stage::Long) else {
            return Ok(0);
        };
        let (scene, subject) = (m.scene.to_string(), m.subject.to_string());
        let now = self.now();
        let records: Vec<Record> = self
            .conflicts_with_text(&scene, &subject, id, &m.text, m.ts.timestamp_millis())?
            .into_iter()
            .map(|c| link_record(&c.older, &c.newer, Some(c.reason), "write", now, true))
            .collect();
        let n = records.len();
        if n > 0 {
            self.writer.link(self.cx(), records)?;
        }
        Ok(n)
    }

    /// The live facts of `scene` and `subject` (the newest [`CANDIDATES`])
    /// that the fact `id` (its text, its time in ms) likely contradicts.
    fn conflicts_with_text(
        &self,
        scene: &str,
        subject: &str,
        id: &str,
        text: &str,
        ts: i64,
    ) -> Result<Vec<FoundConflict>> {
        let meta = &self.core.index.meta;
        let candidates = self
            .seen
            .of(|kept| meta.conflict_candidates(scene, subject, id, CANDIDATES, kept))?;
        let new = Prepared::new(text);
        let found: Vec<(Candidate, Arc<Seen>, Reason)> = candidates
            .into_iter()
            .filter_map(|(c, seen)| {
                let reason = new.against_seen(&seen)?;
                Some((c, seen, reason))
            })
            .collect();
        if found.is_empty() {
            return Ok(Vec::new());
        }
        // A kept text is the same as the fact's now up to compatibility
        // forms: the pair is shown with the stored one.
        let ids: Vec<String> = found.iter().map(|(c, _, _)| c.id.clone()).collect();
        let stored = meta.get_many(&ids, &Filter::all())?;
        Ok(found
            .into_iter()
            .map(|(c, seen, reason)| {
                let other_text = stored
                    .get(&c.id)
                    .map_or_else(|| seen.text().to_string(), |m| m.text.clone());
                let this = (id.to_string(), text.to_string());
                let that = (c.id, other_text);
                let older_first = (c.ts, that.0.as_str()) <= (ts, id);
                let (old, new) = if older_first {
                    (that, this)
                } else {
                    (this, that)
                };
                FoundConflict {
                    older: old.0,
                    newer: new.0,
                    older_text: old.1,
                    newer_text: new.1,
                    reason: reason.as_str(),
                    linked: false,
                }
            })
            .collect())
    }

    /// Likely contradictions between the long-term facts written in
    /// `[from, to)` and the live facts of their scene and subject, each pair
    /// once; a pair whose link was dismissed is left out, and one linked
    /// already says so. Links nothing (see [`Hub::link_conflicts`]).
    pub fn find_conflicts(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<FoundConflict>> {
        let meta = &self.core.index.meta;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (id, scene, subject, text, ts) in meta.long_facts_between(from, to, DAY_FACTS)? {
            for mut c in self.conflicts_with_text(&scene, &subject, &id, &text, ts)? {
                if !seen.insert((c.older.clone(), c.newer.clone())) {
                    continue;
                }
                match meta.link_between(&c.older, &c.newer)? {
                    Some(link) if !link.live => continue,
                    Some(_) => c.linked = true,
                    None => {}
                }
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Links the pairs of `found` not linked yet (source `sleep`).
    pub fn link_conflicts(&self, found: &[FoundConflict]) -> Result<()> {
        let now = self.now();
        let records: Vec<Record> = found
            .iter()
            .filter(|c| !c.linked)
            .map(|c| link_record(&c.older, &c.newer, Some(c.reason), "sleep", now, true))
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        self.writer.link(self.cx(), records)
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
        let link = self.writable_link(&body.id, &body.other, &filter)?;
        let on = body.undo;
        if link.live != on {
            // The later line of a pair decides (an `unlink` wins a tie): one
            // written in the same millisecond as the last, or after the
            // clock stepped back, is dated just after it.
            let after = chrono::DateTime::from_timestamp_millis(link.at.saturating_add(1));
            let ts = after.map_or(self.now(), |t| t.max(self.now()));
            let record = link_record(&link.a, &link.b, None, caller.name(), ts, on);
            self.writer.link(self.cx(), vec![record])?;
        }
        Ok(DismissConflictReply {
            id: body.id,
            other: body.other,
            linked: on,
        })
    }

    /// The link between `x` and `y` when both are visible under `filter`;
    /// else `NOT_FOUND` (whether or not they exist).
    fn writable_link(&self, x: &str, y: &str, filter: &Filter) -> Result<LinkState> {
        let ids = [x.to_string(), y.to_string()];
        let visible = self.core.index.meta.get_many(&ids, filter)?;
        let link = self.core.index.meta.link_between(x, y)?;
        match link {
            Some(link) if visible.len() == 2 => Ok(link),
            _ => Err(Error::not_found("conflict link", format!("{x} {y}"))),
        }
    }

    /// Accepts a conflict: the newer memory becomes the new version of the
    /// older (its `put` again, naming the older in `supersedes`), so the
    /// older leaves search, lists and blocks and the timeline links both.
    /// Needs the right to write both and a live link between them; a newer
    /// memory that is already a version of another is `CONFLICT`. A retry of
    /// an accepted pair answers the same and writes nothing.
    pub fn accept_conflict(
        &self,
        caller: &Caller,
        body: AcceptConflictBody,
    ) -> Result<AcceptConflictReply> {
        let filter = caller.writable()?;
        let (older, newer) = (&body.older, &body.newer);
        let live = self.writable_link(older, newer, &filter)?.live;
        let mut fact = self.lifecycle.current_fact(&self.core, newer, &filter)?;
        if fact.supersedes.as_deref() == Some(older.as_str()) {
            // Accepted already (a retry): the same answer, nothing written.
            return Ok(AcceptConflictReply {
                superseded: body.older,
                by: body.newer,
            });
        }
        let live_pair = self
            .core
            .index
            .meta
            .conflict_links(std::slice::from_ref(older))?;
        let current = live_pair
            .iter()
            .any(|r| r.older == *older && r.newer == *newer);
        if !live || !current {
            return Err(Error::not_found(
                "conflict link",
                format!("{older} {newer}"),
            ));
        }
        if fact.supersedes.is_some() {
            return Err(Error::Conflict(format!(
                "{newer} is already a version of another memory; write its text as a new version of {older} instead"
            )));
        }
        fact.supersedes = Some(older.clone());
        self.writer.rewrite(self.cx(), fact, &filter)?;
        Ok(AcceptConflictReply {
            superseded: body.older,
            by: body.newer,
        })
    }
}

/// Facts written in one consolidation window that are compared (the oldest first).
const DAY_FACTS: usize = 2000;

/// A likely contradiction found by [`Hub::find_conflicts`].
#[derive(Debug, Clone, PartialEq)]
pub struct FoundConflict {
    /// The older memory.
    pub older: String,
    /// The newer memory.
    pub newer: String,
    /// The older memory's text.
    pub older_text: String,
    /// The newer memory's text.
    pub newer_text: String,
    /// Why (`negation`, `preference`, `date`, `number`, `value`).
    pub reason: &'static str,
    /// Linked already (by the write that stored the newer, or an earlier run).
    pub linked: bool,
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
    for r in rows
        .iter()
        .filter(|r| can_read(&r.older) && can_read(&r.newer))
    {
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
pub(crate) fn block_label(
    m: &Memory,
    conflicts: &[ConflictRef],
    shown: &HashSet<&str>,
) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept forms of `facts` (`(id, content hash, text)`), the texts
    /// read as the index reads them (only for those not kept), and how many
    /// were read.
    fn of(seen: &SeenTexts, facts: &[(&str, Option<&str>, &str)]) -> (Vec<Arc<Seen>>, usize) {
        let mut read = 0;
        let got = seen
            .of(|kept| {
                Ok(facts
                    .iter()
                    .map(|(id, hash, text)| {
                        let text = (!kept(id, *hash)).then(|| {
                            read += 1;
                            text.to_string()
                        });
                        Candidate {
                            id: id.to_string(),
                            ts: 0,
                            hash: hash.map(str::to_string),
                            text,
                        }
                    })
                    .collect())
            })
            .unwrap();
        assert_eq!(got.len(), facts.len());
        (got.into_iter().map(|(_, s)| s).collect(), read)
    }

    #[test]
    fn a_kept_text_is_reused_and_an_edited_one_made_again() {
        let seen = SeenTexts::default();
        let facts = [("a", Some("h1"), "我住在北京"), ("b", None, "I like tea")];
        let (first, read) = of(&seen, &facts);
        assert_eq!(read, 2);
        let (again, read) = of(&seen, &facts);
        assert_eq!(
            read, 1,
            "a fact without a hash is read again, and compared by text"
        );
        assert!(Arc::ptr_eq(&first[0], &again[0]));
        assert!(Arc::ptr_eq(&first[1], &again[1]));
        // The fact's text was edited in its file: the same id, another text.
        let (edited, read) = of(&seen, &[("a", Some("h2"), "我住在上海")]);
        assert_eq!(read, 1);
        assert!(!Arc::ptr_eq(&first[0], &edited[0]));
        assert_eq!(edited[0].text(), "我住在上海");
        let new = Prepared::new("我住在广州");
        assert!(new.against_seen(&edited[0]).is_some());
        let (edited, _) = of(&seen, &[("b", None, "I like coffee")]);
        assert_eq!(edited[0].text(), "I like coffee");
    }

    #[test]
    fn the_kept_texts_are_bounded_and_the_newest_stay() {
        let seen = SeenTexts::default();
        for i in 0..3 * SEEN_KEPT {
            of(
                &seen,
                &[(&format!("m{i}"), Some("h"), &format!("text {i}"))],
            );
        }
        let kept: usize = seen
            .generations
            .lock()
            .unwrap()
            .iter()
            .map(HashMap::len)
            .sum();
        assert!(kept <= 2 * SEEN_KEPT, "{kept} kept");
        let last = format!("m{}", 3 * SEEN_KEPT - 1);
        assert!(seen.generations.lock().unwrap()[0].contains_key(&last));
    }

    #[test]
    fn a_text_kept_in_the_older_generation_survives_a_turn_in_the_same_call() {
        let seen = SeenTexts::default();
        let ids: Vec<String> = (0..2 * SEEN_KEPT).map(|i| format!("m{i}")).collect();
        let facts: Vec<(&str, Option<&str>, &str)> = ids
            .iter()
            .map(|id| (id.as_str(), Some("h"), "text"))
            .collect();
        of(&seen, &facts);
        // The first half is in the older generation now; new facts first
        // fill the newer one, which turns before the old ones are reached.
        let fresh: Vec<String> = (0..SEEN_KEPT).map(|i| format!("n{i}")).collect();
        let mut again: Vec<(&str, Option<&str>, &str)> = fresh
            .iter()
            .map(|id| (id.as_str(), Some("h"), "text"))
            .collect();
        again.extend(&facts[..SEEN_KEPT]);
        let (_, read) = of(&seen, &again);
        assert_eq!(read, SEEN_KEPT, "only the new facts' texts were read");
    }
}
