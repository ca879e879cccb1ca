//! The write rules ("never lose a memory"): exact-only dedup (similar but
//! different statements are separate memories, with the real model loaded),
//! no expiry for long-term memories by default, one validation for every way
//! a record enters (write, import, replay), idempotency keys per token.

use chrono::{DateTime, Duration, Utc};
use memory_hub::config::Config;
use memory_hub::error::ErrorCode;
use memory_hub::hub::{Hub, Mode, WriteAction, WriteRequest};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::{MAX_TEXT_BYTES, Privacy, Stage, Tier};
use memory_hub::transfer::{self, Format, ImportDefaults};
use serde_json::{Value, json};

use crate::http_support::Api;
use crate::support::{TempRoot, TestClock, archive_restore, archive_search, scene};

// ---------------------------------------------------------------------------
// Helpers

fn open_with(root: &TempRoot, config: Config, clock: &TestClock) -> Hub {
    let hub = root.hub_configured(config);
    clock.install(&hub);
    hub
}

fn expiring_config() -> Config {
    let mut c = Config::default();
    c.lifecycle.tier_expiry = true;
    c
}

/// What a caller sees at `now`: everything unexpired.
fn visible(now: DateTime<Utc>) -> Filter {
    Filter::scope(Scope {
        unexpired_at: Some(now),
        ..Scope::default()
    })
}

/// A journal `put` line: a valid long-term fact, with `extra` fields replaced.
fn put_line(id: &str, text: &str, extra: Value) -> String {
    let mut v = json!({
        "op": "put", "v": 1, "id": id, "ts": "2026-06-01T08:00:00Z", "scene": "main",
        "kind": "note", "stage": "long", "text": text, "privacy": "normal",
        "subject": "owner", "source": "sync", "importance": 0.5, "tier": "t2",
    });
    for (k, val) in extra.as_object().unwrap() {
        v[k] = val.clone();
    }
    serde_json::to_string(&v).unwrap()
}

fn append_journal(root: &TempRoot, file: &str, lines: &[String]) {
    use std::io::Write;
    let dir = root.path().join("memories/facts");
    std::fs::create_dir_all(&dir).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(file))
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    f.sync_all().unwrap();
}

/// Chinese numerals for 1–39.
fn cn(n: u32) -> String {
    const D: [&str; 10] = ["", "一", "二", "三", "四", "五", "六", "七", "八", "九"];
    match n {
        1..=9 => D[n as usize].to_string(),
        10 => "十".into(),
        11..=19 => format!("十{}", D[(n - 10) as usize]),
        _ => format!("{}十{}", D[(n / 10) as usize], D[(n % 10) as usize]),
    }
}

/// Distinct statements that a sentence embedder finds very similar:
/// negations, corrected numbers and dates, other people, contradictions.
fn similar_statements() -> Vec<String> {
    let mut out = Vec::new();
    // zh: corrected dates.
    for m in 1..=12 {
        for d in [3, 5, 15] {
            out.push(format!("主人的生日是{}月{}日", cn(m), cn(d)));
        }
    }
    // zh: negations.
    for drink in [
        "咖啡",
        "绿茶",
        "红茶",
        "可乐",
        "牛奶",
        "豆浆",
        "啤酒",
        "果汁",
        "奶茶",
        "白开水",
    ] {
        out.push(format!("主人喜欢喝{drink}"));
        out.push(format!("主人不喜欢喝{drink}"));
    }
    // zh: other people, other places.
    for who in ["女儿", "儿子"] {
        for city in ["北京", "上海", "广州", "成都", "杭州"] {
            for school in ["小学", "中学", "大学"] {
                out.push(format!("{who}在{city}上{school}"));
            }
        }
    }
    // zh: corrected numbers.
    for name in ["小明", "小红", "妈妈", "爸爸"] {
        for t in ["37", "37.5", "38", "38.5", "39", "39.5"] {
            out.push(format!("{name}发烧到{t}度"));
        }
    }
    for n in 1..=7 {
        out.push(format!("主人每周跑步{}次", cn(n)));
    }
    for n in 0..=9 {
        out.push(format!("主人的车牌尾号是{n}"));
    }
    // en: negations and contradictions.
    for drink in [
        "green tea",
        "black coffee",
        "oat milk",
        "sparkling water",
        "red wine",
        "orange juice",
        "hot chocolate",
        "jasmine tea",
        "espresso",
        "lemonade",
    ] {
        for verb in ["likes", "hates", "does not like"] {
            out.push(format!("owner {verb} {drink}"));
        }
    }
    // en: corrected numbers.
    for name in ["Nadia", "Tom", "Grandma", "Leo"] {
        for t in ["37", "37.5", "38", "38.5", "39", "39.5"] {
            out.push(format!("{name} had a fever of {t} degrees"));
        }
    }
    for who in ["Alice", "Bob", "the dentist", "the landlord"] {
        for day in [
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ] {
            out.push(format!("The meeting with {who} moved to {day}"));
        }
    }
    for city in ["Lisbon", "Berlin", "Tokyo", "Chicago", "Nairobi"] {
        for h in [1, 2, 3, 4, 5, 6] {
            out.push(format!("Owner's flight to {city} departs at {h} pm"));
        }
    }
    for who in ["Sam", "Mia", "Uncle Joe", "Aunt May", "Dr. Chen", "Ravi"] {
        for city in ["Paris", "Oslo", "Seoul", "Lima", "Cairo", "Perth"] {
            out.push(format!("{who} lives in {city}"));
        }
    }
    for n in 100..120 {
        out.push(format!("Owner's locker number is {n}"));
    }
    for n in 3..=17 {
        out.push(format!("Owner's daughter is {n} years old"));
    }
    out
}

// ---------------------------------------------------------------------------
// (a) Exact-only dedup, with the real model loaded.

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn similar_but_different_statements_each_get_their_own_memory_with_the_real_model() {
    let statements = similar_statements();
    assert!(statements.len() >= 300, "{}", statements.len());
    let unique: std::collections::HashSet<&String> = statements.iter().collect();
    assert_eq!(
        unique.len(),
        statements.len(),
        "the statements are distinct"
    );

    let root = TempRoot::new();
    let hub = Hub::open(root.layout(), Config::default(), Mode::Write).unwrap();
    // A memory already embedded before the first write.
    let seed = crate::support::write(&hub, "main", "主人的生日是三月五日之前的那天");
    assert_eq!(hub.embed_pending(usize::MAX), 1, "the real model is loaded");
    let mut ids = Vec::new();
    for (i, text) in statements.iter().enumerate() {
        let out = hub
            .append(WriteRequest::new(scene("main"), text.as_str(), "test"))
            .unwrap();
        assert_eq!(out.action, WriteAction::Add, "{text}");
        ids.push(out.id);
        // Vectors are computed between writes (every other one), so some
        // writes meet embedded neighbours and some do not.
        if i % 2 == 0 {
            hub.embed_pending(usize::MAX);
        }
    }
    hub.embed_pending(usize::MAX);
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), statements.len(), "one id per statement");
    assert!(!distinct.contains(&seed));
    for (id, text) in ids.iter().zip(&statements) {
        assert_eq!(&hub.fetch(id, &Filter::all()).unwrap().text, text);
    }
    // Exact repeats are still one memory.
    for (id, text) in ids.iter().zip(&statements).step_by(7) {
        let again = hub
            .append(WriteRequest::new(scene("main"), text.as_str(), "test"))
            .unwrap();
        assert_eq!((again.action, &again.id), (WriteAction::Noop, id), "{text}");
    }
    // The semantic index holds them all: a corrected date is findable.
    let hits = hub
        .search_filtered(&memory_hub::search::SearchRequest {
            query: "主人的生日是五月三日".into(),
            filter: Filter::all(),
            limit: Some(3),
            mode: Some(memory_hub::search::SearchMode::Semantic),
            min_score: None,
        })
        .unwrap();
    assert_eq!(hits.hits[0].memory.text, "主人的生日是五月三日");
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[tokio::test]
async fn corrections_written_over_http_are_new_memories_with_the_real_model() {
    let root = TempRoot::new();
    let hub = Hub::open(root.layout(), Config::default(), Mode::Write).unwrap();
    let api = Api::over_hub(root, hub);
    let t = api.token("owner", "dsh-desktop");
    let pairs = [
        ("主人的生日是三月五日", "主人的生日是五月三日"),
        ("owner likes green tea", "owner hates green tea"),
        ("喜欢喝咖啡", "不喜欢喝咖啡"),
        ("女儿在北京上大学", "儿子在上海上中学"),
        (
            "Nadia had a fever of 39 degrees",
            "Nadia had a fever of 37 degrees",
        ),
    ];
    for (first, second) in pairs {
        let a = api.ok("/v1/write", &t, json!({"text": first})).await;
        assert_eq!(api.hub.embed_pending(usize::MAX), 1);
        let b = api.ok("/v1/write", &t, json!({"text": second})).await;
        assert_eq!(
            (a["action"].as_str(), b["action"].as_str()),
            (Some("ADD"), Some("ADD"))
        );
        assert_ne!(a["id"], b["id"], "{first} / {second}");
        for (w, text) in [(&a, first), (&b, second)] {
            let got = api.ok("/v1/get", &t, json!({"id": w["id"]})).await;
            assert_eq!(got["text"], text);
        }
        api.hub.embed_pending(usize::MAX);
        let again = api.ok("/v1/write", &t, json!({"text": second})).await;
        assert_eq!(
            (again["action"].as_str(), &again["id"]),
            (Some("NOOP"), &b["id"])
        );
    }
}

// ---------------------------------------------------------------------------
// (b) Expiry: short-term chat only, by default.

#[test]
fn long_term_memories_never_expire_by_default_even_ten_years_on() {
    let root = TempRoot::new();
    let clock = TestClock::at("2026-06-01T08:00:00Z");
    let hub = open_with(&root, Config::default(), &clock);
    let mut ids = Vec::new();
    for tier in [None, Some(Tier::T1), Some(Tier::T2), Some(Tier::T3)] {
        let mut req = WriteRequest::new(
            scene("main"),
            format!("the garden gate code is kept by tier {tier:?}"),
            "test",
        );
        req.tier = tier;
        let id = hub.append(req).unwrap().id;
        assert_eq!(hub.fetch(&id, &Filter::all()).unwrap().expires_at, None);
        ids.push(id);
    }
    // Transient wording (T3 by the tier rules) does not expire either.
    let transient = crate::support::write(&hub, "main", "JIRA-1234 standup today");
    let m = hub.fetch(&transient, &Filter::all()).unwrap();
    assert_eq!((m.tier, m.expires_at), (Some(Tier::T3), None));
    ids.push(transient);
    // A long-term write cannot ask for an expiry while tier expiry is off.
    let mut req = WriteRequest::new(scene("main"), "expire me please", "test");
    req.expires_at = Some(clock.now() + Duration::days(1));
    assert_eq!(hub.append(req).unwrap_err().code(), ErrorCode::InvalidInput);

    clock.advance(Duration::days(3653));
    for id in &ids {
        hub.fetch(id, &visible(clock.now())).unwrap();
    }
    assert_eq!(
        crate::support::search_ids(&hub, "garden gate code", 10).len(),
        4
    );
    assert!(
        hub.tier_report()
            .unwrap()
            .tiers
            .iter()
            .all(|t| t.expired == 0)
    );
    // And after a rebuild.
    drop(hub);
    let (hub, _) = root.reindex(Config::default());
    clock.install(&hub);
    for id in &ids {
        assert_eq!(
            hub.fetch(id, &visible(clock.now())).unwrap().expires_at,
            None
        );
    }
}

#[test]
fn long_term_lines_written_with_the_old_default_expiry_replay_as_non_expiring() {
    let root = TempRoot::new();
    // Lines as the old default wrote them: a tier and an expiry from it.
    let old = put_line(
        "fact-main-old-0001",
        "the boiler was serviced in spring",
        json!({"expires_at": "2026-08-30T08:00:00Z"}),
    );
    let old_t3 = put_line(
        "fact-main-old-0002",
        "the bike lock combination changed",
        json!({"tier": "t3", "expires_at": "2026-07-01T08:00:00Z"}),
    );
    append_journal(&root, "2026-06.jsonl", &[old, old_t3]);
    let clock = TestClock::at("2036-06-01T08:00:00Z");
    let hub = open_with(&root, Config::default(), &clock);
    for id in ["fact-main-old-0001", "fact-main-old-0002"] {
        let m = hub.fetch(id, &visible(clock.now())).unwrap();
        assert_eq!(m.expires_at, None, "{id}");
    }
    drop(hub);

    // Opting in restores tier expiry for those lines (on a rebuild).
    let (hub, _) = root.reindex(expiring_config());
    clock.install(&hub);
    assert_eq!(
        hub.fetch("fact-main-old-0001", &visible(clock.now()))
            .unwrap_err()
            .code(),
        ErrorCode::NotFound
    );
    drop(hub);

    // An index built with the expiry (an older build, or the opt-in) is
    // cleared on the next open with the default.
    let hub = open_with(&root, Config::default(), &clock);
    for id in ["fact-main-old-0001", "fact-main-old-0002"] {
        let m = hub.fetch(id, &visible(clock.now())).unwrap();
        assert_eq!(m.expires_at, None, "{id}");
    }
    assert_eq!(
        crate::support::search_ids(&hub, "boiler serviced", 5),
        ["fact-main-old-0001"]
    );
}

#[test]
fn opting_into_tier_expiry_restores_it_and_short_term_chat_still_expires() {
    let root = TempRoot::new();
    let clock = TestClock::at("2026-06-01T08:00:00Z");
    let hub = open_with(&root, expiring_config(), &clock);
    let id = crate::support::write(&hub, "main", "granny's apple pie recipe uses cinnamon");
    assert_eq!(
        hub.fetch(&id, &Filter::all()).unwrap().expires_at,
        Some(clock.now() + Duration::days(90))
    );
    clock.advance(Duration::days(91));
    assert_eq!(
        hub.fetch(&id, &visible(clock.now())).unwrap_err().code(),
        ErrorCode::NotFound
    );
    assert_eq!(archive_search(&hub, "apple", 5).unwrap()[0].id, id);
    archive_restore(&hub, &id).unwrap();
    hub.fetch(&id, &visible(clock.now())).unwrap();
    drop(hub);

    // The default: short-term chat expires after its TTL, and can be restored.
    let root = TempRoot::new();
    let clock = TestClock::at("2026-06-01T08:00:00Z");
    let hub = open_with(&root, Config::default(), &clock);
    let chat = hub
        .ingest(
            &hub.operator(),
            memory_hub::api::IngestBody {
                scene: Some("qq:group:1".into()),
                message_id: "m1".into(),
                text: "hotpot tonight at eight".into(),
                sender: Some(memory_hub::api::Sender {
                    id: "42".into(),
                    name: None,
                }),
                sent_at: Some(clock.now().fixed_offset()),
                ttl_hours: Some(24),
                ..Default::default()
            },
        )
        .unwrap()
        .id
        .unwrap();
    let m = hub.fetch(&chat, &Filter::all()).unwrap();
    assert_eq!(m.stage, Stage::Short);
    assert_eq!(m.expires_at, Some(clock.now() + Duration::hours(24)));
    clock.advance(Duration::hours(23));
    let soon = hub.fetch(&chat, &visible(clock.now())).unwrap();
    assert!(hub.is_expiring_soon(&soon));
    clock.advance(Duration::hours(2));
    assert_eq!(
        hub.fetch(&chat, &visible(clock.now())).unwrap_err().code(),
        ErrorCode::NotFound
    );
    assert_eq!(archive_search(&hub, "hotpot", 5).unwrap()[0].id, chat);
    archive_restore(&hub, &chat).unwrap();
    hub.fetch(&chat, &visible(clock.now())).unwrap();
}

// ---------------------------------------------------------------------------
// (c) One validation for write, import and replay.

/// (label, journal fields that break a rule).
fn bad_cases() -> Vec<(&'static str, Value)> {
    vec![
        ("empty text", json!({"text": "  "})),
        ("empty id", json!({"id": ""})),
        ("importance 7", json!({"importance": 7.0})),
        ("importance 1e308", json!({"importance": 1e308})),
        (
            "10 MB text",
            json!({"text": "长".repeat(10 * 1024 * 1024 / 3)}),
        ),
        (
            "secret in pet",
            json!({"privacy": "secret", "scene": "pet"}),
        ),
        (
            "sensitive in a group",
            json!({"privacy": "sensitive", "scene": "qq:group:1"}),
        ),
        ("long title", json!({"title": "t".repeat(400)})),
        (
            "33 tags",
            json!({"tags": (0..33).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
        ),
        ("control char in tag", json!({"tags": ["ok", "bad\u{7}"]})),
        ("bad kind", json!({"kind": "no kind!"})),
    ]
}

#[test]
fn writes_that_break_a_rule_are_refused_and_store_nothing() {
    let root = TempRoot::new();
    let hub = root.hub();
    let base = || WriteRequest::new(scene("main"), "a fine memory", "test");
    let mut cases: Vec<(&str, WriteRequest)> = Vec::new();
    let mut r = base();
    r.text = " \n ".into();
    cases.push(("empty text", r));
    for (label, i) in [
        ("importance 7", 7.0f32),
        ("importance 1e308", 1e308f64 as f32),
        ("importance NaN", f32::NAN),
        ("importance -0.1", -0.1),
    ] {
        let mut r = base();
        r.importance = i;
        cases.push((label, r));
    }
    let mut r = base();
    r.text = "x".repeat(10 * 1024 * 1024);
    cases.push(("10 MB text", r));
    let mut r = base();
    r.text = "x".repeat(MAX_TEXT_BYTES + 1);
    cases.push(("one byte over", r));
    let mut r = base();
    r.privacy = Privacy::Secret;
    r.scene = scene("pet");
    cases.push(("secret in pet", r));
    let mut r = base();
    r.title = Some("t".repeat(400));
    cases.push(("long title", r));
    let mut r = base();
    r.tags = (0..33).map(|i| format!("t{i}")).collect();
    cases.push(("33 tags", r));
    let mut r = base();
    r.kind = "no kind!".into();
    cases.push(("bad kind", r));
    let mut r = base();
    r.idempotency_key = Some(String::new());
    cases.push(("empty idempotency key", r));
    for (label, req) in cases {
        let err = hub.append(req.clone()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidInput, "{label}: {err}");
        // The same through a batch (consolidation and import use it).
        let batch = hub.append_batch(vec![req]).unwrap();
        assert_eq!(
            batch[0].as_ref().unwrap_err().code(),
            ErrorCode::InvalidInput,
            "{label}"
        );
    }
    assert!(root.journal_lines().is_empty(), "nothing was appended");
    // The limits themselves are fine.
    let mut r = base();
    r.text = "x".repeat(MAX_TEXT_BYTES);
    r.importance = 1.0;
    r.tags = (0..32).map(|i| format!("t{i}")).collect();
    assert_eq!(hub.append(r).unwrap().action, WriteAction::Add);
}

#[tokio::test]
async fn http_writes_that_break_a_rule_are_400() {
    let api = Api::new();
    let t = api.token("owner", "dsh-desktop");
    for body in [
        json!({"text": "x", "importance": 7}),
        json!({"text": "x", "importance": 1e308}),
        json!({"text": "  "}),
        json!({"text": "x", "title": "t".repeat(400)}),
        json!({"text": "x", "idempotency_key": ""}),
        json!({"text": "x", "idempotency_key": "k".repeat(201)}),
    ] {
        let (status, v) = api.post("/v1/write", &t, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(v["error"]["code"], "INVALID_INPUT");
    }
    let pet = api.token("pet", "pet");
    let (status, _) = api
        .post(
            "/v1/write",
            &pet,
            json!({"text": "x", "scene": "pet", "privacy": "secret"}),
        )
        .await;
    assert!(status == 400 || status == 403, "{status}");
    assert!(api.root.journal_lines().is_empty());
}

#[test]
fn import_skips_each_bad_line_with_file_and_line_and_imports_the_rest() {
    let root = TempRoot::new();
    let hub = root.hub();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.jsonl");
    let mut bytes: Vec<u8> = Vec::new();
    let mut bad_lines = Vec::new();
    let mut good = Vec::new();
    let mut n = 0;
    let mut push = |bytes: &mut Vec<u8>, line: &[u8]| {
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        n += 1;
        n
    };
    let line = push(
        &mut bytes,
        put_line("fact-main-imp-good0", "good zero", json!({})).as_bytes(),
    );
    good.push(("fact-main-imp-good0", line));
    for (i, (label, extra)) in bad_cases().into_iter().enumerate() {
        let id = format!("fact-main-imp-bad{i}");
        let line = push(&mut bytes, put_line(&id, "bad line", extra).as_bytes());
        bad_lines.push((label.to_string(), line));
    }
    // One bad byte in the middle of the file.
    let mut broken = put_line("fact-main-imp-utf8", "caf", json!({})).into_bytes();
    let at = broken.windows(3).position(|w| w == b"caf").unwrap() + 3;
    broken.insert(at, 0xff);
    let line = push(&mut bytes, &broken);
    bad_lines.push(("invalid UTF-8".into(), line));
    // Loose lines break the same rules.
    for (label, l) in [
        (
            "loose importance 7",
            json!({"text": "loose seven", "importance": 7}),
        ),
        (
            "loose importance 1e308",
            json!({"text": "loose big", "importance": 1e308}),
        ),
        ("loose empty text", json!({"text": ""})),
        (
            "loose secret in pet",
            json!({"text": "loose secret", "privacy": "secret", "scene": "pet"}),
        ),
    ] {
        let line = push(&mut bytes, l.to_string().as_bytes());
        bad_lines.push((label.into(), line));
    }
    let line = push(
        &mut bytes,
        put_line("fact-main-imp-good1", "good one", json!({})).as_bytes(),
    );
    good.push(("fact-main-imp-good1", line));
    push(
        &mut bytes,
        json!({"text": "a loose good line"}).to_string().as_bytes(),
    );
    std::fs::write(&path, &bytes).unwrap();

    let defaults = ImportDefaults {
        scene: scene("main"),
        kind: "note".into(),
    };
    let report = transfer::import(&hub, &path, Format::Auto, &defaults, &mut |_, _| {}).unwrap();
    assert_eq!(report.added, 3, "{report:?}");
    assert_eq!(
        report.failed,
        bad_lines.len() as u64,
        "{:#?}",
        report.errors
    );
    assert_eq!(report.errors.len(), bad_lines.len());
    for ((label, line), error) in bad_lines.iter().zip(&report.errors) {
        let prefix = format!("{}:{line}: ", path.display());
        assert!(error.starts_with(&prefix), "{label}: {error}");
    }
    for (id, _) in &good {
        hub.fetch(id, &Filter::all()).unwrap();
    }
    let hit = &crate::support::search_ids(&hub, "loose good line", 5)[0];
    assert_eq!(
        hub.fetch(hit, &Filter::all()).unwrap().text,
        "a loose good line"
    );
    // Nothing that broke a rule reached the journal. (The texts, not the
    // whole lines: "caf" can stand in a line's hex checksum or device id.)
    let texts: Vec<String> = root
        .journal_lines()
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["text"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    for refused in [
        "bad line",
        "loose seven",
        "loose big",
        "loose secret",
        "caf",
    ] {
        assert!(
            texts.iter().all(|t| !t.contains(refused)),
            "{refused}: {texts:?}"
        );
    }
}

#[test]
fn replay_reports_lines_that_break_a_rule_and_indexes_their_neighbours() {
    let root = TempRoot::new();
    let mut lines = vec![put_line(
        "fact-main-rep-good0",
        "neighbour before",
        json!({}),
    )];
    for (i, (_, extra)) in bad_cases().into_iter().enumerate() {
        lines.push(put_line(
            &format!("fact-main-rep-bad{i}"),
            "bad line",
            extra,
        ));
    }
    lines.push(put_line(
        "fact-main-rep-good1",
        "neighbour after",
        json!({}),
    ));
    append_journal(&root, "2026-06.jsonl", &lines);
    let clock = TestClock::at("2026-06-02T08:00:00Z");
    let hub = open_with(&root, Config::default(), &clock);
    let check = |hub: &Hub, file: &str, first_bad: usize, n_bad: usize, good: &[&str]| {
        for id in good {
            hub.fetch(id, &Filter::all()).unwrap();
        }
        let issues = hub.stats().unwrap().issues;
        for line in first_bad..first_bad + n_bad {
            let at = format!("facts/{file}:{line}: ");
            assert!(
                issues.iter().any(|i| i.starts_with(&at)),
                "{at} not in {issues:?}"
            );
        }
    };
    let n_bad = bad_cases().len();
    check(
        &hub,
        "2026-06.jsonl",
        2,
        n_bad,
        &["fact-main-rep-good0", "fact-main-rep-good1"],
    );
    for i in 0..n_bad {
        assert_eq!(
            hub.fetch(&format!("fact-main-rep-bad{i}"), &Filter::all())
                .unwrap_err()
                .code(),
            ErrorCode::NotFound
        );
    }
    assert_eq!(
        crate::support::search_ids(&hub, "bad line", 10),
        Vec::<String>::new()
    );

    // Lines a sync tool appends while the hub runs: the same rules on catch-up.
    let mut more = Vec::new();
    for (i, (_, extra)) in bad_cases().into_iter().enumerate() {
        more.push(put_line(
            &format!("fact-main-sync-bad{i}"),
            "bad line",
            extra,
        ));
    }
    more.push(put_line(
        "fact-main-sync-good",
        "synced neighbour",
        json!({}),
    ));
    append_journal(&root, "2026-06.jsonl", &more);
    let report = hub.catch_up_journal().unwrap();
    assert_eq!(report.bad_lines, n_bad as u64);
    let first = lines.len() + 1;
    check(
        &hub,
        "2026-06.jsonl",
        first,
        n_bad,
        &["fact-main-sync-good"],
    );
    assert_eq!(
        crate::support::search_ids(&hub, "bad line", 10),
        Vec::<String>::new()
    );
    // A rebuild gives the same answer.
    drop(hub);
    let (hub, report) = root.reindex(Config::default());
    assert_eq!(report.bad_lines, 2 * n_bad as u64);
    assert_eq!(crate::support::search_ids(&hub, "neighbour", 10).len(), 3);
}

// ---------------------------------------------------------------------------
// (d) Idempotency keys belong to one token.

#[tokio::test]
async fn another_token_cannot_squat_an_idempotency_key() {
    let api = Api::new();
    // An idempotency key written by an older build (scene-only namespace).
    let mut legacy = WriteRequest::new(scene("main"), "written before the upgrade", "main");
    legacy.idempotency_key = Some("w|main|turn-44".into());
    let legacy = api.hub.append(legacy).unwrap().id;

    // Another token that may write in `main` (the pet preset now writes only in `pet`).
    let pet = api.custom_token("helper", &["read", "write"], &["main"]);
    let owner = api.token("owner", "dsh-desktop");
    let p = api
        .ok(
            "/v1/write",
            &pet,
            json!({"scene": "main", "text": "pet says hi", "idempotency_key": "turn-44"}),
        )
        .await;
    assert_eq!(p["action"], "ADD");
    let o = api
        .ok(
            "/v1/write",
            &owner,
            json!({"text": "the safe code is kept by the owner", "privacy": "secret", "idempotency_key": "turn-44"}),
        )
        .await;
    assert_eq!(o["action"], "ADD", "{o}");
    assert_ne!(o["id"], p["id"]);
    assert_ne!(o["id"].as_str(), Some(legacy.as_str()));
    let got = api.ok("/v1/get", &owner, json!({"id": o["id"]})).await;
    assert_eq!(got["text"], "the safe code is kept by the owner");
    assert_eq!(got["privacy"], "secret");
    // Each token's retry answers with its own memory.
    let o2 = api
        .ok(
            "/v1/write",
            &owner,
            json!({"text": "the safe code is kept by the owner", "privacy": "secret", "idempotency_key": "turn-44"}),
        )
        .await;
    assert_eq!((o2["action"].as_str(), &o2["id"]), (Some("NOOP"), &o["id"]));
    let p2 = api
        .ok(
            "/v1/write",
            &pet,
            json!({"scene": "main", "text": "pet says hi again", "idempotency_key": "turn-44"}),
        )
        .await;
    assert_eq!((p2["action"].as_str(), &p2["id"]), (Some("NOOP"), &p["id"]));
    // The pet never sees the owner's secret id through its NOOP.
    let (status, _) = api.post("/v1/get", &pet, json!({"id": o["id"]})).await;
    assert_eq!(status, 404);
    // The old line still replays and stays readable.
    api.ok("/v1/get", &owner, json!({"id": legacy})).await;
}
