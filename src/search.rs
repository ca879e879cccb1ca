//! Query planning and ranking over the index.
//!
//! A query is tokenized with the index's own tokenizer, stop words are
//! dropped, and the text index is asked twice at most: an AND pass (every term
//! must match) and, when that finds fewer than `orFallbackMinHits`, an OR pass
//! that fills the remaining places. AND hits always rank above OR hits; within
//! a pass, BM25 decides and ties go to the smaller id, so results are
//! deterministic and a rebuilt index returns the same order.

use serde::Serialize;

use crate::config::SearchConfig;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::index::filter::Filter;
use crate::index::tokenizer::{Term, is_stop_word, tokenize};
use crate::model::Memory;

/// Which pass found a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pass {
    /// Every query term matched.
    And,
    /// Some query terms matched.
    Or,
}

/// A search request after authorization: the filter is already the caller's visibility.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// Free text.
    pub query: String,
    /// What the caller may see (and any extra restriction it asked for).
    pub filter: Filter,
    /// Number of hits wanted; `None` uses `search.defaultLimit`.
    pub limit: Option<usize>,
}

/// One result.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    /// The memory.
    #[serde(flatten)]
    pub memory: Memory,
    /// Relevance score (higher is better; comparable within one response only).
    pub score: f32,
    /// The pass that found it.
    pub pass: Pass,
}

/// A response.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// The query terms that were searched for.
    pub terms: Vec<String>,
}

/// The terms a query searches for: tokenized, stop words dropped (unless that
/// leaves nothing), duplicates removed.
pub fn query_terms(query: &str) -> Vec<Term> {
    let all = tokenize(query);
    let content: Vec<Term> = all.iter().filter(|t| !is_stop_word(t)).cloned().collect();
    let mut chosen = if content.is_empty() { all } else { content };
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|t| seen.insert(t.text.clone()));
    chosen
}

/// Runs the two-pass search.
pub fn search(index: &Index, req: &SearchRequest, cfg: &SearchConfig) -> Result<SearchResults> {
    let limit = req.limit.unwrap_or(cfg.default_limit);
    if limit == 0 || limit > cfg.max_limit {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {}",
            cfg.max_limit
        )));
    }
    if req.query.trim().is_empty() {
        return Err(Error::invalid("query must not be empty"));
    }
    // Changes applied but not yet committed to the text index become visible now.
    index.refresh()?;
    let terms = query_terms(&req.query);
    let term_texts = terms.iter().map(|t| t.text.clone()).collect();
    let mut scored: Vec<(String, f32, Pass)> = index
        .text_search(&terms, &req.filter, true, limit)?
        .into_iter()
        .map(|h| (h.id, h.score, Pass::And))
        .collect();
    if terms.len() > 1 && scored.len() < cfg.or_fallback_min_hits.min(limit) {
        let or_hits = index.text_search(&terms, &req.filter, false, limit)?;
        for h in or_hits {
            if scored.len() >= limit {
                break;
            }
            if !scored.iter().any(|(id, _, _)| *id == h.id) {
                scored.push((h.id, h.score, Pass::Or));
            }
        }
    }
    let ids: Vec<String> = scored.iter().map(|(id, _, _)| id.clone()).collect();
    let mut rows = index.meta.get_many(&ids, &req.filter)?;
    let hits = scored
        .into_iter()
        .filter_map(|(id, score, pass)| {
            rows.remove(&id).map(|memory| SearchHit {
                memory,
                score,
                pass,
            })
        })
        .collect();
    Ok(SearchResults {
        hits,
        terms: term_texts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_terms_drop_stop_words_and_duplicates() {
        let texts = |q: &str| {
            query_terms(q)
                .into_iter()
                .map(|t| t.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(texts("What is the park like in the park"), ["park", "like"]);
        assert_eq!(texts("the"), ["the"]);
        assert_eq!(texts("公园 公园"), ["公园"]);
    }
}
