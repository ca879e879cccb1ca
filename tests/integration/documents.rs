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
    let chunk = hub.get(&format!("{doc}#1"), &Filter::all()).unwrap();
    assert_eq!(chunk.title.as_deref(), Some("Identity › Home"));
    assert_eq!(chunk.kind, "identity");
    assert_eq!(chunk.path.as_deref(), Some("user/identity.md"));
    let whole = hub.get(&doc, &Filter::all()).unwrap();
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
    let err = hub.get(&doc, &Filter::all()).unwrap_err();
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
        hub.search(&memory_hub::search::SearchRequest {
            query: "salary".into(),
            filter,
            limit: None,
            mode: None,
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
