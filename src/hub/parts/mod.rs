//! The parts the [`Hub`](super::Hub) facade is made of, and the [`Core`]
//! they share.
//!
//! Each part owns its state and the rules that go with it; the facade holds
//! one of each and hands every call the core and the parts it builds on
//! ([`ctx::Ctx`]), so a part never reaches for the hub. Parts build on each other
//! in one direction only:
//!
//! ```text
//!  writer ───► catchup     new lines are indexed by the replay that runs at open
//!    └───────► lifecycle   retrievals become a `touch` line on the next commit
//!  searcher ─► lifecycle   hits count as retrievals, expiring-soon marks
//!    └───────► catchup     a damaged index is reported by health
//!  catchup ──► documents   the Markdown side of catch-up
//!    ├───────► backlog     lines not applied yet, damage in applied ones
//!    └───────► heal        open-time integrity check, moving a damaged index aside
//! ```
//!
//! - [`writer`]: the commit queue, group commit and the write rules; the
//!   only part that appends to the journal.
//! - [`catchup`]: replay of journal lines into the index (at open, after
//!   every append, after a storage error, for lines a sync tool appended),
//!   the write gate of a full disk, with [`documents`] for
//!   `memories/**.md`, [`backlog`] for what is not applied yet (and damage
//!   in what is) and [`heal`] for a damaged index.
//! - [`searcher`]: the search gate, ranking in three modes through
//!   [`crate::search`], vectors (embedding off the write path) and the
//!   relevance floor.
//! - [`lifecycle`]: access tracking, tiers, expiry, tag edits and restoring
//!   expired memories (it decides; the writer appends).

pub(crate) mod backlog;
pub(crate) mod catchup;
pub(crate) mod ctx;
pub(crate) mod documents;
pub(crate) mod gate;
pub(crate) mod heal;
pub(crate) mod lifecycle;
pub(crate) mod searcher;
pub(crate) mod writer;

use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};

use crate::config::{Config, Layout};
use crate::index::Index;
use crate::model::Pins;

/// What "now" is for the hub: the one clock every rule reads (tests move it).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The system clock.
pub(crate) fn system_clock() -> Clock {
    Arc::new(Utc::now)
}

/// What every part reads: the root, the one live configuration, the index,
/// this device's id, the clock, and whether this process is the writer.
pub(crate) struct Core {
    pub(crate) layout: Layout,
    /// The one live configuration: a read is an `Arc` clone, a reload swaps it.
    config: RwLock<Arc<Config>>,
    /// Replaced only while a writer opens and heals the root.
    pub(crate) index: Index,
    pub(crate) device: String,
    clock: RwLock<Clock>,
    /// Whether this process holds the root's writer lock.
    pub(crate) writable: bool,
    /// The journal's files and lengths, kept for the lag every request asks.
    pub(crate) journal: crate::store::listing::Listing,
}

impl Core {
    pub(crate) fn new(
        layout: Layout,
        config: Config,
        index: Index,
        device: String,
        writable: bool,
    ) -> Core {
        Core {
            layout,
            config: RwLock::new(Arc::new(config)),
            index,
            device,
            clock: RwLock::new(system_clock()),
            writable,
            journal: Default::default(),
        }
    }

    /// The configuration in force (a cheap snapshot).
    pub(crate) fn config(&self) -> Arc<Config> {
        Arc::clone(&self.config.read().expect("config lock poisoned"))
    }

    /// Replaces the live config with `change(current)`; on error it stays as it was.
    pub(crate) fn update_config(
        &self,
        change: impl FnOnce(&Config) -> crate::Result<Config>,
    ) -> crate::Result<Arc<Config>> {
        let mut live = self.config.write().expect("config lock poisoned");
        let next = Arc::new(change(&live)?);
        *live = Arc::clone(&next);
        Ok(next)
    }

    /// Now, by the one clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        (self.clock.read().expect("clock poisoned"))()
    }

    pub(crate) fn set_clock(&self, clock: Clock) {
        *self.clock.write().expect("clock poisoned") = clock;
    }

    /// `ROOT_LOCKED` naming the process that holds the writer lock.
    pub(crate) fn locked_error(&self) -> crate::Error {
        crate::Error::RootLocked {
            root: self.layout.root.clone(),
            pid: std::fs::read_to_string(self.layout.lock())
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }
}

/// Where sensitive and secret memories may live under `config`.
pub(crate) fn pins(config: &Config) -> Pins<'_> {
    config.privacy.pins()
}
