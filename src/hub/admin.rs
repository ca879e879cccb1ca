//! Use cases of the service itself: health, capabilities, metrics counts and
//! token management (`GET /v1/health`, `/v1/capabilities`, `/metrics`,
//! `/v1/tokens`, `POST /v1/tokens/revoke`).
//!
//! `/v1/health` is open to anyone who can reach the port, so without an
//! admin token it says only whether the service is up and each component's
//! state: no counts, no scene names, no job errors. Counts describe every
//! scene, so metrics need `admin`, as do listing and revoking tokens (a
//! revoked token authenticates nothing from the next request on).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Caller, HealthReport, Hub, Stats};
use crate::api::RevokeBody;
use crate::auth::{self, TokenInfo, scope};
use crate::embed::EmbedderStatus;
use crate::error::Result;
use crate::model::MAX_TEXT_BYTES;

/// What `/v1/health` shows: all of it to an admin token, else the public part.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum HealthView {
    /// Status and components only.
    Public(PublicHealth),
    /// Counts, jobs, tiers and consolidation too.
    Full(Box<FullHealth>),
}

/// What `/v1/health` shows without an admin token.
#[derive(Debug, Serialize)]
pub struct PublicHealth {
    status: &'static str,
    version: &'static str,
    uptime_s: u64,
    writer: bool,
    components: BTreeMap<&'static str, PublicComponent>,
}

#[derive(Debug, Serialize)]
struct PublicComponent {
    status: &'static str,
}

/// What `/v1/health` shows an admin token.
#[derive(Debug, Serialize)]
pub struct FullHealth {
    version: &'static str,
    uptime_s: u64,
    #[serde(flatten)]
    report: HealthReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    consolidation: Option<serde_json::Value>,
}

/// Every token, revoked ones included, without hashes.
#[derive(Debug, Serialize)]
pub struct TokenList {
    tokens: Vec<TokenInfo>,
}

impl Hub {
    /// Health as `caller` may see it (`None`: no token).
    pub fn health_view(&self, caller: Option<&Caller>) -> Result<HealthView> {
        let report = self.health()?;
        let version = env!("CARGO_PKG_VERSION");
        let uptime_s = self.uptime().as_secs();
        if !caller.is_some_and(|c| c.has(scope::ADMIN)) {
            let components = report
                .components
                .iter()
                .map(|(name, c)| (*name, PublicComponent { status: c.status }))
                .collect();
            return Ok(HealthView::Public(PublicHealth {
                status: report.status,
                version,
                uptime_s,
                writer: report.writer,
                components,
            }));
        }
        let consolidation = super::consolidation::consolidation_status(self, self.now());
        Ok(HealthView::Full(Box::new(FullHealth {
            version,
            uptime_s,
            report,
            consolidation,
        })))
    }

    /// Limits, features and the caller's own rights (the surface adds its routes).
    pub fn capabilities(&self, caller: &Caller) -> serde_json::Value {
        let cfg = self.config();
        // Whether semantic search can run: loaded, or configured and not failed yet.
        let semantic = !matches!(
            super::health::embedder_status(self),
            EmbedderStatus::Unavailable(_)
        );
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "limits": {
                "defaultLimit": cfg.search.default_limit,
                "maxLimit": cfg.search.max_limit,
                "maxTextBytes": MAX_TEXT_BYTES,
                "ingestTtlHours": cfg.ingest.ttl_hours,
            },
            "features": {
                "modes": ["fulltext", "semantic", "hybrid"],
                "defaultMode": cfg.search.mode.as_str(),
                "semantic": semantic,
                "recallBlock": true,
                "live": true,
                "disclose": true,
            },
            "token": {
                "name": caller.name(),
                "scopes": caller.scopes(),
                "scenes": caller.scenes(),
                "write_scenes": caller.write_scenes(),
            },
        })
    }

    /// Counts and sizes for metrics (`admin`: they describe every scene).
    pub fn admin_stats(&self, caller: &Caller) -> Result<Stats> {
        caller.require(scope::ADMIN)?;
        self.stats()
    }

    /// Every token, without hashes or secrets (`admin`).
    pub fn tokens(&self, caller: &Caller) -> Result<TokenList> {
        caller.require(scope::ADMIN)?;
        Ok(TokenList {
            tokens: auth::list(&self.layout().tokens())?,
        })
    }

    /// Revokes a token from the next request on (`admin`).
    pub fn revoke_token(&self, caller: &Caller, body: RevokeBody) -> Result<TokenInfo> {
        caller.require(scope::ADMIN)?;
        auth::revoke(&self.layout().tokens(), &body.name, caller.now())
    }
}
