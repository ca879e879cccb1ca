//! Content rules applied before anything is stored: normalisation, credential
//! refusal, retention-tier assignment, and the audiences sensitive and secret
//! memories are pinned to ([`PrivacyConfig`]). Pure functions, no IO.
//!
//! - [`normalize_content`]: control characters stripped (tab and newlines
//!   kept), CRLF → LF, trailing spaces per line removed, runs of blank lines
//!   folded to one, the whole text trimmed. Dedup hashes are taken after this.
//! - [`detect_credential`] (`credentials.rs`): text that holds an API key,
//!   access token, private key or password, by vendor format, keyword and
//!   value, or entropy; [`in_record`] (`records.rs`) runs it over every field
//!   of a record, the one check every way in applies (a write, an ingest, an
//!   import, a replayed journal line, a document, a forget's reason, group
//!   members), because the journal is append-only: a secret written once
//!   stays on disk. A refusal names the field and the kind, never the value.
//! - [`assign_tier`]: explicit tier > category (T0) > kind/source heuristics >
//!   transient patterns (T3) > foundational keywords (T0) > T2.

mod credentials;
mod records;

pub use credentials::detect_credential;
pub use records::{CredentialHit, Replay, in_record, replay_verdict};
pub(crate) use records::{FieldKind, content_fields, in_fact, scan};

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::model::{Scene, Tier};

/// Normalises text before hashing, dedup and storage.
pub fn normalize_content(text: &str) -> String {
    let cleaned: String = text
        .replace("\r\n", "\n")
        .chars()
        .filter(|&c| !matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'))
        .collect();
    let mut out = String::with_capacity(cleaned.len());
    let mut blank_run = 0;
    for line in cleaned.split('\n') {
        let line = line.trim_end_matches([' ', '\t', '\r']);
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

static TRANSIENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        \b(jira|incident|case|ticket|bug)[-\ \#]?\d+\b
        | (?-i:\b[A-Z]{2,10}-\d{1,6}\b)
        | ^\s*(from|subject|fw|fwd|re)\s*:
        | \b(today|tonight|tomorrow|this\ week|by\ (monday|tuesday|wednesday|thursday|friday)|standup|stand-up|meeting\ minutes|action\ items)\b
        | \bq[1-4]\ 20\d\d\b
        | 今天|明天|今晚|本周|这周|周会|站会|会议纪要|待办事项",
    )
    .expect("static transient pattern compiles")
});

static FOUNDATIONAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(architecture|design decision|adr|rfc|contract|schema|legal|compliance|policy|standard|accounting|security|runbook)\b|架构|设计决策|合同|合规|法律|安全规范|规章|制度",
    )
    .expect("static foundational pattern compiles")
});

/// Kinds that describe how to do something; kept a year.
const PROCEDURAL_KINDS: &[&str] = &["procedure", "procedural", "runbook", "howto", "guide"];
/// Kinds that record something that happened.
const EPISODIC_KINDS: &[&str] = &["event", "chat", "episode"];

/// Inputs of tier assignment.
#[derive(Debug, Clone, Copy)]
pub struct TierInput<'a> {
    /// A tier the caller asked for.
    pub(crate) explicit: Option<Tier>,
    /// Whether the memory fills a category slot.
    pub(crate) category: bool,
    /// Who writes it (`cli`, `main`, `qq`, `sleep`, `import`, …).
    pub(crate) source: &'a str,
    /// The kind word.
    pub(crate) kind: &'a str,
    /// The normalised text.
    pub(crate) text: &'a str,
    /// Its tags.
    pub(crate) tags: &'a [String],
}

/// Picks the retention tier of a long-term memory.
pub fn assign_tier(input: TierInput<'_>) -> Tier {
    if let Some(t) = input.explicit {
        return t;
    }
    if input.category {
        return Tier::T0;
    }
    if input.source == "cli" {
        return Tier::T2;
    }
    if PROCEDURAL_KINDS.contains(&input.kind) {
        return Tier::T1;
    }
    if EPISODIC_KINDS.contains(&input.kind) {
        return Tier::T2;
    }
    let tags = input.tags.join(" ");
    if TRANSIENT.is_match(input.text) || TRANSIENT.is_match(&tags) {
        return Tier::T3;
    }
    if FOUNDATIONAL.is_match(input.text) || FOUNDATIONAL.is_match(&tags) {
        return Tier::T0;
    }
    Tier::T2
}

/// Audiences that sensitive and secret memories are pinned to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PrivacyConfig {
    /// Scenes a `sensitive` memory may live in.
    pub(crate) sensitive_audiences: Vec<Scene>,
    /// Scenes a `secret` memory may live in.
    pub(crate) secret_audiences: Vec<Scene>,
}

impl Default for PrivacyConfig {
    fn default() -> Self {
        let scene = |s: &str| Scene::parse(s).expect("built-in scene names are valid");
        PrivacyConfig {
            sensitive_audiences: vec![scene("main"), scene("qq:owner")],
            secret_audiences: vec![scene("main")],
        }
    }
}

impl PrivacyConfig {
    /// The pins as the write rules read them ([`crate::model::Pins`]).
    pub(crate) fn pins(&self) -> crate::model::Pins<'_> {
        crate::model::Pins {
            sensitive: &self.sensitive_audiences,
            secret: &self.secret_audiences,
        }
    }

    /// Refuses a `sensitive` or `secret` memory outside the audiences its
    /// level is pinned to (the one pin rule, [`crate::model::Pins::check`]).
    pub(crate) fn check_pinned(
        &self,
        privacy: crate::model::Privacy,
        scene: &Scene,
    ) -> crate::Result<()> {
        self.pins().check(privacy, scene)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_table() {
        for (input, want) in [
            ("  hello  ", "hello"),
            ("a\r\nb", "a\nb"),
            ("a   \nb\t", "a\nb"),
            ("a\n\n\n\nb", "a\n\nb"),
            ("x\u{0}y\u{7}z\u{7f}", "xyz"),
            ("tab\tinside", "tab\tinside"),
            ("\n\n  lead and trail \n\n", "lead and trail"),
            ("中文\r\n\r\n\r\n内容 ", "中文\n\n内容"),
        ] {
            assert_eq!(normalize_content(input), want, "{input:?}");
        }
    }

    #[test]
    fn tier_rules_in_order() {
        let tags: Vec<String> = vec![];
        let t = |explicit, category, source, kind, text| {
            assign_tier(TierInput {
                explicit,
                category,
                source,
                kind,
                text,
                tags: &tags,
            })
        };
        assert_eq!(
            t(Some(Tier::T3), true, "main", "note", "architecture"),
            Tier::T3
        );
        assert_eq!(t(None, true, "main", "note", "standup today"), Tier::T0);
        assert_eq!(t(None, false, "cli", "note", "standup today"), Tier::T2);
        assert_eq!(
            t(None, false, "main", "runbook", "restart the db"),
            Tier::T1
        );
        assert_eq!(t(None, false, "main", "event", "standup today"), Tier::T2);
        assert_eq!(
            t(None, false, "main", "note", "JIRA-1234 fix the login"),
            Tier::T3
        );
        assert_eq!(t(None, false, "main", "note", "Subject: lunch"), Tier::T3);
        assert_eq!(t(None, false, "main", "note", "明天下午开周会"), Tier::T3);
        assert_eq!(
            t(
                None,
                false,
                "main",
                "note",
                "our security policy requires 2FA"
            ),
            Tier::T0
        );
        assert_eq!(
            t(None, false, "main", "note", "architecture review for today"),
            Tier::T3
        );
        assert_eq!(t(None, false, "main", "note", "likes green tea"), Tier::T2);
        assert_eq!(
            t(None, false, "main", "note", "had covid-19 last year"),
            Tier::T2
        );
    }
}
