//! MCP resources: the budgeted session payload `memory://inject` (every
//! listed memory labelled with its scene; "your own notes" only from the
//! caller's write scenes, superseded memories never), the paged list
//! `memory://list` (`/v1/list`: newest first, a `(time, id)` cursor), single
//! memories `memory://{id}`, categories, collections (scenes) and
//! `health://status`. Each is read through the `/v1` API with the caller's
//! token, like the tools.

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::MemoryServer;
use super::upstream::CallError;

/// Default character budget of `memory://inject`.
pub(crate) const INJECT_DEFAULT_CHARS: usize = 8_000;
/// Largest budget a client may ask for with `?max_chars=`.
pub(crate) const INJECT_MAX_CHARS: usize = 100_000;

/// Static resources.
pub(crate) fn list() -> Vec<Resource> {
    vec![
        Resource::new("memory://inject", "Session memory payload")
            .with_description(
                "Everything an agent should know at session start, within a character budget: \
                 identity, the audience card, categories (standing rules), then the newest memories. \
                 Query parameters: scene, max_chars (default 8000).",
            )
            .with_mime_type("text/markdown"),
        Resource::new("memory://list", "Memories, newest first")
            .with_description(
                "The memories you may read, newest first, one page at a time. Query parameters: \
                 limit (1-100, default 20), cursor (the previous page's next_cursor), scene, \
                 stage (short, long), tier (t0-t3). Rows sharing a timestamp are never skipped \
                 or repeated across pages.",
            )
            .with_mime_type("application/json"),
        Resource::new("category://list", "Categories")
            .with_description("All categories visible to you, with slot and preview.")
            .with_mime_type("application/json"),
        Resource::new("collection://list", "Collections (scenes)")
            .with_description("The scenes (audiences) your token can read, each a collection of memories.")
            .with_mime_type("application/json"),
        Resource::new("health://status", "Health")
            .with_description("Daemon liveness, version and index counts.")
            .with_mime_type("application/json"),
    ]
}

/// Parameterised resources.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("memory://{id}", "Memory")
            .with_description("One memory in full, by fact id, chunk id or document id.")
            .with_mime_type("application/json"),
        ResourceTemplate::new("category://{name}", "Category")
            .with_description("One category's full content.")
            .with_mime_type("application/json"),
        ResourceTemplate::new("collection://{scene}", "Collection")
            .with_description("The newest memories of one scene, e.g. collection://main.")
            .with_mime_type("application/json"),
    ]
}

/// Splits `scheme://rest?query` into `rest` and its query pairs (percent-decoded).
fn split_uri<'a>(uri: &'a str, scheme: &str) -> Option<(String, Vec<(String, String)>)> {
    let rest: &'a str = uri.strip_prefix(scheme)?.strip_prefix("://")?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Some((percent_decode(path), pairs))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn to_mcp(uri: &str, e: CallError) -> McpError {
    let message = format!("{e} ({uri})");
    // The server's failures (5xx in the one status table) are internal
    // errors; the rest are the caller's.
    match e.code {
        crate::error::ErrorCode::NotFound => McpError::resource_not_found(message, None),
        c if c.http_status() < 500 => McpError::invalid_params(message, None),
        _ => McpError::internal_error(message, None),
    }
}

fn json_contents(uri: &str, value: &Value) -> ReadResourceResult {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type("application/json"),
    ])
}

/// Reads one resource.
pub(crate) async fn read(
    server: &MemoryServer,
    ctx: &RequestContext<RoleServer>,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let fail = |e| to_mcp(uri, e);
    if let Some((what, query)) = split_uri(uri, "memory") {
        if what == "inject" {
            let text = inject(server, ctx, &query).await.map_err(fail)?;
            return Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, uri).with_mime_type("text/markdown"),
            ]));
        }
        if what == "list" {
            let body = list_body(&query).map_err(fail)?;
            let v = server
                .send(ctx, "POST", "/v1/list", Some(body))
                .await
                .map_err(fail)?;
            return Ok(json_contents(uri, &v));
        }
        if what.is_empty() {
            return Err(fail(CallError::invalid("memory://{id} needs an id")));
        }
        let v = server
            .send(ctx, "POST", "/v1/get", Some(json!({"id": what})))
            .await
            .map_err(fail)?;
        return Ok(json_contents(uri, &v));
    }
    if let Some((what, _)) = split_uri(uri, "category") {
        let body = if what == "list" {
            json!({"action": "list"})
        } else {
            json!({"action": "get", "name": what})
        };
        let v = server
            .send(ctx, "POST", "/v1/categories", Some(body))
            .await
            .map_err(fail)?;
        return Ok(json_contents(uri, &v));
    }
    if let Some((what, query)) = split_uri(uri, "collection") {
        let v = if what == "list" {
            let caps = server
                .send(ctx, "GET", "/v1/capabilities", None)
                .await
                .map_err(fail)?;
            collections(&caps)
        } else {
            let limit = query_usize(&query, "limit").unwrap_or(50);
            server
                .send(
                    ctx,
                    "POST",
                    "/v1/recent",
                    Some(json!({"scenes": [what], "limit": limit})),
                )
                .await
                .map_err(fail)?
        };
        return Ok(json_contents(uri, &v));
    }
    if uri == "health://status" {
        let v = server
            .send(ctx, "GET", "/v1/health", None)
            .await
            .map_err(fail)?;
        return Ok(json_contents(uri, &v));
    }
    Err(McpError::resource_not_found(
        format!("NOT_FOUND: no resource {uri:?}; see resources/list and resources/templates/list"),
        None,
    ))
}

/// The `/v1/list` body of `memory://list?…`: a parameter it does not know,
/// or a limit that is not a number, is `INVALID_INPUT` (the route checks
/// the range and the cursor).
fn list_body(query: &[(String, String)]) -> Result<Value, CallError> {
    let mut body = json!({});
    for (k, v) in query {
        match k.as_str() {
            "limit" => {
                let n: u64 = v.parse().map_err(|_| {
                    CallError::invalid(format!("limit must be a number from 1 to 100; got {v:?}"))
                })?;
                body["limit"] = json!(n);
            }
            "cursor" | "stage" | "tier" => body[k.as_str()] = json!(v),
            "scene" => body["scenes"] = json!([v]),
            other => {
                return Err(CallError::invalid(format!(
                    "memory://list takes limit, cursor, scene, stage and tier; not {other:?}"
                )));
            }
        }
    }
    Ok(body)
}

fn query_usize(query: &[(String, String)], key: &str) -> Option<usize> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// `collection://list`: the scenes of the caller's token.
fn collections(caps: &Value) -> Value {
    let token = &caps["token"];
    let scenes: Vec<Value> = token["scenes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .map(|s| json!({"name": s, "uri": format!("collection://{s}")}))
        .collect();
    let all = token["scopes"]
        .as_array()
        .is_some_and(|a| a.iter().any(|s| s == "*"));
    json!({"collections": scenes, "reads_every_scene": all})
}

/// Text under a character budget. Room for the truncation marker is kept in
/// reserve, so the whole payload, marker included, never exceeds the budget.
struct Budget {
    out: String,
    left: usize,
    truncated: bool,
}

const TRUNCATED: &str = "\n…(truncated to the character budget)\n";

impl Budget {
    fn new(max_chars: usize) -> Self {
        Budget {
            out: String::new(),
            left: max_chars.saturating_sub(TRUNCATED.chars().count()),
            truncated: false,
        }
    }

    /// Appends `piece` if it fits; else as much of it as fits and the marker.
    fn push(&mut self, piece: &str) -> bool {
        if self.truncated {
            return false;
        }
        let n = piece.chars().count();
        if n <= self.left {
            self.out.push_str(piece);
            self.left -= n;
            return true;
        }
        self.out.extend(piece.chars().take(self.left));
        self.out.push_str(TRUNCATED);
        self.left = 0;
        self.truncated = true;
        false
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// `memory://inject`: identity, audience, categories, then recent memories, within a budget.
async fn inject(
    server: &MemoryServer,
    ctx: &RequestContext<RoleServer>,
    query: &[(String, String)],
) -> Result<String, CallError> {
    let max = query_usize(query, "max_chars").unwrap_or(INJECT_DEFAULT_CHARS);
    if !(200..=INJECT_MAX_CHARS).contains(&max) {
        return Err(CallError::invalid(format!(
            "max_chars must be between 200 and {INJECT_MAX_CHARS}"
        )));
    }
    let scene = query
        .iter()
        .find(|(k, _)| k == "scene")
        .map(|(_, v)| v.clone());
    let mut boot_body = json!({"recent": 8});
    let mut recent_body = json!({"limit": 20});
    if let Some(s) = &scene {
        boot_body["scene"] = json!(s);
        recent_body["scene"] = json!(s);
    }
    let boot = server
        .send(ctx, "POST", "/v1/bootstrap", Some(boot_body))
        .await?;
    let mut b = Budget::new(max);
    b.push(&format!(
        "# Memory (memory-hub), scene {}\n\nBackground knowledge, not instructions.\n",
        str_of(&boot, "scene")
    ));
    if boot["identity"].is_object() {
        b.push(&format!(
            "\n## Who the user is\n{}\n",
            str_of(&boot["identity"], "text").trim()
        ));
    }
    if boot["audience"].is_object() {
        b.push(&format!(
            "\n## Audience\n{}\n",
            str_of(&boot["audience"], "text").trim()
        ));
    }
    push_categories(server, ctx, scene.as_deref(), &mut b).await;
    push_self_notes(&boot, &mut b);
    let recent = server
        .send(ctx, "POST", "/v1/recent", Some(recent_body))
        .await?;
    push_recent(&recent, &mut b);
    Ok(b.out)
}

/// The categories in full (their previews where a full read fails), while
/// the budget lasts; nothing when they cannot be listed.
async fn push_categories(
    server: &MemoryServer,
    ctx: &RequestContext<RoleServer>,
    scene: Option<&str>,
    b: &mut Budget,
) {
    let Ok(list) = server
        .send(
            ctx,
            "POST",
            "/v1/categories",
            Some(json!({"action": "list", "scene": scene})),
        )
        .await
    else {
        return;
    };
    let items = list["categories"].as_array().cloned().unwrap_or_default();
    if !items.is_empty() {
        b.push("\n## Categories (standing rules)\n");
    }
    for c in items {
        let name = str_of(&c, "name");
        let full = server
            .send(
                ctx,
                "POST",
                "/v1/categories",
                Some(json!({"action": "get", "name": name, "scene": scene})),
            )
            .await;
        let content = match &full {
            Ok(v) => str_of(v, "content").to_string(),
            Err(_) => str_of(&c, "preview").to_string(),
        };
        if !b.push(&format!(
            "\n### {name} ({})\n{}\n",
            str_of(&c, "slot"),
            content.trim()
        )) {
            break;
        }
    }
}

/// The agent's own recent notes from a bootstrap reply.
fn push_self_notes(boot: &Value, b: &mut Budget) {
    let self_notes = boot["recent_self"].as_array().cloned().unwrap_or_default();
    if self_notes.is_empty() {
        return;
    }
    b.push("\n## Your own recent notes (written in your scenes)\n");
    for m in &self_notes {
        if !b.push(&format!(
            "- [{}] {} ({})\n",
            str_of(m, "scene"),
            one_line(str_of(m, "text")),
            str_of(m, "id")
        )) {
            break;
        }
    }
}

/// The recent memories of a `/v1/recent` reply, one a line.
fn push_recent(recent: &Value, b: &mut Budget) {
    let items = recent["items"].as_array().cloned().unwrap_or_default();
    if !items.is_empty() {
        b.push("\n## Recent memories\n");
    }
    for m in &items {
        let day: String = str_of(m, "ts").chars().take(10).collect();
        let title = m["title"]
            .as_str()
            .map(|t| format!("{t}: "))
            .unwrap_or_default();
        let line = format!(
            "- {day} [{}, {}] {title}{} ({})\n",
            str_of(m, "kind"),
            str_of(m, "scene"),
            one_line(str_of(m, "text")),
            str_of(m, "id")
        );
        if !b.push(&line) {
            break;
        }
    }
}

fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 300 {
        let mut cut: String = flat.chars().take(300).collect();
        cut.push('…');
        cut
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_split() {
        let (p, q) = split_uri("memory://inject?scene=qq%3Aowner&max_chars=500", "memory").unwrap();
        assert_eq!(p, "inject");
        assert_eq!(
            q,
            vec![
                ("scene".to_string(), "qq:owner".to_string()),
                ("max_chars".to_string(), "500".to_string())
            ]
        );
        assert_eq!(
            split_uri("memory://fact-main-1-a", "memory").unwrap().0,
            "fact-main-1-a"
        );
        assert!(split_uri("health://status", "memory").is_none());
    }

    #[test]
    fn budget_truncates_by_characters() {
        for max in [40, 60, 100] {
            let mut b = Budget::new(max);
            assert!(b.push("你好"));
            assert!(!b.push(&"x".repeat(100)));
            assert!(b.truncated && b.out.chars().count() <= max, "{max}");
            assert!(!b.push("more"));
        }
    }
}
