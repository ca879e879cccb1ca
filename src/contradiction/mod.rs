//! Likely contradictions between two memories: pure, synchronous and
//! explainable.
//!
//! Memd keeps "我喜欢喝茶" and a later "我不喜欢喝茶了" as two memories; this
//! module says whether two texts (the caller has already checked they are
//! live facts of one scene and subject) likely state opposite things, and
//! why. Each text becomes a statement: its content words
//! (CJK characters one by one, English words stemmed by
//! [`crate::analysis::stem`]) and numbers, with the words that only negate,
//! like, dislike or colour (`了`, `已经`, `really`, `anymore`) taken out
//! and counted. Two statements are about the same thing when their content
//! words align one to one (a longest common subsequence where any number
//! aligns with any number); then:
//!
//! - **negation**: one is negated (an odd number of `不/没/没有/不再/别/无`,
//!   `not`, `no longer`, `never`) and the other is not;
//! - **preference**: one likes what the other dislikes (`喜欢/爱` against
//!   `讨厌/恨/受不了`, `like/love/enjoy` against `dislike/hate/can't stand`);
//! - **date** or **number**: an aligned number differs (`三月五日` against
//!   `五月三日`, `9:30 am` against `10:00 am`, `两只猫` against `三只猫`);
//!   Chinese numerals count when a measure word or date unit follows them or
//!   `周/星期/礼拜` comes before, English number words, months (next to a
//!   number) and weekdays too;
//! - **value**: the same frame of a one-valued relation (where someone
//!   lives or works, a name, an address, a phone number) holds a different
//!   value in one place (`住在北京` against `住在上海`).
//!
//! "不喜欢" against "讨厌" is no contradiction (both dislike), nor is "我不喜欢
//! 咖啡" against "我喜欢茶" (the content differs). The labelled set in
//! `tests/fixtures/contradictions.jsonl` measures it (`docs/memories.md`).

mod words;

use crate::analysis::stem::stem;
use crate::analysis::tokenizer::{is_cjk, normalize};
use words::Marker;

/// Why two memories likely contradict each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// One says it, the other says it is not so.
    Negation,
    /// One likes what the other dislikes.
    Preference,
    /// A date or time differs in the same statement.
    Date,
    /// A number differs in the same statement.
    Number,
    /// A one-valued relation (home, workplace, name) holds another value.
    Value,
}

impl Reason {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Negation => "negation",
            Reason::Preference => "preference",
            Reason::Date => "date",
            Reason::Number => "number",
            Reason::Value => "value",
        }
    }
}

/// One content token of a statement.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A CJK character, an ordinary CJK word or a stemmed English word.
    Word(String),
    /// A number; `date` when it is part of a date or time.
    Num { value: u64, date: bool },
}

impl Tok {
    fn aligns(&self, other: &Tok) -> bool {
        match (self, other) {
            (Tok::Word(a), Tok::Word(b)) => a == b,
            (Tok::Num { .. }, Tok::Num { .. }) => true,
            _ => false,
        }
    }
}

/// A text as the detector sees it.
#[derive(Debug, Default)]
struct Statement {
    /// Content words and numbers, in order.
    core: Vec<Tok>,
    /// How many negations it holds.
    negations: u32,
    /// +1 likes, -1 dislikes, 0 neither (the last preference word counts).
    liking: i32,
    /// The normalised text (for the one-valued relations' cue words).
    norm: String,
}

impl Statement {
    /// +1 when the statement affirms (or likes), -1 when it denies (or dislikes).
    fn stance(&self) -> i32 {
        let like = if self.liking == 0 { 1 } else { self.liking };
        if self.negations % 2 == 1 { -like } else { like }
    }

    fn mark(&mut self, m: Marker) {
        match m {
            Marker::Negation => self.negations += 1,
            Marker::Like => self.liking = 1,
            Marker::Dislike => self.liking = -1,
            Marker::Soft => {}
        }
    }
}

/// Whether `older` and `newer` likely contradict each other, and why.
/// The caller knows which is newer.
pub fn detect(older: &str, newer: &str) -> Option<Reason> {
    Prepared::new(newer).against(older)
}

/// A new memory lexed once, to be compared with many others.
#[derive(Debug)]
pub struct Prepared {
    statement: Statement,
    /// Its content words as they appear in a normalised text (an English
    /// stem's first three letters), for a quick look before lexing another
    /// text: each searched for by a finder built once, after a look at the
    /// other text's [`Trigrams`] when it is three bytes or longer.
    probes: Vec<(memchr::memmem::Finder<'static>, Option<u16>)>,
}

impl Prepared {
    /// Lexes `text`.
    pub fn new(text: &str) -> Prepared {
        let statement = lex(text);
        let probes = statement
            .core
            .iter()
            .filter_map(|t| match t {
                Tok::Word(w) if w.is_ascii() => Some(&w[..w.len().min(3)]),
                Tok::Word(w) => Some(w.as_str()),
                Tok::Num { .. } => None,
            })
            .map(|p| {
                let finder = memchr::memmem::Finder::new(p).into_owned();
                (finder, Trigrams::bit(p.as_bytes()))
            })
            .collect();
        Prepared { statement, probes }
    }

    /// Whether `other` (the older memory) likely contradicts this one, and
    /// why. See [`Prepared::against_seen`].
    pub fn against(&self, other: &str) -> Option<Reason> {
        self.against_seen(&Seen::new(other))
    }

    /// Whether `other` (the older memory, normalised once, perhaps already
    /// compared with earlier new ones) likely contradicts this one, and why.
    /// A text holding fewer than a third of this one's content words (at
    /// least two) is passed over without being lexed: no rule can fire on it.
    pub fn against_seen(&self, other: &Seen) -> Option<Reason> {
        if !self.shares_enough(other) {
            return None;
        }
        compare(other.statement(), &self.statement)
    }

    /// Whether `other`'s normalised text holds at least two of the probes
    /// and a third of them (stops once the rest could not make up for the
    /// missing ones).
    fn shares_enough(&self, other: &Seen) -> bool {
        let norm = other.norm.as_bytes();
        let needed = self.probes.len().div_ceil(3).max(2);
        let mut left = self.probes.len();
        let mut found = 0;
        for p in &self.probes {
            if found + left < needed {
                return false;
            }
            left -= 1;
            let (finder, bit) = p;
            let maybe = bit.is_none_or(|b| other.trigrams.has(b));
            if maybe && finder.find(norm).is_some() {
                found += 1;
                if found >= needed {
                    return true;
                }
            }
        }
        found >= needed
    }
}

/// An older memory as new ones are compared with it: normalised when made,
/// lexed the first time a new memory shares enough of its words, so that a
/// caller keeping it ([`crate::hub`] keeps the newest facts' texts) does
/// that work once per text, not once per write.
#[derive(Debug)]
pub struct Seen {
    text: String,
    norm: String,
    trigrams: Trigrams,
    statement: std::sync::OnceLock<Statement>,
}

impl Seen {
    /// Normalises `text`.
    pub fn new(text: &str) -> Seen {
        let norm = normalize(text);
        Seen {
            text: text.to_string(),
            trigrams: Trigrams::of(norm.as_bytes()),
            norm,
            statement: std::sync::OnceLock::new(),
        }
    }

    /// The text it was made from.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn statement(&self) -> &Statement {
        self.statement
            .get_or_init(|| lex_normalized(self.norm.clone()))
    }
}

/// The three-byte runs of a text, hashed into 512 bits: a probe whose
/// first three bytes have no bit set is not in the text, without a search.
#[derive(Debug)]
struct Trigrams([u64; 8]);

impl Trigrams {
    fn of(text: &[u8]) -> Trigrams {
        let mut bits = [0u64; 8];
        for w in text.windows(3) {
            let b = Self::hash(w);
            bits[usize::from(b >> 6)] |= 1 << (b & 63);
        }
        Trigrams(bits)
    }

    /// The bit of `probe`'s first three bytes (none for a shorter probe).
    fn bit(probe: &[u8]) -> Option<u16> {
        probe.get(..3).map(Self::hash)
    }

    fn hash(w: &[u8]) -> u16 {
        let x = u32::from(w[0]) << 16 | u32::from(w[1]) << 8 | u32::from(w[2]);
        (x.wrapping_mul(0x9E37_79B1) >> 23) as u16
    }

    fn has(&self, bit: u16) -> bool {
        self.0[usize::from(bit >> 6)] & (1 << (bit & 63)) != 0
    }
}

/// The verdict on two statements, `a` the older.
fn compare(a: &Statement, b: &Statement) -> Option<Reason> {
    if a.core.len() < 2 || b.core.len() < 2 {
        return None;
    }
    let pairs = lcs(&a.core, &b.core);
    if pairs.len() == a.core.len() && pairs.len() == b.core.len() {
        if a.stance() != b.stance() {
            return Some(if a.liking != b.liking && a.liking != 0 && b.liking != 0 {
                Reason::Preference
            } else {
                Reason::Negation
            });
        }
        return changed_number(&a.core, &b.core, &pairs);
    }
    changed_value(a, b, &pairs)
}

/// Whether `text` is mostly Chinese (CJK characters against Latin words):
/// the language of a label about it.
pub fn is_chinese(text: &str) -> bool {
    crate::analysis::tokenizer::cjk_share(text) >= 0.5
}

/// The first aligned pair of numbers that differ: a date or a number.
fn changed_number(a: &[Tok], b: &[Tok], pairs: &[(usize, usize)]) -> Option<Reason> {
    pairs.iter().find_map(|&(i, j)| match (&a[i], &b[j]) {
        (Tok::Num { value: x, date: dx }, Tok::Num { value: y, date: dy }) if x != y => {
            Some(if *dx || *dy {
                Reason::Date
            } else {
                Reason::Number
            })
        }
        _ => None,
    })
}

/// Cue words of one-valued relations: a person lives in one place, works
/// at one place, has one name, address, phone number.
const ONE_VALUED: &[&str] = &[
    "住",
    "工作",
    "上班",
    "叫",
    "名字",
    "地址",
    "电话",
    "邮箱",
    "最喜欢",
    "最爱",
    "live",
    "work at",
    "work for",
    "name is",
    "address",
    "phone",
    "email",
    "favourite",
    "favorite",
];

/// Cues of a favourite, one-valued per kind of thing (`favourite colour`).
const FAVOURITE: &[&str] = &["最喜欢", "最爱", "favourite", "favorite"];

/// What a favourite is of: the words between the cue and `is`/`是`
/// (`favourite colour is blue` → `colour`).
fn favourite_of<'a>(norm: &'a str, cue: &str) -> Option<&'a str> {
    let after = &norm[norm.find(cue)? + cue.len()..];
    let end = after.find(" is ").or_else(|| after.find('是'))?;
    Some(after[..end].trim_start_matches('的').trim())
}

/// The same statement of a one-valued relation, in the same stance, with
/// one run of words replaced by another at the same place.
fn changed_value(a: &Statement, b: &Statement, pairs: &[(usize, usize)]) -> Option<Reason> {
    if a.stance() != b.stance() || pairs.len() < 2 {
        return None;
    }
    let cue = ONE_VALUED
        .iter()
        .find(|c| a.norm.contains(**c) && b.norm.contains(**c))?;
    if FAVOURITE.contains(cue) && favourite_of(&a.norm, cue) != favourite_of(&b.norm, cue) {
        return None;
    }
    let gaps: Vec<_> = std::iter::once((0, 0))
        .chain(pairs.iter().map(|&(i, j)| (i + 1, j + 1)))
        .zip(
            pairs
                .iter()
                .copied()
                .chain(std::iter::once((a.core.len(), b.core.len()))),
        )
        .filter(|((i0, j0), (i1, j1))| i1 > i0 || j1 > j0)
        .collect();
    let [((i0, j0), (i1, j1))] = gaps[..] else {
        return None;
    };
    let words = |t: &[Tok]| {
        t.iter()
            .all(|t| matches!(t, Tok::Word(w) if !cue.contains(w.as_str())))
    };
    (i1 > i0 && j1 > j0 && words(&a.core[i0..i1]) && words(&b.core[j0..j1]))
        .then_some(Reason::Value)
}

/// The longest common subsequence of two token lists (numbers align with
/// numbers), as index pairs in order.
fn lcs(a: &[Tok], b: &[Tok]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    // One table, row `i` at `i * w`: the lengths of the suffixes' LCS.
    let w = m + 1;
    let mut t = vec![0u16; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i * w + j] = if a[i].aligns(&b[j]) {
                t[(i + 1) * w + j + 1] + 1
            } else {
                t[(i + 1) * w + j].max(t[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i].aligns(&b[j]) && t[i * w + j] == t[(i + 1) * w + j + 1] + 1 {
            out.push((i, j));
            i += 1;
            j += 1;
        } else if t[(i + 1) * w + j] >= t[i * w + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Longest text compared, in characters: a longer memory is a document
/// or a note, not one statement.
const MAX_CHARS: usize = 200;

/// Cuts `text` into a [`Statement`].
fn lex(text: &str) -> Statement {
    lex_normalized(normalize(text))
}

/// [`lex`] of a text already [`normalize`]d.
fn lex_normalized(mut norm: String) -> Statement {
    for (from, to) in words::EN_REWRITES {
        norm = norm.replace(from, to);
    }
    let mut st = Statement::default();
    if norm.chars().count() > MAX_CHARS {
        return st;
    }
    let mut rest = norm.as_str();
    while let Some(c) = rest.chars().next() {
        let used = if is_cjk(c) {
            lex_cjk(rest, &norm[..norm.len() - rest.len()], &mut st)
        } else if c.is_ascii_alphanumeric() {
            lex_ascii(rest, &norm[..norm.len() - rest.len()], &mut st)
        } else {
            c.len_utf8()
        };
        rest = &rest[used..];
    }
    months_by_numbers(&mut st.core);
    st.norm = norm;
    st
}

/// Lexes one CJK item at the start of `rest` (`before` is the text before
/// it); returns the bytes used.
fn lex_cjk(rest: &str, before: &str, st: &mut Statement) -> usize {
    if let Some(w) = words::zh_word(rest) {
        st.core.push(Tok::Word(w.to_string()));
        return w.len();
    }
    if words::zh_weekday_prefix(before) && (rest.starts_with('日') || rest.starts_with('天')) {
        st.core.push(Tok::Num {
            value: 7,
            date: true,
        });
        return rest.chars().next().map_or(1, char::len_utf8);
    }
    if let Some((value, used)) = zh_numeral(rest) {
        let next = rest[used..].chars().next();
        let unit = next.and_then(words::zh_unit);
        if unit.is_some() || words::zh_weekday_prefix(before) {
            let date = unit.unwrap_or(true);
            st.core.push(Tok::Num { value, date });
            return used;
        }
    }
    if let Some((m, used)) = words::zh_marker(rest) {
        st.mark(m);
        return used;
    }
    let c = rest.chars().next().unwrap_or(' ');
    st.core.push(Tok::Word(c.to_string()));
    c.len_utf8()
}

/// A Chinese numeral at the start of `s` (`三`, `十一`, `二十五`, `两`,
/// `一百`) and its length in bytes.
fn zh_numeral(s: &str) -> Option<(u64, usize)> {
    let digit = |c: char| {
        "零一二三四五六七八九"
            .find(c)
            .map(|i| (i / 3) as u64)
            .or((c == '两').then_some(2))
    };
    let (mut total, mut current, mut used) = (0u64, 0u64, 0usize);
    for c in s.chars() {
        match c {
            '十' | '百' | '千' | '万' => {
                let unit = match c {
                    '十' => 10,
                    '百' => 100,
                    '千' => 1000,
                    _ => 10_000,
                };
                total += current.max(1) * unit;
                current = 0;
            }
            _ => match digit(c) {
                Some(d) => current = current * 10 + d,
                None => break,
            },
        }
        used += c.len_utf8();
    }
    (used > 0).then_some((total + current, used))
}

/// Lexes one ASCII word or number at the start of `rest`; returns the bytes used.
fn lex_ascii(rest: &str, before: &str, st: &mut Statement) -> usize {
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    let word = &rest[..end];
    let digits = word
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(word.len());
    if digits > 0 {
        let value = word[..digits].parse().unwrap_or(u64::MAX);
        let tail = &word[digits..];
        let after = rest[end..].chars().next();
        if words::names_a_thing(before) {
            // `note number 3` and `note number 5` are two notes, not a
            // changed number: the number is part of a name.
            st.core.push(Tok::Word(format!("#{}", &word[..digits])));
            return end;
        }
        let date = before.ends_with(':')
            || after == Some(':')
            || matches!(tail, "am" | "pm")
            || (1900..=2100).contains(&value) && digits == 4
            || after.is_some_and(|c| words::zh_unit(c) == Some(true));
        st.core.push(Tok::Num { value, date });
        if matches!(tail, "am" | "pm" | "kg" | "km" | "cm") {
            st.core.push(Tok::Word(tail.to_string()));
        }
        return end;
    }
    if let Some(m) = words::en_marker(word) {
        st.mark(m);
    } else if let Some((value, date)) = words::en_number(word) {
        st.core.push(if date && !is_weekday(word) {
            Tok::Word(format!("month:{value}"))
        } else {
            Tok::Num {
                value: value.into(),
                date,
            }
        });
    } else {
        let singular = word
            .strip_suffix('s')
            .filter(|w| w.len() > 2 && !w.ends_with('s'));
        st.core.push(Tok::Word(stem(singular.unwrap_or(word))));
    }
    end
}

fn is_weekday(word: &str) -> bool {
    word.ends_with("day") || word.ends_with("days")
}

/// A month name next to a number is a date part (`March 5`, `5 May`);
/// elsewhere it stays a word (`may` the verb).
fn months_by_numbers(core: &mut [Tok]) {
    for i in 0..core.len() {
        let Tok::Word(w) = &core[i] else { continue };
        let Some(m) = w.strip_prefix("month:").and_then(|m| m.parse().ok()) else {
            continue;
        };
        let near = |k: Option<usize>| {
            k.and_then(|k| core.get(k))
                .is_some_and(|t| matches!(t, Tok::Num { .. }))
        };
        if near(i.checked_sub(1)) || near(Some(i + 1)) {
            core[i] = Tok::Num {
                value: m,
                date: true,
            };
            for k in [i.wrapping_sub(1), i + 1] {
                if let Some(Tok::Num { date, .. }) = core.get_mut(k) {
                    *date = true;
                }
            }
        } else {
            core[i] = Tok::Word(MONTH_WORDS[(m as usize).saturating_sub(1) % 12].to_string());
        }
    }
}

const MONTH_WORDS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issues_pairs_are_contradictions_with_their_reasons() {
        assert_eq!(
            detect("我喜欢喝茶", "我不喜欢喝茶了"),
            Some(Reason::Negation)
        );
        assert_eq!(
            detect("生日是三月五日", "生日是五月三日"),
            Some(Reason::Date)
        );
        assert_eq!(
            detect("I love jazz", "I hate jazz"),
            Some(Reason::Preference)
        );
        assert_eq!(
            detect("I have two kids", "I have 3 kids"),
            Some(Reason::Number)
        );
        assert_eq!(
            detect("I live in Seattle", "I live in Boston"),
            Some(Reason::Value)
        );
    }

    /// The quick look as it was: every probe searched with `str::contains`,
    /// all of them counted.
    fn shares_enough_by_contains(new: &Prepared, norm: &str) -> bool {
        let found = new
            .probes
            .iter()
            .map(|(p, _)| std::str::from_utf8(p.needle()).unwrap())
            .filter(|p| norm.contains(p))
            .count();
        found >= 2 && found * 3 >= new.probes.len()
    }

    #[cfg_attr(not(feature = "full-tests"), ignore = "needs the dev sets")]
    #[test]
    fn the_quick_look_answers_as_a_search_of_every_probe_on_dialogue_lines() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/eval");
        let mut lines = Vec::new();
        for set in ["locomo-dev", "madial-zh-dev", "madial-en-dev"] {
            let corpus = std::fs::read_to_string(dir.join(set).join("corpus.jsonl"))
                .expect("the dev sets, a copy of shared/eval beside the clone");
            for line in corpus.lines().take(1200) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                lines.push(v["text"].as_str().unwrap().to_string());
            }
        }
        let seen: Vec<Seen> = lines.iter().map(|t| Seen::new(t)).collect();
        let (mut compared, mut passed) = (0, 0);
        for (i, text) in lines.iter().enumerate().step_by(5) {
            let new = Prepared::new(text);
            for other in seen.iter().cycle().skip(i + 1).take(300) {
                let quick = new.shares_enough(other);
                assert_eq!(
                    quick,
                    shares_enough_by_contains(&new, &other.norm),
                    "{text:?} against {:?}",
                    other.text
                );
                compared += 1;
                passed += usize::from(quick);
            }
            // Its own text shares enough.
            assert!(new.shares_enough(&Seen::new(text)) || new.probes.len() < 2);
        }
        assert!(
            compared > 50_000 && passed > 1000,
            "{passed} of {compared} passed"
        );
    }

    #[test]
    fn similar_but_compatible_pairs_are_not() {
        assert_eq!(detect("我不喜欢咖啡", "我喜欢茶"), None);
        assert_eq!(detect("我不喜欢吃香菜", "我讨厌吃香菜"), None);
        assert_eq!(detect("我在北京住了五年", "我在北京住了5年"), None);
        assert_eq!(
            detect("I like green tea", "My wife doesn't like green tea"),
            None
        );
        assert_eq!(detect("I may come on Friday", "I may come"), None);
        assert_eq!(
            detect("Note number 3: buy milk", "Note number 5: buy milk"),
            None
        );
        assert_eq!(
            detect("Fixed issue #12 today", "Fixed issue #13 today"),
            None
        );
        assert_eq!(
            detect("See page 4 of the manual", "See page 9 of the manual"),
            None
        );
        assert_eq!(
            detect("I have two kids", "I have 3 kids"),
            Some(Reason::Number),
            "a count is still a number"
        );
    }
}
