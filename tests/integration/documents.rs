//! Markdown documents: indexing, chunk and document ids, edits, bad front matter.

use memory_hub::ids;
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::Privacy;

use crate::support::{TempRoot, scene, search_ids};

#[test]
fn documents_are_chunked_indexed_and_kept_in_sync() {
    let root = TempRoot::new();
    root.write_doc(
        "user/identity.md",
        "---\ntitle: Identity\ntags: [me]\n---\n# Name\nMy name is Ada Lovelace.\n\n# Home\n我住在杭州西湖边。\n",
    );
    let trip = root.write_doc("notes/trip.md", "# Trip\nWe hiked the glacier trail.\n");
    let hub = root.hub();
    let doc = ids::doc_id("user/identity.md");

    assert_eq!(search_ids(&hub, "lovelace", 5), [format!("{doc}#0")]);
    assert_eq!(search_ids(&hub, "西湖", 5), [format!("{doc}#1")]);
    let chunk = hub.fetch(&format!("{doc}#1"), &Filter::all()).unwrap();
    assert_eq!(chunk.title.as_deref(), Some("Identity › Home"));
    assert_eq!(chunk.kind, "identity");
    assert_eq!(chunk.path.as_deref(), Some("user/identity.md"));
    let whole = hub.fetch(&doc, &Filter::all()).unwrap();
    assert!(whole.text.contains("Ada") && whole.text.contains("西湖"));
    assert_eq!(whole.title.as_deref(), Some("Identity"));
    drop(hub);

    // Edit one document, delete another, add a broken one.
    std::fs::write(&trip, "# Trip\nWe sailed across the fjord.\n").unwrap();
    std::fs::remove_file(root.path().join("memories/user/identity.md")).unwrap();
    root.write_doc("bad.md", "---\nprivacy: topsecret\n---\nleaky words\n");
    let hub = root.hub();
    assert!(search_ids(&hub, "glacier", 5).is_empty());
    assert_eq!(search_ids(&hub, "fjord", 5).len(), 1);
    assert!(search_ids(&hub, "lovelace", 5).is_empty());
    assert!(
        search_ids(&hub, "leaky", 5).is_empty(),
        "a document with bad front matter is not indexed"
    );
    let issues = hub.stats().unwrap().issues;
    assert!(
        issues
            .iter()
            .any(|i| i.starts_with("bad.md:") && i.contains("privacy")),
        "{issues:?}"
    );
    let err = hub.fetch(&doc, &Filter::all()).unwrap_err();
    assert_eq!(err.code().as_str(), "NOT_FOUND");
}

#[test]
fn document_privacy_is_part_of_the_filter() {
    let root = TempRoot::new();
    root.write_doc(
        "private.md",
        "---\nscene: main\nprivacy: sensitive\n---\nsalary negotiation notes\n",
    );
    let hub = root.hub();
    let visible = |filter: Filter| {
        hub.search_filtered(&memory_hub::search::SearchRequest {
            query: "salary".into(),
            filter,
            limit: None,
            mode: None,
            min_score: None,
        })
        .unwrap()
        .hits
        .len()
    };
    assert_eq!(visible(Filter::all()), 1);
    assert_eq!(
        visible(Filter::scope(Scope {
            scenes: vec![scene("main")],
            privacy: vec![Privacy::Normal, Privacy::Personal],
            ..Scope::default()
        })),
        0
    );
}

/// The "billion laughs" shape: nine levels of nine YAML aliases each. Parsed
/// by a YAML loader that expands aliases it is 9^9 strings (gigabytes).
pub fn alias_bomb(privacy: &str) -> String {
    let mut s = String::from(
        "---\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let (p, n) = (w[0], w[1]);
        s.push_str(&format!(
            "{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        ));
    }
    s.push_str(&format!("privacy: {privacy}\n---\nlaughing words\n"));
    s
}

fn doc_issues(hub: &memory_hub::hub::Hub) -> Vec<String> {
    hub.stats()
        .unwrap()
        .issues
        .into_iter()
        .filter(|i| !i.starts_with("facts/"))
        .collect()
}

#[test]
fn an_alias_bomb_is_reported_and_never_expanded() {
    let root = TempRoot::new();
    root.write_doc("notes/bomb.md", &alias_bomb("normal"));
    root.write_doc("notes/fine.md", "# Fine\nOrdinary garden notes.\n");
    // Opening used to expand the aliases for minutes; now it refuses them.
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "garden", 5).len(), 1);
    assert!(search_ids(&hub, "laughing", 5).is_empty());
    let issues = doc_issues(&hub);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(
        issues[0].starts_with("notes/bomb.md: ") && issues[0].contains("anchors"),
        "{issues:?}"
    );
    // Writes go on as usual.
    let id = crate::support::write(&hub, "main", "a fact written next to the bomb");
    assert_eq!(search_ids(&hub, "bomb", 5), [id]);
    drop(hub);
    // doctor names the file.
    let out = root.memd(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let docs = crate::support::doctor_check(&report, "documents").clone();
    assert_eq!(docs["status"], "warn", "{docs}");
    assert!(
        docs["detail"].as_str().unwrap().contains("notes/bomb.md"),
        "{docs}"
    );
}

#[test]
fn an_unclosed_front_matter_fence_is_reported_and_never_indexed() {
    // Reproduction: this note was indexed as `normal` and a `pet` token read it.
    let root = TempRoot::new();
    root.write_doc(
        "notes/diary.md",
        "---\nprivacy: secret\ntitle: Diary\n\nThe vault combination is 4-8-15.\n",
    );
    root.write_doc(
        "notes/closed.md",
        "---\nprivacy: secret\n---\nThe vault key hides under the mat.\n",
    );
    let api = crate::http_support::Api::over(root);
    let hub = &api.hub;
    assert!(search_ids(hub, "combination", 5).is_empty());
    let err = hub
        .fetch(&ids::doc_id("notes/diary.md"), &Filter::all())
        .unwrap_err();
    assert_eq!(err.code().as_str(), "NOT_FOUND");
    let issues = doc_issues(hub);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(
        issues[0].starts_with("notes/diary.md: ") && issues[0].contains("never closed"),
        "{issues:?}"
    );
    // No token reads it: not the pet, not the owner with secret:read.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for preset in ["pet", "dsh-desktop"] {
        let token = api.token(preset, preset);
        let hits = rt.block_on(api.search_ids(
            &token,
            serde_json::json!({"query": "combination vault", "limit": 10}),
        ));
        assert!(
            !hits
                .iter()
                .any(|h| h.starts_with(&ids::doc_id("notes/diary.md"))),
            "{preset}: {hits:?}"
        );
    }
    // The closed secret note is indexed, for the owner only.
    let owner = api.token("owner", "dsh-desktop");
    let pet = api.token("pet2", "pet");
    let q = serde_json::json!({"query": "mat", "limit": 10});
    assert_eq!(rt.block_on(api.search_ids(&owner, q.clone())).len(), 1);
    assert!(rt.block_on(api.search_ids(&pet, q)).is_empty());

    // Closing the fence makes it a valid secret document and clears the issue.
    std::fs::write(
        api.root.path().join("memories/notes/diary.md"),
        "---\nprivacy: secret\ntitle: Diary\n---\nThe vault combination is 4-8-15.\n",
    )
    .unwrap();
    hub.sync_documents().unwrap();
    assert!(doc_issues(hub).is_empty());
    let q = serde_json::json!({"query": "combination", "limit": 10});
    assert_eq!(rt.block_on(api.search_ids(&owner, q.clone())).len(), 1);
    assert!(rt.block_on(api.search_ids(&pet, q)).is_empty());
}

#[test]
fn documents_are_held_to_the_secret_and_sensitive_audiences() {
    let root = TempRoot::new();
    root.write_doc(
        "qq/group-42/plans.md",
        "---\nscene: qq:group:42\nprivacy: secret\n---\nsurprise party for Bo\n",
    );
    root.write_doc(
        "qq/group-42/health.md",
        "---\nscene: qq:group:42\nprivacy: sensitive\n---\nBo's blood pressure readings\n",
    );
    root.write_doc(
        "qq/group-42/menu.md",
        "---\nscene: qq:group:42\n---\nparty menu: dumplings\n",
    );
    root.write_doc("vault.md", "---\nprivacy: secret\n---\nsafe combination\n");
    let hub = root.hub();
    assert!(search_ids(&hub, "surprise", 5).is_empty());
    assert!(search_ids(&hub, "pressure", 5).is_empty());
    assert_eq!(search_ids(&hub, "dumplings", 5).len(), 1);
    assert_eq!(search_ids(&hub, "combination", 5).len(), 1);
    let issues = doc_issues(&hub);
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(
        issues[0].starts_with("qq/group-42/health.md: ")
            && issues[0].contains("sensitive memories may only live in"),
        "{issues:?}"
    );
    assert!(
        issues[1].starts_with("qq/group-42/plans.md: ")
            && issues[1].contains("secret memories may only live in [main]"),
        "{issues:?}"
    );
}

#[test]
fn symbolic_links_under_memories_are_reported_and_never_followed() {
    let root = TempRoot::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("passwd"), "root:x:0:0:outsider\n").unwrap();
    std::fs::write(outside.path().join("note.md"), "outsider notes\n").unwrap();
    root.write_doc("notes/real.md", "real notes\n");
    let link = root.path().join("memories/notes/passwd.md");
    std::os::unix::fs::symlink(outside.path().join("passwd"), &link).unwrap();
    let dir_link = root.path().join("memories/elsewhere");
    std::os::unix::fs::symlink(outside.path(), &dir_link).unwrap();
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "real", 5).len(), 1);
    assert!(search_ids(&hub, "outsider", 5).is_empty());
    let issues = doc_issues(&hub);
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(
        issues[0].starts_with("elsewhere: symbolic link"),
        "{issues:?}"
    );
    assert!(
        issues[1].starts_with("notes/passwd.md: symbolic link"),
        "{issues:?}"
    );
    // A file that was indexed and is replaced by a link leaves the index.
    std::fs::remove_file(root.path().join("memories/notes/real.md")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("note.md"),
        root.path().join("memories/notes/real.md"),
    )
    .unwrap();
    hub.sync_documents().unwrap();
    assert!(search_ids(&hub, "real", 5).is_empty());
    assert!(search_ids(&hub, "outsider", 5).is_empty());
    assert_eq!(doc_issues(&hub).len(), 3);
    // Removing the links clears their issues.
    for l in [
        &link,
        &dir_link,
        &root.path().join("memories/notes/real.md"),
    ] {
        std::fs::remove_file(l).unwrap();
    }
    hub.sync_documents().unwrap();
    assert!(doc_issues(&hub).is_empty());
}

#[test]
fn import_never_follows_a_symbolic_link() {
    let root = TempRoot::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("passwd");
    std::fs::write(&target, "root:x:0:0:outsider\n").unwrap();
    let link = outside.path().join("link.md");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = root.memd(&["import", link.to_str().unwrap(), "--json"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("symbolic link") && stderr.contains("INVALID_INPUT"),
        "{stderr}"
    );
    // A directory of notes with a link inside: the notes come in, the link does not.
    let notes = outside.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.md"), "# A\nimported alpha note\n").unwrap();
    std::os::unix::fs::symlink(&target, notes.join("b.md")).unwrap();
    let report = root.memd_json(&["import", notes.to_str().unwrap()]);
    assert_eq!(report["added"], 1, "{report}");
    assert_eq!(report["failed"], 1, "{report}");
    assert!(
        report["errors"][0]
            .as_str()
            .unwrap()
            .contains("symbolic link"),
        "{report}"
    );
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "alpha", 5).len(), 1);
    assert!(search_ids(&hub, "outsider", 5).is_empty());
    assert!(!root.path().join("memories/import/notes/b.md").exists());
    assert!(!root.path().join("memories/import/link.md").exists());
}

#[test]
fn a_restore_keeps_document_times() {
    let root = TempRoot::new();
    let doc = root.write_doc("notes/old.md", "# Old\nwritten long ago\n");
    let then = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    std::fs::File::options()
        .write(true)
        .open(&doc)
        .unwrap()
        .set_modified(then)
        .unwrap();
    let id = ids::doc_id("notes/old.md");
    let before = root.hub().fetch(&id, &Filter::all()).unwrap().ts;
    assert_eq!(before.timestamp(), 1_600_000_000);
    let backups = tempfile::tempdir().unwrap();
    let created = root.backup_to(backups.path());
    std::fs::remove_dir_all(root.path()).unwrap();
    // The whole root is gone, its backup key with it: the archive is foreign now.
    root.memd_json(&[
        "backup",
        "restore",
        "--foreign",
        created["path"].as_str().unwrap(),
    ]);
    let after = root.hub().fetch(&id, &Filter::all()).unwrap().ts;
    assert_eq!(after, before);
}

#[test]
fn a_front_matter_id_survives_a_rename() {
    let root = TempRoot::new();
    let old = root.write_doc(
        "notes/trip.md",
        "---\nid: trip-2026\ntitle: Trip\n---\n# Day one\nWe hiked the glacier trail.\n\n# Day two\n我们在湖边划船。\n",
    );
    let hub = root.hub();
    let doc = ids::doc_id_from_key("trip-2026");
    assert_eq!(doc, "doc-id-trip-2026");
    assert_eq!(search_ids(&hub, "glacier", 5), [format!("{doc}#0")]);
    drop(hub);

    // Rename (and move) the file: the same id, its chunks searchable under it.
    std::fs::create_dir_all(root.path().join("memories/archive")).unwrap();
    std::fs::rename(&old, root.path().join("memories/archive/2026-trip.md")).unwrap();
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "glacier", 5), [format!("{doc}#0")]);
    assert_eq!(search_ids(&hub, "划船", 5), [format!("{doc}#1")]);
    let chunk = hub.fetch(&format!("{doc}#1"), &Filter::all()).unwrap();
    assert_eq!(chunk.path.as_deref(), Some("archive/2026-trip.md"));
    assert!(hub.fetch(&doc, &Filter::all()).is_ok());
    assert!(hub.stats().unwrap().issues.is_empty());

    // Renamed while the hub runs: the next document sync keeps the id too.
    std::fs::rename(
        root.path().join("memories/archive/2026-trip.md"),
        root.path().join("memories/trip.md"),
    )
    .unwrap();
    hub.sync_documents().unwrap();
    assert_eq!(search_ids(&hub, "glacier", 5), [format!("{doc}#0")]);
    let chunk = hub.fetch(&format!("{doc}#0"), &Filter::all()).unwrap();
    assert_eq!(chunk.path.as_deref(), Some("trip.md"));

    // Dropping the id gives the file its path id again; nothing stays under the old one.
    std::fs::write(
        root.path().join("memories/trip.md"),
        "# Day one\nWe hiked the glacier trail.\n",
    )
    .unwrap();
    drop(hub);
    let hub = root.hub();
    assert_eq!(
        search_ids(&hub, "glacier", 5),
        [format!("{}#0", ids::doc_id("trip.md"))]
    );
    assert_eq!(
        hub.fetch(&doc, &Filter::all()).unwrap_err().code().as_str(),
        "NOT_FOUND"
    );
}

#[test]
fn two_files_claiming_one_id_are_both_reported_and_neither_indexed() {
    let root = TempRoot::new();
    root.write_doc("a.md", "---\nid: plan\n---\nalpha glacier plan\n");
    let hub = root.hub();
    assert_eq!(search_ids(&hub, "alpha", 5), ["doc-id-plan#0"]);
    drop(hub);
    let b = root.write_doc("b.md", "---\nid: plan\n---\nbravo glacier plan\n");
    root.write_doc("c.md", "---\nid: ../etc\n---\ncharlie\n");
    let hub = root.hub();
    assert!(search_ids(&hub, "glacier", 5).is_empty());
    let issues = hub.stats().unwrap().issues;
    for (file, other) in [("a.md", "b.md"), ("b.md", "a.md")] {
        assert!(
            issues
                .iter()
                .any(|i| i.starts_with(&format!("{file}:")) && i.contains(other)),
            "{issues:?}"
        );
    }
    assert!(
        issues
            .iter()
            .any(|i| i.starts_with("c.md:") && i.contains("`id")),
        "{issues:?}"
    );
    // One of them gives way: the other is indexed again, the issues go.
    std::fs::remove_file(b).unwrap();
    hub.sync_documents().unwrap();
    assert_eq!(search_ids(&hub, "glacier", 5), ["doc-id-plan#0"]);
    let issues = hub.stats().unwrap().issues;
    assert!(
        !issues
            .iter()
            .any(|i| i.starts_with("a.md:") || i.starts_with("b.md:")),
        "{issues:?}"
    );
}
