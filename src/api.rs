//! The `/v1` wire types: one request body per operation (and a reply type
//! where the reply is not a domain type already), defined once.
//!
//! The hub's use cases take these requests and return these replies
//! (`hub.write(&caller, WriteBody)`), so the same request runs over HTTP or
//! in-process: the axum handlers deserialize them, the CLI builds them from
//! its arguments, the MCP tools take them as their parameters (their JSON
//! Schema is what the model sees) and forward them to `/v1` unchanged, and
//! `openapi.yaml` is checked against their schemas
//! (`tests/integration/openapi.rs`): a field added here shows up in HTTP,
//! in MCP and, through that test, in the spec.
//!
//! This is a low layer: it knows `model` and `search` types, never `hub`,
//! `http` or `mcp`. It only says what a body may contain; what a field means
//! for a given token (scene rights, privacy scopes, defaults from the config)
//! is the use case's business ([`crate::hub`]).
//!
//! Every request refuses unknown fields. serde's `flatten` does not work with
//! `deny_unknown_fields`, so each read body lists the visibility fields
//! (`scene`, `scenes`, `from_owner`) itself; [`operations`] keeps them honest
//! against the spec.

use chrono::{DateTime, FixedOffset, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{CATEGORY_SLOTS, Memory, Privacy, Scene, Stage, Subject, Tier};
use crate::search::SearchMode;

mod operator;
pub use operator::*;

fn is_false(b: &bool) -> bool {
    !*b
}

/// Output format of recent, recall and disclose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Structured items only (the default).
    Json,
    /// Also a rendered text block, ready to put into a prompt.
    Block,
}

impl Format {
    /// Whether a rendered block is wanted.
    pub fn is_block(format: Option<Format>) -> bool {
        format == Some(Format::Block)
    }
}

/// Reads a search mode as `mode` strings always were: any case, with the
/// aliases `full-text`, `text` and `vector`.
fn mode_from_str<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SearchMode>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

/// `POST /v1/bootstrap`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BootstrapBody {
    /// How many recent titles and recent `self` memories to include (1-50, default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent: Option<usize>,
    /// The scene you act in (default: the token's first scene, usually `main`).
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

/// `POST /v1/search`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// What to look for: keywords or a short natural-language question (Chinese or English).
    pub query: String,
    /// Hits wanted (default `search.defaultLimit`; above `search.maxLimit` it is lowered to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only `short` (recent chat) or only `long` (durable) memories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Only these kinds, e.g. ["preference", "event"].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    /// fulltext, semantic or hybrid (default: the server's `search.mode`).
    #[serde(
        default,
        deserialize_with = "mode_from_str",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<SearchMode>,
    /// Relevance floor, 0-1: hits less likely than this to be about the query are left out and counted in `dropped_below_floor` (default: the calibrated threshold; 0 turns it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f32>,
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
    /// Count the hits as retrievals for promotion (default false: looking changes nothing;
    /// set it when an agent uses the hits in a conversation, as recall does).
    #[serde(default, skip_serializing_if = "is_false")]
    pub touch: bool,
    /// Skip this many hits: the next page of the same search (0-90, default 0; pass the
    /// reply's `next_offset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Answer as memory stood at this instant: RFC 3339, or a date (the end of that day, UTC).
    /// Later writes are absent, later supersedes and forgets not applied; read-only (no touch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `POST /v1/get`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetBody {
    /// A fact id (`fact-main-…`), a document chunk id (`doc-1a2b3c4d#0`) or a document id.
    pub id: String,
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
    /// Count this read as a retrieval for promotion (default false: looking changes nothing).
    #[serde(default, skip_serializing_if = "is_false")]
    pub touch: bool,
    /// Answer as memory stood at this instant: RFC 3339, or a date (the end of that day, UTC).
    /// Later writes are absent, later supersedes and forgets not applied; read-only (no touch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `POST /v1/recent`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentBody {
    /// Only `short` (recent chat) or only `long` memories (default: both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// How many (1-100, default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `block` adds a rendered text block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
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
    /// Answer as memory stood at this instant: RFC 3339, or a date (the end of that day, UTC).
    /// Later writes are absent, later supersedes and forgets not applied; read-only (no touch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// A conversation turn: plain text, or a message object whose `text` is used.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Turn {
    /// Just the text.
    Text(String),
    /// A chat message (other keys are accepted and ignored).
    Message {
        /// What was said.
        text: String,
        /// Who spoke (user, assistant, …); not used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// The speaker's name; not used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

impl Turn {
    /// The turn's text.
    pub fn into_text(self) -> String {
        match self {
            Turn::Text(s) | Turn::Message { text: s, .. } => s,
        }
    }
}

/// The `live` side channel of `/v1/recall`: recent short-term chat.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveBody {
    /// Lines of recent chat (1-50, default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// Window in minutes (1-1440, default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u32>,
    /// Scenes to read live chat from (default: the request's scenes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenes: Option<Vec<String>>,
}

/// `POST /v1/recall`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBody {
    /// The last few conversation turns, oldest first (strings or `{text}` messages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Turn>,
    /// An explicit query instead of one built from `messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Maximum number of memories (above `search.maxLimit` it is lowered to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Relevance floor, 0-1, as in search (default: the calibrated threshold; 0 turns it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f32>,
    /// Also return recent short-term chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveBody>,
    /// The person the conversation is with (provider user id): what they said themselves is marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
    /// `block` adds a rendered text block ready for a prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
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
    /// Count the recalled long-term memories as retrievals for promotion (default true: an
    /// agent's recall is what promotion counts; false for a person looking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touch: Option<bool>,
    /// Answer as memory stood at this instant: RFC 3339, or a date (the end of that day, UTC).
    /// Later writes are absent, later supersedes and forgets not applied; read-only (no touch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `POST /v1/timeline`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineBody {
    /// Page cursor: the `next_before` of the previous page, or an RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// One month only, `YYYY-MM`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub month: Option<String>,
    /// Items per page (1-100, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only `short` or only `long` memories (default: both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
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
    /// Answer as memory stood at this instant: RFC 3339, or a date (the end of that day, UTC).
    /// Later writes are absent, later supersedes and forgets not applied; read-only (no touch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `POST /v1/disclose`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscloseBody {
    /// The group whose recent chat is asked about (`qq:group:<id>`).
    pub group: String,
    /// The member asking, in private (provider user id); must be a known member of the group.
    pub asker: String,
    /// Window in minutes (1-1440, default 180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u32>,
    /// Lines (1-50, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `block` adds a rendered text block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// The scene you act in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// `POST /v1/disclose` reply: the group's recent memories, oldest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DiscloseReply {
    /// The group.
    pub group: Scene,
    /// Oldest first.
    pub items: Vec<Memory>,
    /// The rendered block, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
}

/// `POST /v1/audience`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AudienceBody {
    /// Whose card (default: the request's scene); tokens without `*` may only read their own scenes' cards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub audience: Option<String>,
    /// The scene you act in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// `POST /v1/audience` reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AudienceReply {
    /// Whose card it is.
    pub audience: Scene,
    /// The card, or null.
    pub card: Option<Memory>,
}

/// `POST /v1/get` reply: the memory, and where it stands in its line of versions.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct GetReply {
    /// The memory.
    #[serde(flatten)]
    pub memory: Memory,
    /// The memories that replace this one (those the caller may read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded_by: Vec<String>,
    /// An older version: a newer one replaced it (even if that one was forgotten since), so
    /// search, lists and recall leave it out. It cannot be superseded or edited; restore it
    /// with `POST /v1/restore`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub superseded: bool,
    /// The newest version of its line, when that is another memory you may read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// The newest version of its line when that one was forgotten and you may restore it
    /// (`POST /v1/restore` with this id undoes the forget).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest_forgotten: Option<String>,
    /// The instant the answer is for, when the request gave `as_of`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    /// Memories you may read that likely contradict this one, each with which is newer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts_with: Vec<crate::model::ConflictRef>,
}

/// `POST /v1/archive/search` reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ArchiveReply {
    /// Expired memories, newest first.
    pub items: Vec<Memory>,
}

/// `POST /v1/recent` reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ItemsReply {
    /// The memories, newest first.
    pub items: Vec<Memory>,
    /// The rendered block, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
    /// The instant the answer is for, when the request gave `as_of`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
}

/// `POST /v1/write`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteBody {
    /// The memory itself: one self-contained fact, preference, decision or event, written so it
    /// makes sense without the conversation around it. Never put passwords, API keys or tokens here.
    pub text: String,
    /// The scene it lives in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
    /// What it is: note (default), fact, preference, event, todo, decision, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A short title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Free-form tags (letters, digits, `-`, `_`, `:`). A new version keeps the replaced
    /// memory's tags unless given (`[]` clears them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// normal (default), personal, sensitive, secret; `work` and `financial` mean sensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privacy: Option<Privacy>,
    /// owner: about the user; self: the agent's own judgement; other: about someone else.
    /// Default owner for tokens with `*`, else other; only `*` may claim owner or self
    /// (the pet may write self in scene `pet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// 0-1, default 0.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<f32>,
    /// Retention tier t0-t3 (default: chosen by the server; t0 needs `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// long (default) or short (expires like chat, after `ingest.ttlHours`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// The id of the memory this one replaces (the user changed their mind, a fact was
    /// corrected). The new version keeps every field this request does not set (scene, kind,
    /// title, tags, privacy, subject, importance, tier, stage, time, session, speaker; an
    /// empty string clears a text field). Only the newest version can be replaced: an older
    /// one answers 409 CONFLICT naming the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// Any unique string (1-200 bytes); retrying with the same key returns the same id instead of a duplicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Origin label (e.g. `sleep` for nightly consolidation); only tokens with `*` may set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When it happened: ISO 8601 or free text (`1:56 pm on 8 May, 2023`,
    /// `2023年5月8日`); kept as given, parsed when possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The conversation or session it belongs to (its turns are each other's context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Who said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
}

/// `POST /v1/forget`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetBody {
    /// The fact id to forget.
    pub id: String,
    /// Why (kept in the journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The scene you act in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// `POST /v1/forget` reply (also `memd forget --json`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgetReply {
    /// The forgotten fact.
    pub id: String,
    /// Always true.
    pub forgotten: bool,
}

/// `POST /v1/conflicts/dismiss`: ends (or, with `undo`, restores) the
/// conflict link between two memories the token may write.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DismissConflictBody {
    /// One memory of the pair.
    pub id: String,
    /// The other memory of the pair.
    pub other: String,
    /// Link them again (undo an earlier dismiss).
    #[serde(default, skip_serializing_if = "is_false")]
    pub undo: bool,
}

/// `POST /v1/conflicts/dismiss` reply.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DismissConflictReply {
    /// One memory of the pair.
    pub id: String,
    /// The other memory of the pair.
    pub other: String,
    /// Whether the pair is linked now.
    pub linked: bool,
}

/// `POST /v1/conflicts/accept`: the newer memory of a conflict becomes the
/// new version of the older (a supersede), which then leaves search.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptConflictBody {
    /// The older memory, to be superseded.
    pub older: String,
    /// The newer memory, kept as its new version.
    pub newer: String,
}

/// `POST /v1/conflicts/accept` reply.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AcceptConflictReply {
    /// The memory now superseded.
    pub superseded: String,
    /// The memory that supersedes it.
    pub by: String,
}

/// `POST /v1/restore`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreVersionBody {
    /// A forgotten memory (undo the forget), or an older version to make current again.
    pub id: String,
    /// The scene you act in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// What `POST /v1/restore` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RestoreAction {
    /// The same id is current again (a new journal line with its content): a forget undone,
    /// or an older version whose later versions were all forgotten.
    #[serde(rename = "RESTORED")]
    Restored,
    /// A later version is live, so the old content became a new version replacing it.
    #[serde(rename = "NEW_VERSION")]
    NewVersion,
    /// It was current already; nothing was written.
    #[serde(rename = "NOOP")]
    Noop,
}

/// `POST /v1/restore` reply (also `memd restore --json`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RestoreVersionReply {
    /// The memory that is current now: the id asked for, or the new version.
    pub id: String,
    /// The id asked for.
    pub restored: String,
    /// What was done.
    pub action: RestoreAction,
}

/// Who sent an ingested message.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sender {
    /// Provider user id.
    pub id: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `POST /v1/ingest`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestBody {
    /// The provider's message id.
    pub message_id: String,
    /// What was said.
    pub text: String,
    /// The scene it was said in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
    /// Who said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<Sender>,
    /// The owner said it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub from_owner: bool,
    /// The agent said it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub from_self: bool,
    /// When it was said (RFC 3339); the TTL counts from here. Its offset is
    /// kept: consolidation reads "明天" as the day after the sender's day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<DateTime<FixedOffset>>,
    /// Hours to keep it searchable (1-168, default `ingest.ttlHours`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_hours: Option<u32>,
    /// The conversation it belongs to (default: none, the message stands alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// A group member in `/v1/members`: `{id, name}` as ingest's `sender`, or the bare id.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Member {
    /// The provider user id alone.
    Id(String),
    /// The member as ingest's `sender` names them.
    Named(Sender),
}

impl Member {
    /// The provider user id and display name.
    pub fn into_parts(self) -> (String, Option<String>) {
        match self {
            Member::Id(id) => (id, None),
            Member::Named(s) => (s.id, s.name),
        }
    }
}

/// `POST /v1/members`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MembersBody {
    /// The group (`qq:group:<id>`); default: the request's scene.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The full member list, replacing what is known (daily reconciliation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<Member>>,
    /// Members who joined: `{id, name}` objects or ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Member>,
    /// Members who left: `{id, name}` objects or ids (the name is not needed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<Member>,
    /// The scene you act in (default: the token's first scene).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// `POST /v1/members` reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MembersReply {
    /// The group.
    pub group: Scene,
    /// Members added.
    pub added: usize,
    /// Members removed.
    pub removed: usize,
}

/// What `/v1/categories` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CategoryAction {
    /// List categories with a preview.
    List,
    /// One category's full content.
    Get,
    /// Create or replace a category (needs `*`).
    Set,
    /// Remove a category (needs `*`).
    Delete,
}

impl CategoryAction {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CategoryAction::List => "list",
            CategoryAction::Get => "get",
            CategoryAction::Set => "set",
            CategoryAction::Delete => "delete",
        }
    }
}

/// `POST /v1/categories`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CategoriesBody {
    /// list, get, set or delete.
    pub action: CategoryAction,
    /// Category name for get/set/delete: lowercase letters, digits and `-` (e.g. `coding-standards`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Slot for set: company-values, architecture, coding-requirements or custom (default).
    /// Any other word is refused with `INVALID_INPUT` by the route, so it stays a string here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "slot_schema")]
    pub slot: Option<String>,
    /// Markdown content for set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The scene you act in (default: the token's first scene); a new category lives there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Scene>")]
    pub scene: Option<String>,
}

/// The schema of a category slot: one of [`CATEGORY_SLOTS`].
fn slot_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": CATEGORY_SLOTS})
}

/// `POST /v1/tags`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagsBody {
    /// The fact id to edit.
    pub id: String,
    /// Tags to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    /// Tags to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// New importance, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<f32>,
}

/// What an edit did: a successful edit always rewrites the fact in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EditAction {
    /// A new `put` line with the same id.
    #[serde(rename = "UPDATE")]
    Update,
}

/// `POST /v1/tags` reply.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TagsReply {
    /// The fact (same id).
    pub id: String,
    /// Always UPDATE.
    pub action: EditAction,
    /// The tags now.
    pub tags: Vec<String>,
    /// The importance now.
    pub importance: f32,
}

/// `POST /v1/archive/search`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSearchBody {
    /// Text the expired memory contains.
    pub query: String,
    /// At most this many (1-100, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `POST /v1/archive/restore`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreBody {
    /// The expired fact.
    pub id: String,
}

/// `POST /v1/consolidation/report`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportBody {
    /// Run id.
    pub run: String,
}

/// `POST /v1/consolidation/run`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// A local day `YYYY-MM-DD`; default: the configured period ending now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Plan and report only.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

/// `POST /v1/consolidation/rollback`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackBody {
    /// A run id; or `source` and `since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Undo what this source wrote or forgot since `since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Say what would be undone; change nothing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

/// `POST /v1/reindex`: rebuild the daemon's index from the files (no fields;
/// the body must be present, `{}`, so a stray empty POST does nothing).
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReindexBody {}

/// `POST /v1/reindex` reply (also `memd reindex --json`, with or without a daemon).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReindexReply {
    /// Journal records replayed.
    pub records: u64,
    /// Unreadable or invalid journal lines skipped (each reported with file:line).
    pub bad_lines: u64,
    /// Documents indexed.
    pub documents: u64,
    /// Searchable memories afterwards.
    pub memories: u64,
    /// Memories with a vector afterwards.
    pub vectors: u64,
    /// Vectors stored by the rebuild (from the vector cache where the text is unchanged).
    pub vectors_stored: u64,
    /// How long the rebuild took, in milliseconds.
    pub elapsed_ms: u64,
}

/// `POST /v1/tokens/revoke`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeBody {
    /// Token name.
    pub name: String,
}

/// `POST /v1/documents`: the Markdown documents the caller may read, by path.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentsBody {
    /// Documents per page (1-100, default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Page cursor: the `next_after` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
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

/// One document in a list: what its first chunk says about it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DocumentSummary {
    /// The document id (`doc-1a2b3c4d`), for `POST /v1/document`.
    pub id: String,
    /// Path under `memories/`.
    pub path: String,
    /// Title (front matter, else the first heading, else the file name).
    pub title: String,
    /// Audience.
    #[schemars(with = "String")]
    pub scene: Scene,
    /// Sensitivity.
    pub privacy: Privacy,
    /// Kind word (`doc`, `identity`, `audience`, or the front matter's).
    pub kind: String,
    /// Tags.
    pub tags: Vec<String>,
    /// When the file was last modified.
    pub ts: DateTime<Utc>,
    /// Number of indexed chunks (sections).
    pub chunks: usize,
}

/// `POST /v1/documents` reply.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DocumentsReply {
    /// Documents, by path.
    pub documents: Vec<DocumentSummary>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// `POST /v1/document`: one whole document.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentBody {
    /// A document id (`doc-1a2b3c4d`) or one of its chunk ids (`doc-1a2b3c4d#2`).
    pub id: String,
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

/// One section of a whole document.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DocumentSection {
    /// The chunk id (`doc-1a2b3c4d#2`): what search hits name.
    pub id: String,
    /// The heading it sits under, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
}

/// `POST /v1/document` reply.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DocumentReply {
    /// What a list shows about it.
    #[serde(flatten)]
    pub summary: DocumentSummary,
    /// The Markdown body, front matter left out.
    pub markdown: String,
    /// `file`: the body as the file holds it (it is unchanged since it was
    /// indexed); `index`: rebuilt from the indexed sections (the file changed
    /// since, and is shown once the index has read it again).
    pub source: DocumentSource,
    /// Its sections in order, with the chunk ids search hits name.
    pub sections: Vec<DocumentSection>,
}

/// Where a whole document's body came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DocumentSource {
    /// The file, unchanged since it was indexed.
    File,
    /// The indexed sections.
    Index,
}

/// `POST /v1/forgotten`: forgotten memories the caller may read, newest forget first.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgottenBody {
    /// Items per page (1-100, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Page cursor: the `next_before` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
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

/// One forgotten memory.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgottenItem {
    /// The memory as it was.
    #[serde(flatten)]
    pub memory: Memory,
    /// When it was forgotten.
    pub forgotten_at: DateTime<Utc>,
    /// Whether this token may bring it back (`POST /v1/restore`).
    pub restorable: bool,
}

/// `POST /v1/forgotten` reply.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgottenReply {
    /// Forgotten memories, the most recently forgotten first.
    pub items: Vec<ForgottenItem>,
    /// Pass as `before` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<String>,
}

/// One `/v1` operation's wire types, as JSON Schema.
#[derive(Debug)]
pub struct Operation {
    /// HTTP method.
    pub method: &'static str,
    /// Route path.
    pub path: &'static str,
    /// The request body's schema.
    pub request: Option<schemars::Schema>,
    /// The reply's schema, where the reply has its own api type.
    pub reply: Option<schemars::Schema>,
}

fn request<T: JsonSchema>() -> Option<schemars::Schema> {
    Some(schemars::SchemaGenerator::default().into_root_schema_for::<T>())
}

fn reply<T: JsonSchema>() -> Option<schemars::Schema> {
    Some(
        schemars::generate::SchemaSettings::default()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<T>(),
    )
}

/// Every `/v1` operation with a body, and the schemas of its api types (the
/// openapi contract test compares them with `openapi.yaml`).
/// `POST /v1/config` is left out: its keys are the config's editable table.
pub fn operations() -> Vec<Operation> {
    let mut all = core_operations();
    all.extend(browse_operations());
    all.extend(operator_operations());
    all
}

/// The operator's routes ([`operator`]).
fn operator_operations() -> Vec<Operation> {
    vec![
        op(
            "POST",
            "/v1/list",
            request::<ListBody>(),
            reply::<ListReply>(),
        ),
        op(
            "POST",
            "/v1/tier",
            request::<TierBody>(),
            reply::<TierReply>(),
        ),
        op("POST", "/v1/gc", request::<GcBody>(), reply::<GcReply>()),
        op(
            "POST",
            "/v1/audit",
            request::<AuditBody>(),
            reply::<AuditReply>(),
        ),
        op("GET", "/v1/scenes", None, reply::<ScenesReply>()),
        op(
            "POST",
            "/v1/profile",
            request::<ProfileBody>(),
            reply::<ProfileReply>(),
        ),
        op("GET", "/v1/health/history", None, reply::<HealthHistory>()),
    ]
}

/// What the console browses: documents, whole documents, forgotten memories.
fn browse_operations() -> Vec<Operation> {
    vec![
        op(
            "POST",
            "/v1/documents",
            request::<DocumentsBody>(),
            reply::<DocumentsReply>(),
        ),
        op(
            "POST",
            "/v1/document",
            request::<DocumentBody>(),
            reply::<DocumentReply>(),
        ),
        op(
            "POST",
            "/v1/forgotten",
            request::<ForgottenBody>(),
            reply::<ForgottenReply>(),
        ),
    ]
}

/// One operation of [`operations`].
fn op(
    method: &'static str,
    path: &'static str,
    request: Option<schemars::Schema>,
    reply: Option<schemars::Schema>,
) -> Operation {
    Operation {
        method,
        path,
        request,
        reply,
    }
}

/// Every other operation with a body: reads, then [`core_writes`].
fn core_operations() -> Vec<Operation> {
    let mut ops = vec![
        op("POST", "/v1/tokens/revoke", request::<RevokeBody>(), None),
        op("POST", "/v1/bootstrap", request::<BootstrapBody>(), None),
        op("POST", "/v1/search", request::<SearchBody>(), None),
        op("POST", "/v1/get", request::<GetBody>(), reply::<GetReply>()),
        op(
            "POST",
            "/v1/recent",
            request::<RecentBody>(),
            reply::<ItemsReply>(),
        ),
        op("POST", "/v1/recall", request::<RecallBody>(), None),
        op("POST", "/v1/timeline", request::<TimelineBody>(), None),
        op(
            "POST",
            "/v1/disclose",
            request::<DiscloseBody>(),
            reply::<DiscloseReply>(),
        ),
        op(
            "POST",
            "/v1/audience",
            request::<AudienceBody>(),
            reply::<AudienceReply>(),
        ),
    ];
    ops.extend(core_writes());
    ops
}

/// The operations of [`core_operations`] that write.
fn core_writes() -> Vec<Operation> {
    let mut ops = vec![
        op("POST", "/v1/write", request::<WriteBody>(), None),
        op(
            "POST",
            "/v1/forget",
            request::<ForgetBody>(),
            reply::<ForgetReply>(),
        ),
        op(
            "POST",
            "/v1/restore",
            request::<RestoreVersionBody>(),
            reply::<RestoreVersionReply>(),
        ),
        op(
            "POST",
            "/v1/conflicts/dismiss",
            request::<DismissConflictBody>(),
            reply::<DismissConflictReply>(),
        ),
        op(
            "POST",
            "/v1/conflicts/accept",
            request::<AcceptConflictBody>(),
            reply::<AcceptConflictReply>(),
        ),
        op("POST", "/v1/ingest", request::<IngestBody>(), None),
        op(
            "POST",
            "/v1/members",
            request::<MembersBody>(),
            reply::<MembersReply>(),
        ),
        op("POST", "/v1/categories", request::<CategoriesBody>(), None),
        op(
            "POST",
            "/v1/tags",
            request::<TagsBody>(),
            reply::<TagsReply>(),
        ),
    ];
    ops.extend(archive_and_consolidation());
    ops
}

/// The archive's and consolidation's operations (and reindex).
fn archive_and_consolidation() -> Vec<Operation> {
    vec![
        op(
            "POST",
            "/v1/archive/search",
            request::<ArchiveSearchBody>(),
            reply::<ArchiveReply>(),
        ),
        op(
            "POST",
            "/v1/archive/restore",
            request::<RestoreBody>(),
            reply::<Memory>(),
        ),
        op(
            "POST",
            "/v1/consolidation/report",
            request::<ReportBody>(),
            None,
        ),
        op("POST", "/v1/consolidation/run", request::<RunBody>(), None),
        op(
            "POST",
            "/v1/consolidation/rollback",
            request::<RollbackBody>(),
            None,
        ),
        op(
            "POST",
            "/v1/reindex",
            request::<ReindexBody>(),
            reply::<ReindexReply>(),
        ),
    ]
}
