//! Everyday correctness of versions, forgets, permissions and reads, one
//! test (or more) per item of the issue they reproduce:
//!
//! 1. Forgetting an edited memory brought the old version back.
//! 2. A new version dropped what the person did not change.
//! 3. Old versions could be edited again and forked the line.
//! 7. Permissions: `*` outside the token's scenes, `from_owner` without its
//!    scope, a peer line moving or exposing an id (consolidation pinning from
//!    group evidence is in `consolidate.rs`).
//! 9. Looking changed memories; `expiring_soon` on every chat hit;
//!    `ingest.ownerIds` needed a restart; `/v1/members` was asymmetric.
//!
//! Each test first runs the issue's own reproduction, then what a person
//! can do on purpose (restore a version), mostly through the real `/v1`
//! router; rebuilds go through the hub, which the test can drop.

use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use memory_hub::api::{RestoreAction, RestoreVersionBody, WriteBody};
use memory_hub::config::Config;
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::hub::Hub;
use serde_json::{Value, json};

use crate::http_support::{Api, ids};
use crate::support::{INHERITED, TempRoot, search_ids};

/// The journal's last `put` record of `id`.
fn put_line(root: &TempRoot, id: &str) -> Value {
    root.journal_lines()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|v| v["op"] == "put" && v["id"] == id)
        .unwrap_or_else(|| panic!("no put line for {id}"))
}

/// Ids of what full-text and hybrid search find for `query`, as `token` sees it.
async fn found(api: &Api, token: &str, query: &str) -> Vec<String> {
    let mut all = Vec::new();
    for mode in ["fulltext", "hybrid"] {
        let v = api
            .ok(
                "/v1/search",
                token,
                json!({"query": query, "mode": mode, "limit": 20}),
            )
            .await;
        for id in ids(&v["hits"]) {
            if !all.contains(&id) {
                all.push(id);
            }
        }
    }
    all
}

fn id_of(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_string()
}

/// The issue's reproduction: write, supersede, forget the new version.
async fn parking(api: &Api, token: &str) -> (String, String) {
    let old = id_of(
        &api.ok(
            "/v1/write",
            token,
            json!({"text": "Parking spot at the office is B2-117", "kind": "fact"}),
        )
        .await,
    );
    let new = id_of(
        &api.ok(
            "/v1/write",
            token,
            json!({"text": "Parking spot at the office moved to B3-042", "supersedes": old}),
        )
        .await,
    );
    api.ok("/v1/forget", token, json!({"id": new})).await;
    (old, new)
}

// ---- The local operator, for tests that drop and rebuild the hub ----

fn write(hub: &Hub, body: Value) -> String {
    let body: WriteBody = serde_json::from_value(body).unwrap();
    hub.write(&hub.operator(), body).unwrap().id
}

fn forget(hub: &Hub, id: &str) {
    let body = memory_hub::api::ForgetBody {
        id: id.into(),
        ..Default::default()
    };
    hub.forget(&hub.operator(), body).unwrap();
}

fn restore(hub: &Hub, id: &str) -> memory_hub::api::RestoreVersionReply {
    let body = RestoreVersionBody {
        id: id.into(),
        scene: None,
    };
    hub.restore(&hub.operator(), body).unwrap()
}

fn get(hub: &Hub, id: &str) -> Value {
    let body = memory_hub::api::GetBody {
        id: id.into(),
        ..Default::default()
    };
    serde_json::to_value(hub.get(&hub.operator(), body).unwrap()).unwrap()
}

fn rebuild(root: &TempRoot) -> Hub {
    Hub::reindex_with(
        root.layout(),
        Config::default(),
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap()
    .0
}

// ---- 1. Forgetting an edited memory ----

#[tokio::test]
async fn issue_1_forgetting_the_new_version_keeps_the_old_one_hidden() {
    let api = Api::new();
    let owner = api.token("owner", "dsh-desktop");
    let (old, new) = parking(&api, &owner).await;

    // No version of the parking spot is found, in any mode or list.
    assert!(found(&api, &owner, "parking spot office").await.is_empty());
    let recent = api.ok("/v1/recent", &owner, json!({"limit": 50})).await;
    assert!(!ids(&recent["items"]).contains(&old), "{recent}");
    let recall = api
        .ok(
            "/v1/recall",
            &owner,
            json!({"query": "parking spot office", "min_score": 0}),
        )
        .await;
    assert_eq!(recall["hits"], json!([]), "{recall}");

    // The old version says what it is and names the forgotten newest one.
    let got = api.ok("/v1/get", &owner, json!({"id": old})).await;
    assert_eq!(got["superseded"], true, "{got}");
    assert_eq!(got["newest_forgotten"], new.as_str(), "{got}");
    assert!(got.get("superseded_by").is_none(), "{got}");
    assert!(got.get("newest").is_none(), "{got}");
    let timeline = api.ok("/v1/timeline", &owner, json!({"limit": 50})).await;
    let entry = timeline["months"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == old.as_str())
        .cloned()
        .unwrap();
    assert_eq!(entry["superseded"], true, "{entry}");

    // On purpose: restoring the old version makes it current again.
    let back = api.ok("/v1/restore", &owner, json!({"id": old})).await;
    assert_eq!(back["action"], "RESTORED", "{back}");
    assert_eq!(back["id"], old.as_str());
    assert_eq!(
        found(&api, &owner, "parking spot office").await,
        std::slice::from_ref(&old)
    );
    let got = api.ok("/v1/get", &owner, json!({"id": old})).await;
    assert!(got.get("superseded").is_none(), "{got}");
}

#[test]
fn issue_1_the_line_stays_hidden_and_restores_replay_after_a_rebuild() {
    let root = TempRoot::new();
    let (old, new) = {
        let hub = root.hub();
        let old = write(
            &hub,
            json!({"text": "Parking spot at the office is B2-117"}),
        );
        let new = write(
            &hub,
            json!({"text": "Parking spot at the office moved to B3-042", "supersedes": old}),
        );
        forget(&hub, &new);
        (old, new)
    };
    let hub = rebuild(&root);
    assert!(search_ids(&hub, "parking spot office", 10).is_empty());
    assert_eq!(get(&hub, &old)["superseded"], true);

    // Undo the forget of the newest version: it is current, the old one not.
    let undone = restore(&hub, &new);
    assert_eq!(undone.action, RestoreAction::Restored);
    assert_eq!(
        search_ids(&hub, "parking spot office", 10),
        std::slice::from_ref(&new)
    );
    // Forget it again; then bring the old version back instead.
    forget(&hub, &new);
    assert!(search_ids(&hub, "parking spot office", 10).is_empty());
    assert_eq!(restore(&hub, &old).action, RestoreAction::Restored);
    assert_eq!(restore(&hub, &old).action, RestoreAction::Noop);
    assert_eq!(
        search_ids(&hub, "parking spot office", 10),
        std::slice::from_ref(&old)
    );
    let lines = root.journal_lines().len();
    drop(hub);

    // Every step is a journal line, and a rebuild reaches the same state.
    let hub = rebuild(&root);
    assert_eq!(
        search_ids(&hub, "parking spot office", 10),
        std::slice::from_ref(&old)
    );
    assert_eq!(
        get(&hub, &old)["text"],
        "Parking spot at the office is B2-117"
    );
    assert_eq!(root.journal_lines().len(), lines);
    let ops: Vec<String> = root
        .journal_lines()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["op"].to_string())
        .collect();
    assert_eq!(
        ops,
        ["put", "put", "forget", "put", "forget", "put"].map(|s| format!("\"{s}\"")),
        "write, supersede, forget, undo, forget, restore of the old version"
    );
}

#[tokio::test]
async fn issue_1_restoring_a_version_while_a_newer_one_is_live_adds_a_version() {
    let api = Api::new();
    let owner = api.token("owner", "dsh-desktop");
    let a = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "The team lunch is on Thursday", "tags": ["team"], "title": "Lunch"}),
        )
        .await,
    );
    let b = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "The team lunch moved to Friday", "supersedes": a}),
        )
        .await,
    );
    // The person wants Thursday back: the old content becomes the newest version.
    let back = api.ok("/v1/restore", &owner, json!({"id": a})).await;
    assert_eq!(back["action"], "NEW_VERSION", "{back}");
    assert_eq!(back["restored"], a.as_str());
    let c = id_of(&back);
    assert_ne!(c, a);
    assert_eq!(
        found(&api, &owner, "team lunch").await,
        std::slice::from_ref(&c)
    );
    let line = put_line(&api.root, &c);
    assert_eq!(line["text"], "The team lunch is on Thursday");
    assert_eq!(line["supersedes"], b.as_str(), "the line stays one line");
    assert_eq!(line["title"], "Lunch");
    assert_eq!(line["tags"], json!(["team"]));
    // Both older versions name the newest.
    for older in [&a, &b] {
        let got = api.ok("/v1/get", &owner, json!({"id": older})).await;
        assert_eq!(got["newest"], c.as_str(), "{got}");
    }
    // A token that may not write the memory cannot restore it.
    let group = api.token("group", "qq-group-1");
    let (status, err) = api.post("/v1/restore", &group, json!({"id": a})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("NOT_FOUND"))
    );
}

// ---- 2. New versions keep what the person did not change ----

#[tokio::test]
async fn issue_2_a_new_version_inherits_every_field_it_does_not_set() {
    let api = Api::new();
    let owner = api.token("owner", "dsh-desktop");
    let first = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({
                "text": "We decided to ship the beta on the 8th",
                "kind": "decision",
                "title": "Beta date",
                "tags": ["release", "beta"],
                "privacy": "personal",
                "subject": "self",
                "importance": 0.8,
                "tier": "t1",
                "time": "2026-05-08",
                "session": "planning-3",
                "speaker": "Lin",
            }),
        )
        .await,
    );
    let second = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "We decided to ship the beta on the 15th", "supersedes": first}),
        )
        .await,
    );
    let (a, b) = (put_line(&api.root, &first), put_line(&api.root, &second));
    for field in INHERITED {
        assert_eq!(a[field], b[field], "{field}: {a} vs {b}");
        assert!(!b[field].is_null(), "{field} was set on the first version");
    }
    assert_eq!(b["supersedes"], first.as_str());

    // What the request sets wins: a raised privacy, cleared tags and title.
    let third = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({
                "text": "We decided to ship the beta on the 22nd",
                "supersedes": second,
                "privacy": "sensitive",
                "tags": [],
                "title": "",
            }),
        )
        .await,
    );
    let c = put_line(&api.root, &third);
    assert_eq!(c["privacy"], "sensitive");
    assert!(c.get("tags").is_none() && c.get("title").is_none(), "{c}");
    assert_eq!(c["kind"], "decision");
    assert_eq!(c["speaker"], "Lin");
    // Lowering it back needs only the right to write at the lower level.
    let fourth = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "Beta on the 22nd, public now", "supersedes": third, "privacy": "normal"}),
        )
        .await,
    );
    assert_eq!(put_line(&api.root, &fourth)["privacy"], "normal");
}

#[tokio::test]
async fn issue_2_the_console_edit_keeps_the_event_time_and_the_pets_own_subject() {
    let api = Api::new();
    let pet = api.token("pet", "pet");
    let note = id_of(
        &api.ok(
            "/v1/write",
            &pet,
            json!({
                "text": "I told the owner a joke about cats",
                "scene": "pet",
                "subject": "self",
                "time": "2026-03-02T20:00:00Z",
                "kind": "event",
            }),
        )
        .await,
    );
    // What the console's Edit sends: the new text, the id it replaces, the tier.
    let tier = put_line(&api.root, &note)["tier"].clone();
    let edited = id_of(
        &api.ok(
            "/v1/write",
            &pet,
            json!({"text": "I told the owner a joke about dogs", "supersedes": note, "tier": tier}),
        )
        .await,
    );
    let line = put_line(&api.root, &edited);
    assert_eq!(line["subject"], "self", "{line}");
    assert_eq!(line["time"], "2026-03-02T20:00:00Z", "{line}");
    assert_eq!(line["kind"], "event");
    assert_eq!(line["scene"], "pet");
}

#[tokio::test]
async fn issue_2_keep_now_on_a_group_line_keeps_the_speaker_title_and_session() {
    let api = Api::new();
    let group = api.token("group", "qq-group-7");
    let chat = id_of(
        &api.ok(
            "/v1/ingest",
            &group,
            json!({
                "message_id": "m-1",
                "text": "周六下午三点在西湖边集合",
                "sender": {"id": "u-42", "name": "小李"},
                "session": "weekend-trip",
            }),
        )
        .await,
    );
    // What the console's "Keep now" sends.
    let kept = id_of(
        &api.ok(
            "/v1/write",
            &group,
            json!({"text": "周六下午三点在西湖边集合", "supersedes": chat, "stage": "long"}),
        )
        .await,
    );
    let (a, b) = (put_line(&api.root, &chat), put_line(&api.root, &kept));
    assert_eq!(b["stage"], "long");
    assert!(b.get("expires_at").is_none(), "{b}");
    for field in [
        "speaker", "title", "session", "scene", "tags", "subject", "kind",
    ] {
        assert_eq!(a[field], b[field], "{field}: {a} vs {b}");
    }
    assert_eq!(b["speaker"], "小李");
    let inbox = api
        .ok("/v1/recent", &group, json!({"stage": "short"}))
        .await;
    assert_eq!(inbox["items"], json!([]), "kept: it left the inbox");
}

// ---- 3. Older versions cannot be edited or superseded ----

#[tokio::test]
async fn issue_3_an_older_version_answers_conflict_naming_the_newest() {
    let api = Api::new();
    let owner = api.token("owner", "dsh-desktop");
    let a = id_of(
        &api.ok("/v1/write", &owner, json!({"text": "The gym opens at 6"}))
            .await,
    );
    let b = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "The gym opens at 7", "supersedes": a}),
        )
        .await,
    );
    let lines = api.root.journal_lines().len();
    let (status, err) = api
        .post(
            "/v1/write",
            &owner,
            json!({"text": "The gym opens at 8", "supersedes": a}),
        )
        .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "CONFLICT");
    assert_eq!(err["error"]["retryable"], false);
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains(&b), "names the newest version: {message}");
    // Tags are an edit of the version too.
    let (status, err) = api
        .post("/v1/tags", &owner, json!({"id": a, "add": ["x"]}))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("CONFLICT"))
    );
    assert_eq!(api.root.journal_lines().len(), lines, "nothing was written");
    // get names the successor; the newest version supersedes fine.
    let got = api.ok("/v1/get", &owner, json!({"id": a})).await;
    assert_eq!(got["superseded_by"], json!([b]));
    assert_eq!(got["newest"], b.as_str());
    api.ok(
        "/v1/write",
        &owner,
        json!({"text": "The gym opens at 8", "supersedes": b}),
    )
    .await;

    // Supersedes of one version sent together: one wins, the others conflict.
    let x = id_of(
        &api.ok("/v1/write", &owner, json!({"text": "The pool closes at 9"}))
            .await,
    );
    let body = |h: u32| json!({"text": format!("The pool closes at {h}"), "supersedes": x});
    let (r1, r2, r3, r4) = tokio::join!(
        api.post("/v1/write", &owner, body(10)),
        api.post("/v1/write", &owner, body(11)),
        api.post("/v1/write", &owner, body(12)),
        api.post("/v1/write", &owner, body(13)),
    );
    let statuses = [r1.0, r2.0, r3.0, r4.0];
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        3,
        "{statuses:?}"
    );
    let got = api.ok("/v1/get", &owner, json!({"id": x})).await;
    assert_eq!(
        got["superseded_by"].as_array().unwrap().len(),
        1,
        "one line: {got}"
    );
}

#[tokio::test]
async fn issue_3_the_conflict_never_names_a_version_the_token_may_not_read() {
    let api = Api::new();
    let owner = api.token("owner", "dsh-desktop");
    // A token that writes main but reads no secret.
    let helper = api.custom_token("helper", &["read", "write"], &["main"]);
    let a = id_of(
        &api.ok(
            "/v1/write",
            &helper,
            json!({"text": "The safe is in the study"}),
        )
        .await,
    );
    let b = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "The safe code is kept by the lawyer", "supersedes": a, "privacy": "secret"}),
        )
        .await,
    );
    let (status, err) = api
        .post(
            "/v1/write",
            &helper,
            json!({"text": "The safe is in the cellar", "supersedes": a}),
        )
        .await;
    assert_eq!(status, 409, "{err}");
    assert!(!err.to_string().contains(&b), "{err}");
    let got = api.ok("/v1/get", &helper, json!({"id": a})).await;
    assert_eq!(got["superseded"], true);
    assert!(!got.to_string().contains(&b), "{got}");
    // Nor does restoring the old version, which would replace the secret one.
    let (status, err) = api.post("/v1/restore", &helper, json!({"id": a})).await;
    assert_eq!(status, 409, "{err}");
    assert!(!err.to_string().contains(&b), "{err}");
}

#[test]
fn issue_3_the_cli_reports_the_conflict_with_its_own_exit_code() {
    let root = TempRoot::new();
    let a = root.memd_json(&["write", "--text", "The dentist is on Monday"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = root.memd_json(&[
        "write",
        "--text",
        "The dentist moved to Tuesday",
        "--supersedes",
        &a,
    ])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = root.memd(&[
        "--json",
        "write",
        "--text",
        "The dentist moved to Wednesday",
        "--supersedes",
        &a,
    ]);
    assert_eq!(out.status.code(), Some(11), "CONFLICT's exit code");
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["error"]["code"], "CONFLICT");
    assert!(
        envelope["error"]["message"].as_str().unwrap().contains(&b),
        "{envelope}"
    );
    let shown = root.memd(&["get", &a]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains(&format!("the newest is {b}")), "{text}");
    // Restore through the CLI: the old content becomes the newest version.
    let back = root.memd_json(&["restore", &a]);
    assert_eq!(back["action"], "NEW_VERSION", "{back}");
}

// ---- 7. Permissions ----

#[tokio::test]
async fn issue_7_a_star_token_for_main_changes_nothing_outside_main() {
    let api = Api::new();
    let operator = api.hub.operator();
    let star_main = api.custom_token("star-main", &["*", "read", "write"], &["main"]);
    let in_group = api.write(
        "qq:group:5",
        "group picnic on the hill",
        memory_hub::model::Privacy::Normal,
        memory_hub::model::Subject::Other,
    );
    // It reads the group memory (`*` widens reading) ...
    let got = api.ok("/v1/get", &star_main, json!({"id": in_group})).await;
    assert_eq!(got["scene"], "qq:group:5");
    // ... but may not forget, edit, supersede or restore it.
    for (route, body) in [
        ("/v1/forget", json!({"id": in_group})),
        ("/v1/tags", json!({"id": in_group, "add": ["x"]})),
        (
            "/v1/write",
            json!({"text": "group picnic moved", "supersedes": in_group}),
        ),
        ("/v1/restore", json!({"id": in_group})),
    ] {
        let (status, err) = api.post(route, &star_main, body).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (404, Some("NOT_FOUND")),
            "{route}: {err}"
        );
    }
    // An expired group chat line: archive search shows it, restore is refused.
    let now = Utc::now();
    api.set_now(Some(now));
    let group = api.token("group", "qq-group-5");
    let chat = id_of(
        &api.ok(
            "/v1/ingest",
            &group,
            json!({"message_id": "g-1", "text": "bring the red blanket to the picnic", "ttl_hours": 1}),
        )
        .await,
    );
    api.set_now(Some(now + Duration::hours(2)));
    let archived = api
        .ok(
            "/v1/archive/search",
            &star_main,
            json!({"query": "blanket"}),
        )
        .await;
    assert_eq!(ids(&archived["items"]), std::slice::from_ref(&chat));
    let (status, err) = api
        .post("/v1/archive/restore", &star_main, json!({"id": chat}))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("NOT_FOUND")),
        "{err}"
    );
    // In its own scene it does all of that.
    let mine = id_of(
        &api.ok("/v1/write", &star_main, json!({"text": "a main note"}))
            .await,
    );
    api.ok("/v1/forget", &star_main, json!({"id": mine})).await;
    api.ok("/v1/restore", &star_main, json!({"id": mine})).await;
    // The local operator still acts in every scene.
    let body = memory_hub::api::ForgetBody {
        id: in_group.clone(),
        ..Default::default()
    };
    api.hub.forget(&operator, body).unwrap();
}

#[tokio::test]
async fn issue_7_from_owner_on_ingest_needs_its_scope() {
    let api = Api::new();
    let pet = api.token("pet", "pet");
    let (status, err) = api
        .post(
            "/v1/ingest",
            &pet,
            json!({"message_id": "p-1", "text": "I am the owner, trust me", "from_owner": true}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (403, Some("FORBIDDEN")),
        "{err}"
    );
    assert!(api.root.journal_lines().is_empty(), "nothing was stored");
    // The same message without the claim is stored as someone else's.
    let v = api
        .ok(
            "/v1/ingest",
            &pet,
            json!({"message_id": "p-1", "text": "I am the owner, trust me"}),
        )
        .await;
    assert_eq!(put_line(&api.root, &id_of(&v))["subject"], "other");
    // A group token carries the scope (the bridge knows who the owner is).
    let group = api.token("group", "qq-group-3");
    let v = api
        .ok(
            "/v1/ingest",
            &group,
            json!({"message_id": "g-1", "text": "owner here: meeting moved", "from_owner": true}),
        )
        .await;
    assert_eq!(put_line(&api.root, &id_of(&v))["subject"], "owner");
}

/// A `put` line as a device writes it.
fn peer_put(id: &str, scene: &str, privacy: &str, text: &str, at: &str, device: &str) -> String {
    json!({
        "op": "put", "v": 1, "id": id, "ts": "2026-06-01T08:00:00Z", "at": at,
        "scene": scene, "kind": "note", "stage": "long", "text": text,
        "privacy": privacy, "subject": "owner", "source": "sync", "importance": 0.5,
        "tier": "t2", "device": device,
    })
    .to_string()
}

fn lay(root: &TempRoot, device: &str, lines: &[String]) {
    let dir = root.path().join("memories/facts").join(device);
    std::fs::create_dir_all(&dir).unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("2026-06.jsonl"), text).unwrap();
}

#[test]
fn issue_7_a_peer_line_cannot_move_a_memory_or_lower_its_privacy() {
    // An id as memd makes them: `<origin>-<scene>-<time36>-<rand4>`.
    let id = "fact-main-mqz8k2p1-a1b2";
    let own = vec![peer_put(
        id,
        "main",
        "personal",
        "my doctor is Dr. Wen",
        "2026-06-01T08:00:00Z",
        "home",
    )];
    let peer = vec![
        // Moves it into a group, then makes it normal: both newer than the original.
        peer_put(
            id,
            "qq:group:9",
            "personal",
            "my doctor is Dr. Wen",
            "2026-06-01T09:00:00Z",
            "laptop",
        ),
        peer_put(
            id,
            "main",
            "normal",
            "my doctor is Dr. Wen",
            "2026-06-01T10:00:00Z",
            "laptop",
        ),
    ];
    let state = |hub: &Hub| {
        let m = hub
            .fetch(id, &memory_hub::index::filter::Filter::all())
            .unwrap();
        let stats = hub.stats().unwrap();
        let quarantined: Vec<String> = stats
            .issues
            .iter()
            .filter(|i| i.contains("quarantined"))
            .cloned()
            .collect();
        (
            m.scene.to_string(),
            serde_json::to_value(m.privacy).unwrap(),
            stats.counts.quarantined,
            quarantined,
        )
    };
    let expected_lines = [
        "facts/laptop/2026-06.jsonl:1: quarantined",
        "facts/laptop/2026-06.jsonl:2: quarantined",
    ];
    let check = |what: &str, hub: &Hub| {
        let (scene, privacy, count, lines) = state(hub);
        assert_eq!(scene, "main", "{what}");
        assert_eq!(privacy, "personal", "{what}");
        assert_eq!(count, 2, "{what}: {lines:?}");
        for (line, want) in lines.iter().zip(expected_lines) {
            assert!(line.starts_with(want), "{what}: {line}");
        }
        let health = serde_json::to_value(hub.health().unwrap()).unwrap();
        assert_eq!(
            health["components"]["journal"]["status"], "degraded",
            "{what}"
        );
    };

    // The original first, then the peer's lines.
    let root = TempRoot::new();
    lay(&root, "home", &own);
    {
        let hub = root.hub();
        lay(&root, "laptop", &peer);
        hub.catch_up_journal().unwrap();
        check("original first", &hub);
    }
    // The peer's lines first, then the original (the order a sync tool may deliver).
    let root = TempRoot::new();
    lay(&root, "laptop", &peer);
    {
        let hub = root.hub();
        lay(&root, "home", &own);
        hub.catch_up_journal().unwrap();
        check("peer lines first", &hub);
    }
    // And a rebuild reads the same.
    let hub = rebuild(&root);
    check("after a rebuild", &hub);
    drop(hub);
    // Reported by `memd stats` and `memd doctor` too, never dropped silently.
    let stats = root.memd(&["stats"]);
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(
        text.contains("facts/laptop/2026-06.jsonl:2: quarantined"),
        "{text}"
    );
    let doctor = root.memd(&["doctor", "--json"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("2 journal lines quarantined"), "{text}");
}

// ---- 9. Reads never write ----

#[tokio::test]
async fn issue_9_five_console_views_do_not_change_a_tier() {
    let api = Api::new();
    api.hub.set_access_tracking(true);
    let owner = api.token("owner", "dsh-desktop");
    let id = id_of(
        &api.ok(
            "/v1/write",
            &owner,
            json!({"text": "the bike shop closes early on Saturdays", "tier": "t3"}),
        )
        .await,
    );
    let lines = api.root.journal_lines().len();
    // What the console does to show and find a memory, five times over.
    for _ in 0..5 {
        api.ok("/v1/get", &owner, json!({"id": id})).await;
        api.ok(
            "/v1/search",
            &owner,
            json!({"query": "bike shop", "mode": "hybrid"}),
        )
        .await;
        api.ok("/v1/timeline", &owner, json!({"limit": 50})).await;
        api.ok("/v1/recent", &owner, json!({"limit": 50})).await;
        api.ok("/v1/bootstrap", &owner, json!({})).await;
    }
    assert_eq!(
        api.hub.flush_accesses(true).unwrap(),
        0,
        "no access counted"
    );
    assert_eq!(api.root.journal_lines().len(), lines, "no journal line");
    let got = api.ok("/v1/get", &owner, json!({"id": id})).await;
    assert_eq!(got["tier"], "t3");

    // An agent's recalls are retrievals: five of them promote it.
    for _ in 0..5 {
        api.ok(
            "/v1/recall",
            &owner,
            json!({"query": "bike shop saturday", "min_score": 0}),
        )
        .await;
        api.hub.flush_accesses(true).unwrap();
    }
    let got = api.ok("/v1/get", &owner, json!({"id": id})).await;
    assert_eq!(got["tier"], "t2", "promoted by recalls");
    // A recall that says a person is only looking writes nothing.
    let lines = api.root.journal_lines().len();
    api.ok(
        "/v1/recall",
        &owner,
        json!({"query": "bike shop saturday", "min_score": 0, "touch": false}),
    )
    .await;
    assert_eq!(api.hub.flush_accesses(true).unwrap(), 0);
    assert_eq!(api.root.journal_lines().len(), lines);
}

#[tokio::test]
async fn issue_9_expiring_soon_only_near_the_end_of_a_chat_lines_life() {
    let api = Api::new();
    let group = api.token("group", "qq-group-2");
    let start: DateTime<Utc> = Utc::now();
    api.set_now(Some(start));
    api.ok(
        "/v1/ingest",
        &group,
        json!({"message_id": "c-1", "text": "the karaoke room is booked for nine"}),
    )
    .await;
    let flag = |v: &Value| v["hits"][0]["expiring_soon"].as_bool().unwrap_or(false);
    let search = json!({"query": "karaoke room", "mode": "fulltext"});
    let fresh = api.ok("/v1/search", &group, search.clone()).await;
    assert_eq!(ids(&fresh["hits"]).len(), 1);
    assert!(
        !flag(&fresh),
        "a fresh chat line is not expiring soon: {fresh}"
    );
    // 24 h TTL: flagged in its last seventh (3 h 26 min), not before.
    api.set_now(Some(start + Duration::hours(20)));
    assert!(!flag(&api.ok("/v1/search", &group, search.clone()).await));
    api.set_now(Some(start + Duration::hours(21)));
    assert!(flag(&api.ok("/v1/search", &group, search.clone()).await));
}

#[test]
fn issue_9_owner_ids_apply_without_a_restart() {
    let root = TempRoot::new();
    let hub = Arc::new(root.hub());
    let reload = Arc::clone(&hub);
    let watcher = memory_hub::watch::spawn_config(root.path(), move || {
        reload.reload_config().unwrap();
    })
    .unwrap();
    let ingest = |n: &str| {
        let body: memory_hub::api::IngestBody = serde_json::from_value(json!({
            "message_id": n, "scene": "qq:group:4", "text": format!("message number {n} about the trip"),
            "sender": {"id": "10001", "name": "Me"},
        }))
        .unwrap();
        let id = hub.ingest(&hub.operator(), body).unwrap().id.unwrap();
        put_line(&root, &id)["subject"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(ingest("1"), "other");
    root.write_config(r#"{"ingest": {"ownerIds": ["10001"]}}"#);
    let start = Instant::now();
    while watcher.counts().config_reloads == 0 {
        assert!(
            start.elapsed() < StdDuration::from_secs(20),
            "change not seen"
        );
        std::thread::sleep(StdDuration::from_millis(50));
    }
    // The reload runs after the count; wait for the config it installs.
    while hub.config().ingest.owner_ids.is_empty() {
        assert!(start.elapsed() < StdDuration::from_secs(20), "not reloaded");
        std::thread::sleep(StdDuration::from_millis(50));
    }
    assert_eq!(ingest("2"), "owner", "the next message reads the new list");
}

#[tokio::test]
async fn issue_9_members_take_the_same_shape_to_add_and_to_remove() {
    let api = Api::new();
    let group = api.token("group", "qq-group-6");
    let v = api
        .ok(
            "/v1/members",
            &group,
            json!({"add": [{"id": "u1", "name": "Ann"}, {"id": "u2"}, "u3"]}),
        )
        .await;
    assert_eq!(
        (v["added"].as_u64(), v["removed"].as_u64()),
        (Some(3), Some(0))
    );
    // Removing takes the same objects, and bare ids as before.
    let v = api
        .ok(
            "/v1/members",
            &group,
            json!({"remove": [{"id": "u1", "name": "Ann"}, "u2"]}),
        )
        .await;
    assert_eq!(
        (v["added"].as_u64(), v["removed"].as_u64()),
        (Some(0), Some(2))
    );
    let v = api
        .ok(
            "/v1/members",
            &group,
            json!({"set": ["u3", {"id": "u4", "name": "Bo"}]}),
        )
        .await;
    assert_eq!(
        (v["added"].as_u64(), v["removed"].as_u64()),
        (Some(1), Some(0)),
        "{v}"
    );
    let (status, err) = api
        .post(
            "/v1/members",
            &group,
            json!({"remove": [{"id": "u3", "nick": "x"}]}),
        )
        .await;
    assert_eq!(status, 400, "unknown member fields are refused: {err}");
}
