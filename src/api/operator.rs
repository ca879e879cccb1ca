//! The `/v1` wire types of the operator's routes: paged lists, tiers, the
//! cleanup run, the audit log, the scenes a token may use, the profile the
//! bootstrap interview gathers, and the rolling health history. The CLI
//! (`memd list`, `tier`, `gc`, `audit`, `stats --expiring`, `archive list`,
//! `health --history`), the MCP resources and tools, and the console send
//! exactly these bodies.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{Memory, Scene, Stage, Tier};

fn is_false(b: &bool) -> bool {
    !*b
}

/// `POST /v1/list`: the memories a token may read, newest first, one page at
/// a time. The cursor is the `(time, id)` position of the last row of the
/// previous page, so rows sharing a timestamp are never skipped or repeated.
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListBody {
    /// Rows per page (1-100, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page (absent: the newest rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Only long-term facts of this tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Only this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Only memories that expire within this many days (1-3650).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiring_within_days: Option<u32>,
    /// Only memories inside their warning window (the last seventh of their
    /// lifetime, at most `lifecycle.expiringSoonDays`), as `expiring_soon` marks them.
    #[serde(default, skip_serializing_if = "is_false")]
    pub expiring_soon: bool,
    /// The archive instead: expired memories the journal still holds (needs `*`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub archived: bool,
    /// The scene you act in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
    /// Scenes to read (default: every scene the token may read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<Scene>>")]
    pub scenes: Option<Vec<String>>,
    /// The owner is the one asking: adds the owner's own normal/personal memories (scope `from_owner`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub from_owner: bool,
}

/// `POST /v1/list` reply.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ListReply {
    /// Newest first (ties by id, descending).
    pub items: Vec<Memory>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `POST /v1/tier`: a memory's retention state, or a new tier for it.
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierBody {
    /// The fact id.
    pub id: String,
    /// Set this tier (needs write rights in the memory's scene; `t0` needs `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Tier>,
}

/// `POST /v1/tier` reply: where a long-term memory stands in its retention.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TierReply {
    /// The fact id.
    pub id: String,
    /// Its scene.
    pub scene: Scene,
    /// Its tier now.
    pub tier: Tier,
    /// Whether this request changed the tier.
    pub changed: bool,
    /// Retrievals since the last promotion.
    pub accesses: u32,
    /// Retrievals after which it is promoted (`lifecycle.promoteAfter`; 0: never).
    pub promote_after: u32,
    /// The tier it is promoted to next (none for t0 and t1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotes_to: Option<Tier>,
    /// Retrievals still needed for that promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accesses_to_promotion: Option<u32>,
    /// When it expires (none: it does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// How long its tier lives after the last retrieval, in days (none: for ever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_days: Option<u32>,
    /// The warning window of its tier, in hours: `expiring_soon` inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning_hours: Option<u32>,
    /// Whether it is inside its warning window now.
    pub expiring_soon: bool,
}

/// `POST /v1/gc`: run the cleanup now.
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcBody {
    /// Say what would be done; change nothing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    /// Only this tier's expired memories (and no journal months).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
}

/// Expired memories of one class, as `gc` counts them.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GcClass {
    /// `short` (chat past its TTL) or a tier (`t1`, `t2`, `t3`).
    pub class: String,
    /// Expired memories (restorable with `archive restore`).
    pub expired: u64,
}

/// `POST /v1/gc` reply.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GcReply {
    /// Nothing was changed.
    pub dry_run: bool,
    /// Expired memories by class (they leave search at expiry; nothing is deleted).
    pub expired: Vec<GcClass>,
    /// Journal months compressed now (or that would be, in a dry run).
    pub months: Vec<String>,
    /// Every journal month in the archive after this run.
    pub archived_months: Vec<String>,
    /// Retrievals journaled now instead of within a few seconds.
    pub accesses_journaled: u64,
    /// When this cleanup ran.
    pub at: DateTime<Utc>,
}

/// `POST /v1/audit`: recent audit lines, newest first.
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditBody {
    /// Only requests made with this token (by name; the CLI through the daemon is `cli`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Only this operation: the route without `/v1/` (`write`, `archive/search`) or `METHOD /v1/path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// At most this many (1-1000, default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// One audit line.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AuditLine {
    /// When the request arrived.
    pub ts: DateTime<Utc>,
    /// `METHOD /v1/path`.
    pub route: String,
    /// Token name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Scene acted in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scene: Option<String>,
    /// Ids returned or changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<String>,
    /// 1 when refused (401/403).
    pub denied: u32,
    /// HTTP status.
    pub status: u16,
    /// Duration in milliseconds.
    pub duration_ms: u64,
}

/// `POST /v1/audit` reply.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AuditReply {
    /// Newest first.
    pub entries: Vec<AuditLine>,
    /// Lines of the log that could not be read (skipped).
    pub unreadable: u64,
}

/// One scene a token may use.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SceneUse {
    /// The scene.
    pub scene: Scene,
    /// Whether the token may read it.
    pub read: bool,
    /// Whether the token may write in it.
    pub write: bool,
    /// Memories in it the token may read (0 where it may not read).
    pub memories: u64,
}

/// `GET /v1/scenes` reply.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ScenesReply {
    /// The token's scenes, `shared`, and with `*` every scene holding a memory it may read.
    pub scenes: Vec<SceneUse>,
    /// Whether the token reads every scene (`*`).
    pub reads_every_scene: bool,
}

/// A part of the owner's profile the bootstrap interview asks about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProfileTopic {
    /// Name, how to address them, languages, where they live.
    Identity,
    /// Role, employer, projects, tools.
    Work,
    /// The people who matter and who they are.
    People,
    /// Likes, dislikes, communication style.
    Preferences,
    /// Daily and weekly routines.
    Routines,
}

impl ProfileTopic {
    /// Every topic, in interview order.
    pub const ALL: &'static [ProfileTopic] = &[
        ProfileTopic::Identity,
        ProfileTopic::Work,
        ProfileTopic::People,
        ProfileTopic::Preferences,
        ProfileTopic::Routines,
    ];

    /// The wire spelling (also the memory's topic tag).
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileTopic::Identity => "identity",
            ProfileTopic::Work => "work",
            ProfileTopic::People => "people",
            ProfileTopic::Preferences => "preferences",
            ProfileTopic::Routines => "routines",
        }
    }
}

/// One answer of the interview.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileAnswer {
    /// What it is about.
    pub topic: ProfileTopic,
    /// The answer as one self-contained statement (or a few sentences).
    pub text: String,
}

/// `POST /v1/profile`: store what the bootstrap interview gathered (needs `*`).
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileBody {
    /// At most one answer per topic.
    pub answers: Vec<ProfileAnswer>,
    /// The scene the profile lives in (default: the token's first write scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// What storing one answer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProfileAction {
    /// A new pinned memory.
    Created,
    /// A new version replacing the previous answer.
    Updated,
    /// The same answer was stored already.
    Unchanged,
}

/// One stored answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProfileItem {
    /// The topic.
    pub topic: ProfileTopic,
    /// The memory holding it now.
    pub id: String,
    /// What was done.
    pub action: ProfileAction,
    /// The previous answer it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// `POST /v1/profile` reply.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProfileReply {
    /// The scene it lives in.
    pub scene: Scene,
    /// One per answer, in topic order.
    pub items: Vec<ProfileItem>,
    /// The category that holds the whole profile (injected at every session start).
    pub category: String,
}

/// One sample of the rolling health history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HealthSample {
    /// When it was taken (the hub's clock).
    pub ts: DateTime<Utc>,
    /// Searchable memories.
    pub memories: u64,
    /// Facts (not forgotten).
    pub facts: u64,
    /// Memories waiting for a vector.
    pub pending_vectors: u64,
    /// Journal bytes the index has not applied yet.
    pub index_lag_bytes: u64,
    /// Free bytes on the file system of `data/`.
    pub disk_free_bytes: u64,
    /// Requests served since the previous sample.
    pub requests: u64,
    /// Median latency of searches since the previous sample, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_p50_ms: Option<f64>,
    /// Median latency of writes since the previous sample, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_p50_ms: Option<f64>,
}

/// `GET /v1/health/history` reply.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HealthHistory {
    /// Seconds between samples.
    pub interval_seconds: u64,
    /// Samples kept at most (older ones are dropped).
    pub capacity: usize,
    /// Oldest first.
    pub samples: Vec<HealthSample>,
}
