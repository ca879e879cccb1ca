//! The index behind the journal, said out loud: search and recall say how
//! many lines a caller could read are not applied yet (body and header),
//! `get` reads such a memory from the journal, and journal lines damaged
//! after they were indexed show in stats and health at once.

use serde_json::{Value, json};

use crate::http_support::Api;
use crate::support::TempRoot;

/// A journal line another device wrote, without a checksum (as older
/// builds and other tools write them).
fn foreign_put(id: &str, scene: &str, text: &str) -> String {
    json!({
        "op": "put", "v": 1, "id": id, "ts": "2026-11-30T08:00:00Z", "scene": scene,
        "kind": "note", "stage": "long", "text": text, "privacy": "normal",
        "subject": "owner", "source": "laptop", "importance": 0.5
    })
    .to_string()
}

/// Appends lines to another device's journal file under `root`.
fn append_foreign(root: &TempRoot, lines: &[String]) {
    use std::io::Write;
    let dir = root.path().join("memories/facts/laptop-0a1b2c");
    std::fs::create_dir_all(&dir).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("2026-11.jsonl"))
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

/// `POST path` through the router; status, the index-behind header, body.
async fn post(api: &Api, path: &str, token: &str, body: Value) -> (u16, Option<String>, Value) {
    let reply = api
        .send("POST", path, Some(token), body.to_string().into_bytes())
        .await;
    let behind = reply
        .headers
        .get("x-memd-index-behind")
        .map(|v| v.to_str().unwrap().to_string());
    (
        reply.status,
        behind,
        serde_json::from_slice(&reply.body).unwrap(),
    )
}

/// A full-text search for `query`; how many lines the index is behind for
/// this caller, after checking that the header and the body say the same
/// (both silent when it is caught up), and the body.
async fn search_behind(api: &Api, token: &str, query: &str) -> (Option<u64>, Value) {
    let (status, header, v) = post(
        api,
        "/v1/search",
        token,
        json!({ "query": query, "mode": "fulltext" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let behind = v.get("index_behind").map(|n| n.as_u64().unwrap());
    assert_eq!(header, behind.map(|n| n.to_string()), "{v}");
    (behind, v)
}

#[tokio::test]
async fn replies_say_when_the_index_is_behind_and_get_reads_the_journal() {
    let api = Api::new();
    let owner = api.token("owner", "dsh-desktop");
    let pet = api.token("pet", "pet");
    let group = api.token("group", "qq-group-42");
    let (status, _, v) = post(
        &api,
        "/v1/write",
        &owner,
        json!({ "text": "kayak club notes" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    // Caught up: nothing said.
    assert_eq!(search_behind(&api, &owner, "kayak").await.0, None);

    // Another device's lines arrive and nothing has applied them yet: two
    // in a scene the pet reads, one in a group only the group token (and
    // the owner, who reads every scene) reads.
    append_foreign(
        &api.root,
        &[
            foreign_put("fact-main-laptop-0001", "main", "kayak trip to the fjord"),
            foreign_put("fact-main-laptop-0002", "main", "kayak paddles need wax"),
            foreign_put(
                "fact-qq-group-42-laptop-0003",
                "qq:group:42",
                "group kayak outing",
            ),
        ],
    );
    assert_eq!(search_behind(&api, &owner, "fjord").await.0, Some(3));
    let (behind, v) = search_behind(&api, &pet, "fjord").await;
    assert!(v["hits"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(
        behind,
        Some(2),
        "an empty answer says the index is behind: {v}"
    );
    let (status, behind, v) =
        post(&api, "/v1/recall", &pet, json!({ "query": "fjord trip" })).await;
    assert_eq!((status, &v["index_behind"]), (200, &json!(2)), "{v}");
    assert_eq!(behind.as_deref(), Some("2"));
    // `get` of a line not applied reads it from the journal.
    let (status, behind, v) = post(
        &api,
        "/v1/get",
        &pet,
        json!({ "id": "fact-main-laptop-0001" }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["text"], "kayak trip to the fjord");
    assert_eq!(behind.as_deref(), Some("2"));
    // A route whose use case does not look at the lag says it too.
    let (status, behind, v) = post(&api, "/v1/recent", &pet, json!({})).await;
    assert_eq!((status, behind.as_deref()), (200, Some("2")), "{v}");
    // The group token counts only what it may read, and cannot get the
    // owner's memory from the journal either.
    assert_eq!(search_behind(&api, &group, "outing").await.0, Some(1));
    let (status, _, _) = post(
        &api,
        "/v1/get",
        &group,
        json!({ "id": "fact-main-laptop-0001" }),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _, v) = post(
        &api,
        "/v1/get",
        &group,
        json!({ "id": "fact-qq-group-42-laptop-0003" }),
    )
    .await;
    assert_eq!((status, &v["text"]), (200, &json!("group kayak outing")));

    // A write's reply counts what its writer may read after the write,
    // as the next reply does.
    let (status, after_write, v) = post(&api, "/v1/write", &pet, json!({ "text": "bone" })).await;
    assert_eq!(status, 200, "{v}");
    let (_, next, _) = post(&api, "/v1/recent", &pet, json!({})).await;
    assert_eq!(after_write, next);

    // Caught up: found, and nothing said.
    api.hub.catch_up_journal().unwrap();
    let (behind, v) = search_behind(&api, &owner, "fjord").await;
    assert_eq!(
        crate::http_support::ids(&v["hits"]),
        ["fact-main-laptop-0001"]
    );
    assert_eq!(behind, None, "{v}");
    // Recall and other routes are silent again too.
    let (status, behind, v) =
        post(&api, "/v1/recall", &pet, json!({ "query": "fjord trip" })).await;
    assert_eq!(
        (status, behind, v.get("index_behind")),
        (200, None, None),
        "{v}"
    );
    let (status, behind, _) = post(&api, "/v1/recent", &pet, json!({})).await;
    assert_eq!((status, behind), (200, None));
}

#[test]
fn journal_lines_damaged_after_indexing_show_in_stats_and_health_at_once() {
    let root = TempRoot::new();
    let hub = root.hub();
    let ids: Vec<String> = (0..5)
        .map(|i| crate::support::write(&hub, "main", &format!("memory number {i} about gardens")))
        .collect();
    assert!(hub.stats().unwrap().issues.is_empty());
    let file = root.journal_files().remove(0);
    let original = std::fs::read_to_string(&file).unwrap();
    // Three indexed lines change in place, the file keeping its size: two
    // bit flips inside a string (only the checksum tells), one broken line.
    let mut lines: Vec<String> = original.lines().map(String::from).collect();
    lines[1] = lines[1].replace("number 1", "numbes 1");
    lines[2] = lines[2].replace("number 2", "numbex 2");
    lines[3] = lines[3].replacen('{', "#", 1);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().len(),
        original.len()
    );

    let stats = hub.stats().unwrap();
    let rel = file
        .strip_prefix(root.path().join("memories"))
        .unwrap()
        .display()
        .to_string();
    assert_eq!(stats.issues.len(), 3, "{:?}", stats.issues);
    for (issue, line) in stats.issues.iter().zip([2, 3, 4]) {
        assert!(issue.starts_with(&format!("{rel}:{line}: ")), "{issue}");
        assert!(issue.contains("damaged after it was indexed"), "{issue}");
    }
    assert!(
        stats.issues[0].contains("checksum mismatch"),
        "{}",
        stats.issues[0]
    );
    let health = serde_json::to_value(hub.health().unwrap()).unwrap();
    let journal = &health["components"]["journal"];
    assert_eq!(journal["status"], "degraded", "{health}");
    assert!(
        journal["detail"]
            .as_str()
            .unwrap()
            .contains("3 unreadable lines"),
        "{journal}"
    );
    // Their memories are still served from the index meanwhile.
    for id in &ids {
        hub.fetch(id, &memory_hub::index::filter::Filter::all())
            .unwrap();
    }
    // Repaired: the report goes away.
    std::fs::write(&file, &original).unwrap();
    assert!(hub.stats().unwrap().issues.is_empty());
    // A reindex says what it skips rather than dropping it silently.
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    drop(hub);
    let (hub, report) = memory_hub::hub::Hub::reindex_with(
        root.layout(),
        memory_hub::config::Config::default(),
        memory_hub::embed::EmbedderSlot::none("not needed"),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(report.bad_lines, 3);
    assert_eq!(hub.stats().unwrap().issues.len(), 3);
}

#[test]
fn lines_without_a_checksum_stay_valid_and_new_lines_carry_one() {
    let root = TempRoot::new();
    let hub = root.hub();
    crate::support::write(&hub, "main", "a sealed line");
    append_foreign(
        &root,
        &[foreign_put(
            "fact-main-laptop-0009",
            "main",
            "an unsealed line",
        )],
    );
    let report = hub.catch_up_journal().unwrap();
    assert_eq!((report.records, report.bad_lines), (1, 0));
    assert_eq!(
        crate::support::search_ids(&hub, "unsealed", 5),
        ["fact-main-laptop-0009"]
    );
    let own = root
        .journal_lines()
        .into_iter()
        .find(|l| l.contains("a sealed line"))
        .unwrap();
    let v: Value = serde_json::from_str(&own).unwrap();
    let crc = v["crc"].as_str().unwrap();
    assert!(
        crc.len() == 8 && crc.bytes().all(|b| b.is_ascii_hexdigit()),
        "{own}"
    );
    assert!(own.ends_with(&format!(",\"crc\":\"{crc}\"}}")), "{own}");
}

#[tokio::test]
async fn a_damaged_membership_table_shows_in_health() {
    let api = Api::new();
    let admin = api.token("owner", "dsh-desktop");
    let (_, health) = api.get("/v1/health", Some(&admin)).await;
    assert_eq!(health["components"]["members"]["status"], "ok", "{health}");
    let path = api.root.path().join("memories/groups/members.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{not json").unwrap();
    let (_, health) = api.get("/v1/health", Some(&admin)).await;
    let members = &health["components"]["members"];
    assert_eq!(members["status"], "degraded", "{health}");
    assert!(
        members["detail"]
            .as_str()
            .unwrap()
            .contains("disclosure refuses"),
        "{members}"
    );
}
