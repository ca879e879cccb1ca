//! `as_of`: what memory held at an instant. Search, recall, get, recent and
//! the timeline take an `as_of` (RFC 3339, or a date: the end of that day,
//! UTC) and answer from the journal lines written up to that instant: later
//! writes are absent, later supersedes, forgets and touches not applied, a
//! memory whose `expires_at` is at or before it is not visible, one that
//! expired later is. The caller's scenes and privacy apply exactly as in
//! any read. An `as_of` read is read-only: no touch, no access counted, no
//! promotion, recalled chat not kept alive.
//!
//! How: the cut of the files at the instant (`store::cut`: journal lines
//! whose time is at or before it, documents last modified by then with
//! their current content) is copied under `data/tmp/` and indexed into a
//! temporary index (SQLite and tantivy, vectors from the vector cache, so
//! known texts are not embedded again); the ordinary use case runs against
//! it with the clock at the instant. The last [`KEPT`] cuts are kept, keyed
//! by what they hold, and deleted when they leave (one a crashed process left,
//! when the next one is built). A build is the caller's work at the search
//! gate (its own queue, as a heavy search: a full queue is `RATE_LIMITED`),
//! one at a time, and is refused with `STORAGE_FULL` when its index would
//! take `data/` into the reserve memd keeps free ([`crate::disk`]); the
//! searches in a cut's index pass the same gate.
//! When nothing on disk is later than the instant and the index is caught
//! up, the live index is that cut already and answers directly, at the instant.
//! Deciding that, and the cut's key, costs stats and binary searches: the
//! journal's line times are kept between reads (`cut::Summaries`) and only
//! files that changed are read again (an appended one from where it stopped).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, Utc};

use super::parts::Core;
use super::parts::catchup::CatchUp;
use super::parts::gate;
use super::{Caller, Hub};
use crate::config::Layout;
use crate::disk::Room;
use crate::embed::EmbedderStatus;
use crate::embed::cache::VectorCache;
use crate::error::{Error, IoContext, Result};
use crate::index::Index;
use crate::store::cut;

/// Cuts kept for the next `as_of` read at (nearly) the same instant.
pub(crate) const KEPT: usize = 2;

/// The kept cuts, newest first, and the journal's line times.
#[derive(Default)]
pub(crate) struct Cuts {
    kept: Mutex<VecDeque<Arc<CutHub>>>,
    /// Held while a cut is built (one at a time, so `data/tmp/` holds at
    /// most the kept ones, one being built and ones still being read).
    building: Mutex<()>,
    journal: cut::Summaries,
}

/// A hub over the temporary index of one cut; its directory goes with it.
pub(crate) struct CutHub {
    key: u64,
    hub: Hub,
    _dir: TempDir,
}

/// A directory removed on drop (after the hub that uses it: fields drop in order).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(error = %e, path = %self.0.display(), "cannot remove an as_of index");
        }
    }
}

/// Which index answers for an instant.
enum Past<'a> {
    Live(&'a Hub),
    Cut(Arc<CutHub>),
}

impl Past<'_> {
    fn hub(&self) -> &Hub {
        match self {
            Past::Live(hub) => hub,
            Past::Cut(cut) => &cut.hub,
        }
    }
}

/// The instant of an `as_of`: RFC 3339, or a date (`2026-11-20`: the end of
/// that day, UTC; today's date means now). Never later than `now`.
pub(crate) fn parse_as_of(as_of: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    let s = as_of.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        let t = t.with_timezone(&Utc);
        if t > now {
            return Err(Error::invalid(format!(
                "as_of {s:?} is in the future (now is {}); memory cannot answer for it yet",
                now.to_rfc3339()
            )));
        }
        return Ok(t);
    }
    let Ok(day) = NaiveDate::parse_from_str(s, "%Y-%m-%d") else {
        return Err(Error::invalid(format!(
            "as_of must be an RFC 3339 time (2026-11-20T18:00:00Z) or a date (2026-11-20); got {s:?}"
        )));
    };
    if day > now.date_naive() {
        return Err(Error::invalid(format!(
            "as_of {s:?} is in the future (today is {}, UTC)",
            now.date_naive()
        )));
    }
    let end =
        day.and_time(NaiveTime::MIN).and_utc() + TimeDelta::days(1) - TimeDelta::milliseconds(1);
    Ok(end.min(now))
}

/// Answers `ask` as memory stood at `as_of`: against the live index when it
/// is the cut already, else against the cut's temporary index, with
/// `caller` at that instant. Returns the answer and the instant.
pub(crate) fn answer<R>(
    hub: &Hub,
    caller: &Caller,
    as_of: &str,
    ask: impl FnOnce(&Hub, &Caller) -> Result<R>,
) -> Result<(R, DateTime<Utc>)> {
    let at = parse_as_of(as_of, caller.now())?;
    let past = past(hub, caller, at)?;
    let reply = ask(past.hub(), &caller.at(at))?;
    Ok((reply, at))
}

/// The index that answers for `at`. Building one is `caller`'s work at
/// the search gate (in its queue, as a heavy search), one build at a time.
fn past<'a>(hub: &'a Hub, caller: &Caller, at: DateTime<Utc>) -> Result<Past<'a>> {
    let memories = hub.core.layout.memories();
    let plan = cut::plan(&memories, at, &hub.cuts.journal)?;
    if plan.later == 0 && hub.index_behind(None)?.is_none() {
        return Ok(Past::Live(hub));
    }
    if let Some(found) = hub.cuts.find(plan.key) {
        return Ok(Past::Cut(found));
    }
    let cost = gate::HEAVY_COST + 1 + plan.lines / 8;
    let _permit = hub.admit_as(caller, cost)?;
    let _building = hub.cuts.building.lock().expect("as_of builds poisoned");
    if let Some(found) = hub.cuts.find(plan.key) {
        return Ok(Past::Cut(found));
    }
    let built = Arc::new(build(hub, &plan, at)?);
    let mut kept = hub.cuts.kept.lock().expect("as_of cuts poisoned");
    kept.push_front(Arc::clone(&built));
    kept.truncate(KEPT);
    Ok(Past::Cut(built))
}

impl Cuts {
    /// The kept cut of `key`, now the newest.
    fn find(&self, key: u64) -> Option<Arc<CutHub>> {
        let mut kept = self.kept.lock().expect("as_of cuts poisoned");
        let i = kept.iter().position(|c| c.key == key)?;
        let found = kept.remove(i).expect("found above");
        kept.push_front(Arc::clone(&found));
        Some(found)
    }
}

/// Bytes an index of `plan` needs, about: the files' bytes several times
/// over (the copy, SQLite, tantivy), a vector per line and a fixed part.
fn room_for(plan: &cut::Cut) -> u64 {
    const FIXED: u64 = 1024 * 1024;
    const PER_LINE: u64 = 2 * 1024;
    FIXED + plan.bytes.saturating_mul(4) + plan.lines.saturating_mul(PER_LINE)
}

/// Refuses a build that would take the file system of `tmp` into the
/// reserve memd keeps free there (see [`crate::disk`]).
fn check_room(tmp: &Path, plan: &cut::Cut, at: DateTime<Utc>) -> Result<()> {
    let need = room_for(plan);
    match Room::of(tmp) {
        Some(room) if !room.takes(need) => Err(Error::StorageFull(format!(
            "cannot build the index of memory as of {}: it needs about {need} bytes and the \
             file system of data/ has {} bytes free, with {} kept free",
            at.to_rfc3339(),
            room.free,
            room.reserve()
        ))),
        _ => Ok(()),
    }
}

/// A hub over a new temporary index of `plan` (see the module docs).
fn build(live: &Hub, plan: &cut::Cut, at: DateTime<Utc>) -> Result<CutHub> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = live.core.layout.data().join("tmp");
    std::fs::create_dir_all(&tmp).ctx("cannot create an as_of index", &tmp)?;
    remove_stale(&tmp);
    check_room(&tmp, plan, at)?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = TempDir(tmp.join(format!("{}{n}", own_prefix())));
    std::fs::create_dir_all(&dir.0).ctx("cannot create an as_of index", &dir.0)?;
    let started = std::time::Instant::now();
    let layout = Layout::new(&dir.0);
    cut::write(plan, &live.core.layout.memories(), &layout.memories())?;
    let config = (*live.config()).clone();
    let index = Index::open(&layout.index(), true)?;
    index.set_lifecycle(config.lifecycle.clone());
    let core = Core::new(layout, config, index, live.core.device.clone(), true);
    core.set_clock(Arc::new(move || at));
    let catchup = CatchUp::default();
    catchup.build(&core)?;
    let cache = VectorCache::open(&live.core.layout.cache().join("vectors.db"))
        .inspect_err(|e| tracing::warn!(error = %e, "vector cache unavailable to an as_of index"))
        .ok();
    let hub = Hub::assemble(core, catchup, None, live.searcher.sharing(cache));
    if matches!(live.searcher.embedder_status(), EmbedderStatus::Loaded(_)) {
        hub.embed_pending(usize::MAX);
    }
    hub.core.index.end_bulk_load()?;
    tracing::info!(
        as_of = %at.to_rfc3339(),
        journal.lines = plan.lines,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "built an as_of index"
    );
    Ok(CutHub {
        key: plan.key,
        hub,
        _dir: dir,
    })
}

/// The start of the names of this process's `as_of` directories: its id
/// and a random part, so that one a crashed process with the same id left
/// (a restarted container's daemon often has the same) is not taken for one.
fn own_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        format!("asof-{}-{random:016x}-", std::process::id())
    })
}

/// Removes the `as_of` indexes another process left behind (a crash).
fn remove_stale(tmp: &Path) {
    let mine = own_prefix();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("asof-") && !name.starts_with(mine) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_dates() {
        let now = DateTime::parse_from_rfc3339("2026-11-25T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let t = parse_as_of("2026-11-20T18:00:00+08:00", now).unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-20T10:00:00+00:00");
        let d = parse_as_of("2026-11-20", now).unwrap();
        assert_eq!(d.to_rfc3339(), "2026-11-20T23:59:59.999+00:00");
        assert_eq!(parse_as_of("2026-11-25", now).unwrap(), now, "today is now");
        for bad in ["2026-11-26", "2026-11-25T12:00:01Z", "yesterday", ""] {
            let e = parse_as_of(bad, now).unwrap_err();
            assert_eq!(e.code().as_str(), "INVALID_INPUT", "{bad}");
        }
    }
}
