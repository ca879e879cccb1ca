//! The journal layout: one directory per device, legacy flat files still
//! read, files memd does not own never written, half lines from a sync tool
//! read once complete, odd directory entries skipped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use chrono::{Duration, Utc};
use memory_hub::config::Config;
use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::ids;
use memory_hub::index::filter::Filter;
use memory_hub::model::{Fact, Privacy, Record, Stage, Subject};
use memory_hub::store::journal;
use serde_json::json;

use crate::http_support::Api;
use crate::support::{TempRoot, scene, search_ids, write};

/// A journal line as another device would write it.
fn foreign_line(text: &str) -> (String, Vec<u8>) {
    let ts = Utc::now();
    let fact = Fact {
        id: ids::fact_id("fact", &scene("qq:owner"), ts),
        ts,
        scene: scene("qq:owner"),
        kind: "note".into(),
        stage: Stage::Long,
        text: text.into(),
        title: None,
        tags: Vec::new(),
        privacy: Privacy::Normal,
        subject: Subject::Owner,
        source: "qq".into(),
        importance: 0.5,
        tier: None,
        supersedes: None,
        expires_at: None,
        source_message_id: None,
        idempotency_key: None,
        device: "phone".into(),
        accesses: 0,
        run: None,
        setting: Default::default(),
    };
    let id = fact.id.clone();
    let mut line = serde_json::to_vec(&Record::Put {
        v: 1,
        at: None,
        fact,
    })
    .unwrap();
    line.push(b'\n');
    (id, line)
}

fn append(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[tokio::test]
async fn a_sync_tools_half_written_line_is_read_once_complete_and_our_write_is_kept() {
    let api = Api::new();
    let t = api.token("owner", "qq-owner");
    let facts = api.root.path().join("memories/facts");
    let month = journal::file_name_for(Utc::now());
    // A sync tool is halfway through a line of the legacy flat file and one
    // of another device's file.
    let legacy = facts.join(&month);
    let other = facts.join("phone").join(&month);
    let (legacy_id, legacy_line) = foreign_line("the heron nests by the old mill");
    let (other_id, other_line) = foreign_line("the ferry leaves at seven fifteen");
    append(&legacy, &legacy_line[..25]);
    append(&other, &other_line[..40]);

    let w = api
        .ok(
            "/v1/write",
            &t,
            json!({"text": "our own note about lanterns"}),
        )
        .await;
    let ours = w["id"].as_str().unwrap().to_string();
    // What the file watcher does when the files change.
    api.hub.catch_up_journal().unwrap();
    let (status, _) = api.post("/v1/get", &t, json!({"id": legacy_id})).await;
    assert_eq!(status, 404, "a half line is not applied");

    append(&legacy, &legacy_line[25..]);
    append(&other, &other_line[40..]);
    api.hub.catch_up_journal().unwrap();
    for (id, text) in [
        (&legacy_id, "the heron nests by the old mill"),
        (&other_id, "the ferry leaves at seven fifteen"),
        (&ours, "our own note about lanterns"),
    ] {
        let got = api.ok("/v1/get", &t, json!({"id": id})).await;
        assert_eq!(got["text"], text);
    }
    // memd wrote nothing into files it does not own.
    assert_eq!(std::fs::read(&legacy).unwrap(), legacy_line);
    assert_eq!(std::fs::read(&other).unwrap(), other_line);
    assert!(api.hub.stats().unwrap().issues.is_empty());

    // A restart while a line is half written does not cut it either.
    let (late_id, late_line) = foreign_line("the lighthouse keeper retired in spring");
    append(&legacy, &late_line[..30]);
    let Api {
        root, hub, router, ..
    } = api;
    drop(router);
    drop(hub);
    let hub = root.hub();
    assert!(hub.fetch(&late_id, &Filter::all()).is_err());
    append(&legacy, &late_line[30..]);
    hub.catch_up_journal().unwrap();
    for id in [&legacy_id, &other_id, &ours, &late_id] {
        hub.fetch(id, &Filter::all())
            .unwrap_or_else(|e| panic!("{id} lost: {e}"));
    }
    assert!(hub.stats().unwrap().issues.is_empty());
    assert_eq!(search_ids(&hub, "lighthouse keeper", 5), [late_id]);
}

#[test]
fn entries_named_like_journal_months_that_are_not_files_are_skipped() {
    let root = TempRoot::new();
    let facts = root.path().join("memories/facts");
    std::fs::create_dir_all(facts.join("2026-10.jsonl")).unwrap();
    std::fs::create_dir_all(facts.join("phone/2026-09.jsonl")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(facts.join("2026-08.jsonl")).unwrap();
    let id = {
        let hub = root.hub();
        let id = write(&hub, "main", "still writable beside odd entries");
        assert_eq!(
            search_ids(&hub, "odd entries", 5),
            std::slice::from_ref(&id)
        );
        assert_eq!(hub.stats().unwrap().journal_files, 1);
        id
    };
    let hub = root.hub();
    hub.fetch(&id, &Filter::all()).unwrap();
    drop(hub);
    let (hub, report) = root.reindex(Config::default());
    assert_eq!(report.records, 1);
    hub.fetch(&id, &Filter::all()).unwrap();
}

/// Everything a reader can see of `ids`, plus a few searches.
fn state(hub: &Hub, ids: &[String]) -> (BTreeMap<String, String>, Vec<Vec<String>>) {
    let memories = ids
        .iter()
        .map(|id| {
            let seen = match hub.fetch(id, &Filter::all()) {
                Ok(m) => serde_json::to_string(&m).unwrap(),
                Err(e) => e.code().as_str().to_string(),
            };
            (id.clone(), seen)
        })
        .collect();
    let searches = ["harbour", "orchard", "upgrade", "kettle"]
        .iter()
        .map(|q| search_ids(hub, q, 10))
        .collect();
    (memories, searches)
}

#[test]
fn a_legacy_flat_root_keeps_working_and_new_lines_go_to_the_device_directory() {
    let root = TempRoot::new();
    let facts = root.path().join("memories/facts");
    // A root in the old layout: every month file directly in facts/.
    let mut ids = Vec::new();
    {
        let hub = root.hub();
        for (days, text) in [
            (70, "harbour walls were repaired in winter"),
            (40, "the orchard needs pruning before the frost"),
            (40, "the kettle in the studio is broken"),
            (0, "harbour ferry timetable changes in june"),
        ] {
            let mut req = WriteRequest::new(scene("main"), text, "test");
            req.ts = Some(Utc::now() - Duration::days(days));
            ids.push(hub.append(req).unwrap().id);
        }
    }
    for file in root.journal_files() {
        std::fs::rename(&file, facts.join(file.file_name().unwrap())).unwrap();
    }
    for entry in std::fs::read_dir(&facts).unwrap().flatten() {
        if entry.path().is_dir() {
            std::fs::remove_dir(entry.path()).unwrap();
        }
    }
    std::fs::remove_file(root.path().join("device.json")).unwrap();
    std::fs::remove_dir_all(root.path().join("data")).unwrap();
    let legacy: BTreeMap<String, Vec<u8>> = journal::list_files(&facts)
        .unwrap()
        .into_iter()
        .map(|f| (f.clone(), std::fs::read(facts.join(&f)).unwrap()))
        .collect();
    assert!(legacy.len() >= 2 && legacy.keys().all(|f| !f.contains('/')));

    let hub = root.hub();
    for id in &ids {
        hub.fetch(id, &Filter::all()).unwrap();
    }
    // After the upgrade: a new memory, an edit and a forget of legacy ones.
    ids.push(write(&hub, "main", "written after the upgrade"));
    hub.tags(
        &hub.operator(),
        memory_hub::api::TagsBody {
            id: ids[1].clone(),
            add: vec!["garden".into()],
            ..Default::default()
        },
    )
    .unwrap();
    hub.tombstone(&ids[2], None, "test", &Filter::all())
        .unwrap();
    assert_eq!(hub.fetch(&ids[1], &Filter::all()).unwrap().tags, ["garden"]);
    assert!(hub.fetch(&ids[2], &Filter::all()).is_err());
    // The legacy files are untouched; the new lines are in this device's directory.
    for (f, bytes) in &legacy {
        assert_eq!(&std::fs::read(facts.join(f)).unwrap(), bytes, "{f}");
    }
    let device = hub.device().to_string();
    let own: Vec<String> = journal::list_files(&facts)
        .unwrap()
        .into_iter()
        .filter(|f| f.starts_with(&format!("{device}/")))
        .collect();
    assert!(!own.is_empty(), "no file in {device}/");
    assert!(
        std::fs::read_to_string(root.path().join("device.json"))
            .unwrap()
            .contains(&device)
    );
    let before = state(&hub, &ids);
    drop(hub);

    // A rebuild from the files gives the same memories and the same answers.
    let (hub, report) = root.reindex(Config::default());
    assert_eq!(report.bad_lines, 0);
    assert_eq!(hub.device(), device, "the device id is kept");
    assert_eq!(state(&hub, &ids), before);
    // And so does the CLI rebuild.
    drop(hub);
    root.memd_ok(&["reindex"]);
    let hub = root.hub();
    assert_eq!(state(&hub, &ids), before);
}

/// Red-team finding: an unreadable archive from another device (garbage, or a
/// gzip cut short by a sync still in progress) stopped `Hub::open` and every
/// later catch-up. It now holds back only its own month, reported.
#[test]
fn an_unreadable_foreign_archive_holds_back_only_its_month() {
    let root = TempRoot::new();
    let kept = {
        let hub = root.hub();
        write(&hub, "main", "kept before the bad archive arrives")
    };
    let facts = root.path().join("memories/facts");
    let archive = facts.join("archive/otherdev");
    std::fs::create_dir_all(&archive).unwrap();
    std::fs::write(
        archive.join("2026-01.jsonl.gz"),
        b"not a gzip file at all, just bytes",
    )
    .unwrap();
    // A real gzip stream cut short, as a half-finished sync leaves it.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&foreign_line("inside the cut archive").1)
        .unwrap();
    let whole = gz.finish().unwrap();
    std::fs::write(archive.join("2026-02.jsonl.gz"), &whole[..whole.len() / 2]).unwrap();
    std::fs::write(archive.join("2026-03.jsonl.gz"), &whole[..10]).unwrap();

    let hub = root.hub();
    assert!(search_ids(&hub, "kept before the bad archive", 5).contains(&kept));
    // Lines of other devices and months still arrive.
    let (id, line) = foreign_line("a foreign line after the bad archive");
    append(&facts.join("otherdev/2099-12.jsonl"), &line);
    hub.catch_up_journal().unwrap();
    assert!(search_ids(&hub, "foreign line after the bad archive", 5).contains(&id));
    // Our own writes go on.
    let mine = write(&hub, "main", "written next to the bad archive");
    assert!(search_ids(&hub, "written next to the bad archive", 5).contains(&mine));
}

/// Red-team finding: a damaged `memories/groups/members.json` (a sync
/// conflict, a bad edit) made every group chat ingest fail with a
/// non-retryable 500, so the bridge dropped the messages. The message is
/// stored; disclosure keeps failing closed.
#[test]
fn a_damaged_membership_table_never_loses_a_chat_message() {
    let root = TempRoot::new();
    let hub = root.hub();
    let table = root.path().join("memories/groups/members.json");
    std::fs::create_dir_all(table.parent().unwrap()).unwrap();
    std::fs::write(&table, "{garbage").unwrap();
    let out = hub
        .ingest(
            &hub.operator(),
            memory_hub::api::IngestBody {
                scene: Some("qq:group:1".into()),
                message_id: "mm1".into(),
                text: "周六晚上大家一起去吃火锅".into(),
                sender: Some(memory_hub::api::Sender {
                    id: "777".into(),
                    name: Some("小王".into()),
                }),
                ttl_hours: Some(24),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(out.action, memory_hub::hub::IngestAction::Add);
    let id = out.id.unwrap();
    assert_eq!(
        hub.fetch(&id, &Filter::all()).unwrap().text,
        "周六晚上大家一起去吃火锅"
    );
    let refused = hub
        .disclose(
            &hub.operator(),
            memory_hub::api::DiscloseBody {
                group: "qq:group:1".into(),
                asker: "777".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(refused.code(), memory_hub::ErrorCode::Forbidden);
}
