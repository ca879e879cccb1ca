//! A seeded synthetic zh/en corpus and query set: the same seed gives the same text.

use memory_hub::hub::{Hub, WriteRequest};
use memory_hub::model::Scene;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ZH_SUBJECTS: &[&str] = &[
    "我",
    "妈妈",
    "同事小王",
    "老板",
    "朋友",
    "孩子",
    "邻居",
    "客户",
];
const ZH_VERBS: &[&str] = &[
    "去了",
    "喜欢",
    "讨论了",
    "买了",
    "忘记了",
    "计划",
    "完成了",
    "提到",
];
const ZH_OBJECTS: &[&str] = &[
    "公园散步",
    "咖啡店",
    "项目截止日期",
    "生日礼物",
    "周末旅行",
    "新的笔记本电脑",
    "健身计划",
    "季度报告",
    "火锅餐厅",
    "英语课程",
    "医院体检",
    "搬家安排",
    "猫粮",
    "会议纪要",
    "电影票",
];
const EN_SUBJECTS: &[&str] = &[
    "I",
    "Mom",
    "Sam from work",
    "the manager",
    "a friend",
    "the kids",
    "our neighbour",
];
const EN_VERBS: &[&str] = &[
    "visited",
    "likes",
    "discussed",
    "bought",
    "forgot",
    "planned",
    "finished",
    "mentioned",
];
const EN_OBJECTS: &[&str] = &[
    "the park",
    "a coffee shop",
    "the project deadline",
    "a birthday gift",
    "a weekend trip",
    "a new laptop",
    "the gym schedule",
    "the quarterly report",
    "a hotpot restaurant",
    "an English course",
    "a checkup",
    "the move",
    "cat food",
    "meeting notes",
    "movie tickets",
];
const EN_TAILS: &[&str] = &[
    "yesterday",
    "last week",
    "on Friday",
    "in the morning",
    "after lunch",
    "again",
    "",
];
const ZH_TAILS: &[&str] = &["昨天", "上周", "周五", "早上", "午饭后", "又一次", ""];

/// One generated memory.
pub struct Item {
    pub scene: &'static str,
    pub text: String,
}

pub const SCENES: &[&str] = &["main", "qq:owner", "qq:group:1", "qq:group:2", "pet"];

fn pick<'a>(rng: &mut StdRng, list: &[&'a str]) -> &'a str {
    list[rng.random_range(0..list.len())]
}

/// `n` memories, half Chinese, half English.
pub fn generate(n: usize, seed: u64) -> Vec<Item> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let text = if rng.random_bool(0.5) {
                format!(
                    "{}{}{}{}，编号{i}",
                    pick(&mut rng, ZH_TAILS),
                    pick(&mut rng, ZH_SUBJECTS),
                    pick(&mut rng, ZH_VERBS),
                    pick(&mut rng, ZH_OBJECTS)
                )
            } else {
                format!(
                    "{} {} {} {} (item {i})",
                    pick(&mut rng, EN_SUBJECTS),
                    pick(&mut rng, EN_VERBS),
                    pick(&mut rng, EN_OBJECTS),
                    pick(&mut rng, EN_TAILS)
                )
            };
            Item {
                scene: pick(&mut rng, SCENES),
                text,
            }
        })
        .collect()
}

/// `n` short queries mixing both languages.
pub fn queries(n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9);
    (0..n)
        .map(|_| {
            if rng.random_bool(0.5) {
                pick(&mut rng, ZH_OBJECTS).to_string()
            } else {
                let obj = pick(&mut rng, EN_OBJECTS);
                obj.trim_start_matches("the ")
                    .trim_start_matches("a ")
                    .trim_start_matches("an ")
                    .to_string()
            }
        })
        .collect()
}

/// Writes `items` through the normal write path, in group commits of 1000.
pub fn write_all(hub: &Hub, items: &[Item]) {
    for chunk in items.chunks(1000) {
        let reqs = chunk
            .iter()
            .map(|i| WriteRequest::new(Scene::parse(i.scene).unwrap(), i.text.clone(), "bench"))
            .collect();
        for r in hub.append_batch(reqs).unwrap() {
            r.unwrap();
        }
    }
}

/// Chinese natural-language questions about the corpus (the cross-lingual pass's input).
pub fn zh_questions(n: usize) -> Vec<String> {
    const WHO: &[&str] = &["我", "妈妈", "同事小王", "老板", "朋友", "邻居"];
    const WHEN: &[&str] = &["上周", "昨天", "周五", "最近"];
    const WHAT: &[&str] = &[
        "公园散步",
        "项目截止日期",
        "生日礼物",
        "周末旅行",
        "健身计划",
        "季度报告",
        "英语课程",
        "电影票",
    ];
    const ASK: &[&str] = &[
        "{who}{when}提到的{what}是怎么回事",
        "{who}{when}说过关于{what}的事情吗",
        "还记得{who}{when}和我聊的{what}吗",
    ];
    let mut rng = StdRng::seed_from_u64(11);
    (0..n)
        .map(|_| {
            let pick = |rng: &mut StdRng, l: &[&'static str]| l[rng.random_range(0..l.len())];
            pick(&mut rng, ASK)
                .replace("{who}", pick(&mut rng, WHO))
                .replace("{when}", pick(&mut rng, WHEN))
                .replace("{what}", pick(&mut rng, WHAT))
        })
        .collect()
}

/// Long one-line queries (about 1,900 characters, under the API's 2,000)
/// made of corpus text: the `k`-th starts at memory `40 k`, wrapping around
/// the corpus, so any corpus (of at least one memory) gives `n` of them.
pub fn long_queries(items: &[Item], n: usize) -> Vec<String> {
    assert!(!items.is_empty(), "long queries are made of corpus text");
    (0..n)
        .map(|k| {
            let mut q = String::new();
            for it in items.iter().cycle().skip(k * 40 % items.len()) {
                if q.chars().count() + it.text.chars().count() + 1 > 1900 {
                    break;
                }
                q.push_str(&it.text);
                q.push(' ');
            }
            q
        })
        .collect()
}

/// Dialogue queries as a chat bridge sends them to recall: seven turns, one a
/// line (`<Sam>: "…"` and `<Assistant>: "…"` alternating), each turn two
/// memories of the corpus (about 550 characters in all, the median of the
/// MADial dialogue queries); the `k`-th starts at memory `14 k`, so the `n`
/// queries differ (no query vector is reused from the cache).
pub fn dialogues(items: &[Item], n: usize) -> Vec<String> {
    assert!(!items.is_empty(), "dialogues are made of corpus text");
    (0..n)
        .map(|k| {
            let mut texts = items.iter().cycle().skip(k * 14 % items.len());
            (0..7)
                .map(|turn| {
                    let who = if turn % 2 == 0 { "Sam" } else { "Assistant" };
                    let a = &texts.next().unwrap().text;
                    let b = &texts.next().unwrap().text;
                    format!("<{who}>: \"{a}. {b}\"")
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}
