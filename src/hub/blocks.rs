//! The prompt-ready text blocks of `recent` and `disclose`, and the line
//! format the recall block ([`super::recall`]) shares: one memory a line,
//! decided here once for every client.

use chrono::Local;

use crate::model::{Memory, Scene};

/// Longest rendered line of a long-term memory, in characters.
const BLOCK_MEMORY_CHARS: usize = 160;

/// First `max` characters of `text` on one line, with `…` when cut.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

/// One memory as a block line: its date, the "they brought it up" mark, its
/// title and its text on one line.
pub(crate) fn memory_line(m: &Memory, self_mentioned: bool) -> String {
    labelled_line(m, self_mentioned, "")
}

/// [`memory_line`] with `label` before the text: which of two conflicting
/// memories is newer (`（较新）`, `(older) `, see [`super::conflicts`]).
pub(crate) fn labelled_line(m: &Memory, self_mentioned: bool, label: &str) -> String {
    let date = m.ts.with_timezone(&Local).format("%Y-%m-%d");
    let mention = if self_mentioned {
        "（对方自己提起过的）"
    } else {
        ""
    };
    let mark = format!("{label}{mention}");
    let text = one_line(&m.text, BLOCK_MEMORY_CHARS);
    match m.title.as_deref().filter(|t| !text.starts_with(*t)) {
        Some(title) => format!("{date} {mark}{}：{text}", one_line(title, 40)),
        None => format!("{date} {mark}{text}"),
    }
}

/// Renders the `recent` block.
pub(crate) fn render_recent_block(items: &[Memory]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = String::from("【最近记得的事】\n");
    for m in items {
        out.push_str(&format!("- {}\n", memory_line(m, false)));
    }
    out
}

/// Renders the disclosure block of a group's recent chat.
pub(crate) fn render_disclosure(group: &Scene, minutes: u32, items: &[Memory]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut out = format!("【群里最近在聊的】（{group}，近 {minutes} 分钟）\n");
    for m in items {
        let time = m.ts.with_timezone(&chrono::Local).format("%H:%M");
        let who = m
            .title
            .as_deref()
            .map(|t| format!("{t}："))
            .unwrap_or_default();
        out.push_str(&format!("- {time} {who}{}\n", one_line(&m.text, 120)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_flat_and_cut() {
        assert_eq!(one_line("a  b\nc", 10), "a b c");
        assert_eq!(one_line("你好世界", 2), "你好…");
    }
}
