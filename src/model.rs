//! Plain domain types: scenes, privacy, stages, tiers, facts and journal records.
//!
//! No IO here. Every enum has one canonical lowercase wire spelling; parsing
//! accepts the documented aliases (`work`, `financial` → sensitive) and rejects
//! everything else with an `INVALID_INPUT` message that lists what is allowed.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The journal line format this build writes. Readers accept `1..=JOURNAL_VERSION`.
pub const JOURNAL_VERSION: u32 = 1;

/// Longest accepted memory text, in bytes.
pub const MAX_TEXT_BYTES: usize = 32 * 1024;

/// Longest accepted fact id, in bytes.
pub(crate) const MAX_ID_BYTES: usize = 200;

/// Longest accepted title, in bytes.
pub const MAX_TITLE_BYTES: usize = 300;

/// The slots a category may fill (`/v1/categories`).
pub(crate) const CATEGORY_SLOTS: &[&str] = &[
    "company-values",
    "architecture",
    "coding-requirements",
    "custom",
];

/// Longest accepted bookkeeping field (source, keys, device, run), in bytes.
pub(crate) const MAX_FIELD_BYTES: usize = 1024;

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal $(| $alias:literal)*),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The canonical wire spelling.
            pub(crate) fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s.trim().to_ascii_lowercase().as_str() {
                    $($wire $(| $alias)* => Ok($name::$variant),)+
                    other => Err(Error::invalid(format!(
                        "{} must be one of {}; got {other:?}",
                        stringify!($name).to_ascii_lowercase(),
                        [$($wire),+].join(", ")
                    ))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl schemars::JsonSchema for $name {
            /// Named as the MCP tool schemas have always published it (`PrivacyArg`, …).
            fn schema_name() -> std::borrow::Cow<'static, str> {
                concat!(stringify!($name), "Arg").into()
            }

            /// The canonical spellings; what is read also takes the aliases.
            fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
                #[allow(unused_mut)]
                let mut values: Vec<&str> = vec![$($wire),+];
                if matches!(g.contract(), schemars::generate::Contract::Deserialize) {
                    $($(values.push($alias);)*)+
                }
                schemars::json_schema!({"type": "string", "enum": values})
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

wire_enum!(
    /// Sensitivity, the second privacy axis.
    Privacy {
        /// Anyone allowed in the scene may read it.
        Normal = "normal",
        /// About a person; readable in its scene.
        Personal = "personal",
        /// Pinned to `sensitiveAudiences`, needs `sensitive:read`.
        Sensitive = "sensitive" | "work" | "financial",
        /// Pinned to `secretAudiences`, needs `secret:read`. Plain text on disk.
        Secret = "secret",
    }
);

wire_enum!(
    /// Whether a memory is short-term chat or long-term memory.
    Stage {
        /// Ingested chat with a TTL.
        Short = "short",
        /// Written or consolidated memory.
        Long = "long",
    }
);

wire_enum!(
    /// Whose memory this is.
    Subject {
        /// About the owner (default).
        Owner = "owner",
        /// The agent's own judgement.
        SelfAgent = "self",
        /// About someone else.
        Other = "other",
    }
);

wire_enum!(
    /// Retention tier of a long-term memory: ranking, budgets and promotion.
    /// Long-term memories expire only with `lifecycle.tierExpiry` on.
    Tier {
        /// Foundational; ranked up, never expires.
        T0 = "t0",
        /// Long-lived (365 days with tier expiry on).
        T1 = "t1",
        /// The default (90 days with tier expiry on).
        T2 = "t2",
        /// Transient (30 days with tier expiry on).
        T3 = "t3",
    }
);

wire_enum!(
    /// Where a searchable memory comes from.
    Origin {
        /// A line of the fact journal.
        Fact = "fact",
        /// A chunk of a Markdown document.
        Doc = "doc",
    }
);

/// An audience: the scene a memory lives in (`main`, `qq:group:123`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Scene(String);

impl Scene {
    /// Validates a scene name: lowercase ASCII segments of `[a-z0-9_.-]`
    /// separated by `:`, at most 128 bytes.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let ok = !s.is_empty()
            && s.len() <= 128
            && s.split(':').all(|seg| {
                !seg.is_empty()
                    && seg.bytes().all(|b| {
                        b.is_ascii_lowercase()
                            || b.is_ascii_digit()
                            || matches!(b, b'_' | b'-' | b'.')
                    })
            });
        if ok {
            Ok(Scene(s.to_string()))
        } else {
            Err(Error::invalid(format!(
                "scene {s:?} is not valid: use lowercase segments of a-z, 0-9, '_', '-', '.' separated by ':' (e.g. main, qq:group:123)"
            )))
        }
    }

    /// The scene as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The scene with `:` replaced by `-`, as used inside ids.
    pub(crate) fn id_part(&self) -> String {
        self.0.replace(':', "-")
    }
}

impl schemars::JsonSchema for Scene {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Scene".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An audience: lowercase segments of a-z, 0-9, '_', '-', '.' separated by ':' (main, qq:owner, qq:group:123, pet, shared)",
            "pattern": "^[a-z0-9_.-]+(:[a-z0-9_.-]+)*$",
            "maxLength": 128
        })
    }
}

impl<'de> Deserialize<'de> for Scene {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Scene::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Scene {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn default_importance() -> f32 {
    0.5
}

/// Serialises an importance, refusing a non-finite one: JSON has no NaN or
/// infinity (serde_json would write `null`, which no reader accepts back).
fn finite_importance<S: serde::Serializer>(v: &f32, s: S) -> std::result::Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f32(*v)
    } else {
        Err(serde::ser::Error::custom(format!(
            "importance {v} is not a finite number"
        )))
    }
}

/// Where sensitive and secret memories may live (`privacy` in `config.json`).
#[derive(Debug, Clone, Copy)]
pub struct Pins<'a> {
    /// Scenes a `sensitive` memory may live in.
    pub(crate) sensitive: &'a [Scene],
    /// Scenes a `secret` memory may live in.
    pub(crate) secret: &'a [Scene],
}

impl Pins<'_> {
    /// Refuses sensitive and secret memories outside their pinned audiences.
    pub(crate) fn check(&self, privacy: Privacy, scene: &Scene) -> Result<()> {
        let pinned = match privacy {
            Privacy::Sensitive => Some(("sensitive", self.sensitive)),
            Privacy::Secret => Some(("secret", self.secret)),
            _ => None,
        };
        if let Some((name, allowed)) = pinned
            && !allowed.contains(scene)
        {
            let list: Vec<&str> = allowed.iter().map(Scene::as_str).collect();
            return Err(Error::invalid(format!(
                "{name} memories may only live in [{}]; scene {scene} is not one of them",
                list.join(", "),
            )));
        }
        Ok(())
    }
}

/// Longest accepted `time`, `session` or `speaker`, in bytes.
pub(crate) const MAX_SETTING_BYTES: usize = 200;

/// Where and when a memory happened, beside its text: the event time (as
/// given, and parsed when it could be), the conversation or session it belongs
/// to, and who said it. All optional; old journal lines have none. These are
/// indexed as their own lower-weight fields, never mixed into the text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Setting {
    /// When it happened, as given (ISO 8601 or free text such as
    /// `1:56 pm on 8 May, 2023` or `2023年5月8日`). `ts` stays when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) time: Option<String>,
    /// `time` as a timestamp, when it could be parsed (see [`crate::when`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_at: Option<DateTime<Utc>>,
    /// The conversation or session it belongs to (one per ingest call unless
    /// given); turns of one session in one scene are each other's neighbours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Who said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
}

impl Setting {
    /// A setting from what a caller gave: trimmed, empty values dropped,
    /// `time` parsed when possible (the original is kept either way).
    pub fn from_input(time: Option<&str>, session: Option<&str>, speaker: Option<&str>) -> Setting {
        let clean = |v: Option<&str>| {
            v.map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let time = clean(time);
        Setting {
            time_at: time.as_deref().and_then(crate::when::parse_time),
            time,
            session: clean(session),
            speaker: clean(speaker),
        }
    }

    /// A label taken from other data (a chat sender's display name) made to
    /// fit the rules: control characters become spaces, runs of whitespace one
    /// space, and it is cut at a character boundary to [`MAX_SETTING_BYTES`].
    /// A message is never refused over its sender's name.
    pub(crate) fn fit_label(v: &str) -> Option<String> {
        let spaced: String = v
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut out = String::new();
        for word in spaced.split_whitespace() {
            let sep = usize::from(!out.is_empty());
            if out.len() + sep + word.len() > MAX_SETTING_BYTES {
                for c in std::iter::once(' ').take(sep).chain(word.chars()) {
                    if out.len() + c.len_utf8() > MAX_SETTING_BYTES {
                        break;
                    }
                    out.push(c);
                }
                break;
            }
            if sep == 1 {
                out.push(' ');
            }
            out.push_str(word);
        }
        let out = out.trim_end().to_string();
        (!out.is_empty()).then_some(out)
    }

    /// Each field at most [`MAX_SETTING_BYTES`] without control characters.
    pub(crate) fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("time", &self.time),
            ("session", &self.session),
            ("speaker", &self.speaker),
        ] {
            if let Some(v) = value
                && (v.trim().is_empty()
                    || v.len() > MAX_SETTING_BYTES
                    || v.chars().any(char::is_control))
            {
                return Err(Error::invalid(format!(
                    "{name} must be 1-{MAX_SETTING_BYTES} bytes without control characters"
                )));
            }
        }
        if self.time_at.is_some() && self.time.is_none() {
            return Err(Error::invalid("time_at needs the time it was parsed from"));
        }
        Ok(())
    }
}

/// One fact as it is stored in a journal `put` line and in the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// `<origin>-<scene>-<time36>-<rand4>`.
    pub id: String,
    /// When it was written.
    pub ts: DateTime<Utc>,
    /// The audience it lives in.
    pub scene: Scene,
    /// chat, note, fact, preference, event, todo, … (free lowercase word).
    pub kind: String,
    /// short or long.
    pub stage: Stage,
    /// The memory itself.
    pub text: String,
    /// Optional title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Free tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Sensitivity.
    pub privacy: Privacy,
    /// Whose memory it is.
    pub subject: Subject,
    /// Who wrote it (cli, main, qq, sleep, import, …).
    pub source: String,
    /// 0–1, used in ranking.
    #[serde(default = "default_importance", serialize_with = "finite_importance")]
    pub importance: f32,
    /// Retention tier (long stage only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// The id this fact replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// When it stops being searchable (short-term TTL, tier expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// `<provider message id>#<first 12 hex of content hash>` for ingested chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_message_id: Option<String>,
    /// Client-chosen key that makes a write idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The device that wrote it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device: String,
    /// Retrievals counted since the last promotion (carried over when a fact is rewritten).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accesses: u32,
    /// The consolidation run that wrote it (`memd rollback --run`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Event time, session and speaker (absent in lines written before them).
    #[serde(flatten)]
    pub setting: Setting,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Fact {
    /// The write rules every fact must meet, however it enters (write,
    /// ingest, import, consolidation, or a journal line replayed from disk):
    /// a usable id, non-empty text of at most [`MAX_TEXT_BYTES`], a finite
    /// importance in 0–1, a valid kind, tags within their limits, a title of
    /// at most [`MAX_TITLE_BYTES`], bounded bookkeeping fields, and
    /// sensitive/secret only in their pinned scenes. Privacy, stage, subject
    /// and scene are already checked by parsing.
    pub fn validate(&self, pins: &Pins<'_>) -> Result<()> {
        let id = &self.id;
        if id.trim().is_empty() {
            return Err(Error::invalid("id must not be empty"));
        }
        if id.len() > MAX_ID_BYTES
            || id.starts_with("doc-")
            || id.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(Error::invalid(format!(
                "{:?} is not a fact id (1-{MAX_ID_BYTES} bytes, no spaces, not doc-…)",
                short(id)
            )));
        }
        if self.text.trim().is_empty() {
            return Err(Error::invalid(format!("{id}: text must not be empty")));
        }
        if self.text.len() > MAX_TEXT_BYTES {
            return Err(Error::invalid(format!(
                "{id}: text is {} bytes; the limit is {MAX_TEXT_BYTES}",
                self.text.len()
            )));
        }
        if !self.importance.is_finite() || !(0.0..=1.0).contains(&self.importance) {
            return Err(Error::invalid(format!(
                "{id}: importance must be between 0 and 1; got {}",
                self.importance
            )));
        }
        parse_kind(&self.kind).map_err(|e| Error::invalid(format!("{id}: {e}")))?;
        if self
            .tags
            .iter()
            .any(|t| t.len() > 64 || t.chars().any(char::is_control))
            || self.tags.len() > 32
        {
            return Err(Error::invalid(format!(
                "{id}: tags are at most 64 bytes without control characters, at most 32 per memory"
            )));
        }
        if self
            .title
            .as_ref()
            .is_some_and(|t| t.len() > MAX_TITLE_BYTES)
        {
            return Err(Error::invalid(format!(
                "{id}: title must be at most {MAX_TITLE_BYTES} bytes"
            )));
        }
        let fields = [
            ("source", Some(&self.source)),
            ("supersedes", self.supersedes.as_ref()),
            ("source_message_id", self.source_message_id.as_ref()),
            ("idempotency_key", self.idempotency_key.as_ref()),
            ("device", Some(&self.device)),
            ("run", self.run.as_ref()),
        ];
        for (name, value) in fields {
            if value.is_some_and(|v| v.len() > MAX_FIELD_BYTES) {
                return Err(Error::invalid(format!(
                    "{id}: {name} must be at most {MAX_FIELD_BYTES} bytes"
                )));
            }
        }
        self.setting
            .validate()
            .map_err(|e| Error::invalid(format!("{id}: {e}")))?;
        pins.check(self.privacy, &self.scene)
            .map_err(|e| Error::invalid(format!("{id}: {e}")))
    }
}

impl Record {
    /// [`Fact::validate`] for a `put`; a tombstone or touch needs usable ids.
    pub fn validate(&self, pins: &Pins<'_>) -> Result<()> {
        match self {
            Record::Put { fact, .. } => fact.validate(pins),
            Record::Forget { id, .. } => {
                if id.trim().is_empty() || id.len() > MAX_ID_BYTES {
                    return Err(Error::invalid(format!(
                        "forget of {:?}: not a fact id",
                        short(id)
                    )));
                }
                Ok(())
            }
            Record::Touch { ids, .. } => {
                if ids.iter().any(|id| id.len() > MAX_ID_BYTES) {
                    return Err(Error::invalid("touch names an id that is too long"));
                }
                Ok(())
            }
            Record::Link { link, .. } | Record::Unlink { link, .. } => link.validate(),
        }
    }
}

/// The first 40 characters of `s`, for error messages.
fn short(s: &str) -> String {
    s.chars().take(40).collect()
}

/// One line of `memories/facts/YYYY-MM.jsonl`.
///
/// Lines carry `v` (format version) and `op`. Unknown ops from a newer build
/// are reported and skipped, never fatal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Record {
    /// A new or replacing fact.
    Put {
        /// Format version.
        v: u32,
        /// When this line was written, if not `fact.ts`: a rewrite keeps the
        /// fact's own `ts` but is a newer version of it. Part of the merge
        /// order of `put` lines (see [`crate::index::merge`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<DateTime<Utc>>,
        /// The fact.
        #[serde(flatten)]
        fact: Fact,
    },
    /// A tombstone: the id is forgotten.
    Forget {
        /// Format version.
        v: u32,
        /// The forgotten id.
        id: String,
        /// When.
        ts: DateTime<Utc>,
        /// Why, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Who forgot it.
        #[serde(default)]
        source: String,
    },
    /// Long-term memories were retrieved: each id counts one access at `ts`
    /// (sliding expiry and promotion are replayed from these lines).
    Touch {
        /// Format version.
        v: u32,
        /// The retrieved ids, each counted once.
        ids: Vec<String>,
        /// When (the end of the batching window).
        ts: DateTime<Utc>,
    },
    /// Two memories are related (`conflicts_with`: they likely contradict
    /// each other). Builds before links report the line and skip it.
    Link {
        /// Format version.
        v: u32,
        /// The pair.
        #[serde(flatten)]
        link: Link,
    },
    /// A link was dismissed: the later of a pair's `link` and `unlink`
    /// lines (by `ts`) decides; a later `link` brings it back.
    Unlink {
        /// Format version.
        v: u32,
        /// The pair.
        #[serde(flatten)]
        link: Link,
    },
}

/// The relation of a [`Record::Link`]: the two memories likely contradict
/// each other (see [`crate::contradiction`]).
pub const CONFLICTS_WITH: &str = "conflicts_with";

/// A pair of memories in a `link` or `unlink` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// The relation (`conflicts_with`).
    pub rel: String,
    /// The older memory.
    pub a: String,
    /// The newer memory.
    pub b: String,
    /// When the line was written.
    pub ts: DateTime<Utc>,
    /// Why they are linked (`negation`, `date`, …), if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who wrote the line (`write`, `sleep`, a token's name).
    #[serde(default)]
    pub source: String,
}

/// Another memory the caller may read that likely contradicts this one
/// (a live `conflicts_with` link; see `docs/memories.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConflictRef {
    /// The other memory.
    pub id: String,
    /// Whether the other memory is the newer of the two.
    pub newer: bool,
    /// Why they were linked (`negation`, `preference`, `date`, `number`, `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Link {
    /// Usable ids (two different ones), a known relation and bounded fields.
    fn validate(&self) -> Result<()> {
        let bad_id = |id: &str| id.trim().is_empty() || id.len() > MAX_ID_BYTES;
        if bad_id(&self.a) || bad_id(&self.b) || self.a == self.b {
            return Err(Error::invalid("a link needs two different fact ids"));
        }
        if self.rel != CONFLICTS_WITH {
            return Err(Error::invalid(format!(
                "unknown link relation {:?}",
                short(&self.rel)
            )));
        }
        let long = |f: Option<&String>| f.is_some_and(|v| v.len() > MAX_FIELD_BYTES);
        if long(self.reason.as_ref()) || long(Some(&self.source)) {
            return Err(Error::invalid(format!(
                "a link's reason and source are at most {MAX_FIELD_BYTES} bytes"
            )));
        }
        Ok(())
    }
}

impl Record {
    /// The id the record is about.
    pub(crate) fn id(&self) -> &str {
        match self {
            Record::Put { fact, .. } => &fact.id,
            Record::Forget { id, .. } => id,
            Record::Touch { ids, .. } => ids.first().map_or("", String::as_str),
            Record::Link { link, .. } | Record::Unlink { link, .. } => &link.a,
        }
    }

    /// When the record was written.
    pub(crate) fn ts(&self) -> DateTime<Utc> {
        match self {
            Record::Put { fact, .. } => fact.ts,
            Record::Forget { ts, .. } | Record::Touch { ts, .. } => *ts,
            Record::Link { link, .. } | Record::Unlink { link, .. } => link.ts,
        }
    }

    /// The format version of the line.
    pub(crate) fn version(&self) -> u32 {
        match self {
            Record::Put { v, .. }
            | Record::Forget { v, .. }
            | Record::Touch { v, .. }
            | Record::Link { v, .. }
            | Record::Unlink { v, .. } => *v,
        }
    }
}

/// A searchable unit as the index sees it: a fact or a document chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    /// Fact id or `doc-<hash8>#<n>` chunk id.
    pub id: String,
    /// fact or doc.
    pub(crate) origin: Origin,
    /// For chunks, the document id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) doc_id: Option<String>,
    /// For chunks, the path relative to `memories/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// When written (facts) or last modified (documents).
    pub ts: DateTime<Utc>,
    /// Audience.
    pub scene: Scene,
    /// Kind word.
    pub kind: String,
    /// Stage.
    pub stage: Stage,
    /// Title (fact title, or document title › heading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Text.
    pub text: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Sensitivity.
    pub privacy: Privacy,
    /// Whose memory it is.
    pub subject: Subject,
    /// Who wrote it.
    pub(crate) source: String,
    /// 0–1.
    #[serde(serialize_with = "finite_importance")]
    pub importance: f32,
    /// Retention tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Replaced id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// Expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Event time, session and speaker.
    #[serde(flatten)]
    pub setting: Setting,
}

impl From<&Fact> for Memory {
    fn from(f: &Fact) -> Self {
        Memory {
            id: f.id.clone(),
            origin: Origin::Fact,
            doc_id: None,
            path: None,
            ts: f.ts,
            scene: f.scene.clone(),
            kind: f.kind.clone(),
            stage: f.stage,
            title: f.title.clone(),
            text: f.text.clone(),
            tags: f.tags.clone(),
            privacy: f.privacy,
            subject: f.subject,
            source: f.source.clone(),
            importance: f.importance,
            tier: f.tier,
            supersedes: f.supersedes.clone(),
            expires_at: f.expires_at,
            setting: f.setting.clone(),
        }
    }
}

/// Validates a kind word: lowercase ASCII letters, digits, `_` and `-`, 1–32 bytes.
pub(crate) fn parse_kind(s: &str) -> Result<String> {
    let s = s.trim().to_ascii_lowercase();
    if !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        Ok(s)
    } else {
        Err(Error::invalid(format!(
            "kind {s:?} is not valid: use 1-32 lowercase letters, digits, '_' or '-' (e.g. note, fact, preference, event, todo, chat)"
        )))
    }
}

/// Validates and normalises tags: trimmed, non-empty, at most 64 bytes each, at most 32, deduplicated.
pub(crate) fn parse_tags<I: IntoIterator<Item = S>, S: AsRef<str>>(tags: I) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.as_ref().trim();
        if t.is_empty() {
            continue;
        }
        if t.len() > 64 || t.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "tag {t:?} is not valid: tags are at most 64 bytes without control characters"
            )));
        }
        if !out.iter().any(|x| x == t) {
            out.push(t.to_string());
        }
    }
    if out.len() > 32 {
        return Err(Error::invalid("at most 32 tags per memory"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privacy_aliases() {
        for (input, want) in [
            ("normal", Privacy::Normal),
            ("Personal", Privacy::Personal),
            ("work", Privacy::Sensitive),
            ("financial", Privacy::Sensitive),
            ("secret", Privacy::Secret),
        ] {
            assert_eq!(input.parse::<Privacy>().unwrap(), want, "{input}");
        }
        let err = "public".parse::<Privacy>().unwrap_err();
        assert!(
            err.to_string()
                .contains("normal, personal, sensitive, secret")
        );
    }

    #[test]
    fn scenes() {
        for ok in [
            "main",
            "qq:owner",
            "qq:group:650866701",
            "pet",
            "shared",
            "qq:private:1",
        ] {
            assert_eq!(Scene::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "Main", "qq::1", "a b", ":x", "x:", "群"] {
            assert!(Scene::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Scene::parse("qq:group:1").unwrap().id_part(), "qq-group-1");
    }

    #[test]
    fn record_round_trip() {
        let line = r#"{"op":"forget","v":1,"id":"fact-main-x-1","ts":"2026-01-02T03:04:05Z","source":"cli"}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(r.id(), "fact-main-x-1");
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(r, back);
    }

    #[test]
    fn touch_lines_round_trip_and_old_puts_still_parse() {
        let line = r#"{"op":"touch","v":1,"ids":["fact-main-a-1","fact-main-b-2"],"ts":"2026-01-02T03:04:05Z"}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(r.id(), "fact-main-a-1");
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
        // A put written before `accesses` existed reads with 0 and writes back unchanged.
        let put = r#"{"op":"put","v":1,"id":"fact-main-x-1","ts":"2026-01-02T03:04:05Z","scene":"main","kind":"note","stage":"long","text":"t","privacy":"normal","subject":"owner","source":"cli","importance":0.5}"#;
        let r: Record = serde_json::from_str(put).unwrap();
        let Record::Put { fact, .. } = &r else {
            panic!("a put")
        };
        assert_eq!(fact.accesses, 0);
        assert_eq!(serde_json::to_string(&r).unwrap(), put);
    }

    #[test]
    fn non_finite_importance_is_never_serialised_and_fails_validation() {
        let put = r#"{"op":"put","v":1,"id":"fact-main-x-1","ts":"2026-01-02T03:04:05Z","scene":"main","kind":"note","stage":"long","text":"t","privacy":"normal","subject":"owner","source":"cli","importance":1e308}"#;
        let pins = Pins {
            sensitive: &[],
            secret: &[],
        };
        let r: Record = serde_json::from_str(put).unwrap();
        let Record::Put { fact, .. } = &r else {
            panic!("a put")
        };
        assert!(!fact.importance.is_finite());
        assert!(r.validate(&pins).is_err());
        assert!(serde_json::to_string(&r).is_err(), "no `null` written");
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut f = fact.clone();
            f.importance = bad;
            assert!(serde_json::to_string(&f).is_err());
            assert!(serde_json::to_string(&Memory::from(&f)).is_err());
            assert!(f.validate(&pins).is_err());
        }
        let mut ok = fact.clone();
        ok.importance = 1.0;
        ok.validate(&pins).unwrap();
        let mut secret = ok.clone();
        secret.privacy = Privacy::Secret;
        assert!(secret.validate(&pins).is_err(), "secret pinned nowhere");
    }

    #[test]
    fn a_senders_name_always_fits_the_speaker_rules() {
        let long = "名".repeat(100);
        for name in ["Ann\u{7}\nLee", long.as_str(), " \t ", "a\u{0}b"] {
            let fitted = Setting::fit_label(name);
            let setting = Setting::from_input(None, None, fitted.as_deref());
            setting.validate().unwrap();
            if let Some(f) = &fitted {
                assert!(f.len() <= MAX_SETTING_BYTES, "{f}");
            }
        }
        assert_eq!(
            Setting::fit_label("Ann\u{7}\nLee").as_deref(),
            Some("Ann Lee")
        );
        assert_eq!(Setting::fit_label(" \t "), None);
        assert_eq!(Setting::fit_label(&long).unwrap().chars().count(), 66);
    }

    #[test]
    fn event_time_session_and_speaker_round_trip_and_are_validated() {
        let put = r#"{"op":"put","v":1,"id":"fact-main-x-1","ts":"2026-01-02T03:04:05Z","scene":"main","kind":"note","stage":"long","text":"t","privacy":"normal","subject":"owner","source":"cli","importance":0.5,"time":"1:56 pm on 8 May, 2023","time_at":"2023-05-08T13:56:00Z","session":"1","speaker":"Mel"}"#;
        let r: Record = serde_json::from_str(put).unwrap();
        let Record::Put { fact, .. } = &r else {
            panic!("a put")
        };
        assert_eq!(
            fact.setting,
            Setting::from_input(Some(" 1:56 pm on 8 May, 2023 "), Some("1"), Some("Mel"))
        );
        assert_eq!(serde_json::to_string(&r).unwrap(), put);
        let pins = Pins {
            sensitive: &[],
            secret: &[],
        };
        r.validate(&pins).unwrap();
        assert_eq!(
            Setting::from_input(Some(" "), Some(""), None),
            Setting::default()
        );
        for bad in [
            Setting {
                time: Some("x".repeat(MAX_SETTING_BYTES + 1)),
                ..Setting::default()
            },
            Setting {
                speaker: Some("a\nb".into()),
                ..Setting::default()
            },
            Setting {
                time_at: fact.setting.time_at,
                ..Setting::default()
            },
        ] {
            let mut f = fact.clone();
            f.setting = bad;
            assert_eq!(
                f.validate(&pins).unwrap_err().code(),
                crate::error::ErrorCode::InvalidInput
            );
        }
    }

    #[test]
    fn tags_and_kind() {
        assert_eq!(parse_tags(["a", " b ", "a", ""]).unwrap(), vec!["a", "b"]);
        assert!(parse_tags(["x".repeat(65)]).is_err());
        assert_eq!(parse_kind("Note").unwrap(), "note");
        assert!(parse_kind("no te").is_err());
    }
}
