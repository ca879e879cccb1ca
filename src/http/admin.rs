//! Service routes: health, capabilities, configuration and token management.
//!
//! `config-state`, `config`, `tokens`, `tokens/revoke` and `/metrics` need
//! the `admin` scope; `/v1/health` is open but shows counts, scene names,
//! component details and jobs only to an admin token. `POST /v1/config` changes only whitelisted keys, writes them to
//! `config.json` (atomically, keeping the file's other keys) and applies them
//! to the next request without a restart.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;
use super::extract::{ApiJson, Caller, MAX_BODY_BYTES};
use super::{AppState, AuditNote, reply, route_table};
use crate::api::RevokeBody;
use crate::auth::{TokenInfo, policy, scope};
use crate::base::durable::write_atomic;
use crate::config::Config;
use crate::error::Error;
use crate::model::MAX_TEXT_BYTES;

/// Keys `POST /v1/config` may change: `(dotted key, minimum, maximum, description)`.
pub(crate) const EDITABLE: &[(&str, u64, u64, &str)] = &[
    (
        "search.defaultLimit",
        1,
        1000,
        "Results returned when a request gives no limit",
    ),
    (
        "search.maxLimit",
        1,
        1000,
        "Largest limit a request may ask for",
    ),
    (
        "search.orFallbackMinHits",
        0,
        1000,
        "When the AND pass finds fewer hits, an OR pass fills up",
    ),
    (
        "ingest.ttlHours",
        1,
        168,
        "Hours an ingested chat message stays searchable",
    ),
    (
        "http.rateLimitPerMinute",
        0,
        1_000_000,
        "Requests one token may send per minute (0: no limit)",
    ),
];

fn pointer(key: &str) -> String {
    format!("/{}", key.replace('.', "/"))
}

fn admin(caller: &Caller) -> Result<(), ApiError> {
    policy::require(&caller.0, scope::ADMIN).map_err(ApiError::from)
}

#[derive(Serialize)]
struct Health {
    version: &'static str,
    uptime_s: u64,
    #[serde(flatten)]
    report: crate::hub::HealthReport,
    consolidation: crate::consolidate::Status,
}

/// What `/v1/health` shows without an admin token: whether the service is
/// up, and each component's state. No counts, no scene names, no job errors:
/// the route is open to anyone who can reach the port.
#[derive(Serialize)]
struct PublicHealth {
    status: &'static str,
    version: &'static str,
    uptime_s: u64,
    writer: bool,
    components: std::collections::BTreeMap<&'static str, PublicComponent>,
}

#[derive(Serialize)]
struct PublicComponent {
    status: &'static str,
}

/// `GET /v1/health`: without a token (or with a token lacking `admin`), the
/// status and each component's state; with an admin token also counts (by
/// stage, scene, privacy, tier), pending vectors, scheduled jobs and
/// consolidation. An unknown token is `UNAUTHORIZED`, not a quiet downgrade.
pub(crate) async fn health(
    State(st): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let grant = st.grant(&headers)?;
    if grant.is_none() && headers.contains_key(axum::http::header::AUTHORIZATION) {
        return Err(ApiError::unauthorized());
    }
    let report = st.run(|hub| hub.health()).await?;
    if !grant.is_some_and(|g| g.has(scope::ADMIN)) {
        let components = report
            .components
            .iter()
            .map(|(name, c)| (*name, PublicComponent { status: c.status }))
            .collect();
        return Ok(reply(
            &PublicHealth {
                status: report.status,
                version: env!("CARGO_PKG_VERSION"),
                uptime_s: st.started.elapsed().as_secs(),
                writer: report.writer,
                components,
            },
            AuditNote::default(),
        ));
    }
    Ok(reply(
        &Health {
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: st.started.elapsed().as_secs(),
            report,
            consolidation: crate::consolidate::status(st.hub(), &st.settings().sleep, st.now()),
        },
        AuditNote::default(),
    ))
}

/// `GET /metrics` (admin): Prometheus text. Global counts and per-route
/// traffic describe every scene, so only admin tokens may scrape them.
pub(crate) async fn metrics(
    State(st): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let stats = st.run(|hub| hub.stats()).await?;
    let text = st.metrics.render(&[
        (
            "memd_memories",
            "Searchable memories.",
            stats.counts.memories,
        ),
        (
            "memd_facts",
            "Facts that are not forgotten.",
            stats.counts.facts,
        ),
        ("memd_vectors", "Stored vectors.", stats.vectors),
        (
            "memd_vectors_pending",
            "Memories waiting for their vector.",
            stats.pending_vectors,
        ),
        (
            "memd_journal_bytes",
            "Bytes in the fact journal.",
            stats.journal_bytes,
        ),
        (
            "memd_uptime_seconds",
            "Seconds since the server started.",
            st.started.elapsed().as_secs(),
        ),
    ]);
    let mut res = (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    )
        .into_response();
    res.extensions_mut().insert(AuditNote::default());
    Ok(res)
}

/// `GET /v1/capabilities`: routes, limits, features and the caller's own rights.
pub(crate) async fn capabilities(State(st): State<AppState>, caller: Caller) -> Response {
    let cfg = st.settings();
    // Whether semantic search can run: loaded, or configured and not failed yet.
    let semantic = !matches!(
        st.hub().embedder_status(),
        crate::embed::EmbedderStatus::Unavailable(_)
    );
    let routes: Vec<String> = route_table()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let body = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "routes": routes,
        "limits": {
            "defaultLimit": cfg.search.default_limit,
            "maxLimit": cfg.search.max_limit,
            "maxBodyBytes": MAX_BODY_BYTES,
            "maxTextBytes": MAX_TEXT_BYTES,
            "ingestTtlHours": cfg.ingest.ttl_hours,
        },
        "features": {
            "modes": ["fulltext", "semantic", "hybrid"],
            "defaultMode": cfg.search.mode.as_str(),
            "semantic": semantic,
            "recallBlock": true,
            "live": true,
            "disclose": true,
        },
        "token": {
            "name": caller.0.name,
            "scopes": caller.0.scopes,
            "scenes": caller.0.scenes,
            "write_scenes": caller.0.write_scenes,
        },
    });
    reply(&body, AuditNote::default())
}

/// `GET /v1/config-schema`: the JSON Schema of `config.json`, generated from
/// the config types (doc comments become descriptions); the keys that
/// `POST /v1/config` may change are listed in `x-editable` with their bounds.
pub(crate) async fn config_schema(_caller: Caller) -> Response {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(Config)).expect("schema serialises");
    let editable: serde_json::Map<String, serde_json::Value> = EDITABLE
        .iter()
        .map(|(key, min, max, description)| {
            (
                (*key).to_string(),
                serde_json::json!({ "type": "integer", "minimum": min, "maximum": max, "description": description }),
            )
        })
        .collect();
    schema["title"] = serde_json::json!("memd configuration (config.json)");
    schema["x-editable"] = serde_json::Value::Object(editable);
    reply(&schema, AuditNote::default())
}

fn editable_values(cfg: &Config) -> serde_json::Value {
    let all = serde_json::to_value(cfg).expect("config serialises");
    let mut out = serde_json::Map::new();
    for (key, ..) in EDITABLE {
        if let Some(v) = all.pointer(&pointer(key)) {
            out.insert((*key).to_string(), v.clone());
        }
    }
    serde_json::Value::Object(out)
}

/// `GET /v1/config-state` (admin): the editable keys and their values.
pub(crate) async fn config_state(
    State(st): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    Ok(reply(
        &serde_json::json!({ "values": editable_values(&st.settings()) }),
        AuditNote::default(),
    ))
}

/// `current` with the editable keys taken from `from`: what a changed
/// `config.json` may change without a restart.
pub(crate) fn merge_editable(current: &Config, from: &Config) -> crate::Result<Config> {
    let mut merged = serde_json::to_value(current).expect("config serialises");
    if let serde_json::Value::Object(values) = editable_values(from) {
        for (key, value) in values {
            set_dotted(&mut merged, &key, value);
        }
    }
    let config: Config =
        serde_json::from_value(merged).map_err(|e| Error::invalid(format!("config: {e}")))?;
    config.validate()?;
    Ok(config)
}

/// Sets `value` at a dotted `key` inside a JSON object, creating parents.
fn set_dotted(root: &mut serde_json::Value, key: &str, value: serde_json::Value) {
    let mut cur = root;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = serde_json::json!({});
        }
        let map = cur.as_object_mut().expect("made an object above");
        if i + 1 == parts.len() {
            map.insert((*part).to_string(), value);
            return;
        }
        cur = map
            .entry((*part).to_string())
            .or_insert_with(|| serde_json::json!({}));
    }
}

/// `POST /v1/config` (admin): `{ "<dotted key>": value, … }` for whitelisted keys.
pub(crate) async fn set_config(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    if body.is_empty() {
        return Err(ApiError::invalid("give at least one key to change"));
    }
    for (key, value) in &body {
        let Some((_, min, max, _)) = EDITABLE.iter().find(|(k, ..)| k == key) else {
            let keys: Vec<&str> = EDITABLE.iter().map(|(k, ..)| *k).collect();
            return Err(ApiError::invalid(format!(
                "{key:?} cannot be changed over HTTP; editable keys are {}",
                keys.join(", ")
            )));
        };
        match value.as_u64() {
            Some(n) if (*min..=*max).contains(&n) => {}
            _ => {
                return Err(ApiError::invalid(format!(
                    "{key} must be an integer between {min} and {max}"
                )));
            }
        }
    }
    let path = st.hub().layout().config();
    let applied = st
        .run(move |_| {
            let mut file: serde_json::Value = match std::fs::read_to_string(&path) {
                Ok(t) => serde_json::from_str(&t)
                    .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
                Err(e) => {
                    return Err(Error::Io {
                        context: format!("cannot read {}", path.display()),
                        source: e,
                    });
                }
            };
            for (key, value) in body {
                set_dotted(&mut file, &key, value);
            }
            let config: Config = serde_json::from_value(file.clone())
                .map_err(|e| Error::invalid(format!("config: {e}")))?;
            config.validate()?;
            let text = serde_json::to_string_pretty(&file).expect("config serialises");
            write_atomic(&path, text.as_bytes())?;
            Ok(config)
        })
        .await?;
    let values = editable_values(&applied);
    st.hub()
        .update_config(|current| merge_editable(current, &applied))
        .map_err(ApiError::from)?;
    Ok(reply(
        &serde_json::json!({ "values": values }),
        AuditNote::default(),
    ))
}

#[derive(Serialize)]
struct TokenList {
    tokens: Vec<TokenInfo>,
}

/// `GET /v1/tokens` (admin): token metadata, never hashes or secrets.
pub(crate) async fn tokens(
    State(st): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let store = st.tokens.clone();
    let tokens = st.run(move |_| store.list()).await?;
    Ok(reply(&TokenList { tokens }, AuditNote::default()))
}

/// `POST /v1/tokens/revoke` (admin): revokes a token from the next request on.
pub(crate) async fn revoke(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RevokeBody>,
) -> Result<Response, ApiError> {
    admin(&caller)?;
    let store = st.tokens.clone();
    let name = body.name;
    let info = st.run(move |_| store.revoke(&name)).await?;
    Ok(reply(&info, AuditNote::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editable_keys_exist_in_the_config() {
        let values = editable_values(&Config::default());
        for (key, ..) in EDITABLE {
            assert!(values.get(*key).is_some(), "{key}");
        }
        let mut v = serde_json::json!({"search": {"maxLimit": 10}});
        set_dotted(&mut v, "search.defaultLimit", serde_json::json!(3));
        set_dotted(&mut v, "ingest.ttlHours", serde_json::json!(2));
        assert_eq!(
            v,
            serde_json::json!({"search": {"maxLimit": 10, "defaultLimit": 3}, "ingest": {"ttlHours": 2}})
        );
    }
}
