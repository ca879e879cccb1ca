//! Semantic and hybrid search: the real ONNX model (installed by
//! `scripts/setup.sh` into the default models directory), sqlite-vec with the
//! filter inside the KNN, the vector cache, and graceful degradation.

use std::sync::Arc;

use memory_hub::config::{Config, EmbedderConfig};
use memory_hub::embed::hash::HashEmbedder;
use memory_hub::embed::onnx::OnnxEmbedder;
use memory_hub::embed::{Embedder, EmbedderSlot};
use memory_hub::hub::{Hub, Mode, WriteAction, WriteRequest};
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::model::Privacy;
use memory_hub::search::{Pass, SearchMode, SearchRequest, SearchResults};

use crate::support::{TempRoot, ranked_ids_in, scene, search_ids_in, write};

fn real_embedder() -> OnnxEmbedder {
    OnnxEmbedder::load(&EmbedderConfig::default())
        .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)")
}

/// A search with the relevance decision off: what the vector side finds is
/// under test here (a paraphrase sharing no word with its query, the hash
/// embedder's neighbours), not whether the decision would keep it; by
/// default it keeps no hit without lexical evidence of the query unless the
/// model's cosine makes up for it.
fn search(hub: &Hub, query: &str, filter: Filter, limit: usize, mode: SearchMode) -> SearchResults {
    hub.search_filtered(&SearchRequest {
        query: query.into(),
        filter,
        limit: Some(limit),
        mode: Some(mode),
        min_score: Some(0.0),
    })
    .unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn embedder_token_ids_pooling_and_normalisation() {
    let e = real_embedder();
    assert_eq!(
        e.token_ids("query: hello world").unwrap(),
        [0, 41, 1294, 12, 33600, 31, 8999, 2]
    );
    assert_eq!(
        e.token_ids("passage: 我今天去公园散步了").unwrap(),
        [0, 46692, 12, 13129, 7461, 1677, 77493, 188955, 274, 2]
    );
    assert_eq!(e.dim(), 384);
    let long = "word ".repeat(2000);
    assert_eq!(
        e.token_ids(&long).unwrap().len(),
        512,
        "truncated to maxTokens"
    );

    let texts = [
        "The cat sat on the mat",
        "我今天去公园散步了",
        long.as_str(),
    ];
    let vectors = e.embed_passages(&texts).unwrap();
    assert_eq!(vectors.len(), 3);
    for v in &vectors {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "norm {norm}");
    }
    // The int8 graph quantises per run, so compare by cosine, never exactly.
    let alone = e.embed_passages(&texts[..1]).unwrap();
    assert!(cosine(&alone[0], &vectors[0]) >= 0.995);
    // Indexing runs texts in length-sorted batches: each vector stays close
    // to the text's own, and comes back in the order of the texts.
    let many: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "memory {i}: {}",
                "the cat sat on the mat ".repeat(1 + i % 7)
            )
        })
        .chain(texts.iter().map(|t| t.to_string()))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let batched = e.index_passages(&many).unwrap();
    let single = e.embed_passages(&many).unwrap();
    assert_eq!(batched.len(), many.len());
    for (i, (b, s)) in batched.iter().zip(&single).enumerate() {
        assert!(cosine(b, s) >= 0.99, "text {i}: cosine {}", cosine(b, s));
    }
    assert_eq!(
        e.embed_passages(&many[..1]).unwrap()[0],
        single[0],
        "a text alone gets the same vector however many are embedded"
    );
    let q = e.embed_queries(&["a kitten resting on a rug"]).unwrap();
    assert!(
        cosine(&q[0], &vectors[0]) > cosine(&q[0], &vectors[1]),
        "the cat is nearer than the park"
    );
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn semantic_search_finds_a_paraphrase_with_no_shared_words() {
    let root = TempRoot::new();
    let hub = Hub::open(root.layout(), Config::default(), Mode::Write).unwrap();
    let cat = write(&hub, "main", "The cat sat on the mat");
    let park = write(&hub, "main", "我今天去公园散步了");
    for text in [
        "Quarterly tax filing is due in April",
        "The printer on the third floor is out of toner",
        "Booked flights to Lisbon for the conference",
        "周五之前要交项目报告",
    ] {
        write(&hub, "main", text);
    }
    assert!(
        search(
            &hub,
            "kitten resting on a rug",
            Filter::all(),
            5,
            SearchMode::Fulltext
        )
        .hits
        .is_empty(),
        "no shared words"
    );
    let semantic = search(
        &hub,
        "kitten resting on a rug",
        Filter::all(),
        3,
        SearchMode::Semantic,
    );
    assert_eq!(semantic.mode, SearchMode::Semantic);
    assert_eq!(semantic.hits[0].memory.id, cat);
    assert_eq!(semantic.hits[0].pass, Pass::Semantic);
    // Across languages: an English query finds the Chinese memory.
    let walk = search(
        &hub,
        "I took a walk in the park today",
        Filter::all(),
        3,
        SearchMode::Semantic,
    );
    assert_eq!(walk.hits[0].memory.id, park);
    // Hybrid is the default mode and finds it too.
    let hybrid = hub
        .search_filtered(&SearchRequest {
            query: "kitten resting on a rug".into(),
            filter: Filter::all(),
            limit: Some(3),
            mode: None,
            min_score: Some(0.0),
        })
        .unwrap();
    assert_eq!(hybrid.mode, SearchMode::Hybrid);
    assert!(hybrid.fallback.is_none());
    assert_eq!(hybrid.hits[0].memory.id, cat);
}

#[test]
fn group_scoped_knn_returns_k_visible_rows_even_when_invisible_rows_are_nearer() {
    let root = TempRoot::new();
    let hub = root.hub();
    let query = "birthday party plans for the weekend";
    // Forty invisible rows identical to the query: the nearest possible.
    let mut reqs = Vec::new();
    for i in 0..20 {
        reqs.push(WriteRequest::new(
            scene("qq:owner"),
            format!("{query} {i}"),
            "test",
        ));
        let mut secret = WriteRequest::new(scene("main"), format!("{query} secret {i}"), "test");
        secret.privacy = Privacy::Secret;
        reqs.push(secret);
    }
    // Eight visible rows that share nothing with the query.
    for i in 0..8 {
        reqs.push(WriteRequest::new(
            scene("qq:group:5"),
            format!("group chatter about trains number {i}"),
            "test",
        ));
    }
    // A personal row in the group, visible only to a scope that allows it.
    let mut personal = WriteRequest::new(scene("qq:group:5"), format!("{query} personal"), "test");
    personal.privacy = Privacy::Personal;
    reqs.push(personal);
    let written = hub.append_batch(reqs).unwrap();
    assert!(
        written
            .iter()
            .all(|w| w.as_ref().unwrap().action == WriteAction::Add)
    );

    let group_normal = Scope {
        scenes: vec![scene("qq:group:5")],
        privacy: vec![Privacy::Normal],
        ..Scope::default()
    };
    let hits = search(
        &hub,
        query,
        Filter::scope(group_normal.clone()),
        5,
        SearchMode::Semantic,
    )
    .hits;
    assert_eq!(hits.len(), 5, "exactly k visible rows");
    for h in &hits {
        assert_eq!(h.memory.scene.as_str(), "qq:group:5");
        assert_eq!(h.memory.privacy, Privacy::Normal);
    }
    // Two scopes (an OR the KNN cannot express) run one KNN each and merge by distance.
    let pet_personal = Scope {
        scenes: vec![scene("qq:group:5")],
        privacy: vec![Privacy::Personal],
        ..Scope::default()
    };
    let merged = search(
        &hub,
        query,
        Filter {
            any_of: vec![group_normal, pet_personal],
        },
        5,
        SearchMode::Semantic,
    )
    .hits;
    assert_eq!(merged.len(), 5);
    assert_eq!(merged[0].memory.privacy, Privacy::Personal, "nearest first");
    assert!(
        merged[1..]
            .iter()
            .all(|h| h.memory.privacy == Privacy::Normal)
    );
    // Hybrid honours the same filter.
    let hybrid = search(
        &hub,
        query,
        Filter::scope(Scope {
            scenes: vec![scene("qq:group:5")],
            ..Scope::default()
        }),
        10,
        SearchMode::Hybrid,
    );
    assert_eq!(hybrid.hits.len(), 9);
    assert!(
        hybrid
            .hits
            .iter()
            .all(|h| h.memory.scene.as_str() == "qq:group:5")
    );
    // Nothing visible, nothing returned.
    assert!(
        search(
            &hub,
            query,
            Filter { any_of: vec![] },
            5,
            SearchMode::Semantic
        )
        .hits
        .is_empty()
    );
}

#[test]
fn embedding_unavailable_when_the_model_dir_is_wrong_but_full_text_works() {
    let root = TempRoot::new();
    let mut config = Config::default();
    config.embedder.model_dir = root.path().join("no-such-model").display().to_string();
    let hub = Hub::open(root.layout(), config, Mode::Write).unwrap();
    let id = write(&hub, "main", "the umbrella is in the hallway");
    assert_eq!(
        search_ids_in(&hub, "umbrella", 5, SearchMode::Fulltext),
        std::slice::from_ref(&id)
    );
    let err = hub
        .search_filtered(&SearchRequest {
            query: "umbrella".into(),
            filter: Filter::all(),
            limit: None,
            mode: Some(SearchMode::Semantic),
            min_score: None,
        })
        .unwrap_err();
    assert_eq!(err.code().as_str(), "EMBEDDING_UNAVAILABLE");
    assert!(err.to_string().contains("no-such-model"), "{err}");
    // The default mode degrades to full text and says so.
    let hybrid = hub
        .search_filtered(&SearchRequest {
            query: "umbrella".into(),
            filter: Filter::all(),
            limit: None,
            mode: None,
            min_score: None,
        })
        .unwrap();
    assert_eq!(hybrid.mode, SearchMode::Fulltext);
    assert!(hybrid.fallback.is_some());
    assert_eq!(hybrid.hits[0].memory.id, id);
    assert_eq!(hub.stats().unwrap().vectors, 0);

    // The same through the CLI: exit code 6 and the stable code in the envelope.
    let out = root.memd(&["search", "umbrella", "--mode", "semantic", "--json"]);
    assert_eq!(out.status.code(), Some(6));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["error"]["code"], "EMBEDDING_UNAVAILABLE");
    let hits = root.memd_json(&["search", "umbrella"]);
    assert_eq!(hits["mode"], "fulltext");
    assert_eq!(hits["hits"][0]["id"], id.as_str());
}

#[test]
fn warm_vector_cache_makes_reindex_not_re_embed() {
    let root = TempRoot::new();
    root.write_doc(
        "notes/trip.md",
        "# Trip\nPacking list for the mountains.\n\n# 饮食\n带上面包和水。\n",
    );
    let first = Arc::new(HashEmbedder::new(384));
    let before = {
        let hub = root.hub_with(first.clone());
        let mut reqs = Vec::new();
        for i in 0..30 {
            reqs.push(WriteRequest::new(
                scene("main"),
                format!("memory number {i} about hiking"),
                "test",
            ));
        }
        hub.append_batch(reqs).unwrap();
        assert_eq!(
            first.passages_embedded(),
            0,
            "writes do not wait for embedding"
        );
        assert_eq!(hub.embed_pending(usize::MAX), 32);
        assert_eq!(first.passages_embedded(), 32, "30 facts + 2 chunks");
        assert_eq!(hub.stats().unwrap().vectors, 32);
        search_ids_in(&hub, "hiking in the mountains", 10, SearchMode::Hybrid)
    };
    let reindex = |embedder: Arc<HashEmbedder>| {
        Hub::reindex_with(
            root.layout(),
            Config::default(),
            EmbedderSlot::ready(embedder),
            &mut |_| {},
        )
        .unwrap()
    };
    let warm = Arc::new(HashEmbedder::new(384));
    let (hub, report) = reindex(warm.clone());
    assert_eq!(report.vectors_stored, 32);
    assert_eq!(
        warm.passages_embedded(),
        0,
        "every vector came from the cache"
    );
    assert_eq!(
        search_ids_in(&hub, "hiking in the mountains", 10, SearchMode::Hybrid),
        before
    );
    drop(hub);

    std::fs::remove_dir_all(root.path().join("data/cache")).unwrap();
    let cold = Arc::new(HashEmbedder::new(384));
    let (hub, _) = reindex(cold.clone());
    assert_eq!(
        cold.passages_embedded(),
        32,
        "without the cache everything is embedded"
    );
    assert_eq!(
        search_ids_in(&hub, "hiking in the mountains", 10, SearchMode::Hybrid),
        before
    );
}

#[test]
fn forget_and_document_removal_remove_vectors() {
    let root = TempRoot::new();
    let doc = root.write_doc("notes/a.md", "# A\nalpha chunk\n\n# B\nbeta chunk\n");
    let hub = root.hub();
    let keep = write(&hub, "main", "keep this memory");
    let gone = write(&hub, "main", "forget this memory");
    hub.embed_pending(usize::MAX);
    assert_eq!(hub.stats().unwrap().vectors, 4);
    hub.tombstone(&gone, None, "test", &Filter::all()).unwrap();
    assert_eq!(hub.stats().unwrap().vectors, 3);
    // Which vectors remain is under test: the decision is off.
    let ids = ranked_ids_in(&hub, "forget this memory", 10, SearchMode::Semantic);
    assert!(!ids.contains(&gone) && ids.contains(&keep), "{ids:?}");
    std::fs::remove_file(doc).unwrap();
    hub.sync_documents().unwrap();
    assert_eq!(hub.stats().unwrap().vectors, 1);
    assert_eq!(
        ranked_ids_in(&hub, "alpha chunk", 10, SearchMode::Semantic),
        [keep]
    );
}

#[test]
fn a_changed_model_re_embeds_everything() {
    let root = TempRoot::new();
    {
        let hub = root.hub_with(Arc::new(HashEmbedder::new(384)));
        write(&hub, "main", "first");
        write(&hub, "main", "second");
    }
    let other = Arc::new(HashEmbedder::new(64));
    let hub = root.hub_with(other.clone());
    hub.embed_pending(usize::MAX);
    assert_eq!(other.passages_embedded(), 2);
    assert_eq!(hub.stats().unwrap().vectors, 2);
    assert_eq!(
        search_ids_in(&hub, "second", 1, SearchMode::Semantic).len(),
        1
    );
}

#[test]
fn write_batch_is_one_group_with_an_answer_per_request() {
    let root = TempRoot::new();
    let hub = root.hub();
    let mut reqs: Vec<WriteRequest> = (0..600)
        .map(|i| WriteRequest::new(scene("main"), format!("batch item {i}"), "test"))
        .collect();
    reqs[300].text = "   ".into();
    let answers = hub.append_batch(reqs).unwrap();
    assert_eq!(answers.len(), 600);
    assert_eq!(
        answers[300].as_ref().unwrap_err().code().as_str(),
        "INVALID_INPUT"
    );
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok().map(|w| w.id.clone()))
        .collect();
    assert_eq!(ids.len(), 599, "ids are unique even within one millisecond");
    assert_eq!(root.journal_lines().len(), 599);
    assert_eq!(hub.stats().unwrap().text_documents, 599);
    assert_eq!(hub.embed_pending(usize::MAX), 599);
    assert_eq!(hub.stats().unwrap().vectors, 599);
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[test]
fn cli_semantic_search_with_the_installed_model() {
    let root = TempRoot::new();
    let out = root.memd_with_models(&[
        "write",
        "--scene",
        "main",
        "--text",
        "The cat sat on the mat",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = root.memd_with_models(&[
        "search",
        "kitten resting on a rug",
        "--mode",
        "semantic",
        // A paraphrase sharing no word: the default decision leaves it out.
        "--min-score",
        "0",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["mode"], "semantic");
    assert_eq!(body["hits"][0]["text"], "The cat sat on the mat");
    assert_eq!(body["hits"][0]["pass"], "semantic");
}

#[test]
fn eval_on_a_tiny_fixture() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/eval-tiny");
    let reports = memory_hub::eval::run(
        &dir,
        &[
            SearchMode::Fulltext,
            SearchMode::Semantic,
            SearchMode::Hybrid,
        ],
        &Config::default(),
        EmbedderSlot::ready(Arc::new(HashEmbedder::new(384))),
    )
    .unwrap();
    assert_eq!(reports.len(), 3);
    let fulltext = &reports[0];
    assert_eq!((fulltext.corpus, fulltext.queries), (8, 4));
    // Every fixture query shares a distinctive word with its one relevant memory.
    assert_eq!(fulltext.recall_at_5, 1.0);
    assert_eq!(fulltext.mrr_at_10, 1.0);
    for r in &reports {
        assert_eq!(r.ran, r.mode);
        assert!((0.0..=1.0).contains(&r.recall_at_5));
        assert!(r.recall_at_10 >= r.recall_at_5);
        assert!(r.latency_p95_ms >= r.latency_p50_ms);
    }
    // The same through the CLI.
    let out = TempRoot::new().memd_json(&["eval", dir.to_str().unwrap(), "--mode", "fulltext"]);
    assert_eq!(out[0]["recallAt5"], 1.0);
}

#[test]
fn memories_written_without_an_embedder_are_embedded_once_one_is_available() {
    let root = TempRoot::new();
    let id = {
        let (hub, _) = Hub::open_with(
            root.layout(),
            Config::default(),
            Mode::Write,
            EmbedderSlot::none("test: no model"),
            &mut |_| {},
        )
        .unwrap();
        let id = write(&hub, "main", "written while the model was missing");
        assert_eq!(hub.stats().unwrap().vectors, 0);
        let err = hub
            .search_filtered(&SearchRequest {
                query: "model".into(),
                filter: Filter::all(),
                limit: None,
                mode: Some(SearchMode::Semantic),
                min_score: None,
            })
            .unwrap_err();
        assert!(err.to_string().contains("test: no model"), "{err}");
        id
    };
    let hub = root.hub();
    assert_eq!(hub.embed_pending(usize::MAX), 1);
    assert_eq!(hub.stats().unwrap().vectors, 1);
    assert_eq!(
        search_ids_in(&hub, "the model was missing", 1, SearchMode::Semantic),
        [id]
    );
}

#[test]
fn expired_short_term_memories_never_come_back_through_the_knn() {
    let root = TempRoot::new();
    let hub = root.hub();
    let now = chrono::Utc::now();
    let mut expired = WriteRequest::new(scene("qq:group:5"), "hotpot tonight at eight", "test");
    expired.stage = memory_hub::model::Stage::Short;
    expired.kind = "chat".into();
    expired.expires_at = Some(now - chrono::Duration::hours(1));
    let expired = hub.append(expired).unwrap().id;
    let mut live = WriteRequest::new(scene("qq:group:5"), "hotpot tomorrow at noon", "test");
    live.stage = memory_hub::model::Stage::Short;
    live.kind = "chat".into();
    live.expires_at = Some(now + chrono::Duration::hours(1));
    let live = hub.append(live).unwrap().id;
    let scope = |unexpired_at| Scope {
        scenes: vec![scene("qq:group:5")],
        unexpired_at,
        ..Scope::default()
    };
    for mode in [
        SearchMode::Semantic,
        SearchMode::Hybrid,
        SearchMode::Fulltext,
    ] {
        let ids: Vec<String> = search(&hub, "hotpot", Filter::scope(scope(Some(now))), 10, mode)
            .hits
            .into_iter()
            .map(|h| h.memory.id)
            .collect();
        assert_eq!(ids, vec![live.clone()], "{mode:?}");
        let all = search(&hub, "hotpot", Filter::scope(scope(None)), 10, mode)
            .hits
            .len();
        assert_eq!(all, 2, "{mode:?}: without an expiry bound both match");
    }
    assert_ne!(expired, live);
}

/// The hash embedder, noting the thread each query is embedded on.
struct NotingThreads(HashEmbedder, std::sync::Mutex<Vec<Option<String>>>);

impl Embedder for NotingThreads {
    fn model_id(&self) -> &str {
        // A model of this test alone: query vectors are cached per model.
        "test-noting-threads"
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed_queries(
        &self,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, memory_hub::embed::EmbedError> {
        let name = std::thread::current().name().map(str::to_string);
        self.1.lock().unwrap().push(name);
        self.0.embed_queries(texts)
    }
    fn embed_passages(
        &self,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, memory_hub::embed::EmbedError> {
        self.0.embed_passages(texts)
    }
}

#[test]
fn a_dialogue_is_embedded_beside_its_full_text_and_a_short_query_in_line() {
    let root = TempRoot::new();
    let noting = Arc::new(NotingThreads(
        HashEmbedder::new(384),
        std::sync::Mutex::new(Vec::new()),
    ));
    let hub = root.hub_with(noting.clone());
    let picnic = write(
        &hub,
        "main",
        "Anna planned a picnic by the lake for Saturday",
    );
    for i in 0..20 {
        write(
            &hub,
            "main",
            &format!("note {i} about the quarterly budget review"),
        );
    }
    let last_thread = || noting.1.lock().unwrap().last().cloned().flatten();
    let dialogue = [
        "<Anna>: \"I can't wait for the weekend, the weather should be lovely.\"",
        "<Assistant>: \"That sounds wonderful! Do you have anything planned?\"",
        "<Anna>: \"Yes, a picnic by the lake with sandwiches and lemonade.\"",
        "<Assistant>: \"Lovely. Who is coming along with you on Saturday?\"",
        "<Anna>: \"Just a few friends from work. What should I bring for the picnic?\"",
    ]
    .join("\n");
    assert!(dialogue.chars().count() >= 200, "a dialogue long enough");
    let hits = ranked_ids_in(&hub, &dialogue, 5, SearchMode::Hybrid);
    assert_eq!(hits.first(), Some(&picnic), "{hits:?}");
    assert_eq!(
        last_thread().as_deref(),
        Some("memd-query-embed"),
        "the dialogue is embedded on a thread of its own while full text ranks"
    );
    let hits = ranked_ids_in(&hub, "picnic by the lake", 5, SearchMode::Hybrid);
    assert_eq!(hits.first(), Some(&picnic), "{hits:?}");
    assert_ne!(
        last_thread().as_deref(),
        Some("memd-query-embed"),
        "a short query is embedded on the search's own thread"
    );
}
