//! The compact Unigram model (`memory_hub::embed::unigram`) against the
//! `tokenizers` crate on the installed `tokenizer.json` (`scripts/setup.sh`):
//! identical token ids on every text of the five dev sets, on edge cases and
//! on random Unicode.

use std::path::PathBuf;
use std::sync::OnceLock;

use memory_hub::config::EmbedderConfig;
use memory_hub::embed::unigram::{self, LoadedTokenizer};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

struct Pair {
    compact: LoadedTokenizer,
    reference: tokenizers::Tokenizer,
}

fn truncation() -> tokenizers::TruncationParams {
    tokenizers::TruncationParams {
        max_length: 512,
        ..Default::default()
    }
}

/// Both tokenizers, loaded once per test binary, truncating as the embedder does.
fn pair() -> &'static Pair {
    static PAIR: OnceLock<Pair> = OnceLock::new();
    PAIR.get_or_init(|| {
        let path = EmbedderConfig::default()
            .resolved_model_dir()
            .join("tokenizer.json");
        let mut compact = unigram::load(&path)
            .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)");
        assert!(compact.is_compact(), "tokenizer.json holds a Unigram model");
        compact.with_truncation(Some(truncation())).unwrap();
        compact.with_padding(None);
        let mut reference = tokenizers::Tokenizer::from_file(&path).unwrap();
        reference.with_truncation(Some(truncation())).unwrap();
        reference.with_padding(None);
        Pair { compact, reference }
    })
}

/// Asserts both tokenizers give the same ids for `text`, with and without special tokens.
fn same_ids(text: &str) {
    let p = pair();
    for special in [true, false] {
        let got = p.compact.encode_ids(text, special).unwrap();
        let want = p
            .reference
            .encode(text, special)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(
            got, want,
            "ids differ for {text:?} (special tokens: {special})"
        );
    }
}

fn eval_texts() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/eval");
    let mut texts = Vec::new();
    for set in [
        "locomo-dev",
        "madial-en-dev",
        "madial-en2zh-dev",
        "madial-zh-dev",
        "madial-zh2en-dev",
    ] {
        for (file, field, prefix) in [
            ("corpus.jsonl", "text", "passage: "),
            ("queries.jsonl", "query", "query: "),
        ] {
            let path = dir.join(set).join(file);
            let body = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("the dev sets are missing: {}: {e}", path.display()));
            for line in body.lines().filter(|l| !l.trim().is_empty()) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let text = v[field].as_str().unwrap();
                texts.push(format!("{prefix}{text}"));
            }
        }
    }
    texts
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the model's tokenizer and ../shared/eval"
)]
#[test]
fn compact_unigram_matches_tokenizers_on_every_dev_set_text() {
    let texts = eval_texts();
    assert!(
        texts.len() > 4000,
        "all five dev sets read: {}",
        texts.len()
    );
    for t in &texts {
        same_ids(t);
    }
    // Long inputs: truncation at 512 tokens, zh and en mixed (a sample: both
    // tokenizers are slow on long texts in debug builds).
    for chunk in texts.chunks(40).step_by(5) {
        same_ids(&chunk.join(" "));
    }
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the model's tokenizer and ../shared/eval"
)]
#[test]
fn compact_unigram_matches_tokenizers_on_edge_cases() {
    let cases = [
        "",
        " ",
        "   ",
        "\t\n",
        "a",
        "  leading and  double   spaces  ",
        "<mask>",
        "a <mask> b",
        "x<mask>y",
        "<s>hello</s>",
        "<pad><unk>",
        "query: <s>",
        "▁",
        "▁▁▁",
        "emoji 😀🎉👩‍👩‍👧 flags 🇨🇳🇺🇸",
        "rare CJK 𠀀𠀁𪚥 and 〇",
        "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ１２３",
        "e\u{301}te\u{301} combining",
        "control\u{0}\u{1}\u{7f}chars",
        "zero\u{200b}width\u{feff}",
        "Ǆǅǆ ﬁ ﬂ ㎏ ① Ⅻ",
        "العربية עברית ไทย 한국어 日本語のテキスト",
        "季度预算评审 quarterly budget review 2024-03-05",
        "C++ & Rust: fn main() { println!(\"hi\"); } // 注释",
        "https://example.com/a?b=c&d=e#f user@example.org",
        "\u{10ffff}\u{e000}\u{fffd}",
    ];
    for c in cases {
        same_ids(c);
    }
    same_ids(&"长".repeat(2000));
    same_ids(&"word ".repeat(1000));
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the model's tokenizer and ../shared/eval"
)]
#[test]
fn compact_unigram_matches_tokenizers_on_seeded_random_unicode() {
    // Mixed ranges: ASCII, Latin-1, CJK, Hangul, emoji, and any scalar value.
    let ranges: [(u32, u32); 6] = [
        (0x20, 0x7e),
        (0xa0, 0x24f),
        (0x4e00, 0x9fff),
        (0xac00, 0xd7a3),
        (0x1f300, 0x1faff),
        (0x0, 0x10ffff),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(16);
    for _ in 0..3000 {
        let len = rng.random_range(0..40);
        let text: String = (0..len)
            .filter_map(|_| {
                let (lo, hi) = ranges[rng.random_range(0..ranges.len())];
                char::from_u32(rng.random_range(lo..=hi))
            })
            .collect();
        same_ids(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[cfg_attr(not(feature = "full-tests"), ignore = "needs the model's tokenizer and ../shared/eval")]
    #[test]
    fn compact_unigram_matches_tokenizers_on_arbitrary_strings(text in any::<String>()) {
        same_ids(&text);
    }

    #[cfg_attr(not(feature = "full-tests"), ignore = "needs the model's tokenizer and ../shared/eval")]
    #[test]
    fn compact_unigram_matches_tokenizers_on_word_salads(
        words in proptest::collection::vec(
            prop_oneof!["[a-z]{1,12}", "[\u{4e00}-\u{9fff}]{1,6}", "[ .,!?]{1,3}", Just("<mask>".to_string())],
            0..30,
        )
    ) {
        same_ids(&words.concat());
    }
}
