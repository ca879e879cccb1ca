//! Event time, session and speaker; session neighbours as search context; time in queries.
//!
//! Searches here run with the relevance decision off (`min_score: 0`): the
//! decision reads a memory's own words, so by default a turn found only by
//! its neighbours' words is left out; what is under test is what the index
//! finds and how it ranks.

use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::{Privacy, Setting};
use memory_hub::search::{SearchMode, SearchRequest};
use serde_json::json;

use crate::http_support::Api;
use crate::support::{TempRoot, ranked_ids, scene};

/// Writes one turn of a session and returns its id.
fn turn(hub: &Hub, scene_name: &str, session: &str, text: &str, privacy: Privacy) -> String {
    let mut req = WriteRequest::new(scene(scene_name), text, "test");
    req.privacy = privacy;
    req.setting = Setting::from_input(Some("1:56 pm on 8 May, 2023"), Some(session), Some("Mel"));
    hub.append(req).unwrap().id
}

/// Ids and scores of a full-text search.
fn scored(hub: &Hub, query: &str, filter: Filter) -> Vec<(String, f32)> {
    hub.search_filtered(&SearchRequest {
        query: query.into(),
        filter,
        limit: Some(10),
        mode: Some(SearchMode::Fulltext),
        min_score: Some(0.0),
    })
    .unwrap()
    .hits
    .into_iter()
    .map(|h| (h.memory.id, h.score))
    .collect()
}

/// Red team: a hidden turn written between two readable ones of the same session
/// changed which turn the second one found through context — an oracle for the
/// hidden turn's existence. Ids and scores must not move.
#[test]
fn a_hidden_turn_between_two_readable_ones_changes_nothing_a_reader_sees() {
    let root = TempRoot::new();
    let hub = root.hub();
    let at = |time: &str, text: &str, privacy: Privacy| {
        let mut req = WriteRequest::new(scene("main"), text, "test");
        req.privacy = privacy;
        req.setting = Setting::from_input(Some(time), Some("p"), Some("Mel"));
        hub.append(req).unwrap().id
    };
    at(
        "2023-05-08T10:00:00Z",
        "a grey heron on the pond",
        Privacy::Normal,
    );
    at(
        "2023-05-08T10:02:00Z",
        "it flew off over the reeds",
        Privacy::Normal,
    );
    let before = scored(&hub, "heron", normal_only());
    assert_eq!(before.len(), 2, "{before:?}");
    at(
        "2023-05-08T10:01:00Z",
        "my blood test came back fine",
        Privacy::Sensitive,
    );
    assert_eq!(scored(&hub, "heron", normal_only()), before);
    assert_eq!(scored(&hub, "reeds", normal_only()).len(), 2);
}

fn search_with(hub: &Hub, query: &str, filter: Filter) -> Vec<String> {
    scored(hub, query, filter)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

fn normal_only() -> Filter {
    Filter::scope(Scope {
        privacy: vec![Privacy::Normal],
        ..Scope::default()
    })
}

#[test]
fn a_turn_is_found_by_the_words_of_its_neighbours_but_ranks_below_the_turn_that_says_them() {
    let root = TempRoot::new();
    let hub = root.hub();
    let a = turn(
        &hub,
        "main",
        "s1",
        "We adopted a puppy called Biscuit",
        Privacy::Normal,
    );
    let b = turn(
        &hub,
        "main",
        "s1",
        "That is wonderful news, congratulations",
        Privacy::Normal,
    );
    let c = turn(
        &hub,
        "main",
        "s1",
        "Thanks, the kids love him",
        Privacy::Normal,
    );
    // Another session of the same scene is not a neighbour.
    let other = turn(&hub, "main", "s2", "What a sunny morning", Privacy::Normal);
    let hits = ranked_ids(&hub, "puppy", 10);
    assert_eq!(hits.first(), Some(&a), "{hits:?}");
    assert!(
        hits.contains(&b),
        "the next turn is found by context: {hits:?}"
    );
    assert!(
        !hits.contains(&c),
        "two turns away is outside the window: {hits:?}"
    );
    assert!(!hits.contains(&other));
    // The stored text is unchanged: context is an index field only.
    let got = hub.fetch(&b, &Filter::all()).unwrap();
    assert_eq!(got.text, "That is wonderful news, congratulations");
    assert_eq!(got.setting.session.as_deref(), Some("s1"));
    assert_eq!(got.setting.speaker.as_deref(), Some("Mel"));
    assert_eq!(
        got.setting.time_at.map(|t| t.to_rfc3339()),
        Some("2023-05-08T13:56:00+00:00".to_string())
    );
}

#[test]
fn a_neighbour_of_another_privacy_lends_no_words_and_a_forgotten_one_stops_lending_them() {
    let root = TempRoot::new();
    let hub = root.hub();
    let before = turn(&hub, "main", "s1", "Just a normal morning", Privacy::Normal);
    let private = turn(
        &hub,
        "main",
        "s1",
        "My diagnosis is zebrafish syndrome",
        Privacy::Personal,
    );
    let after = turn(
        &hub,
        "main",
        "s1",
        "Anyway, lunch was good",
        Privacy::Normal,
    );
    // A caller who may read only normal memories finds nothing by the personal turn's words.
    assert!(search_with(&hub, "zebrafish", normal_only()).is_empty());
    // The operator finds the personal turn itself, and its normal neighbours not through it.
    assert_eq!(
        search_with(&hub, "zebrafish", Filter::all()),
        vec![private.clone()]
    );
    // Neighbours are counted among turns of the same privacy: the two normal turns are
    // each other's neighbours across the personal one, exactly as once it is forgotten.
    assert_eq!(
        search_with(&hub, "lunch", normal_only()),
        vec![after.clone(), before.clone()]
    );
    hub.tombstone(&private, None, "test", &Filter::all())
        .unwrap();
    assert!(search_with(&hub, "zebrafish", Filter::all()).is_empty());
    assert_eq!(
        search_with(&hub, "lunch", normal_only()),
        vec![after.clone(), before.clone()]
    );
    // Forgetting a turn removes its words from its neighbours' context.
    hub.tombstone(&after, None, "test", &Filter::all()).unwrap();
    assert!(search_with(&hub, "lunch", Filter::all()).is_empty());
}

#[test]
fn a_superseded_turn_lends_no_words() {
    let root = TempRoot::new();
    let hub = root.hub();
    let a = turn(
        &hub,
        "main",
        "s1",
        "The meeting is in Lisbon",
        Privacy::Normal,
    );
    let b = turn(
        &hub,
        "main",
        "s1",
        "Great, I will book the flights",
        Privacy::Normal,
    );
    assert!(ranked_ids(&hub, "lisbon", 10).contains(&b));
    let mut fix = WriteRequest::new(scene("main"), "The meeting is in Porto", "test");
    fix.supersedes = Some(a.clone());
    fix.setting = Setting::from_input(None, Some("other"), None);
    hub.append(fix).unwrap();
    assert!(ranked_ids(&hub, "lisbon", 10).is_empty());
}

#[test]
fn rebuilt_context_equals_the_incremental_one() {
    let root = TempRoot::new();
    let queries = ["puppy", "lunch", "flights", "mel", "may 2023", "morning"];
    let before: Vec<Vec<String>> = {
        let hub = root.hub();
        let mut ids = Vec::new();
        for (i, text) in [
            "We adopted a puppy",
            "Lovely! What breed?",
            "A beagle, he loves lunch",
            "Lunch with the team today",
            "I will book the flights",
            "Morning run done",
        ]
        .iter()
        .enumerate()
        {
            let privacy = if i == 3 {
                Privacy::Personal
            } else {
                Privacy::Normal
            };
            ids.push(turn(&hub, "main", &format!("s{}", i / 3), text, privacy));
        }
        hub.tombstone(&ids[4], None, "test", &Filter::all())
            .unwrap();
        queries.iter().map(|q| ranked_ids(&hub, q, 10)).collect()
    };
    assert!(
        before.iter().filter(|r| !r.is_empty()).count() >= 4,
        "{before:?}"
    );
    std::fs::remove_dir_all(root.path().join("data")).unwrap();
    root.memd_json(&["reindex"]);
    let hub = root.hub();
    let after: Vec<Vec<String>> = queries.iter().map(|q| ranked_ids(&hub, q, 10)).collect();
    assert_eq!(after, before);
}

#[test]
fn a_date_in_the_query_ranks_memories_from_then_higher() {
    let root = TempRoot::new();
    let hub = root.hub();
    let mut ids = Vec::new();
    for (time, n) in [
        ("3 March, 2023", "one"),
        ("8 May, 2023", "two"),
        ("9 July, 2023", "three"),
    ] {
        // Distinct texts (exact duplicates would be one memory) without the date in them.
        let text = format!("Went hiking with the dog, take {n}");
        let mut req = WriteRequest::new(scene("main"), text, "test");
        req.setting = Setting::from_input(Some(time), None, None);
        ids.push(hub.append(req).unwrap().id);
    }
    let first = |q: &str| ranked_ids(&hub, q, 10).first().cloned();
    assert_eq!(
        first("hiking with the dog in May 2023"),
        Some(ids[1].clone())
    );
    assert_eq!(
        first("hiking with the dog on 9 July, 2023"),
        Some(ids[2].clone())
    );
    // A boost, not a filter: the others are still found.
    assert_eq!(ranked_ids(&hub, "hiking in May 2023", 10).len(), 3);
}

#[tokio::test]
async fn http_write_keeps_the_event_time_session_and_speaker_and_refuses_bad_ones() {
    let api = Api::new();
    let token = api.token("agent", "qq-owner");
    let v = api
        .ok(
            "/v1/write",
            &token,
            json!({"text": "We met at the café", "time": "2023年5月8日 下午1:56",
                   "session": "chat-42", "speaker": "Caroline"}),
        )
        .await;
    let id = v["id"].as_str().unwrap().to_string();
    let got = api.ok("/v1/get", &token, json!({"id": id})).await;
    let m = &got;
    assert_eq!(m["time"], "2023年5月8日 下午1:56", "{got}");
    assert_eq!(m["time_at"], "2023-05-08T13:56:00Z", "{got}");
    assert_eq!(m["session"], "chat-42");
    assert_eq!(m["speaker"], "Caroline");
    let line = api
        .root
        .journal_lines()
        .into_iter()
        .find(|l| l.contains(&id))
        .unwrap();
    assert!(
        line.contains(r#""time_at":"2023-05-08T13:56:00Z""#),
        "{line}"
    );
    // A free-text time that names no date is kept without a timestamp.
    let v = api
        .ok(
            "/v1/write",
            &token,
            json!({"text": "Some day", "time": "last summer"}),
        )
        .await;
    let got = api.ok("/v1/get", &token, json!({"id": v["id"]})).await;
    let m = &got;
    assert_eq!(m["time"], "last summer");
    assert!(m.get("time_at").is_none(), "{got}");
    for bad in [
        json!({"text": "x", "time": "t".repeat(201)}),
        json!({"text": "x", "session": "a\u{7}b"}),
        json!({"text": "x", "speaker": "s".repeat(300)}),
    ] {
        let (status, err) = api.post("/v1/write", &token, bad).await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(err["error"]["code"], "INVALID_INPUT", "{err}");
    }
}

fn ingest(hub: &Hub, id: &str, text: &str, sent_at: &str, session: Option<&str>) -> String {
    let sent_at = chrono::DateTime::parse_from_rfc3339(sent_at).unwrap();
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
            sent_at: Some(sent_at),
            ttl_hours: Some(24 * 7),
            session: session.map(String::from),
        },
    )
    .unwrap()
    .id
    .unwrap()
}

#[test]
fn ingested_chat_given_a_session_is_context_for_its_neighbours() {
    let root = TempRoot::new();
    let hub = root.hub();
    let now = chrono::Utc::now();
    let day = |d: i64| {
        (now - chrono::Duration::days(d))
            .format("%Y-%m-%dT09:00:00Z")
            .to_string()
    };
    let session = &day(2)[..10];
    let asked = ingest(&hub, "m1", "周末去不去爬山", &day(2), Some(session));
    let answer = ingest(&hub, "m2", "好啊，几点出发", &day(2), Some(session));
    let next_day = ingest(&hub, "m3", "早上八点", &day(1), Some(&day(1)[..10]));
    let alone = ingest(&hub, "m4", "我也去", &day(2), None);
    let got = hub.fetch(&answer, &Filter::all()).unwrap();
    assert_eq!(got.setting.speaker.as_deref(), Some("Li"));
    assert_eq!(got.setting.session.as_deref(), Some(session));
    assert_eq!(
        hub.fetch(&alone, &Filter::all()).unwrap().setting.session,
        None
    );
    assert!(got.setting.time_at.is_some());
    let hits = ranked_ids(&hub, "爬山", 10);
    assert_eq!(hits.first(), Some(&asked), "{hits:?}");
    assert!(hits.contains(&answer), "{hits:?}");
    assert!(!hits.contains(&next_day), "another session: {hits:?}");
    assert!(
        !hits.contains(&alone),
        "no session, no neighbours: {hits:?}"
    );
}

/// Red team: a display name over 200 bytes or with a control character made
/// the whole chat message fail; the name is fitted, the message kept.
#[test]
fn a_chat_message_is_never_refused_over_its_senders_name() {
    let root = TempRoot::new();
    let hub = root.hub();
    for (i, name) in ["名".repeat(120), "Ann\u{7}\nLee".to_string()]
        .into_iter()
        .enumerate()
    {
        let out = hub
            .ingest(
                &hub.operator(),
                memory_hub::api::IngestBody {
                    scene: Some("qq:group:1".into()),
                    message_id: format!("m{i}"),
                    text: format!("the kettle is broken {i}"),
                    sender: Some(memory_hub::api::Sender {
                        id: "42".into(),
                        name: Some(name),
                    }),
                    from_owner: false,
                    from_self: false,
                    sent_at: None,
                    ttl_hours: Some(24),
                    session: None,
                },
            )
            .unwrap();
        let got = hub.fetch(&out.id.unwrap(), &Filter::all()).unwrap();
        let speaker = got.setting.speaker.unwrap();
        assert!(speaker.len() <= 200 && !speaker.chars().any(char::is_control));
    }
}
