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
async fn min_score_overrides_the_floor_and_search_applies_one_only_when_asked() {
    let (api, t) = populated();
    let q = "量子色动力学的渐近自由";
    // min_score 0 turns recall's floor off: the nearest memories come back.
    assert!(
        !recall(&api, &t, json!({ "query": q, "min_score": 0 }))
            .await
            .is_empty()
    );
    // Search keeps its behaviour without min_score, and applies the floor with it.
    assert!(
        !api.search_ids(&t, json!({ "query": q, "mode": "hybrid" }))
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
    assert!(
        !api.search_ids(
            &t,
            json!({ "query": "小王对什么过敏", "mode": "hybrid", "min_score": 0.5 })
        )
        .await
        .is_empty()
    );
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
