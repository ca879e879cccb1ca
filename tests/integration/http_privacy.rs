//! The privacy matrix over HTTP: what each token can and cannot see.

use memory_hub::model::{Privacy, Subject};
use serde_json::json;

use crate::http_support::{Api, ids, timeline_items};

struct World {
    api: Api,
    owner_note: String,
    owner_work: String,
    owner_secret: String,
    group1: String,
    group2: String,
    private_a: String,
    private_b: String,
    root: String,
    qq_owner: String,
    pet: String,
    g1: String,
    pa: String,
    pb: String,
}

fn world() -> World {
    let api = Api::new();
    let w = |scene: &str, text: &str, p: Privacy| api.write(scene, text, p, Subject::Owner);
    let owner_note = w("main", "周末的项目计划 project plan", Privacy::Normal);
    let owner_work = w("main", "项目 project 工资 salary 敏感", Privacy::Sensitive);
    let owner_secret = w("main", "项目 project 保险箱密码提示", Privacy::Secret);
    let group1 = w("qq:group:1", "群一 project 周末聚餐", Privacy::Normal);
    let group2 = w("qq:group:2", "群二 project 周末爬山", Privacy::Normal);
    let private_a = api.write(
        "qq:private:a",
        "私聊甲 project 生日",
        Privacy::Personal,
        Subject::Other,
    );
    let private_b = api.write(
        "qq:private:b",
        "私聊乙 project 旅行",
        Privacy::Personal,
        Subject::Other,
    );
    let root = api.token("root", "dsh-desktop");
    let qq_owner = api.token("owner", "qq-owner");
    let pet = api.token("pet", "pet");
    let g1 = api.token("g1", "qq-group-1");
    let pa = api.token("pa", "qq-private-a");
    let pb = api.token("pb", "qq-private-b");
    World {
        api,
        owner_note,
        owner_work,
        owner_secret,
        group1,
        group2,
        private_a,
        private_b,
        root,
        qq_owner,
        pet,
        g1,
        pa,
        pb,
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn group_token_never_sees_owner_rows() {
    let w = world();
    let q = json!({"query": "project", "limit": 10});
    assert_eq!(
        w.api.search_ids(&w.g1, q.clone()).await,
        vec![w.group1.clone()]
    );
    assert!(
        w.api
            .search_ids(&w.g1, json!({"query": "salary"}))
            .await
            .is_empty()
    );
    assert!(
        w.api
            .search_ids(&w.g1, json!({"query": "工资"}))
            .await
            .is_empty()
    );
    for id in [
        &w.owner_note,
        &w.owner_work,
        &w.owner_secret,
        &w.group2,
        &w.private_a,
    ] {
        let (status, body) = w.api.post("/v1/get", &w.g1, json!({"id": id})).await;
        assert_eq!(status, 404, "{id}: {body}");
        assert_eq!(body["error"]["code"], "NOT_FOUND");
    }
    let recent = w.api.ok("/v1/recent", &w.g1, json!({"limit": 50})).await;
    assert_eq!(ids(&recent["items"]), vec![w.group1.clone()]);
    let tl = w.api.ok("/v1/timeline", &w.g1, json!({})).await;
    let tl_ids: Vec<&str> = timeline_items(&tl)
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(tl_ids, vec![w.group1.clone()]);
    let recall = w
        .api
        .ok(
            "/v1/recall",
            &w.g1,
            json!({"messages": ["project 周末"], "limit": 10}),
        )
        .await;
    assert_eq!(ids(&recall["hits"]), vec![w.group1.clone()]);
    // Forgetting what it cannot see is NOT_FOUND, and nothing is forgotten.
    let (status, _) = w
        .api
        .post("/v1/forget", &w.g1, json!({"id": w.owner_note}))
        .await;
    assert_eq!(status, 404);
    w.api
        .ok("/v1/get", &w.root, json!({"id": w.owner_note}))
        .await;
}

#[tokio::test]
async fn forged_scenes_are_forbidden() {
    let w = world();
    for (path, body) in [
        (
            "/v1/search",
            json!({"query": "project", "scene": "qq:owner"}),
        ),
        (
            "/v1/search",
            json!({"query": "project", "scenes": ["main"]}),
        ),
        ("/v1/write", json!({"text": "x", "scene": "main"})),
        ("/v1/recent", json!({"scene": "qq:group:2"})),
        ("/v1/audience", json!({"audience": "qq:group:2"})),
        (
            "/v1/search",
            json!({"query": "project", "scene": "qq:group:1", "from_owner": false, "scenes": ["qq:group:1", "qq:group:2"]}),
        ),
    ] {
        let (status, v) = w.api.post(path, &w.g1, body.clone()).await;
        assert_eq!(status, 403, "{path} {body}: {v}");
        assert_eq!(v["error"]["code"], "FORBIDDEN");
    }
    let denied = w.api.audit().iter().filter(|l| l["denied"] == 1).count();
    assert_eq!(denied, 6);
    // Pet may not write secrets, nor widen to a scene it lacks.
    let (status, _) = w
        .api
        .post(
            "/v1/write",
            &w.pet,
            json!({"text": "x", "privacy": "secret"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = w
        .api
        .post(
            "/v1/search",
            &w.pet,
            json!({"query": "project", "scene": "qq:group:1"}),
        )
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn private_chats_are_invisible_to_each_other() {
    let w = world();
    let q = json!({"query": "project", "limit": 10});
    assert_eq!(
        w.api.search_ids(&w.pa, q.clone()).await,
        vec![w.private_a.clone()]
    );
    assert_eq!(
        w.api.search_ids(&w.pb, q.clone()).await,
        vec![w.private_b.clone()]
    );
    let (status, _) = w
        .api
        .post("/v1/get", &w.pa, json!({"id": w.private_b}))
        .await;
    assert_eq!(status, 404);
    // from_owner opens the owner's own normal memories, never sensitive, secret or other chats.
    let with_owner = w
        .api
        .search_ids(
            &w.pa,
            json!({"query": "project", "limit": 10, "from_owner": true}),
        )
        .await;
    assert_eq!(
        sorted(with_owner),
        sorted(vec![w.private_a.clone(), w.owner_note.clone()])
    );
    // Pet reads main/qq:owner/pet, but no sensitive, secret, group or private rows.
    let pet = w.api.search_ids(&w.pet, q.clone()).await;
    assert_eq!(pet, vec![w.owner_note.clone()]);
}

#[tokio::test]
async fn secrets_need_secret_read() {
    let w = world();
    let q = json!({"query": "保险箱", "limit": 10});
    assert_eq!(
        w.api.search_ids(&w.root, q.clone()).await,
        vec![w.owner_secret.clone()]
    );
    assert_eq!(
        w.api.search_ids(&w.qq_owner, q.clone()).await,
        vec![w.owner_secret.clone()]
    );
    assert!(w.api.search_ids(&w.pet, q.clone()).await.is_empty());
    assert!(w.api.search_ids(&w.g1, q.clone()).await.is_empty());
    let no_secret = w
        .api
        .custom_token("ns", &["read", "sensitive:read"], &["main"]);
    assert!(w.api.search_ids(&no_secret, q).await.is_empty());
    assert_eq!(
        w.api
            .search_ids(&no_secret, json!({"query": "salary"}))
            .await,
        vec![w.owner_work.clone()]
    );
    let (status, _) = w
        .api
        .post("/v1/get", &no_secret, json!({"id": w.owner_secret}))
        .await;
    assert_eq!(status, 404);
    // The root token sees every scene.
    let all = w
        .api
        .search_ids(&w.root, json!({"query": "project", "limit": 10}))
        .await;
    assert_eq!(all.len(), 7);
    assert!(all.contains(&w.group2));
}

#[tokio::test]
async fn disclosure_needs_membership_and_stays_in_one_group() {
    let w = world();
    let g2 = w.api.token("g2", "qq-group-2");
    let disclose = w.api.token("d", "qq-disclose");
    let ingest = |id: &str, text: &str, sender: &str| json!({"message_id": id, "text": text, "sender": {"id": sender, "name": sender}});
    w.api
        .ok("/v1/ingest", &w.g1, ingest("m1", "今晚一起吃火锅吗", "u1"))
        .await;
    w.api
        .ok("/v1/ingest", &g2, ingest("m1", "明天去爬山", "u2"))
        .await;
    // u1 asks about group 1: allowed, and only group 1's chat comes back.
    let v = w
        .api
        .ok(
            "/v1/disclose",
            &disclose,
            json!({"group": "qq:group:1", "asker": "u1", "format": "block"}),
        )
        .await;
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{v}");
    assert!(items.iter().all(|i| i["scene"] == "qq:group:1"));
    assert!(v["block"].as_str().unwrap().contains("火锅"));
    // Not a member: refused, fail closed.
    for (group, asker) in [
        ("qq:group:1", "u2"),
        ("qq:group:2", "u1"),
        ("qq:group:1", "stranger"),
    ] {
        let (status, body) = w
            .api
            .post(
                "/v1/disclose",
                &disclose,
                json!({"group": group, "asker": asker}),
            )
            .await;
        assert_eq!(status, 403, "{group} {asker}: {body}");
    }
    // Only tokens with disclose:group may disclose.
    let (status, _) = w
        .api
        .post(
            "/v1/disclose",
            &w.g1,
            json!({"group": "qq:group:1", "asker": "u1"}),
        )
        .await;
    assert_eq!(status, 403);
    // Explicit removal revokes membership.
    w.api
        .ok("/v1/members", &w.g1, json!({"remove": ["u1"]}))
        .await;
    let (status, _) = w
        .api
        .post(
            "/v1/disclose",
            &disclose,
            json!({"group": "qq:group:1", "asker": "u1"}),
        )
        .await;
    assert_eq!(status, 403);
    // Reconciliation replaces the table: u1 is back, nobody else.
    let v = w
        .api
        .ok(
            "/v1/members",
            &w.g1,
            json!({"set": [{"id": "u1", "name": "A"}]}),
        )
        .await;
    assert_eq!(
        (v["added"].as_u64(), v["removed"].as_u64()),
        (Some(1), Some(0))
    );
    w.api
        .ok(
            "/v1/disclose",
            &disclose,
            json!({"group": "qq:group:1", "asker": "u1"}),
        )
        .await;
    w.api.ok("/v1/members", &w.g1, json!({"set": []})).await;
    // A group token cannot edit another group's members.
    let (status, _) = w
        .api
        .post(
            "/v1/members",
            &w.g1,
            json!({"group": "qq:group:2", "add": [{"id": "x"}]}),
        )
        .await;
    assert_eq!(status, 403);
    // Every disclosure attempt is audited with group and asker.
    let audited: Vec<_> = w
        .api
        .audit()
        .into_iter()
        .filter(|l| l["route"] == "POST /v1/disclose")
        .collect();
    assert_eq!(audited.len(), 7);
    assert_eq!(audited[0]["extra"]["asker"], "u1");
    assert_eq!(audited[1]["denied"], 1);
    // Membership survives a reindex: it lives under memories/.
    assert!(
        w.api
            .root
            .path()
            .join("memories/groups/members.json")
            .exists()
    );
}

#[tokio::test]
async fn idempotency_keys_do_not_cross_scenes() {
    let w = world();
    let g2 = w.api.token("g2", "qq-group-2");
    let a = w
        .api
        .ok(
            "/v1/write",
            &w.g1,
            json!({"text": "one", "idempotency_key": "k"}),
        )
        .await;
    let two = json!({"text": "two", "idempotency_key": "k"});
    let b = w.api.ok("/v1/write", &g2, two.clone()).await;
    assert_eq!(
        (a["action"].as_str(), b["action"].as_str()),
        (Some("ADD"), Some("ADD"))
    );
    assert_ne!(a["id"], b["id"]);
    let again = w.api.ok("/v1/write", &g2, two).await;
    assert_eq!(again["id"], b["id"]);
    // Ingest keys are per scene too: the same message id and text in two groups are two memories.
    let m = json!({"message_id": "1", "text": "同一句话"});
    let x = w.api.ok("/v1/ingest", &w.g1, m.clone()).await;
    let y = w.api.ok("/v1/ingest", &g2, m).await;
    assert_eq!(y["action"], "ADD");
    assert_ne!(x["id"], y["id"]);
}

/// A model of DESIGN §4, written independently of `auth::policy`: what a
/// token may see, for random memories, must equal what search (tantivy),
/// recent and timeline (SQL) return.
#[tokio::test]
async fn random_memories_match_the_privacy_model() {
    use chrono::{Duration, Utc};
    use memory_hub::ids;
    use memory_hub::model::{Fact, Record, Stage};
    use memory_hub::store::journal;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    let mut rng = rand::rngs::StdRng::seed_from_u64(20261130);
    let scenes = [
        "main",
        "qq:owner",
        "pet",
        "qq:group:1",
        "qq:group:2",
        "qq:private:a",
        "shared",
    ];
    let privacies = [
        Privacy::Normal,
        Privacy::Personal,
        Privacy::Sensitive,
        Privacy::Secret,
    ];
    let subjects = [Subject::Owner, Subject::SelfAgent, Subject::Other];
    let now = Utc::now();
    // The memories go straight into a journal file, which the hub replays on
    // open in one batch (a write per memory would spend seconds in commits).
    let root_dir = crate::support::TempRoot::new();
    let facts = root_dir.path().join("memories/facts");
    std::fs::create_dir_all(&facts).unwrap();
    let mut lines = String::new();
    // (id, scene, privacy, subject, expired)
    let mut written: Vec<(String, &str, Privacy, Subject, bool)> = Vec::new();
    for i in 0..80 {
        let privacy = privacies[rng.random_range(0..privacies.len())];
        let scene = match privacy {
            Privacy::Secret => "main",
            Privacy::Sensitive => ["main", "qq:owner"][rng.random_range(0..2)],
            _ => scenes[rng.random_range(0..scenes.len())],
        };
        let subject = subjects[rng.random_range(0..subjects.len())];
        let short = rng.random_bool(0.3);
        let expired = short && rng.random_bool(0.5);
        let ts = now - Duration::seconds(100 - i);
        let fact = Fact {
            id: ids::fact_id("fact", &crate::support::scene(scene), ts),
            ts,
            scene: crate::support::scene(scene),
            kind: "note".into(),
            stage: if short { Stage::Short } else { Stage::Long },
            text: format!("common marker {i}"),
            title: None,
            tags: Vec::new(),
            privacy,
            subject,
            source: "test".into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            expires_at: short.then(|| {
                if expired {
                    now - Duration::hours(1)
                } else {
                    now + Duration::hours(1)
                }
            }),
            source_message_id: None,
            idempotency_key: None,
            device: "test".into(),
            accesses: 0,
            run: None,
            setting: Default::default(),
        };
        written.push((fact.id.clone(), scene, privacy, subject, expired));
        lines.push_str(
            &serde_json::to_string(&Record::Put {
                v: 1,
                at: None,
                fact,
            })
            .unwrap(),
        );
        lines.push('\n');
    }
    std::fs::write(facts.join(journal::file_name_for(now)), lines).unwrap();
    let api = Api::over(root_dir);
    let root = api.token("root", "dsh-desktop");
    api.ok("/v1/config", &root, json!({"search.maxLimit": 100}))
        .await;
    let presets = [
        "dsh-desktop",
        "qq-owner",
        "pet",
        "qq-group-1",
        "qq-group-2",
        "qq-private-a",
    ];
    for preset in presets {
        let secret = api.token(&format!("t-{preset}"), preset);
        let (scopes, token_scenes) = memory_hub::auth::preset(preset).unwrap();
        let has = |s: &str| scopes.iter().any(|x| x == s);
        for from_owner in [false, true] {
            if from_owner && !has("from_owner") && !has("*") {
                continue;
            }
            let want: BTreeSet<String> = written
                .iter()
                .filter(|(_, scene, privacy, subject, expired)| {
                    if *expired {
                        return false;
                    }
                    let own = has("*")
                        || *scene == "shared"
                        || token_scenes.iter().any(|s| s.as_str() == *scene);
                    let readable = match privacy {
                        Privacy::Normal | Privacy::Personal => true,
                        Privacy::Sensitive => has("sensitive:read"),
                        Privacy::Secret => has("secret:read"),
                    };
                    let owners = from_owner
                        && ["main", "qq:owner"].contains(scene)
                        && matches!(privacy, Privacy::Normal | Privacy::Personal)
                        && *subject == Subject::Owner;
                    (own && readable) || owners
                })
                .map(|w| w.0.clone())
                .collect();
            // The random corpus exercises every case: the root sees most, a group little.
            match preset {
                "dsh-desktop" => assert!(want.len() > 40, "{}", want.len()),
                "qq-group-1" if !from_owner => assert!((1..20).contains(&want.len())),
                _ => {}
            }
            let body = json!({"query": "common marker", "limit": 100, "from_owner": from_owner});
            let searched: BTreeSet<String> =
                api.search_ids(&secret, body).await.into_iter().collect();
            assert_eq!(searched, want, "search: {preset} from_owner={from_owner}");
            let recent = api
                .ok(
                    "/v1/recent",
                    &secret,
                    json!({"limit": 100, "from_owner": from_owner}),
                )
                .await;
            let recent: BTreeSet<String> = ids(&recent["items"]).into_iter().collect();
            assert_eq!(recent, want, "recent: {preset} from_owner={from_owner}");
            let tl = api
                .ok(
                    "/v1/timeline",
                    &secret,
                    json!({"limit": 100, "from_owner": from_owner}),
                )
                .await;
            let tl: BTreeSet<String> = timeline_items(&tl)
                .iter()
                .map(|i| i["id"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(tl, want, "timeline: {preset} from_owner={from_owner}");
            for (id, ..) in written.iter().step_by(1) {
                let (status, _) = api
                    .post(
                        "/v1/get",
                        &secret,
                        json!({"id": id, "from_owner": from_owner}),
                    )
                    .await;
                assert_eq!(
                    status == 200,
                    want.contains(id),
                    "get {id}: {preset} from_owner={from_owner}"
                );
            }
        }
    }
}

/// Issue 13.1: full-text scores must not reveal whether a word occurs in
/// memories the caller cannot read (index-wide BM25 statistics did).
#[tokio::test]
async fn scores_carry_nothing_about_unreadable_memories() {
    let api = Api::new();
    let g1 = api.token("g1", "qq-group-1");
    for text in ["probe word qxdelta", "probe word qxnotexist"] {
        api.ok(
            "/v1/write",
            &g1,
            json!({"scene": "qq:group:1", "text": text}),
        )
        .await;
    }
    let before = fulltext_scores(&api, &g1).await;
    // The two probes are symmetric: the same score for their own word.
    assert_eq!(before[0].1.len(), 1);
    assert_eq!(before[0].1[0].1, before[1].1[0].1, "{before:?}");
    // The owner writes secret and sensitive memories with the probe words, and
    // many other memories that change the index-wide statistics.
    api.write(
        "main",
        "保险箱 qxdelta 密码提示",
        Privacy::Secret,
        Subject::Owner,
    );
    api.write(
        "main",
        "qxdelta probe word salary",
        Privacy::Sensitive,
        Subject::Owner,
    );
    for i in 0..30 {
        api.write(
            "main",
            &format!("owner note {i} probe word qxdelta"),
            Privacy::Normal,
            Subject::Owner,
        );
        api.write(
            "qq:group:2",
            &format!("other group {i} probe"),
            Privacy::Normal,
            Subject::Other,
        );
    }
    let after = fulltext_scores(&api, &g1).await;
    assert_eq!(before, after, "scores changed with memories g1 cannot read");
}

/// A query longer than the limit is refused with a clear 400, not searched.
#[tokio::test]
async fn overlong_query_is_refused() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let long = "记忆 memory ".repeat(5_000);
    let (status, v) = api
        .post(
            "/v1/search",
            &root,
            json!({"query": long, "mode": "fulltext"}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "INVALID_INPUT");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("limit"),
        "{v}"
    );
}

type Scored = Vec<(&'static str, Vec<(String, f64)>)>;

/// Ids and scores of a few probe queries in `qq:group:1`.
async fn fulltext_scores(api: &Api, token: &str) -> Scored {
    let mut out = Vec::new();
    for q in ["qxdelta", "qxnotexist", "probe word", "probe qxdelta"] {
        let v = api
            .ok(
                "/v1/search",
                token,
                json!({"query": q, "mode": "fulltext", "scene": "qq:group:1"}),
            )
            .await;
        let hits = v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["id"].as_str().unwrap().to_string(),
                    h["score"].as_f64().unwrap(),
                )
            })
            .collect();
        out.push((q, hits));
    }
    out
}
