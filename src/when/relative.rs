//! Relative dates inside a statement ("下周五", "明晚", "三天后", "next
//! Friday", "in two weeks"), resolved against the moment the message was
//! sent and written back as absolute dates, so that a memory kept tonight
//! still names the right day next month ([`resolve`]).
//!
//! The day a message was sent is its calendar day in its own time zone
//! offset: a message sent at 00:30 on a Friday in `+08:00` says "明天" about
//! Saturday, though it is still Thursday in UTC. Weeks run Monday to Sunday
//! (ISO 8601, as Chinese speakers count them), so 下周一 said on a Sunday is
//! the next day.
//!
//! - 今天 明天 后天 大后天 昨天 前天 大前天 (今晚 明早 昨晚 …), today,
//!   tomorrow, the day after tomorrow, yesterday, tonight, this morning,
//!   last night: that day (and part of the day).
//! - 下周五 / 下星期五 / 下礼拜五, next Friday: Friday of the following week;
//!   这周六 / 本周六: this week's Saturday; 上周五: last week's Friday; 下下周一:
//!   the week after next.
//! - A bare weekday (周六, on Saturday, Saturday): this week's, or next week's
//!   when that day has already passed and the sentence is not in the past tense.
//! - this Friday, this coming Friday: the next Friday from
//!   the day of sending on (that day included); last Friday: the latest Friday
//!   before it.
//! - 周末 / 这周末, this weekend: this week's Saturday and Sunday; 下周末, next
//!   weekend: the following week's; 上周末, last weekend: the previous week's.
//! - 下周 / 这周 / 上周, next week / this week / last week: that week (from its Monday).
//! - 三天后 / 两周后, in 3 days / in two weeks / 3 days from now: that day;
//!   三天前, 3 days ago: that day; 三个月后, in 3 months: that month; 两年后,
//!   in 2 years: that year.
//! - 下个月 / 这个月 / 上个月, next month …: that month; 月底 / 下个月底, the end
//!   of the month: its last day (月初 keeps the month).
//! - 明年 / 今年 / 去年 / 前年 / 后年, next year …: that year.
//!
//! Recurring phrases (每周五, 每个月底, every Friday, on Fridays), bare
//! weekdays, weekends and month ends in a sentence about what usually
//! happens (平时周末, 周末双休, "I work from home on Fridays"), a bare 月底 in a
//! sentence that looks ahead to nothing (月底特别忙), and ranges or lists of
//! bare weekdays (周一到周五, 周六或周日) name no single date and are left as
//! they are, as is a duration in the past ("finished it in two days").

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Days, FixedOffset, Months, NaiveDate, Weekday};
use regex::{Captures, Regex};

use super::{en_count, zh_number};

/// A part of a day a phrase names beside the day (今晚, tomorrow morning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DayPart {
    /// 早上, morning.
    Morning,
    /// 下午, afternoon.
    Afternoon,
    /// 晚上, evening or night.
    Evening,
}

/// What a relative phrase names, as absolute dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// One day, perhaps a part of it.
    Day(NaiveDate, Option<DayPart>),
    /// The weekend beginning on this Saturday.
    Weekend(NaiveDate),
    /// The week beginning on this Monday.
    Week(NaiveDate),
    /// A calendar month (year, month 1-12).
    Month(i32, u32),
    /// The end of a calendar month: its last day.
    MonthEnd(i32, u32),
    /// A calendar year.
    Year(i32),
}

impl Named {
    /// As a memory's `time`: ISO 8601 at the precision named (`2026-12-11`,
    /// `2027-01`, `2027`); a weekend or week is its first day.
    pub fn iso(&self) -> String {
        match *self {
            Named::Day(d, _) | Named::Weekend(d) | Named::Week(d) => {
                d.format("%Y-%m-%d").to_string()
            }
            Named::Month(y, m) => format!("{y:04}-{m:02}"),
            Named::MonthEnd(y, m) => last_day(y, m).map_or_else(
                || format!("{y:04}-{m:02}"),
                |d| d.format("%Y-%m-%d").to_string(),
            ),
            Named::Year(y) => format!("{y:04}"),
        }
    }

    /// The first day named.
    pub fn first_day(&self) -> Option<NaiveDate> {
        match *self {
            Named::Day(d, _) | Named::Weekend(d) | Named::Week(d) => Some(d),
            Named::Month(y, m) => NaiveDate::from_ymd_opt(y, m, 1),
            Named::MonthEnd(y, m) => last_day(y, m),
            Named::Year(y) => NaiveDate::from_ymd_opt(y, 1, 1),
        }
    }

    /// The last day named.
    pub fn last_day(&self) -> Option<NaiveDate> {
        match *self {
            Named::Day(d, _) => Some(d),
            Named::Weekend(sat) => sat.checked_add_days(Days::new(1)),
            Named::Week(mon) => mon.checked_add_days(Days::new(6)),
            Named::Month(y, m) | Named::MonthEnd(y, m) => last_day(y, m),
            Named::Year(y) => NaiveDate::from_ymd_opt(y, 12, 31),
        }
    }

    /// Written into Chinese text ("2026-12-11（周五）", "2027年1月").
    fn zh(&self) -> String {
        let day = |d: NaiveDate| format!("{}（{}）", d.format("%Y-%m-%d"), zh_weekday(d.weekday()));
        match *self {
            Named::Day(d, part) => {
                let part = match part {
                    Some(DayPart::Morning) => "早上",
                    Some(DayPart::Afternoon) => "下午",
                    Some(DayPart::Evening) => "晚上",
                    None => "",
                };
                format!("{}{part}", day(d))
            }
            Named::Weekend(sat) => {
                let sun = sat + Days::new(1);
                let short = if sun.year() == sat.year() {
                    sun.format("%m-%d").to_string()
                } else {
                    sun.format("%Y-%m-%d").to_string()
                };
                format!("{}（周六）至{short}（周日）", sat.format("%Y-%m-%d"))
            }
            Named::Week(mon) => format!("{}（周一）起的那周", mon.format("%Y-%m-%d")),
            // The month's 底/初 stays in the text after it.
            Named::Month(y, m) | Named::MonthEnd(y, m) => format!("{y}年{m}月"),
            Named::Year(y) => format!("{y}年"),
        }
    }

    /// Written into English text, without a preposition ("2026-12-11
    /// (Friday)", "the evening of …", "January 2027").
    fn en(&self) -> String {
        let day = |d: NaiveDate| format!("{} ({})", d.format("%Y-%m-%d"), d.format("%A"));
        match *self {
            Named::Day(d, None) => day(d),
            Named::Day(d, Some(part)) => {
                let part = match part {
                    DayPart::Morning => "morning",
                    DayPart::Afternoon => "afternoon",
                    DayPart::Evening => "evening",
                };
                format!("the {part} of {}", day(d))
            }
            Named::Weekend(sat) => format!(
                "the weekend of {} and {}",
                sat.format("%Y-%m-%d"),
                (sat + Days::new(1)).format("%Y-%m-%d")
            ),
            Named::Week(mon) => format!("the week of {}", mon.format("%Y-%m-%d")),
            Named::Month(y, m) => format!("{} {y}", month_name(m)),
            Named::MonthEnd(y, m) => format!("the end of {} {y}", month_name(m)),
            Named::Year(y) => y.to_string(),
        }
    }

    /// The preposition an English phrase takes before this date.
    fn preposition(&self) -> &'static str {
        match self {
            Named::Day(..) | Named::Weekend(_) | Named::MonthEnd(..) => "on",
            Named::Week(_) | Named::Month(..) | Named::Year(_) => "in",
        }
    }
}

fn month_name(m: u32) -> String {
    NaiveDate::from_ymd_opt(2000, m, 1).map_or_else(String::new, |d| d.format("%B").to_string())
}

fn zh_weekday(w: Weekday) -> &'static str {
    ["周一", "周二", "周三", "周四", "周五", "周六", "周日"][w.num_days_from_monday() as usize]
}

fn last_day(y: i32, m: u32) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(y, m, 1)?
        .checked_add_months(Months::new(1))?
        .pred_opt()
}

/// A statement with its relative dates made absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The text with every resolved phrase replaced by its absolute date.
    pub text: String,
    /// What each resolved phrase named, in text order.
    pub named: Vec<Named>,
}

impl Resolved {
    /// The first date named, as a memory's `time` (see [`Named::iso`]).
    pub fn time(&self) -> Option<String> {
        self.named.first().map(Named::iso)
    }
}

/// Where a match sits and what it may look at.
struct Ctx<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    /// The day the message was sent, in its own offset.
    today: NaiveDate,
    /// The sentence reads as past tense.
    past: bool,
    /// The sentence says what usually happens (每, 平时, 双休, every, usually).
    habitual: bool,
    /// The sentence says what is going to happen (要, 前, 打算, will, going to).
    ahead: bool,
}

impl Ctx<'_> {
    fn before(&self) -> &str {
        &self.text[..self.start]
    }

    fn after(&self) -> &str {
        &self.text[self.end..]
    }

    /// The match says something that happens every week or month (每周五,
    /// 每个月底, 平时周末, every Friday), or the sentence does.
    fn recurring(&self) -> bool {
        let b = self.before().trim_end();
        let lower = b.to_ascii_lowercase();
        self.habitual
            || b.ends_with('每')
            || b.ends_with("每个")
            || b.ends_with("每逢")
            || lower.ends_with("every")
    }

    /// A bare weekday in a range or list (周一到周五, 周六、周日, 周六或周日).
    fn in_range(&self) -> bool {
        const JOINS: [&str; 8] = ["到", "至", "、", "~", "～", "-", "—", "或"];
        let after = self.after().trim_start();
        let before = self.before().trim_end();
        JOINS
            .iter()
            .any(|j| after.starts_with(j) || before.ends_with(j))
    }
}

type Resolve = fn(&Captures<'_>, &Ctx<'_>) -> Option<Named>;

/// One kind of phrase.
struct Rule {
    re: Regex,
    /// The capture group replaced by the date (0: the whole match).
    group: usize,
    /// English: the replacement takes a preposition.
    english: bool,
    /// The match already holds its preposition ("in 3 days", "on Friday").
    owns_preposition: bool,
    resolve: Resolve,
}

fn rule(pattern: &str, group: usize, english: bool, owns: bool, resolve: Resolve) -> Rule {
    Rule {
        re: Regex::new(pattern).expect("relative date patterns compile"),
        group,
        english,
        owns_preposition: owns,
        resolve,
    }
}

const ZH_WEEK_PREFIX: &str = r"(下下个?|下个?|上上个?|上个?|这个?|本)";
const EN_WEEKDAYS: &str = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)";
const EN_COUNT: &str =
    r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|a\s+couple\s+of)";

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        rule(
            &format!(r"{ZH_WEEK_PREFIX}?(?:周|星期|礼拜)([一二三四五六日天])"),
            0,
            false,
            false,
            zh_weekday_rule,
        ),
        rule(
            &format!(r"{ZH_WEEK_PREFIX}?周末"),
            0,
            false,
            false,
            zh_weekend,
        ),
        rule(
            &format!(r"{ZH_WEEK_PREFIX}(?:周|星期|礼拜)"),
            0,
            false,
            false,
            zh_week,
        ),
        rule(
            r"大后天|后天|大前天|前天|明天|明儿|明早|明晚|今天|今儿|今早|今晚|今夜|昨天|昨儿|昨晚",
            0,
            false,
            false,
            zh_day,
        ),
        rule(
            r"([0-9]{1,3}|[一二两三四五六七八九十]{1,3})\s*(个月|个?(?:天|周|星期|礼拜|年))\s*(?:以|之)?(后|前)",
            0,
            false,
            false,
            zh_offset,
        ),
        rule(
            r"((?:下下个?|下个?|上个?|这个?|本)月)(底|末|初)?",
            1,
            false,
            false,
            zh_month,
        ),
        rule(r"(月)(底|末|初)", 1, false, false, zh_bare_month),
        rule(r"(明年|今年|去年|前年|后年)", 1, false, false, zh_year),
        rule(
            r"(?i)\b(?:the\s+)?day\s+(after\s+tomorrow|before\s+yesterday)\b",
            0,
            true,
            false,
            en_day_after,
        ),
        rule(
            r"(?i)\b(tomorrow|yesterday|today|tonight|last\s+night|this\s+(?:morning|afternoon|evening))(?:\s+(morning|afternoon|evening|night))?\b",
            0,
            true,
            false,
            en_day,
        ),
        rule(
            &format!(r"(?i)\b(next|this\s+coming|this|last)\s+{EN_WEEKDAYS}\b"),
            0,
            true,
            false,
            en_weekday,
        ),
        rule(
            &format!(r"(?i)\bon\s+{EN_WEEKDAYS}\b"),
            0,
            true,
            true,
            en_bare_weekday,
        ),
        rule(
            &format!(r"(?i)\b{EN_WEEKDAYS}\b"),
            0,
            true,
            false,
            en_weekday_alone,
        ),
        rule(
            r"(?i)\b(?:(next|this|last)\s+weekend|(?:on|at|over)\s+the\s+weekend)\b",
            0,
            true,
            false,
            en_weekend,
        ),
        rule(
            r"(?i)\b(?:the\s+)?end\s+of\s+(the|this|next|last)\s+month\b",
            0,
            true,
            false,
            en_month_end,
        ),
        rule(
            r"(?i)\b(next|this|last)\s+(week|month|year)\b",
            0,
            true,
            false,
            en_period,
        ),
        rule(
            &format!(r"(?i)\bin\s+{EN_COUNT}\s+(day|week|month|year)s?\b"),
            0,
            true,
            true,
            en_in,
        ),
        rule(
            &format!(r"(?i)\b{EN_COUNT}\s+(day|week|month|year)s?\s+(from\s+now|later|ago)\b"),
            0,
            true,
            true,
            en_from_now,
        ),
    ]
});

static ZH_PAST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"了|过|刚才|刚刚|已经").expect("pattern compiles"));
static EN_PAST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(was|were|went|did|had|got|came|saw|met|ate|bought|visited|finished|took|made|told|said|spent|left|flew|moved|started|ended|happened)\b")
        .expect("pattern compiles")
});
static HABITUAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)每|平时|通常|一般|总是|经常|往往|工作日|双休|单休|习惯|(?:^|[，,。；;\s])以后|往后|\b(?:every|usually|always|often|normally|weekends|weekdays)\b")
        .expect("pattern compiles")
});
static AHEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)要|会|前|打算|计划|准备|得|到期|截止|再|见|去|回|交|\b(?:will|going to|gonna|due|before|by|until|plan)\b|'ll\b")
        .expect("pattern compiles")
});
static EN_PREPOSITION_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(on|in|at|by|until|till|before|after|since|from|for|through|during|of|to|than)\s*$",
    )
    .expect("pattern compiles")
});
static EN_SUBJECT_AFTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\s*(is|was|will be|'s)\b").expect("pattern compiles"));

// ---- Chinese ----

fn weekday_of(c: &str) -> Option<Weekday> {
    Some(match c {
        "一" | "monday" => Weekday::Mon,
        "二" | "tuesday" => Weekday::Tue,
        "三" | "wednesday" => Weekday::Wed,
        "四" | "thursday" => Weekday::Thu,
        "五" | "friday" => Weekday::Fri,
        "六" | "saturday" => Weekday::Sat,
        "日" | "天" | "sunday" => Weekday::Sun,
        _ => return None,
    })
}

/// Weeks from this one a Chinese prefix names (下 +1, 下下 +2, 上 -1, 这/本 0).
fn zh_weeks(prefix: &str) -> i64 {
    let p = prefix.trim_end_matches('个');
    match p {
        "下下" => 2,
        "下" => 1,
        "上上" => -2,
        "上" => -1,
        _ => 0,
    }
}

/// The Monday of `today`'s week.
fn monday(today: NaiveDate) -> NaiveDate {
    today - Days::new(u64::from(today.weekday().num_days_from_monday()))
}

fn shift_days(d: NaiveDate, days: i64) -> Option<NaiveDate> {
    d.checked_add_signed(chrono::Duration::try_days(days)?)
}

/// `wd` in the week `weeks` from `today`'s.
fn in_week(today: NaiveDate, weeks: i64, wd: Weekday) -> Option<NaiveDate> {
    shift_days(
        monday(today),
        weeks * 7 + i64::from(wd.num_days_from_monday()),
    )
}

/// A bare weekday: this week's, or next week's once passed (unless told in the past tense).
fn bare_weekday(cx: &Ctx<'_>, wd: Weekday) -> Option<NaiveDate> {
    let d = in_week(cx.today, 0, wd)?;
    if d < cx.today && !cx.past {
        shift_days(d, 7)
    } else {
        Some(d)
    }
}

fn zh_weekday_rule(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let wd = weekday_of(&c[2])?;
    let d = match c.get(1) {
        Some(p) => in_week(cx.today, zh_weeks(p.as_str()), wd)?,
        None => {
            if cx.recurring() || cx.in_range() {
                return None;
            }
            bare_weekday(cx, wd)?
        }
    };
    Some(Named::Day(d, None))
}

fn zh_weekend(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    if c.get(1).is_none() && cx.recurring() {
        return None;
    }
    let weeks = c.get(1).map_or(0, |p| zh_weeks(p.as_str()));
    Some(Named::Weekend(in_week(cx.today, weeks, Weekday::Sat)?))
}

fn zh_week(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    // 这周围 (around here), 本周年 (anniversary), 上周岁 … are no weeks.
    if cx.after().starts_with([
        '一', '二', '三', '四', '五', '六', '日', '天', '末', '围', '边', '年', '岁', '期', '刊',
    ]) {
        return None;
    }
    Some(Named::Week(in_week(
        cx.today,
        zh_weeks(&c[1]),
        Weekday::Mon,
    )?))
}

fn zh_day(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let (days, part) = match &c[0] {
        "大后天" => (3, None),
        "后天" => (2, None),
        "明天" | "明儿" => (1, None),
        "明早" => (1, Some(DayPart::Morning)),
        "明晚" => (1, Some(DayPart::Evening)),
        "今天" | "今儿" => (0, None),
        "今早" => (0, Some(DayPart::Morning)),
        "今晚" | "今夜" => (0, Some(DayPart::Evening)),
        "昨天" | "昨儿" => (-1, None),
        "昨晚" => (-1, Some(DayPart::Evening)),
        "前天" => (-2, None),
        "大前天" => (-3, None),
        _ => return None,
    };
    Some(Named::Day(shift_days(cx.today, days)?, part))
}

fn add_months(today: NaiveDate, months: i64) -> Option<(i32, u32)> {
    let total = i64::from(today.year()) * 12 + i64::from(today.month0()) + months;
    Some((
        i32::try_from(total.div_euclid(12)).ok()?,
        u32::try_from(total.rem_euclid(12)).ok()? + 1,
    ))
}

/// `n` units after (or before) `today`: a day for days and weeks, a month, a year.
fn offset(today: NaiveDate, n: i64, unit: &str) -> Option<Named> {
    if !(0..=1000).contains(&n.abs()) {
        return None;
    }
    Some(match unit {
        "day" => Named::Day(shift_days(today, n)?, None),
        "week" => Named::Day(shift_days(today, n * 7)?, None),
        "month" => {
            let (y, m) = add_months(today, n)?;
            Named::Month(y, m)
        }
        "year" => Named::Year(today.year().checked_add(i32::try_from(n).ok()?)?),
        _ => return None,
    })
}

fn zh_offset(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let n = i64::from(zh_number(&c[1])?);
    let unit = match c[2].trim_start_matches('个') {
        "天" => "day",
        "周" | "星期" | "礼拜" => "week",
        "月" => "month",
        _ => "year",
    };
    let sign = if &c[3] == "前" { -1 } else { 1 };
    offset(cx.today, sign * n, unit)
}

fn zh_month(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    if c.get(2).is_none() && cx.after().starts_with(['饼', '亮', '光', '球', '季', '嫂']) {
        return None;
    }
    let p = c[1].trim_end_matches('月');
    let months = match p.trim_end_matches('个') {
        "下下" => 2,
        "下" => 1,
        "上" => -1,
        _ => 0,
    };
    let (y, m) = add_months(cx.today, months)?;
    Some(match c.get(2).map(|s| s.as_str()) {
        Some("底" | "末") => Named::MonthEnd(y, m),
        _ => Named::Month(y, m),
    })
}

/// 月底 / 月初 alone: this month's; "12月底", "每月底" are not relative.
fn zh_bare_month(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let before = cx.before();
    let numeral = before.chars().next_back().is_some_and(|ch| {
        ch.is_ascii_digit() || "零一二两三四五六七八九十个年每本这上下".contains(ch)
    });
    // "月底特别忙" is every month's end; "月底前交房租" this one's.
    if numeral || cx.recurring() || !cx.ahead {
        return None;
    }
    let (y, m) = (cx.today.year(), cx.today.month());
    Some(match &c[2] {
        "初" => Named::Month(y, m),
        _ => Named::MonthEnd(y, m),
    })
}

fn zh_year(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let years = match &c[1] {
        "后年" => 2,
        "明年" => 1,
        "今年" => 0,
        "去年" => -1,
        _ => -2,
    };
    // 去年底 stays "2025年底": the year is what is named.
    Some(Named::Year(cx.today.year().checked_add(years)?))
}

// ---- English ----

fn en_part(word: Option<&str>) -> Option<DayPart> {
    match word?.to_ascii_lowercase().as_str() {
        "morning" => Some(DayPart::Morning),
        "afternoon" => Some(DayPart::Afternoon),
        _ => Some(DayPart::Evening),
    }
}

fn en_day_after(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let days = if c[1].to_ascii_lowercase().starts_with("after") {
        2
    } else {
        -2
    };
    Some(Named::Day(shift_days(cx.today, days)?, None))
}

fn en_day(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let head = c[1].to_ascii_lowercase();
    let head: Vec<&str> = head.split_whitespace().collect();
    let (days, part) = match head.as_slice() {
        ["tomorrow"] => (1, en_part(c.get(2).map(|m| m.as_str()))),
        ["yesterday"] => (-1, en_part(c.get(2).map(|m| m.as_str()))),
        ["today"] => (0, en_part(c.get(2).map(|m| m.as_str()))),
        ["tonight"] => (0, Some(DayPart::Evening)),
        ["last", "night"] => (-1, Some(DayPart::Evening)),
        ["this", part] => (0, en_part(Some(part))),
        _ => return None,
    };
    Some(Named::Day(shift_days(cx.today, days)?, part))
}

fn en_weekday(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let wd = weekday_of(&c[2].to_ascii_lowercase())?;
    let ahead =
        i64::from((wd.num_days_from_monday() + 7 - cx.today.weekday().num_days_from_monday()) % 7);
    let modifier = c[1].to_ascii_lowercase();
    let d = match modifier.split_whitespace().next() {
        Some("next") => in_week(cx.today, 1, wd)?,
        Some("last") => shift_days(cx.today, if ahead == 0 { -7 } else { ahead - 7 })?,
        // this, this coming, coming: the next one from today on.
        _ => shift_days(cx.today, ahead)?,
    };
    Some(Named::Day(d, None))
}

fn en_bare_weekday(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    if cx.recurring() {
        return None;
    }
    let wd = weekday_of(&c[1].to_ascii_lowercase())?;
    Some(Named::Day(bare_weekday(cx, wd)?, None))
}

/// A weekday with nothing before it ("the plumber is coming Monday"), as
/// "on Monday"; not Black Friday or Good Friday.
fn en_weekday_alone(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let before = cx.before().trim_end().to_ascii_lowercase();
    if before.ends_with("black") || before.ends_with("good") || before.ends_with("cyber") {
        return None;
    }
    en_bare_weekday(c, cx)
}

fn en_weeks(modifier: Option<&str>) -> i64 {
    match modifier.map(str::to_ascii_lowercase).as_deref() {
        Some("next") => 1,
        Some("last") => -1,
        _ => 0,
    }
}

fn en_weekend(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    if c.get(1).is_none() && cx.recurring() {
        return None;
    }
    let weeks = en_weeks(c.get(1).map(|m| m.as_str()));
    Some(Named::Weekend(in_week(cx.today, weeks, Weekday::Sat)?))
}

fn en_month_end(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let (y, m) = add_months(cx.today, en_weeks(Some(&c[1])))?;
    Some(Named::MonthEnd(y, m))
}

fn en_period(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let n = en_weeks(Some(&c[1]));
    Some(match c[2].to_ascii_lowercase().as_str() {
        "week" => Named::Week(in_week(cx.today, n, Weekday::Mon)?),
        "month" => {
            let (y, m) = add_months(cx.today, n)?;
            Named::Month(y, m)
        }
        _ => Named::Year(cx.today.year().checked_add(i32::try_from(n).ok()?)?),
    })
}

fn en_in(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    // "Finished it in two days" is a duration, not a date.
    if cx.past {
        return None;
    }
    let n = en_count(&c[1].split_whitespace().collect::<Vec<_>>().join(" "))?;
    offset(cx.today, n, &c[2].to_ascii_lowercase())
}

fn en_from_now(c: &Captures<'_>, cx: &Ctx<'_>) -> Option<Named> {
    let n = en_count(&c[1].split_whitespace().collect::<Vec<_>>().join(" "))?;
    let sign = if c[3].eq_ignore_ascii_case("ago") {
        -1
    } else {
        1
    };
    offset(cx.today, sign * n, &c[2].to_ascii_lowercase())
}

// ---- Resolution ----

/// A phrase found and resolved.
struct Found {
    start: usize,
    end: usize,
    named: Named,
    english: bool,
    owns_preposition: bool,
}

/// Every resolvable phrase of `text`, the longest where two overlap, in text order.
fn find(text: &str, today: NaiveDate) -> Vec<Found> {
    let past = ZH_PAST.is_match(text) || EN_PAST.is_match(text);
    let habitual = HABITUAL.is_match(text);
    let ahead = AHEAD.is_match(text);
    let mut all: Vec<Found> = Vec::new();
    for r in RULES.iter() {
        for c in r.re.captures_iter(text) {
            let Some(m) = c.get(r.group) else { continue };
            let cx = Ctx {
                text,
                start: m.start(),
                end: m.end(),
                today,
                past,
                habitual,
                ahead,
            };
            if let Some(named) = (r.resolve)(&c, &cx) {
                all.push(Found {
                    start: m.start(),
                    end: m.end(),
                    named,
                    english: r.english,
                    owns_preposition: r.owns_preposition,
                });
            }
        }
    }
    all.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then((b.end - b.start).cmp(&(a.end - a.start)))
    });
    let mut kept: Vec<Found> = Vec::new();
    for f in all {
        if kept.last().is_none_or(|k| f.start >= k.end) {
            kept.push(f);
        }
    }
    kept
}

/// The English words that replace a phrase: the date with the preposition it
/// needs, unless the text already has one before it or the date is the
/// subject ("Tomorrow is …"). "The end of …" keeps the text's own ("by").
fn english(f: &Found, before: &str, after: &str) -> String {
    let date = f.named.en();
    let bare = matches!(f.named, Named::MonthEnd(..))
        || (!f.owns_preposition
            && (EN_PREPOSITION_BEFORE.is_match(before) || EN_SUBJECT_AFTER.is_match(after)));
    let mut out = if bare {
        date
    } else {
        format!("{} {date}", f.named.preposition())
    };
    // The sentence starts here: so does a capital.
    let head = before.trim_end();
    if (head.is_empty() || head.ends_with(['.', '!', '?']))
        && let Some(first) = out.get(..1)
    {
        out = first.to_uppercase() + &out[1..];
    }
    out
}

/// Resolves the relative dates of `text`, said at `sent` (in its own
/// offset), into absolute dates (see the module docs). A text without any
/// comes back unchanged with nothing named.
pub fn resolve(text: &str, sent: DateTime<FixedOffset>) -> Resolved {
    let today = sent.date_naive();
    let found = find(text, today);
    let mut out = String::with_capacity(text.len() + found.len() * 16);
    let mut at = 0;
    for f in &found {
        out.push_str(&text[at..f.start]);
        if f.english {
            out.push_str(&english(f, &text[..f.start], &text[f.end..]));
        } else if let Named::Week(monday) = f.named
            && text[f.end..].starts_with(['起', '开'])
        {
            // 从下周起: from that Monday.
            out.push_str(&Named::Day(monday, None).zh());
        } else {
            out.push_str(&f.named.zh());
        }
        at = f.end;
    }
    out.push_str(&text[at..]);
    Resolved {
        text: out,
        named: found.into_iter().map(|f| f.named).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(s).unwrap()
    }

    /// (sent at, text, the text resolved, the `time`).
    fn check(cases: &[(&str, &str, &str, Option<&str>)]) {
        for (sent, text, want, time) in cases {
            let r = resolve(text, at(sent));
            assert_eq!(
                (r.text.as_str(), r.time().as_deref()),
                (*want, *time),
                "{text:?} sent {sent}"
            );
        }
    }

    // 2026-12-03 is a Thursday; 2026-12-06 a Sunday.
    const THU: &str = "2026-12-03T10:00:00+08:00";
    const SUN: &str = "2026-12-06T21:00:00+08:00";

    #[test]
    fn the_issue_case_names_that_friday() {
        check(&[(
            THU,
            "下周五是我妈妈的生日",
            "2026-12-11（周五）是我妈妈的生日",
            Some("2026-12-11"),
        )]);
    }

    #[test]
    fn chinese_days_and_weeks() {
        check(&[
            (
                THU,
                "明天去北京",
                "2026-12-04（周五）去北京",
                Some("2026-12-04"),
            ),
            (
                THU,
                "后天回来",
                "2026-12-05（周六）回来",
                Some("2026-12-05"),
            ),
            (THU, "大后天", "2026-12-06（周日）", Some("2026-12-06")),
            (
                THU,
                "昨天体检了",
                "2026-12-02（周三）体检了",
                Some("2026-12-02"),
            ),
            (THU, "前天", "2026-12-01（周二）", Some("2026-12-01")),
            (
                THU,
                "今晚加班",
                "2026-12-03（周四）晚上加班",
                Some("2026-12-03"),
            ),
            (
                THU,
                "明早八点的高铁",
                "2026-12-04（周五）早上八点的高铁",
                Some("2026-12-04"),
            ),
            (
                THU,
                "这周六去爬山",
                "2026-12-05（周六）去爬山",
                Some("2026-12-05"),
            ),
            (
                THU,
                "本周二开过会了",
                "2026-12-01（周二）开过会了",
                Some("2026-12-01"),
            ),
            (THU, "上周五", "2026-11-27（周五）", Some("2026-11-27")),
            (THU, "下星期三", "2026-12-09（周三）", Some("2026-12-09")),
            (THU, "下个礼拜天", "2026-12-13（周日）", Some("2026-12-13")),
            (THU, "下下周一", "2026-12-14（周一）", Some("2026-12-14")),
            // A bare weekday: this week's, or next week's once it has passed.
            (
                THU,
                "周六不去聚餐了，要加班",
                "2026-12-05（周六）不去聚餐了，要加班",
                Some("2026-12-05"),
            ),
            (
                THU,
                "周二要复查",
                "2026-12-08（周二）要复查",
                Some("2026-12-08"),
            ),
            (
                THU,
                "周二去复查了",
                "2026-12-01（周二）去复查了",
                Some("2026-12-01"),
            ),
            (
                THU,
                "周末去露营",
                "2026-12-05（周六）至12-06（周日）去露营",
                Some("2026-12-05"),
            ),
            (
                THU,
                "下周末",
                "2026-12-12（周六）至12-13（周日）",
                Some("2026-12-12"),
            ),
            (
                THU,
                "下周要出差",
                "2026-12-07（周一）起的那周要出差",
                Some("2026-12-07"),
            ),
            (
                THU,
                "从下周起每天跑步",
                "从2026-12-07（周一）起每天跑步",
                Some("2026-12-07"),
            ),
            (THU, "三天后", "2026-12-06（周日）", Some("2026-12-06")),
            (
                THU,
                "两周后考试",
                "2026-12-17（周四）考试",
                Some("2026-12-17"),
            ),
            (THU, "10天以后", "2026-12-13（周日）", Some("2026-12-13")),
            (THU, "三天前", "2026-11-30（周一）", Some("2026-11-30")),
            (THU, "三个月后搬家", "2027年3月搬家", Some("2027-03")),
            (THU, "两年后", "2028年", Some("2028")),
        ]);
    }

    #[test]
    fn week_boundaries() {
        check(&[
            // A Sunday belongs to the week that began on Monday: 下周一 is the next day.
            (
                SUN,
                "下周一开会",
                "2026-12-07（周一）开会",
                Some("2026-12-07"),
            ),
            (SUN, "这周日", "2026-12-06（周日）", Some("2026-12-06")),
            (
                SUN,
                "周末",
                "2026-12-05（周六）至12-06（周日）",
                Some("2026-12-05"),
            ),
            (SUN, "明天", "2026-12-07（周一）", Some("2026-12-07")),
            (
                SUN,
                "周一要交报告",
                "2026-12-07（周一）要交报告",
                Some("2026-12-07"),
            ),
            (
                SUN,
                "next Monday",
                "On 2026-12-07 (Monday)",
                Some("2026-12-07"),
            ),
            // Monday 2026-11-30: 上周日 is the day before.
            (
                "2026-11-30T09:00:00+08:00",
                "上周日",
                "2026-11-29（周日）",
                Some("2026-11-29"),
            ),
        ]);
    }

    #[test]
    fn month_and_year_ends() {
        check(&[
            (
                THU,
                "月底前交房租",
                "2026年12月底前交房租",
                Some("2026-12-31"),
            ),
            (THU, "下个月", "2027年1月", Some("2027-01")),
            (THU, "下个月底", "2027年1月底", Some("2027-01-31")),
            (THU, "这个月初", "2026年12月初", Some("2026-12")),
            (THU, "明年", "2027年", Some("2027")),
            (THU, "去年底", "2025年底", Some("2025")),
            // From the last day of a year, tomorrow is in the next one.
            (
                "2026-12-31T20:00:00+08:00",
                "明天",
                "2027-01-01（周五）",
                Some("2027-01-01"),
            ),
            (
                "2026-12-31T20:00:00+08:00",
                "下周三",
                "2027-01-06（周三）",
                Some("2027-01-06"),
            ),
            (
                "2026-12-31T20:00:00+08:00",
                "下个月",
                "2027年1月",
                Some("2027-01"),
            ),
            // February of a leap year.
            (
                "2028-01-31T09:00:00+08:00",
                "下个月底",
                "2028年2月底",
                Some("2028-02-29"),
            ),
            (
                "2026-12-26T09:00:00+08:00",
                "周末",
                "2026-12-26（周六）至12-27（周日）",
                Some("2026-12-26"),
            ),
            (
                "2022-12-30T09:00:00+08:00",
                "这周末",
                "2022-12-31（周六）至2023-01-01（周日）",
                Some("2022-12-31"),
            ),
        ]);
    }

    #[test]
    fn the_day_is_the_senders() {
        // 00:30 on Friday in +08:00 is still Thursday in UTC.
        check(&[
            (
                "2026-12-04T00:30:00+08:00",
                "明天",
                "2026-12-05（周六）",
                Some("2026-12-05"),
            ),
            (
                "2026-12-03T16:30:00+00:00",
                "明天",
                "2026-12-04（周五）",
                Some("2026-12-04"),
            ),
        ]);
    }

    #[test]
    fn english_phrases() {
        check(&[
            (
                THU,
                "I'm flying to Paris next Friday",
                "I'm flying to Paris on 2026-12-11 (Friday)",
                Some("2026-12-11"),
            ),
            (
                THU,
                "I'm working late tonight",
                "I'm working late on the evening of 2026-12-03 (Thursday)",
                Some("2026-12-03"),
            ),
            (
                THU,
                "Tomorrow I fly home",
                "On 2026-12-04 (Friday) I fly home",
                Some("2026-12-04"),
            ),
            (
                THU,
                "Tomorrow is mum's birthday",
                "2026-12-04 (Friday) is mum's birthday",
                Some("2026-12-04"),
            ),
            (
                THU,
                "the report is due by tomorrow",
                "the report is due by 2026-12-04 (Friday)",
                Some("2026-12-04"),
            ),
            (
                THU,
                "we go camping this weekend",
                "we go camping on the weekend of 2026-12-05 and 2026-12-06",
                Some("2026-12-05"),
            ),
            (
                THU,
                "the dentist in two weeks",
                "the dentist on 2026-12-17 (Thursday)",
                Some("2026-12-17"),
            ),
            (
                THU,
                "3 days from now",
                "On 2026-12-06 (Sunday)",
                Some("2026-12-06"),
            ),
            (
                THU,
                "moving next month",
                "moving in January 2027",
                Some("2027-01"),
            ),
            (
                THU,
                "pay it by the end of the month",
                "pay it by the end of December 2026",
                Some("2026-12-31"),
            ),
            (
                THU,
                "this Friday we meet",
                "On 2026-12-04 (Friday) we meet",
                Some("2026-12-04"),
            ),
            (
                THU,
                "dinner on Saturday",
                "dinner on 2026-12-05 (Saturday)",
                Some("2026-12-05"),
            ),
            (
                THU,
                "until the day after tomorrow",
                "until 2026-12-05 (Saturday)",
                Some("2026-12-05"),
            ),
            (
                THU,
                "she called last Friday",
                "she called on 2026-11-27 (Friday)",
                Some("2026-11-27"),
            ),
            (
                THU,
                "the plumber is coming Monday morning",
                "the plumber is coming on 2026-12-07 (Monday) morning",
                Some("2026-12-07"),
            ),
            (
                THU,
                "Monday is a holiday",
                "2026-12-07 (Monday) is a holiday",
                Some("2026-12-07"),
            ),
        ]);
    }

    #[test]
    fn recurring_phrases_ranges_and_durations_stay() {
        for (text, sent) in [
            ("每周五去游泳", THU),
            ("每个周末都回家", THU),
            ("每个月底对账", THU),
            ("周一到周五上班", THU),
            ("周六或周日都行", THU),
            ("12月底出发", THU),
            ("这周围很安静", THU),
            ("这个月饼真好吃", THU),
            ("swimming on Fridays", THU),
            ("every Friday we swim", THU),
            ("I finished it in two days", THU),
            ("我喜欢吃辣", THU),
            ("我的工作时间是早九晚六，周末双休", THU),
            ("我在银行上班，月底特别忙", THU),
            ("以后周末不加班了", THU),
            ("平时周三去健身", THU),
            ("I usually work late on Friday", THU),
            ("Black Friday deals are wild", THU),
        ] {
            let r = resolve(text, at(sent));
            assert_eq!(r.text, text, "{text}");
            assert!(r.named.is_empty(), "{text}: {:?}", r.named);
        }
    }
}
