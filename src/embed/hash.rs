//! A deterministic embedder for tests that are not about embeddings.
//!
//! Each term of the text (our own full-text tokenizer: words and CJK bigrams)
//! becomes a pseudo-random vector seeded by its hash (a random projection);
//! the sum is L2-normalised. Texts that share terms get similar vectors,
//! identical texts identical ones, and nothing depends on a model file. It counts the texts it embeds, so tests
//! can check that the vector cache spares work.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{EmbedError, Embedder, normalize};
use crate::analysis::tokenizer::tokenize;

/// Hash-of-terms vectors; see the module docs.
pub struct HashEmbedder {
    dim: usize,
    model_id: String,
    passages: AtomicUsize,
}

impl HashEmbedder {
    /// A hash embedder with `dim` components.
    pub fn new(dim: usize) -> Self {
        HashEmbedder {
            dim: dim.max(1),
            model_id: format!("hash:{dim}"),
            passages: AtomicUsize::new(0),
        }
    }

    /// Passages embedded so far.
    pub fn passages_embedded(&self) -> usize {
        self.passages.load(Ordering::SeqCst)
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dim];
        for term in tokenize(text) {
            // FNV-1a seeds a xorshift stream: stable across platforms and
            // releases, unlike std's hasher. Every term touches every
            // component, so unrelated texts get small but distinct
            // similarities instead of exact ties at zero.
            let mut x: u64 = 0xcbf2_9ce4_8422_2325;
            for b in term.text.bytes() {
                x ^= u64::from(b);
                x = x.wrapping_mul(0x0100_0000_01b3);
            }
            for c in v.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *c += (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
        }
        if v.iter().all(|x| *x == 0.0) {
            v[0] = 1.0;
        }
        normalize(&mut v);
        v
    }
}

impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.passages.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_unit_and_deterministic() {
        let e = HashEmbedder::new(64);
        let a = e.embed_passages(&["公园散步 park walk", ""]).unwrap();
        let b = e.embed_passages(&["公园散步 park walk"]).unwrap();
        assert_eq!(a[0], b[0]);
        for v in &a {
            let norm: f32 = v.iter().map(|x| x * x).sum();
            assert!((norm - 1.0).abs() < 1e-5);
        }
        assert_eq!(e.passages_embedded(), 3);
    }
}
