//! Query construction: from free text or a dialogue to what the two rankings search for.
//!
//! A query is either a short question (`When did Melanie paint a sunrise?`)
//! or a whole conversation, one turn a line (`<Bart>:"…"` or `Bart: …`), as
//! `/v1/recall` and dialogue benchmarks send it. [`plan`] turns either into a
//! [`QueryPlan`]:
//!
//! - **full-text terms with weights** — every turn is tokenized with the
//!   index's tokenizer; the last turn weighs most and older turns decay
//!   ([`TURN_DECAY`] per turn); assistant turns weigh less ([`ASSISTANT_WEIGHT`]).
//!   A speaker tag counts as a word of its turn. A term keeps the highest
//!   weight it gets.
//! - **semantic text** — the embedding model truncates from the end (e5: 512
//!   tokens), so a long dialogue would lose the turns that matter most. The
//!   semantic text is the query's last lines within [`SEMANTIC_CHARS`]
//!   characters.
//! - **conversational** — long queries (more than [`LONG_QUERY_TERMS`] content
//!   words, a Chinese run counted in jieba's words, not its bigrams) can
//!   never pass the AND pass; they go to the OR pass directly and
//!   are re-ranked by how much of the query a memory covers
//!   ([`crate::search`]).

use std::collections::{HashMap, HashSet};

use crate::analysis::lexicon::Lexicon;
use crate::index::tokenizer::{
    Term, TermKind, cjk_content_words, cjk_words, is_stop_word, tokenize,
};

/// Weight lost per turn counted back from the last one.
pub const TURN_DECAY: f32 = 0.85;
/// The lowest weight a turn can decay to.
pub(crate) const MIN_TURN_WEIGHT: f32 = 0.5;
/// Factor for turns spoken by the assistant (they echo rather than ask).
pub const ASSISTANT_WEIGHT: f32 = 0.5;
/// Characters of the query's end embedded for the semantic ranking (e5 reads 512 tokens).
pub const SEMANTIC_CHARS: usize = 1000;
/// Above this many content terms, a query skips the AND pass for the coverage
/// re-rank (the seed says 6; 3 measured better on LoCoMo: 0.545 → 0.563 fulltext).
pub const LONG_QUERY_TERMS: usize = 3;

/// Chinese particles: a bigram holding one carries little signal.
const ZH_PARTICLES: &str = "的了吗呢吧啊呀嘛哦哈么啦";
/// Chinese function characters: a bigram made only of these carries little signal.
const ZH_FUNCTION: &str = "我你他她它们是在有这那就都也还很不要会说个一和对";
/// Weight factor for low-signal Chinese bigrams.
pub(crate) const ZH_FUNCTION_WEIGHT: f32 = 0.5;

/// Weight factor of a jieba word against the bigrams it overlaps.
pub(crate) const SEGMENT_WEIGHT: f32 = 1.0;

/// Whether a CJK bigram or jieba word is mostly grammar (`你知`, `我要`, `好吗`, `我们`).
fn low_signal(term: &Term) -> bool {
    matches!(term.kind, TermKind::Bigram | TermKind::Segment)
        && (term.text.chars().any(|c| ZH_PARTICLES.contains(c))
            || term.text.chars().all(|c| ZH_FUNCTION.contains(c)))
}

/// One turn of a dialogue query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turn {
    /// The speaker tag, if the line had one.
    pub(crate) speaker: Option<String>,
    /// What was said, without tag and quotes.
    pub(crate) text: String,
}

impl Turn {
    /// Whether the assistant (not the person) spoke this turn.
    pub(crate) fn is_assistant(&self) -> bool {
        self.speaker.as_deref().is_some_and(|s| {
            matches!(
                s.trim().to_lowercase().as_str(),
                "assistant" | "ai" | "bot" | "system" | "助手" | "助理"
            )
        })
    }
}

/// A term with its weight in the full-text query.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WeightedTerm {
    /// The term.
    pub(crate) term: Term,
    /// Its boost (1.0 for the last turn).
    pub(crate) weight: f32,
    /// It comes only from speaker tags (`<Bart>:`), not from what was said:
    /// a name that heads the turns, not what they are about.
    pub(crate) speaker: bool,
}

/// What a query searches for.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPlan {
    /// Full-text terms, deduplicated, stop words dropped (unless nothing else is left).
    pub(crate) terms: Vec<WeightedTerm>,
    /// The text to embed for the semantic ranking.
    pub(crate) semantic: String,
    /// Whether the query is long enough to skip the AND pass and get the coverage re-rank.
    pub(crate) conversational: bool,
    /// Whether the query had more than one turn.
    pub(crate) dialogue: bool,
}

/// Splits a speaker tag off a line: `<Bart>:"hi"`, `<Bart>: "hi"`, `Bart: hi`.
fn split_tag(line: &str) -> (Option<String>, &str) {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix('<')
        && let Some(end) = rest.find('>')
    {
        let after = rest[end + 1..].trim_start();
        let after = after
            .strip_prefix(':')
            .or_else(|| after.strip_prefix('：'))
            .unwrap_or(after);
        return (Some(rest[..end].trim().to_string()), after.trim());
    }
    if let Some(pos) = line.find([':', '：']) {
        let name = &line[..pos];
        let words = name.split_whitespace().count();
        if !name.is_empty() && name.chars().count() <= 24 && (1..=2).contains(&words) {
            let sep = line[pos..].chars().next().map_or(1, char::len_utf8);
            return (Some(name.trim().to_string()), line[pos + sep..].trim());
        }
    }
    (None, line)
}

/// Strips one pair of surrounding quotes.
fn unquote(text: &str) -> &str {
    for (open, close) in [('"', '"'), ('“', '”'), ('「', '」')] {
        if let Some(inner) = text.strip_prefix(open).and_then(|t| t.strip_suffix(close)) {
            return inner.trim();
        }
    }
    text
}

/// The turns of a query: one per non-empty line. A single-line query is one turn.
pub(crate) fn turns(query: &str) -> Vec<Turn> {
    let lines: Vec<&str> = query.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() <= 1 {
        let (speaker, text) = split_tag(query);
        // A one-line question such as "Note: …" keeps its words; only `<tag>` is a sure tag.
        let tagged = query.trim_start().starts_with('<');
        return vec![Turn {
            speaker: if tagged { speaker } else { None },
            text: if tagged {
                unquote(text).to_string()
            } else {
                query.trim().to_string()
            },
        }];
    }
    lines
        .into_iter()
        .map(|l| {
            let (speaker, text) = split_tag(l);
            Turn {
                speaker,
                text: unquote(text).to_string(),
            }
        })
        .filter(|t| !t.text.is_empty())
        .collect()
}

/// The weight of the turn `back` turns before the last.
fn turn_weight(turn: &Turn, back: usize) -> f32 {
    let decay = TURN_DECAY.powi(back as i32).max(MIN_TURN_WEIGHT);
    if turn.is_assistant() {
        decay * ASSISTANT_WEIGHT
    } else {
        decay
    }
}

/// The semantic text: the query's last lines, as written, within `SEMANTIC_CHARS`
/// (always at least the last line). The model reads the dialogue as a whole
/// (assistant turns included: measured better than user turns alone), but
/// truncates from the end, so a long dialogue is cut from the front here.
fn semantic_text(query: &str) -> String {
    let mut picked: Vec<&str> = Vec::new();
    let mut chars = 0;
    for line in query.lines().rev().filter(|l| !l.trim().is_empty()) {
        let n = line.chars().count();
        if !picked.is_empty() && chars + n > SEMANTIC_CHARS {
            break;
        }
        picked.push(line.trim());
        chars += n;
    }
    picked.reverse();
    picked.join("\n")
}

/// How long a query is, in content words: its Latin words (stop words
/// dropped), and in Chinese the content words jieba finds
/// ([`cjk_content_words`]), not the bigrams, which count a six-character
/// noun phrase (`新的笔记本电脑`) as six terms. jieba runs only when the
/// bigrams would make the query long (a content word has at least one
/// bigram or single character of its own), and stops counting at one past
/// [`LONG_QUERY_TERMS`].
fn length(terms: &[WeightedTerm], turns: &[Turn]) -> usize {
    let words = terms
        .iter()
        .filter(|w| w.term.kind == TermKind::Word)
        .count();
    let cjk = terms
        .iter()
        .filter(|w| matches!(w.term.kind, TermKind::Bigram | TermKind::Single))
        .count();
    if words > LONG_QUERY_TERMS || words + cjk <= LONG_QUERY_TERMS {
        return words + cjk;
    }
    let mut seen: HashSet<String> = HashSet::new();
    for turn in turns {
        for text in [turn.speaker.as_deref(), Some(turn.text.as_str())]
            .into_iter()
            .flatten()
        {
            seen.extend(cjk_content_words(text));
            if words + seen.len() > LONG_QUERY_TERMS {
                return words + seen.len();
            }
        }
    }
    words + seen.len()
}

/// Builds the plan of a query (free text or a dialogue, one turn a line).
pub fn plan(query: &str) -> QueryPlan {
    let turns = turns(query);
    let mut all = Terms::default();
    let n = turns.len();
    for (i, turn) in turns.iter().enumerate() {
        let weight = turn_weight(turn, n - 1 - i);
        // The speaker's name stays a term (measured: the memories name the
        // person), marked as such.
        let mut turn_terms: Vec<(Term, f32, bool)> = Vec::new();
        for (text, speaker) in [(turn.speaker.as_deref(), true), (Some(&turn.text), false)] {
            let Some(text) = text else { continue };
            turn_terms.extend(tokenize(text).into_iter().map(|t| (t, weight, speaker)));
            turn_terms.extend(cjk_words(text).into_iter().map(|text| {
                let term = Term {
                    text,
                    kind: TermKind::Segment,
                };
                (term, weight * SEGMENT_WEIGHT, speaker)
            }));
        }
        for (term, weight, speaker) in turn_terms {
            let weight = if low_signal(&term) {
                weight * ZH_FUNCTION_WEIGHT
            } else {
                weight
            };
            all.add(term, weight, speaker);
        }
    }
    let all = all.all;
    let content: Vec<WeightedTerm> = all
        .iter()
        .filter(|w| !is_stop_word(&w.term))
        .cloned()
        .collect();
    let terms = if content.is_empty() { all } else { content };
    QueryPlan {
        conversational: length(&terms, &turns) > LONG_QUERY_TERMS,
        dialogue: n > 1,
        semantic: semantic_text(query),
        terms,
    }
}

/// The plan of the cross-lingual full-text pass: the query's content words
/// translated through `lexicon` into the other language, or `None` when
/// nothing translates.
///
/// - **zh → en**: each Chinese content word ([`cjk_content_words`]) becomes
///   the English stems of its senses, as word terms.
/// - **en → zh**: each English content word becomes the headwords that
///   translate it, each as a jieba word (the `words` field) and as its
///   bigrams, like the query's own Chinese terms in [`plan`].
/// - Latin words without a translation (names: `Bart`) are kept as they are,
///   but a memory that matches nothing else gets no vote from the pass
///   (`Translation::translations`), as in the query's own pass.
///
/// A word's `k` translations share its turn weight equally (`weight / k`,
/// a uniform translation probability): an ambiguous word spreads its weight
/// thin, an unambiguous one keeps it. No other weight is involved. The pass
/// is conversational when the query is ([`plan`]): a short query stays short
/// however many translations its words have (counting those would send a
/// two-word query to the 200-deep coverage re-rank).
pub fn translate(query: &str, lexicon: &Lexicon) -> Option<Translation> {
    let turns = turns(query);
    let n = turns.len();
    let mut t = Translating::default();
    for (i, turn) in turns.iter().enumerate() {
        let weight = turn_weight(turn, n - 1 - i);
        let text = match &turn.speaker {
            Some(s) => format!("{s} {}", turn.text),
            None => turn.text.clone(),
        };
        t.chinese_words(&text, weight, lexicon);
        t.english_words(&text, weight, lexicon);
    }
    t.translated.then(|| Translation {
        plan: QueryPlan {
            conversational: plan(query).conversational,
            dialogue: n > 1,
            semantic: String::new(),
            terms: t.all.all,
        },
        translations: t.from_lexicon,
        groups: t.groups,
    })
}

/// The weighted terms of a plan being built, each once.
#[derive(Default)]
struct Terms {
    all: Vec<WeightedTerm>,
    /// Where each term is in `all`: a long query has hundreds of terms.
    at: HashMap<Term, usize>,
}

impl Terms {
    /// Adds `term`, or keeps its highest weight (a speaker's term only
    /// while every occurrence is one).
    fn add(&mut self, term: Term, weight: f32, speaker: bool) {
        match self.at.get(&term) {
            Some(&i) => {
                let w = &mut self.all[i];
                w.weight = w.weight.max(weight);
                w.speaker &= speaker;
            }
            None => {
                self.at.insert(term.clone(), self.all.len());
                self.all.push(WeightedTerm {
                    term,
                    weight,
                    speaker,
                });
            }
        }
    }
}

/// A translation being built by [`translate`].
#[derive(Default)]
struct Translating {
    translated: bool,
    all: Terms,
    from_lexicon: Vec<Term>,
    /// The terms of `from_lexicon`.
    in_lexicon: HashSet<Term>,
    groups: Vec<TranslationGroup>,
}

impl Translating {
    /// Adds a term of the translated plan (keeping its highest weight).
    fn add(&mut self, term: Term, weight: f32, is_translation: bool) {
        if is_translation && self.in_lexicon.insert(term.clone()) {
            self.from_lexicon.push(term.clone());
        }
        self.all.add(term, weight, false);
    }

    /// zh → en: each Chinese content word of `text`.
    fn chinese_words(&mut self, text: &str, weight: f32, lexicon: &Lexicon) {
        for word in cjk_content_words(text) {
            // A compound the dictionary lacks (`数学考试`) is read as its parts.
            let known = if lexicon.english_of(&word).is_empty() {
                cjk_words(&word)
                    .into_iter()
                    .filter(|w| *w != word)
                    .collect()
            } else {
                vec![word]
            };
            let mut any = false;
            for word in known {
                let english = lexicon.english_of(&word);
                self.translated |= !english.is_empty();
                let share = weight / english.len().max(1) as f32;
                let mut alternatives = Vec::new();
                for e in english {
                    let term = Term {
                        text: e.to_string(),
                        kind: TermKind::Word,
                    };
                    alternatives.push(vec![(term.clone(), share)]);
                    self.add(term, share, true);
                }
                if !alternatives.is_empty() {
                    any = true;
                    self.groups.push(TranslationGroup {
                        weight,
                        alternatives,
                    });
                }
            }
            // A word nothing translates still belongs to the question: no
            // memory in the other script can be said to hold it.
            if !any {
                self.groups.push(TranslationGroup {
                    weight,
                    alternatives: Vec::new(),
                });
            }
        }
    }

    /// en → zh: each English content word of `text` (a name is its own translation).
    fn english_words(&mut self, text: &str, weight: f32, lexicon: &Lexicon) {
        for term in tokenize(text) {
            if term.kind != TermKind::Word || is_stop_word(&term) {
                continue;
            }
            let chinese = lexicon.chinese_of(&term.text);
            if chinese.is_empty() {
                if term.text.bytes().any(|b| b.is_ascii_alphabetic()) {
                    self.groups.push(TranslationGroup {
                        weight,
                        alternatives: vec![vec![(term.clone(), weight)]],
                    });
                    self.add(term, weight, false);
                }
                continue;
            }
            self.translated = true;
            let share = weight / chinese.len() as f32;
            let mut alternatives = Vec::new();
            for zh in chinese {
                let segment = Term {
                    text: zh.to_string(),
                    kind: TermKind::Segment,
                };
                let mut terms = vec![(segment.clone(), share)];
                self.add(segment, share, true);
                for t in tokenize(zh) {
                    terms.push((t.clone(), share));
                    self.add(t, share, true);
                }
                alternatives.push(terms);
            }
            self.groups.push(TranslationGroup {
                weight,
                alternatives,
            });
        }
    }
}

/// A query translated for the cross-lingual pass ([`translate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    /// The pass's terms: translations and untranslated names.
    pub(crate) plan: QueryPlan,
    /// The terms that came from the lexicon. A memory matching none of them
    /// matched only on a name or a number kept as it was.
    pub(crate) translations: Vec<Term>,
    /// One group per content word of the query, in query order: its turn
    /// weight and its translations, each as the terms (with their weights in
    /// [`Translation::plan`]) a memory holding it contains. A name kept as it
    /// is is its own one translation; a word nothing translates has none.
    pub(crate) groups: Vec<TranslationGroup>,
}

/// The translations of one query word ([`Translation::groups`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TranslationGroup {
    /// The weight of the word's turn.
    pub(crate) weight: f32,
    /// Each translation as its terms and their weights (an English word:
    /// one word term; a Chinese word: its jieba word and its bigrams).
    pub(crate) alternatives: Vec<Vec<(Term, f32)>>,
}

/// The tokens of a query as the index cuts a text (stop words included),
/// for the exact-phrase lookup: `None` for a dialogue (several turns), a
/// query of fewer than two tokens or one too long to be copied from a memory.
pub fn phrase_tokens(query: &str) -> Option<Vec<Term>> {
    if query.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        return None;
    }
    let tokens = tokenize(query);
    (2..=MAX_PHRASE_TOKENS)
        .contains(&tokens.len())
        .then_some(tokens)
}

/// The longest query looked up as an exact phrase, in tokens.
pub const MAX_PHRASE_TOKENS: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_shares() {
        use crate::analysis::tokenizer::{cjk_share, script_milli, scripts_differ_milli};
        assert_eq!(cjk_share("我今天去公园"), 1.0);
        assert_eq!(cjk_share("I went to the park today"), 0.0);
        assert_eq!(cjk_share("2024-05-01 !"), 0.5);
        // A Chinese dialogue with speaker tags stays mostly CJK.
        let zh = script_milli("<Bart>:\"嘿，你知道吗？元旦晚会我要表演魔术！\"");
        assert!(zh > 800, "{zh}");
        assert!(scripts_differ_milli(
            zh,
            script_milli("Bart danced at the Christmas party.")
        ));
        assert!(!scripts_differ_milli(
            zh,
            script_milli("Bart 在圣诞晚会上跳舞")
        ));
        assert!(!scripts_differ_milli(500, 0), "neutral text never differs");
    }

    #[test]
    fn tags_and_quotes() {
        let t =
            turns("<Bart>:\"我要表演魔术！\"\n<Assistant>: \"太棒了\"\nBart: what should I wear?");
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].speaker.as_deref(), Some("Bart"));
        assert_eq!(t[0].text, "我要表演魔术！");
        assert!(t[1].is_assistant());
        assert_eq!(t[1].text, "太棒了");
        assert_eq!(t[2].speaker.as_deref(), Some("Bart"));
        assert_eq!(t[2].text, "what should I wear?");
    }

    #[test]
    fn a_question_is_one_untagged_turn() {
        let t = turns("When did Melanie paint a sunrise?");
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].speaker, None);
        let p = plan("When did Melanie paint a sunrise?");
        let texts: Vec<&str> = p.terms.iter().map(|w| w.term.text.as_str()).collect();
        // Words are stemmed like the index (`melanie` → `melani`).
        assert_eq!(texts, ["melani", "paint", "sunris"]);
        assert!(p.terms.iter().all(|w| w.weight == 1.0));
        assert!(!p.conversational && !p.dialogue);
        assert_eq!(p.semantic, "When did Melanie paint a sunrise?");
    }

    #[test]
    fn last_turn_weighs_most_and_assistant_less() {
        let p =
            plan("<Bart>:\"magic show\"\n<Assistant>:\"great costume\"\n<Bart>:\"party tonight\"");
        let w = |s: &str| p.terms.iter().find(|w| w.term.text == s).unwrap().weight;
        assert_eq!(w("party"), 1.0);
        assert!(w("costum") < w("magic"));
        assert!(w("magic") < w("party"));
        assert!(p.dialogue);
        // A speaker tag is a word of its turn.
        assert_eq!(w("bart"), 1.0);
        // The semantic text is the dialogue as written.
        assert!(p.semantic.ends_with("<Bart>:\"party tonight\""));
    }

    #[test]
    fn semantic_text_keeps_the_end_of_a_long_dialogue() {
        let long = "x".repeat(SEMANTIC_CHARS);
        let q = format!("<A>:\"{long}\"\n<B>:\"the last words\"");
        assert_eq!(plan(&q).semantic, "<B>:\"the last words\"");
    }

    #[test]
    fn grammar_bigrams_weigh_less() {
        let p = plan("我要去公园吗");
        let w = |s: &str| p.terms.iter().find(|w| w.term.text == s).unwrap().weight;
        assert_eq!(w("公园"), 1.0);
        assert!(w("我要") < 1.0);
        assert!(w("园吗") < 1.0);
        let segment = |s: &str| {
            p.terms
                .iter()
                .find(|w| w.term.text == s && w.term.kind == TermKind::Segment)
                .map(|w| w.weight)
        };
        assert_eq!(segment("公园"), Some(SEGMENT_WEIGHT));
        let short = plan("公园散步");
        assert!(short.terms.iter().any(|w| w.term.kind == TermKind::Segment));
        assert!(!short.conversational, "jieba words do not lengthen a query");
    }

    #[test]
    fn translation_both_ways() {
        let lex = Lexicon::parse(
            "魔術 魔术 [mo2 shu4] /magic/\n\
             表演 表演 [biao3 yan3] /to perform/show/\n\
             開心 开心 [kai1 xin1] /happy/\n\
             高興 高兴 [gao1 xing4] /happy/glad/\n",
        );
        let t = translate("<Bart>:\"我要表演魔术\"", &lex).unwrap();
        let w = |s: &str| {
            t.plan
                .terms
                .iter()
                .find(|w| w.term.text == s)
                .map(|w| w.weight)
        };
        // One translation keeps the word's weight; two share it.
        assert_eq!(w("magic"), Some(1.0));
        assert_eq!(w("perform"), Some(0.5));
        assert_eq!(w("show"), Some(0.5));
        // A name passes as it is, but is no translation.
        assert_eq!(w("bart"), Some(1.0));
        assert!(t.translations.iter().all(|t| t.text != "bart"));
        let t = translate("I am so happy", &lex).unwrap();
        let kinds: Vec<(&str, TermKind, f32)> = t
            .plan
            .terms
            .iter()
            .map(|w| (w.term.text.as_str(), w.term.kind, w.weight))
            .collect();
        assert_eq!(
            kinds,
            [
                ("开心", TermKind::Segment, 0.5),
                ("开心", TermKind::Bigram, 0.5),
                ("高兴", TermKind::Segment, 0.5),
                ("高兴", TermKind::Bigram, 0.5),
            ]
        );
        assert!(translate("nothing known here", &lex).is_none());
    }

    #[test]
    fn a_short_query_stays_short_however_many_translations_it_has() {
        let lex = Lexicon::parse(
            "會議 会议 [hui4 yi4] /meeting/\n\
             開會 开会 [kai1 hui4] /meeting/\n\
             見面 见面 [jian4 mian4] /meeting/\n\
             筆記 笔记 [bi3 ji4] /notes/\n\
             記錄 记录 [ji4 lu4] /notes/\n",
        );
        let t = translate("meeting notes", &lex).unwrap();
        let counted = t
            .plan
            .terms
            .iter()
            .filter(|w| w.term.kind != TermKind::Segment)
            .count();
        assert!(counted > LONG_QUERY_TERMS, "{counted} translated terms");
        assert!(!t.plan.conversational, "two words are a short query");
        let long = "meeting notes meeting notes about the budget review for the quarter";
        assert!(plan(long).conversational);
        assert!(translate(long, &lex).unwrap().plan.conversational);
    }

    #[test]
    fn long_queries_are_conversational() {
        assert!(plan("one two three four five six seven eight").conversational);
        assert!(!plan("one two three").conversational);
        // Chinese counts in words, not bigrams: a noun phrase of six
        // bigrams, or a question of two content words, is short.
        for short in [
            "新的笔记本电脑",
            "项目截止日期",
            "我要去公园吗",
            "我的银行卡密码是多少",
        ] {
            assert!(!plan(short).conversational, "{short}");
        }
        for long in [
            "上周我和同事在公司附近的火锅餐厅讨论了季度报告和项目截止日期",
            "新的笔记本电脑 cheap fast light",
        ] {
            assert!(plan(long).conversational, "{long}");
        }
        assert_eq!(plan("the").terms.len(), 1);
    }
}
