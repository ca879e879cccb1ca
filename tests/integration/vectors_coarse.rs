//! The coarse (1-bit, in process) vector pass and its exact rescoring (`index::vector`):
//! on well-separated data it returns exactly the exact KNN's top k with the
//! exact distances, and visibility filters hold inside the coarse KNN (k
//! visible rows come back even when invisible rows are all nearer).

use std::sync::Arc;

use memory_hub::embed::{EmbedError, Embedder};
use memory_hub::hub::Hub;
use memory_hub::index::filter::{Filter, Scope};
use memory_hub::index::vector;
use memory_hub::search::SearchMode;

use crate::support::{TempRoot, ranked_ids_in, scene, write};

const DIM: usize = 64;

/// A deterministic unit vector: cluster `c` (well apart from the others)
/// plus a small offset `i` inside it.
fn point(c: usize, i: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; DIM];
    v[c % DIM] = 1.0;
    // Small, distinct offsets: every vector differs, neighbours stay in the cluster.
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for slot in v.iter_mut() {
        x ^= x >> 29;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        *slot += ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2;
    }
    let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.iter().map(|a| a / n).collect()
}

/// Texts `c<cluster>-<i>` embed as `point(cluster, i)`; queries likewise.
struct TableEmbedder;

fn parse(text: &str) -> Vec<f32> {
    let (c, i) = text
        .trim()
        .trim_start_matches('c')
        .split_once('-')
        .expect("texts are c<cluster>-<i>");
    point(c.parse().unwrap(), i.parse().unwrap())
}

impl Embedder for TableEmbedder {
    fn model_id(&self) -> &str {
        "table-64"
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| parse(t)).collect())
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| parse(t)).collect())
    }
}

fn hub(root: &TempRoot) -> Hub {
    root.hub_with(Arc::new(TableEmbedder))
}

#[test]
fn quantize_scales_the_largest_component_to_127() {
    let q = vector::quantize(&[0.5, -0.25, 0.0, -0.5]);
    assert_eq!(q, [127u8, (-64i8) as u8, 0, (-127i8) as u8]);
    assert_eq!(
        vector::quantize(&[0.0, 0.0]),
        [0, 0],
        "a zero vector stays zero"
    );
}

#[test]
fn coarse_pass_returns_the_exact_top_k_on_well_separated_data() {
    let root = TempRoot::new();
    let hub = hub(&root);
    // 8 clusters of 60: more rows than the coarse pass hands on for k = 10
    // (296) or 50 (456), so the 1-bit pass really chooses.
    for c in 0..8 {
        for i in 0..60 {
            write(&hub, "main", &format!("c{c}-{}", c * 1000 + i));
        }
    }
    assert_eq!(hub.embed_pending(usize::MAX), 480);
    assert!(vector::candidates(50) < 480);
    for (c, i) in [(0, 5_000), (3, 5_001), (7, 5_002), (5, 17)] {
        let q = point(c, i);
        for k in [1, 10, 50] {
            let coarse = hub
                .index()
                .vector_search(&q, "table-64", &Filter::all(), k)
                .unwrap();
            let exact = hub
                .index()
                .vector_search_exact(&q, &Filter::all(), k)
                .unwrap();
            assert_eq!(coarse.len(), k);
            assert_eq!(
                coarse, exact,
                "cluster {c}, k {k}: same ids, same exact distances, same order"
            );
        }
    }
    // Through the search API too: semantic search over the coarse pass.
    // What the coarse pass returns is under test: the decision is off.
    let ids = ranked_ids_in(&hub, "c2-9000", 10, SearchMode::Semantic);
    assert_eq!(ids.len(), 10);
}

#[test]
fn coarse_pass_applies_the_filter_inside_the_knn() {
    let root = TempRoot::new();
    let hub = hub(&root);
    // The pet scene holds the query's whole neighbourhood (cluster 1); main
    // holds cluster 1 only far down, behind 200 nearer pet rows.
    let mut main_ids = Vec::new();
    for i in 0..200 {
        write(&hub, "pet", &format!("c1-{i}"));
    }
    for i in 0..30 {
        main_ids.push(write(&hub, "main", &format!("c2-{i}")));
    }
    for i in 0..100 {
        main_ids.push(write(&hub, "main", &format!("c3-{i}")));
    }
    hub.embed_pending(usize::MAX);
    let main_only = Filter::scope(Scope {
        scenes: vec![scene("main")],
        ..Scope::default()
    });
    let q = point(1, 999);
    for k in [10, 50, 120] {
        let coarse = hub
            .index()
            .vector_search(&q, "table-64", &main_only, k)
            .unwrap();
        assert_eq!(coarse.len(), k, "k visible rows, not fewer");
        assert!(coarse.iter().all(|(id, _)| main_ids.contains(id)));
        let exact = hub.index().vector_search_exact(&q, &main_only, k).unwrap();
        assert_eq!(
            coarse.iter().map(|h| &h.0).collect::<Vec<_>>(),
            exact.iter().map(|h| &h.0).collect::<Vec<_>>(),
            "k {k}"
        );
    }
    // Nothing visible: nothing at all, not the nearest invisible rows.
    let nothing = Filter::scope(Scope {
        scenes: vec![scene("qq:owner")],
        ..Scope::default()
    });
    assert!(
        hub.index()
            .vector_search(&q, "table-64", &nothing, 10)
            .unwrap()
            .is_empty()
    );
}
