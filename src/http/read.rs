//! Read routes: search, get, recent, recall, timeline, bootstrap, audience, disclose.
//!
//! Each handler resolves the caller's scene and builds the caller's filter
//! first; the hub then runs the query with that filter inside it.

use axum::extract::State;
use axum::response::Response;
use chrono::Duration;

use super::error::ApiError;
use super::extract::{ApiJson, Caller};
use super::{AppState, AuditNote, reply};
use crate::api::{
    AudienceBody, AudienceReply, BootstrapBody, DiscloseBody, DiscloseReply, Format, GetBody,
    GetReply, ItemsReply, RecallBody, RecentBody, SearchBody, TimelineBody, Turn,
};
use crate::auth::policy::{self, ReadOptions};
use crate::hub::{RecallRequest, TimelineQuery, narrow, render_recent_block};
use crate::index::filter::{Filter, Scope};
use crate::model::{Memory, Scene, Stage, parse_kind};
use crate::search::SearchRequest;

/// Fields every read request carries (each body lists them itself, because
/// serde's `flatten` does not work with `deny_unknown_fields`).
#[derive(Debug, Default)]
pub(crate) struct Visibility {
    /// The scene the caller acts in (default: the token's first).
    pub(crate) scene: Option<String>,
    /// Scenes to read (default: every scene the token may read).
    pub(crate) scenes: Option<Vec<String>>,
    /// The owner is the one asking (needs the `from_owner` scope).
    pub(crate) from_owner: bool,
}

impl Visibility {
    fn of(scene: &Option<String>, scenes: &Option<Vec<String>>, from_owner: bool) -> Self {
        Visibility {
            scene: scene.clone(),
            scenes: scenes.clone(),
            from_owner,
        }
    }
}

fn parse_scenes(list: &Option<Vec<String>>) -> Result<Option<Vec<Scene>>, ApiError> {
    list.as_ref()
        .map(|l| {
            l.iter()
                .map(|s| Scene::parse(s))
                .collect::<crate::Result<Vec<_>>>()
        })
        .transpose()
        .map_err(ApiError::from)
}

/// Resolves the scene and the read filter of a request.
fn access(st: &AppState, caller: &Caller, v: &Visibility) -> Result<(Scene, Filter), ApiError> {
    let scene = policy::resolve_scene(&caller.0, v.scene.as_deref())?;
    let opts = ReadOptions {
        scenes: parse_scenes(&v.scenes)?,
        from_owner: v.from_owner,
    };
    let filter = policy::read_filter(&caller.0, &opts, st.now())?;
    Ok((scene, filter))
}

fn note(scene: &Scene, hits: impl IntoIterator<Item = String>) -> AuditNote {
    AuditNote {
        scene: Some(scene.to_string()),
        hits: hits.into_iter().collect(),
        extra: None,
    }
}

/// `POST /v1/search`.
pub(crate) async fn search(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<SearchBody>,
) -> Result<Response, ApiError> {
    let mode = body.mode;
    let (scene, filter) = access(
        &st,
        &caller,
        &Visibility::of(&body.scene, &body.scenes, body.from_owner),
    )?;
    let kinds = body
        .kinds
        .iter()
        .flatten()
        .map(|k| parse_kind(k))
        .collect::<crate::Result<Vec<_>>>()?;
    let filter = narrow(
        &filter,
        &Scope {
            stages: body.stage.into_iter().collect(),
            kinds,
            ..Scope::default()
        },
    );
    let (limit, clamped) = clamp_limit(body.limit, st.settings().search.max_limit);
    let req = SearchRequest {
        query: body.query,
        filter,
        limit,
        mode,
        min_score: check_min_score(body.min_score)?,
    };
    let results = st.run(move |hub| hub.search(&req)).await?;
    let ids = results.hits.iter().map(|h| h.memory.id.clone());
    Ok(with_clamp(reply(&results, note(&scene, ids)), clamped))
}

/// A `min_score` must be a number from 0 to 1.
fn check_min_score(min: Option<f32>) -> Result<Option<f32>, ApiError> {
    match min {
        Some(m) if !(0.0..=1.0).contains(&m) => Err(ApiError::invalid(format!(
            "min_score must be between 0 and 1; got {m}"
        ))),
        other => Ok(other),
    }
}

/// The header that says a `limit` was lowered to `search.maxLimit`.
pub(crate) const LIMIT_CLAMPED: &str = "x-memd-limit-clamped";

/// A `limit` above `max` is lowered to `max` rather than refused (as the
/// Node memory-hub did, so its clients keep working); the second value is
/// the header text (`<asked>; max=<max>`) when that happened. Zero stays an error.
fn clamp_limit(limit: Option<usize>, max: usize) -> (Option<usize>, Option<String>) {
    match limit {
        Some(n) if n > max && max > 0 => (Some(max), Some(format!("{n}; max={max}"))),
        other => (other, None),
    }
}

/// Adds the [`LIMIT_CLAMPED`] header when the limit was lowered.
fn with_clamp(mut res: Response, clamped: Option<String>) -> Response {
    if let Some(v) = clamped
        && let Ok(v) = axum::http::HeaderValue::from_str(&v)
    {
        res.headers_mut().insert(LIMIT_CLAMPED, v);
    }
    res
}

/// `POST /v1/get`.
pub(crate) async fn get(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<GetBody>,
) -> Result<Response, ApiError> {
    let (scene, filter) = access(
        &st,
        &caller,
        &Visibility::of(&body.scene, &body.scenes, body.from_owner),
    )?;
    let id = body.id;
    // A superseded memory names what replaced it (only replacements the caller
    // may read), as the timeline does.
    let (memory, replaced_by) = st
        .run(move |hub| {
            let memory = hub.get(&id, &filter)?;
            let mut links = hub
                .index()
                .meta
                .superseded_by(std::slice::from_ref(&memory.id), &filter)?;
            let replaced_by = links.remove(&memory.id).unwrap_or_default();
            Ok((memory, replaced_by))
        })
        .await?;
    let audit = note(&scene, [memory.id.clone()]);
    let body = GetReply {
        memory,
        superseded_by: replaced_by,
    };
    Ok(reply(&body, audit))
}

/// `POST /v1/recent`.
pub(crate) async fn recent(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RecentBody>,
) -> Result<Response, ApiError> {
    let block = Format::is_block(body.format);
    let (scene, filter) = access(
        &st,
        &caller,
        &Visibility::of(&body.scene, &body.scenes, body.from_owner),
    )?;
    let (stage, limit) = (body.stage, body.limit.unwrap_or(8));
    let items = st.run(move |hub| hub.recent(&filter, stage, limit)).await?;
    let block = block.then(|| render_recent_block(&items));
    let ids: Vec<String> = items.iter().map(|m| m.id.clone()).collect();
    Ok(reply(&ItemsReply { items, block }, note(&scene, ids)))
}

/// `POST /v1/recall`.
pub(crate) async fn recall(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RecallBody>,
) -> Result<Response, ApiError> {
    let block = Format::is_block(body.format);
    let (scene, filter) = access(
        &st,
        &caller,
        &Visibility::of(&body.scene, &body.scenes, body.from_owner),
    )?;
    let live = match &body.live {
        None => None,
        Some(l) => {
            let k = l.k.unwrap_or(6);
            let minutes = l.minutes.unwrap_or(30);
            if !(1..=50).contains(&k) || !(1..=1440).contains(&minutes) {
                return Err(ApiError::invalid(
                    "live.k must be 1-50 and live.minutes 1-1440",
                ));
            }
            let vis = Visibility {
                scene: body.scene.clone(),
                scenes: l.scenes.clone().or_else(|| body.scenes.clone()),
                from_owner: false,
            };
            let (_, live_filter) = access(&st, &caller, &vis)?;
            Some((live_filter, minutes, k))
        }
    };
    let (recall_limit, clamped) = clamp_limit(body.limit, st.settings().search.max_limit);
    let req = RecallRequest {
        turns: body.messages.into_iter().map(Turn::into_text).collect(),
        query: body.query,
        filter,
        limit: recall_limit,
        min_score: check_min_score(body.min_score)?,
        live,
        person: body.person,
        block,
        now: st.now(),
    };
    let settings = st.settings();
    let now = req.now;
    let out = st.run(move |hub| hub.recall(&req)).await?;
    // Recalled short-term chat stays alive for another TTL (DESIGN §6). A
    // failure here costs only the extension, never the answer.
    let short: Vec<String> = out
        .hits
        .iter()
        .map(|h| &h.hit.memory)
        .chain(out.live.iter())
        .filter(|m| m.stage == Stage::Short)
        .map(|m| m.id.clone())
        .collect();
    let ttl = Duration::hours(i64::from(settings.ingest.ttl_hours));
    if let Err(e) = st
        .run(move |hub| hub.extend_short_ttl(&short, ttl, now))
        .await
    {
        tracing::warn!(error.code = e.code.as_str(), error.message = %e.message, "cannot extend recalled short-term memories");
    }
    let ids: Vec<String> = out
        .hits
        .iter()
        .map(|h| h.hit.memory.id.clone())
        .chain(out.live.iter().map(|m| m.id.clone()))
        .collect();
    Ok(with_clamp(reply(&out, note(&scene, ids)), clamped))
}

/// `POST /v1/timeline`.
pub(crate) async fn timeline(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<TimelineBody>,
) -> Result<Response, ApiError> {
    let (scene, filter) = access(
        &st,
        &caller,
        &Visibility::of(&body.scene, &body.scenes, body.from_owner),
    )?;
    let filter = narrow(
        &filter,
        &Scope {
            stages: body.stage.into_iter().collect(),
            ..Scope::default()
        },
    );
    let q = TimelineQuery {
        limit: body.limit.unwrap_or(20),
        before: body.before,
        month: body.month,
    };
    let page = st.run(move |hub| hub.timeline(&filter, &q)).await?;
    let ids: Vec<String> = page
        .months
        .iter()
        .flat_map(|m| m.items.iter().map(|i| i.memory.id.clone()))
        .collect();
    Ok(reply(&page, note(&scene, ids)))
}

/// `POST /v1/bootstrap`.
pub(crate) async fn bootstrap(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<BootstrapBody>,
) -> Result<Response, ApiError> {
    let (scene, filter) = access(
        &st,
        &caller,
        &Visibility::of(&body.scene, &body.scenes, body.from_owner),
    )?;
    let n = body.recent.unwrap_or(8);
    if !(1..=50).contains(&n) {
        return Err(ApiError::invalid("recent must be between 1 and 50"));
    }
    let at = scene.clone();
    let own = caller.0.write_scenes.clone();
    let out = st
        .run(move |hub| hub.bootstrap(&at, &filter, &own, n))
        .await?;
    let ids = out
        .identity
        .iter()
        .chain(out.audience.iter())
        .map(|m| m.id.clone())
        .chain(out.recent_titles.iter().map(|t| t.id.clone()))
        .chain(out.recent_self.iter().map(|m| m.id.clone()))
        .collect::<Vec<_>>();
    Ok(reply(&out, note(&scene, ids)))
}

/// `POST /v1/audience`.
pub(crate) async fn audience(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<AudienceBody>,
) -> Result<Response, ApiError> {
    let scene = policy::resolve_scene(&caller.0, body.scene.as_deref())?;
    policy::require(&caller.0, crate::auth::scope::READ)?;
    let audience = match &body.audience {
        None => scene.clone(),
        Some(a) => {
            let a = Scene::parse(a)?;
            if !caller.0.has(crate::auth::scope::ALL) && !caller.0.scenes.contains(&a) {
                return Err(ApiError::forbidden(format!(
                    "audience {a} is not one of this token's scenes"
                )));
            }
            a
        }
    };
    let at = audience.clone();
    let card = st.run(move |hub| hub.audience_card(&at)).await?;
    let ids: Vec<String> = card.iter().map(|m| m.id.clone()).collect();
    Ok(reply(&AudienceReply { audience, card }, note(&scene, ids)))
}

/// `POST /v1/disclose`: one group's recent chat and notes, for a known member only.
pub(crate) async fn disclose(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<DiscloseBody>,
) -> Result<Response, ApiError> {
    let block = Format::is_block(body.format);
    let scene = policy::resolve_scene(&caller.0, body.scene.as_deref())?;
    let group = Scene::parse(&body.group)?;
    let now = st.now();
    let filter = policy::disclose_filter(&caller.0, &group, now)?;
    let minutes = body.minutes.unwrap_or(180);
    let limit = body.limit.unwrap_or(20);
    if !(1..=1440).contains(&minutes) || !(1..=50).contains(&limit) {
        return Err(ApiError::invalid("minutes must be 1-1440 and limit 1-50"));
    }
    let asker = body.asker.clone();
    let g = group.clone();
    let since = now - Duration::minutes(i64::from(minutes));
    let result = st
        .run(move |hub| {
            if !hub.is_member(&g, &asker) {
                return Ok(None);
            }
            let mut items = hub.since(&filter, since, limit)?;
            items.reverse();
            Ok(Some(items))
        })
        .await?;
    let extra = serde_json::json!({"group": group.as_str(), "asker": body.asker});
    let Some(items) = result else {
        let mut res = axum::response::IntoResponse::into_response(ApiError::forbidden(format!(
            "{} is not a known member of {group}; nothing is disclosed",
            body.asker
        )));
        res.extensions_mut().insert(AuditNote {
            scene: Some(scene.to_string()),
            hits: Vec::new(),
            extra: Some(extra),
        });
        return Ok(res);
    };
    let block = block.then(|| render_disclosure(&group, minutes, &items));
    let ids: Vec<String> = items.iter().map(|m| m.id.clone()).collect();
    Ok(reply(
        &DiscloseReply {
            group,
            items,
            block,
        },
        AuditNote {
            scene: Some(scene.to_string()),
            hits: ids,
            extra: Some(extra),
        },
    ))
}

fn render_disclosure(group: &Scene, minutes: u32, items: &[Memory]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = format!("【群里最近在聊的】（{group}，近 {minutes} 分钟）\n");
    for m in items {
        let time = m.ts.with_timezone(&chrono::Local).format("%H:%M");
        let who = m
            .title
            .as_deref()
            .map(|t| format!("{t}："))
            .unwrap_or_default();
        out.push_str(&format!(
            "- {time} {who}{}\n",
            crate::hub::one_line(&m.text, 120)
        ));
    }
    out
}
