//! Content policy applied before anything is stored: normalisation, credential
//! refusal, and retention-tier assignment. Pure functions, no IO.
//!
//! - [`normalize_content`]: control characters stripped (tab and newlines
//!   kept), CRLF → LF, trailing spaces per line removed, runs of blank lines
//!   folded to one, the whole text trimmed. Dedup hashes are taken after this.
//! - [`detect_credential`]: text that looks like an API key, access token,
//!   private key or `password=` assignment is refused with `INVALID_INPUT`,
//!   because the journal is append-only: a secret written once stays on disk.
//! - [`assign_tier`]: explicit tier > category (T0) > kind/source heuristics >
//!   transient patterns (T3) > foundational keywords (T0) > T2.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::Tier;

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

struct CredentialPattern {
    what: &'static str,
    re: Regex,
}

static CREDENTIALS: LazyLock<Vec<CredentialPattern>> = LazyLock::new(|| {
    let p = |what: &'static str, re: &str| CredentialPattern {
        what,
        re: Regex::new(re).expect("static credential pattern compiles"),
    };
    vec![
        p("a PEM private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
        p("an AWS access key id", r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
        p(
            "a GitHub token",
            r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{30,}",
        ),
        p(
            "an API secret key",
            r"\bsk-(proj-|ant-)?[A-Za-z0-9_\-]{20,}",
        ),
        p("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        p(
            "a JSON Web Token",
            r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        ),
        p("a bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{20,}"),
        p(
            "a credential assignment",
            r#"(?i)\b(api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token|token|secret|password|passwd|pwd)\s*[:=]\s*["']?[^\s"']{6,}"#,
        ),
        p("a password", r"(密码|口令)\s*[:：=是为]\s*\S{4,}"),
    ]
});

/// If `text` looks like it contains a credential, what kind.
pub fn detect_credential(text: &str) -> Option<&'static str> {
    CREDENTIALS
        .iter()
        .find(|p| p.re.is_match(text))
        .map(|p| p.what)
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
    pub explicit: Option<Tier>,
    /// Whether the memory fills a category slot.
    pub category: bool,
    /// Who writes it (`cli`, `main`, `qq`, `sleep`, `import`, …).
    pub source: &'a str,
    /// The kind word.
    pub kind: &'a str,
    /// The normalised text.
    pub text: &'a str,
    /// Its tags.
    pub tags: &'a [String],
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
    fn credentials_are_detected() {
        let hits = [
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
            "key AKIAIOSFODNN7EXAMPLE for s3",
            "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "use sk-proj-abcdefghijklmnopqrstuvwx123 for the api",
            "password=hunter22",
            "api_key: 'abcdef123456'",
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.123",
            "我的密码是 qwerty123",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ];
        for text in hits {
            assert!(detect_credential(text).is_some(), "{text}");
        }
        let fine = [
            "I forgot my password again, need to reset it",
            "The token economy talk was great",
            "密码学课程很有意思",
            "ask-me-anything session on Friday",
            "secret: the surprise party is on Sunday",
        ];
        for text in fine {
            assert_eq!(detect_credential(text), None, "{text}");
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
