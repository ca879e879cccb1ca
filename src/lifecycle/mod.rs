//! Memory lifecycle rules: retention tiers, opt-in tier expiry, promotion
//! and ranking signals. Pure functions over the [`LifecycleConfig`]; the hub
//! applies them (`hub/lifecycle.rs`) and the index replays their journal
//! records ([`crate::model::Record::Touch`]).
//!
//! - Only short-term chat has a TTL by default. A long-term memory stays until
//!   it is forgotten or superseded: tiers drive ranking, budgets and promotion,
//!   not deletion.
//! - With `lifecycle.tierExpiry: true` (opt-in) a long-term memory expires
//!   `tierDays` after it was written or last retrieved (T0 never). Expired
//!   memories leave search, recall and get; the journal keeps them and
//!   `restore-expired` brings one back. With the default (`false`), long-term
//!   lines that carry an expiry (written by builds that expired tiers by
//!   default) replay as non-expiring.
//! - Dedup on write is exact only ([`content_hash`] and idempotency keys);
//!   near-duplicates are folded by consolidation, never on the write path.
//! - An agent's retrieval counts as an access: a recall (unless it says
//!   `touch: false`), or a search or get that asks with `touch: true`. Looking
//!   (a get, a search, a list, a timeline page, the console) counts nothing
//!   and writes nothing. Accesses are buffered in memory and written as one
//!   `touch` line at most every few seconds; replaying those lines reproduces
//!   access counts, tiers and expiry exactly.
//! - After `promoteAfter` accesses a T3 memory becomes T2 and a T2 memory T1
//!   (the count restarts); nothing is ever promoted to T0.

pub mod rank;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::Tier;

/// Days a memory of each tier lives after its last access (T0 never expires).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TierDays {
    /// T1 (long-lived).
    pub(crate) t1: u32,
    /// T2 (the default tier).
    pub(crate) t2: u32,
    /// T3 (transient).
    pub(crate) t3: u32,
}

impl Default for TierDays {
    fn default() -> Self {
        TierDays {
            t1: 365,
            t2: 90,
            t3: 30,
        }
    }
}

/// Most active memories wanted per tier; health reports the tiers over budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TierBudgets {
    /// T0.
    pub(crate) t0: u64,
    /// T1.
    pub(crate) t1: u64,
    /// T2.
    pub(crate) t2: u64,
    /// T3.
    pub(crate) t3: u64,
}

impl Default for TierBudgets {
    fn default() -> Self {
        TierBudgets {
            t0: 1_000,
            t1: 50_000,
            t2: 100_000,
            t3: 200_000,
        }
    }
}

/// Retention, promotion and archive settings (`lifecycle` in `config.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct LifecycleConfig {
    /// Days per tier.
    pub(crate) tier_days: TierDays,
    /// Accesses after which T3 → T2 and T2 → T1 (0 turns promotion off).
    pub(crate) promote_after: u32,
    /// The longest warning window: results expiring within this many days, and
    /// within the last seventh of their lifetime, carry `expiring_soon`.
    pub(crate) expiring_soon_days: u32,
    /// Per-tier budgets.
    pub(crate) budgets: TierBudgets,
    /// Whether long-term memories expire `tierDays` after their last access
    /// (opt-in; default off: only short-term chat expires). Not hot-editable.
    /// Turning it off takes effect for every memory on the next start;
    /// turning it on applies to memories indexed before only after
    /// `memd reindex`.
    pub tier_expiry: bool,
    /// Ignored: near-duplicates are no longer merged on write. Still accepted
    /// so that config files written for older builds load.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub(crate) dedup_threshold: Option<serde_json::Value>,
    /// Journal months older than this many months are compressed (0 = never).
    pub(crate) archive_after_months: u32,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            tier_days: TierDays::default(),
            promote_after: 5,
            expiring_soon_days: 7,
            budgets: TierBudgets::default(),
            tier_expiry: false,
            dedup_threshold: None,
            archive_after_months: 0,
        }
    }
}

impl LifecycleConfig {
    /// Checks the settings once, at load.
    pub(crate) fn validate(&self) -> Result<()> {
        let d = &self.tier_days;
        if d.t1 == 0 || d.t2 == 0 || d.t3 == 0 || d.t1 > 36_500 || d.t2 > 36_500 || d.t3 > 36_500 {
            return Err(Error::invalid(
                "lifecycle.tierDays values must be between 1 and 36500",
            ));
        }
        Ok(())
    }

    /// How long a long-term memory of `tier` lives after its last access;
    /// `None` (never expires) for T0 and for every tier unless `tierExpiry` is on.
    pub(crate) fn lifetime(&self, tier: Tier) -> Option<Duration> {
        if !self.tier_expiry {
            return None;
        }
        let days = match tier {
            Tier::T0 => return None,
            Tier::T1 => self.tier_days.t1,
            Tier::T2 => self.tier_days.t2,
            Tier::T3 => self.tier_days.t3,
        };
        Some(Duration::days(i64::from(days)))
    }

    /// The expiry of a memory of `tier` last accessed (or written) at `at`.
    pub(crate) fn expiry(&self, tier: Tier, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.lifetime(tier).map(|d| at + d)
    }

    /// The budget of a tier.
    pub(crate) fn budget(&self, tier: Tier) -> u64 {
        match tier {
            Tier::T0 => self.budgets.t0,
            Tier::T1 => self.budgets.t1,
            Tier::T2 => self.budgets.t2,
            Tier::T3 => self.budgets.t3,
        }
    }

    /// Applies one access at `at` to `(tier, accesses, expires_at)`: counts it,
    /// promotes after `promoteAfter` accesses (T3 → T2 → T1, never to T0) and
    /// slides the expiry. An expiry never moves earlier.
    pub fn touch(&self, state: TouchState, at: DateTime<Utc>) -> TouchState {
        let mut tier = state.tier;
        let mut accesses = state.accesses.saturating_add(1);
        if self.promote_after > 0 && accesses >= self.promote_after {
            let up = match tier {
                Tier::T3 => Some(Tier::T2),
                Tier::T2 => Some(Tier::T1),
                Tier::T1 | Tier::T0 => None,
            };
            if let Some(up) = up {
                tier = up;
                accesses = 0;
            }
        }
        let expires_at = self
            .expiry(tier, at)
            .map(|new| state.expires_at.map_or(new, |old| new.max(old)));
        TouchState {
            tier,
            accesses,
            expires_at,
        }
    }
}

/// The lifecycle state of one long-term memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TouchState {
    /// Retention tier.
    pub(crate) tier: Tier,
    /// Accesses since the last promotion.
    pub(crate) accesses: u32,
    /// When it leaves the index.
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

/// The dedup key of a long-term memory: sha256 over scene (its audience),
/// kind, privacy, subject and the normalised text.
pub fn content_hash(
    scene: &crate::model::Scene,
    kind: &str,
    text: &str,
    privacy: crate::model::Privacy,
    subject: crate::model::Subject,
) -> String {
    // Full-width and other compatibility forms (`ＡＢＣ`, `！`) are the same text.
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};
    let normalized: String;
    let text = if is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        text
    } else {
        normalized = text.nfkc().collect();
        &normalized
    };
    let key = format!(
        "{}\u{1f}{kind}\u{1f}{}\u{1f}{}\u{1f}{text}",
        scene.as_str(),
        privacy.as_str(),
        subject.as_str()
    );
    crate::ids::sha256_hex(key.as_bytes())
}

/// The warning window of a lifetime: its last seventh, and never more than
/// `expiringSoonDays` days.
pub(crate) fn warning_window(lifetime: Duration, cfg: &LifecycleConfig) -> Duration {
    (lifetime.max(Duration::zero()) / WARNING_SHARE)
        .min(Duration::days(i64::from(cfg.expiring_soon_days)))
}

/// The warning window of each tier that has a lifetime (none unless
/// `tierExpiry` is on; never T0): a T1 or T2 memory is flagged in its last
/// 7 days, a 30-day T3 memory in its last 4.3.
pub(crate) fn tier_windows(cfg: &LifecycleConfig) -> Vec<(Tier, Duration)> {
    Tier::ALL
        .iter()
        .filter_map(|&t| cfg.lifetime(t).map(|l| (t, warning_window(l, cfg))))
        .collect()
}

/// Whether a memory of `tier` written at `ts` that expires at `expires_at`
/// is in its warning window at `now`. The window is relative to the
/// memory's lifetime ([`warning_window`]): its tier's lifetime for a
/// long-term memory whose tier expires, else the time from when it was
/// written to its expiry. A chat line (24 h) is flagged in its last 3 h 26
/// min, one kept alive for the longest 168 h in its last day; a 30-day tier
/// memory in its last 4.3 days, a 90-day one in its last 7.
pub(crate) fn expiring_soon(
    ts: DateTime<Utc>,
    tier: Option<Tier>,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    cfg: &LifecycleConfig,
) -> bool {
    let Some(expires) = expires_at.filter(|e| *e > now) else {
        return false;
    };
    let lifetime = tier.and_then(|t| cfg.lifetime(t)).unwrap_or(expires - ts);
    expires - now <= warning_window(lifetime, cfg)
}

/// What "in its warning window at `now`" means for a query over many
/// memories (`expiring_soon` for each row): the window of each tier that
/// expires, and the longest window of any other lifetime.
#[derive(Debug, Clone)]
pub struct Warning {
    /// The instant.
    pub(crate) now: DateTime<Utc>,
    /// Tiers with a lifetime, and their windows.
    pub(crate) tiers: Vec<(Tier, Duration)>,
    /// `expiringSoonDays`: the cap of a window relative to `expires_at - ts`.
    pub(crate) cap: Duration,
}

impl Warning {
    /// The windows of `cfg` at `now`.
    pub(crate) fn at(now: DateTime<Utc>, cfg: &LifecycleConfig) -> Warning {
        Warning {
            now,
            tiers: tier_windows(cfg),
            cap: Duration::days(i64::from(cfg.expiring_soon_days)),
        }
    }

    /// The share of a lifetime the window is (one in [`WARNING_SHARE`]).
    pub(crate) fn share(&self) -> i32 {
        WARNING_SHARE
    }
}

/// The share of a memory's lifetime that `expiring_soon` flags (one seventh:
/// a day of the longest-lived chat).
const WARNING_SHARE: i32 = 7;

#[cfg(test)]
mod tests {

    #[test]
    fn the_dedup_key_reads_full_width_forms_as_their_ascii_twins() {
        use crate::model::{Privacy, Scene, Subject};
        let main = Scene::parse("main").unwrap();
        let key = |t: &str| content_hash(&main, "note", t, Privacy::Normal, Subject::Owner);
        assert_eq!(key("我喜欢ＡＢＣ！"), key("我喜欢ABC!"));
        assert_ne!(key("我喜欢ABC"), key("我不喜欢ABC"));
    }

    use super::*;

    fn opted_in() -> LifecycleConfig {
        LifecycleConfig {
            tier_expiry: true,
            ..LifecycleConfig::default()
        }
    }

    #[test]
    fn expiring_soon_is_the_last_seventh_of_a_lifetime() {
        let cfg = LifecycleConfig::default();
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let h = Duration::hours;
        // (lifetime, time left, flagged)
        for (life, left, want) in [
            (h(24), h(24), false), // a fresh chat line
            (h(24), h(4), false),  // a seventh of a day is 3 h 26 min
            (h(24), h(3), true),
            (h(168), h(25), false), // a chat line kept alive to the longest: its last day
            (h(168), h(23), true),
            (Duration::days(30), Duration::days(5), false),
            (Duration::days(30), Duration::days(4), true),
            (Duration::days(365), Duration::days(8), false), // capped at expiringSoonDays
            (Duration::days(365), Duration::days(7), true),
            (h(24), h(0), false), // expired: gone, not soon
        ] {
            let expires = t0 + life;
            let now = expires - left;
            assert_eq!(
                expiring_soon(t0, None, Some(expires), now, &cfg),
                want,
                "lifetime {life:?}, {left:?} left"
            );
        }
        assert!(!expiring_soon(t0, None, None, t0, &cfg), "no expiry");
    }

    #[test]
    fn a_tier_memory_is_warned_by_its_tier_lifetime() {
        let cfg = opted_in();
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let d = Duration::days;
        // Retrieved often, so written long before its expiry: the window is
        // still its tier's (T3: 30 days / 7 = 4.3 days), not a seventh of
        // the time since it was written.
        let expires = t0 + d(400);
        for (tier, left, want) in [
            (Tier::T3, d(5), false),
            (Tier::T3, d(4), true),
            (Tier::T2, d(8), false),
            (Tier::T2, d(7), true),
            (Tier::T1, d(7), true),
        ] {
            let now = expires - left;
            assert_eq!(
                expiring_soon(t0, Some(tier), Some(expires), now, &cfg),
                want,
                "{tier}, {left:?} left"
            );
        }
        let windows = tier_windows(&cfg);
        assert_eq!(windows.len(), 3, "T0 never expires: {windows:?}");
        assert_eq!(windows[2], (Tier::T3, d(30) / 7));
        assert!(tier_windows(&LifecycleConfig::default()).is_empty());
    }

    #[test]
    fn promotion_and_sliding_expiry() {
        let cfg = opted_in();
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let mut s = TouchState {
            tier: Tier::T3,
            accesses: 0,
            expires_at: cfg.expiry(Tier::T3, t0),
        };
        for i in 1..=4 {
            s = cfg.touch(s, t0 + Duration::days(i));
            assert_eq!((s.tier, s.accesses), (Tier::T3, i as u32));
        }
        assert_eq!(s.expires_at, Some(t0 + Duration::days(4 + 30)));
        s = cfg.touch(s, t0 + Duration::days(5));
        assert_eq!((s.tier, s.accesses), (Tier::T2, 0));
        assert_eq!(s.expires_at, Some(t0 + Duration::days(5 + 90)));
        for _ in 0..5 {
            s = cfg.touch(s, t0 + Duration::days(6));
        }
        assert_eq!(s.tier, Tier::T1);
        for _ in 0..20 {
            s = cfg.touch(s, t0 + Duration::days(7));
        }
        assert_eq!(s.tier, Tier::T1, "never promoted to T0");
        let t0_state = TouchState {
            tier: Tier::T0,
            accesses: 0,
            expires_at: None,
        };
        assert_eq!(cfg.touch(t0_state, t0).expires_at, None);
    }

    #[test]
    fn long_term_memories_do_not_expire_by_default() {
        let cfg = LifecycleConfig::default();
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        for &tier in Tier::ALL {
            assert_eq!(cfg.expiry(tier, t0), None, "{tier}");
        }
        let s = cfg.touch(
            TouchState {
                tier: Tier::T3,
                accesses: 4,
                expires_at: None,
            },
            t0,
        );
        assert_eq!(
            (s.tier, s.expires_at),
            (Tier::T2, None),
            "promotion still works"
        );
        assert_eq!(
            opted_in().expiry(Tier::T2, t0),
            Some(t0 + Duration::days(90))
        );
    }

    #[test]
    fn old_config_files_with_dedup_threshold_still_load() {
        let cfg: LifecycleConfig =
            serde_json::from_str(r#"{"dedupThreshold": 0.92, "promoteAfter": 3}"#).unwrap();
        assert_eq!(cfg.promote_after, 3);
        cfg.validate().unwrap();
        assert!(
            serde_json::to_value(&cfg)
                .unwrap()
                .get("dedupThreshold")
                .is_none()
        );
    }
}
