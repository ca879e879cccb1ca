//! Use case: recall (`POST /v1/recall`, `memory_recall`): find long-term
//! memories for the recent conversation, optionally with a live side channel
//! of recent short-term chat, and render both as a prompt-ready text block.
//!
//! The relevance decision of [`crate::search`] applies by default here as in
//! search (`min_score` 0 turns it off; the reply counts what it dropped in
//! `dropped_below_floor`), and recalled short-term chat stays alive for
//! another `ingest.ttlHours` (sliding expiry, DESIGN §6).
//!
//! Which scenes, how many and whether to ask for live chat is the client's
//! choice; how the block looks is decided here, once, for every client:
//!
//! ```text
//! 【最近在聊的】（近 30 分钟，是现状，不是回忆）
//! - 21:40 小王：周末去爬山吗
//!
//! 【近期聊天】（最近几天的聊天记录，不是长期记忆）
//! - 2026-10-05 小王：下周三我生日
//!
//! 【长期记忆】（只是背景，不要原样复述）
//! - 2026-10-03 （对方自己提起过的）小王对花生过敏
//! ```
//!
//! Short-term chat the query finds goes under 【近期聊天】, never under
//! 【长期记忆】.

use chrono::{DateTime, Local, Utc};
use serde::Serialize;

use std::collections::HashSet;

use super::asof;
use super::blocks::{labelled_line, memory_line, one_line};
use super::caller::Visibility;
use super::conflicts::block_label;
use super::read::narrow;
use super::search::Limited;
use super::{Caller, Hub};
use crate::api::{Format, RecallBody, Turn};
use crate::error::{Error, Result};
use crate::index::filter::{Filter, Scope};
use crate::model::{Memory, Stage, Subject};
use crate::search::{SearchHit, SearchRequest};

/// Conversation turns the recall query is built from.
const QUERY_TURNS: usize = 3;
/// Longest recall query, in characters (the newest text is kept).
const QUERY_CHARS: usize = 240;
/// Longest rendered line of live chat, in characters.
const BLOCK_LIVE_CHARS: usize = 120;

/// The search query for a conversation: the last few non-empty turns, one a line
/// (so [`crate::query::plan`] weighs them as turns), newest text kept.
pub(crate) fn recall_query(turns: &[String]) -> String {
    let recent: Vec<&str> = turns
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .collect();
    let start = recent.len().saturating_sub(QUERY_TURNS);
    let joined = recent[start..].join("\n");
    let n = joined.chars().count();
    joined.chars().skip(n.saturating_sub(QUERY_CHARS)).collect()
}

/// What recall found.
#[derive(Debug, Clone, Serialize)]
pub struct RecallOutcome {
    /// The query that was searched for.
    pub(crate) query: String,
    /// Long-term (and short-term) memories for the conversation, best first.
    pub(crate) hits: Vec<RecallHit>,
    /// Hits dropped below the relevance floor (see [`crate::search::SearchResults`]).
    pub dropped_below_floor: usize,
    /// Recent short-term chat from the live side channel, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) live: Vec<Memory>,
    /// The rendered block, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
    /// Journal lines the caller could read that the index has not applied
    /// yet (it is catching up): the hits may miss them. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_behind: Option<u64>,
    /// Whether the index had applied the whole journal when recall checked
    /// (see [`crate::search::SearchResults`]'s field of the same name).
    #[serde(skip)]
    pub(crate) caught_up: bool,
    /// The instant the answer is for, when the request gave `as_of`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
}

impl RecallOutcome {
    /// The ids the reply shows: hits, then live chat.
    pub fn ids(&self) -> Vec<String> {
        self.hits
            .iter()
            .map(|h| h.hit.memory.id.clone())
            .chain(self.live.iter().map(|m| m.id.clone()))
            .collect()
    }
}

/// A recall hit.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RecallHit {
    /// The search hit.
    #[serde(flatten)]
    pub(crate) hit: SearchHit,
    /// The person recall is for brought this up themselves.
    pub(crate) self_mentioned: bool,
}

/// Whether `m` is something `person` said themselves: ingested from them
/// (tag `from:<person>`), or their own words in their private chat.
fn mentioned_by(m: &Memory, person: Option<&str>) -> bool {
    let Some(person) = person else {
        return false;
    };
    let tag = format!("from:{person}");
    m.tags.contains(&tag)
        || (m.scene.as_str() == format!("qq:private:{person}")
            && m.subject != Subject::SelfAgent
            && m.kind == "chat")
}

/// Renders the recall block; empty sections are left out, and an empty string means nothing to say.
pub(crate) fn render_recall_block(
    live: &[Memory],
    live_minutes: u32,
    hits: &[RecallHit],
) -> String {
    let mut out = String::new();
    if !live.is_empty() {
        out.push_str(&format!(
            "【最近在聊的】（近 {live_minutes} 分钟，是现状，不是回忆）\n"
        ));
        for m in live {
            let time = m.ts.with_timezone(&Local).format("%H:%M");
            let who = m
                .title
                .as_deref()
                .map(|t| format!("{}：", one_line(t, 20)))
                .unwrap_or_default();
            out.push_str(&format!(
                "- {time} {who}{}\n",
                one_line(&m.text, BLOCK_LIVE_CHARS)
            ));
        }
    }
    // Short-term chat found by the query is recent chat, never long-term memory.
    let (chat, memories): (Vec<&RecallHit>, Vec<&RecallHit>) = hits
        .iter()
        .partition(|h| h.hit.memory.stage == Stage::Short);
    if !chat.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("【近期聊天】（最近几天的聊天记录，不是长期记忆）\n");
        for h in chat {
            out.push_str(&format!(
                "- {}\n",
                memory_line(&h.hit.memory, h.self_mentioned)
            ));
        }
    }
    if !memories.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("【长期记忆】（只是背景，不要原样复述）\n");
        let shown: HashSet<&str> = memories.iter().map(|h| h.hit.memory.id.as_str()).collect();
        for h in memories {
            let label = block_label(&h.hit.memory, &h.hit.conflicts_with, &shown);
            out.push_str(&format!(
                "- {}\n",
                labelled_line(&h.hit.memory, h.self_mentioned, label)
            ));
        }
    }
    out
}

/// A recall request after authorization.
#[derive(Debug, Clone)]
struct RecallRequest {
    /// Conversation turns, oldest first (the query is built from the last ones).
    turns: Vec<String>,
    /// An explicit query; replaces the one built from `turns`.
    query: Option<String>,
    /// What the caller may see.
    filter: Filter,
    /// Hits wanted.
    limit: Option<usize>,
    /// Relevance floor ([`crate::relevance`], applied by search); `None`:
    /// the calibrated default; 0 turns it off.
    min_score: Option<f32>,
    /// The live side channel: filter, window and count.
    live: Option<(Filter, u32, usize)>,
    /// The person the conversation is with (marks what they said themselves).
    person: Option<String>,
    /// Render the block.
    block: bool,
    /// Now.
    now: DateTime<Utc>,
}

impl Hub {
    /// Recalls what `caller` may read for a conversation (see the module docs).
    pub fn recall(&self, caller: &Caller, mut body: RecallBody) -> Result<Limited<RecallOutcome>> {
        if let Some(as_of) = body.as_of.take() {
            // Nothing is written for a past instant: no touch, no chat kept alive.
            body.touch = Some(false);
            let (mut reply, at) = asof::answer(self, caller, &as_of, |hub, c| hub.recall(c, body))?;
            reply.body.as_of = Some(at);
            // Answered by the cut's index: whether the live one is caught up is not known.
            reply.body.caught_up = false;
            return Ok(reply);
        }
        let (_, filter) = caller.read(Visibility {
            scene: body.scene.as_deref(),
            scenes: body.scenes.as_deref(),
            from_owner: body.from_owner,
        })?;
        let live = match &body.live {
            None => None,
            Some(l) => {
                let k = l.k.unwrap_or(6);
                let minutes = l.minutes.unwrap_or(30);
                if !(1..=50).contains(&k) || !(1..=1440).contains(&minutes) {
                    return Err(Error::invalid(
                        "live.k must be 1-50 and live.minutes 1-1440",
                    ));
                }
                let (_, live_filter) = caller.read(Visibility {
                    scene: body.scene.as_deref(),
                    scenes: l.scenes.as_deref().or(body.scenes.as_deref()),
                    from_owner: false,
                })?;
                Some((live_filter, minutes, k))
            }
        };
        let (limit, clamped) = super::search::clamp_limit(self, body.limit);
        let req = RecallRequest {
            turns: body.messages.into_iter().map(Turn::into_text).collect(),
            query: body.query,
            filter,
            limit,
            min_score: body.min_score,
            live,
            person: body.person,
            block: Format::is_block(body.format),
            now: caller.now(),
        };
        let out = recall_for(self, caller, &req)?;
        // An agent's recall is a retrieval (promotion counts it, recalled
        // chat stays alive) unless the request says a person is only looking
        // (`touch: false`): then nothing is written.
        if body.touch != Some(false) {
            self.note_retrieval(out.hits.iter().map(|h| &h.hit.memory));
            keep_recalled_chat(self, &out, req.now);
        }
        Ok(Limited {
            body: out,
            clamped,
            next_offset: None,
        })
    }
}

/// Recalled short-term chat stays alive for another TTL (DESIGN §6). A
/// failure here costs only the extension, never the answer.
fn keep_recalled_chat(hub: &Hub, out: &RecallOutcome, now: DateTime<Utc>) {
    let short: Vec<String> = out
        .hits
        .iter()
        .map(|h| &h.hit.memory)
        .chain(out.live.iter())
        .filter(|m| m.stage == Stage::Short)
        .map(|m| m.id.clone())
        .collect();
    let ttl = chrono::Duration::hours(i64::from(hub.config().ingest.ttl_hours));
    if let Err(e) = hub.extend_short_ttl(&short, ttl, now) {
        tracing::warn!(error.code = e.code().as_str(), error.message = %e, "cannot extend recalled short-term memories");
    }
}

/// Recalls memories for a conversation under the request's filters.
fn recall_for(hub: &Hub, caller: &Caller, req: &RecallRequest) -> Result<RecallOutcome> {
    let query = match &req.query {
        Some(q) if !q.trim().is_empty() => q.trim().to_string(),
        _ => recall_query(&req.turns),
    };
    if query.is_empty() {
        return Err(Error::invalid(
            "give messages (the recent conversation) or a query",
        ));
    }
    let results = hub.search_as(
        caller,
        &SearchRequest {
            query: query.clone(),
            filter: req.filter.clone(),
            limit: req.limit,
            mode: None,
            min_score: req.min_score,
        },
    )?;
    let dropped_below_floor = results.dropped_below_floor;
    let mut results = results;
    super::conflicts::annotate(hub, &mut results.hits, &req.filter)?;
    let hits: Vec<RecallHit> = results
        .hits
        .into_iter()
        .map(|hit| RecallHit {
            self_mentioned: mentioned_by(&hit.memory, req.person.as_deref()),
            hit,
        })
        .collect();
    let mut live = Vec::new();
    let mut minutes = 0;
    if let Some((filter, mins, k)) = &req.live {
        minutes = *mins;
        let short = narrow(
            filter,
            &Scope {
                stages: vec![Stage::Short],
                ..Scope::default()
            },
        );
        let since = req.now - chrono::Duration::minutes(i64::from(*mins));
        live = super::read::since(hub, &short, since, *k)?;
        live.reverse();
    }
    // A line already shown as live chat is not repeated as a memory.
    let hits: Vec<RecallHit> = hits
        .into_iter()
        .filter(|h| !live.iter().any(|m| m.id == h.hit.memory.id))
        .collect();
    let block = req
        .block
        .then(|| render_recall_block(&live, minutes, &hits));
    let lag = hub.index_lag(Some(&req.filter))?;
    Ok(RecallOutcome {
        query,
        hits,
        dropped_below_floor,
        live,
        block,
        index_behind: lag.behind,
        caught_up: !lag.lagging,
        as_of: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_keeps_the_last_turns() {
        let turns: Vec<String> = ["a", "", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(recall_query(&turns), "b\nc\nd");
        let long = vec!["x".repeat(500)];
        assert_eq!(recall_query(&long).len(), QUERY_CHARS);
        assert_eq!(recall_query(&[]), "");
    }
}
