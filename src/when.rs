//! Dates in memories and in queries (English and Chinese), without IO.
//!
//! - [`parse_time`]: the event time a memory was written with — ISO 8601
//!   (`2023-05-08`, `2023-05-08T13:56:00Z`), free English text
//!   (`1:56 pm on 8 May, 2023`, `May 8, 2023`, `June 2023`) or Chinese
//!   (`2023年5月8日`, `2023年5月8日 下午1:56`). Times without a zone are UTC.
//!   Anything else is kept as given and simply has no timestamp.
//! - [`query_range`]: a time expression inside a query — absolute (`in May
//!   2023`, `on 8 May, 2023`, `2023年5月`, `in 2023`) or relative to an anchor
//!   (`yesterday`, `last week`, `3 days ago`, `last year`, `昨天`, `上周`,
//!   `去年五月`, `三天前`) — as a half-open range `[from, to)`. The anchor is
//!   the caller's "now"; search ranks memories whose event time falls in the
//!   range a little higher (a boost, never a filter).
//! - [`resolve`] ([`relative`]): the relative dates inside a statement
//!   (`下周五`, `明晚`, `next Friday`, `in two weeks`) made absolute against
//!   the moment it was said, in the text and as its `time`; consolidation
//!   writes what the person meant, not what a later reader would take it for.

pub mod relative;

pub use relative::{Named, Resolved, resolve};

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use regex::Regex;
use std::sync::LazyLock;

const MONTHS: [&str; 12] = [
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

/// A month name or its three-letter abbreviation (`sept` too), 1-based.
fn month_of(word: &str) -> Option<u32> {
    let w = word.to_ascii_lowercase();
    let w = w.trim_end_matches('.');
    if w.len() < 3 {
        return None;
    }
    if w == "sept" {
        return Some(9);
    }
    MONTHS
        .iter()
        .position(|m| *m == w || (w.len() == 3 && m.starts_with(w)))
        .map(|i| i as u32 + 1)
}

const MONTH_RE: &str = r"(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?";

static EN_DAY_MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({MONTH_RE})\s*,?\s*(\d{{4}})\b"
    ))
    .expect("valid regex")
});
static EN_MONTH_DAY_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b({MONTH_RE})\s+(\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s*(\d{{4}})\b"
    ))
    .expect("valid regex")
});
static EN_MONTH_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"\b({MONTH_RE})\s*,?\s*(\d{{4}})\b")).expect("valid regex")
});
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(上午|早上|中午|下午|晚上)?\s*(\d{1,2})[:：](\d{2})\s*(am|pm|a\.m\.|p\.m\.)?")
        .expect("valid regex")
});
static ISO_REDUCED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\d{4})(?:-(\d{2}))?$").expect("valid regex"));
static ZH_DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d{4})\s*年\s*(\d{1,2})\s*月(?:\s*(\d{1,2})\s*[日号])?").expect("valid regex")
});

/// The event time in `s`, if it names a date (see the module docs).
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(Utc.from_utc_datetime(&t));
        }
    }
    for f in ["%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d"] {
        if let Ok(d) = NaiveDate::parse_from_str(s, f) {
            return Some(at_midnight(d));
        }
    }
    // ISO 8601 at month or year precision (`2027-01`, `2027`): its first day.
    if let Some(c) = ISO_REDUCED.captures(s) {
        let month = c.get(2).map_or(Some(1), |m| m.as_str().parse().ok())?;
        return NaiveDate::from_ymd_opt(c[1].parse().ok()?, month, 1).map(at_midnight);
    }
    let date = if let Some(c) = ZH_DATE.captures(s) {
        let day = c.get(3).map_or(Some(1), |d| d.as_str().parse().ok())?;
        NaiveDate::from_ymd_opt(c[1].parse().ok()?, c[2].parse().ok()?, day)?
    } else if let Some(c) = EN_DAY_MONTH_YEAR.captures(s) {
        NaiveDate::from_ymd_opt(c[3].parse().ok()?, month_of(&c[2])?, c[1].parse().ok()?)?
    } else if let Some(c) = EN_MONTH_DAY_YEAR.captures(s) {
        NaiveDate::from_ymd_opt(c[3].parse().ok()?, month_of(&c[1])?, c[2].parse().ok()?)?
    } else if let Some(c) = EN_MONTH_YEAR.captures(s) {
        NaiveDate::from_ymd_opt(c[2].parse().ok()?, month_of(&c[1])?, 1)?
    } else {
        return None;
    };
    let time = CLOCK.captures(s).and_then(|c| {
        let mut h: u32 = c[2].parse().ok()?;
        let m: u32 = c[3].parse().ok()?;
        let pm = c
            .get(4)
            .is_some_and(|p| p.as_str().to_ascii_lowercase().starts_with('p'))
            || c.get(1)
                .is_some_and(|p| matches!(p.as_str(), "下午" | "晚上"));
        let am = c
            .get(4)
            .is_some_and(|p| p.as_str().to_ascii_lowercase().starts_with('a'));
        if pm && h < 12 {
            h += 12;
        } else if am && h == 12 {
            h = 0;
        }
        NaiveTime::from_hms_opt(h, m, 0)
    });
    Some(Utc.from_utc_datetime(&date.and_time(time.unwrap_or(NaiveTime::MIN))))
}

fn at_midnight(d: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&d.and_time(NaiveTime::MIN))
}

/// A half-open time range `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// First instant inside.
    pub(crate) from: DateTime<Utc>,
    /// First instant after.
    pub(crate) to: DateTime<Utc>,
}

impl TimeRange {
    fn days(from: NaiveDate, days: i64) -> Option<TimeRange> {
        let from = at_midnight(from);
        Some(TimeRange {
            from,
            to: from.checked_add_signed(Duration::days(days))?,
        })
    }

    fn month(year: i32, month: u32) -> Option<TimeRange> {
        let from = NaiveDate::from_ymd_opt(year, month, 1)?;
        let next = if month == 12 {
            NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?
        } else {
            NaiveDate::from_ymd_opt(year, month + 1, 1)?
        };
        Some(TimeRange {
            from: at_midnight(from),
            to: at_midnight(next),
        })
    }

    fn year(year: i32) -> Option<TimeRange> {
        Some(TimeRange {
            from: at_midnight(NaiveDate::from_ymd_opt(year, 1, 1)?),
            to: at_midnight(NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?),
        })
    }

    /// Whether `t` lies inside.
    pub(crate) fn contains(&self, t: DateTime<Utc>) -> bool {
        self.from <= t && t < self.to
    }
}

/// A Chinese or Arabic number of at most two digits (`三`, `十二`, `12`, `两`).
fn zh_number(s: &str) -> Option<u32> {
    if let Ok(n) = s.parse() {
        return Some(n);
    }
    let digit = |c: char| "零一二三四五六七八九".find(c).map(|i| (i / 3) as u32);
    let chars: Vec<char> = s.chars().collect();
    match chars.as_slice() {
        ['两'] => Some(2),
        [c] if *c == '十' => Some(10),
        [c] => digit(*c),
        ['十', u] => Some(10 + digit(*u)?),
        [t, '十'] => Some(digit(*t)? * 10),
        [t, '十', u] => Some(digit(*t)? * 10 + digit(*u)?),
        _ => None,
    }
}

static EN_RELATIVE_AGO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of)\s+(day|week|month|year)s?\s+ago\b")
        .expect("valid regex")
});
static EN_YEAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b").expect("valid regex")
});
static EN_MONTH_ALONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b(?i:in|during|last|this|early|late|mid|mid-)\s+({MONTH_RE})\b"
    ))
    .expect("valid regex")
});
static ZH_AGO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"([0-9]+|[一二两三四五六七八九十]+)\s*(?:个)?\s*(天|日|周|星期|礼拜|月|年)(?:以)?前",
    )
    .expect("valid regex")
});
static ZH_REL_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(去年|今年|前年|明年)?\s*([0-9]{1,2}|[一二三四五六七八九十]{1,3})\s*月(?:份)?")
        .expect("valid regex")
});
static ZH_YEAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"((?:19|20)\d\d)\s*年").expect("valid regex"));

fn en_count(s: &str) -> Option<i64> {
    Some(match s.to_ascii_lowercase().as_str() {
        "a" | "an" | "one" => 1,
        "two" | "a couple of" => 2,
        "three" | "a few" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        n => n.parse().ok()?,
    })
}

/// The largest count of units a relative expression may go back ("3 days ago");
/// anything larger names no time memd could hold, so it is ignored.
const MAX_AGO: i64 = 10_000;

/// `count` units back from `anchor`, widened to the whole unit around that point.
/// `None` for counts outside `0..=MAX_AGO` and dates outside the calendar.
fn ago(anchor: DateTime<Utc>, count: i64, unit: &str) -> Option<TimeRange> {
    if !(0..=MAX_AGO).contains(&count) {
        return None;
    }
    let today = anchor.date_naive();
    match unit {
        "day" => TimeRange::days(today.checked_sub_signed(Duration::days(count))?, 1),
        "week" => {
            let monday = today.checked_sub_signed(Duration::days(i64::from(
                today.weekday().num_days_from_monday(),
            )))?;
            TimeRange::days(monday.checked_sub_signed(Duration::weeks(count))?, 7)
        }
        "month" => {
            let total = i64::from(today.year()) * 12 + i64::from(today.month0()) - count;
            let year = i32::try_from(total.div_euclid(12)).ok()?;
            TimeRange::month(year, u32::try_from(total.rem_euclid(12)).ok()? + 1)
        }
        "year" => TimeRange::year(today.year().checked_sub(i32::try_from(count).ok()?)?),
        _ => None,
    }
}

/// The most recent `month` that starts at or before the anchor's month.
fn last_month_named(anchor: DateTime<Utc>, month: u32) -> Option<TimeRange> {
    let year = if month <= anchor.month() {
        anchor.year()
    } else {
        anchor.year() - 1
    };
    TimeRange::month(year, month)
}

/// The time range a query names, relative to `anchor` where it is relative
/// (see the module docs). The first expression found wins, most specific first.
pub fn query_range(query: &str, anchor: DateTime<Utc>) -> Option<TimeRange> {
    let lower = query.to_lowercase();
    let today = anchor.date_naive();
    // Absolute dates, most specific first.
    if let Some(c) = ZH_DATE.captures(query) {
        let (y, m) = (c[1].parse().ok()?, c[2].parse().ok()?);
        return match c.get(3) {
            Some(d) => TimeRange::days(NaiveDate::from_ymd_opt(y, m, d.as_str().parse().ok()?)?, 1),
            None => TimeRange::month(y, m),
        };
    }
    if let Some(c) = EN_DAY_MONTH_YEAR.captures(query) {
        let d = NaiveDate::from_ymd_opt(c[3].parse().ok()?, month_of(&c[2])?, c[1].parse().ok()?)?;
        return TimeRange::days(d, 1);
    }
    if let Some(c) = EN_MONTH_DAY_YEAR.captures(query) {
        let d = NaiveDate::from_ymd_opt(c[3].parse().ok()?, month_of(&c[1])?, c[2].parse().ok()?)?;
        return TimeRange::days(d, 1);
    }
    if let Some(c) = EN_MONTH_YEAR.captures(query) {
        return TimeRange::month(c[2].parse().ok()?, month_of(&c[1])?);
    }
    // Relative expressions.
    let fixed: &[(&str, &str, i64)] = &[
        ("day before yesterday", "day", 2),
        ("yesterday", "day", 1),
        ("today", "day", 0),
        ("tonight", "day", 0),
        ("this morning", "day", 0),
        ("last weekend", "week", 1),
        ("last week", "week", 1),
        ("this week", "week", 0),
        ("last month", "month", 1),
        ("this month", "month", 0),
        ("last year", "year", 1),
        ("this year", "year", 0),
        ("前天", "day", 2),
        ("昨天", "day", 1),
        ("昨晚", "day", 1),
        ("今天", "day", 0),
        ("今晚", "day", 0),
        ("上周", "week", 1),
        ("上个星期", "week", 1),
        ("上星期", "week", 1),
        ("上个礼拜", "week", 1),
        ("上礼拜", "week", 1),
        ("这周", "week", 0),
        ("本周", "week", 0),
        ("这个星期", "week", 0),
        ("上个月", "month", 1),
        ("上月", "month", 1),
        ("这个月", "month", 0),
        ("本月", "month", 0),
    ];
    if let Some(c) = ZH_REL_MONTH.captures(query) {
        let month = zh_number(&c[2]).filter(|m| (1..=12).contains(m))?;
        return match c.get(1).map(|y| y.as_str()) {
            Some("去年") => TimeRange::month(today.year() - 1, month),
            Some("前年") => TimeRange::month(today.year() - 2, month),
            Some("今年") => TimeRange::month(today.year(), month),
            Some(_) => TimeRange::month(today.year() + 1, month),
            None => last_month_named(anchor, month),
        };
    }
    if let Some(c) = ZH_AGO.captures(query) {
        let n = i64::from(zh_number(&c[1])?);
        let unit = match &c[2] {
            "天" | "日" => "day",
            "周" | "星期" | "礼拜" => "week",
            "月" => "month",
            _ => "year",
        };
        return ago(anchor, n, unit);
    }
    if let Some(c) = EN_RELATIVE_AGO.captures(query) {
        return ago(anchor, en_count(&c[1])?, &c[2].to_ascii_lowercase());
    }
    for (phrase, unit, n) in fixed {
        if lower.contains(phrase) {
            return ago(anchor, *n, unit);
        }
    }
    for (phrase, n) in [("前年", 2), ("去年", 1), ("今年", 0)] {
        if query.contains(phrase) {
            return TimeRange::year(today.year() - n);
        }
    }
    if let Some(c) = ZH_YEAR.captures(query) {
        return TimeRange::year(c[1].parse().ok()?);
    }
    if let Some(c) = EN_YEAR.captures(query) {
        return TimeRange::year(c[1].parse().ok()?);
    }
    if let Some(c) = EN_MONTH_ALONE.captures(query) {
        // "may" alone is a verb far more often than a month: only after a preposition.
        return last_month_named(anchor, month_of(&c[1])?);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn range(from: &str, to: &str) -> Option<TimeRange> {
        Some(TimeRange {
            from: t(from),
            to: t(to),
        })
    }

    #[test]
    fn event_times_parse_from_iso_english_and_chinese() {
        for (input, want) in [
            ("2023-05-08", "2023-05-08T00:00:00Z"),
            ("2023-05-08T13:56:00Z", "2023-05-08T13:56:00Z"),
            ("2023-05-08T15:56:00+02:00", "2023-05-08T13:56:00Z"),
            ("2023-05-08 13:56", "2023-05-08T13:56:00Z"),
            ("2023/05/08", "2023-05-08T00:00:00Z"),
            ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z"),
            ("10:37 am on 27 June, 2023", "2023-06-27T10:37:00Z"),
            ("12:09 am on 13 September, 2023", "2023-09-13T00:09:00Z"),
            ("May 8, 2023", "2023-05-08T00:00:00Z"),
            ("8th of May 2023", "2023-05-08T00:00:00Z"),
            ("June 2023", "2023-06-01T00:00:00Z"),
            ("2023年5月8日", "2023-05-08T00:00:00Z"),
            ("2023年5月8号 下午1:56", "2023-05-08T13:56:00Z"),
            ("2023年12月", "2023-12-01T00:00:00Z"),
            ("2027-01", "2027-01-01T00:00:00Z"),
            ("2027", "2027-01-01T00:00:00Z"),
        ] {
            assert_eq!(parse_time(input), Some(t(want)), "{input}");
        }
        for bad in [
            "",
            "yesterday",
            "last summer",
            "2023-13-01",
            "2023-13",
            "31 February, 2023",
            "soon",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn absolute_query_dates() {
        let now = t("2026-12-01T10:00:00Z");
        for (q, from, to) in [
            (
                "What painting did Melanie show on October 13, 2023?",
                "2023-10-13T00:00:00Z",
                "2023-10-14T00:00:00Z",
            ),
            (
                "What did Gina find on 1 February, 2023?",
                "2023-02-01T00:00:00Z",
                "2023-02-02T00:00:00Z",
            ),
            (
                "What class did Maria start in December 2023?",
                "2023-12-01T00:00:00Z",
                "2024-01-01T00:00:00Z",
            ),
            (
                "How many times has Melanie gone to the beach in 2023?",
                "2023-01-01T00:00:00Z",
                "2024-01-01T00:00:00Z",
            ),
            (
                "2023年5月我去了哪里",
                "2023-05-01T00:00:00Z",
                "2023-06-01T00:00:00Z",
            ),
            (
                "2023年5月8日发生了什么",
                "2023-05-08T00:00:00Z",
                "2023-05-09T00:00:00Z",
            ),
            (
                "2022年的旅行",
                "2022-01-01T00:00:00Z",
                "2023-01-01T00:00:00Z",
            ),
        ] {
            assert_eq!(query_range(q, now), range(from, to), "{q}");
        }
    }

    #[test]
    fn counts_beyond_the_calendar_name_no_time_and_never_panic() {
        let now = t("2023-05-10T15:00:00Z");
        for q in [
            "99999999999 days ago",
            "99999999999 weeks ago",
            "2147483648 years ago",
            "2147483648 months ago",
            "2147483648年前",
            "9223372036854775807 days ago",
            "10001 days ago",
        ] {
            assert_eq!(query_range(q, now), None, "{q}");
        }
        // The largest count still works.
        assert!(query_range("10000 days ago", now).is_some());
        // Near the end of chrono's calendar nothing overflows either.
        let far = DateTime::<Utc>::MAX_UTC;
        for q in [
            "yesterday",
            "last week",
            "next year",
            "last year",
            "3 months ago",
            "上周",
        ] {
            let _ = query_range(q, far);
        }
    }

    #[test]
    fn relative_query_expressions_count_back_from_the_anchor() {
        // A Wednesday.
        let now = t("2023-05-10T15:00:00Z");
        for (q, from, to) in [
            (
                "what did I eat yesterday",
                "2023-05-09T00:00:00Z",
                "2023-05-10T00:00:00Z",
            ),
            (
                "昨天吃了什么",
                "2023-05-09T00:00:00Z",
                "2023-05-10T00:00:00Z",
            ),
            ("前天", "2023-05-08T00:00:00Z", "2023-05-09T00:00:00Z"),
            (
                "the meeting last week",
                "2023-05-01T00:00:00Z",
                "2023-05-08T00:00:00Z",
            ),
            ("上周的会议", "2023-05-01T00:00:00Z", "2023-05-08T00:00:00Z"),
            ("3 days ago", "2023-05-07T00:00:00Z", "2023-05-08T00:00:00Z"),
            ("三天前", "2023-05-07T00:00:00Z", "2023-05-08T00:00:00Z"),
            (
                "two weeks ago",
                "2023-04-24T00:00:00Z",
                "2023-05-01T00:00:00Z",
            ),
            ("last month", "2023-04-01T00:00:00Z", "2023-05-01T00:00:00Z"),
            ("上个月", "2023-04-01T00:00:00Z", "2023-05-01T00:00:00Z"),
            (
                "5 months ago",
                "2022-12-01T00:00:00Z",
                "2023-01-01T00:00:00Z",
            ),
            ("last year", "2022-01-01T00:00:00Z", "2023-01-01T00:00:00Z"),
            ("去年", "2022-01-01T00:00:00Z", "2023-01-01T00:00:00Z"),
            ("去年五月", "2022-05-01T00:00:00Z", "2022-06-01T00:00:00Z"),
            ("今年3月", "2023-03-01T00:00:00Z", "2023-04-01T00:00:00Z"),
            (
                "十二月的时候",
                "2022-12-01T00:00:00Z",
                "2023-01-01T00:00:00Z",
            ),
            (
                "When did Melanie go camping in June?",
                "2022-06-01T00:00:00Z",
                "2022-07-01T00:00:00Z",
            ),
            ("in April", "2023-04-01T00:00:00Z", "2023-05-01T00:00:00Z"),
            ("一年前", "2022-01-01T00:00:00Z", "2023-01-01T00:00:00Z"),
        ] {
            assert_eq!(query_range(q, now), range(from, to), "{q}");
        }
        for none in [
            "What did Caroline research?",
            "May I ask what you like?",
            "我喜欢吃冰淇淋",
            "When did Caroline go to the support group?",
        ] {
            assert_eq!(query_range(none, now), None, "{none}");
        }
    }

    #[test]
    fn chinese_numbers() {
        for (s, n) in [
            ("三", 3),
            ("十", 10),
            ("十二", 12),
            ("二十", 20),
            ("两", 2),
            ("12", 12),
        ] {
            assert_eq!(zh_number(s), Some(n), "{s}");
        }
        assert_eq!(zh_number("百"), None);
    }
}
