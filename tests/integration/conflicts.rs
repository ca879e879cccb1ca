//! Conflict links end to end over HTTP: a write that likely contradicts a
//! live memory of its scene and subject is linked (a journal line), search,
//! get and recall show the pair newer first, a token that cannot read one
//! side sees no trace of it, dismiss and undo are journal lines, a forget
//! ends the link's effect and a rebuilt index gives the same links.

use chrono::{Duration, Utc};
use serde_json::{Value, json};

use crate::http_support::Api;

async fn write(api: &Api, token: &str, body: Value) -> String {
    let out = api.ok("/v1/write", token, body).await;
    out["id"].as_str().unwrap().to_string()
}

/// Each hit's id and the ids of its `conflicts_with`, in rank order.
async fn hits(api: &Api, token: &str, query: &str) -> Vec<(String, Vec<(String, bool)>)> {
    let out = api
        .ok(
            "/v1/search",
            token,
            json!({"query": query, "limit": 10, "mode": "fulltext"}),
        )
        .await;
    out["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let links = h["conflicts_with"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|c| (c["id"].as_str().unwrap().to_string(), c["newer"] == true))
                        .collect()
                })
                .unwrap_or_default();
            (h["id"].as_str().unwrap().to_string(), links)
        })
        .collect()
}

#[tokio::test]
async fn a_contradicting_write_is_linked_and_shown_newer_first() {
    let api = Api::new();
    let owner = api.custom_token("owner", &["*", "read", "write"], &["main"]);
    let t0 = Utc::now() - Duration::days(30);
    api.set_now(Some(t0));
    let older = write(&api, &owner, json!({"text": "我喜欢喝茶"})).await;
    write(&api, &owner, json!({"text": "我喜欢喝咖啡"})).await;
    api.set_now(Some(t0 + Duration::days(3)));
    let newer = write(&api, &owner, json!({"text": "我不喜欢喝茶了"})).await;
    let lines = std::fs::read_to_string(api.root.journal_files().last().unwrap()).unwrap();
    assert!(
        lines.contains(r#""op":"link""#) && lines.contains("conflicts_with"),
        "{lines}"
    );

    let found = hits(&api, &owner, "喝茶").await;
    let at = |id: &str| found.iter().position(|(h, _)| h == id).unwrap();
    assert_eq!(
        at(&newer) + 1,
        at(&older),
        "newer directly before older: {found:?}"
    );
    assert_eq!(found[at(&newer)].1, vec![(older.clone(), false)]);
    assert_eq!(found[at(&older)].1, vec![(newer.clone(), true)]);

    let got = api.ok("/v1/get", &owner, json!({"id": older})).await;
    assert_eq!(got["conflicts_with"][0]["id"], newer.as_str());
    assert_eq!(got["conflicts_with"][0]["reason"], "negation");

    let recall = api
        .ok(
            "/v1/recall",
            &owner,
            json!({"query": "喝茶", "format": "block", "min_score": 0}),
        )
        .await;
    let block = recall["block"].as_str().unwrap();
    let (n, o) = (
        block.find("（较新）").unwrap(),
        block.find("（较早）").unwrap(),
    );
    assert!(n < o, "{block}");
}

#[tokio::test]
async fn a_link_to_a_memory_the_token_cannot_read_is_invisible() {
    let api = Api::new();
    let owner = api.custom_token(
        "owner",
        &["*", "read", "write", "sensitive:read"],
        &["main"],
    );
    let reader = api.custom_token("reader", &["read", "write"], &["main"]);
    let plain = write(&api, &owner, json!({"text": "I like green tea"})).await;
    let hidden = write(
        &api,
        &owner,
        json!({"text": "I don't like green tea anymore", "privacy": "sensitive"}),
    )
    .await;
    let seen = hits(&api, &owner, "green tea").await;
    assert!(
        seen.iter()
            .any(|(id, l)| *id == plain && l == &vec![(hidden.clone(), true)])
    );
    let limited = hits(&api, &reader, "green tea").await;
    assert_eq!(limited, vec![(plain.clone(), vec![])]);
    let got = api.ok("/v1/get", &reader, json!({"id": plain})).await;
    assert!(got.get("conflicts_with").is_none(), "{got}");
    let (status, _) = api
        .post(
            "/v1/conflicts/dismiss",
            &reader,
            json!({"id": plain, "other": hidden}),
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn dismiss_undo_and_forget() {
    let api = Api::new();
    let owner = api.custom_token("owner", &["*", "read", "write"], &["main"]);
    let a = write(&api, &owner, json!({"text": "My birthday is on March 5"})).await;
    let b = write(&api, &owner, json!({"text": "My birthday is on May 3"})).await;
    let linked = |found: &[(String, Vec<(String, bool)>)]| found.iter().any(|(_, l)| !l.is_empty());
    assert!(linked(&hits(&api, &owner, "birthday").await));

    let body = json!({"id": a, "other": b});
    let out = api.ok("/v1/conflicts/dismiss", &owner, body.clone()).await;
    assert_eq!(out["linked"], false);
    assert!(!linked(&hits(&api, &owner, "birthday").await));
    let undo = json!({"id": b, "other": a, "undo": true});
    assert_eq!(
        api.ok("/v1/conflicts/dismiss", &owner, undo).await["linked"],
        true
    );
    assert!(linked(&hits(&api, &owner, "birthday").await));

    api.ok("/v1/forget", &owner, json!({"id": b})).await;
    assert!(!linked(&hits(&api, &owner, "birthday").await));
}

#[test]
fn a_rebuilt_index_has_the_same_links() {
    use memory_hub::api::{GetBody, WriteBody};
    let root = crate::support::TempRoot::new();
    let hub = root.hub();
    let op = hub.operator();
    let text = |t: &str| WriteBody {
        text: t.into(),
        ..Default::default()
    };
    let a = hub.write(&op, text("I have two kids")).unwrap().id;
    let b = hub.write(&op, text("I have three kids")).unwrap().id;
    // A search shows the link on the hub that applied it, and on one
    // opened later over the same index.
    let linked_hits = |hub: &memory_hub::hub::Hub| {
        let body = memory_hub::api::SearchBody {
            query: "kids".into(),
            mode: Some(memory_hub::search::SearchMode::Fulltext),
            ..Default::default()
        };
        let hits = hub.search(&hub.operator(), body).unwrap().body.hits;
        hits.iter().filter(|h| !h.conflicts_with.is_empty()).count()
    };
    assert_eq!(linked_hits(&hub), 2);
    drop(hub);
    assert_eq!(linked_hits(&root.hub()), 2);
    let (hub, _) = root.reindex(memory_hub::config::Config::default());
    assert_eq!(linked_hits(&hub), 2);
    let get = GetBody {
        id: a,
        ..Default::default()
    };
    let got = hub.get(&hub.operator(), get).unwrap();
    assert_eq!(got.conflicts_with.len(), 1);
    assert_eq!(
        (
            got.conflicts_with[0].id.as_str(),
            got.conflicts_with[0].newer
        ),
        (b.as_str(), true)
    );
    assert_eq!(got.conflicts_with[0].reason.as_deref(), Some("number"));
}

#[test]
fn consolidation_links_the_days_contradictions_and_proposes_a_supersede() {
    use memory_hub::api::{AcceptConflictBody, GetBody, SearchBody};
    use memory_hub::consolidate::{self, RunOptions, SleepConfig, Window};
    use memory_hub::hub::WriteRequest;
    let root = crate::support::TempRoot::new();
    let hub = root.hub();
    // Written by a driver (no write-time detection), as an import would.
    let append = |t: &str| {
        let req = WriteRequest::new(crate::support::scene("main"), t, "import");
        hub.append(req).unwrap().id
    };
    let older = append("我的鞋码是42");
    let newer = append("我的鞋码是43");
    append("我的衣服尺码是L");
    let now = hub.now();
    let opts = |dry_run| RunOptions {
        window: Window {
            from: now - Duration::hours(1),
            to: now + Duration::minutes(1),
        },
        dry_run,
        now,
    };
    let dry = consolidate::run(&hub, &SleepConfig::default(), &opts(true)).unwrap();
    assert_eq!(dry.conflicts.len(), 1);
    assert!(
        root.journal_lines()
            .iter()
            .all(|l| !l.contains(r#""op":"link""#))
    );
    let report = consolidate::run(&hub, &SleepConfig::default(), &opts(false)).unwrap();
    assert_eq!(report.conflicts.len(), 1, "{:?}", report.conflicts);
    let p = &report.conflicts[0];
    assert_eq!(
        (p.older.as_str(), p.newer.as_str(), p.reason.as_str()),
        (older.as_str(), newer.as_str(), "number")
    );
    assert_eq!(p.accept, json!({"older": older, "newer": newer}));
    assert_eq!(
        root.journal_lines()
            .iter()
            .filter(|l| l.contains(r#""op":"link""#))
            .count(),
        1
    );
    let again = consolidate::run(&hub, &SleepConfig::default(), &opts(false)).unwrap();
    assert_eq!(again.conflicts.len(), 1, "still proposed until settled");
    assert_eq!(
        root.journal_lines()
            .iter()
            .filter(|l| l.contains(r#""op":"link""#))
            .count(),
        1
    );

    let op = hub.operator();
    let body = AcceptConflictBody {
        older: older.clone(),
        newer: newer.clone(),
    };
    hub.accept_conflict(&op, body).unwrap();
    let lines = root.journal_lines().len();
    let body = AcceptConflictBody {
        older: older.clone(),
        newer: newer.clone(),
    };
    let retry = hub
        .accept_conflict(&op, body)
        .expect("a retried accept succeeds");
    assert_eq!(
        (retry.superseded.as_str(), retry.by.as_str()),
        (older.as_str(), newer.as_str())
    );
    assert_eq!(root.journal_lines().len(), lines, "a retry writes nothing");
    let get = |id: &str| {
        let body = GetBody {
            id: id.into(),
            ..Default::default()
        };
        hub.get(&op, body).unwrap()
    };
    assert!(get(&older).superseded);
    assert_eq!(
        get(&newer).memory.supersedes.as_deref(),
        Some(older.as_str())
    );
    assert!(
        get(&newer).conflicts_with.is_empty(),
        "a supersede ends the link"
    );
    let search = SearchBody {
        query: "鞋码".into(),
        ..Default::default()
    };
    let ids: Vec<String> = hub
        .search(&op, search)
        .unwrap()
        .body
        .hits
        .into_iter()
        .map(|h| h.memory.id)
        .collect();
    assert_eq!(ids, vec![newer.clone()]);
    let settled = consolidate::run(&hub, &SleepConfig::default(), &opts(false)).unwrap();
    assert!(settled.conflicts.is_empty());
}

#[tokio::test]
async fn dismiss_and_undo_within_one_millisecond_and_a_link_after_an_as_of_instant() {
    let api = Api::new();
    let owner = api.custom_token("owner", &["*", "read", "write"], &["main"]);
    let t0 = Utc::now() - Duration::days(5);
    api.set_now(Some(t0));
    let a = write(&api, &owner, json!({"text": "My dentist is on Friday"})).await;
    api.set_now(Some(t0 + Duration::days(2)));
    let b = write(&api, &owner, json!({"text": "My dentist is on Monday"})).await;
    let linked = |found: &[(String, Vec<(String, bool)>)]| found.iter().any(|(_, l)| !l.is_empty());
    assert!(linked(&hits(&api, &owner, "dentist").await));
    // Before the newer was written (and linked), the older shows no link.
    let at = (t0 + Duration::days(1)).to_rfc3339();
    let past = api
        .ok(
            "/v1/search",
            &owner,
            json!({"query": "dentist", "mode": "fulltext", "as_of": at}),
        )
        .await;
    assert_eq!(past["hits"].as_array().unwrap().len(), 1, "{past}");
    assert!(past["hits"][0].get("conflicts_with").is_none(), "{past}");

    // The clock does not move: each answer still holds.
    api.set_now(Some(t0 + Duration::days(3)));
    let dismiss = json!({"id": a, "other": b});
    let undo = json!({"id": a, "other": b, "undo": true});
    assert_eq!(
        api.ok("/v1/conflicts/dismiss", &owner, dismiss.clone())
            .await["linked"],
        false
    );
    assert!(!linked(&hits(&api, &owner, "dentist").await));
    assert_eq!(
        api.ok("/v1/conflicts/dismiss", &owner, undo.clone()).await["linked"],
        true
    );
    assert!(
        linked(&hits(&api, &owner, "dentist").await),
        "undo was lost"
    );
    assert_eq!(
        api.ok("/v1/conflicts/dismiss", &owner, dismiss).await["linked"],
        false
    );
    assert!(!linked(&hits(&api, &owner, "dentist").await));
    // Idempotent: the same undo twice is one link.
    api.ok("/v1/conflicts/dismiss", &owner, undo.clone()).await;
    api.ok("/v1/conflicts/dismiss", &owner, undo).await;
    assert!(linked(&hits(&api, &owner, "dentist").await));
}

#[tokio::test]
async fn a_hidden_side_answers_as_a_missing_one_now_and_as_of() {
    let api = Api::new();
    let owner = api.custom_token(
        "owner",
        &["*", "read", "write", "sensitive:read"],
        &["main"],
    );
    let reader = api.custom_token("reader", &["read", "write"], &["main"]);
    let t0 = Utc::now() - Duration::days(2);
    api.set_now(Some(t0));
    let plain = write(&api, &owner, json!({"text": "I like green tea"})).await;
    let hidden = write(
        &api,
        &owner,
        json!({"text": "I don't like green tea anymore", "privacy": "sensitive"}),
    )
    .await;
    api.set_now(None);
    let missing = "fact-main-zzzzzzzz-zzzz";
    for route in ["/v1/conflicts/dismiss", "/v1/conflicts/accept"] {
        let body = |other: &str| match route {
            "/v1/conflicts/dismiss" => json!({"id": plain, "other": other}),
            _ => json!({"older": plain, "newer": other}),
        };
        let (s1, v1) = api.post(route, &reader, body(&hidden)).await;
        let (s2, v2) = api.post(route, &reader, body(missing)).await;
        let v1 = v1.to_string().replace(&hidden, "X");
        let v2 = v2.to_string().replace(missing, "X");
        assert_eq!((s1, v1), (s2, v2), "{route}");
    }
    let at = (t0 + Duration::hours(1)).to_rfc3339();
    let q = json!({"query": "green tea", "mode": "fulltext", "as_of": at});
    let seen = api.ok("/v1/search", &reader, q).await;
    assert_eq!(seen["hits"].as_array().unwrap().len(), 1, "{seen}");
    assert!(seen["hits"][0].get("conflicts_with").is_none(), "{seen}");
    let got = api
        .ok("/v1/get", &reader, json!({"id": plain, "as_of": at}))
        .await;
    assert!(got.get("conflicts_with").is_none(), "{got}");
    let (s1, v1) = api
        .post("/v1/get", &reader, json!({"id": hidden, "as_of": at}))
        .await;
    let (s2, v2) = api
        .post("/v1/get", &reader, json!({"id": missing, "as_of": at}))
        .await;
    let v1 = v1.to_string().replace(&hidden, "X");
    let v2 = v2.to_string().replace(missing, "X");
    assert_eq!((s1, v1), (s2, v2));
}
