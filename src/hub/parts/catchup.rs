//! The catch-up part: applying journal lines and Markdown documents to the
//! index, and healing a damaged index at open.
//!
//! The same replay runs on open, after every append (the writer calls it),
//! after a storage error, on reindex and when a sync tool appends lines, so
//! the index always equals a replay of the files.
//!
//! Every line meets the write rules before it is indexed
//! ([`crate::model::Record::validate`]): a line that breaks them (a sync tool
//! or a hand edit can append anything) is reported like an unreadable line,
//! as `FILE:LINE: reason`, and skipped; its neighbours are applied as usual.
//! Every line also meets the credential check every way in applies
//! ([`crate::content::replay_verdict`]): one that holds a credential in any
//! field (a peer device's line, a restored backup's) is quarantined (table
//! `quarantine`, reported by health, doctor and stats) and never indexed.
//! Unless `lifecycle.tierExpiry` is on, a long-term fact is indexed without
//! an expiry whatever its line says: builds that expired tiers by default
//! wrote `expires_at` on every long-term line, and those memories must not
//! vanish.

use std::sync::Mutex;

use serde::Serialize;

use super::backlog::{self, Backlog, Lag};
use super::documents::{Documents, DocumentsReport};
use super::heal::{self, IndexState};
use super::{Core, pins};
use crate::content::{self, Replay};
use crate::error::{Error, Result};
use crate::index::meta::FactExtras;
use crate::index::{self, Batch, Change, Quarantined};
use crate::model::{Record, Stage};
use crate::store::journal::{self, Cursor, LineIssue};

/// Changes per index commit while catching up.
const CATCH_UP_BATCH: usize = 5000;

/// Progress of a catch-up or rebuild, for progress bars.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Journal bytes processed so far.
    pub(crate) done: u64,
    /// Journal bytes to process in total.
    pub(crate) total: u64,
}

/// What opening or a catch-up did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CatchUpReport {
    /// Journal records applied.
    pub records: u64,
    /// Bad lines skipped (each also logged with file:line).
    pub bad_lines: u64,
    /// Lines quarantined because a field holds a credential (reported with
    /// the journal's issues; see [`crate::content::replay_verdict`]).
    pub quarantined: u64,
    /// Memories embedded (from the model or the vector cache).
    pub vectors_stored: u64,
    /// Documents (re)indexed.
    pub documents_indexed: u64,
    /// Documents removed from the index.
    pub(crate) documents_removed: u64,
    /// Document files read (unchanged files are not read again).
    pub documents_read: u64,
    /// Documents found invalid (bad front matter, too large, links).
    pub(crate) documents_invalid: u64,
}

impl From<DocumentsReport> for CatchUpReport {
    fn from(d: DocumentsReport) -> Self {
        CatchUpReport {
            documents_indexed: d.documents_indexed,
            documents_removed: d.documents_removed,
            documents_read: d.documents_read,
            documents_invalid: d.documents_invalid,
            ..CatchUpReport::default()
        }
    }
}

/// Replay of the files into the index, and the state of the index as health reports it.
#[derive(Default)]
pub(crate) struct CatchUp {
    documents: Documents,
    backlog: Backlog,
    state: Mutex<IndexState>,
    /// The index opened on a full disk and has not caught up since: the
    /// first catch-up also does what opening skipped.
    opened_full: std::sync::atomic::AtomicBool,
}

/// Where one journal file's replay stands.
struct FileReplay<'a> {
    file: &'a str,
    from: Cursor,
    last: Cursor,
}

impl CatchUp {
    /// Applies journal lines not yet in the index.
    pub(crate) fn catch_up(
        &self,
        core: &Core,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let files = journal::list_all(&core.layout.facts())?;
        self.catch_up_files(core, &files, progress)
    }

    /// Applies journal lines of `files` not yet in the index.
    pub(crate) fn catch_up_files(
        &self,
        core: &Core,
        files: &[String],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let dir = core.layout.facts();
        let cursors = core.index.resume_cursors()?;
        let mut sizes = Vec::with_capacity(files.len());
        for f in files {
            sizes.push(journal::content_len(&dir, f)?);
        }
        let mut report = CatchUpReport::default();
        let mut batch = Batch::default();
        let total: u64 = sizes.iter().sum();
        let mut done_before = 0u64;
        for (file, size) in files.iter().zip(sizes) {
            let mut from = cursors.get(file).copied().unwrap_or_default();
            if from.offset > size {
                tracing::warn!(journal.file = %file, "journal file is shorter than the index remembers; re-reading it");
                from = Default::default();
                // Its bad lines are found again from the start.
                batch.rechecked.push(file.clone());
            }
            // What is about to be read: once its new lines are applied, a
            // change inside them is damage (see `backlog`).
            let stamp = self.backlog.stamp(core, file);
            done_before += from.offset;
            let mut at = FileReplay {
                file,
                from,
                last: from,
            };
            replay_file(core, &mut at, &mut batch, &mut report, &mut |last| {
                progress(Progress {
                    done: done_before + (last.offset - from.offset),
                    total,
                })
            })?;
            if at.last != from {
                batch.cursors.push((file.clone(), at.last));
                self.backlog.remember(file, stamp);
            }
            done_before += at.last.offset - from.offset;
            progress(Progress {
                done: done_before,
                total,
            });
        }
        core.index.apply(&batch)?;
        Ok(report)
    }

    /// Brings the index back after a storage error ([`crate::index::Index::behind`]):
    /// opens its write side if it opened on a full disk, applies every
    /// journal line past the cursors, re-syncs documents and commits. The
    /// caller holds the writer.
    pub(crate) fn recover(&self, core: &Core) -> Result<()> {
        let Some((failures, reason)) = core.index.behind() else {
            return Ok(());
        };
        core.index.ensure_writable()?;
        if core.index.room().is_some_and(|r| !r.takes(0)) {
            // Short of space: give the write-ahead log's back first.
            let _ = core.index.reclaim();
        }
        let mut report = self.catch_up(core, &mut |_| {})?;
        if self.opened_full.load(std::sync::atomic::Ordering::Acquire) {
            // What opening skipped on the full disk.
            self.finish_open(core)?;
        }
        self.sync_documents(core, &mut |batch| core.index.apply(batch))?;
        core.index.refresh()?;
        if core.index.bulk_loading() {
            core.index.end_bulk_load()?;
        }
        // Lines appended while the first pass ran.
        report.records += self.catch_up(core, &mut |_| {})?.records;
        core.index.refresh()?;
        self.opened_full
            .store(false, std::sync::atomic::Ordering::Release);
        core.index.caught_up(failures);
        if matches!(self.state(), IndexState::Waiting { .. }) {
            self.set_state(IndexState::Ok);
        }
        tracing::info!(
            records = report.records,
            after = %reason,
            "index caught up with the journal after a storage error"
        );
        Ok(())
    }

    /// Refuses a write of `bytes` journal bytes that the index could not
    /// take: while the index is behind after a storage error and cannot
    /// catch up, or when the file system of `data/` (or of `memories/`) has
    /// less than its reserve left (see [`crate::disk`]). A refusal is
    /// `STORAGE_FULL` (507, retryable): the write was not stored, and
    /// writes resume by themselves once there is room. The caller holds the
    /// writer.
    pub(crate) fn admit_writes(&self, core: &Core, bytes: u64) -> Result<()> {
        if core.index.behind().is_some()
            && let Err(e) = self.recover(core)
        {
            if e.is_storage_full() || !core.index.is_writable() {
                return Err(Error::StorageFull(format!(
                    "the index cannot take new lines ({e}); nothing was stored. Reads keep \
                     working, and writes resume by themselves once there is room"
                )));
            }
            tracing::warn!(error = %e, "the index is still behind the journal; appending anyway");
        }
        let data = core.layout.data();
        let facts = core.layout.facts();
        let same =
            crate::disk::device(&data).is_some_and(|d| crate::disk::device(&facts) == Some(d));
        let check = |dir: &std::path::Path, what: &str, bytes: u64| -> Result<()> {
            let Some(room) = crate::disk::Room::of(dir) else {
                return Ok(());
            };
            if room.takes(bytes) {
                return Ok(());
            }
            // The write-ahead log may hold space it no longer needs.
            if what == "data/" {
                let _ = core.index.reclaim();
            }
            match crate::disk::Room::of(dir) {
                Some(room) if !room.takes(bytes) => Err(Error::StorageFull(format!(
                    "the file system of {what} has {} bytes free, less than the {} bytes memd keeps \
                     free there; nothing was stored. Free some space: writes resume by themselves",
                    room.free,
                    room.reserve()
                ))),
                _ => Ok(()),
            }
        };
        check(&data, "data/", if same { bytes } else { 0 })?;
        if !same {
            check(&facts, "memories/", bytes)?;
        }
        Ok(())
    }

    /// Catches up with every journal line the index lacks (recovering from
    /// a storage error first), rechecks journal files that changed inside
    /// their applied part, and returns how far behind the index still is.
    /// The caller holds the writer.
    pub(crate) fn catch_up_pending(&self, core: &Core) -> Result<Lag> {
        if core.index.behind().is_some() {
            self.recover(core)?;
        } else {
            let report = self.catch_up(core, &mut |_| {})?;
            if report.records > 0 {
                tracing::info!(
                    records = report.records,
                    "applied journal lines written by another process"
                );
            }
        }
        self.recheck_changed(core)?;
        backlog::lag(core)
    }

    /// Records the bad lines of journal files damaged inside their applied
    /// part (see [`backlog`]); returns how many files were read again.
    pub(crate) fn recheck_changed(&self, core: &Core) -> Result<usize> {
        let changed = self.backlog.changed_in_place(core)?;
        for file in &changed {
            let batch = backlog::recheck(core, file)?;
            if !batch.issues.is_empty() {
                tracing::warn!(
                    journal.file = %file,
                    lines = batch.issues.len(),
                    "journal lines changed after they were indexed"
                );
            }
            core.index.apply(&batch)?;
        }
        Ok(changed.len())
    }

    /// Marks a writer's index that opened (or could not catch up) on a
    /// full disk: it serves what it holds, and the first catch-up once
    /// there is room does the rest ([`CatchUp::recover`]).
    pub(crate) fn opened_on_full_disk(&self, core: &Core, reason: &str) {
        tracing::warn!(
            reason = %reason,
            "the disk is full: serving reads from the index as it is; writes are refused \
             until there is room, then the index catches up by itself"
        );
        self.opened_full
            .store(true, std::sync::atomic::Ordering::Release);
        core.index
            .mark_behind(format!("the disk was full at start ({reason})"));
        self.set_state(IndexState::Waiting {
            reason: reason.to_string(),
        });
    }

    /// The journal-independent steps of opening: the long-term expiry rule.
    fn finish_open(&self, core: &Core) -> Result<()> {
        if !core.config().lifecycle.tier_expiry {
            let cleared = core.index.clear_long_term_expiry()?;
            if cleared > 0 {
                tracing::info!(
                    memories = cleared,
                    "long-term memories no longer expire (lifecycle.tierExpiry is off)"
                );
            }
        }
        Ok(())
    }

    /// Brings the index in line with the Markdown documents on disk (see
    /// [`super::documents`]); `apply` runs the finished batch under the writer.
    pub(crate) fn sync_documents(
        &self,
        core: &Core,
        apply: &mut dyn FnMut(&Batch) -> Result<()>,
    ) -> Result<CatchUpReport> {
        self.documents.sync(core, apply).map(CatchUpReport::from)
    }

    /// Catches up with the journal and the documents while a writer opens the
    /// root, then checks that the two stores agree. A damaged index
    /// (corruption while applying, or a disagreement) is moved aside and
    /// rebuilt once; `healed` says it already was, by the integrity check.
    pub(crate) fn open_healing(
        &self,
        core: &mut Core,
        healed: Option<String>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let mut healed = healed;
        loop {
            let damage = match self.catch_up_checked(core, progress)? {
                Ok(report) => {
                    self.set_state(match healed {
                        Some(reason) => IndexState::Rebuilt { reason },
                        None => IndexState::Ok,
                    });
                    return Ok(report);
                }
                Err(damage) => damage,
            };
            if healed.is_some() {
                // A fresh index that still disagrees is a bug, not damage:
                // serve what there is and say so.
                tracing::error!(index.reason = %damage, "the rebuilt index is inconsistent; run `memd reindex`");
                self.set_state(IndexState::Degraded { reason: damage });
                return Ok(CatchUpReport::default());
            }
            let fresh = heal::replace(&core.layout.index(), &damage)?;
            fresh.set_lifecycle(core.config().lifecycle.clone());
            core.index = fresh;
            // What the last sync saw of each document describes the old index.
            self.documents.forget_stamps();
            healed = Some(damage);
        }
    }

    /// Rebuilds the index in place from the files, in the process that
    /// holds the writer (`memd reindex` next to a running daemon): empties
    /// it ([`crate::index::Index::clear`]) and runs the catch-up an open
    /// runs, then checks that the two stores agree. The caller holds the
    /// writer. Vectors are stored afterwards, by the caller.
    pub(crate) fn rebuild(
        &self,
        core: &Core,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        core.index.clear()?;
        // What the last sync saw of each document describes the old rows.
        self.documents.forget_stamps();
        let report = self.catch_up_all(core, progress)?;
        core.index.refresh()?;
        if let Some(reason) = core.index.disagreement()? {
            self.set_state(IndexState::Degraded {
                reason: reason.clone(),
            });
            return Err(crate::error::Error::Internal(format!(
                "the rebuilt index is inconsistent ({reason}); restart memd serve to rebuild it at open"
            )));
        }
        if let Some((failures, _)) = core.index.behind() {
            core.index.caught_up(failures);
        }
        self.set_state(IndexState::Ok);
        Ok(report)
    }

    /// Fills a new, empty index from the files (the temporary index of an
    /// `as_of` read, over the cut of the journal) and commits it.
    pub(crate) fn build(&self, core: &Core) -> Result<CatchUpReport> {
        let report = self.catch_up_all(core, &mut |_| {})?;
        core.index.refresh()?;
        Ok(report)
    }

    /// Catch-up and agreement check; `Ok(Err(reason))` when the index is damaged.
    fn catch_up_checked(
        &self,
        core: &Core,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<std::result::Result<CatchUpReport, String>> {
        let report = match self.catch_up_all(core, progress) {
            Ok(r) => r,
            Err(e) if index::is_damage(&e) => return Ok(Err(e.to_string())),
            Err(e) => return Err(e),
        };
        match core.index.disagreement() {
            Ok(None) => Ok(Ok(report)),
            Ok(Some(d)) => Ok(Err(d)),
            Err(e) if index::is_damage(&e) => Ok(Err(e.to_string())),
            Err(e) => Err(e),
        }
    }

    /// The journal, the long-term expiry rule and the documents, at open.
    fn catch_up_all(
        &self,
        core: &Core,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let mut report = self.catch_up(core, progress)?;
        self.finish_open(core)?;
        // Nobody else writes while the root opens: the batch is applied as it is.
        let docs = self.sync_documents(core, &mut |batch| core.index.apply(batch))?;
        report.documents_indexed = docs.documents_indexed;
        report.documents_removed = docs.documents_removed;
        report.documents_read = docs.documents_read;
        report.documents_invalid = docs.documents_invalid;
        report.vectors_stored += docs.vectors_stored;
        Ok(report)
    }

    /// Marks the index damaged when a read hit corruption (SQLite
    /// `SQLITE_CORRUPT`, unreadable tantivy files), so health says so with
    /// the reason. The running process cannot swap its index; the next start
    /// rebuilds it (the integrity check at open fails the same way).
    pub(crate) fn note_index_error(&self, e: &crate::error::Error) {
        if !index::is_damage(e) {
            return;
        }
        tracing::error!(error = %e, "the index is damaged; restart memd serve to rebuild it, or run `memd reindex`");
        self.set_state(IndexState::Degraded {
            reason: format!(
                "{e}; restart memd serve (it rebuilds a damaged index at start) or run `memd reindex`"
            ),
        });
    }

    pub(crate) fn set_state(&self, state: IndexState) {
        *self.state.lock().expect("index state poisoned") = state;
    }

    /// How the index came to be, or why it cannot be trusted now.
    pub(crate) fn state(&self) -> IndexState {
        self.state.lock().expect("index state poisoned").clone()
    }
}

/// Replays one journal file from `at.from`, applying a batch every
/// [`CATCH_UP_BATCH`] changes; `progress` hears where each applied batch ended.
fn replay_file(
    core: &Core,
    at: &mut FileReplay<'_>,
    batch: &mut Batch,
    report: &mut CatchUpReport,
    progress: &mut dyn FnMut(Cursor),
) -> Result<()> {
    let config = core.config();
    let pins = pins(&config);
    let tier_expiry = config.lifecycle.tier_expiry;
    let file = at.file;
    let torn = journal::scan_file(&core.layout.facts(), file, at.from, |item| {
        // The one credential check of every way in: a line that holds one
        // is quarantined, never indexed (a forget, which only hides, is
        // applied and reported). It comes first: a validation message may
        // name the id, and the id may be where the credential is.
        let entry = item.entry.and_then(|record| {
            let verdict = content::replay_verdict(&record);
            if !matches!(verdict, Replay::Quarantine(_)) {
                record.validate(&pins).map_err(|e| LineIssue {
                    file: file.to_string(),
                    line: item.cursor.lines,
                    message: e.to_string(),
                })?;
            }
            Ok((record, verdict))
        });
        match entry {
            Ok((record, verdict)) => {
                let line = item.cursor.lines;
                let (apply, hit) = match verdict {
                    Replay::Apply => (true, None),
                    Replay::ApplyReported(hit) => (true, Some(hit)),
                    Replay::Quarantine(hit) => (false, Some(hit)),
                };
                if let Some(hit) = hit {
                    let reason = if apply {
                        format!(
                            "{}; the forget is applied, its reason is not kept",
                            hit.reason()
                        )
                    } else {
                        format!("{}; not applied", hit.reason())
                    };
                    batch.quarantined.push(Quarantined {
                        file: file.to_string(),
                        line,
                        id: hit.shown_id(record.id()),
                        reason,
                    });
                    report.quarantined += 1;
                }
                if apply {
                    batch
                        .changes
                        .push(record_change(record, file, line, tier_expiry));
                    report.records += 1;
                }
            }
            Err(issue) => {
                tracing::warn!(journal.issue = %issue, "skipping unreadable journal line");
                report.bad_lines += 1;
                batch.issues.push(issue);
            }
        }
        at.last = item.cursor;
        if batch.changes.len() >= CATCH_UP_BATCH {
            batch.cursors.push((file.to_string(), at.last));
            core.index.apply(&std::mem::take(batch))?;
            progress(at.last);
            // A long catch-up on a small disk gives the write-ahead log's
            // space back between its bounded transactions.
            if core.index.room().is_some_and(|r| !r.takes(0)) {
                let _ = core.index.reclaim();
            }
        }
        Ok(())
    })?;
    if let Some(issue) = torn {
        tracing::warn!(journal.issue = %issue, "journal ends in an incomplete line");
    }
    Ok(())
}

fn record_change(record: Record, file: &str, line: u64, tier_expiry: bool) -> Change {
    match record {
        Record::Put { fact, at, .. } => Change::PutFact {
            at: at.unwrap_or(fact.ts),
            memory: backlog::memory_of(&fact, tier_expiry),
            extras: FactExtras {
                content_hash: (fact.stage == Stage::Long).then(|| {
                    crate::lifecycle::content_hash(
                        &fact.scene,
                        &fact.kind,
                        &fact.text,
                        fact.privacy,
                        fact.subject,
                    )
                }),
                accesses: fact.accesses,
                source_message_id: fact.source_message_id,
                idempotency_key: fact.idempotency_key,
                device: fact.device,
                journal: Some((file.to_string(), line)),
            },
        },
        Record::Forget { id, ts, .. } => Change::Forget { id, at: ts },
        Record::Touch { ids, ts, .. } => Change::Touch {
            ids,
            at: ts,
            line: Some((file.to_string(), line)),
        },
        Record::Link { link, .. } => Change::Link { link, on: true },
        Record::Unlink { link, .. } => Change::Link { link, on: false },
    }
}
