//! Use case: a memory's retention tier (`POST /v1/tier`, `memd tier show`,
//! `memd tier set`).
//!
//! Showing reads the memory under the caller's read filter (a memory it may
//! not read is `NOT_FOUND`) and says where it stands: its tier, retrievals
//! since the last promotion and how many more promote it (after
//! `lifecycle.promoteAfter` retrievals T3 becomes T2 and T2 becomes T1;
//! nothing is promoted to T0), its expiry, its tier's lifetime and warning
//! window, and whether it is inside that window. Setting a tier is an edit:
//! it needs write rights in the memory's scene (the writable filter, as a
//! tag edit), T0 needs `*` (pinning, as on a write), and the fact keeps its
//! id (a new `put` line). Showing counts no access.

use chrono::Duration;

use super::write::check_pin;
use super::{Caller, Hub};
use crate::api::{TierBody, TierReply};
use crate::error::{Error, Result};
use crate::index::filter::Filter;
use crate::lifecycle::{LifecycleConfig, expiring_soon, warning_window};
use crate::model::{Memory, Origin, Stage, Tier};

impl Hub {
    /// Shows, or with `set` changes, the tier of a long-term fact.
    pub fn tier(&self, caller: &Caller, body: TierBody) -> Result<TierReply> {
        let mut changed = false;
        let filter = match body.set {
            None => caller.read_filter(None, false)?,
            Some(tier) => {
                let mut filter = caller.writable()?;
                for s in &mut filter.any_of {
                    s.unexpired_at = Some(caller.now());
                }
                let current = self.tiered(&body.id, &filter)?;
                if current.tier != Some(tier) {
                    check_pin(caller, Some(tier), &current.kind)?;
                    let fact = self
                        .lifecycle
                        .retiered(&self.core, &body.id, tier, &filter)?;
                    self.writer.rewrite(self.cx(), fact, &filter)?;
                    changed = true;
                }
                filter
            }
        };
        let m = self.tiered(&body.id, &filter)?;
        let accesses = self
            .core
            .index
            .meta
            .fact_extras(&m.id)?
            .map_or(0, |e| e.accesses);
        Ok(standing(
            &m,
            accesses,
            changed,
            caller,
            &self.config().lifecycle,
        ))
    }

    /// The long-term fact `id` visible under `filter`, with its tier.
    fn tiered(&self, id: &str, filter: &Filter) -> Result<Memory> {
        let m = self.fetch(id, filter)?;
        if m.origin != Origin::Fact {
            return Err(Error::invalid(format!(
                "{id} is part of a Markdown document; its tier is in its front matter"
            )));
        }
        if m.stage != Stage::Long {
            return Err(Error::invalid(format!(
                "{id} is short-term chat; only long-term memories have a tier"
            )));
        }
        Ok(m)
    }
}

/// The next tier up by promotion (none for T1 and T0).
fn promotion(tier: Tier) -> Option<Tier> {
    match tier {
        Tier::T3 => Some(Tier::T2),
        Tier::T2 => Some(Tier::T1),
        Tier::T1 | Tier::T0 => None,
    }
}

/// Where `m` stands in its retention.
fn standing(
    m: &Memory,
    accesses: u32,
    changed: bool,
    caller: &Caller,
    cfg: &LifecycleConfig,
) -> TierReply {
    let tier = m.tier.unwrap_or(Tier::T2);
    let promotes_to = promotion(tier).filter(|_| cfg.promote_after > 0);
    let lifetime = cfg.lifetime(tier);
    TierReply {
        id: m.id.clone(),
        scene: m.scene.clone(),
        tier,
        changed,
        accesses,
        promote_after: cfg.promote_after,
        promotes_to,
        accesses_to_promotion: promotes_to.map(|_| cfg.promote_after.saturating_sub(accesses)),
        expires_at: m.expires_at,
        lifetime_days: lifetime.map(|l| u32::try_from(l.num_days()).unwrap_or(u32::MAX)),
        warning_hours: lifetime.map(|l| hours(warning_window(l, cfg))),
        expiring_soon: expiring_soon(m.ts, m.tier, m.expires_at, caller.now(), cfg),
    }
}

fn hours(d: Duration) -> u32 {
    u32::try_from(d.num_hours()).unwrap_or(u32::MAX)
}
