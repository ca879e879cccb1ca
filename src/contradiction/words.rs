//! The word lists of the contradiction detector: negation, preference and
//! its antonyms, words that carry no fact (particles, degree and frequency
//! adverbs, "now"/"anymore"), and the words that hold a negation character
//! without negating (`不错`, `无论`).

/// What a marker word does to a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Flips the statement (`不`, `not`, `never`).
    Negation,
    /// A liking (`喜欢`, `love`).
    Like,
    /// A disliking (`讨厌`, `hate`).
    Dislike,
    /// Carries no fact (`了`, `已经`, `really`, `anymore`).
    Soft,
}

/// Chinese markers, longest first where one is a prefix of another
/// (matched greedily, longest first, by [`zh_marker`]).
const ZH: &[(&str, Marker)] = &[
    ("再也不", Marker::Negation),
    ("从来不", Marker::Negation),
    ("从来没", Marker::Negation),
    ("一点也", Marker::Soft),
    ("一点都", Marker::Soft),
    ("一点儿", Marker::Soft),
    ("受不了", Marker::Dislike),
    ("不再", Marker::Negation),
    ("从不", Marker::Negation),
    ("从没", Marker::Negation),
    ("并非", Marker::Negation),
    ("喜欢", Marker::Like),
    ("喜爱", Marker::Like),
    ("热爱", Marker::Like),
    ("最爱", Marker::Like),
    ("偏爱", Marker::Like),
    ("享受", Marker::Like),
    ("讨厌", Marker::Dislike),
    ("厌恶", Marker::Dislike),
    ("反感", Marker::Dislike),
    ("嫌弃", Marker::Dislike),
    ("痛恨", Marker::Dislike),
    ("已经", Marker::Soft),
    ("现在", Marker::Soft),
    ("目前", Marker::Soft),
    ("如今", Marker::Soft),
    ("最近", Marker::Soft),
    ("每天", Marker::Soft),
    ("天天", Marker::Soft),
    ("早上", Marker::Soft),
    ("平时", Marker::Soft),
    ("经常", Marker::Soft),
    ("常常", Marker::Soft),
    ("总是", Marker::Soft),
    ("一直", Marker::Soft),
    ("非常", Marker::Soft),
    ("特别", Marker::Soft),
    ("真的", Marker::Soft),
    ("根本", Marker::Soft),
    ("其实", Marker::Soft),
    ("今年", Marker::Soft),
    ("大概", Marker::Soft),
    ("大约", Marker::Soft),
    ("左右", Marker::Soft),
    ("仍然", Marker::Soft),
    ("依然", Marker::Soft),
    ("还是", Marker::Soft),
    ("定在", Marker::Soft),
    ("定于", Marker::Soft),
    ("改到", Marker::Soft),
    ("改在", Marker::Soft),
    ("改成", Marker::Soft),
    ("改为", Marker::Soft),
    ("换成", Marker::Soft),
    ("换到", Marker::Soft),
    ("变成", Marker::Soft),
    ("安排在", Marker::Soft),
    ("不", Marker::Negation),
    ("没", Marker::Negation),
    ("别", Marker::Negation),
    ("无", Marker::Negation),
    ("未", Marker::Negation),
    ("爱", Marker::Like),
    ("恨", Marker::Dislike),
    ("了", Marker::Soft),
    ("的", Marker::Soft),
    ("地", Marker::Soft),
    ("得", Marker::Soft),
    ("也", Marker::Soft),
    ("都", Marker::Soft),
    ("还", Marker::Soft),
    ("很", Marker::Soft),
    ("挺", Marker::Soft),
    ("太", Marker::Soft),
    ("真", Marker::Soft),
    ("再", Marker::Soft),
    ("又", Marker::Soft),
    ("就", Marker::Soft),
    ("才", Marker::Soft),
    ("是", Marker::Soft),
    ("在", Marker::Soft),
    ("吧", Marker::Soft),
    ("呢", Marker::Soft),
    ("啊", Marker::Soft),
    ("呀", Marker::Soft),
    ("啦", Marker::Soft),
    ("嘛", Marker::Soft),
    ("哦", Marker::Soft),
];

/// Words that hold a negation or preference character but are ordinary
/// words (`不错` is praise, `无论` is "whatever", `爱好` a hobby).
const ZH_WORDS: &[&str] = &[
    "不错",
    "不少",
    "不仅",
    "不但",
    "不管",
    "不同",
    "不久",
    "不断",
    "无论",
    "无线",
    "无人",
    "没关系",
    "别人",
    "别的",
    "特别",
    "爱好",
    "爱人",
    "未来",
    "得到",
    "地方",
    "地址",
    "的确",
    "目的",
    "还款",
    "太太",
    "太阳",
    "在线",
];

/// The ordinary word starting `s`, if any (longest first).
pub(crate) fn zh_word(s: &str) -> Option<&'static str> {
    ZH_WORDS
        .iter()
        .filter(|w| s.starts_with(**w))
        .max_by_key(|w| w.len())
        .copied()
}

/// The marker starting `s`, if any, and its length in bytes (longest match).
pub(crate) fn zh_marker(s: &str) -> Option<(Marker, usize)> {
    ZH.iter()
        .filter(|(w, _)| s.starts_with(*w))
        .max_by_key(|(w, _)| w.len())
        .map(|(w, m)| (*m, w.len()))
}

/// The marker an English word (lowercase, unstemmed) is, if any.
pub(crate) fn en_marker(word: &str) -> Option<Marker> {
    let m = match word {
        "not" | "no" | "never" | "neither" | "nor" | "nobody" | "none" | "nothing" => {
            Marker::Negation
        }
        "like" | "likes" | "liked" | "love" | "loves" | "loved" | "enjoy" | "enjoys" | "adore"
        | "adores" | "fond" => Marker::Like,
        "dislike" | "dislikes" | "disliked" | "hate" | "hates" | "hated" | "detest" | "detests"
        | "loathe" | "loathes" => Marker::Dislike,
        "the" | "a" | "an" | "is" | "am" | "are" | "was" | "were" | "be" | "been" | "do"
        | "does" | "did" | "now" | "still" | "anymore" | "any" | "longer" | "really" | "very"
        | "much" | "so" | "just" | "also" | "actually" | "currently" | "already" | "always"
        | "usually" | "every" | "each" | "day" | "daily" | "morning" | "mornings" | "at" | "on"
        | "all" | "totally" | "absolutely" | "quite" | "pretty" | "truly" | "these" | "days"
        | "about" | "around" | "approximately" | "roughly" => Marker::Soft,
        _ => return None,
    };
    Some(m)
}

/// English contractions and phrases rewritten before words are cut
/// (`don't` → `do not`, `can't stand` → `detest`).
pub(crate) const EN_REWRITES: &[(&str, &str)] = &[
    ("\u{2019}", "'"),
    ("can't stand", "detest"),
    ("cannot stand", "detest"),
    ("can not stand", "detest"),
    ("can't", "can not"),
    ("cannot", "can not"),
    ("won't", "will not"),
    ("n't", " not"),
    ("'s", " s"),
    ("'m", " am"),
    ("'re", " are"),
    ("'ve", " have"),
    ("'ll", " will"),
];

/// The value of an English number word, month or weekday: (value, is a
/// date part).
pub(crate) fn en_number(word: &str) -> Option<(u32, bool)> {
    const SMALL: &[&str] = &[
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    const MONTHS: &[&str] = &[
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
    const DAYS: &[&str] = &[
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let pos = |list: &[&str]| list.iter().position(|w| *w == word).map(|i| i as u32);
    if let Some(n) = pos(SMALL) {
        return Some((n, false));
    }
    if let Some(n) = pos(MONTHS) {
        return Some((n + 1, true));
    }
    let stripped = word.strip_suffix('s').unwrap_or(word);
    DAYS.iter()
        .position(|w| *w == stripped)
        .map(|i| (i as u32 + 1, true))
}

/// Chinese measure words and date units after which a numeral is a number
/// (`三只`, `五月`, `十点`); the date units among them mark a date part.
pub(crate) fn zh_unit(c: char) -> Option<bool> {
    if "年月日号点时分".contains(c) {
        Some(true)
    } else if "个只条次岁天周本张位件杯瓶斤米块元万千百辆套间层楼口台公小步".contains(c)
    {
        Some(false)
    } else {
        None
    }
}

/// Characters after which a numeral is a weekday (`周三`, `星期五`, `礼拜天`).
pub(crate) fn zh_weekday_prefix(prev: &str) -> bool {
    prev.ends_with('周') || prev.ends_with("星期") || prev.ends_with("礼拜")
}

/// Whether a number right after `before` (the normalised text before it)
/// names a thing instead of counting or dating it: after `#` or a label
/// word (`number`, `no`, `issue`, `page`, `step`, …). Two memories naming
/// different things are not a changed number.
pub(crate) fn names_a_thing(before: &str) -> bool {
    const LABELS: &[&str] = &[
        "number", "no", "issue", "ticket", "pr", "bug", "task", "note", "item", "order", "case",
        "step", "chapter", "page", "section", "line", "table", "figure", "episode", "lesson",
    ];
    let before = before.trim_end();
    if before.ends_with('#') {
        return true;
    }
    let word = before
        .trim_end_matches('.')
        .rsplit(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("");
    LABELS.contains(&word)
}
