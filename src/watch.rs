//! The file watcher of `memd serve`: a Markdown document created, edited,
//! renamed or deleted under `memories/`, or journal lines appended by another
//! process (a file sync tool), reach the index within about a second.
//!
//! Only events that can change content count: creations, removals, renames,
//! data writes and a close after writing. Opening, reading, closing after
//! reading and metadata changes (atime) are ignored — a document sync reads
//! every changed file, and reacting to those reads made the watcher wake
//! itself forever. An idle daemon therefore does no document work at all
//! ([`WatchHandle::counts`] says how much it did).
//!
//! Events are debounced: the first event opens a short window, everything
//! arriving in it is handled by one document sync and/or one journal catch-up.
//! Our own appends wake the watcher too; their catch-up finds nothing new.
//!
//! Catching up is a loop, not an event: events can be missed (a file
//! created in a new directory before inotify watches it, a queue overflow),
//! and a catch-up can fail (a full disk). So
//! - a new directory is scanned as soon as its watch is added (a directory
//!   event below `facts/` asks for a journal catch-up, which lists every
//!   file);
//! - while the index is behind the journal (any device's file, or a storage
//!   error) the catch-up is retried with back-off (250 ms doubling
//!   up to 2 s) until it is not;
//! - every 30 s (`RESCAN`) the whole tree is looked at (one `stat` per journal
//!   file, and a document sync that reads only changed files), which covers
//!   whatever events were missed.
//!
//! The loop runs even when the watcher cannot start (the inotify limit):
//! then the rescan and the retries are all there is.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{RecursiveMode, Watcher};

use crate::error::{Error, Result};
use crate::hub::Hub;

/// How long events are collected before acting on them.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// How often the whole tree is scanned for changes no event announced.
pub(crate) const RESCAN: Duration = Duration::from_secs(30);

/// The first wait before a catch-up is retried while the index is behind.
const RETRY_FIRST: Duration = Duration::from_millis(250);

/// The longest wait between retries (space returning is noticed this fast).
const RETRY_MAX: Duration = Duration::from_secs(2);

/// A running watcher; stops when dropped.
pub struct WatchHandle {
    stop: Arc<AtomicBool>,
    counts: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
    watcher: Option<notify::RecommendedWatcher>,
    /// Keeps the event channel open without a watcher; dropped to wake the thread.
    wake: Option<mpsc::Sender<notify::Result<notify::Event>>>,
}

/// What a watcher has done since it started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WatchCounts {
    /// Events that could change content (the rest are ignored).
    pub(crate) events: u64,
    /// Document syncs run.
    pub document_syncs: u64,
    /// Journal catch-ups run.
    pub(crate) journal_catch_ups: u64,
    /// Whole-tree rescans run.
    pub rescans: u64,
    /// `config.json` changes handled (config watcher only).
    pub config_reloads: u64,
}

#[derive(Debug, Default)]
struct Counters {
    events: AtomicU64,
    document_syncs: AtomicU64,
    journal_catch_ups: AtomicU64,
    rescans: AtomicU64,
    config_reloads: AtomicU64,
}

impl WatchHandle {
    /// What the watcher has done so far.
    pub fn counts(&self) -> WatchCounts {
        WatchCounts {
            events: self.counts.events.load(Ordering::SeqCst),
            document_syncs: self.counts.document_syncs.load(Ordering::SeqCst),
            journal_catch_ups: self.counts.journal_catch_ups.load(Ordering::SeqCst),
            rescans: self.counts.rescans.load(Ordering::SeqCst),
            config_reloads: self.counts.config_reloads.load(Ordering::SeqCst),
        }
    }
}

/// Whether an event of this kind can mean changed content.
fn changes_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        // A close after writing ends an edit; every other access is a read,
        // ours included.
        EventKind::Access(a) => *a == AccessKind::Close(AccessMode::Write),
        // Metadata (atime, permissions) does not change what is indexed.
        EventKind::Modify(m) => !matches!(m, ModifyKind::Metadata(_)),
        // Unknown kinds, and the "rescan" a queue overflow asks for.
        EventKind::Any | EventKind::Other => true,
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Closing the watcher (and our own sender) closes the event
        // channel, which wakes the thread from its wait at once.
        drop(self.watcher.take());
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a batch of events asks for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Wanted {
    documents: bool,
    journal: bool,
}

fn classify(memories: &Path, path: &Path, wanted: &mut Wanted) {
    let Ok(rel) = path.strip_prefix(memories) else {
        return;
    };
    let in_facts = rel.starts_with("facts");
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if in_facts && (name.ends_with(".jsonl") || path.extension().is_none()) {
        // A journal file, or a directory (another device's, copied in):
        // its files may have arrived before the directory was watched.
        wanted.journal = true;
    } else if !in_facts && (name.ends_with(".md") || path.extension().is_none()) {
        // A directory rename or removal can carry documents with it.
        wanted.documents = true;
    }
}

/// Starts watching `hub`'s `memories/` directory, with the catch-up loop
/// (see the module docs) and a whole-tree rescan every 30 s.
pub fn spawn(hub: Arc<Hub>) -> Result<WatchHandle> {
    spawn_every(hub, RESCAN)
}

/// [`spawn`] with the time between whole-tree rescans (tests use a short one).
pub fn spawn_every(hub: Arc<Hub>, rescan: Duration) -> Result<WatchHandle> {
    let memories = hub.layout().memories();
    std::fs::create_dir_all(&memories).map_err(|e| Error::Io {
        context: format!("cannot create {}", memories.display()),
        source: e,
    })?;
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    // A watcher that cannot start costs freshness, not correctness: the
    // loop still rescans and retries.
    let watcher = (|| -> std::result::Result<notify::RecommendedWatcher, notify::Error> {
        let mut watcher = notify::recommended_watcher(tx.clone())?;
        watcher.watch(&memories, RecursiveMode::Recursive)?;
        Ok(watcher)
    })()
    .inspect_err(|e| {
        tracing::warn!(error = %e, "file watcher not running; changes under memories/ are found by the rescan every {}s", rescan.as_secs())
    })
    .ok();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_flag = Arc::clone(&stop);
    let counts = Arc::new(Counters::default());
    let counters = Arc::clone(&counts);
    let thread = std::thread::Builder::new()
        .name("memd-watch".into())
        .spawn(move || {
            let mut run = Loop::new(hub, counters, memories, rescan);
            while !stop_flag.load(Ordering::SeqCst) {
                if !run.step(&rx) {
                    break;
                }
            }
        })
        .map_err(|e| Error::Internal(format!("cannot start the watcher thread: {e}")))?;
    Ok(WatchHandle {
        stop,
        counts,
        thread: Some(thread),
        watcher,
        wake: Some(tx),
    })
}

/// The watcher thread's state: what to do next and when.
struct Loop {
    hub: Arc<Hub>,
    counters: Arc<Counters>,
    memories: std::path::PathBuf,
    rescan: Duration,
    next_rescan: Instant,
    /// When to retry a catch-up, and the wait after that one.
    retry: Option<(Instant, Duration)>,
}

impl Loop {
    fn new(
        hub: Arc<Hub>,
        counters: Arc<Counters>,
        memories: std::path::PathBuf,
        rescan: Duration,
    ) -> Loop {
        Loop {
            hub,
            counters,
            memories,
            rescan,
            next_rescan: Instant::now() + rescan,
            // What opening left behind (a full disk) is retried from the start.
            retry: Some((Instant::now() + RETRY_FIRST, RETRY_FIRST)),
        }
    }

    /// Waits for events or the next retry or rescan, and acts; false once
    /// the watcher is gone.
    fn step(&mut self, rx: &mpsc::Receiver<notify::Result<notify::Event>>) -> bool {
        let now = Instant::now();
        let mut due = self.next_rescan;
        if let Some((at, _)) = self.retry {
            due = due.min(at);
        }
        let wait = due
            .saturating_duration_since(now)
            .min(Duration::from_millis(200));
        let mut wanted = Wanted::default();
        match rx.recv_timeout(wait) {
            Ok(ev) => {
                self.note(ev, &mut wanted);
                if wanted != Wanted::default() {
                    let deadline = Instant::now() + DEBOUNCE;
                    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                        match rx.recv_timeout(left) {
                            Ok(ev) => self.note(ev, &mut wanted),
                            Err(_) => break,
                        }
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return false,
        }
        let now = Instant::now();
        if self.retry.is_some_and(|(at, _)| at <= now) {
            wanted.journal = true;
        }
        if self.next_rescan <= now {
            self.counters.rescans.fetch_add(1, Ordering::SeqCst);
            self.next_rescan = now + self.rescan;
            wanted.journal = true;
            wanted.documents = true;
        }
        self.act(&wanted);
        true
    }

    fn note(&self, ev: notify::Result<notify::Event>, wanted: &mut Wanted) {
        match ev {
            Ok(ev) if changes_content(&ev.kind) => {
                self.counters.events.fetch_add(1, Ordering::SeqCst);
                ev.paths
                    .iter()
                    .for_each(|p| classify(&self.memories, p, wanted));
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "file watcher error"),
        }
    }

    fn act(&mut self, wanted: &Wanted) {
        let hub = &self.hub;
        if wanted.journal {
            self.counters
                .journal_catch_ups
                .fetch_add(1, Ordering::SeqCst);
            let behind = match hub.catch_up_pending() {
                Ok(lag) => lag > 0 || hub.index().behind().is_some(),
                Err(e) => {
                    tracing::debug!(error = %e, "journal catch-up failed; retrying");
                    true
                }
            };
            self.retry = behind.then(|| {
                let wait = self.retry.map_or(RETRY_FIRST, |(_, w)| w);
                (Instant::now() + wait, (wait * 2).min(RETRY_MAX))
            });
        }
        if wanted.documents {
            self.counters.document_syncs.fetch_add(1, Ordering::SeqCst);
            match hub.sync_documents() {
                Ok(r) if r.documents_indexed + r.documents_removed + r.documents_invalid > 0 => {
                    tracing::info!(
                        documents.read = r.documents_read,
                        documents.indexed = r.documents_indexed,
                        documents.removed = r.documents_removed,
                        documents.invalid = r.documents_invalid,
                        "documents synced"
                    )
                }
                Ok(r) => tracing::debug!(documents.read = r.documents_read, "documents unchanged"),
                Err(e) => tracing::warn!(error = %e, "document sync failed"),
            }
        }
        if (wanted.journal || wanted.documents)
            && let Err(e) = hub.flush()
        {
            tracing::debug!(error = %e, "index commit failed");
        }
    }
}

/// Watches the root's `config.json` and calls `on_change` (debounced) when it
/// is written, created or replaced.
pub fn spawn_config(root: &Path, on_change: impl Fn() + Send + 'static) -> Result<WatchHandle> {
    let config = root.join("config.json");
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(tx)
        .map_err(|e| Error::Internal(format!("cannot start the config watcher: {e}")))?;
    // The directory, not the file: editors replace files by renaming.
    watcher
        .watch(root, RecursiveMode::NonRecursive)
        .map_err(|e| Error::Internal(format!("cannot watch {}: {e}", root.display())))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_flag = Arc::clone(&stop);
    let counts = Arc::new(Counters::default());
    let counters = Arc::clone(&counts);
    let thread = std::thread::Builder::new()
        .name("memd-config-watch".into())
        .spawn(move || {
            while !stop_flag.load(Ordering::SeqCst) {
                // Reading the file (as `on_change` does) is not a change.
                let touches = |ev: &notify::Result<notify::Event>| {
                    ev.as_ref()
                        .is_ok_and(|e| changes_content(&e.kind) && e.paths.contains(&config))
                };
                match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(ev) if touches(&ev) => {
                        counters.events.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(DEBOUNCE);
                        while rx.try_recv().is_ok() {}
                        counters.config_reloads.fetch_add(1, Ordering::SeqCst);
                        on_change();
                    }
                    Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
        })
        .map_err(|e| Error::Internal(format!("cannot start the config watcher thread: {e}")))?;
    Ok(WatchHandle {
        stop,
        counts,
        thread: Some(thread),
        watcher: Some(watcher),
        wake: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let m = Path::new("/r/memories");
        let check = |p: &str, want: Wanted| {
            let mut w = Wanted::default();
            classify(m, Path::new(p), &mut w);
            assert_eq!(w, want, "{p}");
        };
        check(
            "/r/memories/notes/a.md",
            Wanted {
                documents: true,
                journal: false,
            },
        );
        check(
            "/r/memories/facts/2026-11.jsonl",
            Wanted {
                documents: false,
                journal: true,
            },
        );
        check(
            "/r/memories/notes",
            Wanted {
                documents: true,
                journal: false,
            },
        );
        check("/r/memories/notes/.a.md.swp", Wanted::default());
        check(
            "/r/memories/facts/archive/2020-01.jsonl.gz",
            Wanted::default(),
        );
        check("/elsewhere/a.md", Wanted::default());
    }
}
