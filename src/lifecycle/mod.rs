//! Memory lifecycle rules: retention tiers, sliding expiry, promotion,
//! near-duplicate thresholds and ranking signals. Pure functions over the
//! [`LifecycleConfig`]; the hub applies them (`hub/lifecycle.rs`) and the
//! index replays their journal records ([`crate::model::Record::Touch`]).
//!
//! - A long-term memory expires `tierDays` after it was written or last
//!   retrieved (T0 never). Expired memories leave search, recall and get; the
//!   journal keeps them and `restore-expired` brings one back.
//! - Every successful retrieval counts as an access. Accesses are buffered in
//!   memory and written as one `touch` line at most every few seconds; replaying
//!   those lines reproduces access counts, tiers and expiry exactly.
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
pub struct TierDays {
    /// T1 (long-lived).
    pub t1: u32,
    /// T2 (the default tier).
    pub t2: u32,
    /// T3 (transient).
    pub t3: u32,
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
pub struct TierBudgets {
    /// T0.
    pub t0: u64,
    /// T1.
    pub t1: u64,
    /// T2.
    pub t2: u64,
    /// T3.
    pub t3: u64,
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

/// Retention, promotion, dedup and archive settings (`lifecycle` in `config.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct LifecycleConfig {
    /// Days per tier.
    pub tier_days: TierDays,
    /// Accesses after which T3 → T2 and T2 → T1 (0 turns promotion off).
    pub promote_after: u32,
    /// Results expiring within this many days carry `expiring_soon`.
    pub expiring_soon_days: u32,
    /// Per-tier budgets.
    pub budgets: TierBudgets,
    /// Base cosine similarity for a near-duplicate UPDATE (raised per tier).
    pub dedup_threshold: f64,
    /// Journal months older than this many months are compressed (0 = never).
    pub archive_after_months: u32,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            tier_days: TierDays::default(),
            promote_after: 5,
            expiring_soon_days: 7,
            budgets: TierBudgets::default(),
            dedup_threshold: 0.92,
            archive_after_months: 0,
        }
    }
}

impl LifecycleConfig {
    /// Checks the settings once, at load.
    pub fn validate(&self) -> Result<()> {
        let d = &self.tier_days;
        if d.t1 == 0 || d.t2 == 0 || d.t3 == 0 || d.t1 > 36_500 || d.t2 > 36_500 || d.t3 > 36_500 {
            return Err(Error::invalid(
                "lifecycle.tierDays values must be between 1 and 36500",
            ));
        }
        if !(0.5..=1.0).contains(&self.dedup_threshold) {
            return Err(Error::invalid(
                "lifecycle.dedupThreshold must be between 0.5 and 1",
            ));
        }
        Ok(())
    }

    /// How long a memory of `tier` lives after its last access; `None` for T0.
    pub fn lifetime(&self, tier: Tier) -> Option<Duration> {
        let days = match tier {
            Tier::T0 => return None,
            Tier::T1 => self.tier_days.t1,
            Tier::T2 => self.tier_days.t2,
            Tier::T3 => self.tier_days.t3,
        };
        Some(Duration::days(i64::from(days)))
    }

    /// The expiry of a memory of `tier` last accessed (or written) at `at`.
    pub fn expiry(&self, tier: Tier, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.lifetime(tier).map(|d| at + d)
    }

    /// The budget of a tier.
    pub fn budget(&self, tier: Tier) -> u64 {
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

    /// Near-duplicate thresholds `(noop, update)` for a memory of `tier` (BHGBrain's table).
    pub fn dedup_thresholds(&self, tier: Tier) -> (f32, f32) {
        let base = self.dedup_threshold as f32;
        match tier {
            Tier::T0 | Tier::T1 => (0.98, base.max(0.95)),
            Tier::T2 => (0.98, base),
            Tier::T3 => (0.95, base.max(0.90)),
        }
    }
}

/// The daily job of `memd serve` that compresses journal months older than
/// `lifecycle.archiveAfterMonths` (added only when that is not 0).
pub fn archive_job() -> crate::scheduler::Job {
    use crate::scheduler::{Job, Period, Schedule};
    Job {
        name: "archive",
        schedule: Schedule {
            at: chrono::NaiveTime::from_hms_opt(4, 30, 0).expect("valid time"),
            period: Period::Day,
            retry_minutes: 60,
        },
        run: Box::new(|hub: &crate::hub::Hub| {
            let months = hub.archive_journal(None)?;
            Ok(format!("{} months archived", months.len()))
        }),
    }
}

/// The lifecycle state of one long-term memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TouchState {
    /// Retention tier.
    pub tier: Tier,
    /// Accesses since the last promotion.
    pub accesses: u32,
    /// When it leaves the index.
    pub expires_at: Option<DateTime<Utc>>,
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
    let key = format!(
        "{}\u{1f}{kind}\u{1f}{}\u{1f}{}\u{1f}{text}",
        scene.as_str(),
        privacy.as_str(),
        subject.as_str()
    );
    crate::ids::sha256_hex(key.as_bytes())
}

/// The more durable of two tiers (T0 is the most durable).
pub fn more_durable(a: Tier, b: Tier) -> Tier {
    a.min(b)
}

/// Whether `expires_at` falls within the warning window after `now`.
pub fn expiring_soon(
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    cfg: &LifecycleConfig,
) -> bool {
    expires_at
        .is_some_and(|e| e > now && e - now <= Duration::days(i64::from(cfg.expiring_soon_days)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_and_sliding_expiry() {
        let cfg = LifecycleConfig::default();
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
    fn thresholds_per_tier() {
        let cfg = LifecycleConfig::default();
        assert_eq!(cfg.dedup_thresholds(Tier::T0), (0.98, 0.95));
        assert_eq!(cfg.dedup_thresholds(Tier::T2), (0.98, 0.92));
        assert_eq!(cfg.dedup_thresholds(Tier::T3), (0.95, 0.92));
    }
}
