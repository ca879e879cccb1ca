//! Writes never wait for readers: a search embedding pending memories does
//! not hold up the writer, and a memory changed while its vector was being
//! computed does not get the stale vector.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_hub::embed::hash::HashEmbedder;
use memory_hub::embed::{EmbedError, Embedder};
use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::index::filter::Filter;
use memory_hub::search::{SearchMode, SearchRequest};

use crate::support::{Gate, TempRoot, ranked_ids_in, scene, search_ids_in, write};

/// Far beyond any honest wait: the write either returns or is blocked for good.
const BOUND: Duration = Duration::from_secs(30);

/// The hash embedder, except that once armed, embedding passages stops
/// inside `embed_passages` (after saying so) until the test opens the gate.
struct GatedEmbedder {
    inner: HashEmbedder,
    entered: Mutex<Option<mpsc::Sender<()>>>,
    gate: Gate,
}

impl GatedEmbedder {
    fn new() -> Self {
        GatedEmbedder {
            inner: HashEmbedder::new(384),
            entered: Mutex::new(None),
            gate: Gate::new(true),
        }
    }

    /// The next passage embedding stops in the gate; the receiver hears when it is there.
    fn arm(&self) -> mpsc::Receiver<()> {
        let (tx, rx) = mpsc::channel();
        *self.entered.lock().unwrap() = Some(tx);
        self.gate.close();
        rx
    }

    fn release(&self) {
        self.gate.open();
    }
}

impl Embedder for GatedEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_queries(texts)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(tx) = self.entered.lock().unwrap().take() {
            let _ = tx.send(());
        }
        self.gate.pass();
        self.inner.embed_passages(texts)
    }
}

fn gated_hub(root: &TempRoot) -> (Hub, Arc<GatedEmbedder>) {
    let embedder = Arc::new(GatedEmbedder::new());
    (root.hub_with(embedder.clone()), embedder)
}

fn hybrid(query: &str) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        filter: Filter::all(),
        limit: Some(10),
        mode: Some(SearchMode::Hybrid),
        min_score: None,
    }
}

#[test]
fn a_write_completes_while_a_search_is_embedding_pending_memories() {
    let root = TempRoot::new();
    let (hub, gate) = gated_hub(&root);
    let first = write(&hub, "main", "the lighthouse keeper logs every ship");
    let entered = gate.arm();
    std::thread::scope(|s| {
        let search = s.spawn(|| hub.search_filtered(&hybrid("lighthouse ships")));
        // The search is now inside the embedder, embedding the pending memory.
        let reached = entered.recv_timeout(BOUND);
        let (done_tx, done_rx) = mpsc::channel();
        let writing = if reached.is_ok() {
            let hub = &hub;
            Some(s.spawn(move || {
                let out = hub.append(WriteRequest::new(
                    scene("main"),
                    "the harbour master counts the boats",
                    "test",
                ));
                let _ = done_tx.send(());
                out
            }))
        } else {
            None
        };
        let written = writing.as_ref().map(|_| done_rx.recv_timeout(BOUND));
        // Open the gate before asserting, so that a failure never leaves a
        // thread stuck and the scope can end.
        gate.release();
        assert!(reached.is_ok(), "the search never reached the embedder");
        assert_eq!(
            written,
            Some(Ok(())),
            "the write waited for the search's embedding"
        );
        let second = writing.unwrap().join().unwrap().expect("write");
        let found = search.join().unwrap().expect("search");
        assert!(
            found.hits.iter().any(|h| h.memory.id == first),
            "the search sees the memory it embedded"
        );
        assert_ne!(second.id, first);
    });
    // The memory written meanwhile is embedded by the next search.
    // Which memories have vectors is under test: the decision is off.
    let ids = ranked_ids_in(&hub, "harbour boats", 10, SearchMode::Semantic);
    assert!(ids.len() == 2, "both memories have vectors: {ids:?}");
    assert_eq!(hub.stats().unwrap().vectors, 2);
}

#[test]
fn a_memory_forgotten_while_its_vector_is_computed_gets_no_vector() {
    let root = TempRoot::new();
    let (hub, gate) = gated_hub(&root);
    let id = write(&hub, "main", "a secret recipe for plum jam");
    let entered = gate.arm();
    std::thread::scope(|s| {
        let embedding = s.spawn(|| hub.embed_pending(usize::MAX));
        let reached = entered.recv_timeout(BOUND);
        let (done_tx, done_rx) = mpsc::channel();
        let forgetting = reached.is_ok().then(|| {
            let (hub, id) = (&hub, id.clone());
            s.spawn(move || {
                let out = hub.tombstone(&id, Some("test".into()), "test", &Filter::all());
                let _ = done_tx.send(());
                out
            })
        });
        let forgot = forgetting.as_ref().map(|_| done_rx.recv_timeout(BOUND));
        gate.release();
        assert!(reached.is_ok(), "embedding never reached the embedder");
        assert_eq!(forgot, Some(Ok(())), "forgetting waited for embedding");
        forgetting.unwrap().join().unwrap().expect("forget");
        assert_eq!(
            embedding.join().unwrap(),
            0,
            "the vector of a forgotten memory is not stored"
        );
    });
    assert_eq!(hub.stats().unwrap().vectors, 0);
    assert!(search_ids_in(&hub, "plum jam recipe", 10, SearchMode::Semantic).is_empty());
}
