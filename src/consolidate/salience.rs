//! Offline salience: which short-term chat lines a person would expect to be
//! kept, decided without a language model.
//!
//! Two signals are added into one score:
//! - rules ([`Features`]): explicit cues ("记住", "别忘了", "remember", "note
//!   that" …) and personal-fact patterns per category (health, preference,
//!   date, relationship, place, plan with a date, decision, work), minus
//!   questions, retractions ("不用记", "never mind") and banter markers;
//! - the local embedder, when it is loaded: the cosine similarity of the line
//!   to hand-written prototypes of memorable personal facts minus its
//!   similarity to prototypes of chatter (questions, banter, news), scaled by
//!   [`Calibration::weight`].
//!
//! A line is kept when the score reaches [`Calibration::threshold`]. The two
//! shipped calibrations ([`WITH_EMBEDDER`], [`RULES_ONLY`]) were tuned on the
//! labelled set `tests/fixtures/salience/chat-lines.jsonl` (319 lines, zh and
//! en); [`cross_validate`] measures the procedure on held-out folds. The
//! prototypes are not lines of that set.
//!
//! Measured on that set (`cargo test --test integration salience --
//! --nocapture`), 5-fold cross-validation, held-out lines only: rules +
//! embedder precision 0.933, keep-recall 0.994; rules only precision 0.949,
//! keep-recall 0.994. The embedder adds little over the rules on this set;
//! its errors are jokes and negations that look like personal facts ("I'm
//! allergic to Mondays", "我不是过敏，就是单纯不想吃"). The rules were written
//! by the same hand as the set, so expect lower figures on other people's chat.
//!
//! Kept lines are rewritten as standalone statements by
//! [`super::statement`].

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;

use crate::embed::Embedder;

fn re(p: &str) -> Regex {
    Regex::new(p).expect("salience patterns compile")
}

static CUE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)记住|记得|别忘|不要忘|记一下|记下|帮我记|记着|重要[:：]|提醒我|\bremember\b|don'?t forget|\bnote that\b|make a note|keep in mind|\bnote:",
    )
});
static RETRACT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)不用记|别记|忘掉|忘了吧|算了|取消吧|开玩笑|never ?mind|no need to remember|forget (what|that|it)|scratch that|just kidding|\bjk\b|（不会）|\(not\)",
    )
});
static BANTER: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)哈哈|笑死|笑不活|\blol\b|\bhaha|\blmao\b|（假的）|第\d+次|😂|🤣"));
static QUESTION_END: LazyLock<Regex> =
    LazyLock::new(|| re(r"[?？]\s*$|[吗呢么嘛][\s~～。]*$|来着\s*$"));
static QUESTION_WORD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(what|who|whom|when|where|why|how|which|do|does|did|is|are|can|could|would|will|should|anyone|any)\b|几号|什么|哪|谁|怎么|多久|为什么|如何|有没有|帮我查",
    )
});
static ANCHOR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)我|咱|\bi\b|\bi'm\b|\bi've\b|\bi'll\b|\bmy\b|\bme\b|\bwe\b|\bwe're\b|\bour\b|老婆|老公|儿子|女儿|孩子|妈|爸|家",
    )
});

static RULES: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    vec![
        (
            "health",
            re(
                r"(?i)过敏|不耐受|哮喘|糖尿病|血压|血糖|降[糖压]药|吃药|服药|褪黑素|医生说|怀孕|预产期|手术|近视|受过伤|胃不好|胃病|心脏病|血型|献血|疫苗|体检|失眠|忌口|allerg|intoleran|asthma|diabet|blood pressure|medicat|\bpills?\b|doctor|surgery|pregnan|migraine|celiac|gluten|injur|broke my|vaccin|insomnia",
            ),
        ),
        (
            "preference",
            re(
                r"(?i)喜欢|爱吃|爱喝|最爱|讨厌|不吃|不喝|吃素|偏好|习惯|受不了|口味|不爱|只在|不太看|\bprefer|favou?rite|\blove[sd]?\b|\bhate[sd]?\b|\blikes?\b|\bdon'?t (drink|eat|like)|vegetarian|vegan|not a (morning|night) person|\bi take my\b|never book",
            ),
        ),
        (
            "date",
            re(
                r"(?i)生日|纪念日|忌日|周年|满.{1,3}岁|\d+月\d+[号日]|农历|初[一二三四五六七八九十]|开学|入职|认识的|年会|birthday|anniversary|\bturns \w+|\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d|\bon the \d+(st|nd|rd|th)",
            ),
        ),
        (
            "relationship",
            re(
                r"(?i)老婆|老公|妻子|丈夫|女朋友|男朋友|前女友|前男友|儿子|女儿|孩子|我妈|我爸|爸妈|父亲|母亲|[哥姐弟妹]|岳父|岳母|公公|婆婆|爷爷|奶奶|外婆|姥姥|室友|同事|老板|领导|上司|闺蜜|猫叫|狗叫|叫[\p{Han}]{1,3}[，,。]|是我[\p{Han}]{1,4}|\bmy (wife|husband|son|daughter|kids?|mom|mum|mother|dad|father|brother|sister|grand\w+|boss|manager|partner|girlfriend|boyfriend|friend|roommate|colleague|dog|cat)\b|\bnamed\b|\bcalled\b|best friend|'s name",
            ),
        ),
        (
            "place",
            re(
                r"(?i)住在|搬到|搬家|地址|老家|家在|公司在|在[\p{Han}]{1,8}(上班|工作)|寄到|离.{1,6}近|健身房在|工位在|\blive (in|near)\b|grew up in|moving to|moved to|address|office is|work from home|time difference",
            ),
        ),
        (
            "plan",
            re(
                r"(?i)(明天|后天|今晚|下周|下个?月|下礼拜|周[一二三四五六日天末]|星期[一二三四五六日天]|\d+号|\d+月|\d+点|上午|下午|晚上|春节|过年|国庆|暑假|寒假).{0,12}(要|去|飞|约|考|面试|开会|会议|出差|参加|开始|打算|计划|回|带|复查|航班|提车|上课)|(要|去|飞|约|考|打算|计划).{0,8}(明天|后天|下周|下个?月|周[一二三四五六日天末]|\d+号|\d+月)|(?:\btomorrow\b|\btonight\b|\bnext (week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\bon (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\b\d{1,2}(:\d\d)? ?(am|pm)\b|\d+(st|nd|rd|th)\b).*|(flying|flight|interview|appointment|meeting|starting|taking|test|exam|running|trip|camping|surgery|renews?)\b.*\b(tomorrow|next|monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d)",
            ),
        ),
        (
            "decision",
            re(
                r"(?i)决定|定了|以后|从今天|从下周|从明天|不再|戒烟|戒酒|选了|还是选|\bdecided?\b|from now on|going with|go with|\bi'?m going to\b|signed up|\bquit\b|no longer",
            ),
        ),
        (
            "work",
            re(
                r"(?i)做[\p{Han}]{0,6}(开发|销售|设计|老师|医生|护士)|上班|工作时间|负责|职业|\bi work as\b|\bwork(s)? at\b|my job|shifts|\bi'?m an? [a-z ]{0,20}(engineer|developer|nurse|teacher|doctor|designer|manager|lawyer|student)\b",
            ),
        ),
    ]
});

/// Whether the personal-fact pattern of `category` (`plan`, `date`, …) matches `text`.
pub(crate) fn matches(category: &str, text: &str) -> bool {
    RULES
        .iter()
        .any(|(c, r)| *c == category && r.is_match(text))
}

/// What the rules see in one line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Features {
    /// An explicit "remember this" cue (outside a question).
    pub(crate) cue: bool,
    /// The first personal-fact category whose pattern matches.
    pub(crate) category: Option<&'static str>,
    /// About the speaker or someone they know (first person, kin words).
    pub(crate) anchored: bool,
    /// A question or a request to look something up.
    pub(crate) question: bool,
    /// "Don't remember that", "never mind", "just kidding".
    pub(crate) retracted: bool,
    /// Laughter or joke markers.
    pub(crate) banter: bool,
    /// Fewer than 4 letters or CJK characters.
    pub(crate) tiny: bool,
}

impl Features {
    /// Reads the features of `text`.
    pub(crate) fn of(text: &str) -> Features {
        let question = QUESTION_END.is_match(text) || QUESTION_WORD.is_match(text);
        let words = text.chars().filter(|c| c.is_alphanumeric()).count();
        Features {
            cue: !question && CUE.is_match(text),
            category: RULES
                .iter()
                .find(|(_, r)| r.is_match(text))
                .map(|(c, _)| *c),
            anchored: ANCHOR.is_match(text),
            question,
            retracted: RETRACT.is_match(text),
            banter: BANTER.is_match(text),
            tiny: words < 4,
        }
    }

    /// The rules' share of the score.
    pub(crate) fn score(&self) -> f32 {
        let mut s = 0.0;
        if self.cue {
            s += 1.0;
        }
        if self.category.is_some() {
            s += 0.6;
        }
        if self.anchored {
            s += 0.2;
        }
        if self.question {
            s -= 1.0;
        }
        if self.retracted {
            s -= 1.5;
        }
        if self.banter {
            s -= 0.4;
        }
        if self.tiny {
            s -= 0.5;
        }
        s
    }
}

/// Score weights: `rules + weight * (sim(keep prototypes) - sim(drop prototypes)) >= threshold`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Weight of the embedding margin (0: rules only).
    pub weight: f32,
    /// Keep at or above this score.
    pub threshold: f32,
}

/// The shipped calibration when the embedder is loaded (tuned on the whole
/// labelled set with [`calibrate`]; held-out figures in the test
/// `salience_meets_its_figures`).
pub const WITH_EMBEDDER: Calibration = Calibration {
    weight: 15.0,
    threshold: 0.4,
};

/// The shipped calibration when no embedder can be loaded.
pub const RULES_ONLY: Calibration = Calibration {
    weight: 0.0,
    threshold: 0.55,
};

/// Prototypes of memorable personal facts (none is a line of the labelled set).
const KEEP_PROTOTYPES: &[&str] = &[
    "我对芒果过敏",
    "我不能吃海鲜，会起疹子",
    "医生让我每天吃一片降压药",
    "I am allergic to bee stings",
    "I have high cholesterol and take statins",
    "我喜欢吃甜的，不喜欢苦的",
    "我不喝咖啡，只喝绿茶",
    "I prefer trains to planes",
    "My favourite food is ramen",
    "我老公的生日是七月七号",
    "我们的结婚纪念日在冬天",
    "My son's birthday is in February",
    "我女儿叫朵朵，今年五岁",
    "我哥在广州开餐馆",
    "My husband is called David and he is a pilot",
    "我住在南京鼓楼区",
    "I live in a flat in Leeds",
    "我下周五要去上海开会",
    "I have a flight to Paris next Thursday",
    "我决定明年换城市生活",
    "We decided to adopt a cat",
    "我在一家银行做会计",
    "I work as a software tester",
    "记住我的车牌号是浙A12345",
    "Remember that my passport expires in May",
];

/// Prototypes of chatter not worth keeping.
const DROP_PROTOTYPES: &[&str] = &[
    "哈哈哈太好笑了",
    "今天好累啊",
    "中午吃什么呢",
    "你们在聊什么",
    "有人一起去打游戏吗？",
    "这是什么意思？",
    "刚刚下了一场大雨",
    "听说那个歌手又上热搜了",
    "新闻说房价又跌了",
    "好的，没问题",
    "lol that's so funny",
    "what are you guys up to?",
    "is anyone around?",
    "the weather is nice today",
    "I heard that celebrity got divorced",
    "the game last night was crazy",
    "ok cool thanks",
    "just kidding, forget it",
];

/// The embedded prototypes of one model.
struct Prototypes {
    keep: Vec<Vec<f32>>,
    drop: Vec<Vec<f32>>,
}

static PROTOTYPES: LazyLock<Mutex<HashMap<String, Arc<Prototypes>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn prototypes(e: &dyn Embedder) -> Option<Arc<Prototypes>> {
    let key = e.model_id().to_string();
    if let Some(p) = PROTOTYPES.lock().ok()?.get(&key) {
        return Some(p.clone());
    }
    let keep = e.embed_passages(KEEP_PROTOTYPES).ok()?;
    let drop = e.embed_passages(DROP_PROTOTYPES).ok()?;
    let p = Arc::new(Prototypes { keep, drop });
    PROTOTYPES.lock().ok()?.insert(key, p.clone());
    Some(p)
}

fn max_cos(v: &[f32], set: &[Vec<f32>]) -> f32 {
    set.iter()
        .map(|p| p.iter().zip(v).map(|(a, b)| a * b).sum::<f32>())
        .fold(f32::MIN, f32::max)
}

/// The two signals of one line, before weighting.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals {
    /// The rules.
    pub(crate) features: Features,
    /// Similarity to keep prototypes minus similarity to drop prototypes
    /// (absent without an embedder).
    pub margin: Option<f32>,
}

impl Signals {
    /// The score under `cal` (the margin counts 0 when absent).
    pub(crate) fn score(&self, cal: Calibration) -> f32 {
        self.features.score() + cal.weight * self.margin.unwrap_or(0.0)
    }
}

/// Reads the signals of many lines; the embedder (if any) runs once over all
/// of them. An embedder that fails leaves every margin absent.
pub fn signals(texts: &[&str], embedder: Option<&dyn Embedder>) -> Vec<Signals> {
    let margins: Option<Vec<f32>> = embedder.and_then(|e| {
        let protos = prototypes(e)?;
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(32) {
            for v in e.embed_passages(chunk).ok()? {
                out.push(max_cos(&v, &protos.keep) - max_cos(&v, &protos.drop));
            }
        }
        Some(out)
    });
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Signals {
            features: Features::of(t),
            margin: margins.as_ref().map(|m| m[i]),
        })
        .collect()
}

/// Whether the shipped calibration holds for this embedder (it was tuned on
/// multilingual-e5-small; other models' similarities are on another scale).
pub(crate) fn calibrated_for(model_id: &str) -> bool {
    model_id.contains("multilingual-e5-small")
}

/// The calibration for these signals: with margins, [`WITH_EMBEDDER`].
pub(crate) fn shipped(with_embedder: bool) -> Calibration {
    if with_embedder {
        WITH_EMBEDDER
    } else {
        RULES_ONLY
    }
}

/// The verdict on one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Keep it.
    pub keep: bool,
    /// The score.
    pub score: f32,
    /// Why, for the report: `cue`, a category, or `similar to kept facts`.
    pub(crate) reason: String,
}

/// Judges one line.
pub fn judge(s: &Signals, cal: Calibration) -> Verdict {
    let score = s.score(cal);
    let reason = match (s.features.cue, s.features.category) {
        (true, Some(c)) => format!("cue, {c}"),
        (true, None) => "cue".into(),
        (false, Some(c)) => c.to_string(),
        (false, None) => "similar to kept facts".into(),
    };
    Verdict {
        keep: score >= cal.threshold,
        score,
        reason,
    }
}

/// Precision and recall of "keep".
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Figures {
    /// Kept lines that should be kept / kept lines.
    pub precision: f64,
    /// Kept lines that should be kept / lines that should be kept.
    pub recall: f64,
    /// Lines judged.
    pub(crate) n: usize,
}

/// Precision and recall of `cal` over labelled signals.
pub fn measure(samples: &[(Signals, bool)], cal: Calibration) -> Figures {
    let (mut tp, mut fp, mut fneg) = (0usize, 0usize, 0usize);
    for (s, want) in samples {
        match (judge(s, cal).keep, *want) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fneg += 1,
            _ => {}
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    Figures {
        precision: ratio(tp, tp + fp),
        recall: ratio(tp, tp + fneg),
        n: samples.len(),
    }
}

/// The precision a calibration must reach on its tuning lines.
pub const TARGET_PRECISION: f64 = 0.85;

/// Tunes weight and threshold on `samples`: the highest keep-recall with
/// precision at least [`TARGET_PRECISION`] (ties: higher precision, then the
/// smaller weight), and the middle of the thresholds that reach those figures
/// with that weight, so the cut sits between the two classes rather than on
/// the edge of one; with `weights` = `[0.0]` it tunes the rules only.
/// Thresholds are tried from 0.25 to 2.25 in steps of 0.05.
pub fn calibrate(samples: &[(Signals, bool)], weights: &[f32]) -> Calibration {
    let key = |f: &Figures| {
        let ok = f.precision >= TARGET_PRECISION;
        // Meeting the precision target first, then recall, then precision.
        (ok, if ok { f.recall } else { 0.0 }, f.precision)
    };
    let mut best: Option<(f32, Figures, Vec<f32>)> = None;
    for &weight in weights {
        // Thresholds from 0.25: a first-person word alone (0.2) is never enough.
        for step in 0..=40 {
            let threshold = 0.25 + step as f32 * 0.05;
            let f = measure(samples, Calibration { weight, threshold });
            match &mut best {
                Some((w, b, ts)) if *w == weight && f == *b => ts.push(threshold),
                Some((_, b, _)) if key(&f) <= key(b) => {}
                _ => best = Some((weight, f, vec![threshold])),
            }
        }
    }
    match best {
        Some((weight, _, ts)) => Calibration {
            weight,
            threshold: ts[ts.len() / 2],
        },
        None => RULES_ONLY,
    }
}

/// The embedding weights [`calibrate`] tries.
pub const WEIGHTS: [f32; 7] = [0.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0];

/// `k`-fold cross-validation of [`calibrate`]: tune on k-1 folds, measure on
/// the held-out one (line `i` is in fold `i % k`); the figures are pooled
/// over all held-out lines.
pub fn cross_validate(samples: &[(Signals, bool)], weights: &[f32], k: usize) -> Figures {
    let mut held: Vec<(Signals, bool)> = Vec::new();
    let mut judged: Vec<(bool, bool)> = Vec::new();
    for fold in 0..k {
        let train: Vec<(Signals, bool)> = samples
            .iter()
            .enumerate()
            .filter(|(i, _)| i % k != fold)
            .map(|(_, s)| s.clone())
            .collect();
        let cal = calibrate(&train, weights);
        for (i, s) in samples.iter().enumerate() {
            if i % k == fold {
                judged.push((judge(&s.0, cal).keep, s.1));
                held.push(s.clone());
            }
        }
    }
    let tp = judged.iter().filter(|(k, w)| *k && *w).count();
    let kept = judged.iter().filter(|(k, _)| *k).count();
    let want = judged.iter().filter(|(_, w)| *w).count();
    Figures {
        precision: if kept == 0 {
            1.0
        } else {
            tp as f64 / kept as f64
        },
        recall: if want == 0 {
            1.0
        } else {
            tp as f64 / want as f64
        },
        n: held.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_see_cues_questions_and_retractions() {
        let f = Features::of("我对花生过敏，千万记住");
        assert!(f.cue && f.anchored && !f.question);
        assert_eq!(f.category, Some("health"));
        let q = Features::of("你还记得上次那家店叫什么吗？");
        assert!(q.question && !q.cue);
        assert!(Features::of("这个不用记").retracted);
        assert!(Features::of("哈").tiny);
        assert!(RULES_ONLY.threshold <= Features::of("我对花生过敏，千万记住").score());
        assert!(RULES_ONLY.threshold > Features::of("哈哈哈哈笑死我了").score());
    }
}
