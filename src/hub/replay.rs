//! Catch-up: applying journal lines and Markdown documents to the index.
//!
//! The same replay runs on open, after every append, on reindex and when a
//! sync tool appends lines, so the index always equals a replay of the files.
//!
//! Every line meets the write rules before it is indexed
//! ([`crate::model::Record::validate`]): a line that breaks them (a sync tool
//! or a hand edit can append anything) is reported like an unreadable line,
//! as `FILE:LINE: reason`, and skipped; its neighbours are applied as usual.
//! Unless `lifecycle.tierExpiry` is on, a long-term fact is indexed without
//! an expiry whatever its line says: builds that expired tiers by default
//! wrote `expires_at` on every long-term line, and those memories must not
//! vanish.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::Hub;
use crate::error::Result;
use crate::ids;
use crate::index::meta::{DocumentRow, FactExtras};
use crate::index::{Batch, Change};
use crate::model::{Memory, Origin, Record, Stage};
use crate::store::journal::{self, LineIssue};
use crate::store::markdown;

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

impl Hub {
    /// Applies journal lines not yet in the index.
    pub(super) fn catch_up(&self, progress: &mut dyn FnMut(Progress)) -> Result<CatchUpReport> {
        let files = journal::list_all(&self.layout.facts())?;
        self.catch_up_files(&files, progress)
    }

    /// Applies journal lines of `files` not yet in the index.
    pub(super) fn catch_up_files(
        &self,
        files: &[String],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CatchUpReport> {
        let dir = self.layout.facts();
        let cursors = self.index.resume_cursors()?;
        let mut sizes = Vec::with_capacity(files.len());
        for f in files {
            sizes.push(journal::content_len(&dir, f)?);
        }
        let mut report = CatchUpReport::default();
        let mut batch = Batch::default();
        let total: u64 = sizes.iter().sum();
        let mut done_before = 0u64;
        let config = self.config();
        let pins = Self::pins(&config);
        let tier_expiry = self.config().lifecycle.tier_expiry;
        for (file, size) in files.iter().zip(sizes) {
            let mut from = cursors.get(file).copied().unwrap_or_default();
            if from.offset > size {
                tracing::warn!(journal.file = %file, "journal file is shorter than the index remembers; re-reading it");
                from = Default::default();
            }
            done_before += from.offset;
            let mut last = from;
            let torn = journal::scan_file(&dir, file, from, |item| {
                let entry = item.entry.and_then(|record| {
                    record
                        .validate(&pins)
                        .map(|()| record)
                        .map_err(|e| LineIssue {
                            file: file.clone(),
                            line: item.cursor.lines,
                            message: e.to_string(),
                        })
                });
                match entry {
                    Ok(record) => {
                        batch.changes.push(record_change(
                            record,
                            file,
                            item.cursor.lines,
                            tier_expiry,
                        ));
                        report.records += 1;
                    }
                    Err(issue) => {
                        tracing::warn!(journal.issue = %issue, "skipping unreadable journal line");
                        report.bad_lines += 1;
                        batch.issues.push(issue);
                    }
                }
                last = item.cursor;
                if batch.changes.len() >= CATCH_UP_BATCH {
                    batch.cursors.push((file.clone(), last));
                    self.index.apply(&std::mem::take(&mut batch))?;
                    progress(Progress {
                        done: done_before + (last.offset - from.offset),
                        total,
                    });
                }
                Ok(())
            })?;
            if let Some(issue) = torn {
                tracing::warn!(journal.issue = %issue, "journal ends in an incomplete line");
            }
            if last != from {
                batch.cursors.push((file.clone(), last));
            }
            done_before += last.offset - from.offset;
            progress(Progress {
                done: done_before,
                total,
            });
        }
        self.index.apply(&batch)?;
        Ok(report)
    }

    /// Applies journal lines appended by another process (a file sync tool)
    /// since the index last looked.
    pub fn catch_up_journal(&self) -> Result<CatchUpReport> {
        let _guard = self.writer_state()?;
        self.catch_up(&mut |_| {})
    }

    /// Brings the index back after a storage error ([`crate::index::Index::behind`]):
    /// applies every journal line past the cursors, re-syncs documents and
    /// commits. The caller holds the writer.
    pub(super) fn recover_index(&self) -> Result<()> {
        let Some((failures, reason)) = self.index.behind() else {
            return Ok(());
        };
        let report = self.catch_up(&mut |_| {})?;
        self.sync_documents_locked()?;
        self.index.refresh()?;
        self.index.caught_up(failures);
        tracing::info!(
            records = report.records,
            after = %reason,
            "index caught up with the journal after a storage error"
        );
        Ok(())
    }

    /// [`Hub::recover_index`] from a timer: skipped if the writer is busy
    /// (whoever holds it recovers on its own commit).
    pub(super) fn try_recover_index(&self) {
        let Some(writer) = &self.writer else {
            return;
        };
        let Ok(_guard) = writer.try_lock() else {
            return;
        };
        if let Err(e) = self.recover_index() {
            tracing::debug!(error = %e, "index still cannot catch up");
        }
    }

    /// Brings the index in line with the Markdown documents on disk.
    ///
    /// Files are listed, read and parsed first, with only the document-sync
    /// lock held (syncs run one at a time); the writer is taken only to apply
    /// the finished batch, so writes never wait on document parsing. A file
    /// whose size and modification time are unchanged since the last sync is
    /// not read again.
    pub fn sync_documents(&self) -> Result<CatchUpReport> {
        if !self.is_writer() {
            return Err(self.locked_error());
        }
        self.sync_documents_inner(false)
    }

    /// [`Hub::sync_documents`] by a caller that already holds the writer.
    fn sync_documents_locked(&self) -> Result<CatchUpReport> {
        self.sync_documents_inner(true)
    }

    /// Lists, reads and parses documents without the writer (so writes never
    /// wait on document parsing), then applies the batch under the writer
    /// unless `writer_held` says the caller has it already.
    fn sync_documents_inner(&self, writer_held: bool) -> Result<CatchUpReport> {
        let mut stamps = self.doc_stamps.lock().expect("document stamps poisoned");
        let memories = self.layout.memories();
        let known = self.index.meta.documents()?;
        let issues = self.index.meta.document_issues()?;
        let listing = markdown::scan(&memories)?;
        // The rules a document is read by are part of its recorded hash: a
        // changed default scene, chunk size or privacy pin re-reads every file.
        let rules = ids::sha256_hex(
            &serde_json::to_vec(&(&self.config().docs, &self.config().privacy))
                .expect("config serialises"),
        );
        let recorded = |bytes: &[u8]| format!("{}:{}", ids::sha256_hex(bytes), &rules[..16]);
        let mut report = CatchUpReport::default();
        let mut batch = Batch::default();
        let mut fresh = DocStamps::default();
        let report_issue = |batch: &mut Batch, rel: &str, message: String| {
            // An issue already on record for a file not in the index needs no write.
            if issues.get(rel) != Some(&message) || known.contains_key(rel) {
                batch.changes.push(Change::RemoveDocument {
                    // The id it was indexed under (a front matter `id` is not the path's).
                    doc_id: known
                        .get(rel)
                        .map_or_else(|| ids::doc_id(rel), |row| row.doc_id.clone()),
                    path: rel.to_string(),
                    issue: Some(message),
                });
            }
        };
        // Which document id each file on disk has (parsed now, or as indexed),
        // to find two files claiming the same front matter `id`.
        let mut claims: HashMap<String, Vec<String>> = HashMap::new();
        let mut parsed: Vec<(markdown::Document, String, String)> = Vec::new();
        for rel in &listing.documents {
            let path = memories.join(rel);
            let seen = SystemTime::now();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue; // Gone since the listing: the next sync removes it.
            };
            if let Some(stamp) = stamps.0.get(rel).filter(|s| s.unchanged(&meta)) {
                if let Some(row) = known.get(rel) {
                    claims
                        .entry(row.doc_id.clone())
                        .or_default()
                        .push(rel.clone());
                }
                fresh.0.insert(rel.clone(), stamp.clone());
                continue;
            }
            report.documents_read += 1;
            let outcome = markdown::read_bounded(&path).and_then(|(bytes, modified)| {
                let unchanged = !issues.contains_key(rel)
                    && known
                        .get(rel)
                        .is_some_and(|row| row.hash == recorded(&bytes));
                if unchanged {
                    return Ok(None);
                }
                let doc = markdown::from_bytes(
                    rel,
                    &bytes,
                    modified,
                    &self.config().docs,
                    &self.config().privacy,
                )?;
                Ok(Some((doc, recorded(&bytes))))
            });
            match outcome {
                Ok(None) => {
                    if let Some(row) = known.get(rel) {
                        claims
                            .entry(row.doc_id.clone())
                            .or_default()
                            .push(rel.clone());
                    }
                }
                Ok(Some((doc, hash))) => {
                    claims
                        .entry(doc.doc_id.clone())
                        .or_default()
                        .push(rel.clone());
                    parsed.push((doc, hash, rel.clone()));
                }
                Err(e @ crate::Error::Io { .. }) => {
                    // Not recorded: tried again on the next sync.
                    tracing::warn!(doc.path = %rel, error = %e, "cannot read document");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(doc.path = %rel, error = %e, "document not indexed");
                    report.documents_invalid += 1;
                    report_issue(&mut batch, rel, e.to_string());
                }
            }
            fresh.0.insert(rel.clone(), Stamp::of(&meta, seen));
        }
        // Two files claiming one id: both are reported and neither is indexed
        // (whichever came first would depend on the order files are listed in);
        // they are read again on every sync until one of them gives way.
        let mut contested: HashSet<String> = HashSet::new();
        for (doc_id, paths) in &claims {
            if paths.len() < 2 {
                continue;
            }
            for rel in paths {
                let others: Vec<&str> = paths
                    .iter()
                    .filter(|p| *p != rel)
                    .map(String::as_str)
                    .collect();
                report.documents_invalid += 1;
                report_issue(
                    &mut batch,
                    rel,
                    format!(
                        "front matter: `id` {} is also claimed by {}; neither file is indexed",
                        doc_id.trim_start_matches("doc-id-"),
                        others.join(", ")
                    ),
                );
                fresh.0.remove(rel);
                contested.insert(rel.clone());
            }
        }
        // A file whose id changed (an `id` added, changed or dropped) leaves
        // its old id first: paths are unique in the index, and every put
        // below comes after every such removal.
        for (doc, _, rel) in &parsed {
            if let Some(row) = known.get(rel).filter(|row| row.doc_id != doc.doc_id) {
                batch.changes.push(Change::RemoveDocument {
                    doc_id: row.doc_id.clone(),
                    path: rel.clone(),
                    issue: None,
                });
            }
        }
        let mut put: HashSet<String> = HashSet::new();
        for (doc, hash, rel) in parsed {
            if contested.contains(&rel) {
                continue;
            }
            let chunks = document_chunks(&doc);
            put.insert(doc.doc_id.clone());
            batch.changes.push(Change::PutDocument {
                row: DocumentRow {
                    doc_id: doc.doc_id.clone(),
                    path: doc.rel_path.clone(),
                    hash,
                    title: doc.title.clone(),
                    chunks: chunks.len(),
                },
                chunks,
            });
            report.documents_indexed += 1;
        }
        for rel in &listing.links {
            report.documents_invalid += 1;
            report_issue(&mut batch, rel, markdown::SYMLINK_ISSUE.to_string());
        }
        let on_disk: HashSet<&str> = listing
            .documents
            .iter()
            .chain(&listing.links)
            .map(String::as_str)
            .collect();
        for (path, row) in &known {
            // A renamed document with a front matter `id` was put under its
            // new path above, replacing this row: removing it would remove that.
            if !on_disk.contains(path.as_str()) && !put.contains(&row.doc_id) {
                batch.changes.push(Change::RemoveDocument {
                    doc_id: row.doc_id.clone(),
                    path: path.clone(),
                    issue: None,
                });
                report.documents_removed += 1;
            }
        }
        for path in issues.keys() {
            if !on_disk.contains(path.as_str()) && !known.contains_key(path) {
                // The file with a problem is gone: so is the problem.
                batch.changes.push(Change::RemoveDocument {
                    doc_id: ids::doc_id(path),
                    path: path.clone(),
                    issue: None,
                });
            }
        }
        if !batch.changes.is_empty() {
            let _guard = if writer_held {
                None
            } else {
                Some(self.writer_state()?)
            };
            self.index.apply(&batch)?;
        }
        *stamps = fresh;
        Ok(report)
    }
}

/// What the last document sync saw of each file (path relative to
/// `memories/` → size and modification time), so that the next sync reads
/// only files that changed.
#[derive(Debug, Default)]
pub(super) struct DocStamps(HashMap<String, Stamp>);

#[derive(Debug, Clone)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// When the file was looked at.
    seen: SystemTime,
}

/// A file modified this close to the moment it was read may be rewritten
/// within the same timestamp tick; such a file is read again next time.
const RACY_WINDOW: Duration = Duration::from_secs(2);

impl Stamp {
    fn of(meta: &std::fs::Metadata, seen: SystemTime) -> Stamp {
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            seen,
        }
    }

    fn unchanged(&self, meta: &std::fs::Metadata) -> bool {
        let Some(modified) = self.modified else {
            return false;
        };
        meta.len() == self.len
            && meta.modified().ok() == Some(modified)
            && modified + RACY_WINDOW <= self.seen
    }
}

fn record_change(record: Record, file: &str, line: u64, tier_expiry: bool) -> Change {
    match record {
        Record::Put { fact, at, .. } => Change::PutFact {
            at: at.unwrap_or(fact.ts),
            memory: {
                let mut m = Memory::from(&fact);
                if fact.stage == Stage::Long && !tier_expiry {
                    m.expires_at = None;
                }
                m
            },
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
    }
}

fn document_chunks(doc: &markdown::Document) -> Vec<Memory> {
    doc.chunks
        .iter()
        .map(|c| Memory {
            id: ids::chunk_id(&doc.doc_id, c.ord),
            origin: Origin::Doc,
            doc_id: Some(doc.doc_id.clone()),
            path: Some(doc.rel_path.clone()),
            ts: doc.modified,
            scene: doc.scene.clone(),
            kind: doc.kind.clone(),
            stage: Stage::Long,
            title: Some(match &c.heading {
                Some(h) if *h != doc.title => format!("{} › {h}", doc.title),
                _ => doc.title.clone(),
            }),
            text: c.text.clone(),
            tags: doc.tags.clone(),
            privacy: doc.privacy,
            subject: doc.subject,
            source: "doc".into(),
            importance: doc.importance,
            tier: doc.tier,
            supersedes: None,
            expires_at: None,
            setting: Default::default(),
        })
        .collect()
}
