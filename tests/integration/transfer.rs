//! Import and export round trips through the real binary.

use std::path::{Path, PathBuf};

use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::support::{TempRoot, search_ids, write};

#[test]
fn jsonl_export_then_import_keeps_ids_and_skips_repeats() {
    let a = TempRoot::new();
    let (kept, gone) = {
        let hub = a.hub();
        let kept = write(&hub, "main", "export me 出口测试");
        let gone = write(&hub, "qq:owner", "forget me before export");
        hub.tombstone(&gone, None, "test", &Filter::all()).unwrap();
        (kept, gone)
    };
    a.write_doc("doc.md", "# Doc\nnot part of a jsonl export\n");
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("facts.jsonl");
    let exported = a.memd_json(&["export", "--out", file.to_str().unwrap()]);
    assert_eq!(exported["facts"], 1);

    let b = TempRoot::new();
    let report = b.memd_json(&["import", file.to_str().unwrap()]);
    assert_eq!(
        (report["added"].as_u64(), report["failed"].as_u64()),
        (Some(1), Some(0))
    );
    let again = b.memd_json(&["import", file.to_str().unwrap()]);
    assert_eq!(
        (again["added"].as_u64(), again["skipped"].as_u64()),
        (Some(0), Some(1))
    );
    let hub = b.hub();
    assert_eq!(search_ids(&hub, "出口测试", 5), std::slice::from_ref(&kept));
    let got = hub.fetch(&kept, &Filter::all()).unwrap();
    assert_eq!(got.text, "export me 出口测试");
    assert!(hub.fetch(&gone, &Filter::all()).is_err());
}

#[test]
fn loose_lines_and_text_with_bad_lines_reported() {
    let root = TempRoot::new();
    let dir = tempfile::tempdir().unwrap();
    let loose = dir.path().join("corpus.jsonl");
    std::fs::write(
        &loose,
        concat!(
            r#"{"id": "m1", "text": "Bart在圣诞节晚会上跳舞", "time": "2023-12-25", "scene": "madial", "tags": ["活动类"]}"#, "\n",
            r#"{"id": "m2", "text": "second line", "scene": "Not A Scene"}"#, "\n",
            "{broken json\n",
            r#"{"id": "m3", "text": "third line ok", "privacy": "personal"}"#, "\n",
        ),
    )
    .unwrap();
    let report = root.memd_json(&["import", loose.to_str().unwrap()]);
    assert_eq!(report["added"], 2);
    assert_eq!(report["failed"], 2);
    let errors: Vec<&str> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    let at = |n: usize| format!("{}:{n}: ", loose.display());
    assert!(
        errors[0].starts_with(&at(2)) && errors[0].contains("scene"),
        "{errors:?}"
    );
    assert!(errors[1].starts_with(&at(3)), "{errors:?}");
    let again = root.memd_json(&["import", loose.to_str().unwrap()]);
    assert_eq!(again["added"], 0);
    assert_eq!(again["skipped"], 2);

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "first plain note\n\nsecond plain note\n").unwrap();
    let report = root.memd_json(&["import", text.to_str().unwrap(), "--scene", "pet"]);
    assert_eq!(report["added"], 2);

    let hub = root.hub();
    let hits = search_ids(&hub, "圣诞节", 5);
    assert_eq!(hits.len(), 1);
    let m = hub.fetch(&hits[0], &Filter::all()).unwrap();
    assert_eq!(m.scene.as_str(), "madial");
    assert_eq!(m.ts.to_rfc3339(), "2023-12-25T00:00:00+00:00");
    assert_eq!(m.tags, ["活动类"]);
    assert!(hits[0].starts_with("import-madial-"), "{}", hits[0]);
    assert_eq!(search_ids(&hub, "plain note", 5).len(), 2);
}

/// `memd export --format markdown` of `root` into `parent/md`; that directory.
fn export_markdown(root: &TempRoot, parent: &Path) -> PathBuf {
    let dir = parent.join("md");
    root.memd_json(&[
        "export",
        "--format",
        "markdown",
        "--out",
        dir.to_str().unwrap(),
    ]);
    dir
}

#[test]
fn markdown_export_imports_into_another_root() {
    let a = TempRoot::new();
    {
        let hub = a.hub();
        write(&hub, "main", "the lighthouse keeper waves");
    }
    a.write_doc(
        "places/harbour.md",
        "# Harbour\nBoats in the harbour at dawn.\n",
    );
    let out = tempfile::tempdir().unwrap();
    let dir = export_markdown(&a, out.path());
    assert!(dir.join("facts-main.md").exists());
    let harbour = dir.join("documents/places/harbour.md");
    assert!(harbour.exists());
    // Last edited a while ago: the copy keeps that date.
    std::fs::File::options()
        .write(true)
        .open(&harbour)
        .unwrap()
        .set_modified(deploy_edited())
        .unwrap();

    let b = TempRoot::new();
    let report = b.memd_json(&["import", dir.to_str().unwrap()]);
    assert_eq!(report["added"], 2);
    let copy = b
        .path()
        .join("memories/import/md/documents/places/harbour.md");
    assert_eq!(
        std::fs::metadata(copy).unwrap().modified().unwrap(),
        deploy_edited()
    );
    let hub = b.hub();
    assert_eq!(search_ids(&hub, "lighthouse", 5).len(), 1);
    assert_eq!(search_ids(&hub, "harbour dawn", 5).len(), 1);
}

/// Regression: the Markdown export built its front matter with `format!`,
/// so a scene that YAML reads as something else (`2024` a number, `null`
/// nothing, `true` a boolean) made a file that the import copied but could
/// not index. The front matter now comes from a YAML emitter.
#[test]
fn markdown_export_of_scenes_yaml_would_misread_imports_and_indexes() {
    let scenes = ["2024", "null", "true", "1.5"];
    let a = TempRoot::new();
    {
        let hub = a.hub();
        for scene in scenes {
            write(
                &hub,
                scene,
                &format!("the ferry timetable of scene {scene}"),
            );
        }
    }
    let out = tempfile::tempdir().unwrap();
    let dir = export_markdown(&a, out.path());
    let b = TempRoot::new();
    let report = b.memd_json(&["import", dir.to_str().unwrap()]);
    assert_eq!(
        (report["added"].as_u64(), report["failed"].as_u64()),
        (Some(scenes.len() as u64), Some(0)),
        "{report}"
    );
    // Each document keeps its scene, read back as the text it was.
    let hits = b
        .hub()
        .search_filtered(&SearchRequest {
            query: "ferry timetable".into(),
            filter: Filter::all(),
            limit: Some(10),
            mode: Some(SearchMode::Fulltext),
            min_score: None,
        })
        .unwrap()
        .hits;
    let mut got: Vec<String> = hits.iter().map(|h| h.memory.scene.to_string()).collect();
    got.sort();
    let mut want: Vec<String> = scenes.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
}

/// The Node memory-hub root built from its description (`memories/facts/*.jsonl`,
/// `memories/facts/archive/*.jsonl.gz`, Markdown, and a few files that are neither).
fn node_fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory-hub-node")
}

/// The deploy note of the fixture, below `memories/`.
const DEPLOY_NOTE: &str = "50-knowledge/2026-10-24-memory-hub-deploy-from-zero.md";

/// When the deploy note was last edited: 2026-10-24 12:00 UTC.
fn deploy_edited() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_792_843_200)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A copy of the Node fixture whose deploy note was last edited on
/// 2026-10-24 (git keeps no modification times, so the test sets it).
fn node_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&node_fixture(), dir.path());
    std::fs::File::options()
        .write(true)
        .open(dir.path().join("memories").join(DEPLOY_NOTE))
        .unwrap()
        .set_modified(deploy_edited())
        .unwrap();
    dir
}

/// Files of the fixture that are not taken, each named in the report.
const REFUSED_FILES: [&str; 3] = ["projects/garden.md", "whiteboard.txt", "facts/README.txt"];

#[test]
fn a_node_memory_hub_root_migrates_with_ids_tombstones_and_supersedes() {
    let root = TempRoot::new();
    let hub = root.hub();
    let node = node_copy();
    let report = memory_hub::migrate::import_memory_hub(&hub, node.path()).unwrap();
    // 10 memories (3 from the archived month), 1 tombstone, 3 documents; 3 bad
    // lines reported by file and line, and 3 files not taken.
    assert_eq!((report.added, report.failed), (14, 6), "{report:?}");
    for at in ["2026-10.jsonl:5:", "2026-10.jsonl:8:", "2026-11.jsonl:2:"]
        .into_iter()
        .chain(REFUSED_FILES)
    {
        assert!(
            report.errors.iter().any(|e| e.contains(at)),
            "{at} in {:?}",
            report.errors
        );
    }
    let all = Filter::all();
    let get = |id: &str| hub.fetch(id, &all);
    // Ids, audiences (as scenes), stage, privacy aliases, times kept.
    let peanut = get("fact-main-m8x2k-7f3a").unwrap();
    assert_eq!(
        (
            peanut.scene.as_str(),
            peanut.text.as_str(),
            peanut.kind.as_str()
        ),
        ("main", "小王对花生过敏", "fact")
    );
    assert_eq!(peanut.subject, memory_hub::model::Subject::Other);
    assert_eq!(peanut.ts.to_rfc3339(), "2026-10-03T08:00:00+00:00");
    let trip = get("fact-qq-owner-m8x8f-6a7b").unwrap();
    assert_eq!(trip.scene.as_str(), "qq:owner");
    assert_eq!(get("fact-pet-m9a2b-8c9d").unwrap().scene.as_str(), "pet");
    // The short chat line rewritten as long: the last line of the id wins.
    let birthday = get("chat-qq-group-650866701-m8x3a-1b2c").unwrap();
    assert_eq!(birthday.scene.as_str(), "qq:group:650866701");
    assert_eq!(birthday.stage, memory_hub::model::Stage::Long);
    assert_eq!(birthday.text, "小王的生日是十月十四日");
    // The tombstone forgets; the superseded memory leaves search but stays in the timeline.
    assert_eq!(
        get("fact-main-m8x6d-4e5f").unwrap_err().code().as_str(),
        "NOT_FOUND"
    );
    assert!(search_ids(&hub, "季度报告", 5).is_empty());
    assert_eq!(search_ids(&hub, "咖啡", 5), ["fact-main-m8x5c-3d4e"]);
    let latte = get("fact-main-m8x5c-3d4e").unwrap();
    assert_eq!(latte.supersedes.as_deref(), Some("fact-main-m8x4b-2c3d"));
    let timeline = hub
        .timeline(
            &hub.operator(),
            memory_hub::api::TimelineBody {
                limit: Some(50),
                month: Some("2026-10".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let items: Vec<_> = timeline.months.iter().flat_map(|m| &m.items).collect();
    let americano = items
        .iter()
        .find(|e| e.memory.id == "fact-main-m8x4b-2c3d")
        .expect("the superseded memory is in the timeline");
    assert_eq!(americano.superseded_by, ["fact-main-m8x5c-3d4e"]);
    assert!(!items.iter().any(|e| e.memory.id == "fact-main-m8x6d-4e5f"));
    // Documents keep their paths (so their path ids) and audiences.
    let identity = memory_hub::ids::doc_id("user/identity.md");
    assert_eq!(search_ids(&hub, "阿达", 5), [format!("{identity}#0")]);
    let rules = memory_hub::ids::doc_id("audiences/qq-group-650866701.md");
    let chunk = get(&format!("{rules}#0")).unwrap();
    assert_eq!(chunk.scene.as_str(), "qq:group:650866701");
    assert!(
        root.path()
            .join("memories/50-knowledge/2026-10-24-memory-hub-deploy-from-zero.md")
            .is_file()
    );
    drop(hub);

    // Everything survives a rebuild from the files, and a second import adds nothing.
    let out = root.memd(&["reindex"]);
    assert!(out.status.success(), "{out:?}");
    let out = root.memd(&[
        "--json",
        "import",
        "--from",
        "memory-hub",
        node.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["added"], 0, "{again}");
    assert_eq!(again["failed"], 6, "{again}");
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "咖啡", 5), ["fact-main-m8x5c-3d4e"]);
    assert!(hub.fetch("fact-main-m8x6d-4e5f", &Filter::all()).is_err());
    assert_eq!(
        hub.fetch("chat-qq-group-650866701-m8x3a-1b2c", &Filter::all())
            .unwrap()
            .stage,
        memory_hub::model::Stage::Long
    );
}

// --- Issue "Everyday correctness", item 8: migration keeps everything. ---

#[test]
fn issue_8_markdown_copies_keep_their_modification_times() {
    let root = TempRoot::new();
    let hub = root.hub();
    let node = node_copy();
    memory_hub::migrate::import_memory_hub(&hub, node.path()).unwrap();
    // Before: every copied note was dated the day of the migration.
    let copied = root.path().join("memories").join(DEPLOY_NOTE);
    let mtime = std::fs::metadata(&copied).unwrap().modified().unwrap();
    assert_eq!(mtime, deploy_edited());
    let doc = memory_hub::ids::doc_id(DEPLOY_NOTE);
    let chunk = hub.fetch(&format!("{doc}#0"), &Filter::all()).unwrap();
    assert_eq!(chunk.ts.to_rfc3339(), "2026-10-24T12:00:00+00:00");
    // Every other copy keeps its original's time too.
    for rel in ["user/identity.md", "audiences/qq-group-650866701.md"] {
        let original = std::fs::metadata(node.path().join("memories").join(rel))
            .unwrap()
            .modified()
            .unwrap();
        let copy = std::fs::metadata(root.path().join("memories").join(rel))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(copy, original, "{rel}");
    }
    // A reindex reads the same date back from the file.
    drop(hub);
    assert!(root.memd(&["reindex"]).status.success());
    let chunk = root
        .hub()
        .fetch(&format!("{doc}#0"), &Filter::all())
        .unwrap();
    assert_eq!(chunk.ts.to_rfc3339(), "2026-10-24T12:00:00+00:00");
}

#[test]
fn issue_8_archived_months_are_read_in_month_order_with_their_times() {
    let root = TempRoot::new();
    let hub = root.hub();
    let node = node_copy();
    let report = memory_hub::migrate::import_memory_hub(&hub, node.path()).unwrap();
    assert!(
        !report.errors.iter().any(|e| e.contains("archive")),
        "{report:?}"
    );
    // Before: facts/archive/*.jsonl.gz was skipped without a word.
    let decision = hub.fetch("fact-main-m7a1a-1a1a", &Filter::all()).unwrap();
    assert!(decision.text.starts_with("Architecture decision"));
    assert_eq!(
        search_ids(&hub, "renew the car insurance", 5),
        ["fact-main-m7a3c-3c3c"]
    );
    // `time` (when it happened) is kept beside `ts` (when it was written).
    let school = hub.fetch("fact-main-m7a2b-2b2b", &Filter::all()).unwrap();
    assert_eq!(school.ts.to_rfc3339(), "2026-09-12T09:00:00+00:00");
    assert_eq!(
        school.setting.time_at.unwrap().to_rfc3339(),
        "2026-09-01T00:00:00+00:00"
    );
    // The archived September version of an id gives way to October's.
    let peanut = hub.fetch("fact-main-m8x2k-7f3a", &Filter::all()).unwrap();
    assert_eq!(peanut.text, "小王对花生过敏");
    assert_eq!(peanut.ts.to_rfc3339(), "2026-10-03T08:00:00+00:00");
}

#[test]
fn issue_8_every_file_not_indexed_is_counted_and_listed_as_refused() {
    let root = TempRoot::new();
    let node = node_copy();
    // Before: "imported 11 (skipped 0 already present, 0 refused)", and the
    // garden note copied but never indexed.
    let out = root.memd(&[
        "import",
        "--from",
        "memory-hub",
        node.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("imported 14 (skipped 0 already present, 6 refused)"),
        "{stdout}"
    );
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} is not listed: {stdout}"))
            .to_string()
    };
    // A document with a front-matter key memd does not know is copied, byte
    // for byte, and refused with the key and what to do.
    let garden = line("projects/garden.md");
    assert!(
        garden.contains("copied to memories/projects/garden.md but not indexed")
            && garden.contains("status")
            && garden.contains("remove or rename the key"),
        "{garden}"
    );
    let copy = root.path().join("memories/projects/garden.md");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(node.path().join("memories/projects/garden.md")).unwrap()
    );
    assert!(line("whiteboard.txt").contains("not imported"));
    assert!(line("facts/README.txt").contains("not a fact journal"));
    let hub = root.hub();
    assert!(search_ids(&hub, "番茄", 5).is_empty());
    // Once the key is gone, the copy is indexed.
    std::fs::write(
        &copy,
        "---\ntitle: 花园计划\n---\n# 花园\n春天在阳台种番茄和罗勒。\n",
    )
    .unwrap();
    hub.sync_documents().unwrap();
    assert_eq!(search_ids(&hub, "番茄", 5).len(), 1);
}

#[test]
fn issue_8_imported_facts_get_tiers_as_writes_assign_them() {
    let root = TempRoot::new();
    let hub = root.hub();
    let node = node_copy();
    memory_hub::migrate::import_memory_hub(&hub, node.path()).unwrap();
    // The same memories written fresh into another root, for their tiers.
    let fresh = TempRoot::new();
    let writer = fresh.hub();
    let ids = [
        "fact-main-m8x2k-7f3a",
        "fact-main-m8x5c-3d4e",
        "fact-qq-owner-m8x8f-6a7b",
        "fact-pet-m9a2b-8c9d",
        "chat-qq-group-650866701-m8x3a-1b2c",
        "fact-main-m7a1a-1a1a",
        "fact-main-m7a2b-2b2b",
        "fact-main-m7a3c-3c3c",
    ];
    let mut tiers = Vec::new();
    for id in ids {
        // Before: imported facts had no tier.
        let m = hub.fetch(id, &Filter::all()).unwrap();
        let tier = m.tier.unwrap_or_else(|| panic!("{id} has no tier"));
        let line = root
            .journal_lines()
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .rfind(|v| v["id"] == id && v["op"] == "put")
            .unwrap();
        let source = line["source"].as_str().unwrap();
        let mut req = memory_hub::hub::WriteRequest::new(m.scene.clone(), &m.text, source);
        req.kind = m.kind.clone();
        req.tags = m.tags.clone();
        let written = writer.append(req).unwrap().id;
        let want = writer.fetch(&written, &Filter::all()).unwrap().tier;
        assert_eq!(Some(tier), want, "{id}: {}", m.text);
        tiers.push(tier.to_string());
    }
    // An architecture decision is foundational, "today: …" transient, the rest the default.
    assert_eq!(tiers, ["t2", "t2", "t2", "t2", "t2", "t0", "t2", "t3"]);
}
