//! Our tokenizer: NFKC, lowercase, CJK character bigrams, Latin words and digits.
//!
//! One pure function, [`tokenize`], decides what a term is; the tantivy
//! tokenizers registered on the index and the query builder both call it, so
//! the two sides can never disagree.
//!
//! - A run of CJK characters (Han, kana, Hangul) yields its overlapping
//!   bigrams (`公园散步` → `公园`, `园散`, `散步`); a run of one character yields
//!   that character.
//! - Every CJK character is also emitted as a unigram into a separate field,
//!   so a one-character query (`猫`) still matches inside longer runs.
//! - Everything else that is alphanumeric forms words (`GPT-4o` → `gpt`, `4o`);
//!   English words other than stop words are lightly stemmed ([`super::stem`]).
//! - Every run of Han characters is also segmented into dictionary words by
//!   jieba ([`cjk_words`], search mode: `公园散步` → `公园`, `散步`) for a third
//!   field; only words of two characters or more are kept (single characters
//!   are the chars field's job). Bigrams keep recall where the dictionary
//!   segments differently on the two sides; words reward true word
//!   boundaries over bigrams that straddle two words (`园散`). The jieba
//!   dictionary is loaded once, on first use.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use unicode_normalization::UnicodeNormalization;

/// The kind of a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TermKind {
    /// A Latin/other-script word or number.
    Word,
    /// Two adjacent CJK characters.
    Bigram,
    /// A CJK character standing alone in its run.
    Single,
    /// A jieba dictionary word of two or more CJK characters (the words field).
    Segment,
}

/// One term of a text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    /// The normalised term text.
    pub text: String,
    /// What kind of term it is.
    pub(crate) kind: TermKind,
}

/// Whether `c` belongs to a CJK script we cut into bigrams.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0x20000..=0x2FFFF)
}

/// The share of a text's words that are CJK: CJK characters counted one
/// each, Latin words (runs of ASCII letters) one each. A text with neither
/// (digits, punctuation) is 0.5, neutral. The index keeps it per memory
/// (the script of the memory) and query planning per query.
pub(crate) fn cjk_share(text: &str) -> f32 {
    let (mut cjk, mut latin, mut in_word) = (0u32, 0u32, false);
    for c in text.chars() {
        if is_cjk(c) {
            cjk += 1;
        }
        let letter = c.is_ascii_alphabetic();
        if letter && !in_word {
            latin += 1;
        }
        in_word = letter;
    }
    if cjk + latin == 0 {
        0.5
    } else {
        cjk as f32 / (cjk + latin) as f32
    }
}

/// [`cjk_share`] in thousandths, rounded: the script of a memory as the
/// index keeps it.
pub(crate) fn script_milli(text: &str) -> i64 {
    (cjk_share(text) * 1000.0).round() as i64
}

/// Whether two scripts ([`script_milli`]) differ: one text mostly CJK, the
/// other mostly Latin (their shares more than half apart). Full text can
/// match such a pair only on names, numbers and words written in the other
/// script.
pub(crate) fn scripts_differ_milli(a: i64, b: i64) -> bool {
    (a - b).abs() > 500
}

/// NFKC + lowercase.
///
/// Most texts need no composition: ASCII only, or every character already
/// NFKC once the fullwidth ASCII forms and the ideographic space are
/// replaced by what they decompose to (a character's compatibility
/// decomposition is what NFKC starts from, so the result is the same).
/// Those skip the full normalisation.
pub(crate) fn normalize(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    if unicode_normalization::is_nfkc_quick(text.chars().map(narrow))
        == unicode_normalization::IsNormalized::Yes
    {
        return text
            .chars()
            .map(narrow)
            .flat_map(char::to_lowercase)
            .collect();
    }
    text.nfkc().flat_map(char::to_lowercase).collect()
}

/// A fullwidth ASCII form (U+FF01–U+FF5E) as its ASCII character, the
/// ideographic space as a space: their whole compatibility decompositions.
fn narrow(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        '\u{3000}' => ' ',
        c => c,
    }
}

/// Splits normalised `text` into terms for the main text field.
pub fn tokenize(text: &str) -> Vec<Term> {
    let norm = normalize(text);
    let mut out = Vec::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush_word = |word: &mut String, out: &mut Vec<Term>| {
        if !word.is_empty() {
            out.push(Term {
                text: token_text(word),
                kind: TermKind::Word,
            });
            word.clear();
        }
    };
    let flush_run = |run: &mut Vec<char>, out: &mut Vec<Term>| {
        match run.len() {
            0 => {}
            1 => out.push(Term {
                text: run[0].to_string(),
                kind: TermKind::Single,
            }),
            _ => {
                for pair in run.windows(2) {
                    out.push(Term {
                        text: pair.iter().collect(),
                        kind: TermKind::Bigram,
                    });
                }
            }
        }
        run.clear();
    };
    for c in norm.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            run.push(c);
        } else if c.is_alphanumeric() {
            flush_run(&mut run, &mut out);
            word.push(c);
        } else {
            flush_word(&mut word, &mut out);
            flush_run(&mut run, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_run(&mut run, &mut out);
    out
}

/// The term of a word of normalised text: its stem, unless a stop word.
pub(crate) fn token_text(word: &str) -> String {
    if STOP_WORDS.binary_search(&word).is_err() {
        super::stem::stem(word)
    } else {
        word.to_string()
    }
}

/// Every CJK character of normalised `text`, for the single-character field.
pub fn cjk_chars(text: &str) -> Vec<String> {
    normalize(text)
        .chars()
        .filter(|c| is_cjk(*c))
        .map(String::from)
        .collect()
}

/// The jieba segmenter with its default dictionary, built on first use.
static JIEBA: std::sync::LazyLock<jieba_rs::Jieba> = std::sync::LazyLock::new(jieba_rs::Jieba::new);

/// Calls `f` on each run of CJK characters of normalised `text`, in order.
fn for_each_cjk_run(text: &str, mut f: impl FnMut(&str)) {
    let norm = normalize(text);
    let mut run = String::new();
    for c in norm.chars() {
        if is_cjk(c) {
            run.push(c);
        } else if !run.is_empty() {
            f(&run);
            run.clear();
        }
    }
    if !run.is_empty() {
        f(&run);
    }
}

/// The jieba words (search mode, HMM for unknown words) of every CJK run of
/// normalised `text` that are at least two characters long, in order.
pub fn cjk_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_cjk_run(text, |run| {
        if run.chars().nth(1).is_some() {
            out.extend(cut_for_search(run));
        }
    });
    out
}

/// The jieba words of one CJK run (search mode, HMM for unknown words) at
/// least two characters long, in order.
pub(crate) fn cut_for_search(run: &str) -> Vec<String> {
    JIEBA
        .cut_for_search(run, true)
        .into_iter()
        .filter(|t| t.word.chars().nth(1).is_some() && t.word.chars().all(is_cjk))
        .map(|t| t.word.to_string())
        .collect()
}

/// The content words of the Han runs of normalised `text`, as jieba cuts
/// them (accurate mode, with part-of-speech tags): nouns, verbs,
/// adjectives, idioms and set phrases of two characters or more, and
/// single-character nouns (`猫`). Grammar (`的`, `我们`, `就是`) is left out.
/// Used to translate a query word by word, so words overlap nowhere.
pub fn cjk_content_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_cjk_run(text, |run| {
        for tag in JIEBA.tag(run, true) {
            let long = tag.word.chars().nth(1).is_some();
            let content = match tag.tag.chars().next() {
                Some('n') => !tag.tag.starts_with("nr") || long,
                Some('v' | 'a' | 'i' | 'l') => long,
                _ => false,
            };
            if content && tag.word.chars().all(is_cjk) {
                out.push(tag.word.to_string());
            }
        }
    });
    out
}

/// English function words dropped from queries (the index keeps them).
const STOP_WORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could",
    "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how",
    "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so",
    "that", "the", "their", "them", "then", "there", "they", "this", "to", "was", "we", "were",
    "what", "when", "where", "which", "who", "will", "with", "would", "you", "your",
];

/// Whether a query term carries no signal.
pub(crate) fn is_stop_word(term: &Term) -> bool {
    term.kind == TermKind::Word && is_stop_word_text(&term.text)
}

/// Whether a lowercase word is an English stop word.
pub(crate) fn is_stop_word_text(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The tantivy name of the main text tokenizer.
pub const TEXT_TOKENIZER: &str = "memd_text";
/// The tantivy name of the single-character tokenizer.
pub(crate) const CHARS_TOKENIZER: &str = "memd_chars";
/// The tantivy name of the jieba word tokenizer.
pub(crate) const WORDS_TOKENIZER: &str = "memd_words";

/// Which of our term functions a tantivy tokenizer applies.
#[derive(Clone, Copy, Debug)]
enum Split {
    Text,
    Chars,
    Words,
}

/// tantivy adapter over [`tokenize`], [`cjk_chars`] or [`cjk_words`].
#[derive(Clone, Debug)]
pub struct MemdTokenizer {
    split: Split,
}

impl MemdTokenizer {
    /// The main text tokenizer.
    pub fn text() -> Self {
        MemdTokenizer { split: Split::Text }
    }

    /// The single-CJK-character tokenizer.
    pub(crate) fn chars() -> Self {
        MemdTokenizer {
            split: Split::Chars,
        }
    }

    /// The jieba word tokenizer.
    pub(crate) fn words() -> Self {
        MemdTokenizer {
            split: Split::Words,
        }
    }
}

/// A precomputed token stream.
pub struct VecTokenStream {
    tokens: Vec<Token>,
    index: usize,
}

impl Tokenizer for MemdTokenizer {
    type TokenStream<'a> = VecTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        let terms: Vec<String> = match self.split {
            Split::Chars => cjk_chars(text),
            Split::Words => cjk_words(text),
            Split::Text => tokenize(text).into_iter().map(|t| t.text).collect(),
        };
        let tokens = terms
            .into_iter()
            .enumerate()
            .map(|(position, text)| Token {
                offset_from: 0,
                offset_to: 0,
                position,
                text,
                position_length: 1,
            })
            .collect();
        VecTokenStream { tokens, index: 0 }
    }
}

impl TokenStream for VecTokenStream {
    fn advance(&mut self) -> bool {
        if self.index < self.tokens.len() {
            self.index += 1;
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self.index - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.index - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`normalize`] computes, the long way.
    fn full_nfkc(text: &str) -> String {
        text.nfkc().flat_map(char::to_lowercase).collect()
    }

    #[test]
    fn normalising_the_short_way_gives_what_nfkc_gives() {
        for text in [
            "Plain ASCII, MIXED case!",
            "周末的项目计划，好吗？（Ａｂｃ：１２３）",
            "全角空格\u{3000}之后",
            "Ｅ\u{301}café\u{0301} ﬁne ① ㍿ Ⅻ ＡＢ\u{0308}",
            "ﾊﾝｶｸ ｶﾞ ｷﾞ 〶 〸",
            "\u{FF21}\u{0301}\u{FF41}\u{0328}\u{0301}",
            "Straße İstanbul ΣΑΣ",
        ] {
            assert_eq!(normalize(text), full_nfkc(text), "{text:?}");
        }
    }

    proptest::proptest! {
        /// Any text, fullwidth forms and combining marks among letters too.
        #[test]
        fn normalising_any_text_gives_what_nfkc_gives(parts in proptest::collection::vec(
            proptest::prop_oneof![
                "[\u{FF01}-\u{FF5E}\u{3000}-\u{303F}]{0,4}",
                "[\u{0300}-\u{036F}\u{3099}\u{309A}]{0,2}",
                "[a-zA-Z0-9 ]{0,4}",
                "[\u{4E00}-\u{4E20}\u{3040}-\u{30FF}\u{FF61}-\u{FF9F}]{0,4}",
                "\\PC{0,4}",
            ],
            0..8,
        )) {
            let text: String = parts.concat();
            proptest::prop_assert_eq!(normalize(&text), full_nfkc(&text));
        }
    }

    fn check(input: &str, want: &[&str]) {
        let got: Vec<String> = tokenize(input).into_iter().map(|t| t.text).collect();
        assert_eq!(got, want, "tokenize({input:?})");
    }

    #[test]
    fn table() {
        check(
            "我今天去公园散步了",
            &[
                "我今", "今天", "天去", "去公", "公园", "园散", "散步", "步了",
            ],
        );
        check("公园", &["公园"]);
        check("猫", &["猫"]);
        check("Hello, World 42!", &["hello", "world", "42"]);
        check("GPT-4o用起来", &["gpt", "4o", "用起", "起来"]);
        check("ＡＢＣ１２３", &["abc123"]); // full-width folds under NFKC
        check("Café naïve", &["café", "naïve"]);
        check("すし と ラーメン", &["すし", "と", "ラー", "ーメ", "メン"]);
        check("", &[]);
    }

    #[test]
    fn jieba_words() {
        assert_eq!(cjk_words("我今天去公园散步了"), ["今天", "公园", "散步"]);
        // Search mode also offers the parts of a long word; Latin text and
        // single characters are left to the other fields.
        let words = cjk_words("中华人民共和国 GPT 猫");
        assert!(words.contains(&"中华人民共和国".to_string()), "{words:?}");
        assert!(words.contains(&"共和国".to_string()), "{words:?}");
        assert!(words.iter().all(|w| w.chars().count() >= 2), "{words:?}");
        assert!(cjk_words("hello 猫").is_empty());
    }

    #[test]
    fn content_words() {
        let words = cjk_content_words("我今天拿到了数学考试的满分！");
        assert_eq!(words, ["拿到", "数学考试"]);
        assert!(
            !words.iter().any(|w| w == "我" || w == "的" || w == "了"),
            "{words:?}"
        );
        assert!(cjk_content_words("我的猫").contains(&"猫".to_string()));
    }

    #[test]
    fn singles_and_stop_words() {
        assert_eq!(cjk_chars("a公园b"), ["公", "园"]);
        let terms = tokenize("the park");
        assert!(is_stop_word(&terms[0]));
        assert!(!is_stop_word(&terms[1]));
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort();
        assert_eq!(
            sorted, STOP_WORDS,
            "STOP_WORDS must stay sorted for binary_search"
        );
    }
}
