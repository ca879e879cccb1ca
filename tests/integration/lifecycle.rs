//! Memory lifecycle (issue #5): short-term TTL with a driven clock, tiers,
//! sliding expiry and promotion replayed by reindex, dedup, supersede,
//! tags, categories and restoring expired memories.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use memory_hub::config::Config;
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::hub::{Hub, Mode, WriteAction, WriteRequest};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::{Stage, Tier};
use memory_hub::search::{SearchMode, SearchRequest};

use crate::support::{
    TempRoot, archive_restore, archive_search, categories, edit_tags, one_category, scene,
};
use serde_json::json;

/// A clock the test moves by hand.
#[derive(Clone)]
struct TestClock(Arc<Mutex<DateTime<Utc>>>);

impl TestClock {
    fn new() -> Self {
        TestClock(Arc::new(Mutex::new(
            DateTime::parse_from_rfc3339("2026-06-01T08:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
        )))
    }
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
    fn advance(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
    fn install(&self, hub: &Hub) {
        let c = self.clone();
        hub.set_clock(Arc::new(move || c.now()));
    }
}

fn open(root: &TempRoot, clock: &TestClock) -> Hub {
    let hub = root.hub();
    clock.install(&hub);
    hub.set_access_tracking(true);
    hub
}

/// A config with `lifecycle.tierExpiry` opted in.
fn tier_expiry() -> Config {
    let mut config = Config::default();
    config.lifecycle.tier_expiry = true;
    config
}

/// Like [`open`], with tier expiry opted in.
fn open_expiring(root: &TempRoot, clock: &TestClock) -> Hub {
    let hub = Hub::open_with(
        root.layout(),
        tier_expiry(),
        Mode::Write,
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap()
    .0;
    clock.install(&hub);
    hub.set_access_tracking(true);
    hub
}

/// What a caller sees now: everything unexpired.
fn visible(now: DateTime<Utc>) -> Filter {
    Filter::scope(Scope {
        unexpired_at: Some(now),
        ..Scope::default()
    })
}

fn find(hub: &Hub, query: &str, now: DateTime<Utc>) -> Vec<String> {
    hub.search_filtered(&SearchRequest {
        query: query.into(),
        filter: visible(now),
        limit: Some(10),
        mode: Some(SearchMode::Fulltext),
        min_score: None,
    })
    .unwrap()
    .hits
    .into_iter()
    .map(|h| h.memory.id)
    .collect()
}

/// An agent's retrieval: a search that counts its hits as accesses
/// (`touch: true`), as the local operator at the hub's clock. Looking alone
/// ([`find`]) counts nothing.
fn retrieve(hub: &Hub, query: &str) -> Vec<memory_hub::search::SearchHit> {
    hub.search(
        &hub.operator(),
        memory_hub::api::SearchBody {
            query: query.into(),
            limit: Some(10),
            mode: Some(SearchMode::Fulltext),
            touch: true,
            ..Default::default()
        },
    )
    .unwrap()
    .body
    .hits
}

/// Looking: the same search without counting.
fn find_hits(hub: &Hub, query: &str) -> Vec<memory_hub::search::SearchHit> {
    hub.search_filtered(&SearchRequest {
        query: query.into(),
        filter: visible(hub.now()),
        limit: Some(10),
        mode: Some(SearchMode::Fulltext),
        min_score: None,
    })
    .unwrap()
    .hits
}

fn retrieve_ids(hub: &Hub, query: &str) -> Vec<String> {
    retrieve(hub, query)
        .into_iter()
        .map(|h| h.memory.id)
        .collect()
}

fn chat(hub: &Hub, id: &str, text: &str, now: DateTime<Utc>) -> String {
    hub.ingest(
        &hub.operator(),
        memory_hub::api::IngestBody {
            scene: Some("qq:group:1".into()),
            message_id: id.into(),
            text: text.into(),
            sender: Some(memory_hub::api::Sender {
                id: "42".into(),
                name: Some("Li".into()),
            }),
            from_owner: false,
            from_self: false,
            sent_at: Some(now.fixed_offset()),
            ttl_hours: Some(24),
            session: None,
        },
    )
    .unwrap()
    .id
    .unwrap()
}

#[test]
fn short_term_chat_expires_after_its_ttl_and_recall_extends_it_up_to_the_cap() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open(&root, &clock);
    let t0 = clock.now();
    let gone = chat(&hub, "m1", "the kettle in the kitchen is broken", t0);
    let kept = chat(&hub, "m2", "the bicycle lock code changed", t0);
    assert_eq!(find(&hub, "kettle", t0), std::slice::from_ref(&gone));

    // Recalled at hour 20: lives until hour 44.
    clock.advance(Duration::hours(20));
    let extended = hub
        .extend_short_ttl(
            std::slice::from_ref(&kept),
            Duration::hours(24),
            clock.now(),
        )
        .unwrap();
    assert_eq!(extended, 1);
    clock.advance(Duration::hours(5)); // hour 25
    assert!(find(&hub, "kettle", clock.now()).is_empty(), "TTL passed");
    assert_eq!(
        find(&hub, "bicycle", clock.now()),
        std::slice::from_ref(&kept)
    );
    let everything = Filter::all();
    assert!(hub.fetch(&gone, &visible(clock.now())).is_err());
    assert!(hub.fetch(&gone, &everything).is_ok(), "the index row stays");
    assert!(
        root.journal_lines()
            .iter()
            .any(|l| l.contains("the kettle in the kitchen is broken")),
        "the journal keeps the text"
    );

    // Recalled again and again: never past 168 hours after it was written.
    for _ in 0..15 {
        clock.advance(Duration::hours(10));
        hub.extend_short_ttl(
            std::slice::from_ref(&kept),
            Duration::hours(24),
            clock.now(),
        )
        .unwrap();
    }
    let m = hub.fetch(&kept, &everything).unwrap();
    assert_eq!(m.expires_at, Some(t0 + Duration::hours(168)));
    clock.advance(Duration::hours(1000));
    assert!(find(&hub, "bicycle", clock.now()).is_empty());

    // A rebuilt index agrees.
    drop(hub);
    let (hub, _) = Hub::reindex_with(
        root.layout(),
        Config::default(),
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap();
    assert!(find(&hub, "kettle", t0 + Duration::hours(25)).is_empty());
    assert_eq!(
        hub.fetch(&kept, &everything).unwrap().expires_at,
        Some(t0 + Duration::hours(168))
    );
}

fn lifecycle_state(hub: &Hub, ids: &[String]) -> Vec<(Option<Tier>, Option<DateTime<Utc>>)> {
    ids.iter()
        .map(|id| {
            let m = hub.fetch(id, &Filter::all()).unwrap();
            (m.tier, m.expires_at)
        })
        .collect()
}

#[test]
fn promotion_and_sliding_expiry_survive_reindex() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open_expiring(&root, &clock);
    let t0 = clock.now();
    let mut req = WriteRequest::new(scene("main"), "the garage door opener battery", "test");
    req.tier = Some(Tier::T3);
    let hot = hub.append(req).unwrap().id;
    let cold = crate::support::write(&hub, "main", "granny's apple pie recipe uses cinnamon");
    let forever = {
        let mut r = WriteRequest::new(scene("main"), "our security policy requires 2FA", "test");
        r.tier = Some(Tier::T0);
        hub.append(r).unwrap().id
    };
    let before = lifecycle_state(&hub, &[hot.clone(), cold.clone(), forever.clone()]);
    assert_eq!(before[0], (Some(Tier::T3), Some(t0 + Duration::days(30))));
    assert_eq!(before[1], (Some(Tier::T2), Some(t0 + Duration::days(90))));
    assert_eq!(before[2], (Some(Tier::T0), None));

    // Five retrievals on five days: T3 → T2, expiry slides from the last one.
    for day in 1..=5 {
        clock.advance(Duration::days(1));
        assert_eq!(
            retrieve_ids(&hub, "garage opener"),
            std::slice::from_ref(&hot)
        );
        hub.flush_accesses(true).unwrap();
        let (tier, expires) = lifecycle_state(&hub, std::slice::from_ref(&hot))[0];
        if day < 5 {
            assert_eq!(tier, Some(Tier::T3), "day {day}");
            assert_eq!(expires, Some(clock.now() + Duration::days(30)));
        } else {
            assert_eq!(tier, Some(Tier::T2), "promoted after 5 accesses");
            assert_eq!(expires, Some(clock.now() + Duration::days(90)));
        }
    }
    let read = memory_hub::api::GetBody {
        id: forever.clone(),
        touch: true,
        ..Default::default()
    };
    hub.get(&hub.operator(), read).unwrap();
    hub.flush_accesses(true).unwrap();
    let touched = root
        .journal_lines()
        .iter()
        .filter(|l| l.contains(r#""op":"touch""#))
        .count();
    assert_eq!(touched, 6);

    // The untouched T2 memory expires after 90 days; the promoted one lives on.
    clock.advance(Duration::days(88));
    assert!(find(&hub, "apple pie", clock.now()).is_empty());
    assert_eq!(
        retrieve_ids(&hub, "garage opener"),
        std::slice::from_ref(&hot)
    );
    hub.flush_accesses(true).unwrap();
    // Reading the state below must not count as accesses.
    hub.set_access_tracking(false);
    let all = [hot.clone(), cold.clone(), forever.clone()];
    let live = lifecycle_state(&hub, &all);
    let report = hub.tier_report().unwrap();
    let counts: Vec<(Tier, u64, u64)> = report
        .tiers
        .iter()
        .map(|t| (t.tier, t.count, t.expired))
        .collect();
    assert_eq!(
        counts,
        [
            (Tier::T0, 1, 0),
            (Tier::T1, 0, 0),
            (Tier::T2, 1, 1),
            (Tier::T3, 0, 0)
        ]
    );

    drop(hub);
    let (hub, _) = Hub::reindex_with(
        root.layout(),
        tier_expiry(),
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap();
    clock.install(&hub);
    assert_eq!(lifecycle_state(&hub, &all), live, "reindex replays touches");
    assert!(find(&hub, "apple pie", clock.now()).is_empty());
    assert_eq!(
        find(&hub, "garage opener", clock.now()),
        std::slice::from_ref(&hot)
    );

    // The expired memory can be found in the archive and restored.
    let expired = archive_search(&hub, "apple", 10).unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, cold);
    archive_restore(&hub, &cold).unwrap();
    assert_eq!(
        find(&hub, "apple pie", clock.now()),
        std::slice::from_ref(&cold)
    );
}

#[test]
fn same_write_twice_is_one_memory_and_a_similar_write_is_another() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open(&root, &clock);
    let mut chat = WriteRequest::new(
        scene("main"),
        "Owner likes green tea in the morning",
        "test",
    );
    chat.kind = "chat".into();
    let a = hub.append(chat.clone()).unwrap();
    let b = hub.append(chat.clone()).unwrap();
    assert_eq!(a.action, WriteAction::Add);
    assert_eq!(b.action, WriteAction::Noop);
    assert_eq!(a.id, b.id);
    // Whitespace differences normalise away.
    chat.text = "  Owner likes green tea in the morning \r\n".into();
    assert_eq!(hub.append(chat).unwrap().id, a.id);

    let words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima \
                 mike november oscar papa quebec romeo sierra tango";
    let mut first = WriteRequest::new(scene("main"), words, "test");
    first.tags = vec!["radio".into()];
    first.importance = 0.3;
    let first = hub.append(first).unwrap();
    let mut second = WriteRequest::new(scene("main"), format!("{words} uniform"), "test");
    second.tags = vec!["nato".into()];
    second.importance = 0.8;
    let second = hub.append(second).unwrap();
    // Near-duplicates are never folded on write: that is consolidation's job.
    assert_eq!(second.action, WriteAction::Add);
    assert_ne!(second.id, first.id);
    let m = hub.fetch(&first.id, &Filter::all()).unwrap();
    assert_eq!(m.tags, ["radio"]);
    assert_eq!(m.importance, 0.3);
    assert_eq!(m.text, words);
    // Another scene is another memory.
    let other = hub
        .append(WriteRequest::new(scene("pet"), words, "test"))
        .unwrap();
    assert_eq!(other.action, WriteAction::Add);
}

#[test]
fn a_superseded_memory_leaves_search_but_stays_readable() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open(&root, &clock);
    let old = crate::support::write(&hub, "main", "the wifi password hint is the cat's name");
    let mut req = WriteRequest::new(scene("main"), "the wifi hint is now the dog's name", "test");
    req.supersedes = Some(old.clone());
    let new = hub.append(req).unwrap().id;
    for mode in [
        SearchMode::Fulltext,
        SearchMode::Hybrid,
        SearchMode::Semantic,
    ] {
        let ids: Vec<String> = hub
            .search_filtered(&SearchRequest {
                query: "wifi hint name".into(),
                filter: Filter::all(),
                limit: Some(10),
                mode: Some(mode),
                min_score: None,
            })
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.memory.id)
            .collect();
        assert!(ids.contains(&new), "{mode}");
        assert!(!ids.contains(&old), "{mode}: superseded memory found");
    }
    assert!(hub.fetch(&old, &visible(clock.now())).is_ok());
    drop(hub);
    let (hub, _) = Hub::reindex_with(
        root.layout(),
        Config::default(),
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap();
    let ids = crate::support::search_ids(&hub, "wifi hint name", 10);
    assert_eq!(ids, [new]);
}

#[test]
fn tags_and_importance_edits_are_put_lines_with_the_same_id() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open(&root, &clock);
    let mut req = WriteRequest::new(
        scene("main"),
        "dentist appointment every six months",
        "test",
    );
    req.tags = vec!["health".into(), "todo".into()];
    let id = hub.append(req).unwrap().id;
    let out = edit_tags(&hub, &id, &["dentist"], &["todo"], Some(0.9)).unwrap();
    assert_eq!(out.id, id);
    assert_eq!(
        serde_json::to_value(out.action).unwrap(),
        serde_json::json!("UPDATE")
    );
    let m = hub.fetch(&id, &Filter::all()).unwrap();
    assert_eq!(m.tags, ["health", "dentist"]);
    assert_eq!(m.importance, 0.9);
    assert_eq!(root.journal_lines().len(), 2);
    let missing = edit_tags(&hub, "fact-main-nope", &["x"], &[], None).unwrap_err();
    let empty = edit_tags(&hub, &id, &[], &[], None).unwrap_err();
    assert_eq!(
        empty.code(),
        memory_hub::ErrorCode::InvalidInput,
        "an edit changes something"
    );
    assert_eq!(missing.code(), memory_hub::ErrorCode::NotFound);
}

#[test]
fn categories_are_t0_documents_with_revisions_and_join_bootstrap() {
    let root = TempRoot::new();
    let hub = root.hub();
    let all = Filter::all();
    let listed = categories(&hub, json!({"action": "list"})).unwrap();
    assert!(listed.doc_ids().is_empty());
    let set = |name: &str, slot: &str, content: &str| {
        categories(
            &hub,
            json!({"action": "set", "name": name, "slot": slot, "scene": "main", "content": content}),
        )
    };
    set(
        "coding-requirements",
        "coding-requirements",
        "Every change ships with a test.",
    )
    .unwrap();
    let c = one_category(
        set(
            "coding-requirements",
            "coding-requirements",
            "Every change ships with tests and docs.",
        )
        .unwrap(),
    );
    assert_eq!(
        c.content.as_deref(),
        Some("Every change ships with tests and docs.\n")
    );
    assert_eq!(c.revisions.len(), 1);
    let old = std::fs::read_to_string(root.path().join("memories").join(&c.revisions[0])).unwrap();
    assert!(old.contains("Every change ships with a test."), "{old}");
    assert!(set("x", "nonsense", "x").is_err());
    let m = hub.fetch(&c.doc_id, &all).unwrap();
    assert_eq!(m.tier, Some(Tier::T0));
    assert_eq!(m.stage, Stage::Long);
    let boot = hub
        .bootstrap(
            &hub.operator(),
            memory_hub::api::BootstrapBody {
                recent: Some(5),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(boot.categories.len(), 1);
    assert_eq!(boot.categories[0].slot, "coding-requirements");
    let ids = crate::support::search_ids(&hub, "tests docs", 5);
    assert_eq!(
        ids.len(),
        1,
        "only the current text is indexed, not the revision"
    );
}

#[test]
fn reads_do_not_write_without_access_tracking() {
    let root = TempRoot::new();
    let hub = Hub::open_with(
        root.layout(),
        Config::default(),
        Mode::Write,
        EmbedderSlot::none("test"),
        &mut |_| {},
    )
    .unwrap()
    .0;
    let id = crate::support::write(&hub, "main", "a quiet memory");
    hub.fetch(&id, &Filter::all()).unwrap();
    hub.flush_accesses(true).unwrap();
    drop(hub);
    assert_eq!(root.journal_lines().len(), 1);
}

mod http {
    use serde_json::json;

    use crate::http_support::Api;

    #[tokio::test]
    async fn tags_categories_archive_and_health_over_http() {
        let api = Api::new();
        let root = api.token("root", "dsh-desktop");
        let w = api
            .ok(
                "/v1/write",
                &root,
                json!({"text": "the spare key is under the flower pot", "tags": ["home", "old"]}),
            )
            .await;
        let id = w["id"].as_str().unwrap().to_string();
        let again = api
            .ok(
                "/v1/write",
                &root,
                json!({"text": "the spare key is under the flower pot"}),
            )
            .await;
        assert_eq!(
            (again["action"].as_str(), again["id"].as_str()),
            (Some("NOOP"), Some(id.as_str()))
        );
        let t = api
            .ok(
                "/v1/tags",
                &root,
                json!({"id": id, "add": ["keys"], "remove": ["old"], "importance": 0.7}),
            )
            .await;
        assert_eq!(t["action"], "UPDATE");
        assert_eq!(t["tags"], json!(["home", "keys"]));

        let c = api
            .ok(
                "/v1/categories",
                &root,
                json!({"action": "set", "name": "values", "slot": "company-values", "content": "Be kind. Ship small."}),
            )
            .await;
        assert_eq!(c["slot"], "company-values");
        let list = api
            .ok("/v1/categories", &root, json!({"action": "list"}))
            .await;
        assert_eq!(list["categories"].as_array().unwrap().len(), 1);
        let boot = api.ok("/v1/bootstrap", &root, json!({})).await;
        assert_eq!(boot["categories"][0]["slot"], "company-values");
        assert_eq!(boot["categories"][0]["name"], "values");
        let pet = api.token("pet", "pet");
        let (status, _) = api
            .post(
                "/v1/categories",
                &pet,
                json!({"action": "set", "name": "values", "slot": "custom", "content": "x"}),
            )
            .await;
        assert_eq!(status, 403);

        let (status, health) = api.get("/v1/health", Some(&root)).await;
        assert_eq!(status, 200);
        assert_eq!(health["tiers"]["over_capacity"], false);
        assert_eq!(health["tiers"]["tiers"][2]["tier"], "t2");
        assert_eq!(health["tiers"]["tiers"][2]["count"], 1);

        // Chat ingested now; 91 days later the long-term T2 note is still
        // there (long-term memories do not expire by default), the chat has
        // expired, and the archive finds and restores it.
        let chat = api
            .ok(
                "/v1/ingest",
                &root,
                json!({"message_id": "m1", "text": "the blue umbrella is in the car"}),
            )
            .await;
        let chat = chat["id"].as_str().unwrap().to_string();
        api.set_now(Some(chrono::Utc::now() + chrono::Duration::days(91)));
        let ids = api
            .search_ids(
                &root,
                json!({"query": "spare key flower pot", "mode": "fulltext"}),
            )
            .await;
        assert_eq!(ids, std::slice::from_ref(&id));
        let (_, hits) = api
            .post(
                "/v1/search",
                &root,
                json!({"query": "blue umbrella car", "mode": "fulltext"}),
            )
            .await;
        assert!(hits["hits"].as_array().unwrap().is_empty(), "{hits}");
        let found = api
            .ok("/v1/archive/search", &root, json!({"query": "umbrella"}))
            .await;
        assert_eq!(found["items"][0]["id"], chat.as_str());
        let back = api
            .ok("/v1/archive/restore", &root, json!({"id": chat}))
            .await;
        assert_eq!(back["id"], chat.as_str());
        let ids = api
            .search_ids(
                &root,
                json!({"query": "blue umbrella car", "mode": "fulltext"}),
            )
            .await;
        assert_eq!(ids, [chat]);
    }
}

#[test]
fn archived_months_read_transparently_and_reindex_gives_the_same_results() {
    let root = TempRoot::new();
    let clock = TestClock::new(); // 2026-06-01
    let hub = open(&root, &clock);
    let texts = [
        ("2026-01-10T10:00:00Z", "january ski trip to the alps"),
        (
            "2026-02-11T10:00:00Z",
            "february tax documents are in the blue folder",
        ),
        ("2026-03-12T10:00:00Z", "march ski wax needs replacing"),
        ("2026-05-13T10:00:00Z", "may garden ski poles in the shed"),
    ];
    let mut ids = Vec::new();
    for (ts, text) in texts {
        let mut req = WriteRequest::new(scene("main"), text, "import");
        req.ts = Some(
            DateTime::parse_from_rfc3339(ts)
                .unwrap()
                .with_timezone(&Utc),
        );
        ids.push(hub.append(req).unwrap().id);
    }
    let queries = ["ski", "tax folder", "garden shed", "alps"];
    let results = |hub: &Hub| -> Vec<Vec<String>> {
        queries.iter().map(|q| find(hub, q, clock.now())).collect()
    };
    let before = results(&hub);
    assert_eq!(before[0].len(), 3);

    let archived = hub.archive_journal(Some(2)).unwrap();
    let months: Vec<&str> = archived.iter().map(|m| m.month.as_str()).collect();
    let dev = hub.device().to_string();
    let month = |m: &str| format!("{dev}/{m}");
    assert_eq!(
        months,
        [
            month("2026-01.jsonl"),
            month("2026-02.jsonl"),
            month("2026-03.jsonl")
        ]
    );
    let facts = root.path().join("memories/facts");
    assert!(
        facts
            .join(format!("archive/{dev}/2026-01.jsonl.gz"))
            .exists()
    );
    assert!(!facts.join(month("2026-01.jsonl")).exists());
    assert!(facts.join(month("2026-05.jsonl")).exists());
    assert_eq!(results(&hub), before);
    assert!(
        hub.archive_journal(Some(2)).unwrap().is_empty(),
        "idempotent"
    );

    // A rewrite of an archived fact appends to its month again.
    edit_tags(&hub, &ids[0], &["winter"], &[], None).unwrap();
    assert!(facts.join(month("2026-01.jsonl")).exists());
    // The rewrite is the newest version now, which breaks equal scores in
    // its favour: what reopening and rebuilding must keep is this order.
    let before = results(&hub);
    let exported = memory_hub::transfer::live_facts(&hub, &[]).unwrap();
    assert_eq!(exported.len(), 4);
    drop(hub);

    // Reopening does not re-read archived months; a rebuild reads them all.
    let hub = root.hub();
    clock.install(&hub);
    assert_eq!(results(&hub), before);
    drop(hub);
    std::fs::remove_dir_all(root.path().join("data")).unwrap();
    let (hub, report) = Hub::reindex_with(
        root.layout(),
        Config::default(),
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
        &mut |_| {},
    )
    .unwrap();
    clock.install(&hub);
    // Four puts and the rewrite: looking (the searches) writes no touch line.
    assert_eq!(report.records, 5);
    assert_eq!(report.bad_lines, 0);
    assert_eq!(results(&hub), before);
    assert_eq!(hub.fetch(&ids[0], &Filter::all()).unwrap().tags, ["winter"]);
    // Semantic search sees archived memories too.
    let semantic = hub
        .search_filtered(&SearchRequest {
            query: "tax documents folder".into(),
            filter: visible(clock.now()),
            limit: Some(3),
            mode: Some(SearchMode::Semantic),
            // Whether the hash embedder's neighbour is about the question is
            // not under test: only that archived memories are there.
            min_score: Some(0.0),
        })
        .unwrap();
    assert_eq!(semantic.hits[0].memory.id, ids[1]);
}

#[test]
fn memd_archive_compresses_old_months_from_the_cli() {
    let root = TempRoot::new();
    {
        let hub = root.hub();
        let mut req =
            WriteRequest::new(scene("main"), "an old note about the lighthouse", "import");
        req.ts = Some(Utc::now() - Duration::days(400));
        hub.append(req).unwrap();
        crate::support::write(&hub, "main", "a fresh note about the harbour");
    }
    let out = root.memd_json(&["archive", "--older-than-months", "3"]);
    assert_eq!(out["archived"].as_array().unwrap().len(), 1, "{out}");
    let hits = root.memd_json(&["search", "lighthouse"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1, "{hits}");
    let none = root.memd_json(&["archive", "search", "lighthouse"]);
    assert!(none["items"].as_array().unwrap().is_empty(), "not expired");
    root.memd_json(&["reindex"]);
    let hits = root.memd_json(&["search", "lighthouse"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1, "{hits}");
}

#[test]
fn ranking_weighs_short_term_down_and_flags_expiring_soon() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open_expiring(&root, &clock);
    let short = chat(&hub, "m1", "blue umbrella by the door", clock.now());
    let long = crate::support::write(&hub, "qq:group:1", "blue umbrella by the door, kept");
    let hits = hub
        .search_filtered(&SearchRequest {
            query: "blue umbrella door".into(),
            filter: visible(clock.now()),
            limit: Some(5),
            mode: Some(SearchMode::Fulltext),
            min_score: None,
        })
        .unwrap()
        .hits;
    let ids: Vec<&str> = hits.iter().map(|h| h.memory.id.as_str()).collect();
    assert_eq!(ids, [long.as_str(), short.as_str()]);

    let mut req = WriteRequest::new(scene("main"), "renew the parking permit", "test");
    req.tier = Some(Tier::T3);
    let soon = hub.append(req).unwrap().id;
    // The warning window is a seventh of the lifetime (30 days: 4.3 days).
    clock.advance(Duration::days(25));
    let hits = find_hits(&hub, "parking permit");
    assert_eq!(hits[0].memory.id, soon);
    assert!(!hits[0].expiring_soon, "5 days left of 30");
    clock.advance(Duration::days(1));
    let hits = retrieve(&hub, "parking permit");
    assert_eq!(hits[0].memory.id, soon);
    assert!(hits[0].expiring_soon, "4 days left of 30");
    hub.flush_accesses(true).unwrap();
    let again = hub
        .search_filtered(&SearchRequest {
            query: "parking permit".into(),
            filter: visible(clock.now()),
            limit: Some(5),
            mode: Some(SearchMode::Fulltext),
            min_score: None,
        })
        .unwrap()
        .hits;
    assert!(!again[0].expiring_soon, "the retrieval slid the expiry");
}

#[test]
fn a_lost_text_index_catches_up_to_the_same_lifecycle_state() {
    let root = TempRoot::new();
    let clock = TestClock::new();
    let hub = open(&root, &clock);
    let mut req = WriteRequest::new(scene("main"), "the boiler service contract", "test");
    req.tier = Some(Tier::T3);
    let id = hub.append(req).unwrap().id;
    for _ in 0..3 {
        clock.advance(Duration::days(20));
        assert_eq!(
            retrieve_ids(&hub, "boiler contract"),
            std::slice::from_ref(&id)
        );
        hub.flush_accesses(true).unwrap();
    }
    drop(hub);
    // tantivy loses everything it had (as if never committed); SQLite keeps its state.
    std::fs::remove_dir_all(root.path().join("data/index/text")).unwrap();
    let hub = root.hub();
    clock.install(&hub);
    clock.advance(Duration::days(25));
    assert_eq!(
        find(&hub, "boiler contract", clock.now()),
        std::slice::from_ref(&id),
        "the slid expiry holds in tantivy too"
    );
}
