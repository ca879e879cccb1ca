//! A short-term chat line rewritten as the long-term statement a person
//! meant by it ([`rewrite`]):
//!
//! - the cue is dropped: "记得…", "…，千万记住", "别忘了…", "remember that …",
//!   "don't forget …" ("remember to call mum" from the owner becomes "The
//!   owner needs to call mum");
//! - sentence-final particles go ("…搬家到杭州啦" → "…搬家到杭州"): 啦, 呀, 哦,
//!   呢, 吧 (and 噢, 喔) where they close a sentence, never where they end a
//!   word (酒吧, 网吧, 毛呢);
//! - the speaker is resolved: "我" from the owner becomes "主人", "I'm"
//!   becomes "The owner is", a named group member's "我" becomes their name
//!   (unless the name claims to be the owner);
//! - relative dates become absolute against the moment the message was said,
//!   in its own offset ([`crate::when::resolve`]): "下周五" sent on Thursday
//!   2026-12-03 becomes "2026-12-11（周五）", and that date is the statement's
//!   `time`;
//! - it gets a kind ([`Kind`]): a plan or a one-off state with a date
//!   ("周六不去聚餐了，要加班", "I'm working late tonight") is an `event`, kept
//!   until it has happened (tier t3 within a month of being said, t1 beyond
//!   three months, so that opt-in tier expiry never drops a plan before its
//!   day); a preference is a
//!   `preference`; the rest is a `fact` (a birthday or anniversary named by
//!   its date stays a fact, as does a lasting change "从明天起…"). Nothing
//!   promoted stays `chat`.
//!
//! When the rules cannot rewrite a part safely, that part stays as said.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, FixedOffset, Local, NaiveDate};
use regex::Regex;

use super::salience::{self, Features};
use crate::model::{Fact, Subject, Tier};
use crate::when::{self, Named};

fn re(p: &str) -> Regex {
    Regex::new(p).expect("statement patterns compile")
}

/// The cue words of Chinese chat, longest first.
const ZH_CUES: &str = r"(?:记得|记住)?提醒我(?:一下)?|帮我记(?:一下|着|住|下)?|记住|记得|记一下|记下来?|记着|别忘了?|不要忘了?|别忘记|不要忘记";

static CUE_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)^\s*(?:(?:请|你)?(?:千万|一定)?(?:要)?(?:{ZH_CUES})(?:了|哦|啊|呀|哈|啦|噢|喔)?|这个要记住|重要[:：!！]|(?:please\s+)?(?:remember|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind|make\s+a\s+note)\b(?:\s+(?:that|this)\b)?|note\s+that\b|(?:note|fyi|important)\s*[:：])\s*[:：，,!！-]?\s*"
    ))
});
static CUE_SUFFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"(?i)(?:[，,。.!！;；]\s*(?:你)?(?:千万|一定)?|千万|一定)(?:要)?(?:{ZH_CUES}|please\s+remember(?:\s+(?:that|this|it))?|remember(?:\s+(?:that|this|it))?|don'?t\s+forget(?:\s+(?:that|this|it))?)(?:了|啊|哈|呀|哦|啦|喔)?(?:这件事|这个)?[~～!！。.\s]*$"
    ))
});
/// A cue opening a clause after the first ("…出差，记得提醒我带充电器").
static CUE_CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"([，,；;。！!]\s*)(?:千万|一定)?(?:要)?(?:{ZH_CUES})(?:了|哦|啊|呀)?\s*"
    ))
});
/// "Remember to …", "don't forget to …": something to do.
static EN_TO_DO: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^\s*(?:please\s+)?(?:remember|don'?t\s+forget|do\s+not\s+forget)\s+to\s+")
});
/// A recurring date: a line naming a birthday by its day is still a fact.
static RECURRING_DATE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)生日|纪念日|忌日|周年|birthday|anniversary"));
/// A lasting change that starts on a date ("从明天起戒烟", "starting Monday").
static STARTS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)从.{0,16}(?:起|开始)|(?:^|[，,。；;\s])以后|往后|以后都|\bstarting\b|\bfrom\b.{0,24}\bon\b|from now on",
    )
});
/// A calendar date or holiday without a year ("6月18号", "May 3rd", "春节"):
/// with a plan, an event.
static CALENDAR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)[\d一二三四五六七八九十]+月(?:份|\d+[号日])?|\d+号|春节|过年|国庆|中秋|元旦|端午|清明|暑假|寒假|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d",
    )
});
static ZH_KIN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"我(老婆|老公|妻子|丈夫|女朋友|男朋友|儿子|女儿|妈|爸|爸妈|父亲|母亲|哥|姐|弟|妹|岳父|岳母|爷爷|奶奶|外婆|家)",
    )
});
static ZH_I: LazyLock<Regex> = LazyLock::new(|| re(r"我的|我([^们])|我$"));
static EN_SUBJ: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(I'm|I am|I've|I have|I'll|I'd|I don't|I can't|I|my|My|me|mine)\b( (\w+))?")
});

/// Particles that close a Chinese sentence.
const PARTICLES: &[char] = &['啦', '呀', '哦', '呢', '吧', '噢', '喔'];
/// Words that end in a particle's character (去酒吧, 一件毛呢).
const PARTICLE_WORDS: &[&str] = &[
    "酒吧", "网吧", "贴吧", "水吧", "氧吧", "茶吧", "书吧", "陶吧", "话吧", "迪吧", "清吧", "静吧",
    "毛呢", "花呢", "厚呢",
];
/// What ends a sentence.
const SENTENCE_ENDS: &[char] = &['。', '！', '!', '？', '?', '~', '～', '\n', '；', ';'];

/// The kind a statement is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Something that holds (an allergy, a name, where someone lives, a birthday).
    Fact,
    /// Something someone likes or avoids.
    Preference,
    /// A plan or a one-off state, with its date.
    Event,
}

impl Kind {
    /// The kind word of the fact.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::Preference => "preference",
            Kind::Event => "event",
        }
    }
}

/// A chat line as a long-term statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The text.
    pub text: String,
    /// Its kind.
    pub kind: Kind,
    /// The first date it names, absolute (ISO 8601 at its precision).
    pub time: Option<String>,
    /// The tier an event's date calls for (t3 within a month of being
    /// said, t1 beyond three months); `None`: as writes assign it.
    pub tier: Option<Tier>,
}

/// When a message was said, in the offset it was said in: its `time` as
/// given when that carries a zone other than UTC; otherwise (a UTC stamp, as
/// `Date.toISOString()` writes, or none) in this machine's zone, the
/// owner's, since memd runs on the owner's machine.
pub fn said_at(f: &Fact) -> DateTime<FixedOffset> {
    let given = f
        .setting
        .time
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t.trim()).ok());
    match given {
        Some(t) if t.offset().local_minus_utc() != 0 => t,
        Some(t) => t.with_timezone(&Local).fixed_offset(),
        None => f
            .setting
            .time_at
            .unwrap_or(f.ts)
            .with_timezone(&Local)
            .fixed_offset(),
    }
}

/// The message's own time as a `time` value: as it was given, else when it was said.
pub fn message_time(f: &Fact) -> String {
    f.setting
        .time
        .clone()
        .unwrap_or_else(|| said_at(f).to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// `text` without its cue: a "remember …" before it, a "…，千万记住" after
/// it, or a "记得…" opening a later clause. Unchanged when the cue is all
/// there is.
pub fn drop_cue(text: &str) -> String {
    let trimmed = text.trim();
    let mut t = CUE_PREFIX.replace(trimmed, "").into_owned();
    loop {
        let next = CUE_SUFFIX.replace(&t, "").into_owned();
        if next == t {
            break;
        }
        t = next;
    }
    t = CUE_CLAUSE.replace_all(&t, "$1").into_owned();
    if t.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
        return trimmed.to_string();
    }
    t
}

/// Whether the particle ending `head` is part of a word (酒吧, 毛呢).
fn ends_word(head: &str) -> bool {
    PARTICLE_WORDS.iter().any(|w| head.ends_with(w))
}

/// `text` without the particles that close its sentences (…搬家到杭州啦！ →
/// …搬家到杭州). The last sentence also loses the "！" or "~" after its particle.
pub fn drop_particles(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        i += 1;
        let at_end = i == chars.len() || SENTENCE_ENDS.contains(&chars[i]);
        if !at_end || !PARTICLES.contains(&c) {
            continue;
        }
        // Walk back over the particles closing this sentence.
        let mut dropped = false;
        while let Some(&last) = out.last() {
            if !PARTICLES.contains(&last) {
                break;
            }
            let head: String = out.iter().collect();
            if ends_word(&head) || out.len() < 3 {
                break;
            }
            out.pop();
            dropped = true;
        }
        // "…杭州啦！" at the very end: the exclamation goes with the particle.
        if dropped
            && chars[i..]
                .iter()
                .all(|c| matches!(c, '！' | '!' | '~' | '～'))
        {
            break;
        }
    }
    out.into_iter().collect()
}

fn third_person(verb: &str) -> Option<String> {
    const SAME: &[&str] = &[
        "can", "will", "should", "must", "may", "might", "could", "would", "was",
    ];
    let v = verb.to_ascii_lowercase();
    if SAME.contains(&v.as_str())
        || v.ends_with("ed")
        || [
            "broke", "grew", "had", "went", "got", "took", "made", "saw", "told", "never", "just",
            "really", "also", "always", "still", "only",
        ]
        .contains(&v.as_str())
    {
        return Some(verb.to_string());
    }
    if !v.chars().all(|c| c.is_ascii_alphabetic()) || v.len() < 2 {
        return None;
    }
    Some(match v.as_str() {
        "have" => "has".into(),
        "do" => "does".into(),
        "go" => "goes".into(),
        "am" => "is".into(),
        _ if v.ends_with('s')
            || v.ends_with("sh")
            || v.ends_with("ch")
            || v.ends_with('x')
            || v.ends_with('o') =>
        {
            format!("{verb}es")
        }
        _ if v.ends_with('y') && !v.ends_with("ay") && !v.ends_with("ey") && !v.ends_with("oy") => {
            format!("{}ies", &verb[..verb.len() - 1])
        }
        _ => format!("{verb}s"),
    })
}

fn english(text: &str, who: &str) -> Option<String> {
    let mut failed = false;
    let out = EN_SUBJ.replace_all(text, |c: &regex::Captures<'_>| {
        let next = c.get(2).map_or("", |m| m.as_str());
        let word = c.get(3).map(|m| m.as_str());
        match &c[1] {
            "I'm" | "I am" => format!("{who} is{next}"),
            "I've" | "I have" => format!("{who} has{next}"),
            "I'll" => format!("{who} will{next}"),
            "I'd" => format!("{who} would{next}"),
            "I don't" => format!("{who} doesn't{next}"),
            "I can't" => format!("{who} can't{next}"),
            "my" | "My" | "mine" => format!("{who}'s{next}"),
            "me" => format!("{who}{next}"),
            _ => match word.and_then(third_person) {
                Some(v) => format!("{who} {v}"),
                None => {
                    failed = true;
                    String::new()
                }
            },
        }
    });
    if failed {
        return None;
    }
    let mut s = out.into_owned();
    if let Some(first) = s.get(..1) {
        s = first.to_uppercase() + &s[1..];
    }
    Some(s)
}

/// Whether a display name reads as the owner ("主人", "the owner", "me"): a
/// chat member may call themselves anything, and a rewrite must never turn
/// their words into a statement about the owner.
fn claims_owner(name: &str) -> bool {
    use unicode_normalization::UnicodeNormalization;
    let n: String = name.nfkc().collect::<String>().trim().to_lowercase();
    let n = n.strip_prefix("the ").unwrap_or(&n).trim();
    n.contains("主人")
        || matches!(
            n,
            "owner" | "master" | "me" | "myself" | "self" | "i" | "我" | "本人" | "自己"
        )
}

/// `text` with its speaker resolved (`subject: owner` → "主人" / "The
/// owner"; a named other speaker → their name, unless that name claims to be
/// the owner). Unchanged when the rules cannot rewrite it safely.
fn resolve_speaker(text: &str, subject: Subject, speaker: Option<&str>) -> String {
    let (zh, en) = match (subject, speaker) {
        (Subject::Owner, _) => ("主人".to_string(), "the owner".to_string()),
        (Subject::Other, Some(name)) if !name.trim().is_empty() && !claims_owner(name) => {
            (name.trim().to_string(), name.trim().to_string())
        }
        _ => return text.to_string(),
    };
    if text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)) {
        let kin = ZH_KIN.replace_all(text, format!("{zh}的$1").as_str());
        ZH_I.replace_all(&kin, |c: &regex::Captures<'_>| {
            if c[0].starts_with("我的") {
                format!("{zh}的")
            } else {
                format!("{zh}{}", c.get(1).map_or("", |m| m.as_str()))
            }
        })
        .into_owned()
    } else if let Some(cue) = EN_TO_DO.find(text) {
        // "Remember to call my mum" → "The owner needs to call the owner's mum".
        let rest = &text[cue.end()..];
        let task = english(rest, &en).map_or_else(|| rest.to_string(), |r| lower_first(&r));
        format!("{} needs to {task}", upper_first(&en))
    } else {
        english(text, &en).unwrap_or_else(|| text.to_string())
    }
}

fn upper_first(s: &str) -> String {
    s.get(..1)
        .map_or_else(String::new, |f| f.to_uppercase() + &s[1..])
}

fn lower_first(s: &str) -> String {
    s.get(..1)
        .map_or_else(String::new, |f| f.to_lowercase() + &s[1..])
}

/// The kind of a statement from what was said (`said`) and the dates it
/// names, and the tier its date calls for; see the module docs.
pub fn kind_of(said: &str, named: &[Named], day: NaiveDate) -> (Kind, Option<Tier>) {
    let category = Features::of(said).category;
    let lasting = RECURRING_DATE.is_match(said) || STARTS.is_match(said);
    // This year or a past one dates a fact ("今年上幼儿园中班", "broke my
    // ankle last year"); a day, week or month, or a year ahead, makes a plan
    // or a one-off state.
    let dated = named
        .iter()
        .find(|n| !matches!(n, Named::Year(y) if *y <= day.year()));
    if let Some(first) = dated.filter(|_| !lasting) {
        // Kept at least until it has happened, were tier expiry turned on:
        // t3 lives 30 days, t2 90, t1 a year.
        let days = first.last_day().map_or(0, |d| (d - day).num_days());
        let tier = match days {
            ..=30 => Some(Tier::T3),
            31..=90 => None,
            _ => Some(Tier::T1),
        };
        return (Kind::Event, tier);
    }
    // A plan on a calendar day or holiday ("6月18号飞东京", "春节打算回老家").
    if !lasting && salience::matches("plan", said) && CALENDAR.is_match(said) {
        return (Kind::Event, None);
    }
    match category {
        Some("preference") => (Kind::Preference, None),
        _ => (Kind::Fact, None),
    }
}

/// `text`, said by `speaker` about `subject` at `said`, as the long-term
/// statement a person meant (see the module docs).
pub fn rewrite(
    text: &str,
    subject: Subject,
    speaker: Option<&str>,
    said: DateTime<FixedOffset>,
) -> Statement {
    let to_do = EN_TO_DO.is_match(text.trim());
    let cleaned = drop_particles(&drop_cue(text));
    // "Remember to …" keeps its verb: the speaker rewrite says who needs to.
    let cleaned = if to_do {
        text.trim().to_string()
    } else {
        cleaned
    };
    let spoken = resolve_speaker(&cleaned, subject, speaker);
    let dated = when::resolve(&spoken, said);
    let (kind, tier) = kind_of(text, &dated.named, said.date_naive());
    Statement {
        time: dated.time(),
        text: dated.text,
        kind,
        tier,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THU: &str = "2026-12-03T10:00:00+08:00";

    fn said(s: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(s).unwrap()
    }

    fn owner(text: &str) -> Statement {
        rewrite(text, Subject::Owner, None, said(THU))
    }

    #[test]
    fn the_issue_case() {
        let s = owner("下周五是我妈妈的生日，千万记住");
        assert_eq!(s.text, "2026-12-11（周五）是主人的妈妈的生日");
        assert_eq!(s.time.as_deref(), Some("2026-12-11"));
        assert_eq!(s.kind, Kind::Fact);
    }

    #[test]
    fn cues_go_and_the_content_stays() {
        for (line, want) in [
            ("记得下周五交报告", "下周五交报告"),
            ("千万记住，我对花生过敏", "我对花生过敏"),
            ("我对花生过敏，千万记住", "我对花生过敏"),
            ("我对花生过敏千万记住！", "我对花生过敏"),
            ("别忘了我老婆下个月生日", "我老婆下个月生日"),
            ("帮我记一下：车停在B2", "车停在B2"),
            ("提醒我明天带伞", "明天带伞"),
            ("我妈周五生日，记得提醒我", "我妈周五生日"),
            (
                "我下周三去北京出差，记得提醒我带充电器",
                "我下周三去北京出差，带充电器",
            ),
            ("明天开会，别忘了带电脑", "明天开会，带电脑"),
            ("他说，我记得那家店", "他说，我记得那家店"),
            ("记住哈，我下周不在", "我下周不在"),
            ("重要：护照五月到期", "护照五月到期"),
            (
                "remember that my passport expires in May",
                "my passport expires in May",
            ),
            ("Don't forget: the car is in B2", "the car is in B2"),
            ("the car is in B2, remember that", "the car is in B2"),
            (
                "Note that the wifi password changed",
                "the wifi password changed",
            ),
            // Not cues: a memory of remembering, a word that contains one.
            ("我一直记得那天的雨", "我一直记得那天的雨"),
            ("I remember the old house", "I remember the old house"),
            ("notebooks are on the shelf", "notebooks are on the shelf"),
            // A cue alone stays as said.
            ("记住", "记住"),
        ] {
            assert_eq!(drop_cue(line), want, "{line}");
        }
    }

    #[test]
    fn particles_go_where_they_close_a_sentence() {
        for (line, want) in [
            ("我搬家到杭州啦", "我搬家到杭州"),
            ("我搬家到杭州啦！", "我搬家到杭州"),
            ("下周去成都呀~", "下周去成都"),
            ("我不吃香菜哦。", "我不吃香菜。"),
            ("他已经到了呢，我们走吧", "他已经到了呢，我们走"),
            ("明天去吃火锅吧", "明天去吃火锅"),
            ("明天去吃火锅吧。周六再说吧", "明天去吃火锅。周六再说"),
            // Words that end in one: kept.
            ("周五晚上去酒吧", "周五晚上去酒吧"),
            ("他在网吧", "他在网吧"),
            ("我买了一件毛呢", "我买了一件毛呢"),
            ("呢", "呢"),
            ("no particles here", "no particles here"),
        ] {
            assert_eq!(drop_particles(line), want, "{line}");
        }
    }

    #[test]
    fn statements_read_as_meant() {
        let t3 = Some(Tier::T3);
        for (line, subject, speaker, text, kind, time, tier) in [
            (
                "记得下周五交报告",
                Subject::Owner,
                None,
                "2026-12-11（周五）交报告",
                Kind::Event,
                Some("2026-12-11"),
                t3,
            ),
            (
                "我下个月要搬家到杭州啦",
                Subject::Owner,
                None,
                "主人2027年1月要搬家到杭州",
                Kind::Event,
                Some("2027-01"),
                None,
            ),
            (
                "我搬家到杭州啦",
                Subject::Owner,
                None,
                "主人搬家到杭州",
                Kind::Fact,
                None,
                None,
            ),
            (
                "周六不去聚餐了，要加班",
                Subject::Owner,
                None,
                "2026-12-05（周六）不去聚餐了，要加班",
                Kind::Event,
                Some("2026-12-05"),
                t3,
            ),
            (
                "I'm working late tonight",
                Subject::Owner,
                None,
                "The owner is working late on the evening of 2026-12-03 (Thursday)",
                Kind::Event,
                Some("2026-12-03"),
                t3,
            ),
            (
                "我喜欢喝乌龙茶，不加糖",
                Subject::Owner,
                None,
                "主人喜欢喝乌龙茶，不加糖",
                Kind::Preference,
                None,
                None,
            ),
            (
                "I prefer tea over coffee",
                Subject::Owner,
                None,
                "The owner prefers tea over coffee",
                Kind::Preference,
                None,
                None,
            ),
            (
                "我对花生过敏，千万记住",
                Subject::Owner,
                None,
                "主人对花生过敏",
                Kind::Fact,
                None,
                None,
            ),
            (
                "我从明天开始戒烟",
                Subject::Owner,
                None,
                "主人从2026-12-04（周五）开始戒烟",
                Kind::Fact,
                Some("2026-12-04"),
                None,
            ),
            (
                "remember to call mum tomorrow",
                Subject::Owner,
                None,
                "The owner needs to call mum on 2026-12-04 (Friday)",
                Kind::Event,
                Some("2026-12-04"),
                t3,
            ),
            (
                "我对猫毛过敏",
                Subject::Other,
                Some("小王"),
                "小王对猫毛过敏",
                Kind::Fact,
                None,
                None,
            ),
            (
                "记住，下周二开会",
                Subject::Other,
                None,
                "2026-12-08（周二）开会",
                Kind::Event,
                Some("2026-12-08"),
                t3,
            ),
            (
                "我儿子叫豆豆，今年上幼儿园中班",
                Subject::Owner,
                None,
                "主人的儿子叫豆豆，2026年上幼儿园中班",
                Kind::Fact,
                Some("2026"),
                None,
            ),
            (
                "6月18号飞东京，早上8点的航班",
                Subject::Owner,
                None,
                "6月18号飞东京，早上8点的航班",
                Kind::Event,
                None,
                None,
            ),
            (
                "我的工作时间是早九晚六，周末双休",
                Subject::Owner,
                None,
                "主人的工作时间是早九晚六，周末双休",
                Kind::Fact,
                None,
                None,
            ),
            (
                "My office is on the 12th floor",
                Subject::Owner,
                None,
                "The owner's office is on the 12th floor",
                Kind::Fact,
                None,
                None,
            ),
            (
                "Keep in mind that I can't do meetings before 10am",
                Subject::Owner,
                None,
                "The owner can't do meetings before 10am",
                Kind::Fact,
                None,
                None,
            ),
            (
                "明年三月去日本",
                Subject::Owner,
                None,
                "2027年三月去日本",
                Kind::Event,
                Some("2027"),
                Some(Tier::T1),
            ),
        ] {
            let s = rewrite(line, subject, speaker, said(THU));
            assert_eq!(
                (s.text.as_str(), s.kind, s.time.as_deref(), s.tier),
                (text, kind, time, tier),
                "{line}"
            );
        }
    }

    #[test]
    fn the_speaker_is_resolved_and_never_claimed() {
        assert_eq!(
            owner("记住，我老婆生日是5月20号").text,
            "主人的老婆生日是5月20号"
        );
        // A member who calls themselves the owner is not the owner.
        for name in ["主人", "the owner", "Owner", "ｔｈｅ　ｏｗｎｅｒ"] {
            assert_eq!(
                rewrite("我对猫毛过敏", Subject::Other, Some(name), said(THU)).text,
                "我对猫毛过敏",
                "{name}"
            );
        }
        assert_eq!(
            owner("Remember that I'm allergic to shellfish").text,
            "The owner is allergic to shellfish"
        );
        assert_eq!(
            owner("My wife loves sunflowers").text,
            "The owner's wife loves sunflowers"
        );
    }

    #[test]
    fn a_message_is_dated_in_its_own_offset() {
        let mut f: Fact = serde_json::from_value(serde_json::json!({
            "id": "chat-main-a-1", "ts": "2026-12-03T16:30:00Z", "scene": "main",
            "kind": "chat", "stage": "short", "text": "明天", "privacy": "normal",
            "subject": "owner", "source": "qq",
            "time": "2026-12-04T00:30:00+08:00"
        }))
        .unwrap();
        assert_eq!(said_at(&f).to_rfc3339(), "2026-12-04T00:30:00+08:00");
        assert_eq!(message_time(&f), "2026-12-04T00:30:00+08:00");
        // A UTC stamp or none: this machine's zone.
        f.setting.time = Some("2026-12-03T16:30:00Z".into());
        let local = f.ts.with_timezone(&Local).fixed_offset();
        assert_eq!(said_at(&f), local);
        f.setting.time = None;
        assert_eq!(said_at(&f), local);
    }
}
