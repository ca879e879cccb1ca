//! The optional model pass: a language model reads the period's memories and
//! proposes operations; memd validates each one and applies the valid ones
//! through the normal write path.
//!
//! Two transports: an OpenAI-compatible `POST {baseUrl}/chat/completions`
//! (a local llama.cpp or Ollama server, or a hosted API over `https://`; see
//! [`crate::client`] for TLS, timeouts and limits), or an external command that
//! reads `{"instructions", "scene", "memories"}` as JSON on stdin and prints
//! `{"operations": [...]}` on stdout.
//!
//! Operations (one JSON object each, `op` first):
//! - `{"op":"write","from":[ids],"text":…,"kind"?,"title"?,"tags"?,"importance"?,"scene"?,"privacy"?}`
//!   — a new long-term fact distilled from the listed memories;
//! - `{"op":"supersede","id":…,"text":…,…}` — a new fact replacing `id` (linked by `supersedes`);
//! - `{"op":"forget","id":…,"reason"?}` — a tombstone.
//!
//! Rules:
//! - one request per scene: the model never sees two audiences at once, and
//!   every id an operation names must be one of that request's memories (an
//!   id from another scene is rejected), so a write, supersede or forget
//!   rests on evidence from its own scene only;
//! - no operation may move a memory to another scene or lower its
//!   sensitivity (which would widen who may read it);
//! - pinned (tier t0) memories are never forgotten; in a scene that is not one
//!   of the owner's audiences (`privacy.sensitiveAudiences`, e.g. a group
//!   chat), pinned memories and memories about the owner (`subject: owner`)
//!   are neither forgotten nor superseded;
//! - `secret` memories are never sent; `sensitive` ones only with
//!   `sendSensitive` and only in the owner's audiences.
//!
//! A refused operation is listed in the report with its reason and never applied.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::report::{Forgotten, Rejected, RunReport, Superseded};
use super::rollback::forget_reason;
use super::statement::{self, said_at};
use super::{History, JournalView, ModelConfig, ModelKind, RunOptions, SOURCE, SleepConfig};
use crate::config::PrivacyConfig;
use crate::error::{Error, Result};
use crate::hub::{Hub, WriteAction, WriteRequest};
use crate::index::filter::Filter;
use crate::model::{Privacy, Scene, Stage, Subject, Tier, parse_kind, parse_tags};

/// What the model is told.
pub(crate) const INSTRUCTIONS: &str = "You consolidate an assistant's memories overnight. You get the \
period's memories of one scene as JSON (id, scene, stage short|long, kind, privacy, time, text); `time` is \
when it was said, with the speaker's UTC offset. Turn what is worth keeping into durable long-term facts, \
replace outdated facts, and drop noise. Write each fact as a standalone statement: no cue words (记得, \
千万记住, remember that), no chat particles (啦, 呀, 吧), and every relative date (明天, 下周五, next \
Friday) as the absolute date it meant on the day it was said (2026-12-11). Plans and one-off states are \
events with their date, not timeless facts. Answer with JSON only: \
{\"operations\": [...]} where each operation is one of \
{\"op\":\"write\",\"from\":[ids it is based on],\"text\":\"the fact\",\"kind\":\"fact|preference|event|todo|note\",\"importance\":0.0-1.0}, \
{\"op\":\"supersede\",\"id\":\"id of the outdated memory\",\"text\":\"the corrected fact\"}, \
{\"op\":\"forget\",\"id\":\"id\",\"reason\":\"why\"}. \
Use only ids you were given. An empty list is fine.";

/// A memory as the model sees it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct InputMemory {
    /// Fact id.
    pub(crate) id: String,
    /// Scene.
    pub(crate) scene: String,
    /// short or long.
    pub(crate) stage: Stage,
    /// Kind.
    pub(crate) kind: String,
    /// Sensitivity.
    pub(crate) privacy: Privacy,
    /// When it was written.
    pub(crate) ts: chrono::DateTime<chrono::Utc>,
    /// When it was said, in the speaker's offset (RFC 3339).
    pub(crate) time: String,
    /// Text.
    pub(crate) text: String,
}

/// One proposed operation.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Operation {
    Write {
        from: Vec<String>,
        #[serde(flatten)]
        body: Body,
    },
    Supersede {
        id: String,
        #[serde(flatten)]
        body: Body,
    },
    Forget {
        id: String,
        #[serde(default)]
        reason: Option<String>,
    },
}

#[derive(Debug, Clone, Deserialize)]
struct Body {
    text: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    importance: Option<f32>,
    #[serde(default)]
    scene: Option<String>,
    #[serde(default)]
    privacy: Option<String>,
}

/// The memories that may be sent to the model: the window's live short-term
/// chat and long-term facts, never `secret`, `sensitive` only when allowed and
/// in one of the owner's audiences, at most `max_memories` (the latest).
pub(crate) fn input<'a>(
    view: &'a JournalView,
    cfg: &ModelConfig,
    privacy: &PrivacyConfig,
    opts: &RunOptions,
) -> Vec<&'a History> {
    let mut out: Vec<&History> = view
        .live()
        .filter(|h| opts.window.contains(h.first.ts) || opts.window.contains(h.last.ts))
        .filter(|h| match h.last.privacy {
            Privacy::Secret => false,
            Privacy::Sensitive => {
                cfg.send_sensitive && privacy.sensitive_audiences.contains(&h.last.scene)
            }
            Privacy::Normal | Privacy::Personal => true,
        })
        .collect();
    if out.len() > cfg.max_memories {
        out.drain(..out.len() - cfg.max_memories);
    }
    out
}

/// [`input`] split into one group per scene, in scene order.
pub(crate) fn by_scene(memories: Vec<&History>) -> Vec<(Scene, Vec<&History>)> {
    let mut groups: std::collections::BTreeMap<String, (Scene, Vec<&History>)> =
        std::collections::BTreeMap::new();
    for h in memories {
        groups
            .entry(h.last.scene.as_str().to_string())
            .or_insert_with(|| (h.last.scene.clone(), Vec::new()))
            .1
            .push(h);
    }
    groups.into_values().collect()
}

/// Runs the model pass, one request per scene, and applies (or, in a dry run,
/// only validates) what it proposes. A scene whose request fails does not stop
/// the others; the first failure is returned at the end so the run is retried.
pub(crate) fn run(
    hub: &Hub,
    cfg: &SleepConfig,
    opts: &RunOptions,
    view: &JournalView,
    run_id: &str,
    report: &mut RunReport,
) -> Result<()> {
    let privacy = &hub.config().privacy;
    let mut first_error = None;
    for (scene, shown) in by_scene(input(view, &cfg.model, privacy, opts)) {
        let owner_scene = privacy.sensitive_audiences.contains(&scene);
        if let Err(e) = run_scene(hub, cfg, opts, &scene, owner_scene, &shown, run_id, report) {
            tracing::warn!(sleep.run = run_id, sleep.scene = %scene, error = %e, "consolidation model pass failed for a scene");
            // The error keeps its code (a model server that is down stays
            // retryable UNAVAILABLE); the log above names the scene.
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[allow(clippy::too_many_arguments)]
fn run_scene(
    hub: &Hub,
    cfg: &SleepConfig,
    opts: &RunOptions,
    scene: &Scene,
    owner_scene: bool,
    shown: &[&History],
    run_id: &str,
    report: &mut RunReport,
) -> Result<()> {
    let memories: Vec<InputMemory> = shown
        .iter()
        .map(|h| InputMemory {
            id: h.last.id.clone(),
            scene: h.last.scene.to_string(),
            stage: h.last.stage,
            kind: h.last.kind.clone(),
            privacy: h.last.privacy,
            ts: h.last.ts,
            time: said_at(&h.last).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            text: h.last.text.clone(),
        })
        .collect();
    let answer = match cfg.model.kind {
        ModelKind::None => return Ok(()),
        ModelKind::Openai => ask_openai(&cfg.model, scene, &memories)?,
        ModelKind::Command => ask_command(&cfg.model, scene, &memories)?,
    };
    let ops = operations(&answer)?;
    report.proposed += ops.len();
    let by_id: HashMap<&str, &History> = shown.iter().map(|h| (h.last.id.as_str(), *h)).collect();
    let scope = Request {
        scene,
        owner_scene,
        shown: &by_id,
    };
    let mut writes: Vec<ProposedWrite> = Vec::new();
    let mut forgets: Vec<ProposedForget> = Vec::new();
    for raw in ops {
        match validate(&raw, &scope, run_id) {
            Ok(Valid::Write(req)) => {
                let old = req.supersedes.clone();
                writes.push((raw, *req, old));
            }
            Ok(Valid::Forget(id, reason)) => forgets.push((raw, id, reason)),
            Err(reason) => report.rejected.push(Rejected {
                operation: raw,
                reason,
            }),
        }
    }
    // An id both rewritten and forgotten in one answer is ambiguous: refuse the forget.
    forgets.retain(|(raw, id, _)| {
        let clash = writes.iter().any(|(_, _, old)| old.as_deref() == Some(id));
        if clash {
            report.rejected.push(Rejected {
                operation: raw.clone(),
                reason: format!("{id} is also superseded in this answer"),
            });
        }
        !clash
    });
    if opts.dry_run {
        report
            .accepted
            .extend(writes.into_iter().map(|(raw, _, _)| raw));
        report
            .accepted
            .extend(forgets.into_iter().map(|(raw, _, _)| raw));
        return Ok(());
    }
    apply(hub, writes, forgets, &by_id, run_id, report)
}

/// A write the model proposed: its raw operation, the request, and the id it supersedes.
type ProposedWrite = (serde_json::Value, WriteRequest, Option<String>);
/// A forget the model proposed: its raw operation, the id and the reason.
type ProposedForget = (serde_json::Value, String, Option<String>);

/// Appends the accepted writes in one batch and the forgets one by one,
/// reporting each as written, superseded, forgotten or rejected with why.
fn apply(
    hub: &Hub,
    writes: Vec<ProposedWrite>,
    forgets: Vec<ProposedForget>,
    by_id: &HashMap<&str, &History>,
    run_id: &str,
    report: &mut RunReport,
) -> Result<()> {
    let (raws, reqs): (Vec<_>, Vec<_>) = writes.into_iter().map(|(raw, req, _)| (raw, req)).unzip();
    let outcomes = hub.append_batch(reqs.clone())?;
    for ((raw, req), outcome) in raws.into_iter().zip(reqs).zip(outcomes) {
        match outcome {
            Ok(w) if w.action == WriteAction::Add => {
                if let Some(old) = req.supersedes {
                    report.superseded.push(Superseded {
                        old,
                        new: w.id.clone(),
                    });
                }
                report.written.push(w.id);
                report.accepted.push(raw);
            }
            Ok(w) => report.rejected.push(Rejected {
                operation: raw,
                reason: format!("same as {}", w.id),
            }),
            Err(e) => report.rejected.push(Rejected {
                operation: raw,
                reason: e.to_string(),
            }),
        }
    }
    for (raw, id, reason) in forgets {
        let before = by_id[id.as_str()].last.clone();
        let why = forget_reason(run_id, reason.as_deref());
        match hub.tombstone(&id, Some(why), SOURCE, &Filter::all()) {
            Ok(()) => {
                report.forgotten.push(Forgotten { id, reason, before });
                report.accepted.push(raw);
            }
            Err(e) => report.rejected.push(Rejected {
                operation: raw,
                reason: e.to_string(),
            }),
        }
    }
    Ok(())
}

enum Valid {
    Write(Box<WriteRequest>),
    Forget(String, Option<String>),
}

/// One scene's request: what the model was shown, and whose audience it is.
struct Request<'a> {
    scene: &'a Scene,
    /// One of the owner's audiences (`privacy.sensitiveAudiences`).
    owner_scene: bool,
    shown: &'a HashMap<&'a str, &'a History>,
}

impl Request<'_> {
    /// The memory `id`, if the model was shown it in this request.
    fn known(&self, id: &str) -> std::result::Result<&History, String> {
        self.shown.get(id).copied().ok_or_else(|| {
            format!(
                "{id} is not one of the memories given to the model for scene {}",
                self.scene
            )
        })
    }

    /// Refuses to forget or supersede what evidence from this scene may not touch.
    fn may_replace(&self, h: &History, verb: &str) -> std::result::Result<(), String> {
        let id = &h.last.id;
        if self.owner_scene {
            return Ok(());
        }
        if h.last.tier == Some(Tier::T0) {
            return Err(format!(
                "{id} is pinned (tier t0); evidence from {} may not {verb} it",
                self.scene
            ));
        }
        if h.last.subject == Subject::Owner {
            return Err(format!(
                "{id} is about the owner; evidence from {} (not one of the owner's audiences) may not {verb} it",
                self.scene
            ));
        }
        Ok(())
    }
}

fn validate(
    raw: &serde_json::Value,
    scope: &Request<'_>,
    run_id: &str,
) -> std::result::Result<Valid, String> {
    let op: Operation =
        serde_json::from_value(raw.clone()).map_err(|e| format!("malformed operation: {e}"))?;
    let known = |id: &str| scope.known(id);
    match op {
        Operation::Forget { id, reason } => {
            let target = known(&id)?;
            if target.last.tier == Some(Tier::T0) {
                return Err(format!(
                    "{id} is pinned (tier t0); consolidation never forgets it"
                ));
            }
            scope.may_replace(target, "forget")?;
            Ok(Valid::Forget(id, reason))
        }
        Operation::Write { from, body } => {
            if from.is_empty() {
                return Err("a write must name the memories it is based on in `from`".into());
            }
            let sources = from
                .iter()
                .map(|id| known(id))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let scene = sources[0].last.scene.clone();
            if let Some(other) = sources.iter().find(|h| h.last.scene != scene) {
                return Err(format!(
                    "cross-scene: {} is in {scene} but {} is in {}",
                    sources[0].last.id, other.last.id, other.last.scene
                ));
            }
            let floor = sources
                .iter()
                .map(|h| h.last.privacy)
                .max()
                .expect("at least one source");
            // Dates are read as of the latest message it rests on.
            let latest = sources
                .iter()
                .map(|h| &h.last)
                .max_by_key(|f| f.ts)
                .expect("at least one source");
            request(
                body,
                Basis {
                    scene,
                    floor,
                    subject: sources[0].last.subject,
                    kind: None,
                    importance: 0.6,
                    supersedes: None,
                    said: latest,
                },
                run_id,
            )
        }
        Operation::Supersede { id, body } => {
            let old = known(&id)?;
            scope.may_replace(old, "supersede")?;
            request(
                body,
                Basis {
                    scene: old.last.scene.clone(),
                    floor: old.last.privacy,
                    subject: old.last.subject,
                    kind: Some(old.last.kind.clone()),
                    importance: old.last.importance,
                    supersedes: Some(id),
                    said: &old.last,
                },
                run_id,
            )
        }
    }
}

/// What a write or supersede inherits from the memories it rests on.
struct Basis<'a> {
    scene: Scene,
    /// The least private it may be.
    floor: Privacy,
    subject: Subject,
    /// The kind when the model gives none (a supersede keeps the old one's).
    kind: Option<String>,
    /// The importance when the model gives none.
    importance: f32,
    supersedes: Option<String>,
    /// The message its dates are read against.
    said: &'a crate::model::Fact,
}

fn request(body: Body, basis: Basis<'_>, run_id: &str) -> std::result::Result<Valid, String> {
    let Basis {
        scene,
        floor,
        subject,
        kind,
        importance,
        supersedes,
        said,
    } = basis;
    let importance = body.importance.unwrap_or(importance);
    if let Some(s) = &body.scene
        && s.trim() != scene.as_str()
    {
        return Err(format!(
            "cross-scene: the memory lives in {scene}, the operation asks for {s}"
        ));
    }
    let privacy = match &body.privacy {
        Some(p) => p.parse::<Privacy>().map_err(|e| e.to_string())?,
        None => floor,
    };
    if privacy < floor {
        return Err(format!(
            "privacy {privacy} is less private than the {floor} it is based on"
        ));
    }
    if body.text.trim().is_empty() {
        return Err("text must not be empty".into());
    }
    if !(0.0..=1.0).contains(&importance) || importance.is_nan() {
        return Err("importance must be between 0 and 1".into());
    }
    // A relative date the model left in is read as of the message, as the
    // deterministic pass reads it; chat is no kind for a long-term memory.
    let at = said_at(said);
    let dated = crate::when::resolve(&body.text, at);
    let kind = match body.kind.clone().or(kind) {
        Some(k) if !k.trim().eq_ignore_ascii_case("chat") => k,
        _ => statement::kind_of(&body.text, &dated.named, at.date_naive())
            .0
            .as_str()
            .to_string(),
    };
    let time = dated
        .time()
        .unwrap_or_else(|| statement::message_time(said));
    let mut req = WriteRequest::new(scene, dated.text, SOURCE);
    req.origin = SOURCE.into();
    req.kind = parse_kind(&kind).map_err(|e| e.to_string())?;
    req.stage = Stage::Long;
    req.title = body.title;
    req.tags = parse_tags(&body.tags).map_err(|e| e.to_string())?;
    req.privacy = privacy;
    req.subject = subject;
    req.importance = importance;
    req.supersedes = supersedes;
    req.setting = crate::model::Setting::from_input(Some(&time), None, None);
    req.run = Some(run_id.to_string());
    Ok(Valid::Write(Box::new(req)))
}

/// The operations in a model's answer: `{"operations":[...]}` or a bare
/// array, possibly wrapped in a Markdown code fence.
fn operations(answer: &str) -> Result<Vec<serde_json::Value>> {
    let bad = |why: String| Error::Internal(format!("the consolidation model answered {why}"));
    let text = answer.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .map(|t| t.trim_end().trim_end_matches("```"))
        .unwrap_or(text)
        .trim();
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("something that is not JSON ({e})")))?;
    match value {
        serde_json::Value::Array(ops) => Ok(ops),
        serde_json::Value::Object(mut o) => match o.remove("operations") {
            Some(serde_json::Value::Array(ops)) => Ok(ops),
            _ => Err(bad("an object without an `operations` list".into())),
        },
        _ => Err(bad("neither a list nor an object".into())),
    }
}

fn ask_command(cfg: &ModelConfig, scene: &Scene, memories: &[InputMemory]) -> Result<String> {
    let (program, args) = cfg
        .command
        .split_first()
        .ok_or_else(|| Error::invalid("sleep.model.command is empty"))?;
    let input =
        serde_json::json!({ "instructions": INSTRUCTIONS, "scene": scene, "memories": memories });
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::Internal(format!("cannot start {program}: {e}")))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let body = serde_json::to_vec(&input).expect("input serialises");
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let deadline = Instant::now() + Duration::from_secs(cfg.timeout_seconds.max(1));
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Error::Internal(format!("waiting for {program}: {e}")))?
        {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Internal(format!(
                "{program} did not answer within {} s",
                cfg.timeout_seconds
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // A consolidator that does not read its input is fine; a broken pipe is not an error.
    let _ = writer.join();
    let out = reader
        .join()
        .map_err(|_| Error::Internal(format!("reading the output of {program} failed")))?
        .map_err(|e| Error::Internal(format!("reading the output of {program}: {e}")))?;
    if !status.success() {
        return Err(Error::Internal(format!("{program} exited with {status}")));
    }
    Ok(out)
}

fn ask_openai(cfg: &ModelConfig, scene: &Scene, memories: &[InputMemory]) -> Result<String> {
    let url = format!("{}/chat/completions", cfg.base_url.trim_end_matches('/'));
    let body = serde_json::json!({
        "model": cfg.model,
        "temperature": 0,
        "stream": false,
        "messages": [
            { "role": "system", "content": INSTRUCTIONS },
            { "role": "user", "content": serde_json::json!({ "scene": scene, "memories": memories }).to_string() },
        ],
    });
    let key = (!cfg.api_key_env.is_empty())
        .then(|| std::env::var(&cfg.api_key_env).ok())
        .flatten()
        .filter(|k| !k.is_empty());
    let timeout = Duration::from_secs(cfg.timeout_seconds.max(1));
    let (status, text) = post_json(&url, &body, key.as_deref(), timeout)?;
    let service = "the consolidation model".to_string();
    if !(200..300).contains(&status) {
        // The answer is quoted for the operator, never with the key in it
        // (some servers and proxies echo the Authorization header).
        let mut quoted: String = text.chars().take(300).collect();
        if let Some(k) = &key {
            quoted = quoted.replace(k.as_str(), "[redacted]");
        }
        let reason = format!("HTTP {status}: {quoted}");
        return Err(if status == 429 || status >= 500 {
            Error::Unavailable {
                service,
                reason,
                source: None,
            }
        } else {
            Error::UpstreamInvalid {
                service,
                reason,
                source: None,
            }
        });
    }
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::UpstreamInvalid {
            service: service.clone(),
            reason: "the answer is not JSON".into(),
            source: Some(Box::new(e)),
        })?;
    value["choices"][0]["message"]["content"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| Error::UpstreamInvalid {
            service,
            reason: "the answer has no choices[0].message.content".into(),
            source: None,
        })
}

/// Largest answer read from the model endpoint, in bytes.
const MODEL_BODY_LIMIT: u64 = 8 * 1024 * 1024;

/// POSTs JSON to the model endpoint (`http://` or `https://`) and returns the
/// status and body. A server that is down or too slow is `UNAVAILABLE`
/// (retryable); an answer over 8 MiB is `UPSTREAM_INVALID`.
pub(crate) fn post_json(
    url: &str,
    body: &serde_json::Value,
    bearer: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String)> {
    let payload = serde_json::to_vec(body).expect("JSON serialises");
    let auth = bearer.map(|key| format!("Bearer {key}"));
    let mut headers = vec![("Accept", "application/json")];
    headers.extend(auth.as_deref().map(|a| ("Authorization", a)));
    let service = format!("the consolidation model at {url}");
    let r = crate::client::send(&crate::client::Request {
        service: &service,
        method: "POST",
        url,
        headers: &headers,
        json: Some(&payload),
        timeout,
        body_limit: MODEL_BODY_LIMIT,
    })?;
    Ok((r.status, r.body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_fences_or_bare() {
        for answer in [
            r#"{"operations":[{"op":"forget","id":"a"}]}"#,
            "```json\n[{\"op\":\"forget\",\"id\":\"a\"}]\n```",
            "```\n{\"operations\":[{\"op\":\"forget\",\"id\":\"a\"}]}\n```",
        ] {
            assert_eq!(operations(answer).unwrap().len(), 1, "{answer}");
        }
        for bad in ["sure! here you go", r#"{"ops":[]}"#, "42"] {
            assert!(operations(bad).is_err(), "{bad}");
        }
    }
}
