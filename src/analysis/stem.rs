//! A light English suffix stripper for index and query words.
//!
//! Not a full stemmer: it folds the inflections that split conversational
//! text from the questions asked about it (`painted`, `painting`, `paints` →
//! `paint`; `loved`, `loving`, `love` → `lov`; `stories` → `story`). Words of
//! three letters or fewer, words with digits or non-ASCII letters, and stop
//! words stay as they are. Index and query both go through
//! [`crate::analysis::tokenizer::tokenize`], so both sides agree.

/// The stem of a lower-case word.
pub(crate) fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_string();
    }
    let mut w = word.to_string();
    if w.len() <= 4 {
        // Short words only lose a silent final e (`love` meets `loved`).
    } else if let Some(base) = w.strip_suffix("ies") {
        w = format!("{base}y");
    } else if let Some(base) = w.strip_suffix("sses") {
        w = format!("{base}ss");
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.pop();
    } else if let Some(base) = w.strip_suffix("ing").filter(|b| b.len() >= 3) {
        w = undouble(base);
    } else if let Some(base) = w.strip_suffix("ed").filter(|b| b.len() >= 3) {
        w = undouble(base);
    }
    if w.len() > 3 && w.ends_with('e') && !w.ends_with("ee") {
        w.pop();
    }
    w
}

/// `runn` → `run`, `stopp` → `stop`; `fall`, `miss` and `buzz` keep their pair.
fn undouble(base: &str) -> String {
    let b = base.as_bytes();
    let n = b.len();
    if n >= 2 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z') {
        base[..n - 1].to_string()
    } else {
        base.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn inflections_meet() {
        for group in [
            &["paint", "painted", "painting", "paints"][..],
            &["love", "loved", "loving", "loves"],
            &["run", "running"],
            &["story", "stories"],
            &["camp", "camping", "camped"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            assert!(
                stems.iter().all(|s| *s == stems[0]),
                "{group:?} → {stems:?}"
            );
        }
        assert_eq!(stem("class"), "class");
        assert_eq!(stem("focus"), "focus");
        assert_eq!(stem("4th"), "4th");
        assert_eq!(stem("café"), "café");
    }
}
