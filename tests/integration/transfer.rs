//! Import and export round trips through the real binary.

use memory_hub::index::filter::Filter;

use crate::support::{TempRoot, search_ids, write};

#[test]
fn jsonl_export_then_import_keeps_ids_and_skips_repeats() {
    let a = TempRoot::new();
    let (kept, gone) = {
        let hub = a.hub();
        let kept = write(&hub, "main", "export me 出口测试");
        let gone = write(&hub, "qq:owner", "forget me before export");
        hub.forget(&gone, None, "test", &Filter::all()).unwrap();
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
    let got = hub.get(&kept, &Filter::all()).unwrap();
    assert_eq!(got.text, "export me 出口测试");
    assert!(hub.get(&gone, &Filter::all()).is_err());
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
    let m = hub.get(&hits[0], &Filter::all()).unwrap();
    assert_eq!(m.scene.as_str(), "madial");
    assert_eq!(m.ts.to_rfc3339(), "2023-12-25T00:00:00+00:00");
    assert_eq!(m.tags, ["活动类"]);
    assert!(hits[0].starts_with("import-madial-"), "{}", hits[0]);
    assert_eq!(search_ids(&hub, "plain note", 5).len(), 2);
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
    let dir = out.path().join("md");
    a.memd_json(&[
        "export",
        "--format",
        "markdown",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(dir.join("facts-main.md").exists());
    assert!(dir.join("documents/places/harbour.md").exists());

    let b = TempRoot::new();
    let report = b.memd_json(&["import", dir.to_str().unwrap()]);
    assert_eq!(report["added"], 2);
    let hub = b.hub();
    assert_eq!(search_ids(&hub, "lighthouse", 5).len(), 1);
    assert_eq!(search_ids(&hub, "harbour dawn", 5).len(), 1);
}
