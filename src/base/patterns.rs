//! A set of regular expressions that keeps a bounded number of search
//! caches.
//!
//! `regex::RegexSet` keeps one lazy-DFA cache per pool slot, and its pool
//! hands slots out by thread id: a long-lived server whose worker threads
//! come and go (tokio's blocking pool, tantivy's indexing threads) ends up
//! with a cache in every slot, each grown towards its capacity by the
//! states its texts visited. For a set of many patterns that is megabytes
//! per slot, and the process's memory climbs for an hour as the slots fill.
//! [`Patterns`] keeps at most [`KEPT_CACHES`] caches: a search takes one
//! (or makes one when all are in use) and gives it back only while fewer
//! are kept.

use std::sync::Mutex;

use regex_automata::meta::{self, Cache, Regex};
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet};

/// Caches kept between searches: one per core of the machines memd is
/// sized for; a search beyond them makes a cache and drops it after.
pub const KEPT_CACHES: usize = 2;

/// Most bytes one search cache's lazy DFA may hold before it starts over
/// (`regex`'s default).
const CACHE_CAPACITY: usize = 2 << 20;

/// Patterns searched together: which of them match a text.
pub struct Patterns {
    re: Regex,
    caches: Mutex<Vec<Cache>>,
}

impl Patterns {
    /// Compiles `patterns` as `regex::RegexSet` does (Unicode, UTF-8, every
    /// pattern reported).
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, Box<meta::BuildError>> {
        let config = meta::Config::new()
            .match_kind(MatchKind::All)
            .utf8_empty(true)
            .nfa_size_limit(Some(10 << 20))
            .hybrid_cache_capacity(CACHE_CAPACITY)
            .which_captures(regex_automata::nfa::thompson::WhichCaptures::None);
        let re = meta::Builder::new()
            .configure(config)
            .syntax(syntax::Config::new().utf8(true))
            .build_many(patterns)
            .map_err(Box::new)?;
        Ok(Self {
            re,
            caches: Mutex::new(Vec::new()),
        })
    }

    /// The patterns that match somewhere in `text`, by index, ascending.
    pub fn matches(&self, text: &str) -> Vec<usize> {
        let mut cache = self
            .caches
            .lock()
            .ok()
            .and_then(|mut kept| kept.pop())
            .unwrap_or_else(|| self.re.create_cache());
        let mut found = PatternSet::new(self.re.pattern_len());
        self.re
            .which_overlapping_matches_with(&mut cache, &Input::new(text), &mut found);
        if let Ok(mut kept) = self.caches.lock()
            && kept.len() < KEPT_CACHES
        {
            kept.push(cache);
        }
        found.iter().map(|p| p.as_usize()).collect()
    }

    /// How many patterns there are.
    pub fn len(&self) -> usize {
        self.re.pattern_len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.caches.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same answers as `regex::RegexSet` on the same patterns.
    #[test]
    fn answers_as_regex_set_does() {
        let patterns = [
            r"\bsk-[a-z0-9]{10,}",
            r"(?i)password\s*[:=]\s*\S+",
            r"密码[:：]\s*\S+",
            r"(?-u:\b)[0-9a-f]{32}(?-u:\b)",
            r"^$",
        ];
        let ours = Patterns::new(&patterns).unwrap();
        let theirs = regex::RegexSet::new(patterns).unwrap();
        assert_eq!(ours.len(), 5);
        for text in [
            "",
            "my key is sk-abcdefghij12 ok",
            "Password: hunter2 and 密码：abc",
            "0123456789abcdef0123456789abcdef",
            "nothing here",
            "sk-short 密码",
        ] {
            let want: Vec<usize> = theirs.matches(text).iter().collect();
            assert_eq!(ours.matches(text), want, "{text:?}");
        }
    }

    /// However many threads search, at most [`KEPT_CACHES`] caches stay.
    #[test]
    fn caches_kept_are_bounded() {
        let ours = Patterns::new(&[r"a+b", r"\d{3,}"]).unwrap();
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    for i in 0..200 {
                        assert_eq!(ours.matches(&format!("xaab {i:04}")), vec![0, 1]);
                    }
                });
            }
        });
        assert!(ours.kept() <= KEPT_CACHES);
        assert!(ours.kept() >= 1);
    }
}
