//! Which of a few query terms a text holds, as [`tokenize`](super::tokenizer::tokenize) and
//! [`cjk_words`](super::tokenizer::cjk_words) would cut it, without cutting all of it.
//!
//! The coverage re-rank of full text asks, for each of a few hundred
//! bodies, which of a query's terms each holds. Cutting every body into
//! all its terms (stemming every word, jieba on every CJK run) and then
//! looking the query's terms up costs most of that pass. [`Probe::scan`]
//! walks the normalised text once and keeps only what the query asks
//! about: a word is stemmed only when it starts with the first letter of a
//! term (the stemmer keeps a word's first letter), a bigram is looked up
//! only when its first character starts one, and jieba cuts only the CJK
//! runs that hold one of the query's jieba words as a substring (jieba's
//! words are pieces of the run it cuts). The answer is the one a full cut
//! gives (a test compares them).

use std::collections::HashSet;

use super::tokenizer::{Term, TermKind, cut_for_search, is_cjk, normalize, token_text};

/// The terms asked about: texts of the tokenizer's terms (words, bigrams,
/// lone characters, whatever the kind) and jieba words.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    tokens: HashSet<String>,
    firsts: HashSet<char>,
    segments: Vec<String>,
}

/// What [`Probe::scan`] found in one text.
#[derive(Debug, Default)]
pub(crate) struct Held {
    tokens: HashSet<String>,
    segments: HashSet<String>,
    norm: String,
}

impl Probe {
    /// A probe for `terms`: words and bigrams are looked up among the
    /// tokenizer's terms, jieba words among [`cjk_words`](super::tokenizer::cjk_words)'s, and lone
    /// characters in the normalised text.
    pub(crate) fn new<'a>(terms: impl IntoIterator<Item = &'a Term>) -> Probe {
        let mut probe = Probe::default();
        for t in terms {
            match t.kind {
                TermKind::Word | TermKind::Bigram => {
                    if let Some(c) = t.text.chars().next() {
                        probe.firsts.insert(c);
                        probe.tokens.insert(t.text.clone());
                    }
                }
                TermKind::Segment => {
                    if !probe.segments.contains(&t.text) {
                        probe.segments.push(t.text.clone());
                    }
                }
                TermKind::Single => {}
            }
        }
        probe
    }

    /// The asked terms `text` holds.
    pub(crate) fn scan(&self, text: &str) -> Held {
        let norm = normalize(text);
        let mut held = Held::default();
        let mut word = String::new();
        let mut run: Vec<char> = Vec::new();
        for c in norm.chars() {
            if is_cjk(c) {
                self.word(&mut word, &mut held);
                run.push(c);
            } else if c.is_alphanumeric() {
                self.run(&mut run, &mut held);
                word.push(c);
            } else {
                self.word(&mut word, &mut held);
                self.run(&mut run, &mut held);
            }
        }
        self.word(&mut word, &mut held);
        self.run(&mut run, &mut held);
        held.norm = norm;
        held
    }

    /// Ends a word: its term (stemmed as [`tokenize`](super::tokenizer::tokenize) does) when asked.
    fn word(&self, word: &mut String, held: &mut Held) {
        if word.is_empty() {
            return;
        }
        if word
            .chars()
            .next()
            .is_some_and(|c| self.firsts.contains(&c))
        {
            let text = token_text(word);
            if self.tokens.contains(&text) {
                held.tokens.insert(text);
            }
        }
        word.clear();
    }

    /// Ends a CJK run: its bigrams (or its lone character) and its jieba
    /// words, when asked.
    fn run(&self, run: &mut Vec<char>, held: &mut Held) {
        if run.is_empty() {
            return;
        }
        let mut pair = String::new();
        if run.len() == 1 {
            pair.push(run[0]);
            if self.tokens.contains(&pair) {
                held.tokens.insert(pair);
            }
            run.clear();
            return;
        }
        for w in run.windows(2) {
            if self.firsts.contains(&w[0]) {
                pair.clear();
                pair.push(w[0]);
                pair.push(w[1]);
                if self.tokens.contains(&pair) {
                    held.tokens.insert(pair.clone());
                }
            }
        }
        if !self.segments.is_empty() {
            let text: String = run.iter().collect();
            if self.segments.iter().any(|s| text.contains(s.as_str())) {
                for w in cut_for_search(&text) {
                    if self.segments.contains(&w) {
                        held.segments.insert(w);
                    }
                }
            }
        }
        run.clear();
    }
}

impl Held {
    /// Whether the text holds `term`: a word or bigram among the
    /// tokenizer's terms (whatever their kind, as a term-frequency table
    /// keyed by text finds it), a jieba word among [`cjk_words`](super::tokenizer::cjk_words)'s, a lone
    /// CJK character anywhere in the normalised text. Only terms of the
    /// probe are ever found.
    pub(crate) fn holds(&self, term: &Term) -> bool {
        match term.kind {
            TermKind::Word | TermKind::Bigram => self.tokens.contains(&term.text),
            TermKind::Segment => self.segments.contains(&term.text),
            TermKind::Single => {
                let mut chars = term.text.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => is_cjk(c) && self.norm.contains(c),
                    _ => false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::tokenizer::{cjk_chars, cjk_words, tokenize};

    const TEXTS: &[&str] = &[
        "Bart painted the fences; painting, paints, stories, loved loving love",
        "项目会议推迟到下周一，周末的项目计划 project plan",
        "Lisa 在学校图书馆借了一本小说 the libraries",
        "我 a 他 b 魔术表演很精彩！ＡＢＣ full-width　space",
        "running runner runs ran stopped stopping misses buzzing falls",
        "中华人民共和国 南京市长江大桥 研究生命起源",
        "x",
        "",
        "ﾃｽﾄ カタカナ 한국어 텍스트 ＰＲＯＪＥＣＴ",
    ];

    /// Every term any text holds, plus some none does.
    fn terms() -> Vec<Term> {
        let mut out: Vec<Term> = Vec::new();
        for t in TEXTS {
            out.extend(tokenize(t));
            out.extend(cjk_words(t).into_iter().map(|w| Term {
                text: w,
                kind: TermKind::Segment,
            }));
            out.extend(cjk_chars(t).into_iter().map(|c| Term {
                text: c,
                kind: TermKind::Single,
            }));
        }
        for (text, kind) in [
            ("paint", TermKind::Word),
            ("pain", TermKind::Word),
            ("fence", TermKind::Word),
            ("天气", TermKind::Bigram),
            ("天气", TermKind::Segment),
            ("南京", TermKind::Segment),
            ("京市", TermKind::Segment),
            ("猫", TermKind::Single),
            ("ab", TermKind::Single),
            ("项", TermKind::Word),
        ] {
            out.push(Term {
                text: text.into(),
                kind,
            });
        }
        out
    }

    /// What a full cut says `text` holds of `term`.
    fn full_cut(text: &str, term: &Term) -> bool {
        match term.kind {
            TermKind::Word | TermKind::Bigram => tokenize(text).iter().any(|t| t.text == term.text),
            TermKind::Segment => cjk_words(text).contains(&term.text),
            TermKind::Single => cjk_chars(text).contains(&term.text),
        }
    }

    #[test]
    fn a_scan_finds_what_a_full_cut_finds() {
        let terms = terms();
        // One probe of everything, and one per term (the prefilters differ).
        let all = Probe::new(&terms);
        for text in TEXTS {
            let held = all.scan(text);
            for term in &terms {
                let one = Probe::new([term]).scan(text);
                let want = full_cut(text, term);
                assert_eq!(held.holds(term), want, "{text:?} {term:?}");
                assert_eq!(one.holds(term), want, "{text:?} {term:?} alone");
            }
        }
    }
}
