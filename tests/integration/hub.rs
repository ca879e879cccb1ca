//! The application service: concurrency, idempotency, filters, journal problems.

use std::io::Write;
use std::sync::Arc;

use memory_hub::hub::{WriteAction, WriteRequest};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::{Privacy, Stage};
use memory_hub::search::SearchRequest;

use crate::support::{TempRoot, scene, search_ids, write};

#[test]
fn concurrent_writers_lose_nothing() {
    let root = TempRoot::new();
    let hub = Arc::new(root.hub());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let hub = Arc::clone(&hub);
            std::thread::spawn(move || {
                (0..25)
                    .map(|i| write(&hub, "main", &format!("thread{t} item{i} concurrentword")))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let ids: Vec<String> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(ids.len(), 200);
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 200, "ids are unique");
    assert_eq!(root.journal_lines().len(), 200);
    for id in &ids {
        hub.fetch(id, &Filter::all()).unwrap();
    }
    assert_eq!(hub.stats().unwrap().counts.facts, 200);
    assert_eq!(
        search_ids(&hub, "thread3 item7", 10).first(),
        Some(&ids[3 * 25 + 7])
    );
}

#[test]
fn idempotency_key_returns_the_same_id() {
    let root = TempRoot::new();
    let hub = root.hub();
    let mut req = WriteRequest::new(scene("main"), "pay rent on the first", "test");
    req.idempotency_key = Some("client-42".into());
    let first = hub.append(req.clone()).unwrap();
    let second = hub.append(req).unwrap();
    assert_eq!(first.action, WriteAction::Add);
    assert_eq!(second.action, WriteAction::Noop);
    assert_eq!(first.id, second.id);
    assert_eq!(root.journal_lines().len(), 1);
}

#[test]
fn filters_restrict_search_and_get() {
    let root = TempRoot::new();
    let hub = root.hub();
    let group = write(&hub, "qq:group:1", "group talks about the picnic");
    let owner = write(&hub, "qq:owner", "owner plans the picnic");
    let mut req = WriteRequest::new(scene("main"), "picnic budget is private", "test");
    req.privacy = Privacy::Sensitive;
    let sensitive = hub.append(req).unwrap().id;
    let mut req = WriteRequest::new(scene("qq:group:1"), "picnic chatter", "test");
    req.stage = Stage::Short;
    let short = hub.append(req).unwrap().id;

    let search = |filter: Filter| -> Vec<String> {
        let mut ids: Vec<String> = hub
            .search_filtered(&SearchRequest {
                query: "picnic".into(),
                filter,
                limit: Some(10),
                mode: None,
                min_score: None,
            })
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.memory.id)
            .collect();
        ids.sort();
        ids
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let group_scope = Scope {
        scenes: vec![scene("qq:group:1")],
        privacy: vec![Privacy::Normal, Privacy::Personal],
        ..Scope::default()
    };
    assert_eq!(
        search(Filter::scope(group_scope.clone())),
        sorted(vec![group.clone(), short.clone()])
    );
    let no_sensitive = Scope {
        privacy: vec![Privacy::Normal, Privacy::Personal],
        ..Scope::default()
    };
    assert_eq!(
        search(Filter::scope(no_sensitive)),
        sorted(vec![group.clone(), owner.clone(), short.clone()])
    );
    let long_only = Scope {
        stages: vec![Stage::Long],
        ..Scope::default()
    };
    assert_eq!(
        search(Filter::scope(long_only)),
        sorted(vec![group.clone(), owner.clone(), sensitive.clone()])
    );
    assert_eq!(search(Filter { any_of: vec![] }), Vec::<String>::new());

    // get honours the same filter: invisible is NOT_FOUND, not FORBIDDEN.
    let err = hub
        .fetch(&owner, &Filter::scope(group_scope.clone()))
        .unwrap_err();
    assert_eq!(err.code().as_str(), "NOT_FOUND");
    // and so does forget.
    let err = hub
        .tombstone(&owner, None, "test", &Filter::scope(group_scope))
        .unwrap_err();
    assert_eq!(err.code().as_str(), "NOT_FOUND");
    hub.fetch(&owner, &Filter::all()).unwrap();
}

#[test]
fn and_pass_first_then_or_fallback() {
    let root = TempRoot::new();
    let hub = root.hub();
    let both = write(&hub, "main", "alpha beta together");
    let alpha = write(&hub, "main", "alpha alone");
    let results = hub
        .search_filtered(&SearchRequest {
            query: "alpha beta".into(),
            filter: Filter::all(),
            limit: Some(5),
            mode: Some(memory_hub::search::SearchMode::Fulltext),
            // The passes are under test, not which hits are about the query.
            min_score: Some(0.0),
        })
        .unwrap();
    let got: Vec<(String, String)> = results
        .hits
        .iter()
        .map(|h| (h.memory.id.clone(), format!("{:?}", h.pass)))
        .collect();
    assert_eq!(got, vec![(both, "And".into()), (alpha, "Or".into())]);
}

#[test]
fn corrupt_lines_are_reported_with_file_and_line_and_neighbours_survive() {
    let root = TempRoot::new();
    let (first, file) = {
        let hub = root.hub();
        let id = write(&hub, "main", "before the damage");
        let file = root.journal_files().remove(0);
        (id, file)
    };
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(b"this is not json\n").unwrap();
    drop(f);
    let hub = root.hub();
    let second = write(&hub, "main", "after the damage");
    assert_eq!(search_ids(&hub, "damage", 10).len(), 2);
    hub.fetch(&first, &Filter::all()).unwrap();
    hub.fetch(&second, &Filter::all()).unwrap();
    let issues = hub.stats().unwrap().issues;
    let name = file
        .strip_prefix(root.path().join("memories/facts"))
        .unwrap()
        .to_str()
        .unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(
        issues[0].starts_with(&format!("facts/{name}:2:")),
        "{issues:?}"
    );
}

/// A Chinese word beats the same two characters straddling two words: `和服`
/// (kimono) is a word in the first memory, `和` + `服务员` in the second. The
/// bigram field scores both alike; the jieba words field decides.
#[test]
fn a_chinese_word_outranks_the_same_bigram_across_a_word_boundary() {
    use crate::support::{TempRoot, ranked_ids, write};
    let root = TempRoot::new();
    let hub = root.hub();
    // Written first, so it has the smaller id and would win a tie.
    let across = write(&hub, "main", "我和服务员聊天");
    let word = write(&hub, "main", "她穿着和服拍照");
    assert!(across < word);
    // The ranking is under test; the decision drops the bigram-only match.
    assert_eq!(ranked_ids(&hub, "和服", 2), [word, across]);
}

/// Issue: `Utc::now()` calls bypassed the hub's clock, so a "last week"
/// query ignored a test clock (the search anchored relative dates on the
/// system clock). The hub's one clock now anchors them: moving it moves
/// "last week".
#[test]
fn last_week_follows_the_hubs_clock() {
    let root = TempRoot::new();
    let hub = root.hub();
    let at = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let set_clock = |t: &str| {
        let now = at(t);
        hub.set_clock(Arc::new(move || now));
    };
    set_clock("2026-03-18T12:00:00Z");
    // The same words (the same BM25 score), said at different times.
    let write_at = |text: &str, time: &str| {
        let body = memory_hub::api::WriteBody {
            text: text.into(),
            time: Some(time.into()),
            ..Default::default()
        };
        hub.write(&hub.operator(), body).unwrap().id
    };
    let recent = write_at("visited the aquarium with Mia", "2026-03-11");
    let older = write_at("with Mia visited the aquarium", "2025-09-10");
    let search = |query: &str| {
        let body = memory_hub::api::SearchBody {
            query: query.into(),
            mode: Some(memory_hub::search::SearchMode::Fulltext),
            // The clock's part in the ranking is under test.
            min_score: Some(0.0),
            ..Default::default()
        };
        hub.search(&hub.operator(), body).unwrap().body.hits
    };
    let hits = search("aquarium with Mia last week");
    assert_eq!(hits[0].memory.id, recent, "{hits:#?}");
    assert!(hits[0].score > 1.5 * hits[1].score, "{hits:#?}");
    // A year later, last week is another week: neither memory is in it.
    set_clock("2027-03-18T12:00:00Z");
    let hits = search("aquarium with Mia last week");
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].score, hits[1].score, "{hits:#?}");
    // And in September 2025 the older one was said last week.
    set_clock("2025-09-16T12:00:00Z");
    let hits = search("aquarium with Mia last week");
    assert_eq!(hits[0].memory.id, older, "{hits:#?}");
}
