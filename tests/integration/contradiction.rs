//! The contradiction detector on its labelled set
//! (`tests/fixtures/contradictions.jsonl`): pairs of memories, older then
//! newer, labelled `conflict` or `compatible` (similar on purpose: same
//! topic, additive facts, paraphrases, other people or objects). Half `a`
//! was written first and the detector tuned on it; half `b` was written
//! afterwards and not tuned on. Prints precision and recall per half and
//! asserts the goals (precision ≥ 0.9, recall ≥ 0.7) on each.

use memory_hub::contradiction::detect;

#[derive(serde::Deserialize)]
struct Pair {
    half: String,
    label: String,
    a: String,
    b: String,
}

/// (true positives, false positives, false negatives, pairs) of one half.
fn measure(pairs: &[Pair], half: &str) -> (usize, usize, usize, usize) {
    let (mut tp, mut fp, mut fn_, mut n) = (0, 0, 0, 0);
    for p in pairs.iter().filter(|p| half == "all" || p.half == half) {
        n += 1;
        let found = detect(&p.a, &p.b);
        match (p.label == "conflict", found.is_some()) {
            (true, true) => tp += 1,
            (false, true) => {
                fp += 1;
                eprintln!("false positive ({:?}): {} | {}", found, p.a, p.b);
            }
            (true, false) => {
                fn_ += 1;
                eprintln!("missed: {} | {}", p.a, p.b);
            }
            (false, false) => {}
        }
    }
    (tp, fp, fn_, n)
}

#[test]
fn contradiction_detector_meets_its_goals_on_each_half() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/contradictions.jsonl"),
    )
    .unwrap();
    let pairs: Vec<Pair> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let conflicts = pairs.iter().filter(|p| p.label == "conflict").count();
    assert!(
        conflicts >= 60 && pairs.len() - conflicts >= 100,
        "set too small"
    );
    for half in ["a", "b", "all"] {
        let (tp, fp, fn_, n) = measure(&pairs, half);
        let precision = tp as f64 / (tp + fp).max(1) as f64;
        let recall = tp as f64 / (tp + fn_).max(1) as f64;
        eprintln!(
            "half {half}: {n} pairs, precision {precision:.3} ({tp}/{}), recall {recall:.3} ({tp}/{})",
            tp + fp,
            tp + fn_
        );
        assert!(
            precision >= 0.9 && recall >= 0.7,
            "half {half} below the goals"
        );
    }
}
