//! The relevance floor of recall and search, with the real model (installed
//! by `scripts/setup.sh`): an unrelated topic finds nothing on a populated
//! root, a related one still finds its memory.

use std::sync::Arc;

use memory_hub::config::{Config, EmbedderConfig};
use memory_hub::embed::EmbedderSlot;
use memory_hub::embed::onnx::OnnxEmbedder;
use memory_hub::hub::{Hub, Mode};
use memory_hub::model::{Privacy, Subject};
use serde_json::{Value, json};

use crate::http_support::{Api, ids};
use crate::support::TempRoot;

/// A root with everyday memories in Chinese and English, served with the real model.
fn populated() -> (Api, String) {
    let root = TempRoot::new();
    let embedder = OnnxEmbedder::load(&EmbedderConfig::default())
        .expect("the model is installed by scripts/setup.sh (scripts/test.sh runs it)");
    let (hub, _) = Hub::open_with(
        root.layout(),
        Config::default(),
        Mode::Write,
        EmbedderSlot::ready(Arc::new(embedder)),
        &mut |_| {},
    )
    .expect("open hub");
    let api = Api::over_hub(root, hub);
    let texts = [
        "小王对花生过敏，吃了会起疹子",
        "小王下周三过生日，想要一副新耳机",
        "周末和小李去西湖边骑自行车",
        "妈妈最近在学做广东早茶，虾饺做得很好",
        "公司年会定在十二月二十号，地点在滨江酒店",
        "我家的猫叫团子，今年三岁了，特别怕吸尘器",
        "上个月体检，医生说要少喝咖啡多睡觉",
        "小张在准备考研，目标是浙江大学的计算机专业",
        "春节打算回成都看外婆，火车票已经买好了",
        "最近在读《三体》，刚读完第二部",
        "Tom is training for the Berlin marathon in September",
        "Anna adopted a golden retriever puppy named Biscuit",
        "The team standup moved to 9:30 every weekday",
        "Dad is recovering well after his knee surgery",
        "Lisa loves painting sunsets by the lake with watercolors",
        "We booked a cabin in the mountains for the camping trip",
        "Mike started learning Spanish before his trip to Madrid",
        "The landlord will fix the kitchen sink on Friday",
    ];
    for t in texts {
        api.write("main", t, Privacy::Normal, Subject::Owner);
    }
    let token = api.token("pet", "pet");
    (api, token)
}

async fn recall(api: &Api, token: &str, body: Value) -> Vec<String> {
    ids(&api.ok("/v1/recall", token, body).await["hits"])
}

fn texts(api: &Api, found: &[String]) -> Vec<String> {
    found
        .iter()
        .map(|id| {
            api.hub
                .fetch(id, &memory_hub::index::filter::Filter::all())
                .unwrap()
                .text
        })
        .collect()
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[tokio::test]
async fn an_unrelated_topic_recalls_nothing_and_a_related_one_still_hits() {
    let (api, t) = populated();
    for unrelated in [
        "量子色动力学的渐近自由",
        "增值税进项税额抵扣的会计分录",
        "asymptotic freedom in quantum chromodynamics",
        "register allocation by graph coloring",
    ] {
        let hits = recall(&api, &t, json!({ "query": unrelated })).await;
        assert!(hits.is_empty(), "{unrelated}: {:?}", texts(&api, &hits));
        let block = api
            .ok(
                "/v1/recall",
                &t,
                json!({ "messages": [unrelated], "format": "block" }),
            )
            .await;
        assert_eq!(block["block"], "", "{unrelated}");
    }
    // A conversation of unrelated turns (judged by the `dialogue` model) recalls nothing either.
    let turns = [
        "量子色动力学的渐近自由",
        "register allocation by graph coloring",
        "增值税进项税额抵扣的会计分录",
    ];
    let hits = recall(&api, &t, json!({ "messages": turns })).await;
    assert!(hits.is_empty(), "{turns:?}: {:?}", texts(&api, &hits));
    for (related, expected) in [
        ("小王对什么过敏？", "花生过敏"),
        ("团子怕什么", "吸尘器"),
        ("When is Tom's marathon?", "Berlin marathon"),
        ("what is the name of Anna's dog", "Biscuit"),
        ("小王生日想要什么礼物", "耳机"),
    ] {
        let hits = recall(&api, &t, json!({ "messages": ["嗯", related] })).await;
        let found = texts(&api, &hits);
        assert!(
            found.iter().take(3).any(|x| x.contains(expected)),
            "{related}: {found:?}"
        );
    }
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[tokio::test]
async fn min_score_overrides_the_default_floor_of_recall_and_search() {
    let (api, t) = populated();
    let q = "量子色动力学的渐近自由";
    // min_score 0 turns the floor off: the nearest memories come back.
    assert!(
        !recall(&api, &t, json!({ "query": q, "min_score": 0 }))
            .await
            .is_empty()
    );
    assert!(
        !api.search_ids(&t, json!({ "query": q, "mode": "hybrid", "min_score": 0 }))
            .await
            .is_empty()
    );
    // Search applies the same default floor as recall, and any floor asked for.
    assert!(
        api.search_ids(&t, json!({ "query": q, "mode": "hybrid" }))
            .await
            .is_empty()
    );
    assert!(
        api.search_ids(
            &t,
            json!({ "query": q, "mode": "hybrid", "min_score": 0.5 })
        )
        .await
        .is_empty()
    );
    // A floor is on the probability each hit reports: one at the best hit's
    // relevance keeps it, one just above drops it.
    let related = json!({ "query": "小王对什么过敏", "mode": "hybrid", "min_score": 0 });
    let all = api.ok("/v1/search", &t, related.clone()).await;
    let best = &all["hits"][0];
    assert!(best["text"].as_str().unwrap().contains("花生"), "{all}");
    let p = best["relevance"].as_f64().unwrap();
    let with_floor = |floor: f64| {
        let mut body = related.clone();
        body["min_score"] = json!(floor);
        body
    };
    let kept = api.search_ids(&t, with_floor(p)).await;
    assert_eq!(kept.first(), best["id"].as_str().map(String::from).as_ref());
    let above = api.search_ids(&t, with_floor((p + 1e-3).min(1.0))).await;
    assert!(!above.iter().any(|id| best["id"] == *id), "{above:?}");
    // A stricter floor than the evidence of any hit empties a related recall too.
    assert!(
        recall(
            &api,
            &t,
            json!({ "query": "小王对什么过敏", "min_score": 1 })
        )
        .await
        .is_empty()
    );
    let (status, body) = api
        .post("/v1/recall", &t, json!({ "query": q, "min_score": 1.5 }))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "INVALID_INPUT", "{body}");
}

/// Search applies the same decision by default, drops per hit (not the
/// whole response), says how many it dropped, and `min_score: 0` turns it off.
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[tokio::test]
async fn search_drops_hits_below_the_floor_by_default_and_counts_them() {
    let (api, t) = populated();
    let off = api
        .ok(
            "/v1/search",
            &t,
            json!({ "query": "量子色动力学的渐近自由" }),
        )
        .await;
    assert_eq!(off["hits"], json!([]), "{off}");
    assert!(off["dropped_below_floor"].as_u64().unwrap() > 0, "{off}");
    let all = api
        .ok(
            "/v1/search",
            &t,
            json!({ "query": "量子色动力学的渐近自由", "min_score": 0 }),
        )
        .await;
    assert_eq!(all["hits"].as_array().unwrap().len(), 5, "{all}");
    assert_eq!(all["dropped_below_floor"], 0);
    let on = api
        .ok("/v1/search", &t, json!({ "query": "团子怕什么" }))
        .await;
    let hits = on["hits"].as_array().unwrap();
    assert!(hits[0]["text"].as_str().unwrap().contains("吸尘器"), "{on}");
    for h in hits {
        let p = h["relevance"].as_f64().unwrap();
        assert!(p > 0.0 && p < 1.0, "{h}");
    }
    // Hits are judged one by one: the related query keeps its answer
    // although other hits of the same response are dropped.
    assert!(
        hits.len() < 5 && on["dropped_below_floor"].as_u64().unwrap() > 0,
        "{on}"
    );
    let (status, body) = api
        .post(
            "/v1/search",
            &t,
            json!({ "query": "团子", "min_score": 1.5 }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
}

/// Issue item 2: a recall about a project codename put the owner's
/// bank-card digits into the block, and a group reply block was padded with
/// chatter. Each hit now has to be about the conversation to be shown.
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs the embedding model (scripts/setup.sh)"
)]
#[tokio::test]
async fn a_recall_block_holds_no_chatter_and_no_unrelated_sensitive_memory() {
    let (api, _) = populated();
    let root = api.token("root", "dsh-desktop");
    let card = api.write(
        "main",
        "我的银行卡号是6222 0212 3456 7890，开户行是招商银行",
        Privacy::Personal,
        Subject::Owner,
    );
    let bluebird = api.write(
        "main",
        "青鸟项目的上线时间推迟到十一月，因为支付接口还没联调完",
        Privacy::Normal,
        Subject::Owner,
    );
    let group = api.token("g", "qq-group-9");
    for (i, text) in [
        "哈哈哈笑死我了",
        "我也想去[图片]",
        "太真实了吧哈哈",
        "来了来了",
    ]
    .into_iter()
    .enumerate()
    {
        api.ok(
            "/v1/ingest",
            &group,
            json!({ "message_id": format!("c{i}"), "text": text, "sender": {"id": "u7", "name": "小李"} }),
        )
        .await;
    }
    let out = api
        .ok(
            "/v1/recall",
            &root,
            json!({ "messages": ["青鸟项目什么时候上线？"], "format": "block" }),
        )
        .await;
    let found = ids(&out["hits"]);
    assert_eq!(found.first(), Some(&bluebird), "{out:#}");
    assert!(!found.contains(&card), "{out:#}");
    let block = out["block"].as_str().unwrap();
    assert!(block.contains("青鸟") && !block.contains("6222"), "{block}");
    // In the group, a question about the weekend gets no chatter padding.
    let out = api
        .ok(
            "/v1/recall",
            &group,
            json!({ "messages": ["周末大家打算去哪儿玩？"], "format": "block" }),
        )
        .await;
    let block = out["block"].as_str().unwrap();
    for chatter in ["笑死", "[图片]", "太真实", "来了来了"] {
        assert!(!block.contains(chatter), "{chatter} in {block}");
    }
}

/// A QQ group owner asks `/回忆 周末爬山` after a friend's question and their
/// own reply about a trip: judged on the whole conversation, the owner's
/// memory about weekend hiking shared too little with the trip (0.08 against
/// a threshold of 0.17) and the recall block lost it. A hit about the last
/// turn is about the conversation.
#[test]
fn a_hit_about_the_last_turn_is_kept_however_little_it_shares_with_the_turns_before() {
    use crate::support::{TempRoot, search_ids_in, write};
    use memory_hub::search::SearchMode;
    let root = TempRoot::new();
    let hub = root.hub();
    let hiking = write(&hub, "main", "林周末常去香山爬山，最喜欢秋天的红叶");
    write(&hub, "main", "林的爬山搭子是大学室友阿杰");
    for filler in [
        "周五晚上团队聚餐定在公司楼下的火锅店",
        "The quarterly report is due on the last Friday of the month",
        "小王推荐了一家新开的咖啡馆，拿铁很好喝",
    ] {
        write(&hub, "main", filler);
    }
    let conversation =
        "王同学：周末去爬山吗\n群主林：我下周去杭州出差，周末爬不了山了\n群主林：周末爬山";
    let found = search_ids_in(&hub, conversation, 5, SearchMode::Fulltext);
    assert!(found.contains(&hiking), "{found:?}");
    // The last turn adds what it is about, nothing else: an off-topic last
    // turn after an off-topic opening still recalls nothing.
    let off = "王同学：钨的熔点是多少\n群主林：量子色动力学的渐近自由是什么";
    assert_eq!(
        search_ids_in(&hub, off, 5, SearchMode::Fulltext),
        Vec::<String>::new()
    );
}
