//! Use case: write a memory (`POST /v1/write`, `memory_write`, `memd write`).
//!
//! The rules a write meets before the writer's own (`hub/parts/writer.rs`):
//!
//! - It lands in the request's scene, which must be one of the token's
//!   write scenes (default: the first); the privacy level needs the matching
//!   scope (`secret:write` for secret, `sensitive:read` for sensitive).
//! - Whose memory it is (`subject_for`) and who wrote it (`source_for`)
//!   default from the token: only a token with `*` (the owner's own agents,
//!   the local operator) speaks as the owner or names its source.
//! - Pinning (tier `t0` or kind `category`) needs `*`: nothing forgets a
//!   pinned memory on its own, and consolidation may not touch it.
//! - A short-term write expires after `ingest.ttlHours`.
//! - An idempotency key (1-200 bytes) is namespaced by token and scene.
//! - With `supersedes`, the write is a new version: [`super::supersede`]
//!   fills in what the request leaves out from the replaced version and adds
//!   the rules of replacing; every rule above then applies to the result.

use chrono::Duration;

use super::{Caller, Hub, WriteOutcome, WriteRequest};
use crate::api::WriteBody;
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::model::{Privacy, Scene, Setting, Stage, Subject, Tier, parse_kind, parse_tags};

/// The scene in which a token without `*` may write `subject: self`: the
/// pet's notes about itself. Nowhere else can such a token speak for the
/// owner's agent.
const SELF_SCENE: &str = "pet";

/// Longest client idempotency key, in bytes (before namespacing).
const MAX_KEY_BYTES: usize = 200;

impl Hub {
    /// Writes one memory for `caller` (see the module docs); returns after
    /// its journal line is fsync'd and indexed.
    pub fn write(&self, caller: &Caller, body: WriteBody) -> Result<WriteOutcome> {
        match body.supersedes.clone() {
            Some(old) => self.supersede(caller, body, &old),
            None => {
                let out = self.append(write_request(self, caller, body)?)?;
                if out.action == super::WriteAction::Add {
                    self.note_conflicts(&out.id);
                }
                Ok(out)
            }
        }
    }

    /// Links a new memory to the ones it likely contradicts
    /// ([`super::conflicts`]); a failure costs only the link, never the write.
    pub(crate) fn note_conflicts(&self, id: &str) {
        if let Err(e) = self.link_conflicts_of(id) {
            tracing::warn!(fact.id = %id, error.code = e.code().as_str(), error.message = %e, "cannot link conflicting memories");
        }
    }
}

/// The writer's request for `body`, after every rule of a new memory.
pub(crate) fn write_request(hub: &Hub, caller: &Caller, body: WriteBody) -> Result<WriteRequest> {
    let scene = caller.write_scene(body.scene.as_deref())?;
    let privacy = body.privacy.unwrap_or(Privacy::Normal);
    caller.check_write(privacy)?;
    let subject = subject_for(caller, &scene, body.subject)?;
    let source = source_for(caller, &scene, body.source)?;
    let mut req = WriteRequest::new(scene.clone(), body.text, source);
    if let Some(k) = &body.kind {
        req.kind = parse_kind(k)?;
    }
    req.title = body.title;
    req.tags = parse_tags(body.tags.as_deref().unwrap_or_default())?;
    req.privacy = privacy;
    req.subject = subject;
    req.importance = body.importance.unwrap_or(0.5);
    check_pin(caller, body.tier, &req.kind)?;
    req.tier = body.tier;
    req.stage = body.stage.unwrap_or(Stage::Long);
    if req.stage == Stage::Short {
        let ttl = i64::from(hub.config().ingest.ttl_hours);
        req.expires_at = Some(caller.now() + Duration::hours(ttl));
    }
    req.setting = Setting::from_input(
        body.time.as_deref(),
        body.session.as_deref(),
        body.speaker.as_deref(),
    );
    req.idempotency_key = body
        .idempotency_key
        .map(|k| namespaced_key(caller, &scene, &k))
        .transpose()?;
    Ok(req)
}

/// T0 is pinned: nothing forgets it on its own and consolidation may not
/// touch it from group evidence, so only the owner's own agents pin.
pub(crate) fn check_pin(caller: &Caller, tier: Option<Tier>, kind: &str) -> Result<()> {
    if (tier == Some(Tier::T0) || kind == "category") && !caller.has(scope::ALL) {
        return Err(Error::Forbidden(
            "only a token with the \"*\" scope may pin memories (tier t0 or kind category)".into(),
        ));
    }
    Ok(())
}

/// Keys are namespaced by token and scene: a key names one caller's retry,
/// so another token using the same key can neither squat it (make this
/// caller's write answer NOOP with someone else's id, storing nothing) nor
/// learn through a NOOP that it exists. Token names and scenes contain no `|`.
fn namespaced_key(caller: &Caller, scene: &Scene, key: &str) -> Result<String> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(Error::invalid(format!(
            "idempotency_key must be 1-{MAX_KEY_BYTES} bytes"
        )));
    }
    Ok(format!("w|{}|{scene}|{key}", caller.name()))
}

/// The source recorded for a write: what the caller says if it holds `*`,
/// else derived from the scene (`qq` for QQ scenes, else the scene's first part).
pub(crate) fn source_for(caller: &Caller, scene: &Scene, asked: Option<String>) -> Result<String> {
    match asked {
        Some(s) if caller.has(scope::ALL) => {
            let s = s.trim().to_string();
            if s.is_empty() || s.len() > 64 {
                return Err(Error::invalid("source must be 1-64 bytes"));
            }
            Ok(s)
        }
        Some(_) => Err(Error::Forbidden(
            "only a token with the \"*\" scope may set source".into(),
        )),
        None => Ok(scene
            .as_str()
            .split(':')
            .next()
            .unwrap_or("main")
            .to_string()),
    }
}

/// Whose memory a write is. A token with `*` (the owner's own agents) says
/// what it likes and defaults to `owner`. Any other token writes on behalf of
/// an audience, so it defaults to `other`, and claiming `owner` or `self` is
/// `FORBIDDEN` — except `self` in the `pet` scene. Reads that show "your own
/// notes" also keep to the caller's write scenes (see [`Hub::bootstrap`]).
pub(crate) fn subject_for(
    caller: &Caller,
    scene: &Scene,
    asked: Option<Subject>,
) -> Result<Subject> {
    if caller.has(scope::ALL) {
        return Ok(asked.unwrap_or(Subject::Owner));
    }
    match asked {
        None | Some(Subject::Other) => Ok(Subject::Other),
        Some(Subject::SelfAgent) if scene.as_str() == SELF_SCENE => Ok(Subject::SelfAgent),
        Some(s) => Err(Error::Forbidden(format!(
            "subject {s:?} needs a token with the \"*\" scope: a token for {scene} writes about \
             others (subject \"other\", the default), never as the owner or the agent itself"
        ))),
    }
}
