//! The `/v1` reads the console's pages stand on: the document list and a
//! whole document, the list of forgotten memories (restored with
//! `/v1/restore`), and search paging. Each is scoped exactly like search:
//! what a token may not read is neither shown nor counted, and an error
//! says no more about it than about an id that does not exist. Browsing
//! writes nothing.

use serde_json::{Value, json};

use crate::http_support::{Api, ids};
use crate::support::TempRoot;
use memory_hub::model::{Privacy, Subject};

const GUIDE: &str = "---\ntitle: Garden guide\ntags: [garden]\n---\n# Garden guide\n\n\
Intro line.\n\n## Tools\n\n| tool | use |\n| --- | --- |\n| 铲子 | digging |\n\n\
### Small tools\n\nA trowel.\n";

/// A root with documents in three scenes and privacy levels.
fn documents_world() -> Api {
    let root = TempRoot::new();
    root.write_doc("notes/guide.md", GUIDE);
    root.write_doc(
        "notes/salary.md",
        "---\nprivacy: sensitive\n---\n# Salary\n\nThe raise is 8%.\n",
    );
    root.write_doc(
        "groups/one.md",
        "---\nscene: qq:group:1\n---\n# Group one rules\n\nNo spam.\n",
    );
    root.write_doc(
        "groups/two.md",
        "---\nscene: qq:group:2\n---\n# Group two rules\n\nNo ads.\n",
    );
    Api::over(root)
}

fn doc_paths(v: &Value) -> Vec<String> {
    v["documents"]
        .as_array()
        .expect("a document list")
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn documents_are_listed_and_read_whole_only_where_the_token_may_read() {
    let api = documents_world();
    let root = api.token("root", "dsh-desktop");
    let pet = api.token("pet", "pet");
    let g1 = api.token("g1", "qq-group-1");

    let all = api.ok("/v1/documents", &root, json!({})).await;
    assert_eq!(
        doc_paths(&all),
        [
            "groups/one.md",
            "groups/two.md",
            "notes/guide.md",
            "notes/salary.md"
        ],
        "{all}"
    );
    let guide = &all["documents"][2];
    assert_eq!(guide["title"], "Garden guide", "{guide}");
    assert_eq!(guide["tags"], json!(["garden"]));
    assert!(guide["chunks"].as_u64().unwrap() >= 3, "{guide}");

    // The pet reads main without sensitive: no salary, no groups.
    let seen = api.ok("/v1/documents", &pet, json!({})).await;
    assert_eq!(doc_paths(&seen), ["notes/guide.md"], "{seen}");
    let seen = api.ok("/v1/documents", &g1, json!({})).await;
    assert_eq!(doc_paths(&seen), ["groups/one.md"], "{seen}");
    assert!(seen.get("next_after").is_none(), "{seen}");

    // Pages by path, with a cursor.
    let first = api.ok("/v1/documents", &root, json!({"limit": 3})).await;
    assert_eq!(doc_paths(&first).len(), 3);
    let after = first["next_after"]
        .as_str()
        .expect("a next page")
        .to_string();
    let rest = api
        .ok("/v1/documents", &root, json!({"limit": 3, "after": after}))
        .await;
    assert_eq!(doc_paths(&rest), ["notes/salary.md"]);
    assert!(rest.get("next_after").is_none());

    // The whole document is the file's Markdown: tables and heading levels intact.
    let id = guide["id"].as_str().unwrap();
    let doc = api.ok("/v1/document", &pet, json!({"id": id})).await;
    assert_eq!(doc["source"], "file", "{doc}");
    let md = doc["markdown"].as_str().unwrap();
    assert!(md.starts_with("# Garden guide\n"), "{md}");
    assert!(md.contains("| 铲子 | digging |"), "{md}");
    assert!(md.contains("\n### Small tools\n"), "{md}");
    assert!(
        !md.contains("title: Garden guide"),
        "front matter shown: {md}"
    );
    let sections = doc["sections"].as_array().unwrap();
    assert_eq!(sections[0]["id"], format!("{id}#0"));
    assert!(
        sections.iter().any(|s| s["heading"] == "Small tools"),
        "{doc}"
    );
    // A chunk id opens its whole document.
    let by_chunk = api
        .ok("/v1/document", &pet, json!({"id": format!("{id}#1")}))
        .await;
    assert_eq!(by_chunk["markdown"], doc["markdown"]);

    // What a token may not read is NOT_FOUND, word for word as a made-up id.
    let salary = all["documents"][3]["id"].as_str().unwrap().to_string();
    let two = all["documents"][1]["id"].as_str().unwrap().to_string();
    let (_, missing) = api
        .post("/v1/document", &g1, json!({"id": "doc-00000000"}))
        .await;
    for (token, id) in [(&pet, &salary), (&g1, &two), (&g1, &id.to_string())] {
        let (status, body) = api.post("/v1/document", token, json!({"id": id})).await;
        assert_eq!(status, 404, "{id}: {body}");
        assert_eq!(body["error"]["code"], "NOT_FOUND");
        let said = body["error"]["message"].as_str().unwrap();
        let generic = missing["error"]["message"].as_str().unwrap();
        assert_eq!(
            said.replace(id.as_str(), "ID"),
            generic.replace("doc-00000000", "ID")
        );
    }
    for bad in ["fact-main-x", "", "doc-"] {
        let (status, _) = api.post("/v1/document", &root, json!({"id": bad})).await;
        assert_eq!(status, 404, "{bad}");
    }
    let (status, body) = api.post("/v1/documents", &root, json!({"limit": 0})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("INVALID_INPUT"))
    );
}

#[tokio::test]
async fn a_changed_file_is_shown_from_the_index_until_it_is_read_again() {
    let api = documents_world();
    let pet = api.token("pet", "pet");
    let list = api.ok("/v1/documents", &pet, json!({})).await;
    let id = list["documents"][0]["id"].as_str().unwrap().to_string();
    // The file now says secret, and holds new words; the index has not read it.
    api.root.write_doc(
        "notes/guide.md",
        "---\nprivacy: secret\n---\n# Garden guide\n\nThe safe code is 4711.\n",
    );
    let doc = api.ok("/v1/document", &pet, json!({"id": id})).await;
    assert_eq!(doc["source"], "index", "{doc}");
    let md = doc["markdown"].as_str().unwrap();
    assert!(!md.contains("4711"), "the changed file leaked: {md}");
    assert!(md.starts_with("# Garden guide\n"), "{md}");
    assert!(md.contains("## Tools"), "{md}");
    assert!(md.contains("A trowel."), "{md}");
}

#[tokio::test]
async fn forgotten_memories_are_listed_for_those_who_may_read_them() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let g1 = api.token("g1", "qq-group-1");
    let g2 = api.token("g2", "qq-group-2");
    let main = api.write(
        "main",
        "old phone number note",
        Privacy::Normal,
        Subject::Owner,
    );
    let group = api.write(
        "qq:group:1",
        "group picnic plan",
        Privacy::Normal,
        Subject::Other,
    );
    let keep = api.write("main", "kept note", Privacy::Normal, Subject::Owner);
    api.ok("/v1/forget", &root, json!({"id": main, "reason": "old"}))
        .await;
    api.ok("/v1/forget", &g1, json!({"id": group})).await;

    let journal = api.root.journal_lines().len();
    let seen = api.ok("/v1/forgotten", &root, json!({})).await;
    assert_eq!(ids(&seen["items"]), [group.clone(), main.clone()], "{seen}");
    let restorable: Vec<&Value> = seen["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["restorable"])
        .collect();
    // `*` reads every scene but writes only in its own: the group's is not its to restore.
    assert_eq!(restorable, [&json!(false), &json!(true)], "{seen}");
    assert!(seen["items"][0]["forgotten_at"].is_string());
    assert!(!ids(&seen["items"]).contains(&keep));

    let seen = api.ok("/v1/forgotten", &g1, json!({})).await;
    assert_eq!(ids(&seen["items"]), vec![group.clone()]);
    assert_eq!(seen["items"][0]["restorable"], true);
    let seen = api.ok("/v1/forgotten", &g2, json!({})).await;
    assert_eq!(
        seen["items"],
        json!([]),
        "another group sees nothing: {seen}"
    );
    assert!(seen.get("next_before").is_none());

    // Pages.
    let first = api.ok("/v1/forgotten", &root, json!({"limit": 1})).await;
    assert_eq!(ids(&first["items"]), vec![group.clone()]);
    let before = first["next_before"].as_str().expect("a next page");
    let next = api
        .ok(
            "/v1/forgotten",
            &root,
            json!({"limit": 1, "before": before}),
        )
        .await;
    assert_eq!(ids(&next["items"]), vec![main.clone()]);
    assert!(next.get("next_before").is_none());
    assert_eq!(
        api.root.journal_lines().len(),
        journal,
        "listing wrote to the journal"
    );

    // Restored (a journal line), it leaves the list and is found again.
    let r = api.ok("/v1/restore", &root, json!({"id": main})).await;
    assert_eq!(r["action"], "RESTORED");
    assert_eq!(api.root.journal_lines().len(), journal + 1);
    let seen = api.ok("/v1/forgotten", &root, json!({})).await;
    assert_eq!(ids(&seen["items"]), vec![group.clone()]);
    assert_eq!(
        api.search_ids(&root, json!({"query": "phone number"}))
            .await,
        [main]
    );
    let (status, body) = api
        .post("/v1/forgotten", &root, json!({"before": "yesterday"}))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("INVALID_INPUT"))
    );
}

#[tokio::test]
async fn search_pages_with_an_offset() {
    let api = Api::new();
    let root = api.token("root", "dsh-desktop");
    let g1 = api.token("g1", "qq-group-1");
    let mut written = Vec::new();
    for i in 0..13 {
        written.push(api.write(
            "main",
            &format!("apple orchard visit number {i}"),
            Privacy::Normal,
            Subject::Owner,
        ));
    }
    let group = api.write(
        "qq:group:1",
        "apple pie recipe",
        Privacy::Normal,
        Subject::Other,
    );
    let journal = api.root.journal_lines().len();

    let page =
        |offset: u64| json!({"query": "apple", "mode": "fulltext", "limit": 5, "offset": offset});
    let mut seen = Vec::new();
    let mut offset = Some(0);
    let mut pages = 0;
    while let Some(at) = offset {
        let v = api.ok("/v1/search", &root, page(at)).await;
        let hits = ids(&v["hits"]);
        assert!(!hits.is_empty() && hits.len() <= 5, "{v}");
        seen.extend(hits);
        offset = v["next_offset"].as_u64();
        if let Some(next) = offset {
            assert_eq!(next, at + 5);
        }
        pages += 1;
    }
    assert_eq!(pages, 3, "14 hits in pages of 5");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 14, "pages overlap or miss hits: {seen:?}");
    assert!(seen.contains(&group) && written.iter().all(|w| seen.contains(w)));
    // The first page is the unpaged search's, which says nothing of pages.
    let plain = api
        .ok(
            "/v1/search",
            &root,
            json!({"query": "apple", "mode": "fulltext", "limit": 5}),
        )
        .await;
    assert_eq!(ids(&plain["hits"]), seen[..5]);
    assert!(plain.get("next_offset").is_none(), "{plain}");

    // A group token's pages count only what it may read.
    let v = api.ok("/v1/search", &g1, page(0)).await;
    assert_eq!(ids(&v["hits"]), [group]);
    assert!(v.get("next_offset").is_none(), "{v}");
    let v = api.ok("/v1/search", &g1, page(5)).await;
    assert_eq!(v["hits"], json!([]));

    let (status, body) = api.post("/v1/search", &root, page(91)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("INVALID_INPUT"))
    );
    assert_eq!(api.root.journal_lines().len(), journal, "searching wrote");
}
