//! The Markdown side of catch-up: bringing the index in line with the
//! documents under `memories/`.
//!
//! Files are listed, read and parsed first, with only this part's lock held
//! (syncs run one at a time); the finished batch is handed to the caller,
//! which applies it under the writer, so writes never wait on document
//! parsing. A file whose size and modification time are unchanged since the
//! last sync is not read again. A document the rules refuse (bad front
//! matter, too large, a link, an `id` two files claim) is reported and never
//! indexed.
//!
//! A document keeps its id when its file is renamed or moved: a file at a
//! new path whose bytes are those of an indexed document whose path is gone
//! takes that document's id, and the move is recorded in the rename ledger
//! ([`crate::store::renames`]) before the batch is applied, so a rebuilt
//! index gives it the same id. Files whose id is looked up by their path
//! (`user/identity.md`, `audiences/`, `categories/`) keep their path's id.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::Core;
use crate::error::Result;
use crate::ids;
use crate::index::meta::DocumentRow;
use crate::index::{Batch, Change};
use crate::model::{Memory, Origin, Stage};
use crate::store::markdown;
use crate::store::renames::{Rename, Renames};

/// What a document sync did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DocumentsReport {
    /// Documents (re)indexed.
    pub(crate) documents_indexed: u64,
    /// Documents removed from the index.
    pub(crate) documents_removed: u64,
    /// Document files read (unchanged files are not read again).
    pub(crate) documents_read: u64,
    /// Documents found invalid (bad front matter, too large, links, contested ids).
    pub(crate) documents_invalid: u64,
}

/// What the last document sync saw of each file (path relative to
/// `memories/` → size and modification time), so that the next sync reads
/// only files that changed.
#[derive(Debug, Default)]
pub(crate) struct Documents {
    stamps: Mutex<DocStamps>,
}

#[derive(Debug, Default)]
struct DocStamps(HashMap<String, Stamp>);

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

impl Documents {
    /// Reads what changed under `memories/` and hands the resulting batch
    /// (if any) to `apply`, which the caller runs under the writer.
    pub(crate) fn sync(
        &self,
        core: &Core,
        apply: &mut dyn FnMut(&Batch) -> Result<()>,
    ) -> Result<DocumentsReport> {
        let mut stamps = self.stamps.lock().expect("document stamps poisoned");
        let mut pass = Pass::begin(core)?;
        pass.read_changed(core, &stamps)?;
        pass.keep_moved_ids(core)?;
        pass.refuse_contested();
        pass.put_parsed();
        pass.remove_gone();
        if !pass.batch.changes.is_empty() {
            apply(&pass.batch)?;
        }
        *stamps = pass.fresh;
        Ok(pass.report)
    }

    /// Forgets what earlier syncs saw (the index they describe was replaced).
    pub(crate) fn forget_stamps(&self) {
        *self.stamps.lock().expect("document stamps poisoned") = DocStamps::default();
    }
}

/// One document sync in progress.
struct Pass {
    memories: std::path::PathBuf,
    known: HashMap<String, DocumentRow>,
    issues: HashMap<String, String>,
    listing: markdown::Listing,
    /// The rules a document is read by are part of its recorded hash: a
    /// changed default scene, chunk size or privacy pin re-reads every file.
    rules: String,
    report: DocumentsReport,
    batch: Batch,
    fresh: DocStamps,
    /// Which document id each file on disk has (parsed now, or as indexed),
    /// to find two files claiming the same front matter `id`.
    claims: HashMap<String, Vec<String>>,
    parsed: Vec<(markdown::Document, String, String)>,
    contested: HashSet<String>,
    put: HashSet<String>,
    /// Which id each moved document's path carries (the rename ledger).
    renames: Renames,
}

impl Pass {
    fn begin(core: &Core) -> Result<Pass> {
        let memories = core.layout.memories();
        let config = core.config();
        let rules = ids::sha256_hex(
            &serde_json::to_vec(&(&config.docs, &config.privacy)).expect("config serialises"),
        );
        Ok(Pass {
            known: core.index.meta.documents()?,
            issues: core.index.meta.document_issues()?,
            listing: markdown::scan(&memories)?,
            memories,
            rules,
            report: DocumentsReport::default(),
            batch: Batch::default(),
            fresh: DocStamps::default(),
            claims: HashMap::new(),
            parsed: Vec::new(),
            contested: HashSet::new(),
            put: HashSet::new(),
            renames: Renames::load(&core.layout.memories())?,
        })
    }

    /// The hash recorded for a file's bytes under the current rules.
    fn recorded(&self, bytes: &[u8]) -> String {
        format!("{}:{}", ids::sha256_hex(bytes), &self.rules[..16])
    }

    /// Reports a file that is not indexed, unless that is already on record.
    fn report_issue(&mut self, rel: &str, message: String) {
        // An issue already on record for a file not in the index needs no write.
        if self.issues.get(rel) != Some(&message) || self.known.contains_key(rel) {
            self.batch.changes.push(Change::RemoveDocument {
                // The id it was indexed under (a front matter `id` is not the path's).
                doc_id: self
                    .known
                    .get(rel)
                    .map_or_else(|| ids::doc_id(rel), |row| row.doc_id.clone()),
                path: rel.to_string(),
                issue: Some(message),
            });
        }
    }

    /// Records that `rel` carries the id it is indexed under.
    fn claim_indexed(&mut self, rel: &str) {
        if let Some(row) = self.known.get(rel) {
            self.claims
                .entry(row.doc_id.clone())
                .or_default()
                .push(rel.to_string());
        }
    }

    /// Reads and parses every file that changed since the last sync.
    fn read_changed(&mut self, core: &Core, stamps: &DocStamps) -> Result<()> {
        let documents = std::mem::take(&mut self.listing.documents);
        for rel in &documents {
            let path = self.memories.join(rel);
            let seen = SystemTime::now();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue; // Gone since the listing: the next sync removes it.
            };
            if let Some(stamp) = stamps.0.get(rel).filter(|s| s.unchanged(&meta)) {
                self.claim_indexed(rel);
                self.fresh.0.insert(rel.clone(), stamp.clone());
                continue;
            }
            self.report.documents_read += 1;
            if self.read_one(core, rel, &path) {
                self.fresh.0.insert(rel.clone(), Stamp::of(&meta, seen));
            }
        }
        self.listing.documents = documents;
        Ok(())
    }

    /// Reads one changed file; false when it could not be read (tried again next time).
    fn read_one(&mut self, core: &Core, rel: &str, path: &std::path::Path) -> bool {
        let config = core.config();
        let outcome = markdown::read_bounded(path).and_then(|(bytes, modified)| {
            let unchanged = !self.issues.contains_key(rel)
                && self
                    .known
                    .get(rel)
                    .is_some_and(|row| row.hash == self.recorded(&bytes));
            if unchanged {
                return Ok(None);
            }
            let mut doc =
                markdown::from_bytes(rel, &bytes, modified, &config.docs, &config.privacy)?;
            if doc.doc_id == ids::doc_id(rel) && !looked_up_by_path(rel) {
                doc.doc_id = self.renames.id_for(rel);
            }
            Ok(Some((doc, self.recorded(&bytes))))
        });
        match outcome {
            Ok(None) => self.claim_indexed(rel),
            Ok(Some((doc, hash))) => {
                self.claims
                    .entry(doc.doc_id.clone())
                    .or_default()
                    .push(rel.to_string());
                self.parsed.push((doc, hash, rel.to_string()));
            }
            Err(e @ crate::Error::Io { .. }) => {
                // Not recorded: tried again on the next sync.
                tracing::warn!(doc.path = %rel, error = %e, "cannot read document");
                return false;
            }
            Err(e) => {
                tracing::warn!(doc.path = %rel, error = %e, "document not indexed");
                self.report.documents_invalid += 1;
                self.report_issue(rel, e.to_string());
            }
        }
        true
    }

    /// A parsed file at a new path with the bytes of an indexed document
    /// whose path is gone is that document, moved: it takes the document's
    /// id, and the move is recorded in the rename ledger first.
    fn keep_moved_ids(&mut self, core: &Core) -> Result<()> {
        let on_disk: HashSet<&String> = self.listing.documents.iter().collect();
        // Indexed documents whose file is gone, by recorded hash (each taken once).
        let mut gone: HashMap<&str, Vec<&DocumentRow>> = HashMap::new();
        for (path, row) in &self.known {
            if !on_disk.contains(path) && !looked_up_by_path(path) {
                gone.entry(row.hash.as_str()).or_default().push(row);
            }
        }
        if gone.is_empty() {
            return Ok(());
        }
        for rows in gone.values_mut() {
            rows.sort_by(|a, b| b.path.cmp(&a.path));
        }
        let mut moves = Vec::new();
        for (i, (doc, hash, rel)) in self.parsed.iter().enumerate() {
            let path_id = !self.renames.moved_here(rel) && doc.doc_id == self.renames.id_for(rel);
            if self.known.contains_key(rel) || !path_id || looked_up_by_path(rel) {
                continue;
            }
            if let Some(row) = gone.get_mut(hash.as_str()).and_then(Vec::pop) {
                moves.push((i, row.doc_id.clone(), row.path.clone()));
            }
        }
        for (i, id, from) in moves {
            let rel = self.parsed[i].2.clone();
            let m = Rename {
                at: core.now(),
                id: id.clone(),
                from,
                to: rel.clone(),
            };
            crate::store::renames::record(&core.layout.memories(), &core.device, &m)?;
            self.renames.apply(&m);
            tracing::info!(doc.id = %id, doc.from = %m.from, doc.path = %rel, "document moved; it keeps its id");
            let old = std::mem::replace(&mut self.parsed[i].0.doc_id, id.clone());
            if let Some(paths) = self.claims.get_mut(&old) {
                paths.retain(|p| *p != rel);
            }
            self.claims.entry(id).or_default().push(rel);
        }
        Ok(())
    }

    /// Two files claiming one id: both are reported and neither is indexed
    /// (whichever came first would depend on the order files are listed in);
    /// they are read again on every sync until one of them gives way.
    fn refuse_contested(&mut self) {
        let claims = std::mem::take(&mut self.claims);
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
                self.report.documents_invalid += 1;
                self.report_issue(
                    rel,
                    format!(
                        "front matter: `id` {} is also claimed by {}; neither file is indexed",
                        doc_id.trim_start_matches("doc-id-"),
                        others.join(", ")
                    ),
                );
                self.fresh.0.remove(rel);
                self.contested.insert(rel.clone());
            }
        }
    }

    /// Puts every parsed document that no other file contests.
    fn put_parsed(&mut self) {
        // A file whose id changed (an `id` added, changed or dropped) leaves
        // its old id first: paths are unique in the index, and every put
        // below comes after every such removal.
        for (doc, _, rel) in &self.parsed {
            if let Some(row) = self.known.get(rel).filter(|row| row.doc_id != doc.doc_id) {
                self.batch.changes.push(Change::RemoveDocument {
                    doc_id: row.doc_id.clone(),
                    path: rel.clone(),
                    issue: None,
                });
            }
        }
        for (doc, hash, rel) in std::mem::take(&mut self.parsed) {
            if self.contested.contains(&rel) {
                continue;
            }
            let chunks = document_chunks(&doc);
            self.put.insert(doc.doc_id.clone());
            self.batch.changes.push(Change::PutDocument {
                row: DocumentRow {
                    doc_id: doc.doc_id.clone(),
                    path: doc.rel_path.clone(),
                    hash,
                    title: doc.title.clone(),
                    chunks: chunks.len(),
                },
                chunks,
            });
            self.report.documents_indexed += 1;
        }
    }

    /// Reports links, and removes documents (and problems) whose file is gone.
    fn remove_gone(&mut self) {
        for rel in self.listing.links.clone() {
            self.report.documents_invalid += 1;
            self.report_issue(&rel, markdown::SYMLINK_ISSUE.to_string());
        }
        let on_disk: HashSet<&str> = self
            .listing
            .documents
            .iter()
            .chain(&self.listing.links)
            .map(String::as_str)
            .collect();
        for (path, row) in &self.known {
            // A renamed document with a front matter `id` was put under its
            // new path above, replacing this row: removing it would remove that.
            if !on_disk.contains(path.as_str()) && !self.put.contains(&row.doc_id) {
                self.batch.changes.push(Change::RemoveDocument {
                    doc_id: row.doc_id.clone(),
                    path: path.clone(),
                    issue: None,
                });
                self.report.documents_removed += 1;
            }
        }
        for path in self.issues.keys() {
            if !on_disk.contains(path.as_str()) && !self.known.contains_key(path) {
                // The file with a problem is gone: so is the problem.
                self.batch.changes.push(Change::RemoveDocument {
                    doc_id: ids::doc_id(path),
                    path: path.clone(),
                    issue: None,
                });
            }
        }
    }
}

/// Whether memd finds the document at `rel` by its path (the owner's
/// identity, audience cards, categories): such a file keeps its path's id.
fn looked_up_by_path(rel: &str) -> bool {
    rel == "user/identity.md" || rel.starts_with("audiences/") || rel.starts_with("categories/")
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
