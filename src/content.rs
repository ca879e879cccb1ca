//! Content rules applied before anything is stored: normalisation, credential
//! refusal, retention-tier assignment, and the audiences sensitive and secret
//! memories are pinned to ([`PrivacyConfig`]). Pure functions, no IO.
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

/// Characters that render like ASCII ones but are not: Cyrillic and Greek
/// look-alikes, dashes and colons of other scripts. Credential matching maps
/// them to the ASCII character first, so `pаssword` with a Cyrillic `а` or
/// `sk‑…` with a non-breaking hyphen is caught like the plain spelling.
fn confusable(c: char) -> Option<char> {
    Some(match c {
        // Dashes and minus signs.
        '\u{2010}'..='\u{2015}'
        | '\u{2043}'
        | '\u{2212}'
        | '\u{02d7}'
        | '\u{fe58}'
        | '\u{fe63}'
        | '\u{ff0d}'
        | '\u{2e3a}'
        | '\u{2e3b}'
        | '\u{30fc}' => '-',
        // Colons and ratio signs.
        '\u{2236}' | '\u{a789}' | '\u{fe13}' | '\u{fe55}' | '\u{ff1a}' | '\u{0589}'
        | '\u{05c3}' | '\u{02d0}' | '\u{02f8}' => ':',
        // Cyrillic look-alikes.
        'а' | 'А' => 'a',
        'в' | 'В' => 'b',
        'е' | 'Е' | 'ё' | 'Ё' => 'e',
        'һ' | 'Һ' | 'Н' => 'h',
        'і' | 'І' | 'ӏ' | 'Ӏ' => 'i',
        'ј' | 'Ј' => 'j',
        'к' | 'К' => 'k',
        'М' | 'м' => 'm',
        'о' | 'О' => 'o',
        'р' | 'Р' => 'p',
        'ԛ' | 'Ԛ' => 'q',
        'ѕ' | 'Ѕ' => 's',
        'с' | 'С' => 'c',
        'т' | 'Т' => 't',
        'у' | 'У' => 'y',
        'х' | 'Х' => 'x',
        'ԁ' => 'd',
        'ԝ' | 'Ԝ' => 'w',
        // Greek look-alikes.
        'α' | 'Α' => 'a',
        'Β' | 'β' => 'b',
        'Ε' | 'ε' => 'e',
        'Ζ' => 'z',
        'Η' => 'h',
        'Ι' | 'ι' => 'i',
        'Κ' | 'κ' => 'k',
        'Μ' => 'm',
        'Ν' | 'ν' => 'v',
        'Ο' | 'ο' => 'o',
        'Ρ' | 'ρ' => 'p',
        'Τ' | 'τ' => 't',
        'Υ' | 'υ' => 'y',
        'Χ' | 'χ' => 'x',
        _ => return None,
    })
}

/// The text credential patterns are matched against: NFKC (full-width
/// letters, digits, colons and equals signs become ASCII), confusables mapped
/// to ASCII, invisible characters (zero-width spaces and joiners, soft
/// hyphens, BOM) removed, lowercased. Only ever used for matching.
pub(crate) fn credential_view(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfkc()
        .filter(|c| !matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}' | '\u{034f}'))
        .map(|c| confusable(c).unwrap_or(c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// How a pattern's match is confirmed.
#[derive(Clone, Copy)]
enum Confirm {
    /// The match alone is enough.
    Always,
    /// Capture group `v` must look like a secret value (see [`secret_like`]).
    Value,
    /// Capture group `v` must contain a digit.
    Digits,
}

struct CredentialPattern {
    what: &'static str,
    re: Regex,
    confirm: Confirm,
}

/// Whether a value after `password is` / `token:` looks like a secret rather
/// than a word of a sentence ("the password is on the note"): at least four
/// characters and a digit, or a symbol among letters.
fn secret_like(value: &str) -> bool {
    let value =
        value.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '.' | ',' | ';' | '。' | '，'));
    value.chars().count() >= 4
        && (value.chars().any(|c| c.is_ascii_digit())
            || (value.chars().any(|c| c.is_ascii_alphabetic())
                && value.chars().any(|c| "!@#$%^&*+=?~|<>{}[]\\/".contains(c))))
}

/// Words that introduce a password-like value, English and Chinese. English
/// words must not follow a letter (`spin`, `shipping`); `DB_PASSWORD` counts.
const PASSWORD_WORDS: &str = r"(?:(?:^|[^a-z])(?:passwords?|passwd|pwd|pass ?phrase|pass ?code|pass ?word|p[a@4]ss ?w[o0]rds?|pin(?: ?code| ?number|码|碼)?)|密\s?[码碼]|口令|验证码|驗證碼|校验码|动态码|安全码)";

/// Words that introduce an API credential.
const KEY_WORDS: &str = r"(?:(?:^|[^a-z])(?:api[_ -]?key|apikey|api[_ -]?token|secret[_ -]?key|secret[_ -]?access[_ -]?key|client[_ -]?secret|access[_ -]?token|refresh[_ -]?token|auth[_ -]?token|private[_ -]?key|token|secret))";

static CREDENTIALS: LazyLock<Vec<CredentialPattern>> = LazyLock::new(|| {
    let p = |what: &'static str, confirm: Confirm, re: &str| CredentialPattern {
        what,
        re: Regex::new(re).expect("static credential pattern compiles"),
        confirm,
    };
    // Every pattern runs on `credential_view`: lowercase ASCII look-alikes.
    vec![
        p(
            "a private key block",
            Confirm::Always,
            r"-----\s*begin [a-z0-9 ]*private key(?: block)?\s*-----",
        ),
        p(
            "an AWS access key id",
            Confirm::Always,
            r"\b(?:akia|asia|agpa|aida|aroa|aipa|anpa|anva|apka)[0-9a-z]{16}\b",
        ),
        p(
            "a GitHub token",
            Confirm::Always,
            r"\b(?:ghp|gho|ghu|ghs|ghr)[_-][a-z0-9]{30,}|\bgithub_pat_[a-z0-9_]{20,}",
        ),
        p(
            "a GitLab token",
            Confirm::Always,
            r"\b(?:glpat|gldt|glrt|glptt|glsoat|glcbt)-[a-z0-9_-]{10,}",
        ),
        p(
            "a Google API key",
            Confirm::Always,
            r"\baiza[0-9a-z_-]{20,}",
        ),
        p(
            "a Slack token",
            Confirm::Always,
            r"\bxox[abposre]-[a-z0-9-]{10,}|\bxapp-[0-9]-[a-z0-9-]{10,}",
        ),
        p(
            "an API secret key",
            Confirm::Digits,
            r"\bsk-(?:proj-|svcacct-|admin-|ant-(?:[a-z]+\d\d-)?)?(?P<v>[a-z0-9_]{10,})",
        ),
        p(
            "a Stripe secret key",
            Confirm::Always,
            r"\b(?:sk|rk)_(?:live|test)_[a-z0-9]{10,}|\bwhsec_[a-z0-9]{20,}",
        ),
        p(
            "a package registry token",
            Confirm::Always,
            r"\bnpm_[a-z0-9]{30,}|\bhf_[a-z0-9]{30,}|\bpypi-[a-z0-9_-]{30,}",
        ),
        p(
            "a memd token",
            Confirm::Always,
            r"\bmh_[0-9a-f]{16,}|\bmh[ -][0-9a-f]{32,}",
        ),
        p(
            "a JSON Web Token",
            Confirm::Always,
            r"\beyj[a-z0-9_-]{10,}\.eyj[a-z0-9_-]{10,}\.[a-z0-9_-]{10,}",
        ),
        p(
            "an Authorization header",
            Confirm::Always,
            r"authorization\s*:\s*(?:basic|bearer|token|digest|negotiate)\s+\S{6,}|\bbearer\s+[a-z0-9._~+/=-]{20,}",
        ),
        p(
            "a URL with a password",
            Confirm::Always,
            r"\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@]*:[^\s/@]{2,}@[^\s/@]+",
        ),
        p(
            "a password",
            Confirm::Always,
            &format!(r#"{PASSWORD_WORDS}["']?\s*(?:=|=>|:=)\s*["']?[^\s"']{{4,}}"#),
        ),
        p(
            "a credential assignment",
            Confirm::Value,
            &format!(r#"{KEY_WORDS}["']?\s*(?:=|=>|:=)\s*(?P<v>["']?[^\s"']{{6,}})"#),
        ),
        p(
            "a credential",
            Confirm::Value,
            &format!(r#"{KEY_WORDS}["']?\s*:\s*(?P<v>["']?[^\s"']{{8,}})"#),
        ),
        p(
            "a password",
            Confirm::Value,
            &format!(
                r#"{PASSWORD_WORDS}\s*(?:(?:is|was|:|是|为|為|-|–|—|→|->|=>)\s*)*(?:["'“‘「]\s*)?(?P<v>[\x21-\x7e]{{4,}})"#
            ),
        ),
        p(
            "a password",
            Confirm::Digits,
            r"(?:密\s?[码碼]|口令|验证码|驗證碼|校验码|动态码|安全码|(?:^|[^a-z])(?:pin(?: ?code| ?number|码|碼)?|pass ?code))\s*(?:is\s+|是\s*|为\s*)?(?P<v>\d{4,12})(?:\D|$)",
        ),
        p(
            "a password",
            Confirm::Value,
            r#"(?:^|[^a-z])pass\s*[:=]\s*["']?(?P<v>[\x21-\x7e]{4,})"#,
        ),
    ]
});

/// If `text` looks like it contains a credential, what kind.
pub fn detect_credential(text: &str) -> Option<&'static str> {
    let view = credential_view(text);
    CREDENTIALS.iter().find_map(|p| {
        let hit = match p.confirm {
            Confirm::Always => p.re.is_match(&view),
            Confirm::Value => {
                p.re.captures_iter(&view)
                    .any(|c| c.name("v").is_some_and(|v| secret_like(v.as_str())))
            }
            Confirm::Digits => p.re.captures_iter(&view).any(|c| {
                // A long run is random enough by itself; a short one needs a digit.
                c.name("v").is_some_and(|v| {
                    v.len() >= 20
                        || (v.len() >= 4 && v.as_str().chars().any(|ch| ch.is_ascii_digit()))
                })
            }),
        };
        hit.then_some(p.what)
    })
}

/// If a memory's text, title or tags look like they contain a credential:
/// which field and what kind. Tags are checked one by one and together.
pub(crate) fn detect_credential_in(
    text: &str,
    title: Option<&str>,
    tags: &[String],
) -> Option<(&'static str, &'static str)> {
    if let Some(what) = detect_credential(text) {
        return Some(("text", what));
    }
    if let Some(what) = title.and_then(detect_credential) {
        return Some(("title", what));
    }
    tags.iter()
        .find_map(|t| detect_credential(t))
        .or_else(|| detect_credential(&tags.join(" ")))
        .map(|what| ("tags", what))
}

/// The refusal of a memory that holds a credential: names the field and the
/// kind, never the value, and says how to keep it on purpose.
pub(crate) fn credential_refusal(field: &str, what: &str) -> crate::Error {
    crate::Error::invalid(format!(
        "the {field} appears to contain {what}; memories are kept in an append-only journal, \
         so credentials are refused unless written with privacy \"secret\" (needs the \
         \"secret:write\" scope). Remove the secret and write again"
    ))
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

    /// Every probe of the credential audit (and the common key formats) is refused.
    #[test]
    fn credentials_are_detected() {
        let hits = [
            // Probes that used to be stored.
            "my password is hunter22xyz",
            "password：hunter22xyz",
            "PIN: 847362",
            "支付密码 883920",
            "sk\u{2011}abc123def456ghi",
            "sk-abc123def456",
            "key akiaiosfodnn7example for s3",
            "glpat-xxxxxxxxxxxxxxxxxxxx",
            "AIzaSyA1234567890abcdefghijklmnopqrstu",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF...",
            "postgres://user:pass@db.example.com:5432/app",
            "Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "token mh_0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
            // Look-alikes: full-width, Cyrillic, non-ASCII hyphens, invisible characters.
            "ｐａｓｓｗｏｒｄ：ｈｕｎｔｅｒ２２",
            "p\u{0430}ssword: hunter22",
            "p\u{200b}assword=hunter22",
            "\u{2014}\u{2014}\u{2014}\u{2014}\u{2014}BEGIN RSA PRIVATE KEY\u{2014}\u{2014}\u{2014}\u{2014}\u{2014}",
            "密码：Qwerty2024",
            // Key formats.
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----",
            "key AKIAIOSFODNN7EXAMPLE for s3",
            "ASIAY34FZKBOKMUTVV7A temporary",
            "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "gho_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "use sk-proj-abcdefghijklmnopqrstuvwx123 for the api",
            "sk-ant-api03-abcdefghij0123456789abcdefghij",
            "stripe sk_live_51H8abcdefghijklmnop",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.123",
            "curl -H 'authorization: token 0123456789abcdef'",
            "mysql://root:toor@localhost:3306/db",
            "https://admin:s3cret@example.com/",
            "redis://:p4ssw0rd@cache:6379",
            // Password words with a value.
            "password=hunter22",
            "DB_PASSWORD=correcthorse",
            "api_key: 'abcdef123456'",
            "client_secret = 9f8e7d6c5b4a",
            "the wifi passcode 4821",
            "my PIN is 1234",
            "pin code 847362",
            "我的密码是 qwerty123",
            "银行卡密码：123456",
            "口令：open2024sesame",
            "验证码 529301",
            "验证码是529301，五分钟内有效",
            "passwd: abc!defg",
            "Passphrase is 'purple-monkey-42'",
            // Red-team bypasses of the first version.
            "wifi password hunter2",
            "password - hunter2",
            "password → hunter2",
            "p@ssword: hunter2",
            "passw0rd: hunter2",
            "pass: hunter2",
            "密碼是123456",
            "密 码 123456",
            "登录口令 abc123",
            "PIN码是1234",
            "ghp-abcdefghijklmnopqrstuvwxyz0123456789",
            "mh 6488cf3a6b1d4e2f8a9c0b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f",
        ];
        for text in hits {
            assert!(detect_credential(text).is_some(), "should refuse: {text}");
        }
        assert!(hits.len() >= 38);
    }

    /// Ordinary sentences about passwords, keys and codes are kept.
    #[test]
    fn sentences_about_credentials_are_kept() {
        let fine = [
            "I forgot my password yesterday",
            "I use 1Password 8 on my Mac",
            "password manager recommendations for the family",
            "my password hint is the name of my first dog",
            "the pass is valid until June",
            "boarding pass: gate B12 opens at 9",
            "密码学课程很难，但是很有意思",
            "I forgot my password again, need to reset it",
            "PIN code of the door is on the note in the kitchen",
            "The PIN is 4 digits long",
            "Change your password every 90 days",
            "the password is on the sticky note",
            "the password is too short, use 12 characters",
            "password must be at least 8 characters",
            "The token economy talk was great",
            "max tokens: 4096",
            "ask-me-anything session on Friday",
            "secret: the surprise party is on Sunday",
            "we use scikit-learn, sk-learn-tutorial-2024 was useful",
            "I have a basic understanding of cryptography",
            "bearer bonds were common in the 1920s",
            "see https://example.com:8080/docs for the API key setup",
            "the API key rotation policy is quarterly",
            "use `pwd` to print the working directory",
            "spinning class at 1830",
            "shipping: 3 days",
            "Password managers like 1Password are useful",
            "my email password and bank password are different",
            "密码学课程很有意思",
            "我昨天忘记了密码",
            "密码至少 8 位，包含数字和字母",
            "密码是8位数字",
            "Wi-Fi 名称 HomeNet，密码在路由器背面",
            "验证码已发送到手机",
            "验证码 5 分钟内有效",
            "动态码已过期，请重新获取",
            "口令要定期更换",
            "支付密码忘了，要去银行重置",
            "她的生日是 1990 年 3 月 12 日",
            "会议室 PIN 码在前台",
            "token 限额是每分钟 100 次",
            "AKIA is the prefix of AWS access key ids",
            "the group chat 123456789 talked about hiking",
        ];
        for text in fine {
            assert_eq!(detect_credential(text), None, "should keep: {text}");
        }
        assert!(fine.len() >= 30);
    }

    #[test]
    fn titles_and_tags_are_checked_and_refusals_never_echo_the_value() {
        let tags = |t: &[&str]| t.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        assert_eq!(detect_credential_in("plain note", None, &[]), None);
        assert_eq!(
            detect_credential_in("plain note", Some("password: hunter22xyz"), &[]),
            Some(("title", "a password"))
        );
        assert_eq!(
            detect_credential_in(
                "plain note",
                None,
                &tags(&["work", "ghp_abcdefghijklmnopqrstuvwxyz0123"])
            ),
            Some(("tags", "a GitHub token"))
        );
        assert_eq!(
            detect_credential_in("my password is hunter22xyz", Some("ok"), &[]).map(|h| h.0),
            Some("text")
        );
        let msg = credential_refusal("text", "a password").to_string();
        assert!(
            msg.contains("secret:write") && !msg.contains("hunter"),
            "{msg}"
        );
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
