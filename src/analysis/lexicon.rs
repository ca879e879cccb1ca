//! A bilingual (Chinese ↔ English) lexicon for cross-lingual full text,
//! read from CC-CEDICT (`memd setup` installs the dictionary under
//! the models directory; the data is CC BY-SA 4.0 and is never shipped in
//! the crate).
//!
//! Each CC-CEDICT line is `traditional simplified [pinyin] /sense/sense/…/`.
//! Only the simplified headword is kept, and each sense is reduced to its
//! content words, analysed like the English side of the index
//! ([`super::tokenizer::tokenize`]: lowercased, stop words dropped, lightly
//! stemmed). Senses that only point elsewhere (`surname …`, `variant of …`,
//! `see …`, `CL:…`, anything holding Chinese characters) and text in
//! brackets (`(Tw)`, `(lit.)`, pinyin in `[…]`) are dropped.
//!
//! Two directions:
//! - **zh → en** ([`Lexicon::english_of`]): a headword's content stems, in
//!   sense order, at most [`MAX_GLOSS_TERMS`] of them.
//! - **en → zh** ([`Lexicon::chinese_of`]): the headwords of two characters
//!   or more that have a sense made of that one content word alone
//!   (`开心` for `happy` from its sense `happy`, not `跳` from `to jump; to
//!   skip a turn`'s longer senses). A one-word sense is a translation; a word
//!   inside a longer sense mostly is not.
//!
//! Storage is compact: the headwords and the English stems each sit sorted
//! in one string arena (binary search), and both directions are flat `u32`
//! posting lists ([`Lexicon::heap_bytes`] reports the total). The same
//! arrays, written out as they are ([`Lexicon::to_compact`]), load back in
//! one read and a few checks ([`Lexicon::from_compact`]): parsing the text
//! takes a second or more, reading the compact form a few milliseconds.

use std::collections::HashMap;

#[cfg(doc)]
use super::tokenizer::tokenize;
use super::tokenizer::{is_cjk, is_stop_word_text};

/// At most this many English stems translate one headword (the first ones,
/// in sense order: CC-CEDICT lists the common senses first).
pub const MAX_GLOSS_TERMS: usize = 8;

/// The first bytes of [`Lexicon::to_compact`]'s form. The digit is bumped
/// whenever parsing changes what a CC-CEDICT line becomes (senses kept,
/// stemming, [`MAX_GLOSS_TERMS`]), so a compact file built by an older build
/// is rebuilt from the text.
pub const COMPACT_MAGIC: &[u8] = b"memd-lexicon-1\n";

/// Gloss words that carry no meaning of their own (`to do sth for sb`).
const GLOSS_STOP: &[&str] = &[
    "also",
    "esp",
    "etc",
    "oneself",
    "sb",
    "someone",
    "something",
    "sth",
    "up",
];

/// Sense prefixes that refer elsewhere instead of translating.
const REFERENCE_PREFIXES: &[&str] = &[
    "abbr",
    "also pr",
    "also written",
    "cl:",
    "erhua variant",
    "old variant",
    "see ",
    "surname",
    "taiwan pr",
    "used in",
    "variant of",
    "japanese variant",
];

/// Sorted, distinct strings in one arena.
#[derive(Debug, Default, PartialEq, Eq)]
struct Strings {
    arena: String,
    ends: Vec<u32>,
}

impl Strings {
    fn from_sorted(sorted: &[&str]) -> Strings {
        let mut s = Strings::default();
        for w in sorted {
            s.arena.push_str(w);
            s.ends.push(s.arena.len() as u32);
        }
        s
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.arena[start..self.ends[i] as usize]
    }

    fn find(&self, key: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.ends.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn heap_bytes(&self) -> usize {
        self.arena.capacity() + self.ends.capacity() * 4
    }
}

impl Strings {
    /// Rebuilds from a compact form's arena and ends, checking that every
    /// end is in order, within the arena and on a character boundary, and
    /// that the strings are sorted and distinct (binary search needs it).
    fn from_parts(arena: String, ends: Vec<u32>) -> Option<Strings> {
        let mut prev = 0usize;
        for &e in &ends {
            let e = e as usize;
            if e < prev || e > arena.len() || !arena.is_char_boundary(e) {
                return None;
            }
            prev = e;
        }
        let s = Strings { arena, ends };
        if (1..s.len()).any(|i| s.get(i - 1) >= s.get(i)) {
            return None;
        }
        Some(s)
    }
}

/// One list of ids per key, flat.
#[derive(Debug, Default, PartialEq, Eq)]
struct Postings {
    ends: Vec<u32>,
    ids: Vec<u32>,
}

impl Postings {
    fn build(lists: &[Vec<u32>]) -> Postings {
        let mut p = Postings::default();
        for l in lists {
            p.ids.extend_from_slice(l);
            p.ends.push(p.ids.len() as u32);
        }
        p.ids.shrink_to_fit();
        p
    }

    fn get(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.ids[start..self.ends[i] as usize]
    }

    fn heap_bytes(&self) -> usize {
        (self.ends.capacity() + self.ids.capacity()) * 4
    }

    /// Rebuilds from a compact form's parts, checking that `ends` has one
    /// entry per key, in order and within `ids`, and every id is below `max_id`.
    fn from_parts(ends: Vec<u32>, ids: Vec<u32>, keys: usize, max_id: usize) -> Option<Postings> {
        if ends.len() != keys {
            return None;
        }
        let mut prev = 0u32;
        for &e in &ends {
            if e < prev || e as usize > ids.len() {
                return None;
            }
            prev = e;
        }
        if ids.iter().any(|&i| i as usize >= max_id) {
            return None;
        }
        Some(Postings { ends, ids })
    }
}

/// The lexicon: simplified headwords ↔ English stems.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lexicon {
    zh: Strings,
    en: Strings,
    zh_to_en: Postings,
    en_to_zh: Postings,
}

/// Removes bracketed text: `(…)` and `[…]`, nested or not.
fn strip_brackets(sense: &str) -> String {
    let mut out = String::with_capacity(sense.len());
    let mut depth = 0usize;
    for c in sense.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The content stems of one sense, or nothing for a sense that refers elsewhere.
///
/// Words are split and stemmed as [`tokenize`] does for ASCII text
/// (lowercase, runs of letters and digits, [`super::stem::stem`] unless a
/// stop word); only words of ASCII letters are kept. Splitting by hand
/// instead of through [`tokenize`] (NFKC) makes loading several times faster.
fn sense_terms(sense: &str) -> Vec<String> {
    if sense.chars().any(is_cjk) {
        return Vec::new();
    }
    let clean = strip_brackets(sense).to_ascii_lowercase();
    let lower = clean.trim();
    if REFERENCE_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for word in lower.split(|c: char| !c.is_alphanumeric()) {
        if word.len() < 2
            || !word.bytes().all(|b| b.is_ascii_lowercase())
            || is_stop_word_text(word)
            || GLOSS_STOP.contains(&word)
        {
            continue;
        }
        let stem = super::stem::stem(word);
        if !out.contains(&stem) {
            out.push(stem);
        }
    }
    out
}

impl Lexicon {
    /// Reads CC-CEDICT text (comment lines start with `#`; malformed lines are skipped).
    pub fn parse(text: &str) -> Lexicon {
        // headword → (stems in sense order, its one-word senses)
        let mut entries: HashMap<&str, (Vec<String>, Vec<String>)> = HashMap::new();
        for line in text.lines() {
            if line.starts_with('#') {
                continue;
            }
            let mut parts = line.splitn(3, ' ');
            let (Some(_trad), Some(simp), Some(rest)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if simp.is_empty() || !simp.chars().all(is_cjk) {
                continue;
            }
            let Some(senses) = rest
                .find('/')
                .map(|i| &rest[i..])
                .map(|s| s.trim_matches(|c| c == '/' || c == ' '))
            else {
                continue;
            };
            let entry = entries.entry(simp).or_default();
            for sense in senses.split('/') {
                let terms = sense_terms(sense);
                if terms.len() == 1 && simp.chars().nth(1).is_some() && !entry.1.contains(&terms[0])
                {
                    entry.1.push(terms[0].clone());
                }
                for t in terms {
                    if entry.0.len() < MAX_GLOSS_TERMS && !entry.0.contains(&t) {
                        entry.0.push(t);
                    }
                }
            }
        }
        entries.retain(|_, (stems, _)| !stems.is_empty());
        let mut heads: Vec<&str> = entries.keys().copied().collect();
        heads.sort_unstable();
        let mut stems: Vec<&str> = entries
            .values()
            .flat_map(|(s, one_word)| s.iter().chain(one_word).map(String::as_str))
            .collect();
        stems.sort_unstable();
        stems.dedup();
        let zh = Strings::from_sorted(&heads);
        let en = Strings::from_sorted(&stems);
        let en_id = |s: &str| en.find(s).expect("every stem is in the vocabulary") as u32;
        let mut forward = Vec::with_capacity(heads.len());
        let mut reverse: Vec<Vec<u32>> = vec![Vec::new(); en.len()];
        for (zi, h) in heads.iter().enumerate() {
            let (s, one_word) = &entries[h];
            forward.push(s.iter().map(|s| en_id(s)).collect::<Vec<u32>>());
            for w in one_word {
                reverse[en_id(w) as usize].push(zi as u32);
            }
        }
        Lexicon {
            zh_to_en: Postings::build(&forward),
            en_to_zh: Postings::build(&reverse),
            zh,
            en,
        }
    }

    /// The English stems a simplified headword translates to (empty if unknown).
    pub fn english_of(&self, headword: &str) -> Vec<&str> {
        self.zh.find(headword).map_or_else(Vec::new, |i| {
            self.zh_to_en
                .get(i)
                .iter()
                .map(|&e| self.en.get(e as usize))
                .collect()
        })
    }

    /// The headwords (two characters or more) with a sense that is this
    /// English stem alone, in headword order (empty if none).
    pub fn chinese_of(&self, stem: &str) -> Vec<&str> {
        self.en.find(stem).map_or_else(Vec::new, |i| {
            self.en_to_zh
                .get(i)
                .iter()
                .map(|&z| self.zh.get(z as usize))
                .collect()
        })
    }

    /// The compact binary form ([`Lexicon::from_compact`] reads it back):
    /// [`COMPACT_MAGIC`], then `stamp` (whatever identifies the source the
    /// caller built it from), then the eight arrays of the lexicon, each as
    /// a little-endian `u64` byte length and its bytes (`u32`s little-endian).
    /// Reading it is one file read and a few checks, no parsing.
    pub fn to_compact(&self, stamp: &[u8]) -> Vec<u8> {
        fn words(v: &[u32]) -> Vec<u8> {
            v.iter().flat_map(|w| w.to_le_bytes()).collect()
        }
        let parts: [Vec<u8>; 8] = [
            self.zh.arena.as_bytes().to_vec(),
            words(&self.zh.ends),
            self.en.arena.as_bytes().to_vec(),
            words(&self.en.ends),
            words(&self.zh_to_en.ends),
            words(&self.zh_to_en.ids),
            words(&self.en_to_zh.ends),
            words(&self.en_to_zh.ids),
        ];
        let mut out = Vec::with_capacity(
            COMPACT_MAGIC.len()
                + 8
                + stamp.len()
                + parts.iter().map(|p| 8 + p.len()).sum::<usize>(),
        );
        out.extend_from_slice(COMPACT_MAGIC);
        for part in std::iter::once(stamp).chain(parts.iter().map(Vec::as_slice)) {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    /// Reads [`Lexicon::to_compact`]'s form; `None` unless it is complete,
    /// consistent (see the `from_parts` checks) and was built from `stamp`.
    pub fn from_compact(bytes: &[u8], stamp: &[u8]) -> Option<Lexicon> {
        let mut rest = bytes.strip_prefix(COMPACT_MAGIC)?;
        let mut next = || -> Option<&[u8]> {
            let (len, tail) = rest.split_first_chunk::<8>()?;
            let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
            if len > tail.len() {
                return None;
            }
            let (part, tail) = tail.split_at(len);
            rest = tail;
            Some(part)
        };
        fn words(b: &[u8]) -> Option<Vec<u32>> {
            if !b.len().is_multiple_of(4) {
                return None;
            }
            Some(
                b.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )
        }
        if next()? != stamp {
            return None;
        }
        let zh_arena = std::str::from_utf8(next()?).ok()?.to_string();
        let zh_ends = words(next()?)?;
        let en_arena = std::str::from_utf8(next()?).ok()?.to_string();
        let en_ends = words(next()?)?;
        let fwd = (words(next()?)?, words(next()?)?);
        let rev = (words(next()?)?, words(next()?)?);
        if !rest.is_empty() {
            return None;
        }
        let zh = Strings::from_parts(zh_arena, zh_ends)?;
        let en = Strings::from_parts(en_arena, en_ends)?;
        Some(Lexicon {
            zh_to_en: Postings::from_parts(fwd.0, fwd.1, zh.len(), en.len())?,
            en_to_zh: Postings::from_parts(rev.0, rev.1, en.len(), zh.len())?,
            zh,
            en,
        })
    }

    /// Number of headwords.
    pub fn entries(&self) -> usize {
        self.zh.len()
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.zh.heap_bytes()
            + self.en.heap_bytes()
            + self.zh_to_en.heap_bytes()
            + self.en_to_zh.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# a comment\n\
魔術 魔术 [mo2 shu4] /magic/\n\
開心 开心 [kai1 xin1] /to feel happy/happy/to make fun of sb/\n\
高興 高兴 [gao1 xing4] /happy/glad/willing (to do sth)/\n\
表演 表演 [biao3 yan3] /to perform; to act/performance; show/\n\
貓 猫 [mao1] /cat/CL:隻|只[zhi1]/\n\
李 李 [Li3] /surname Li/plum/\n\
裡 里 [li3] /variant of 裏|里[li3]/\n\
3C 3C [san1 C] /abbr. for computers/\n\
broken line\n";

    #[test]
    fn both_directions() {
        let lex = Lexicon::parse(SAMPLE);
        assert_eq!(lex.english_of("魔术"), ["magic"]);
        // Stop words and gloss fillers go; stems are the index's (`happy`, `perform`).
        assert_eq!(lex.english_of("开心"), ["feel", "happy", "mak", "fun"]);
        assert_eq!(
            lex.english_of("表演"),
            ["perform", "act", "performanc", "show"]
        );
        assert_eq!(lex.english_of("猫"), ["cat"]);
        assert_eq!(lex.english_of("李"), ["plum"]);
        assert!(
            lex.english_of("里").is_empty(),
            "a variant is no translation"
        );
        assert!(lex.english_of("3C").is_empty());
        // Reverse: one-word senses only, headwords of two characters or more.
        assert_eq!(lex.chinese_of("happy"), ["开心", "高兴"]);
        assert_eq!(lex.chinese_of("magic"), ["魔术"]);
        assert!(
            lex.chinese_of("cat").is_empty(),
            "single characters are left out"
        );
        assert!(lex.chinese_of("feel").is_empty(), "not a sense of its own");
        assert!(lex.chinese_of("unknown").is_empty());
        assert_eq!(lex.entries(), 6);
        assert!(lex.heap_bytes() > 0);
    }

    #[test]
    fn the_compact_form_reads_back_the_same_lexicon() {
        let lex = Lexicon::parse(SAMPLE);
        let bytes = lex.to_compact(b"stamp");
        let back = Lexicon::from_compact(&bytes, b"stamp").expect("reads back");
        assert_eq!(back, lex);
        assert_eq!(back.english_of("开心"), ["feel", "happy", "mak", "fun"]);
        assert_eq!(back.chinese_of("happy"), ["开心", "高兴"]);
        // Another source's stamp, a truncated or extended file, or damage is refused.
        assert!(Lexicon::from_compact(&bytes, b"other").is_none());
        assert!(Lexicon::from_compact(&bytes[..bytes.len() - 1], b"stamp").is_none());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Lexicon::from_compact(&longer, b"stamp").is_none());
        assert!(Lexicon::from_compact(b"", b"stamp").is_none());
        assert!(Lexicon::from_compact(&bytes[1..], b"stamp").is_none());
        // A flipped byte anywhere either fails a check or reads back something
        // that is still safe to query (no panic on a bad boundary or id).
        for i in COMPACT_MAGIC.len()..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x80;
            if let Some(l) = Lexicon::from_compact(&bad, b"stamp") {
                for w in ["魔术", "开心", "高兴", "表演", "猫", "李"] {
                    let _ = l.english_of(w);
                }
                for w in ["happy", "magic", "cat", "perform"] {
                    let _ = l.chinese_of(w);
                }
            }
        }
        // An empty lexicon round-trips too.
        let empty = Lexicon::parse("");
        assert_eq!(
            Lexicon::from_compact(&empty.to_compact(b""), b""),
            Some(empty)
        );
    }

    #[test]
    fn stems_agree_with_the_tokenizer() {
        let sense = "to perform magic tricks, happily; Stories (old)";
        let want: Vec<String> = crate::analysis::tokenizer::tokenize(sense)
            .into_iter()
            .filter(|t| !crate::analysis::tokenizer::is_stop_word(t))
            .map(|t| t.text)
            .filter(|t| t != "old")
            .collect();
        assert_eq!(sense_terms(sense), want);
    }

    #[test]
    fn brackets_and_references() {
        assert_eq!(strip_brackets("willing (to do sth) [x]"), "willing  ");
        assert!(sense_terms("see 表演[biao3 yan3]").is_empty());
        assert!(sense_terms("Taiwan pr. for X").is_empty());
        assert_eq!(sense_terms("(Tw) to steal"), ["steal"]);
    }
}
