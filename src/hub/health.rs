//! Health of a running hub, per component: what `/v1/health`, `memd health`
//! and the MCP `health://status` resource report.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::parts::backlog;
use super::parts::heal::IndexState;
use super::{Hub, Stats};
use crate::disk::Room;
use crate::embed::EmbedderStatus;
use crate::error::Result;
use crate::store::journal;
use crate::timetable::{self, JobState};

/// One component's state.
#[derive(Debug, Clone, Serialize)]
pub struct Component {
    /// `ok` or `degraded`.
    pub status: &'static str,
    /// What was found.
    pub detail: String,
    /// For the index: `rebuilt` (it was damaged and rebuilt when the writer
    /// opened it) or `damaged` (it cannot be trusted until rebuilt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
    /// Why the index is in that state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn component(ok: bool, detail: String) -> Component {
    Component {
        status: if ok { "ok" } else { "degraded" },
        detail,
        state: None,
        reason: None,
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    /// `ok` when every component is, else `degraded`.
    pub(crate) status: &'static str,
    /// Whether this process holds the writer lock.
    pub(crate) writer: bool,
    /// Searchable memories.
    pub(crate) memories: u64,
    /// Facts (not forgotten).
    pub(crate) facts: u64,
    /// Markdown documents.
    pub(crate) documents: u64,
    /// Unreadable journal lines and documents.
    pub(crate) issues: usize,
    /// Symbolic links under `memories/`: never followed, so not indexed,
    /// not written through and not backed up (`memd doctor` names each).
    pub(crate) links: usize,
    /// Journal lines the index has not applied yet (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) index_behind: Option<u64>,
    /// Stored vectors.
    pub(crate) vectors: u64,
    /// Memories waiting for a vector.
    pub(crate) pending_vectors: u64,
    /// journal, documents, index, embedder, disk.
    pub components: BTreeMap<&'static str, Component>,
    /// Active memories by stage, scene, privacy and tier.
    pub(crate) counts: BTreeMap<&'static str, HashMap<String, u64>>,
    /// Scheduled jobs (daily backup, consolidation): last and next runs.
    pub(crate) jobs: BTreeMap<String, JobState>,
    /// Long-term memories per retention tier against their budgets.
    pub(crate) tiers: super::TierReport,
}

/// Journal lines applied per device directory (`legacy` for flat files),
/// from the index's cursors.
pub(crate) fn lines_per_device(
    cursors: &HashMap<String, journal::Cursor>,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (file, c) in cursors {
        let dev = journal::device_of(file).unwrap_or("legacy").to_string();
        *out.entry(dev).or_insert(0) += c.lines;
    }
    out
}

impl Hub {
    /// Component states, counts and scheduled jobs.
    pub fn health(&self) -> Result<HealthReport> {
        let stats = self.stats()?;
        let links = crate::store::links::find(&self.layout().memories());
        let mut components = BTreeMap::new();
        components.insert("journal", journal_component(&stats, &links));
        components.insert("documents", documents_component(&stats));
        let cursors = self.index().meta.cursors()?;
        components.insert("sync", sync_component(self, &cursors));
        components.insert("index", index_component(self, &stats, &cursors)?);
        components.insert("embedder", embedder_component(self, &stats));
        components.insert("disk", disk_component(self));
        components.insert("members", members_component(self));
        let status = if components.values().all(|c| c.status == "ok") {
            "ok"
        } else {
            "degraded"
        };
        let mut counts = BTreeMap::new();
        counts.insert("by_stage", stats.counts.by_stage.clone());
        counts.insert("by_scene", stats.counts.by_scene.clone());
        counts.insert("by_privacy", stats.counts.by_privacy.clone());
        counts.insert("by_tier", stats.counts.by_tier.clone());
        Ok(HealthReport {
            status,
            writer: stats.writer,
            memories: stats.counts.memories,
            facts: stats.counts.facts,
            documents: stats.counts.documents,
            issues: stats.issues.len(),
            links: links.len(),
            index_behind: self.index_behind(None)?,
            vectors: stats.vectors,
            pending_vectors: stats.pending_vectors,
            components,
            counts,
            jobs: timetable::load_states(&timetable::state_path(self.layout())),
            tiers: self.tier_report()?,
        })
    }
}

/// The `sync` component: lines applied per device, and sync conflict
/// copies below `memories/` (degraded while there are any).
fn sync_component(hub: &Hub, cursors: &HashMap<String, journal::Cursor>) -> Component {
    let per_device = lines_per_device(cursors);
    let devices = per_device
        .iter()
        .map(|(d, n)| format!("{d} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let (copies, total) = crate::store::syncfiles::conflict_copies(&hub.layout().memories(), 1);
    let mut detail = format!(
        "this device {}; lines applied per device: {}",
        hub.device(),
        if devices.is_empty() {
            "none".into()
        } else {
            devices
        }
    );
    if let Some(first) = copies.first() {
        detail.push_str(&format!(
            "; {total} sync conflict copies (first: {first}), not indexed: merge them by hand and delete them"
        ));
    }
    component(total == 0, detail)
}

/// Where the embedder stands, without loading it.
pub(crate) fn embedder_status(hub: &Hub) -> EmbedderStatus {
    hub.searcher.embedder_status()
}

/// The `index` component: journal lines and bytes not applied yet, a
/// storage error it is catching up from, and whether it was rebuilt, is
/// damaged or waits for room on a full disk.
fn index_component(
    hub: &Hub,
    stats: &Stats,
    _cursors: &HashMap<String, journal::Cursor>,
) -> Result<Component> {
    let lag = backlog::lag(&hub.core)?;
    let lines = if lag.bytes == 0 {
        0
    } else {
        backlog::lines_for(&hub.core, None)?
    };
    let mut detail = format!(
        "{} text documents, {} bytes, {} journal lines ({} bytes) not applied",
        stats.text_documents, stats.index_bytes, lines, lag.bytes
    );
    if lag.bytes > 0 && hub.is_writer() {
        detail.push_str(": the writer applies them by itself, retrying until it has");
    }
    let behind = hub.index().behind();
    if let Some((_, reason)) = &behind {
        detail = format!(
            "behind the journal after a storage error ({reason}); nothing is lost: \
             searches say how many lines they miss, `get` reads those from the journal, \
             and it catches up by itself once there is room; {detail}"
        );
    }
    let mut index = component(lag.bytes == 0 && behind.is_none(), detail);
    match hub.catchup.state() {
        IndexState::Ok => {}
        IndexState::Rebuilt { reason } => {
            index.state = Some("rebuilt");
            index.reason = Some(reason);
        }
        IndexState::Degraded { reason } => {
            index.status = "degraded";
            index.state = Some("damaged");
            index.reason = Some(reason);
        }
        IndexState::Waiting { reason } => {
            index.status = "degraded";
            index.state = Some("waiting");
            index.reason = Some(format!(
                "{reason}; reads are served from the index as it was, writes are refused \
                 until there is room"
            ));
        }
    }
    Ok(index)
}

/// The `embedder` component: the model, its vectors and the lexicon.
fn embedder_component(hub: &Hub, stats: &Stats) -> Component {
    let mut embedder = match embedder_status(hub) {
        EmbedderStatus::Loaded(model) => component(
            true,
            format!(
                "{model}: {} vectors, {} pending",
                stats.vectors, stats.pending_vectors
            ),
        ),
        EmbedderStatus::NotLoaded => component(
            true,
            format!(
                "loads on first need; {} vectors, {} pending",
                stats.vectors, stats.pending_vectors
            ),
        ),
        EmbedderStatus::Unavailable(reason) if !hub.config().embedder.enabled => {
            component(true, format!("disabled: full-text search only ({reason})"))
        }
        EmbedderStatus::Unavailable(reason) => component(
            false,
            format!("unavailable: {reason}; full-text search keeps working"),
        ),
    };
    embedder.detail = format!(
        "{}; {}",
        embedder.detail,
        crate::embed::dictionary::status()
    );
    embedder
}

/// The `disk` component: free space on each file system memd writes
/// (`memories/`, `data/`, the backup directory), each against its own
/// reserve (see [`crate::disk`]): degraded when one has less, since writes
/// (or backups) are refused there.
fn disk_component(hub: &Hub) -> Component {
    let layout = hub.layout();
    let backups = hub.config().backup.dir_for(layout);
    let mut places: Vec<(u64, Vec<&'static str>, std::path::PathBuf)> = Vec::new();
    for (name, path) in [
        ("memories/", layout.memories()),
        ("data/", layout.data()),
        ("backups", backups),
    ] {
        // The backup directory may not exist yet: its parent's file system.
        let probe = std::iter::successors(Some(path.as_path()), |p| p.parent())
            .find(|p| p.exists())
            .unwrap_or(path.as_path())
            .to_path_buf();
        let dev = crate::disk::device(&probe).unwrap_or(u64::MAX);
        match places.iter_mut().find(|(d, _, _)| *d == dev) {
            Some((_, names, _)) => names.push(name),
            None => places.push((dev, vec![name], probe)),
        }
    }
    let mut ok = true;
    let mut parts = Vec::new();
    for (_, names, probe) in &places {
        match Room::of(probe) {
            Some(room) => {
                let short = !room.takes(0);
                ok &= !short;
                parts.push(format!(
                    "{}: {} bytes free of {} (keeps {} free{})",
                    names.join(" and "),
                    room.free,
                    room.total,
                    room.reserve(),
                    if short {
                        "; writes there are refused until space is freed"
                    } else {
                        ""
                    }
                ));
            }
            None => {
                ok = false;
                parts.push(format!("{}: free space unknown", names.join(" and ")));
            }
        }
    }
    component(ok, parts.join("; "))
}

/// The `members` component: the group membership table disclosure reads.
/// A damaged one refuses every disclosure (fail closed) until it is fixed.
fn members_component(hub: &Hub) -> Component {
    let path = crate::store::members::path(&hub.layout().memories());
    match crate::store::members::check(&path) {
        Ok(groups) => component(true, format!("{groups} groups with known members")),
        Err(e) => component(
            false,
            format!(
                "{e}; disclosure refuses every request until memories/groups/members.json is \
                 fixed or restored from a backup"
            ),
        ),
    }
}

/// The `journal` component: files, bytes, unreadable lines, lines
/// quarantined on replay (a credential in a field, a line that would move a
/// memory or lower its privacy), and symbolic links below `memories/facts/`
/// (never followed: a linked journal is not read).
fn journal_component(stats: &Stats, links: &[String]) -> Component {
    let journal: Vec<&String> = stats
        .issues
        .iter()
        .filter(|i| i.starts_with("facts/"))
        .collect();
    let quarantined = journal.iter().filter(|i| is_quarantine(i)).count();
    let bad_lines = journal.len() - quarantined;
    let linked: Vec<&String> = links.iter().filter(|l| l.starts_with("facts/")).collect();
    let mut detail = format!(
        "{} files, {} bytes, {bad_lines} unreadable lines, {quarantined} lines quarantined \
         (not indexed; `memd stats` lists them)",
        stats.journal_files, stats.journal_bytes
    );
    if let Some(first) = linked.first() {
        detail.push_str(&format!(
            "; {} symbolic links not followed (first: {first}; `memd doctor` names them all)",
            linked.len()
        ));
    }
    component(journal.is_empty() && linked.is_empty(), detail)
}

/// Whether an issue line reports a quarantined journal line.
fn is_quarantine(issue: &str) -> bool {
    issue
        .split_once(": ")
        .is_some_and(|(_, rest)| rest.starts_with("quarantined: "))
}

/// The `documents` component: documents indexed, and the first one not.
fn documents_component(stats: &Stats) -> Component {
    let doc_issues: Vec<&String> = stats
        .issues
        .iter()
        .filter(|i| !i.starts_with("facts/"))
        .collect();
    component(
        doc_issues.is_empty(),
        match doc_issues.first() {
            None => format!("{} documents indexed", stats.counts.documents),
            Some(first) => format!(
                "{} documents indexed, {} not indexed (first: {first}); `memd stats` lists them",
                stats.counts.documents,
                doc_issues.len()
            ),
        },
    )
}
