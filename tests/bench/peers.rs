//! A seeded synthetic corpus of zh/en notes with labelled queries, as the
//! peers' comparison used: notes in either language about invented
//! projects, some holding words of the other script (a Chinese note naming
//! an invented Latin codename, an English note with a Chinese remark), and
//! three kinds of labelled queries:
//!
//! - **zh**: a Chinese natural-language question about a note's subject,
//! - **en**: an English question about one,
//! - **invented**: the two invented words a note holds (`wexqir xanwyn`).
//!
//! Every note has a topic (a noun phrase in both languages) and two
//! invented words made of syllables; a query's relevant notes are the
//! notes holding what it asks for (`relevant`). The same seed gives the same
//! corpus and queries.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// One note.
#[derive(Debug, Clone)]
pub struct Note {
    pub text: String,
}

/// One labelled query.
#[derive(Debug, Clone)]
pub struct Query {
    pub kind: &'static str,
    pub text: String,
    /// Indices of the relevant notes.
    pub relevant: Vec<usize>,
}

/// Topics: (Chinese, English).
const TOPICS: &[(&str, &str)] = &[
    ("季度预算", "quarterly budget"),
    ("发布计划", "release plan"),
    ("数据库迁移", "database migration"),
    ("客户投诉", "customer complaint"),
    ("招聘面试", "hiring interview"),
    ("服务器故障", "server outage"),
    ("年度体检", "annual checkup"),
    ("搬家安排", "moving arrangements"),
    ("婚礼筹备", "wedding preparations"),
    ("装修报价", "renovation quote"),
    ("培训课程", "training course"),
    ("合同续签", "contract renewal"),
    ("旅行签证", "travel visa"),
    ("设备采购", "equipment purchase"),
    ("安全审计", "security audit"),
    ("用户调研", "user research"),
    ("税务申报", "tax filing"),
    ("孩子升学", "school admission"),
    ("车辆保险", "car insurance"),
    ("会议纪要", "meeting minutes"),
];

// The frames hold the words the queries' other words translate to
// (决定 → decision, updates → 更新): the cross-lingual pass finds them.
const ZH_FRAMES: &[&str] = &[
    "今天和团队讨论了{t}，大家下周再确认细节。",
    "{t}的更新已经推迟到下个季度评审。",
    "我提醒自己尽快处理{t}，不要拖延。",
    "{t}的负责人换了，需要重新对接，有更新再说。",
    "周五之前要把{t}的材料整理好。",
];

const EN_FRAMES: &[&str] = &[
    "Talked with the team about the {t}; we will confirm the details next week.",
    "The decision on the {t} was postponed until the quarterly review.",
    "Reminder to myself: deal with the {t} soon, no more delays.",
    "Someone new owns the {t} now; the decision is theirs.",
    "Get the papers for the {t} ready before Friday.",
];

const SYLLABLES: &[&str] = &[
    "wex", "qir", "xan", "wyn", "zol", "vek", "pru", "dax", "kel", "mor", "tiv", "gux", "bry",
    "nal", "quo", "rif", "sev", "yar", "hol", "jup",
];

fn invented(rng: &mut StdRng) -> String {
    let n = rng.random_range(2..=3);
    (0..n)
        .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
        .collect()
}

/// `n` notes and up to `q` queries of each kind.
pub fn generate(n: usize, q: usize, seed: u64) -> (Vec<Note>, Vec<Query>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut notes = Vec::with_capacity(n);
    let mut meta: Vec<(usize, String, String)> = Vec::with_capacity(n);
    let mut used = std::collections::HashSet::new();
    for _ in 0..n {
        let topic = rng.random_range(0..TOPICS.len());
        let (a, b) = loop {
            let (a, b) = (invented(&mut rng), invented(&mut rng));
            if a != b && used.insert(format!("{a} {b}")) {
                break (a, b);
            }
        };
        let chinese = rng.random_bool(0.5);
        // A third of the English notes hold a Chinese remark; every Chinese
        // note names its codename in Latin letters.
        let cross = rng.random_range(0..3) == 0;
        let text = if chinese {
            let frame = ZH_FRAMES[rng.random_range(0..ZH_FRAMES.len())];
            let body = frame.replace("{t}", TOPICS[topic].0);
            format!("{body}项目代号 {a} {b}。")
        } else {
            let frame = EN_FRAMES[rng.random_range(0..EN_FRAMES.len())];
            let body = frame.replace("{t}", TOPICS[topic].1);
            if cross {
                format!("{body} Codename {a} {b}, 备注：{}", TOPICS[topic].0)
            } else {
                format!("{body} Codename {a} {b}.")
            }
        };
        notes.push(Note { text });
        meta.push((topic, a, b));
    }
    let mut queries = Vec::new();
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    for &i in order.iter().take(q) {
        let (_, a, b) = &meta[i];
        queries.push(Query {
            kind: "invented",
            text: format!("{a} {b}"),
            relevant: vec![i],
        });
    }
    for &i in order.iter().skip(q).take(q) {
        let (_, a, b) = &meta[i];
        queries.push(Query {
            kind: "zh",
            text: format!("关于{a}和{b}的决定是什么"),
            relevant: vec![i],
        });
    }
    for &i in order.iter().skip(2 * q).take(q) {
        let (_, a, b) = &meta[i];
        queries.push(Query {
            kind: "en",
            text: format!("any updates regarding {a} or {b}?"),
            relevant: vec![i],
        });
    }
    (notes, queries)
}
