//! The operator's CLI and routes (issue: what the two designs promise):
//! `memd list`, `tier`, `gc`, `audit`, `category`, `stats --expiring`,
//! `archive list`, `health --history` against a root with memories in
//! several tiers, scenes and journal months; `memory://list` paged through
//! the Python MCP SDK; the bootstrap interview prompt and its stored
//! profile; the warning window per tier; the scoping of every new route.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use memory_hub::api::{ListBody, TierBody, WriteBody};
use memory_hub::config::Config;
use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::model::{Stage, Tier};
use serde_json::{Value, json};

use crate::http_support::Api;
use crate::support::{DaemonGuard, Served, TempRoot, TestClock, scene, serve_command};

/// A config with tier expiry on and journal months archived after one month.
fn expiring_config() -> Value {
    json!({"lifecycle": {"tierExpiry": true, "archiveAfterMonths": 1}})
}

fn config_of(v: &Value) -> Config {
    serde_json::from_value(v.clone()).expect("a valid config")
}

/// Writes `text` as the operator with `tier` into `scene` at the hub's now.
fn write_tier(hub: &Hub, scene_name: &str, text: &str, tier: Tier) -> String {
    let body = WriteBody {
        text: text.into(),
        scene: Some(scene_name.into()),
        tier: Some(tier),
        ..WriteBody::default()
    };
    hub.write(&hub.operator(), body).expect("write").id
}

/// A root at `now` holding: an old T3 and an old T2 memory (expired, in a
/// journal month four months back), a T1 memory of that month (alive), a T3
/// memory with 2 days left and a T2 one with 5 days left (inside their
/// warning windows: 4.3 and 7 days), today's T0, T2 and T3 memories in
/// `main` and `qq:owner`, and a fresh 24-hour chat line. Returns the ids by
/// name.
fn seeded_root(now: DateTime<Utc>) -> (TempRoot, std::collections::BTreeMap<&'static str, String>) {
    let root = TempRoot::new();
    let cfg = expiring_config();
    root.write_config(&cfg);
    let hub = root.hub_configured(config_of(&cfg));
    let clock = TestClock::at(&(now - Duration::days(120)).to_rfc3339());
    clock.install(&hub);
    let mut ids = std::collections::BTreeMap::new();
    ids.insert(
        "old_t3",
        write_tier(&hub, "main", "old transient note about kites", Tier::T3),
    );
    ids.insert(
        "old_t2",
        write_tier(&hub, "main", "old note about the garden shed", Tier::T2),
    );
    ids.insert(
        "old_t1",
        write_tier(
            &hub,
            "main",
            "the owner's long-lived habit of tea",
            Tier::T1,
        ),
    );
    clock.advance(Duration::days(120 - 28));
    ids.insert(
        "soon_t3",
        write_tier(&hub, "main", "parking permit renewal note", Tier::T3),
    );
    clock.advance(Duration::days(28 - 85));
    ids.insert(
        "soon_t2",
        write_tier(&hub, "main", "dentist follow-up plan", Tier::T2),
    );
    clock.advance(Duration::days(85));
    assert_eq!(clock.now(), now);
    ids.insert(
        "t0",
        write_tier(&hub, "main", "The owner's name is Dana", Tier::T0),
    );
    ids.insert(
        "t2_qq",
        write_tier(
            &hub,
            "qq:owner",
            "qq note: prefers tea over coffee",
            Tier::T2,
        ),
    );
    ids.insert(
        "t3_qq",
        write_tier(&hub, "qq:owner", "qq note: bought a new lamp", Tier::T3),
    );
    let mut chat = WriteRequest::new(scene("main"), "chat: see you at lunch", "test");
    chat.stage = Stage::Short;
    chat.expires_at = Some(now + Duration::hours(24));
    ids.insert("chat", hub.append(chat).unwrap().id);
    drop(hub);
    (root, ids)
}

fn ids_of(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The operator's commands without a daemon, on real time (the seeded
/// expiries are relative to now).
#[test]
fn cli_operator_commands_over_tiers_scenes_and_archive_months() {
    let now = Utc::now();
    let (root, ids) = seeded_root(now);
    // list: newest first, paged by the cursor, every live fact once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["list", "--limit", "2"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = root.memd_json(&args);
        seen.extend(ids_of(&page));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let live: HashSet<&str> = [
        "old_t1", "soon_t3", "soon_t2", "t0", "t2_qq", "t3_qq", "chat",
    ]
    .iter()
    .map(|k| ids[k].as_str())
    .collect();
    assert_eq!(seen.len(), live.len(), "{seen:?}");
    assert_eq!(
        seen.iter().map(String::as_str).collect::<HashSet<_>>(),
        live
    );
    assert_eq!(seen.last().unwrap(), &ids["old_t1"], "oldest last");
    let qq = root.memd_json(&["list", "--scene", "qq:owner"]);
    let mut got = ids_of(&qq);
    got.sort();
    let mut want = vec![ids["t2_qq"].clone(), ids["t3_qq"].clone()];
    want.sort();
    assert_eq!(got, want);
    let plain = stdout(&root.memd_ok(&["list", "--limit", "1"]));
    assert!(plain.contains("more: --cursor"), "{plain}");

    // tier show / set / list.
    let shown = root.memd_json(&["tier", "show", &ids["soon_t3"]]);
    assert_eq!(shown["tier"], "t3");
    assert_eq!(shown["promotes_to"], "t2");
    assert_eq!(shown["accesses_to_promotion"], 5);
    assert_eq!(shown["lifetime_days"], 30);
    assert_eq!(shown["expiring_soon"], true);
    let set = root.memd_json(&["tier", "set", &ids["t2_qq"], "t1"]);
    assert_eq!(
        (set["tier"].as_str(), set["changed"].as_bool()),
        (Some("t1"), Some(true))
    );
    assert_eq!(
        root.memd_json(&["tier", "show", &ids["t2_qq"]])["tier"],
        "t1"
    );
    let t1 = ids_of(&root.memd_json(&["tier", "list", "t1"]));
    assert_eq!(t1.len(), 2, "{t1:?}");
    assert!(t1.contains(&ids["t2_qq"]) && t1.contains(&ids["old_t1"]));
    let chat_tier = root.memd(&["tier", "show", &ids["chat"], "--json"]);
    assert!(!chat_tier.status.success());
    assert!(
        stdout(&chat_tier).contains("INVALID_INPUT"),
        "{}",
        stdout(&chat_tier)
    );
    assert!(stdout(&root.memd_ok(&["tier", "show", &ids["t0"]])).contains("does not expire"));

    // stats --expiring: the two inside their tier's window, not the chat line.
    let expiring = root.memd_json(&["stats", "--expiring"]);
    let mut got = ids_of(&expiring);
    got.sort();
    let mut want = vec![ids["soon_t3"].clone(), ids["soon_t2"].clone()];
    want.sort();
    assert_eq!(got, want, "{expiring}");
    let within = ids_of(&root.memd_json(&["stats", "--expiring", "--days", "3"]));
    assert!(within.contains(&ids["soon_t3"]) && within.contains(&ids["chat"]));
    assert!(!within.contains(&ids["soon_t2"]));

    // gc: a dry run names the old month and changes nothing; then it runs.
    let month = format!("{}.jsonl", (now - Duration::days(120)).format("%Y-%m"));
    let dry = root.memd_json(&["gc", "--dry-run"]);
    assert!(
        dry["months"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().ends_with(&month)),
        "{dry}"
    );
    assert_eq!(dry["archived_months"], json!([]));
    let classes: Vec<(String, u64)> = dry["expired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["class"].as_str().unwrap().into(),
                c["expired"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(classes, [("t2".to_string(), 1), ("t3".to_string(), 1)]);
    let t3_only = root.memd_json(&["gc", "--dry-run", "--tier", "t3"]);
    assert_eq!(t3_only["expired"].as_array().unwrap().len(), 1);
    assert_eq!(t3_only["months"], json!([]));
    let done = root.memd_json(&["gc"]);
    assert_eq!(done["months"], dry["months"]);
    let months = root.memd_json(&["archive", "list", "--months"]);
    assert_eq!(months["archived_months"], dry["months"], "{months}");

    // archive list: the expired memories, restorable; the month reads as before.
    let mut archived = ids_of(&root.memd_json(&["archive", "list"]));
    archived.sort();
    let mut want = vec![ids["old_t2"].clone(), ids["old_t3"].clone()];
    want.sort();
    assert_eq!(archived, want);
    let old = root.memd_json(&["get", &ids["old_t1"]]);
    assert_eq!(old["text"], "the owner's long-lived habit of tea");

    // category set / list / get.
    root.memd_json(&[
        "category",
        "set",
        "house-rules",
        "Answer in short sentences.",
    ]);
    let listed = root.memd_json(&["category", "list"]);
    assert_eq!(listed["categories"][0]["name"], "house-rules");
    let one = root.memd_json(&["category", "get", "house-rules"]);
    assert_eq!(
        one["content"].as_str().unwrap().trim(),
        "Answer in short sentences."
    );

    // get shows superseded_by.
    let newer = root.memd_json(&[
        "write",
        "--text",
        "The owner's name is Dana Li",
        "--supersedes",
        &ids["t0"],
    ]);
    let got = stdout(&root.memd_ok(&["get", &ids["t0"]]));
    assert!(
        got.contains(&format!("superseded_by: {}", newer["id"].as_str().unwrap())),
        "{got}"
    );
}

/// `memd audit`, `tier`, `list` and `gc` through a running daemon (the CLI
/// does not become a second writer), and the audit lines they read.
#[test]
fn cli_operator_commands_go_through_the_daemon() {
    let root = TempRoot::new();
    let token = root.token("agent-a", "dsh-desktop");
    let _guard = DaemonGuard(root.path().to_path_buf());
    let served = Served::start(&mut serve_command(root.path()));
    let (status, w) = crate::wire::call(
        &served.addr,
        "POST",
        "/v1/write",
        Some(&token),
        &json!({"text": "daemon note about sailing", "tier": "t3"}),
    );
    assert_eq!(status, 200, "{w}");
    let id = w["id"].as_str().unwrap();
    crate::wire::call(
        &served.addr,
        "POST",
        "/v1/search",
        Some(&token),
        &json!({"query": "sailing"}),
    );
    let listed = root.memd_json(&["list"]);
    assert_eq!(ids_of(&listed), [id.to_string()]);
    let set = root.memd_json(&["tier", "set", id, "t2"]);
    assert_eq!(set["changed"], true);
    let gc = root.memd_json(&["gc", "--dry-run"]);
    assert_eq!(gc["dry_run"], true);
    let audit = root.memd_json(&["audit", "--token", "agent-a", "--action", "write"]);
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["route"], "POST /v1/write");
    assert_eq!(entries[0]["hits"], json!([id]));
    let mine = root.memd_json(&["audit", "--token", "cli", "--action", "tier"]);
    assert_eq!(mine["entries"].as_array().unwrap().len(), 1, "{mine}");
    let all = root.memd_json(&["audit", "--limit", "1000"]);
    assert!(all["entries"].as_array().unwrap().len() >= 6, "{all}");
    // The daemon's scheduler samples its health at once, then once a minute.
    let started = std::time::Instant::now();
    let history = loop {
        let h = root.memd_json(&["health", "--history"]);
        if !h["samples"].as_array().unwrap().is_empty()
            || started.elapsed() > std::time::Duration::from_secs(30)
        {
            break h;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let first = &history["samples"][0];
    assert_eq!(history["interval_seconds"], 60, "{history}");
    assert!(first["disk_free_bytes"].as_u64().unwrap() > 0, "{history}");
    served.stop();
}

/// Every new route is scoped like the routes it mirrors: a token sees only
/// its scenes and privacy, in lists, counts and errors.
#[tokio::test]
async fn operator_routes_keep_to_the_token() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    let group = api.custom_token("group", &["read", "write"], &["qq:group:1"]);
    let w = |scene: &str, text: &str| {
        let mut r = WriteRequest::new(scene_of(scene), text, "test");
        r.tier = Some(Tier::T2);
        api.hub.append(r).unwrap().id
    };
    fn scene_of(s: &str) -> memory_hub::model::Scene {
        scene(s)
    }
    let main = w("main", "main note about the boat");
    let secret_group = w("qq:group:1", "group note about the picnic");
    // list: the group token sees its scene only; the archive needs '*'.
    let v = api.ok("/v1/list", &group, json!({})).await;
    assert_eq!(ids_of(&v), std::slice::from_ref(&secret_group));
    let (s, v) = api
        .post("/v1/list", &group, json!({"scenes": ["main"]}))
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (403, Some("FORBIDDEN")));
    let (s, _) = api.post("/v1/list", &pet, json!({"archived": true})).await;
    assert_eq!(s, 403);
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 101}),
        json!({"cursor": "x"}),
        json!({"expiring_within_days": 0}),
    ] {
        let (s, v) = api.post("/v1/list", &root, bad.clone()).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some("INVALID_INPUT")),
            "{bad}"
        );
    }
    // tier: another scene's memory is NOT_FOUND whether or not it exists.
    let (s, _) = api.post("/v1/tier", &group, json!({"id": main})).await;
    assert_eq!(s, 404);
    let (s, _) = api
        .post("/v1/tier", &group, json!({"id": "fact-main-1-nothing"}))
        .await;
    assert_eq!(s, 404);
    let (s, v) = api
        .post("/v1/tier", &group, json!({"id": secret_group, "set": "t0"}))
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("FORBIDDEN")),
        "pinning needs '*'"
    );
    let v = api
        .ok("/v1/tier", &group, json!({"id": secret_group, "set": "t3"}))
        .await;
    assert_eq!(v["tier"], "t3");
    // pet reads main but writes only in pet: it may not re-tier main's memory.
    let (s, _) = api
        .post("/v1/tier", &pet, json!({"id": main, "set": "t1"}))
        .await;
    assert_eq!(s, 404);
    assert_eq!(
        api.ok("/v1/tier", &pet, json!({"id": main})).await["tier"],
        "t2"
    );
    // scenes: counts under the token's own filter.
    let (s, v) = api.get("/v1/scenes", Some(&group)).await;
    assert_eq!(s, 200);
    let scenes: Vec<(String, u64, bool)> = v["scenes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["scene"].as_str().unwrap().into(),
                x["memories"].as_u64().unwrap(),
                x["write"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        scenes,
        [
            ("qq:group:1".to_string(), 1, true),
            ("shared".to_string(), 0, false)
        ]
    );
    let (_, v) = api.get("/v1/scenes", Some(&root)).await;
    assert_eq!(v["reads_every_scene"], true);
    let names: Vec<&str> = v["scenes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["scene"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"qq:group:1") && names.contains(&"main"),
        "{v}"
    );
    // audit, gc and the health history: admin only.
    for (method, path) in [
        ("POST", "/v1/audit"),
        ("POST", "/v1/gc"),
        ("GET", "/v1/health/history"),
    ] {
        let (s, v) = api.raw(method, path, Some(&pet), b"{}".to_vec()).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("FORBIDDEN")),
            "{path}"
        );
        let (s, _) = api.raw(method, path, Some(&root), b"{}".to_vec()).await;
        assert_eq!(s, 200, "{path}");
    }
    let v = api
        .ok(
            "/v1/audit",
            &root,
            json!({"token": "group", "action": "list"}),
        )
        .await;
    assert_eq!(v["entries"].as_array().unwrap().len(), 2, "{v}");
    // profile: pinning needs '*'.
    let (s, _) = api
        .post(
            "/v1/profile",
            &pet,
            json!({"answers": [{"topic": "work", "text": "The owner is a nurse."}]}),
        )
        .await;
    assert_eq!(s, 403);
    let (s, v) = api
        .post(
            "/v1/profile",
            &root,
            json!({"answers": [
            {"topic": "work", "text": "a"}, {"topic": "work", "text": "b"}]}),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("INVALID_INPUT"))
    );
    // A credential in any answer refuses them all: nothing is stored.
    let (s, v) = api
        .post(
            "/v1/profile",
            &root,
            json!({"answers": [
                {"topic": "identity", "text": "The owner is called Ada."},
                {"topic": "work", "text": "Ada's deploy key is ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}]}),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("INVALID_INPUT")),
        "{v}"
    );
    let listed = api.ok("/v1/list", &root, json!({"limit": 100})).await;
    assert!(
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["kind"] != "profile"),
        "{listed}"
    );
}

/// The warning window is relative to each tier's lifetime: a 24-hour chat
/// line is not expiring for its whole life, a T3 memory is in its last 4.3
/// days, a T2 memory in its last 7; search, tier counts and lists agree.
#[test]
fn the_warning_window_is_per_tier() {
    let root = TempRoot::new();
    let cfg = expiring_config();
    let hub = root.hub_configured(config_of(&cfg));
    let clock = TestClock::at("2026-06-01T00:00:00Z");
    clock.install(&hub);
    let t3 = write_tier(&hub, "main", "kite festival reminder", Tier::T3);
    let t2 = write_tier(&hub, "main", "kite repair instructions", Tier::T2);
    let mut chat = WriteRequest::new(scene("main"), "chat about kite colours", "test");
    chat.stage = Stage::Short;
    chat.expires_at = Some(clock.now() + Duration::hours(24));
    let chat = hub.append(chat).unwrap().id;
    let expiring = |hub: &Hub| -> Vec<String> {
        let body = ListBody {
            expiring_soon: true,
            ..ListBody::default()
        };
        let mut ids: Vec<String> = hub
            .list(&hub.operator(), body)
            .unwrap()
            .items
            .into_iter()
            .map(|m| m.id)
            .collect();
        ids.sort();
        ids
    };
    let flagged = |hub: &Hub| -> Vec<String> {
        let body = memory_hub::api::SearchBody {
            query: "kite".into(),
            mode: Some(memory_hub::search::SearchMode::Fulltext),
            ..Default::default()
        };
        let mut ids: Vec<String> = hub
            .search(&hub.operator(), body)
            .unwrap()
            .body
            .hits
            .into_iter()
            .filter(|h| h.expiring_soon)
            .map(|h| h.memory.id)
            .collect();
        ids.sort();
        ids
    };
    let tier_soon = |hub: &Hub, tier: Tier| {
        hub.tier_report()
            .unwrap()
            .tiers
            .iter()
            .find(|t| t.tier == tier)
            .map(|t| {
                serde_json::to_value(t).unwrap()["expiring_soon"]
                    .as_u64()
                    .unwrap()
            })
    };
    // A fresh chat line is not expiring, nor is anything else.
    assert!(expiring(&hub).is_empty());
    assert!(flagged(&hub).is_empty());
    // 21 h later the chat line has 3 h left: inside its window (24 h / 7).
    clock.advance(Duration::hours(21));
    assert_eq!(expiring(&hub), std::slice::from_ref(&chat));
    assert_eq!(flagged(&hub), std::slice::from_ref(&chat));
    // Day 25: the T3 memory has 5 days left (window 4.3): not yet; day 26: yes.
    clock.advance(Duration::days(25) - Duration::hours(21));
    assert!(
        expiring(&hub).is_empty(),
        "the chat line expired, T3 has 5 days"
    );
    assert_eq!(tier_soon(&hub, Tier::T3), Some(0));
    clock.advance(Duration::days(1));
    assert_eq!(expiring(&hub), std::slice::from_ref(&t3));
    assert_eq!(tier_soon(&hub, Tier::T3), Some(1));
    // Day 82: T2 (90 days) has 8 days left: not yet; day 83: 7 days, yes.
    clock.advance(Duration::days(82 - 26));
    assert!(expiring(&hub).is_empty());
    clock.advance(Duration::days(1));
    assert_eq!(expiring(&hub), std::slice::from_ref(&t2));
    assert_eq!(tier_soon(&hub, Tier::T2), Some(1));
    let shown = hub
        .tier(
            &hub.operator(),
            TierBody {
                id: t2.clone(),
                set: None,
            },
        )
        .unwrap();
    assert_eq!(
        (shown.warning_hours, shown.expiring_soon),
        (Some(7 * 24), true)
    );
}

/// 250 memories sharing ten timestamps, paged through `memory://list` with
/// the official Python MCP SDK: every row once, newest first, in pages of
/// seven; a bad limit or cursor is INVALID_INPUT.
#[test]
#[cfg_attr(not(feature = "full-tests"), ignore = "needs the Python MCP SDK")]
fn memory_list_pages_through_rows_sharing_timestamps() {
    let (root, _port) = crate::mcp::root_with_port();
    let hub = root.hub();
    let t0 = DateTime::parse_from_rfc3339("2026-05-01T08:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let mut written = Vec::new();
    let mut ts_of = std::collections::HashMap::new();
    let reqs: Vec<WriteRequest> = (0..250)
        .map(|i| {
            let mut r = WriteRequest::new(
                scene("main"),
                format!("shared-second note number {i}"),
                "test",
            );
            r.ts = Some(t0 + Duration::seconds(i % 10));
            r
        })
        .collect();
    let times: Vec<DateTime<Utc>> = reqs.iter().map(|r| r.ts.unwrap()).collect();
    for (r, ts) in hub.append_batch(reqs).unwrap().into_iter().zip(times) {
        let id = r.unwrap().id;
        ts_of.insert(id.clone(), ts);
        written.push(id);
    }
    drop(hub);
    let token = root.cli_token("lister", "dsh-desktop");
    let _guard = DaemonGuard(root.path().to_path_buf());
    let root_dir = root.path().to_str().unwrap();
    let report = crate::mcp::check(&[
        "--transport",
        "stdio",
        "--memd",
        crate::mcp::MEMD,
        "--root",
        root_dir,
        "--token",
        &token,
        "--scenario",
        "paging",
        "--count",
        "7",
    ]);
    let ids: Vec<String> = report["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(report["pages"], 36, "250 rows in pages of 7");
    assert_eq!(ids.len(), 250);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        250,
        "no row repeated"
    );
    assert_eq!(
        ids.iter().cloned().collect::<HashSet<_>>(),
        written.iter().cloned().collect::<HashSet<_>>(),
        "no row skipped"
    );
    // Newest first, ties by id descending.
    let keys: Vec<(DateTime<Utc>, &String)> = ids.iter().map(|i| (ts_of[i], i)).collect();
    assert!(keys.windows(2).all(|w| w[0] > w[1]), "descending (ts, id)");
    for (bad, why) in report["refusals"].as_object().unwrap() {
        let why = why.as_str().unwrap();
        assert!(why.contains("INVALID_INPUT"), "{bad}: {why}");
    }
    assert_eq!(report["refusals"].as_object().unwrap().len(), 5);
}

/// The bootstrap interview: listed and fetched in English and Chinese, and a
/// scripted interview's answers stored as pinned profile memories; a second
/// run updates the changed answer instead of adding one.
#[test]
#[cfg_attr(not(feature = "full-tests"), ignore = "needs the Python MCP SDK")]
fn bootstrap_interview_prompt_and_a_scripted_interview() {
    let (root, _guard, token) = crate::mcp::stdio_root("owner-agent");
    let first = json!({"answers": [
        {"topic": "identity", "text": "The owner is called Dana Li and likes to be addressed as Dana."},
        {"topic": "work", "text": "Dana is a marine biologist working on coral reef surveys."},
        {"topic": "routines", "text": "Dana swims every morning at seven."}
    ]});
    let second = json!({"answers": [
        {"topic": "identity", "text": "The owner is called Dana Li and likes to be addressed as Dana."},
        {"topic": "work", "text": "Dana now leads the reef survey team at the institute."}
    ]});
    let steps = [
        "prompts".to_string(),
        "prompt:bootstrap_interview={}".to_string(),
        r#"prompt:bootstrap_interview={"language": "zh"}"#.to_string(),
        r#"prompt:bootstrap_interview={"language": "fr"}"#.to_string(),
        format!("memory_profile={first}"),
        format!("memory_profile={second}"),
        r#"memory_search={"query": "reef", "mode": "fulltext"}"#.to_string(),
        r#"memory_category={"action": "get", "name": "profile"}"#.to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let r = crate::mcp::stdio_calls(&root, &token, &steps);
    let calls = r["calls"].as_array().unwrap_or_else(|| panic!("{r}"));
    let prompts = &calls[0]["prompts"];
    assert_eq!(prompts[0]["name"], "bootstrap_interview", "{r}");
    assert_eq!(prompts[0]["arguments"], json!(["language"]));
    assert!(
        calls[1]["text"]
            .as_str()
            .unwrap()
            .contains("memory_profile")
    );
    assert_eq!(calls[1]["roles"], json!(["user"]));
    assert!(
        calls[2]["text"].as_str().unwrap().contains("引导访谈"),
        "{}",
        calls[2]
    );
    assert_eq!(calls[3]["is_error"], true);
    let stored = &calls[4]["json"];
    assert_eq!(calls[4]["is_error"], false, "{}", calls[4]);
    let actions: Vec<&str> = stored["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["created", "created", "created"]);
    let again = &calls[5]["json"];
    let items = again["items"].as_array().unwrap();
    assert_eq!(items[0]["action"], "unchanged");
    assert_eq!(items[1]["action"], "updated");
    let old_work = stored["items"][1]["id"].as_str().unwrap();
    assert_eq!(items[1]["supersedes"], old_work);
    let new_work = items[1]["id"].as_str().unwrap();
    // Search finds the new work answer only (and the profile category that
    // holds it); the answer is pinned and tagged.
    let hits: Vec<&Value> = calls[6]["json"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["origin"] == "fact")
        .collect();
    assert_eq!(hits.len(), 1, "{}", calls[6]);
    let hit = hits[0];
    assert_eq!(hit["id"], new_work);
    assert_eq!(hit["tier"], "t0");
    assert_eq!(hit["kind"], "profile");
    assert_eq!(hit["source"], "bootstrap");
    let mut tags: Vec<&str> = hit["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    tags.sort_unstable();
    assert_eq!(tags, ["bootstrap", "profile", "work"]);
    let category = calls[7]["json"]["content"].as_str().unwrap();
    assert!(category.contains("leads the reef survey") && category.contains("swims every morning"));
    assert!(!category.contains("coral reef surveys"), "{category}");
}

/// `memd health --history` after load: samples taken as the hub's clock
/// moves a minute at a time, with the requests and latencies between them.
#[tokio::test]
async fn health_history_after_some_load() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let t0 = DateTime::parse_from_rfc3339("2026-07-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    for minute in 0..5i64 {
        api.set_now(Some(t0 + Duration::minutes(minute)));
        for i in 0..(minute + 1) {
            api.ok(
                "/v1/write",
                &root,
                json!({"text": format!("load note {minute}-{i} about rivers")}),
            )
            .await;
            api.ok(
                "/v1/search",
                &root,
                json!({"query": "rivers", "mode": "fulltext"}),
            )
            .await;
        }
        let sample = api.hub.sample_health().unwrap().expect("a minute passed");
        assert_eq!(sample.ts, t0 + Duration::minutes(minute));
        assert!(
            api.hub.sample_health().unwrap().is_none(),
            "one sample a minute"
        );
    }
    let (s, h) = api.get("/v1/health/history", Some(&root)).await;
    assert_eq!(s, 200);
    let samples = h["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 5);
    let facts: Vec<u64> = samples
        .iter()
        .map(|s| s["facts"].as_u64().unwrap())
        .collect();
    assert_eq!(facts, [1, 3, 6, 10, 15]);
    assert_eq!(
        samples[4]["requests"], 10,
        "five writes and five searches that minute"
    );
    assert!(samples[4]["search_p50_ms"].as_f64().unwrap() > 0.0);
    assert!(samples[4]["write_p50_ms"].as_f64().unwrap() > 0.0);
    assert!(samples[0]["disk_free_bytes"].as_u64().unwrap() > 0);
    // The CLI reads the same history from the root (no daemon runs).
    let Api {
        root: kept,
        hub,
        router,
        ..
    } = api;
    drop((hub, router));
    let layout_root = kept.path().to_path_buf();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["health", "--history", "--json"])
        .env("MEMD_ROOT", &layout_root)
        .env("MEMD_MODELS_DIR", layout_root.join("no-models"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli["samples"], h["samples"]);
}

/// A renamed (or moved) document keeps its id and its chunks' ids, so a
/// link to it (a fact naming it, an id an agent kept) still holds, in the live index and after a rebuild; a new file at the
/// old path gets an id of its own.
#[test]
fn a_renamed_document_keeps_its_id_and_links() {
    let root = TempRoot::new();
    root.write_doc(
        "notes/boat.md",
        "# Boat\n\nThe boat is moored at pier 4 in Sausalito.\n",
    );
    let hub = root.hub();
    hub.sync_documents().unwrap();
    let doc = memory_hub::ids::doc_id("notes/boat.md");
    let chunk = format!("{doc}#0");
    assert_eq!(
        hub.fetch(&chunk, &memory_hub::index::filter::Filter::all())
            .unwrap()
            .path
            .as_deref(),
        Some("notes/boat.md")
    );
    // A fact links to the document by its id. (A fact cannot supersede a
    // document: its file is the memory, edited in place.)
    let all = memory_hub::index::filter::Filter::all();
    let refused = hub.write(
        &hub.operator(),
        WriteBody {
            text: "The boat moved to pier 9".into(),
            supersedes: Some(chunk.clone()),
            ..WriteBody::default()
        },
    );
    assert!(matches!(refused, Err(memory_hub::Error::NotFound { .. })));
    let link = hub
        .write(
            &hub.operator(),
            WriteBody {
                text: format!("Mooring details are in {chunk}"),
                ..WriteBody::default()
            },
        )
        .unwrap()
        .id;
    std::fs::create_dir_all(root.path().join("memories/archive")).unwrap();
    std::fs::rename(
        root.path().join("memories/notes/boat.md"),
        root.path().join("memories/archive/boat-2026.md"),
    )
    .unwrap();
    hub.sync_documents().unwrap();
    let moved = hub
        .fetch(&doc, &memory_hub::index::filter::Filter::all())
        .unwrap();
    assert_eq!(moved.id, doc);
    assert!(moved.text.contains("pier 4"));
    let got = hub
        .get(
            &hub.operator(),
            memory_hub::api::GetBody {
                id: chunk.clone(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(got.memory.path.as_deref(), Some("archive/boat-2026.md"));
    let linked = hub.fetch(&link, &all).unwrap();
    let target = linked.text.rsplit(' ').next().unwrap().to_string();
    assert_eq!(target, chunk, "the link still names the document");
    assert!(hub.fetch(&target, &all).unwrap().text.contains("pier 4"));
    // A new file at the old path is another document.
    root.write_doc(
        "notes/boat.md",
        "# Boat\n\nA different boat: a red canoe.\n",
    );
    hub.sync_documents().unwrap();
    let body = memory_hub::api::SearchBody {
        query: "canoe".into(),
        mode: Some(memory_hub::search::SearchMode::Fulltext),
        ..Default::default()
    };
    let other = hub.search(&hub.operator(), body).unwrap().body;
    let other_id = other.hits[0]
        .memory
        .id
        .split('#')
        .next()
        .unwrap()
        .to_string();
    assert_ne!(other_id, doc);
    drop(hub);
    // A rebuilt index gives both the same ids.
    let (hub, _) = root.reindex(Config::default());
    let again = hub
        .fetch(&doc, &memory_hub::index::filter::Filter::all())
        .unwrap();
    assert_eq!(again.path.as_deref(), Some("archive/boat-2026.md"));
    let canoe = hub
        .fetch(&other_id, &memory_hub::index::filter::Filter::all())
        .unwrap();
    assert!(canoe.text.contains("canoe"));
    let got = hub
        .get(
            &hub.operator(),
            memory_hub::api::GetBody {
                id: chunk.clone(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(got.memory.path.as_deref(), Some("archive/boat-2026.md"));
    let target = hub.fetch(&link, &all).unwrap().text;
    assert!(target.ends_with(&chunk));
    assert!(root.path().join("memories/renames").is_dir());
}

/// A long-term fact imported from journal lines without a tier gets the
/// tier a write would give it.
#[test]
fn imported_facts_get_tiers() {
    let root = TempRoot::new();
    let line = json!({"v": 1, "op": "put", "id": "fact-main-1-imported", "ts": "2026-01-02T03:04:05Z",
        "scene": "main", "kind": "note", "stage": "long", "text": "imported without a tier",
        "privacy": "normal", "subject": "owner", "source": "elsewhere", "importance": 0.5});
    let file = root.path().join("in.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let report = root.memd_json(&["import", file.to_str().unwrap()]);
    assert_eq!(report["added"], 1, "{report}");
    let got = root.memd_json(&["get", "fact-main-1-imported"]);
    assert_eq!(got["tier"], "t2", "{got}");
}
