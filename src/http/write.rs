//! Write routes: write, forget, ingest, members.
//!
//! A write lands in the request's scene, which must be one of the token's;
//! the privacy level needs the matching scope. The reply comes after the
//! journal line is fsync'd and indexed.

use axum::extract::State;
use axum::response::Response;
use chrono::Duration;

use super::error::ApiError;
use super::extract::{ApiJson, Caller};
use super::{AppState, AuditNote, reply};
use crate::api::{
    ForgetBody, ForgetReply, IngestBody, MembersBody, MembersReply, Sender, WriteBody,
};
use crate::auth::{Grant, policy, scope};
use crate::hub::{IngestRequest, WriteRequest};
use crate::model::{Privacy, Scene, Stage, Subject, Tier, parse_kind, parse_tags};

fn note(scene: &Scene, ids: impl IntoIterator<Item = String>) -> AuditNote {
    AuditNote {
        scene: Some(scene.to_string()),
        hits: ids.into_iter().collect(),
        extra: None,
    }
}

/// The source recorded for a write: what the caller says if it holds `*`,
/// else derived from the scene (`qq` for QQ scenes, else the scene's first part).
fn source_for(grant: &Grant, scene: &Scene, asked: Option<String>) -> Result<String, ApiError> {
    match asked {
        Some(s) if grant.has(scope::ALL) => {
            let s = s.trim().to_string();
            if s.is_empty() || s.len() > 64 {
                return Err(ApiError::invalid("source must be 1-64 bytes"));
            }
            Ok(s)
        }
        Some(_) => Err(ApiError::forbidden(
            "only a token with the \"*\" scope may set source",
        )),
        None => Ok(scene
            .as_str()
            .split(':')
            .next()
            .unwrap_or("main")
            .to_string()),
    }
}

/// The scene in which a token without `*` may write `subject: self`: the
/// pet's notes about itself. Nowhere else can such a token speak for the
/// owner's agent.
const SELF_SCENE: &str = "pet";

/// Whose memory a write is. A token with `*` (the owner's own agents) says
/// what it likes and defaults to `owner`. Any other token writes on behalf of
/// an audience, so it defaults to `other`, and claiming `owner` or `self` is
/// `FORBIDDEN` — except `self` in the `pet` scene. Reads that show "your own
/// notes" also keep to the caller's write scenes (see `Hub::bootstrap`).
fn subject_for(grant: &Grant, scene: &Scene, asked: Option<Subject>) -> Result<Subject, ApiError> {
    if grant.has(scope::ALL) {
        return Ok(asked.unwrap_or(Subject::Owner));
    }
    match asked {
        None | Some(Subject::Other) => Ok(Subject::Other),
        Some(Subject::SelfAgent) if scene.as_str() == SELF_SCENE => Ok(Subject::SelfAgent),
        Some(s) => Err(ApiError::forbidden(format!(
            "subject {s:?} needs a token with the \"*\" scope: a token for {scene} writes about \
             others (subject \"other\", the default), never as the owner or the agent itself"
        ))),
    }
}

/// `POST /v1/write`.
pub(crate) async fn write(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<WriteBody>,
) -> Result<Response, ApiError> {
    let grant = &caller.0;
    let scene = policy::resolve_write_scene(grant, body.scene.as_deref())?;
    let privacy = body.privacy.unwrap_or(Privacy::Normal);
    policy::check_write(grant, privacy)?;
    let subject = subject_for(grant, &scene, body.subject)?;
    let source = source_for(grant, &scene, body.source)?;
    let mut req = WriteRequest::new(scene.clone(), body.text, source);
    if let Some(k) = &body.kind {
        req.kind = parse_kind(k)?;
    }
    req.title = body.title;
    req.tags = parse_tags(&body.tags)?;
    req.privacy = privacy;
    req.subject = subject;
    req.importance = body.importance.unwrap_or(0.5);
    // T0 is pinned: nothing forgets it on its own and consolidation may not
    // touch it from group evidence, so only the owner's own agents pin.
    if (body.tier == Some(Tier::T0) || req.kind == "category") && !grant.has(scope::ALL) {
        return Err(ApiError::forbidden(
            "only a token with the \"*\" scope may pin memories (tier t0 or kind category)",
        ));
    }
    req.tier = body.tier;
    req.stage = body.stage.unwrap_or(Stage::Long);
    if req.stage == Stage::Short {
        let ttl = i64::from(st.settings().ingest.ttl_hours);
        req.expires_at = Some(st.now() + Duration::hours(ttl));
    }
    req.supersedes = body.supersedes;
    req.setting = crate::model::Setting::from_input(
        body.time.as_deref(),
        body.session.as_deref(),
        body.speaker.as_deref(),
    );
    // Keys are namespaced by token and scene: a key names one caller's
    // retry, so another token using the same key can neither squat it (make
    // this caller's write answer NOOP with someone else's id, storing
    // nothing) nor learn through a NOOP that it exists. Token names and
    // scenes contain no `|`.
    if let Some(k) = &body.idempotency_key
        && (k.is_empty() || k.len() > 200)
    {
        return Err(ApiError::invalid("idempotency_key must be 1-200 bytes"));
    }
    req.idempotency_key = body
        .idempotency_key
        .map(|k| format!("w|{}|{scene}|{k}", grant.name));
    if let Some(old) = req.supersedes.clone() {
        // Replacing needs the same right as forgetting: the old memory must be visible to this token.
        let filter = policy::forget_filter(grant)?;
        st.run(move |hub| hub.get(&old, &filter).map(|_| ()))
            .await?;
    }
    let outcome = st.run(move |hub| hub.write(req)).await?;
    Ok(reply(&outcome, note(&scene, [outcome.id.clone()])))
}

/// `POST /v1/forget`: appends a tombstone for a memory the token may write.
pub(crate) async fn forget(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ForgetBody>,
) -> Result<Response, ApiError> {
    let grant = &caller.0;
    let scene = policy::resolve_scene(grant, body.scene.as_deref())?;
    let filter = policy::forget_filter(grant)?;
    let source = grant.name.clone();
    let (id, reason) = (body.id.clone(), body.reason);
    st.run(move |hub| hub.forget(&id, reason, &source, &filter))
        .await?;
    Ok(reply(
        &ForgetReply {
            id: body.id.clone(),
            forgotten: true,
        },
        note(&scene, [body.id]),
    ))
}

/// `POST /v1/ingest`.
pub(crate) async fn ingest(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<IngestBody>,
) -> Result<Response, ApiError> {
    let grant = &caller.0;
    let scene = policy::resolve_write_scene(grant, body.scene.as_deref())?;
    policy::check_write(grant, Privacy::Normal)?;
    let ttl_hours = body
        .ttl_hours
        .unwrap_or_else(|| st.settings().ingest.ttl_hours);
    if !(1..=168).contains(&ttl_hours) {
        return Err(ApiError::invalid("ttl_hours must be between 1 and 168"));
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
                .is_some_and(|id| st.settings().ingest.owner_ids.contains(id)));
    let req = IngestRequest {
        source: source_for(grant, &scene, None)?,
        scene: scene.clone(),
        message_id: body.message_id,
        text: body.text,
        sender_id,
        sender_name,
        from_owner,
        from_self: body.from_self,
        sent_at: body.sent_at,
        ttl: Duration::hours(i64::from(ttl_hours)),
        session: body.session,
    };
    let out = st.run(move |hub| hub.ingest(req)).await?;
    Ok(reply(&out, note(&scene, out.id.clone())))
}

/// `POST /v1/members`: membership events of a group (the group's own token, or `*`).
pub(crate) async fn members(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<MembersBody>,
) -> Result<Response, ApiError> {
    let grant = &caller.0;
    let scene = policy::resolve_scene(grant, body.scene.as_deref())?;
    policy::require(grant, scope::WRITE)?;
    let group = match &body.group {
        Some(g) => Scene::parse(g)?,
        None => scene.clone(),
    };
    if !grant.has(scope::ALL) && !grant.write_scenes.contains(&group) {
        return Err(ApiError::forbidden(format!(
            "group {group} is not one of this token's scenes"
        )));
    }
    let pairs = |list: Vec<Sender>| -> Vec<(String, Option<String>)> {
        list.into_iter().map(|m| (m.id, m.name)).collect()
    };
    let set = body.set.map(pairs);
    let add = pairs(body.add);
    let remove = body.remove;
    let g = group.clone();
    let (added, removed) = st
        .run(move |hub| hub.update_members(&g, set.as_deref(), &add, &remove))
        .await?;
    Ok(reply(
        &MembersReply {
            group,
            added,
            removed,
        },
        note(&scene, []),
    ))
}
