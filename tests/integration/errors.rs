//! Issue 19: errors say what was missing, keep their causes, and storage
//! failures stay storage failures on every path.

use memory_hub::ErrorCode;
use memory_hub::consolidate::report;
use memory_hub::consolidate::rollback::{Target, rollback};
use serde_json::json;

use crate::support::{TempRoot, categories};

#[test]
fn a_missing_consolidation_run_is_named_as_such() {
    let root = TempRoot::new();
    let hub = root.hub();
    let run = "run-20261130T030000-1a2b";
    let err = rollback(&hub, &Target::Run(run.into()), true).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(
        err.to_string(),
        format!("no consolidation run with id {run:?}")
    );
    let err = report::load(hub.layout(), run).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("no consolidation run with id {run:?}")
    );
    // Through the CLI: exit code 3 and the same message.
    drop(hub);
    let out = root.memd(&["--json", "rollback", "--run", run]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "NOT_FOUND");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("no consolidation run with id"),
        "{v}"
    );
}

#[test]
fn a_category_read_over_a_broken_index_is_a_storage_error_not_not_found() {
    let root = TempRoot::new();
    let hub = root.hub();
    let set = |content: &str| {
        categories(
            &hub,
            json!({"action": "set", "name": "coding-requirements", "slot": "coding-requirements",
                   "scene": "main", "content": content}),
        )
    };
    set("Every change ships with a test.").unwrap();
    let get = |name: &str| categories(&hub, json!({"action": "get", "name": name}));
    let err = get("nope").unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(err.to_string(), r#"no category with id "nope""#);
    // Break the metadata store under the running hub.
    let db = walk(root.path(), "meta.db").expect("the index has a meta.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TABLE memories")
        .unwrap();
    for result in [
        get("coding-requirements").map(|_| ()),
        categories(
            &hub,
            json!({"action": "delete", "name": "coding-requirements"}),
        )
        .map(|_| ()),
        set("Every change ships with tests.").map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.code(), ErrorCode::Storage, "{err}");
        assert!(err.code().retryable());
    }
}

fn walk(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let p = entry.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if p.is_dir()
            && let Some(found) = walk(&p, name)
        {
            return Some(found);
        }
    }
    None
}
