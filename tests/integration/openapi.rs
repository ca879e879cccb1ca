//! `openapi.yaml` is the contract: it must list exactly the router's routes,
//! and the layering rules are kept honest by grepping the sources.

use std::collections::BTreeSet;
use std::path::Path;

use memory_hub::http::route_table;
use serde_json::Value;

fn spec() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::from_str(&text).expect("openapi.yaml parses")
}

fn resolve<'a>(spec: &'a Value, reference: &str) -> Option<&'a Value> {
    spec.pointer(reference.strip_prefix('#')?)
}

fn check_refs(spec: &Value, v: &Value, at: &str) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "$ref" {
                    let r = child.as_str().unwrap();
                    assert!(resolve(spec, r).is_some(), "{at}: dangling $ref {r}");
                } else {
                    check_refs(spec, child, &format!("{at}/{k}"));
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| check_refs(spec, i, at)),
        _ => {}
    }
}

#[test]
fn openapi_equals_the_router() {
    let spec = spec();
    let mut documented = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let routed: BTreeSet<(String, String)> = route_table()
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    let missing: Vec<_> = routed.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&routed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "router and openapi.yaml differ: not documented {missing:?}, not routed {extra:?}"
    );
    for route in route_table() {
        let op = &spec["paths"][route.path][route.method.to_lowercase()];
        let name = format!("{} {}", route.method, route.path);
        assert!(
            op["responses"]["200"].is_object(),
            "{name}: no 200 response"
        );
        if route.auth {
            assert!(
                op.get("security").is_none(),
                "{name}: must require the bearer token"
            );
            assert!(
                op["responses"]["401"].is_object(),
                "{name}: no 401 response"
            );
        } else {
            assert_eq!(
                op["security"],
                serde_json::json!([]),
                "{name}: must be open"
            );
        }
        if route.method == "POST" {
            assert!(op["requestBody"].is_object(), "{name}: no request body");
            assert!(
                op["responses"]["400"].is_object(),
                "{name}: no 400 response"
            );
        }
    }
    check_refs(&spec, &spec, "#");
}

#[test]
fn error_codes_in_the_spec_are_the_stable_table() {
    use memory_hub::error::ErrorCode::*;
    let spec = spec();
    let documented: Vec<&str> =
        spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
    let codes: Vec<&str> = memory_hub::error::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(documented, codes);
    for code in [
        InvalidInput,
        Unauthorized,
        Forbidden,
        NotFound,
        RootLocked,
        RateLimited,
        Storage,
    ] {
        let status = memory_hub::http::error::status_of(code)
            .as_u16()
            .to_string();
        assert!(
            spec["info"]["description"]
                .as_str()
                .unwrap()
                .contains(&format!("{} {status}", code.as_str())),
            "{code:?} {status} is not in the spec's description"
        );
    }
}

/// Every POST body refuses fields the contract does not name (no silent typos).
#[tokio::test]
async fn every_post_body_refuses_unknown_fields() {
    let api = crate::http_support::Api::new();
    let root = api.token("root", "dsh-desktop");
    for route in route_table().iter().filter(|r| r.method == "POST") {
        let (status, v) = api
            .post(
                route.path,
                &root,
                serde_json::json!({"not_in_the_contract": 1}),
            )
            .await;
        assert_eq!(status, 400, "{}: {v}", route.path);
        assert_eq!(v["error"]["code"], "INVALID_INPUT", "{}", route.path);
    }
}

/// The parts of a JSON Schema the contract is about: types, enums,
/// properties, required fields, items and closed objects. References are
/// resolved, `null` alternatives dropped (an optional field may be sent as
/// null: the API reads that as absent), one-of-constants read as an enum,
/// and descriptions, defaults, formats and bounds left out.
fn shape(root: &Value, v: &Value) -> Value {
    use serde_json::{Map, json};
    let Some(obj) = v.as_object() else {
        return v.clone();
    };
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        let target = resolve(root, r).unwrap_or_else(|| panic!("dangling $ref {r}"));
        return shape(root, target);
    }
    if let Some(parts) = obj.get("allOf").and_then(Value::as_array) {
        // All of several objects: one object with every property.
        let mut merged = Map::new();
        let (mut props, mut required) = (Map::new(), BTreeSet::new());
        for part in parts.iter().map(|p| shape(root, p)) {
            props.extend(part["properties"].as_object().cloned().unwrap_or_default());
            required.extend(
                part["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.as_str().map(str::to_string)),
            );
            for (k, v) in part.as_object().into_iter().flatten() {
                merged.insert(k.clone(), v.clone());
            }
        }
        if !props.is_empty() {
            merged.insert("properties".into(), Value::Object(props));
        }
        if !required.is_empty() {
            merged.insert("required".into(), json!(required));
        }
        return Value::Object(merged);
    }
    for key in ["anyOf", "oneOf"] {
        let Some(list) = obj.get(key).and_then(Value::as_array) else {
            continue;
        };
        let mut alternatives: Vec<Value> = list
            .iter()
            .map(|s| shape(root, s))
            .filter(|s| s != &json!({"type": "null"}))
            .collect();
        if alternatives.iter().all(|a| a.get("enum").is_some()) {
            let mut values: Vec<Value> = alternatives
                .iter()
                .flat_map(|a| a["enum"].as_array().cloned().unwrap_or_default())
                .collect();
            values.sort_by_key(Value::to_string);
            return json!({"type": "string", "enum": values});
        }
        if alternatives.len() == 1 {
            return alternatives.remove(0);
        }
        alternatives.sort_by_key(Value::to_string);
        return json!({ "anyOf": alternatives });
    }
    let mut out = Map::new();
    if let Some(t) = obj.get("type") {
        let types: Vec<&str> = match t {
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            other => other.as_str().into_iter().collect(),
        };
        let types: Vec<&str> = match types.as_slice() {
            ["null"] => vec!["null"],
            _ => types.into_iter().filter(|t| *t != "null").collect(),
        };
        if let [one] = types.as_slice() {
            out.insert("type".into(), json!(one));
        } else {
            out.insert("type".into(), json!(types));
        }
    }
    let consts = obj.get("const").map(|c| vec![c.clone()]);
    if let Some(mut values) = obj
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .or(consts)
    {
        values.retain(|v| !v.is_null());
        values.sort_by_key(Value::to_string);
        out.insert("type".into(), json!("string"));
        out.insert("enum".into(), json!(values));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let props: Map<String, Value> = props
            .iter()
            .map(|(k, s)| (k.clone(), shape(root, s)))
            .collect();
        out.insert("properties".into(), Value::Object(props));
    }
    if let Some(req) = obj.get("required").and_then(Value::as_array) {
        let mut req: Vec<&str> = req.iter().filter_map(Value::as_str).collect();
        req.sort_unstable();
        if !req.is_empty() {
            out.insert("required".into(), json!(req));
        }
    }
    if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.insert("closed".into(), json!(true));
    }
    if let Some(items) = obj.get("items") {
        out.insert("items".into(), shape(root, items));
    }
    Value::Object(out)
}

/// Where two shapes differ, one line per difference.
fn differences(at: &str, spec: &Value, code: &Value, out: &mut Vec<String>) {
    match (spec, code) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => differences(&format!("{at}.{k}"), x, y, out),
                    (Some(x), None) => {
                        out.push(format!("{at}.{k}: spec has {x}, the api type not"))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{at}.{k}: the api type has {y}, spec not"))
                    }
                    (None, None) => {}
                }
            }
        }
        (a, b) if a != b => out.push(format!("{at}: spec {a}, api type {b}")),
        _ => {}
    }
}

fn spec_request<'a>(spec: &'a Value, method: &str, path: &str) -> &'a Value {
    &spec["paths"][path][method.to_lowercase()]["requestBody"]["content"]["application/json"]["schema"]
}

fn spec_reply<'a>(spec: &'a Value, method: &str, path: &str) -> &'a Value {
    &spec["paths"][path][method.to_lowercase()]["responses"]["200"]["content"]["application/json"]["schema"]
}

/// Each operation's request (and, where it has its own api type, reply)
/// schema in `openapi.yaml` has the same fields, types, enums and required
/// fields as the `memory_hub::api` type the handlers and MCP tools use.
#[test]
fn openapi_bodies_equal_the_api_types() {
    let spec = spec();
    let mut problems = Vec::new();
    let ops = memory_hub::api::operations();
    for op in &ops {
        let name = format!("{} {}", op.method, op.path);
        for (what, schema, documented) in [
            (
                "request",
                &op.request,
                spec_request(&spec, op.method, op.path),
            ),
            ("reply", &op.reply, spec_reply(&spec, op.method, op.path)),
        ] {
            let Some(schema) = schema else { continue };
            assert!(
                documented.is_object(),
                "{name}: the spec has no {what} schema"
            );
            let code = schema.as_value();
            differences(
                &format!("{name} {what}"),
                &shape(&spec, documented),
                &shape(code, code),
                &mut problems,
            );
        }
    }
    assert!(
        problems.is_empty(),
        "openapi.yaml and memory_hub::api differ:\n{}",
        problems.join("\n")
    );
    // Every POST route but /v1/config (its keys are the config's editable
    // table) has its request type.
    let typed: BTreeSet<&str> = ops.iter().map(|o| o.path).collect();
    for route in route_table().iter().filter(|r| r.method == "POST") {
        assert!(
            typed.contains(route.path) || route.path == "/v1/config",
            "{} has no api request type",
            route.path
        );
    }
}

/// The comparison sees a field the spec lacks.
#[test]
fn a_field_missing_from_the_spec_is_seen() {
    let spec = spec();
    let documented = shape(&spec, spec_request(&spec, "POST", "/v1/forget"));
    let mut code = memory_hub::api::operations()
        .into_iter()
        .find(|o| o.path == "/v1/forget")
        .and_then(|o| o.request)
        .unwrap()
        .to_value();
    code["properties"]["time"] = serde_json::json!({"type": "string"});
    let mut problems = Vec::new();
    differences("forget", &documented, &shape(&code, &code), &mut problems);
    assert_eq!(
        problems,
        vec![r#"forget.properties.time: the api type has {"type":"string"}, spec not"#]
    );
}
