//! Use cases: ingest (`POST /v1/ingest`): one chat message becomes a
//! short-term memory with a TTL, and group senders become known group
//! members; membership events (`POST /v1/members`).
//!
//! An ingested message lands in one of the token's write scenes and is
//! recorded with the scene's source; its TTL is the request's (1-168 hours)
//! or `ingest.ttlHours`; a sender listed in `ingest.ownerIds` (read from the
//! live config, so a reloaded `config.json` applies to the next message)
//! makes it the owner's. Saying so with `from_owner: true` needs the
//! `from_owner` scope (or `*`): a token without it cannot put words in the
//! owner's mouth. A group's members are edited by the group's own token (or
//! `*`); `add`, `remove` and `set` take the same members, `{id, name}`
//! objects or bare ids.
//!
//! Idempotency keys on `<provider message id>#<first 12 hex of sha256(text)>`
//! (stored as `source_message_id`), never on the provider id alone: QQ reuses
//! short message ids within a conversation, so the id alone would drop a
//! different second message as a duplicate. A repeat answers `NOOP` with the
//! existing id. Messages without words (empty, only punctuation or emoji,
//! bot commands) are skipped at the door. A credential in any field of a
//! message (text, message id, sender id and name, session) or of a
//! membership event (member ids and names) is refused before anything is
//! stored, the membership table included.

use std::sync::LazyLock;

use chrono::{DateTime, Duration, FixedOffset, Utc};
use regex::Regex;
use serde::Serialize;
use unicode_normalization::UnicodeNormalization;

use super::write::source_for;
use super::{Caller, Hub, WriteAction, WriteRequest};
use crate::api::{IngestBody, Member, MembersBody, MembersReply};
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::ids::sha256_hex;
use crate::model::{Privacy, Scene, Stage, Subject};
use crate::store::members;

/// A chat message to remember for a while, after the caller's rules.
#[derive(Debug, Clone)]
pub(crate) struct IngestRequest {
    /// The scene the message was said in.
    pub(crate) scene: Scene,
    /// The provider's message id.
    pub(crate) message_id: String,
    /// What was said.
    pub(crate) text: String,
    /// Who said it (provider user id), if known.
    pub(crate) sender_id: Option<String>,
    /// Their display name, if known.
    pub(crate) sender_name: Option<String>,
    /// The owner said it.
    pub(crate) from_owner: bool,
    /// The agent itself said it.
    pub(crate) from_self: bool,
    /// When it was said, in the sender's offset; the TTL counts from here (default: now).
    pub(crate) sent_at: Option<DateTime<FixedOffset>>,
    /// How long it stays searchable.
    pub(crate) ttl: Duration,
    /// Who reports it (recorded as the source).
    pub(crate) source: String,
    /// The conversation it belongs to, if the caller knows one (a thread, or
    /// the scene's day); messages of one session are each other's search
    /// context. Without it a message is a session of its own.
    pub(crate) session: Option<String>,
}

/// What ingest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum IngestAction {
    /// Stored as a new short-term memory.
    Add,
    /// Already stored; the existing id is returned.
    Noop,
    /// Not worth remembering (no words, or a command).
    Skip,
}

/// The result of an ingest.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct IngestOutcome {
    /// The memory id (absent when skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What happened.
    pub action: IngestAction,
    /// The idempotency key.
    pub(crate) source_message_id: String,
    /// When the memory stops being searchable.
    pub(crate) expires_at: DateTime<Utc>,
    /// Why it was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `<message id>#<first 12 hex of sha256(text)>`.
pub(crate) fn source_message_id(message_id: &str, text: &str) -> String {
    format!("{message_id}#{}", &sha256_hex(text.as_bytes())[..12])
}

static CQ_CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[CQ:[^\]]*\]|\[(图片|表情|动画表情|语音|视频|文件|红包|转账|位置|链接|名片|戳一戳|闪照|QQ小程序|分享|聊天记录|image|sticker|photo|voice|video|file|emoji)\]|\{\{[^}]*\}\}")
        .expect("placeholder pattern compiles")
});
static BOT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[#.!！][\p{L}\p{N}]{1,12}(\s\S{1,12})?$").expect("command pattern compiles")
});
static URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(https?://|www\.)\S+$").expect("URL pattern compiles"));
static ACK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(好+|好的+|好吧|嗯+|嗯嗯+|哦+|噢+|喔+|啊+|额+|呃+|行+|对+|是+|收到|了解|明白|知道了|okk*|okay|k+|kk|yes|yep|yeah|yup|no|nope|sure|thx|thanks?|ty|lol+|lmao|haha+|hehe+|h{3,}|xd|nice|cool|wow|哈+|呵+|嘿+|嘻+|哇+|6+|666+|\+1|1+|草|笑死|牛|牛逼|nb|yyds|晚安|早|早安|在|在吗|emm+|mm+|233+)$",
    )
    .expect("acknowledgement pattern compiles")
});

static MENTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([@＠]\S+\s*)+$").expect("mention pattern compiles"));

/// Why a message is not worth storing, if it is not: bot commands, QQ CQ
/// codes and placeholders (`[图片]`, `[表情]`, `[CQ:…]`) with nothing else, a
/// link alone, bare @mentions, bare acknowledgements and laughter ("好", "嗯",
/// "哈哈哈", "hhhh", "ok", "+1", full-width forms too), or no words at all.
pub(crate) fn noise(text: &str) -> Option<&'static str> {
    let text = text.trim();
    if text.starts_with('/') || BOT.is_match(text) {
        return Some("bot command");
    }
    let rest = CQ_CODE.replace_all(text, "");
    let rest = rest.trim();
    if rest.is_empty() {
        return Some("placeholder or sticker only");
    }
    if URL.is_match(rest) {
        return Some("link only");
    }
    if !rest.chars().any(char::is_alphanumeric) {
        return Some("no words");
    }
    if MENTION.is_match(rest) {
        return Some("mention only");
    }
    // Full-width forms (`＋１`, `ＯＫ`) read as their ASCII twins.
    let bare: String = rest
        .nfkc()
        .filter(|c| {
            !c.is_whitespace()
                && !matches!(c, '~' | '～' | '!' | '！' | '.' | '。' | '…' | ',' | '，')
        })
        .collect();
    if ACK.is_match(&bare) {
        return Some("acknowledgement");
    }
    None
}

impl Hub {
    /// Stores a chat message for `caller` as a short-term memory (see the module docs).
    pub fn ingest(&self, caller: &Caller, body: IngestBody) -> Result<IngestOutcome> {
        let scene = caller.write_scene(body.scene.as_deref())?;
        caller.check_write(Privacy::Normal)?;
        if body.from_owner && !caller.has(scope::ALL) {
            caller.require(scope::FROM_OWNER).map_err(|_| {
                Error::Forbidden(
                    "from_owner needs the \"from_owner\" scope (or \"*\"): this token may not \
                     say the owner sent a message"
                        .into(),
                )
            })?;
        }
        let config = self.config();
        let ttl_hours = body.ttl_hours.unwrap_or(config.ingest.ttl_hours);
        if !(1..=168).contains(&ttl_hours) {
            return Err(Error::invalid("ttl_hours must be between 1 and 168"));
        }
        let (sender_id, sender_name) = match body.sender {
            Some(s) => (Some(s.id), s.name),
            None => (None, None),
        };
        // The configured owner ids make a message the owner's, as `from_owner` does.
        let from_owner = body.from_owner
            || (!body.from_self
                && sender_id
                    .as_ref()
                    .is_some_and(|id| config.ingest.owner_ids.contains(id)));
        ingest_message(
            self,
            IngestRequest {
                source: source_for(caller, &scene, None)?,
                scene,
                message_id: body.message_id,
                text: body.text,
                sender_id,
                sender_name,
                from_owner,
                from_self: body.from_self,
                sent_at: body.sent_at,
                ttl: Duration::hours(i64::from(ttl_hours)),
                session: body.session,
            },
        )
    }

    /// Records membership events of a group for `caller`: the group's own
    /// token, or one with `*`.
    pub fn members(&self, caller: &Caller, body: MembersBody) -> Result<MembersReply> {
        let scene = caller.scene(body.scene.as_deref())?;
        caller.require(scope::WRITE)?;
        let group = match &body.group {
            Some(g) => Scene::parse(g)?,
            None => scene,
        };
        if !caller.has(scope::ALL) && !caller.write_scenes().contains(&group) {
            return Err(Error::Forbidden(format!(
                "group {group} is not one of this token's scenes"
            )));
        }
        let pairs = |list: Vec<Member>| -> Vec<(String, Option<String>)> {
            list.into_iter().map(Member::into_parts).collect()
        };
        let set = body.set.map(pairs);
        let remove: Vec<String> = pairs(body.remove).into_iter().map(|(id, _)| id).collect();
        let (added, removed) =
            update_members(self, &group, set.as_deref(), &pairs(body.add), &remove)?;
        Ok(MembersReply {
            group,
            added,
            removed,
        })
    }
}

/// Stores a chat message as a short-term memory; see the module docs.
pub(crate) fn ingest_message(hub: &Hub, req: IngestRequest) -> Result<IngestOutcome> {
    let text = req.text.trim();
    if text.is_empty() {
        return Err(Error::invalid("text must not be empty"));
    }
    let message_id = req.message_id.trim();
    if message_id.is_empty() || message_id.len() > 128 {
        return Err(Error::invalid("message_id must be 1-128 bytes"));
    }
    if req.from_owner && req.from_self {
        return Err(Error::invalid(
            "a message cannot be both from_owner and from_self",
        ));
    }
    // Every field the message brings, checked before anything is stored or
    // answered (the membership table included).
    if let Some(hit) = message_credential(&req, text, message_id) {
        return Err(hit.refusal());
    }
    let smid = source_message_id(message_id, text);
    // A clock ahead of ours must not stretch the TTL.
    let now = hub.now();
    let expires_at = req.sent_at.map_or(now, |t| t.with_timezone(&Utc).min(now)) + req.ttl;
    if let Some(reason) = noise(text) {
        return Ok(IngestOutcome {
            id: None,
            action: IngestAction::Skip,
            source_message_id: smid,
            expires_at,
            reason: Some(reason.into()),
        });
    }
    note_sender(hub, &req)?;
    let w = chat_write(&req, text, &smid, expires_at)?;
    let outcome = hub.append(w)?;
    Ok(IngestOutcome {
        id: Some(outcome.id),
        action: match outcome.action {
            WriteAction::Add => IngestAction::Add,
            WriteAction::Noop | WriteAction::Update => IngestAction::Noop,
        },
        source_message_id: smid,
        expires_at,
        reason: None,
    })
}

/// A credential in any field of a message, named as the request names it.
fn message_credential(
    req: &IngestRequest,
    text: &str,
    message_id: &str,
) -> Option<crate::content::CredentialHit> {
    use crate::content::FieldKind::{Id, Prose};
    crate::content::scan(
        [("text", Prose, text), ("message_id", Id, message_id)]
            .into_iter()
            .chain(req.sender_id.as_deref().map(|v| ("sender.id", Id, v)))
            .chain(
                req.sender_name
                    .as_deref()
                    .map(|v| ("sender.name", Prose, v)),
            )
            .chain(req.session.as_deref().map(|v| ("session", Id, v))),
    )
}

/// A group message's sender becomes a known member of the group. The
/// message matters more than the membership table: an unreadable table
/// (a damaged file, a sync conflict) is logged and disclosure keeps
/// failing closed, but the chat line is stored.
fn note_sender(hub: &Hub, req: &IngestRequest) -> Result<()> {
    if !req.scene.as_str().starts_with("qq:group:") || req.from_self {
        return Ok(());
    }
    let Some(sender) = &req.sender_id else {
        return Ok(());
    };
    match members::update(
        &members::path(&hub.layout().memories()),
        &req.scene,
        &[(sender.clone(), req.sender_name.clone())],
        &[],
        "ingest",
    ) {
        Ok(_) => Ok(()),
        Err(e) if e.code() == crate::error::ErrorCode::InvalidInput => Err(e),
        Err(e) => {
            tracing::error!(error = %e, "membership table not updated; the message is stored anyway");
            Ok(())
        }
    }
}

/// Records explicit membership changes of a group; with `set`, the given
/// list replaces the whole table of the group first (reconciliation).
pub(crate) fn update_members(
    hub: &Hub,
    group: &Scene,
    set: Option<&[(String, Option<String>)]>,
    add: &[(String, Option<String>)],
    remove: &[String],
) -> Result<(usize, usize)> {
    if !group.as_str().starts_with("qq:group:") {
        return Err(Error::invalid(format!(
            "group must be a qq:group:<id> scene; got {group}"
        )));
    }
    if !hub.is_writer() {
        return Err(Error::invalid(
            "membership changes need the writer; this hub is read-only",
        ));
    }
    let path = members::path(&hub.layout().memories());
    let (mut added, mut removed) = (0, 0);
    if let Some(list) = set {
        (added, removed) = members::replace(&path, group, list, "explicit")?;
    }
    let (a, r) = members::update(&path, group, add, remove, "explicit")?;
    Ok((added + a, removed + r))
}

/// Whether `user` is a known member of `group`; any doubt (unreadable table) is "no".
pub(crate) fn is_member(hub: &Hub, group: &Scene, user: &str) -> bool {
    match members::is_member(&members::path(&hub.layout().memories()), group, user) {
        Ok(known) => known,
        Err(e) => {
            tracing::error!(error = %e, "membership table unreadable; refusing disclosure");
            false
        }
    }
}

/// The short-term chat memory of a message (`text` is the trimmed text).
fn chat_write(
    req: &IngestRequest,
    text: &str,
    smid: &str,
    expires_at: DateTime<Utc>,
) -> Result<WriteRequest> {
    // Placeholders say nothing searchable; the words around them stay.
    let stored = CQ_CODE.replace_all(text, "");
    let mut w = WriteRequest::new(req.scene.clone(), stored.trim(), req.source.clone());
    w.origin = "chat".into();
    w.kind = "chat".into();
    w.stage = Stage::Short;
    // The sender's name, fitted (never a reason to refuse the message).
    let name = req
        .sender_name
        .as_deref()
        .and_then(crate::model::Setting::fit_label);
    w.title = name.clone();
    w.subject = if req.from_owner {
        Subject::Owner
    } else if req.from_self {
        Subject::SelfAgent
    } else {
        Subject::Other
    };
    if let Some(sender) = &req.sender_id {
        w.tags = crate::model::parse_tags([format!("from:{sender}")])?;
    }
    w.expires_at = Some(expires_at);
    w.setting = crate::model::Setting::from_input(
        req.sent_at
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .as_deref(),
        req.session.as_deref(),
        name.or_else(|| {
            req.sender_id
                .as_deref()
                .and_then(crate::model::Setting::fit_label)
        })
        .as_deref(),
    );
    w.source_message_id = Some(smid.to_string());
    // The scene is part of the key so one conversation can never learn
    // that a message id exists in another.
    w.idempotency_key = Some(format!("ingest|{}|{smid}", req.scene));
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_noise() {
        let k = source_message_id("123", "hello");
        assert!(k.starts_with("123#") && k.len() == 4 + 12, "{k}");
        assert_ne!(k, source_message_id("123", "hello!"));
        assert_eq!(noise("/help"), Some("bot command"));
        assert_eq!(noise("？？！"), Some("no words"));
        for ack in [
            "好",
            "嗯嗯",
            "哈哈哈",
            "ok",
            "OK!",
            "+1",
            "收到～",
            "666",
            "好的",
            "hhhh",
            "＋１",
            "ＯＫ",
        ] {
            assert_eq!(noise(ack), Some("acknowledgement"), "{ack}");
        }
        assert_eq!(noise("@小王 "), Some("mention only"));
        assert_eq!(noise("@小王 @小李"), Some("mention only"));
        assert_eq!(noise("@小王 明天记得带伞"), None);
        assert_eq!(noise("hhh今天考试过了"), None);
        for ph in [
            "[图片]",
            "[表情][表情]",
            "[CQ:face,id=178]",
            "[CQ:image,file=a.jpg] ",
        ] {
            assert_eq!(noise(ph), Some("placeholder or sticker only"), "{ph}");
        }
        assert_eq!(noise("https://example.com/a?b=c"), Some("link only"));
        assert_eq!(noise("!roll d20"), Some("bot command"));
        assert_eq!(noise("#签到"), Some("bot command"));
        assert_eq!(noise(".r 1d100"), Some("bot command"));
        for kept in [
            "好的，明天三点见",
            "我对花生过敏[表情]",
            "ok, I'll bring the cake on Friday",
            "看这个 https://example.com 我下周去",
            "嗯，我决定了",
        ] {
            assert_eq!(noise(kept), None, "{kept}");
        }
    }
}
