//! The `/v1` API end to end through the router: tokens, ingest, recall,
//! timeline, bootstrap, config and the error envelope.

use chrono::{Duration, Utc};
use memory_hub::model::{Privacy, Subject};
use serde_json::{Value, json};

use crate::http_support::{Api, ids};

#[tokio::test]
async fn health_is_open_and_everything_else_needs_a_token() {
    let api = Api::new();
    let (status, v) = api.get("/v1/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(v["status"], "ok");
    for (method, path) in [
        ("GET", "/v1/capabilities"),
        ("POST", "/v1/search"),
        ("GET", "/v1/tokens"),
    ] {
        let (status, v) = api.raw(method, path, None, b"{}".to_vec()).await;
        assert_eq!(status, 401, "{path}");
        assert_eq!(v["error"]["code"], "UNAUTHORIZED");
        let (status, _) = api
            .raw(method, path, Some("mh_wrong"), b"{}".to_vec())
            .await;
        assert_eq!(status, 401, "{path}");
    }
    let (status, v) = api.get("/v1/nope", None).await;
    assert_eq!(status, 404);
    assert_eq!(v["error"]["code"], "NOT_FOUND");
    let (status, v) = api.get("/v1/search", None).await;
    assert_eq!(status, 405);
    assert_eq!(v["error"]["code"], "INVALID_INPUT");
    // A broken token table refuses everyone with a terse 500, never a 200.
    let t = api.token("t", "pet");
    std::fs::write(api.root.layout().tokens(), "{broken").unwrap();
    let (status, v) = api.get("/v1/capabilities", Some(&t)).await;
    assert_eq!(status, 500);
    assert_eq!(v["error"]["code"], "INTERNAL");
}

#[tokio::test]
async fn tokens_issue_and_revoke_without_restart() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    // Issued after the router was built: works on the next request.
    let pet = api.token("pet", "pet");
    let (status, caps) = api.get("/v1/capabilities", Some(&pet)).await;
    assert_eq!(status, 200);
    assert_eq!(caps["token"]["name"], "pet");
    // Non-admin tokens cannot manage tokens.
    let (status, _) = api.get("/v1/tokens", Some(&pet)).await;
    assert_eq!(status, 403);
    let (status, list) = api.get("/v1/tokens", Some(&root)).await;
    assert_eq!(status, 200);
    let text = list.to_string();
    assert!(text.contains("\"pet\"") && !text.contains("hash") && !text.contains(&pet));
    // Revoked over HTTP: refused from the next request on.
    api.ok("/v1/tokens/revoke", &root, json!({"name": "pet"}))
        .await;
    let (status, _) = api.get("/v1/capabilities", Some(&pet)).await;
    assert_eq!(status, 401);
    // Revoked by the CLI library call: same.
    let g = api.token("g", "qq-group-5");
    assert_eq!(api.get("/v1/capabilities", Some(&g)).await.0, 200);
    memory_hub::auth::revoke(&api.root.layout().tokens(), "g", chrono::Utc::now()).unwrap();
    assert_eq!(api.get("/v1/capabilities", Some(&g)).await.0, 401);
    // The audit log names tokens, never secrets.
    let audit = std::fs::read_to_string(api.root.layout().audit()).unwrap();
    assert!(audit.contains("\"token\":\"root\""));
    assert!(!audit.contains(&root) && !audit.contains(&pet));
}

#[tokio::test]
async fn bad_bodies_are_invalid_input() {
    let api = Api::new();
    let t = api.token("root", "dsh-desktop");
    for body in [
        b"{not json".to_vec(),
        br#"{"query": 5}"#.to_vec(),
        br#"{"query": "x", "unknown": 1}"#.to_vec(),
        br#"{"query": "x", "limit": 0}"#.to_vec(),
        br#"{"query": "x", "format": "xml"}"#.to_vec(),
        vec![b'x'; 300 * 1024],
    ] {
        let (status, v) = api.raw("POST", "/v1/search", Some(&t), body).await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"]["code"], "INVALID_INPUT");
        assert_eq!(v["error"]["retryable"], false);
    }
    let (status, v) = api
        .post("/v1/search", &t, json!({"query": "x", "mode": "sideways"}))
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "INVALID_INPUT");
}

#[tokio::test]
async fn write_get_forget_round_trip() {
    let api = Api::new();
    let t = api.token("owner", "qq-owner");
    let w = api
        .ok(
            "/v1/write",
            &t,
            json!({"text": "I like green tea", "kind": "preference", "tags": ["drink"], "idempotency_key": "k1"}),
        )
        .await;
    assert_eq!(w["action"], "ADD");
    let id = w["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("fact-qq-owner-"), "{id}");
    let again = api
        .ok(
            "/v1/write",
            &t,
            json!({"text": "I like green tea", "idempotency_key": "k1"}),
        )
        .await;
    assert_eq!(again["action"], "NOOP");
    assert_eq!(again["id"], id.as_str());
    let got = api.ok("/v1/get", &t, json!({"id": id})).await;
    assert_eq!(got["kind"], "preference");
    assert_eq!(got["source"], "qq");
    api.ok("/v1/forget", &t, json!({"id": id, "reason": "changed"}))
        .await;
    let (status, _) = api.post("/v1/get", &t, json!({"id": id})).await;
    assert_eq!(status, 404);
    let (status, _) = api.post("/v1/forget", &t, json!({"id": id})).await;
    assert_eq!(status, 404);
    // Only `*` tokens may set source.
    let pet = api.token("pet", "pet");
    let (status, _) = api
        .post("/v1/write", &pet, json!({"text": "x", "source": "sleep"}))
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn ingest_is_idempotent_and_expires() {
    let api = Api::new();
    let g = api.token("g", "qq-group-9");
    let msg = json!({"message_id": "42", "text": "明天下午三点开会", "sender": {"id": "u1", "name": "小王"}});
    let first = api.ok("/v1/ingest", &g, msg.clone()).await;
    assert_eq!(first["action"], "ADD");
    let id = first["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("chat-qq-group-9-"), "{id}");
    let smid = first["source_message_id"].as_str().unwrap();
    assert!(smid.starts_with("42#") && smid.len() == 3 + 12, "{smid}");
    let again = api.ok("/v1/ingest", &g, msg).await;
    assert_eq!(again["action"], "NOOP");
    assert_eq!(again["id"], id.as_str());
    // The same provider id with different text is a different message.
    let other = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "42", "text": "改到四点"}),
        )
        .await;
    assert_eq!(other["action"], "ADD");
    assert_ne!(other["id"], id.as_str());
    // Noise is skipped at the door.
    let skip = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "43", "text": "？？"}),
        )
        .await;
    assert_eq!(skip["action"], "SKIP");
    // Stored as short-term chat.
    let got = api.ok("/v1/get", &g, json!({"id": id})).await;
    assert_eq!(
        (got["stage"].as_str(), got["kind"].as_str()),
        (Some("short"), Some("chat"))
    );
    assert_eq!(
        api.search_ids(&g, json!({"query": "开会"})).await,
        vec![id.clone()]
    );
    // A message sent two days ago is already expired: stored, never returned.
    let old = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "7", "text": "上周的旧消息 开会", "sent_at": (Utc::now() - Duration::days(2)).to_rfc3339()}),
        )
        .await;
    assert_eq!(old["action"], "ADD");
    assert_eq!(
        api.search_ids(&g, json!({"query": "旧消息"})).await,
        Vec::<String>::new()
    );
    assert_eq!(
        api.post("/v1/get", &g, json!({"id": old["id"]})).await.0,
        404
    );
    // Move the clock past the 24 h TTL: the fresh message expires too.
    api.set_now(Some(Utc::now() + Duration::hours(25)));
    assert!(
        api.search_ids(&g, json!({"query": "开会"}))
            .await
            .is_empty()
    );
    let recall = api
        .ok("/v1/recall", &g, json!({"messages": ["开会"]}))
        .await;
    assert!(ids(&recall["hits"]).is_empty());
    api.set_now(None);
    assert_eq!(api.search_ids(&g, json!({"query": "开会"})).await.len(), 1);
    // The journal keeps the text.
    assert!(
        api.root
            .journal_lines()
            .iter()
            .any(|l| l.contains("上周的旧消息"))
    );
}

#[tokio::test]
async fn recall_renders_a_block_with_live_chat() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    let p = api.token("pa", "qq-private-a");
    api.write(
        "main",
        "主人喜欢在周末去爬山",
        Privacy::Normal,
        Subject::Owner,
    );
    api.ok(
        "/v1/ingest",
        &root,
        json!({"message_id": "s1", "text": "今天天气不错，想去爬山", "from_owner": true, "sender": {"id": "owner", "name": "主人"}}),
    )
    .await;
    let v = api
        .ok(
            "/v1/recall",
            &pet,
            json!({
                "scene": "pet",
                "messages": [{"role": "user", "text": "周末去哪里玩"}, "想去爬山"],
                "live": {"k": 6, "minutes": 30, "scenes": ["main"]},
                "format": "block"
            }),
        )
        .await;
    let block = v["block"].as_str().unwrap();
    assert!(
        block.starts_with("【最近在聊的】（近 30 分钟，是现状，不是回忆）\n- "),
        "{block}"
    );
    assert!(block.contains("主人：今天天气不错"), "{block}");
    assert!(
        block.contains("\n【长期记忆】（只是背景，不要原样复述）\n- "),
        "{block}"
    );
    assert!(block.contains("主人喜欢在周末去爬山"), "{block}");
    assert_eq!(v["live"].as_array().unwrap().len(), 1);
    assert_eq!(
        block.matches("今天天气不错").count(),
        1,
        "live lines are not repeated: {block}"
    );
    // Without format:block there is no block.
    let plain = api.ok("/v1/recall", &pet, json!({"query": "爬山"})).await;
    assert!(plain.get("block").is_none());
    // What the person said themselves is marked.
    api.ok(
        "/v1/ingest",
        &p,
        json!({"message_id": "p1", "text": "我对花生过敏", "sender": {"id": "a", "name": "甲"}}),
    )
    .await;
    let v = api
        .ok(
            "/v1/recall",
            &p,
            json!({"messages": ["花生"], "person": "a", "format": "block"}),
        )
        .await;
    assert!(
        v["block"]
            .as_str()
            .unwrap()
            .contains("（对方自己提起过的）"),
        "{v}"
    );
    assert_eq!(v["hits"][0]["self_mentioned"], true);
    // The live channel cannot reach scenes the token lacks.
    let (status, _) = api
        .post(
            "/v1/recall",
            &pet,
            json!({"query": "x", "live": {"scenes": ["qq:group:1"]}}),
        )
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn timeline_pages_by_month_with_supersede_links() {
    let api = Api::new();
    let t = api.token("root", "dsh-desktop");
    let mut written = Vec::new();
    for i in 0..5 {
        let v = api
            .ok(
                "/v1/write",
                &t,
                json!({"text": format!("timeline note {i}")}),
            )
            .await;
        written.push(v["id"].as_str().unwrap().to_string());
    }
    let newer = api
        .ok(
            "/v1/write",
            &t,
            json!({"text": "timeline note 0, corrected", "supersedes": written[0]}),
        )
        .await;
    written.push(newer["id"].as_str().unwrap().to_string());
    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut body = json!({"limit": 2});
        if let Some(b) = &before {
            body["before"] = json!(b);
        }
        let page = api.ok("/v1/timeline", &t, body).await;
        pages += 1;
        for month in page["months"].as_array().unwrap() {
            assert_eq!(month["month"], Utc::now().format("%Y-%m").to_string());
            for item in month["items"].as_array().unwrap() {
                let id = item["id"].as_str().unwrap().to_string();
                if id == written[0] {
                    assert_eq!(item["superseded_by"], json!([written[5]]));
                }
                if id == written[5] {
                    assert_eq!(item["supersedes"], written[0].as_str());
                }
                seen.push(id);
            }
        }
        match page.get("next_before").and_then(|v| v.as_str()) {
            Some(b) => before = Some(b.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let mut want = written.clone();
    want.reverse();
    assert_eq!(seen, want, "newest first, each exactly once");
    let month = api
        .ok("/v1/timeline", &t, json!({"month": "2001-01"}))
        .await;
    assert!(month["months"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn recent_bootstrap_and_audience() {
    let root_dir = crate::support::TempRoot::new();
    root_dir.write_doc("user/identity.md", "# 主人\n\n主人叫阿明，住在杭州。\n");
    root_dir.write_doc(
        "audiences/qq-group-3.md",
        "---\ntitle: 三号群\n---\n这是一个登山爱好者的群。\n",
    );
    let api = crate::http_support::Api::over(root_dir);
    let root = api.token("root", "dsh-desktop");
    let g = api.token("g", "qq-group-3");
    api.write("main", "学会了做红烧肉", Privacy::Normal, Subject::Owner);
    api.write(
        "main",
        "我觉得主人最近很累",
        Privacy::Normal,
        Subject::SelfAgent,
    );
    let b = api.ok("/v1/bootstrap", &root, json!({})).await;
    assert!(b["identity"]["text"].as_str().unwrap().contains("阿明"));
    // Document chunks never expire: the expiry clause of the text query keeps them.
    let hits = api.search_ids(&root, json!({"query": "阿明 杭州"})).await;
    assert_eq!(hits.len(), 1);
    assert!(hits[0].starts_with("doc-"), "{hits:?}");
    assert_eq!(b["recent_titles"].as_array().unwrap().len(), 2);
    assert_eq!(b["recent_self"].as_array().unwrap().len(), 1);
    // A group sees its own card but not the owner's identity or memories.
    let b = api.ok("/v1/bootstrap", &g, json!({})).await;
    assert!(b["identity"].is_null());
    assert!(b["audience"]["text"].as_str().unwrap().contains("登山"));
    assert!(b["recent_titles"].as_array().unwrap().is_empty());
    let a = api.ok("/v1/audience", &g, json!({})).await;
    assert_eq!(a["audience"], "qq:group:3");
    assert!(a["card"]["text"].as_str().unwrap().contains("登山"));
    let a = api
        .ok("/v1/audience", &root, json!({"audience": "qq:group:4"}))
        .await;
    assert!(a["card"].is_null());
    let r = api
        .ok(
            "/v1/recent",
            &root,
            json!({"stage": "long", "format": "block", "limit": 1}),
        )
        .await;
    assert_eq!(r["items"].as_array().unwrap().len(), 1);
    assert!(
        r["block"]
            .as_str()
            .unwrap()
            .starts_with("【最近记得的事】\n- ")
    );
}

/// Four owner notes that a search for "apple" finds.
fn four_apple_notes(api: &Api) {
    for i in 0..4 {
        api.write(
            "main",
            &format!("apple note {i}"),
            Privacy::Normal,
            Subject::Owner,
        );
    }
}

#[tokio::test]
async fn config_changes_apply_without_restart() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    four_apple_notes(&api);
    assert_eq!(
        api.search_ids(&root, json!({"query": "apple"})).await.len(),
        4
    );
    let (status, schema) = api.get("/v1/config-schema", Some(&pet)).await;
    assert_eq!(status, 200);
    assert!(schema["x-editable"]["search.defaultLimit"].is_object());
    // Generated from the config types: every top-level key, with descriptions.
    let example: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.json"))
            .unwrap(),
    )
    .unwrap();
    for key in example.as_object().unwrap().keys() {
        assert!(
            schema["properties"][key].is_object(),
            "{key} missing from the schema"
        );
    }
    assert!(schema["properties"]["listen"]["description"].is_string());
    assert_eq!(api.get("/v1/config-state", Some(&pet)).await.0, 403);
    assert_eq!(
        api.post("/v1/config", &pet, json!({"search.defaultLimit": 2}))
            .await
            .0,
        403
    );
    let v = api
        .ok("/v1/config", &root, json!({"search.defaultLimit": 2}))
        .await;
    assert_eq!(v["values"]["search.defaultLimit"], 2);
    assert_eq!(
        api.search_ids(&root, json!({"query": "apple"})).await.len(),
        2
    );
    let (_, state) = api.get("/v1/config-state", Some(&root)).await;
    assert_eq!(state["values"]["search.defaultLimit"], 2);
    let file = std::fs::read_to_string(api.root.layout().config()).unwrap();
    assert!(file.contains("\"defaultLimit\": 2"), "{file}");
    for bad in [
        json!({"listen": "0.0.0.0:1"}),
        json!({"search.defaultLimit": 0}),
        json!({"search.defaultLimit": 50}),
    ] {
        let (status, v) = api.post("/v1/config", &root, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {v}");
    }
}

/// One live config: the hub owns it, `POST /v1/config` and a reload of
/// `config.json` swap it, and every reader (HTTP handlers and the hub's own
/// search) sees the same values; keys that need a restart stay as they were.
#[tokio::test]
async fn the_hub_owns_the_one_live_config() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    four_apple_notes(&api);
    let hub_search = |api: &Api| {
        api.hub
            .search_filtered(&memory_hub::search::SearchRequest {
                query: "apple".into(),
                filter: memory_hub::index::filter::Filter::all(),
                limit: None,
                mode: Some(memory_hub::search::SearchMode::Fulltext),
                min_score: None,
            })
            .unwrap()
            .hits
            .len()
    };
    assert_eq!(hub_search(&api), 4);
    api.ok("/v1/config", &root, json!({"search.defaultLimit": 2}))
        .await;
    assert_eq!(api.hub.config().search.default_limit, 2);
    assert_eq!(hub_search(&api), 2, "the hub searches with the live config");
    assert_eq!(
        api.search_ids(&root, json!({"query": "apple"})).await.len(),
        2
    );

    // A hand edit of config.json, applied by the watcher's reload: editable
    // keys change, the rest needs a restart.
    let path = api.root.layout().config();
    std::fs::write(
        &path,
        r#"{"search": {"defaultLimit": 3}, "listen": "127.0.0.1:9999"}"#,
    )
    .unwrap();
    let before = api.hub.config();
    api.hub.reload_config().unwrap();
    let after = api.hub.config();
    assert_eq!(after.search.default_limit, 3);
    assert_eq!(after.listen, before.listen, "listen needs a restart");
    assert_eq!(before.search.default_limit, 2, "a snapshot never changes");
    assert_eq!(hub_search(&api), 3);
    assert_eq!(
        api.search_ids(&root, json!({"query": "apple"})).await.len(),
        3
    );

    // An invalid file is refused and the config in force stays.
    std::fs::write(&path, r#"{"search": {"defaultLimit": 0}}"#).unwrap();
    let err = api.hub.reload_config().unwrap_err();
    assert_eq!(err.code().as_str(), "INVALID_INPUT");
    assert_eq!(api.hub.config().search.default_limit, 3);
}

#[tokio::test]
async fn recall_extends_short_term_memories_up_to_the_cap() {
    let api = Api::new();
    let g = api.token("g", "qq-group-4");
    let sent = Utc::now() - Duration::hours(20);
    let v = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "1", "text": "下周三交报告", "sent_at": sent.to_rfc3339()}),
        )
        .await;
    let id = v["id"].as_str().unwrap().to_string();
    let expiry = |m: &serde_json::Value| {
        m["expires_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<Utc>>()
            .unwrap()
    };
    let before = expiry(&api.ok("/v1/get", &g, json!({"id": id})).await);
    assert!(before < Utc::now() + Duration::hours(5), "{before}");
    let r = api
        .ok("/v1/recall", &g, json!({"messages": ["报告"]}))
        .await;
    assert_eq!(ids(&r["hits"]), vec![id.clone()]);
    let after = expiry(&api.ok("/v1/get", &g, json!({"id": id})).await);
    assert!(after > Utc::now() + Duration::hours(23), "{after}");
    // A second recall right away writes nothing more.
    let lines = api.root.journal_lines().len();
    api.ok("/v1/recall", &g, json!({"messages": ["报告"]}))
        .await;
    assert_eq!(api.root.journal_lines().len(), lines);
    // Recalled every 20 h it lives on, but never beyond 168 h after it was written.
    let start = Utc::now();
    for hours in (20..=160).step_by(20) {
        api.set_now(Some(start + Duration::hours(hours)));
        let r = api
            .ok("/v1/recall", &g, json!({"messages": ["报告"]}))
            .await;
        assert_eq!(ids(&r["hits"]), vec![id.clone()], "alive at +{hours} h");
    }
    let capped = expiry(&api.ok("/v1/get", &g, json!({"id": id})).await);
    let written = api
        .hub
        .fetch(&id, &memory_hub::index::filter::Filter::all())
        .unwrap()
        .ts;
    assert_eq!(capped, written + Duration::hours(168));
    // The journal replays to the same expiry.
    api.set_now(None);
    drop(api.router);
    let hub = std::sync::Arc::try_unwrap(api.hub)
        .ok()
        .expect("only handle");
    drop(hub);
    let reopened = memory_hub::hub::Hub::reindex(
        api.root.layout(),
        memory_hub::config::Config::default(),
        &mut |_| {},
    )
    .unwrap()
    .0;
    let replayed = reopened
        .fetch(&id, &memory_hub::index::filter::Filter::all())
        .unwrap();
    assert_eq!(replayed.expires_at, Some(capped));
    // Forgotten memories are never brought back by an extension.
    reopened
        .tombstone(&id, None, "test", &memory_hub::index::filter::Filter::all())
        .unwrap();
    assert_eq!(
        reopened
            .extend_short_ttl(std::slice::from_ref(&id), Duration::hours(24), Utc::now())
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn metrics_count_requests_and_the_rate_limit_is_per_token() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    assert_eq!(api.get("/metrics", None).await.0, 401);
    api.ok("/v1/config", &root, json!({"http.rateLimitPerMinute": 3}))
        .await;
    // The config change itself was the first request of root's minute.
    api.ok("/v1/search", &root, json!({"query": "x"})).await;
    api.ok("/v1/search", &root, json!({"query": "y"})).await;
    let (status, v) = api.post("/v1/search", &root, json!({"query": "z"})).await;
    assert_eq!(status, 429, "{v}");
    assert_eq!(v["error"]["code"], "RATE_LIMITED");
    assert_eq!(v["error"]["retryable"], true);
    // Global counts are for admins only; another admin token has its own allowance.
    assert_eq!(api.raw_text("GET", "/metrics", Some(&pet)).await.0, 403);
    let ops = api.token("ops", "dsh-desktop");
    let (status, text) = api.raw_text("GET", "/metrics", Some(&ops)).await;
    assert_eq!(status, 200);
    assert!(
        text.contains("memd_http_requests_total{route=\"POST /v1/search\",status=\"200\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("memd_http_requests_total{route=\"POST /v1/search\",status=\"429\"} 1"),
        "{text}"
    );
    assert!(text.contains("memd_rate_limited_total 1"), "{text}");
    assert!(
        text.contains("memd_http_request_duration_seconds_count{route=\"POST /v1/search\"} 3"),
        "{text}"
    );
    assert!(text.contains("\nmemd_memories 0\n"), "{text}");
}

/// A method a route does not serve is 405 with the error envelope.
#[tokio::test]
async fn undeclared_methods_are_405() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    for (method, path) in [
        ("TRACE", "/v1/write"),
        ("PUT", "/v1/search"),
        ("DELETE", "/v1/tokens"),
    ] {
        let (status, v) = api.raw(method, path, Some(&root), Vec::new()).await;
        assert_eq!(status, 405, "{method} {path} -> {v}");
        assert_eq!(v["error"]["code"], "INVALID_INPUT", "{v}");
    }
}

#[tokio::test]
async fn ingest_owner_ids_make_the_sender_the_owner() {
    let root = crate::support::TempRoot::new();
    let mut config = memory_hub::config::Config::default();
    config.ingest.owner_ids = vec!["10001".into()];
    let (hub, _) = memory_hub::hub::Hub::open_with(
        root.layout(),
        config,
        memory_hub::hub::Mode::Write,
        memory_hub::embed::EmbedderSlot::ready(std::sync::Arc::new(
            memory_hub::embed::hash::HashEmbedder::new(384),
        )),
        &mut |_| {},
    )
    .expect("open hub");
    let api = Api::over_hub(root, hub);
    let g = api.token("g", "qq-group-9");
    let subject = |id: &Value| {
        api.hub
            .fetch(
                id.as_str().unwrap(),
                &memory_hub::index::filter::Filter::all(),
            )
            .unwrap()
            .subject
    };
    let owner = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "1", "text": "我下周去上海出差", "sender": {"id": "10001", "name": "主人"}}),
        )
        .await;
    assert_eq!(owner["action"], "ADD", "{owner}");
    assert_eq!(subject(&owner["id"]), Subject::Owner);
    let other = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "2", "text": "我下周去北京出差", "sender": {"id": "10002", "name": "小王"}}),
        )
        .await;
    assert_eq!(subject(&other["id"]), Subject::Other);
    // The agent's own messages stay its own even when sent under an owner id.
    let own = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "3", "text": "好的，我记下了出差的安排", "sender": {"id": "10001"}, "from_self": true}),
        )
        .await;
    assert_eq!(subject(&own["id"]), Subject::SelfAgent);
    // A sender without an id in the list and without from_owner is not the owner.
    let anon = api
        .ok(
            "/v1/ingest",
            &g,
            json!({"message_id": "4", "text": "周五一起吃火锅吧"}),
        )
        .await;
    assert_eq!(subject(&anon["id"]), Subject::Other);
}
