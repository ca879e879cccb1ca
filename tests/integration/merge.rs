//! Merge rules (`index::merge`): the same device files applied in any order,
//! all at once or appended bit by bit, give the same index.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use memory_hub::index::filter::Filter;
use serde_json::{Value, json};

use crate::support::*;

const A: &str = "alpha";
const B: &str = "beta";

fn put(id: &str, text: &str, ts: &str, at: &str, device: &str, extra: Value) -> String {
    let mut v = json!({
        "op": "put", "v": 1, "id": id, "ts": ts, "at": at, "scene": "main",
        "kind": "note", "stage": "long", "text": text, "privacy": "normal",
        "subject": "owner", "source": "sync", "importance": 0.5, "tier": "t3",
        "device": device,
    });
    for (k, val) in extra.as_object().unwrap() {
        v[k] = val.clone();
    }
    serde_json::to_string(&v).unwrap()
}

fn forget(id: &str, ts: &str) -> String {
    json!({"op": "forget", "v": 1, "id": id, "ts": ts, "source": "sync"}).to_string()
}

fn touch(ids: &[&str], ts: &str) -> String {
    json!({"op": "touch", "v": 1, "ids": ids, "ts": ts}).to_string()
}

fn t(hm: &str) -> String {
    format!("2026-06-01T{hm}:00Z")
}

/// Two devices' files for June: rewrites on both, forgets before and after
/// the puts they beat, a restore, a supersede, touches out of order.
fn device_files() -> [(&'static str, Vec<String>); 2] {
    let alpha = vec![
        put(
            "fact-main-x",
            "the kettle is blue",
            &t("08:00"),
            &t("08:00"),
            A,
            json!({}),
        ),
        put(
            "fact-main-y",
            "the car is parked on level two",
            &t("08:01"),
            &t("08:01"),
            A,
            json!({}),
        ),
        put(
            "fact-main-w1",
            "the wifi password hint is the dog",
            &t("08:02"),
            &t("08:02"),
            A,
            json!({}),
        ),
        touch(&["fact-main-w1"], &t("09:00")),
        // Alpha's rewrite of x (keeps ts, newer at) beats beta's.
        put(
            "fact-main-x",
            "the kettle is red",
            &t("08:00"),
            &t("10:00"),
            A,
            json!({}),
        ),
        forget("fact-main-z", &t("10:30")),
        touch(&["fact-main-t"], &t("11:00")),
        // A fact superseding one that has not arrived yet, then that one.
        put(
            "fact-main-s2",
            "the bike lock code is 4711",
            &t("10:40"),
            &t("10:40"),
            A,
            json!({"supersedes": "fact-main-s1"}),
        ),
        put(
            "fact-main-s1",
            "the bike lock code is 1234",
            &t("10:35"),
            &t("10:35"),
            A,
            json!({}),
        ),
        // Turns of one session: each other's neighbours in search.
        put(
            "fact-main-c1",
            "we talked about the lighthouse trip",
            &t("10:50"),
            &t("10:50"),
            A,
            json!({"session": "s-1", "speaker": "Mel"}),
        ),
        put(
            "fact-main-c2",
            "the ferry leaves at seven",
            &t("10:51"),
            &t("10:51"),
            A,
            json!({"session": "s-1", "speaker": "Sam"}),
        ),
        put(
            "fact-main-r",
            "the garden gate squeaks",
            &t("08:00"),
            &t("08:00"),
            A,
            json!({}),
        ),
    ];
    let beta = vec![
        put(
            "fact-main-z",
            "the spare key is under the pot",
            &t("09:00"),
            &t("09:00"),
            B,
            json!({}),
        ),
        put(
            "fact-main-x",
            "the kettle is green",
            &t("08:00"),
            &t("09:30"),
            A,
            json!({}),
        ),
        put(
            "fact-main-t",
            "the tea tin is on the top shelf",
            &t("08:30"),
            &t("08:30"),
            B,
            json!({}),
        ),
        touch(&["fact-main-t"], &t("10:00")),
        forget("fact-main-y", &t("12:00")),
        // Older than the forget: y stays forgotten.
        put(
            "fact-main-y",
            "the car is parked on level three",
            &t("08:01"),
            &t("11:00"),
            A,
            json!({}),
        ),
        put(
            "fact-main-w2",
            "the wifi password hint is the cat",
            &t("12:30"),
            &t("12:30"),
            B,
            json!({"supersedes": "fact-main-w1"}),
        ),
        forget("fact-main-r", &t("12:00")),
        // Newer than the forget: a restore.
        put(
            "fact-main-r",
            "the garden gate squeaks",
            &t("08:00"),
            &t("13:00"),
            A,
            json!({}),
        ),
        touch(&["fact-main-t"], &t("09:30")),
    ];
    [(A, alpha), (B, beta)]
}

/// Writes the first `n` lines of a device's file (`n` past the end: all),
/// plus, if `torn`, half of the next line without its newline.
fn lay(root: &TempRoot, device: &str, lines: &[String], n: usize, torn: bool) {
    let dir = root.path().join("memories/facts").join(device);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text: String = lines.iter().take(n).map(|l| format!("{l}\n")).collect();
    if torn && let Some(next) = lines.get(n) {
        text.push_str(&next[..next.len() / 2]);
    }
    std::fs::write(dir.join("2026-06.jsonl"), text).unwrap();
}

const QUERIES: &[&str] = &[
    "kettle",
    "car parked level",
    "wifi password hint",
    "spare key",
    "tea tin",
    "garden gate",
    "bike lock code",
    "lighthouse",
    "ferry seven",
];
const IDS: &[&str] = &[
    "fact-main-x",
    "fact-main-y",
    "fact-main-z",
    "fact-main-w1",
    "fact-main-w2",
    "fact-main-t",
    "fact-main-r",
    "fact-main-s1",
    "fact-main-s2",
    "fact-main-c1",
    "fact-main-c2",
];

/// Everything observable: live rows (SQLite), get, full-text search, counts.
fn snapshot(root: &TempRoot, hub: &memory_hub::hub::Hub) -> Value {
    let db = rusqlite::Connection::open_with_flags(
        root.path().join("data/index/meta.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = db
        .prepare(
            "SELECT id, text, tier, accesses, expires_at, forgotten_at, superseded_by, last_access, \
             put_at, base_tier, base_accesses, base_expires, supersedes, content_hash, \
             journal_file, journal_line, session, speaker FROM memories ORDER BY id",
        )
        .unwrap();
    let rows: Vec<Value> = stmt
        .query_map([], |r| {
            Ok(json!([
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<i64>>(7)?,
                r.get::<_, Option<i64>>(8)?,
                r.get::<_, Option<String>>(9)?,
                r.get::<_, Option<i64>>(10)?,
                r.get::<_, Option<i64>>(11)?,
                r.get::<_, Option<String>>(12)?,
                r.get::<_, Option<String>>(13)?,
                r.get::<_, Option<String>>(14)?,
                r.get::<_, Option<i64>>(15)?,
                r.get::<_, Option<String>>(16)?,
                r.get::<_, Option<String>>(17)?,
            ]))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let gets: Vec<Value> = IDS
        .iter()
        .map(|id| match hub.fetch(id, &Filter::all()) {
            Ok(m) => json!([id, m.text, m.tier, m.expires_at]),
            Err(e) => json!([id, format!("{:?}", e.code())]),
        })
        .collect();
    let searches: Vec<Value> = QUERIES
        .iter()
        .map(|q| json!([q, search_ids(hub, q, 10)]))
        .collect();
    let counts = serde_json::to_value(hub.stats().unwrap().counts).unwrap();
    json!({"rows": rows, "get": gets, "search": searches, "counts": counts})
}

/// `memd reindex`: the index rebuilt from the files.
fn rebuild(root: &TempRoot) -> memory_hub::hub::Hub {
    memory_hub::hub::Hub::reindex_with(
        root.layout(),
        memory_hub::config::Config::default(),
        memory_hub::embed::EmbedderSlot::ready(Arc::new(
            memory_hub::embed::hash::HashEmbedder::new(384),
        )),
        &mut |_| {},
    )
    .unwrap()
    .0
}

fn open(root: &TempRoot) -> memory_hub::hub::Hub {
    root.hub()
}

#[test]
fn device_files_in_any_order_give_the_same_index() {
    let files = device_files();
    // All files present when the daemon opens.
    let all = TempRoot::new();
    for (dev, lines) in &files {
        lay(&all, dev, lines, usize::MAX, false);
    }
    let hub = open(&all);
    let expected = snapshot(&all, &hub);
    drop(hub);

    // One device's file first, the other's arriving later, both ways.
    for first in [0, 1] {
        let root = TempRoot::new();
        let (dev, lines) = &files[first];
        lay(&root, dev, lines, usize::MAX, false);
        let hub = open(&root);
        let (dev, lines) = &files[1 - first];
        lay(&root, dev, lines, usize::MAX, false);
        hub.catch_up_journal().unwrap();
        assert_eq!(snapshot(&root, &hub), expected, "device {first} first");
    }

    // Interleaved partial appends, with torn last lines waiting for their end.
    let root = TempRoot::new();
    let hub = open(&root);
    let steps = [
        (1, 3, true),
        (0, 2, true),
        (1, 7, false),
        (0, 5, true),
        (0, 99, false),
        (1, 99, false),
    ];
    for (which, n, torn) in steps {
        let (dev, lines) = &files[which];
        lay(&root, dev, lines, n, torn);
        hub.catch_up_journal().unwrap();
    }
    assert_eq!(snapshot(&root, &hub), expected, "interleaved");
    drop(hub);

    // And a rebuild from the files.
    let hub = rebuild(&all);
    assert_eq!(snapshot(&all, &hub), expected, "after reindex");

    // What the rules decide.
    let get = |id: &str| hub.fetch(id, &Filter::all());
    assert_eq!(get("fact-main-x").unwrap().text, "the kettle is red");
    assert!(get("fact-main-y").is_err(), "a forget beats an older put");
    assert!(
        get("fact-main-z").is_err(),
        "a forget beats a put that arrives later"
    );
    assert_eq!(get("fact-main-r").unwrap().text, "the garden gate squeaks");
    assert!(search_ids(&hub, "wifi password hint", 10) == vec!["fact-main-w2".to_string()]);
    assert_eq!(
        search_ids(&hub, "bike lock code", 10),
        vec!["fact-main-s2".to_string()],
        "a fact superseded by one applied before it"
    );
    let accesses: i64 = rusqlite::Connection::open(all.path().join("data/index/meta.db"))
        .unwrap()
        .query_row(
            "SELECT accesses FROM memories WHERE id = 'fact-main-t'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        accesses, 3,
        "three touches after the put, whatever their order"
    );
}

#[test]
fn a_clock_going_backwards_does_not_reorder_a_devices_own_lines() {
    let root = TempRoot::new();
    let hub = root.hub();
    let now = Utc::now();
    let at = Arc::new(std::sync::Mutex::new(now));
    let clock = at.clone();
    hub.set_clock(Arc::new(move || *clock.lock().unwrap()));
    let id = write(&hub, "main", "the boat is moored at the north jetty");
    // The clock jumps back an hour; the forget still beats the put it saw.
    *at.lock().unwrap() = now - Duration::hours(1);
    hub.tombstone(&id, None, "test", &Filter::all()).unwrap();
    assert!(hub.fetch(&id, &Filter::all()).is_err());
    drop(hub);
    let hub = rebuild(&root);
    assert!(
        hub.fetch(&id, &Filter::all()).is_err(),
        "still forgotten after a replay"
    );
    assert!(search_ids(&hub, "boat moored jetty", 10).is_empty());
    let lines = root.journal_lines();
    let forget: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let put: Value = serde_json::from_str(&lines[0]).unwrap();
    let ts = |v: &Value, k: &str| v[k].as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    assert!(ts(&forget, "ts") >= ts(&put, "at"));
}

#[test]
fn sync_conflict_copies_and_temp_files_are_reported_never_indexed() {
    let root = TempRoot::new();
    root.write_doc(
        "notes/boiler.md",
        "# Boiler\n\nThe boiler pressure should read 1.5 bar.\n",
    );
    root.write_doc(
        "notes/boiler.sync-conflict-20261130-101010-ABCDEFG.md",
        "# Boiler\n\nThe boiler pressure should read 1.2 bar.\n",
    );
    root.write_doc(".syncthing.boiler.md.tmp", "# Boiler\n\npartial");
    root.write_doc("~syncthing~boiler.md.tmp", "# Boiler\n\npartial");
    let (_, lines) = &device_files()[0];
    lay(&root, A, lines, usize::MAX, false);
    let copy = root
        .path()
        .join("memories/facts/alpha/2026-06.sync-conflict-20261130-101010-ABCDEFG.jsonl");
    std::fs::write(
        &copy,
        format!(
            "{}\n",
            put(
                "fact-main-dup",
                "a duplicated line",
                &t("08:00"),
                &t("08:00"),
                A,
                json!({})
            )
        ),
    )
    .unwrap();
    let hub = root.hub();
    assert_eq!(hub.stats().unwrap().counts.documents, 1);
    assert_eq!(search_ids(&hub, "boiler pressure", 10).len(), 1);
    assert!(hub.fetch("fact-main-dup", &Filter::all()).is_err());
    let health = hub.health().unwrap();
    let sync = &health.components["sync"];
    assert_eq!(sync.status, "degraded");
    assert!(
        sync.detail.contains("2 sync conflict copies"),
        "{}",
        sync.detail
    );
    assert!(sync.detail.contains("alpha 12"), "{}", sync.detail);
    drop(hub);
    let doctor = root.memd(&["doctor", "--json"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("sync conflict copies"), "{text}");
}

#[test]
fn sync_init_writes_stignore_and_status_counts_lines_per_device() {
    let root = TempRoot::new();
    for (dev, lines) in &device_files() {
        lay(&root, dev, lines, usize::MAX, false);
    }
    let init = root.memd_json(&["sync", "init"]);
    assert_eq!(init["stignore_written"], true);
    assert_eq!(
        init["syncthing_device_id"],
        Value::Null,
        "no API key: no Syncthing calls"
    );
    let ignore = std::fs::read_to_string(root.path().join("memories/.stignore")).unwrap();
    assert!(ignore.contains("*.sync-conflict-*.jsonl"));
    // A second init leaves it alone; one of the user's own is kept.
    assert_eq!(root.memd_json(&["sync", "init"])["stignore_written"], false);
    std::fs::write(root.path().join("memories/.stignore"), "mine\n").unwrap();
    assert_eq!(root.memd_json(&["sync", "init"])["stignore_written"], false);
    assert_eq!(
        std::fs::read_to_string(root.path().join("memories/.stignore")).unwrap(),
        "mine\n"
    );
    let status = root.memd_json(&["sync", "status"]);
    assert_eq!(status["lines_per_device"]["alpha"], 12);
    assert_eq!(status["lines_per_device"]["beta"], 10);
    assert_eq!(status["conflict_copies"], 0);
    assert_eq!(status["peers"], Value::Null);
}
