//! Use cases that read: get, recent memories, the timeline, bootstrap
//! (identity, audience card, recent titles, recent `self`, categories), and
//! audience cards (`POST /v1/get`, `/recent`, `/timeline`, `/bootstrap`,
//! `/audience`; the MCP tools and resources of the same names; `memd get`).
//!
//! Every read resolves the caller's scene and read filter first
//! (`Caller::read`); narrowing it (to long-term facts, to one subject, …)
//! only ever removes rows, never adds any.
//!
//! Reading never writes: a get, a list, a timeline page or a bootstrap
//! counts no access and appends nothing to the journal (a person browsing is
//! not a retrieval; promotion counts an agent's recalls). A `get` asked with
//! `touch: true` counts, for an agent that uses what it read.
//!
//! A memory's place in its line of versions is part of what `get` and the
//! timeline show: whether it is an older version (`superseded`), and the
//! newest version when the caller may read it, or may restore it when it
//! was forgotten.
//!
//! With `as_of`, get, recent and the timeline answer as memory stood at that
//! instant, read-only (`hub/asof.rs`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::asof;
use super::blocks::{one_line, render_recent_block};
use super::caller::Visibility;
use super::{Caller, Hub};
use crate::api::{
    AudienceBody, AudienceReply, BootstrapBody, Format, GetBody, GetReply, ItemsReply, RecentBody,
    TimelineBody,
};
use crate::auth::scope;
use crate::error::{Error, Result};
use crate::ids;
use crate::index::filter::{Filter, Scope};
use crate::index::meta_read::Latest;
use crate::model::{Memory, Origin, Privacy, Scene, Stage, Subject};

/// Largest page of `recent` and `timeline`.
pub(crate) const MAX_PAGE: usize = 100;

/// `have ∩ want` where an empty `have` means "anything"; `None` if nothing is left.
fn intersect<T: PartialEq + Clone>(have: &[T], want: &[T]) -> Option<Vec<T>> {
    if want.is_empty() {
        return Some(have.to_vec());
    }
    if have.is_empty() {
        return Some(want.to_vec());
    }
    let both: Vec<T> = have.iter().filter(|x| want.contains(x)).cloned().collect();
    (!both.is_empty()).then_some(both)
}

/// The filter restricted to `want` in every alternative (an intersection: it
/// can only make fewer memories visible). Alternatives left empty are dropped.
pub(crate) fn narrow(filter: &Filter, want: &Scope) -> Filter {
    let any_of = filter
        .any_of
        .iter()
        .filter_map(|s| {
            Some(Scope {
                scenes: intersect(&s.scenes, &want.scenes)?,
                privacy: intersect(&s.privacy, &want.privacy)?,
                stages: intersect(&s.stages, &want.stages)?,
                kinds: intersect(&s.kinds, &want.kinds)?,
                subjects: intersect(&s.subjects, &want.subjects)?,
                origins: intersect(&s.origins, &want.origins)?,
                unexpired_at: match (s.unexpired_at, want.unexpired_at) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                },
            })
        })
        .collect();
    Filter { any_of }
}

/// One timeline item: a memory and the ids that replace it.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineEntry {
    /// The memory (its `supersedes` names what it replaces).
    #[serde(flatten)]
    pub memory: Memory,
    /// Visible memories that name this one in `supersedes`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub superseded_by: Vec<String>,
    /// An older version: a newer one replaced it (even one that was forgotten since).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
}

/// The items of one month, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineMonth {
    /// `YYYY-MM` (UTC).
    pub(crate) month: String,
    /// Items.
    pub items: Vec<TimelineEntry>,
}

/// One page of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// Months, newest first.
    pub months: Vec<TimelineMonth>,
    /// Pass as `before` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_before: Option<String>,
    /// The instant the answer is for, when the request gave `as_of`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) as_of: Option<DateTime<Utc>>,
}

/// Which page of the timeline to read.
#[derive(Debug, Clone, Default)]
struct TimelineQuery {
    /// Items per page.
    limit: usize,
    /// A `next_before` cursor or an RFC 3339 instant: only older items.
    before: Option<String>,
    /// `YYYY-MM`: only this month.
    month: Option<String>,
}

/// Start of a `YYYY-MM` month and of the month after it (UTC).
fn month_bounds(month: &str) -> Result<(DateTime<Utc>, DateTime<Utc>)> {
    let bad = || Error::invalid(format!("month must look like 2026-11; got {month:?}"));
    let (y, m) = month.split_once('-').ok_or_else(bad)?;
    let y: i32 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let start = |y: i32, m: u32| {
        chrono::NaiveDate::from_ymd_opt(y, m, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc())
    };
    let from = start(y, m).ok_or_else(bad)?;
    let to = if m == 12 {
        start(y + 1, 1)
    } else {
        start(y, m + 1)
    }
    .ok_or_else(bad)?;
    Ok((from, to))
}

/// Parses `before`: `<millis>~<id>` (a cursor) or an RFC 3339 instant.
pub(crate) fn parse_before(before: &str) -> Result<(DateTime<Utc>, String)> {
    if let Some((ms, id)) = before.split_once('~')
        && let Ok(ms) = ms.parse::<i64>()
        && let Some(ts) = DateTime::from_timestamp_millis(ms)
    {
        return Ok((ts, id.to_string()));
    }
    DateTime::parse_from_rfc3339(before)
        .map(|t| (t.with_timezone(&Utc), String::new()))
        .map_err(|_| {
            Error::invalid(format!(
                "before must be a next_before cursor or an RFC 3339 time; got {before:?}"
            ))
        })
}

/// What a session starts with.
#[derive(Debug, Clone, Serialize)]
pub struct Bootstrap {
    /// The scene the caller acts in.
    pub(crate) scene: Scene,
    /// `memories/user/identity.md`, if the caller may see it.
    pub(crate) identity: Option<Memory>,
    /// The audience card for the scene, if there is one.
    pub(crate) audience: Option<Memory>,
    /// Titles (or openings) of the newest long-term memories.
    pub(crate) recent_titles: Vec<RecentTitle>,
    /// The newest memories about the agent itself (`subject: self`) written
    /// in the caller's own (write) scenes: what another audience's token
    /// wrote never shows up as the agent's own note.
    pub(crate) recent_self: Vec<Memory>,
    /// The category slots (always injected policy), as far as the caller may see them.
    pub categories: Vec<super::categories::Category>,
}

impl Bootstrap {
    /// The ids the reply shows.
    pub fn ids(&self) -> Vec<String> {
        self.identity
            .iter()
            .chain(self.audience.iter())
            .map(|m| m.id.clone())
            .chain(self.recent_titles.iter().map(|t| t.id.clone()))
            .chain(self.recent_self.iter().map(|m| m.id.clone()))
            .collect()
    }
}

/// A one-line pointer to a memory.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RecentTitle {
    /// Id, for `get`.
    pub(crate) id: String,
    /// When.
    pub(crate) ts: DateTime<Utc>,
    /// The scene (audience) it lives in.
    pub(crate) scene: Scene,
    /// Title, or the first 40 characters of the text.
    pub(crate) title: String,
}

impl Hub {
    /// One memory by id, if `caller` may read it, with the visible memories
    /// that replace it (as the timeline shows them).
    pub fn get(&self, caller: &Caller, mut body: GetBody) -> Result<GetReply> {
        if let Some(as_of) = body.as_of.take() {
            body.touch = false;
            let (mut reply, at) = asof::answer(self, caller, &as_of, |hub, c| hub.get(c, body))?;
            reply.as_of = Some(at);
            return Ok(reply);
        }
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let memory = self.fetch(&body.id, &filter)?;
        if body.touch {
            self.note_retrieval([&memory]);
        }
        let mut links = self
            .core
            .index
            .meta
            .superseded_by(std::slice::from_ref(&memory.id), &filter)?;
        let superseded_by = links.remove(&memory.id).unwrap_or_default();
        let line = line_of(self, caller, &memory.id, &filter)?;
        let conflicts_with =
            super::conflicts::conflicts_of(self, std::slice::from_ref(&memory.id), &filter)?
                .remove(&memory.id)
                .unwrap_or_default();
        Ok(GetReply {
            conflicts_with,
            memory,
            superseded_by,
            superseded: line.superseded,
            newest: line.newest,
            newest_forgotten: line.newest_forgotten,
            as_of: None,
        })
    }

    /// The newest facts `caller` may read (default 8), optionally as a block.
    pub fn recent(&self, caller: &Caller, mut body: RecentBody) -> Result<ItemsReply> {
        if let Some(as_of) = body.as_of.take() {
            let (mut reply, at) = asof::answer(self, caller, &as_of, |hub, c| hub.recent(c, body))?;
            reply.as_of = Some(at);
            return Ok(reply);
        }
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let items = recent_in(self, &filter, body.stage, body.limit.unwrap_or(8))?;
        let block = Format::is_block(body.format).then(|| render_recent_block(&items));
        Ok(ItemsReply {
            items,
            block,
            as_of: None,
        })
    }

    /// One page of the timeline `caller` may read (default 20 items).
    pub fn timeline(&self, caller: &Caller, mut body: TimelineBody) -> Result<Timeline> {
        if let Some(as_of) = body.as_of.take() {
            let (mut reply, at) =
                asof::answer(self, caller, &as_of, |hub, c| hub.timeline(c, body))?;
            reply.as_of = Some(at);
            return Ok(reply);
        }
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
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
        timeline_in(self, &filter, &q)
    }

    /// What a session of `caller` starts with (`recent`: 1-50, default 8).
    pub fn bootstrap(&self, caller: &Caller, body: BootstrapBody) -> Result<Bootstrap> {
        let (scene, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let n = body.recent.unwrap_or(8);
        if !(1..=50).contains(&n) {
            return Err(Error::invalid("recent must be between 1 and 50"));
        }
        bootstrap_in(self, &scene, &filter, caller.write_scenes(), n)
    }

    /// The audience card of the request's scene, or of one of the token's
    /// scenes (any scene with `*`).
    pub fn audience(&self, caller: &Caller, body: AudienceBody) -> Result<AudienceReply> {
        let scene = caller.scene(body.scene.as_deref())?;
        caller.require(scope::READ)?;
        let audience = match &body.audience {
            None => scene,
            Some(a) => {
                let a = Scene::parse(a)?;
                if !caller.has(scope::ALL) && !caller.may_act_in(&a) {
                    return Err(Error::Forbidden(format!(
                        "audience {a} is not one of this token's scenes"
                    )));
                }
                a
            }
        };
        let card = audience_card(self, &audience)?;
        Ok(AudienceReply { audience, card })
    }
}

/// Where a fact stands in its line of versions, as far as a caller may know.
#[derive(Debug, Default)]
struct Line {
    superseded: bool,
    newest: Option<String>,
    newest_forgotten: Option<String>,
}

/// The line of `id` for `caller`: the newest version is named only if the
/// caller may read it (`filter`), or, forgotten, may restore it (its writable
/// filter).
fn line_of(hub: &Hub, caller: &Caller, id: &str, filter: &Filter) -> Result<Line> {
    let meta = &hub.core.index.meta;
    let Some(next) = meta.supersede_marks(&[id.to_string()])?.remove(id) else {
        return Ok(Line::default());
    };
    let head = meta.head_of(&next)?;
    let newest = meta
        .get_many(std::slice::from_ref(&head), filter)?
        .contains_key(&head)
        .then(|| head.clone());
    let newest_forgotten = match (&newest, caller.writable()) {
        (None, Ok(writable)) => meta
            .version_row(&head, &writable)?
            .filter(|r| r.forgotten)
            .map(|_| head),
        _ => None,
    };
    Ok(Line {
        superseded: true,
        newest,
        newest_forgotten,
    })
}

/// The newest facts visible under `filter`, optionally of one stage.
pub(crate) fn recent_in(
    hub: &Hub,
    filter: &Filter,
    stage: Option<Stage>,
    limit: usize,
) -> Result<Vec<Memory>> {
    if limit == 0 || limit > MAX_PAGE {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    let want = Scope {
        origins: vec![Origin::Fact],
        stages: stage.into_iter().collect(),
        ..Scope::default()
    };
    hub.core.index.meta.latest(
        &narrow(filter, &want),
        &Latest {
            limit,
            ..Latest::default()
        },
    )
}

/// Visible memories written in `[since, now]`, newest first (live chat, disclosure).
pub(crate) fn since(
    hub: &Hub,
    filter: &Filter,
    since: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<Memory>> {
    hub.core.index.meta.latest(
        filter,
        &Latest {
            limit,
            since: Some(since),
            ..Latest::default()
        },
    )
}

/// One page of the fact timeline, grouped by month, with supersede links both ways.
fn timeline_in(hub: &Hub, filter: &Filter, q: &TimelineQuery) -> Result<Timeline> {
    if q.limit == 0 || q.limit > MAX_PAGE {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    let mut before = q.before.as_deref().map(parse_before).transpose()?;
    let mut since = None;
    if let Some(month) = &q.month {
        let (from, to) = month_bounds(month)?;
        since = Some(from);
        if before.as_ref().is_none_or(|(ts, _)| *ts > to) {
            before = Some((to, String::new()));
        }
    }
    let filter = narrow(
        filter,
        &Scope {
            origins: vec![Origin::Fact],
            ..Scope::default()
        },
    );
    let mut rows = hub.core.index.meta.latest(
        &filter,
        &Latest {
            limit: q.limit + 1,
            before,
            since,
            history: true,
            ..Latest::default()
        },
    )?;
    let more = rows.len() > q.limit;
    rows.truncate(q.limit);
    let next_before = if more {
        rows.last()
            .map(|m| format!("{}~{}", m.ts.timestamp_millis(), m.id))
    } else {
        None
    };
    let ids: Vec<String> = rows.iter().map(|m| m.id.clone()).collect();
    let mut links = hub.core.index.meta.superseded_by(&ids, &filter)?;
    let marks = hub.core.index.meta.supersede_marks(&ids)?;
    let mut months: BTreeMap<std::cmp::Reverse<String>, Vec<TimelineEntry>> = BTreeMap::new();
    for memory in rows {
        let month = memory.ts.format("%Y-%m").to_string();
        let superseded_by = links.remove(&memory.id).unwrap_or_default();
        months
            .entry(std::cmp::Reverse(month))
            .or_default()
            .push(TimelineEntry {
                superseded: marks.contains_key(&memory.id),
                memory,
                superseded_by,
            });
    }
    Ok(Timeline {
        months: months
            .into_iter()
            .map(|(m, items)| TimelineMonth { month: m.0, items })
            .collect(),
        next_before,
        as_of: None,
    })
}

/// The audience card of `scene` (`memories/audiences/<scene with : as ->.md`).
///
/// The caller must already be allowed to act in `scene`: a card describes
/// its own audience, so it is read whatever scene its front matter names,
/// but never if it is marked sensitive or secret.
fn audience_card(hub: &Hub, scene: &Scene) -> Result<Option<Memory>> {
    let doc = ids::doc_id(&format!("audiences/{}.md", scene.id_part()));
    let filter = Filter::scope(Scope {
        origins: vec![Origin::Doc],
        privacy: vec![Privacy::Normal, Privacy::Personal],
        ..Scope::default()
    });
    match hub.fetch(&doc, &filter) {
        Ok(m) => Ok(Some(m)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a session starts with, as far as `filter` lets the caller see.
/// `own` are the caller's write scenes: `recent_self` comes only from
/// them (an empty `own` gives no `self` notes), inside the query.
fn bootstrap_in(
    hub: &Hub,
    scene: &Scene,
    filter: &Filter,
    own: &[Scene],
    recent: usize,
) -> Result<Bootstrap> {
    let identity = match hub.fetch(&ids::doc_id("user/identity.md"), filter) {
        Ok(m) => Some(m),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let recent_titles = recent_in(hub, filter, Some(Stage::Long), recent)?
        .into_iter()
        .map(|m| RecentTitle {
            title: m.title.clone().unwrap_or_else(|| one_line(&m.text, 40)),
            id: m.id,
            ts: m.ts,
            scene: m.scene,
        })
        .collect();
    let recent_self = if own.is_empty() {
        Vec::new()
    } else {
        let self_filter = narrow(
            filter,
            &Scope {
                subjects: vec![Subject::SelfAgent],
                scenes: own.to_vec(),
                ..Scope::default()
            },
        );
        recent_in(hub, &self_filter, Some(Stage::Long), recent)?
    };
    Ok(Bootstrap {
        scene: scene.clone(),
        identity,
        audience: audience_card(hub, scene)?,
        recent_titles,
        recent_self,
        categories: super::categories::categories_in(hub, filter)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_never_widens() {
        let main = Scene::parse("main").unwrap();
        let f = Filter {
            any_of: vec![
                Scope {
                    scenes: vec![main.clone()],
                    stages: vec![Stage::Short],
                    ..Scope::default()
                },
                Scope::default(),
            ],
        };
        let n = narrow(
            &f,
            &Scope {
                stages: vec![Stage::Long],
                ..Scope::default()
            },
        );
        assert_eq!(n.any_of.len(), 1, "the short-only alternative is dropped");
        assert_eq!(n.any_of[0].stages, [Stage::Long]);
        assert!(narrow(&Filter { any_of: vec![] }, &Scope::default()).is_empty());
    }

    #[test]
    fn cursors_and_months() {
        let (ts, id) = parse_before("1700000000000~fact-x").unwrap();
        assert_eq!(ts.timestamp_millis(), 1_700_000_000_000);
        assert_eq!(id, "fact-x");
        assert!(parse_before("2026-11-01T00:00:00Z").is_ok());
        assert!(parse_before("yesterday").is_err());
        let (a, b) = month_bounds("2026-12").unwrap();
        assert_eq!(a.to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(b.to_rfc3339(), "2027-01-01T00:00:00+00:00");
        assert!(month_bounds("2026-13").is_err());
    }
}
