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
