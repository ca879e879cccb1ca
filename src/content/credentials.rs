//! Credential detection: does a piece of text hold a secret value?
//!
//! The journal is append-only and copied to every device, so a credential
//! written once stays on disk for good; memd refuses one at the door instead.
//! Three tests, each run on a matching view of the text (NFKC, so full-width
//! letters and colons are ASCII; look-alike Cyrillic and Greek letters,
//! dashes and colons mapped to ASCII; zero-width characters and soft hyphens
//! removed):
//!
//! - **Vendor formats** ([`VENDORS`]): the shapes of real keys and tokens
//!   (GitHub, GitLab, AWS, Google, OpenAI-style `sk-`, Stripe, Slack,
//!   Aliyun, Tencent Cloud, Azure, SendGrid, Telegram, Discord, private key
//!   blocks, JSON Web Tokens, URLs with a password, ... and memd's own
//!   `mh_` tokens), also when a token is cut by dashes or line breaks.
//! - **Keyword and value**: a word that introduces a secret (`password`,
//!   `passwd`, `PIN`, `密码`, `口令`, `验证码`, `api key`, `token`,
//!   `client secret`, `密钥`, ... in any spelling: `p@ssw0rd`, `pass word`,
//!   `DB_PASSWORD`) followed by a value: right after it, or after a
//!   connector (`is`, `:`, `=`, `是`, `为`, `改成了`, ...), possibly behind
//!   a short `for my bank` clause. The value must look like a secret, not a
//!   word of a sentence: digits, symbols among letters, a capital inside a
//!   word, or quotes ("the password is on the note" is kept; "the password
//!   is hunter2" is not). Command lines count too: `curl -u user:pass`,
//!   `mysql -phunter2`, `sshpass -p`, `--password=`.
//! - **Entropy**: a bare run of 20 or more letters, digits and `+/_-=`
//!   that mixes upper case, lower case and digits, switches between them
//!   like random text does and carries enough bits per character is taken
//!   for a key of a format not listed. Hex (git hashes), UUIDs, words inside
//!   URLs (share links), Bitcoin addresses and integrity hashes are not.
//!   Identifier fields (idempotency keys, session and message ids) skip this
//!   test: a random id is what they are meant to hold.
//!
//! The labelled probe set `tests/fixtures/credential-probes.jsonl` (English
//! and Chinese credentials and hard benign lines) measures the three together
//! (`tests/integration/credentials.rs`).

use std::sync::LazyLock;

use regex::Regex;

use crate::base::patterns::Patterns;

/// Characters that render like ASCII ones but are not: Cyrillic and Greek
/// look-alikes, dashes and colons of other scripts, mapped to the lower-case
/// ASCII character.
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

/// Characters that do not render: removed before matching.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}' | '\u{034f}')
}

/// The two views the tests run on, with the same byte offsets: `lower` for
/// patterns, `cased` where case matters (values, entropy).
struct View {
    lower: String,
    cased: String,
}

impl View {
    fn of(text: &str) -> View {
        use unicode_normalization::UnicodeNormalization;
        if text.is_ascii() {
            // NFKC, look-alikes and invisibles only concern other characters.
            return View {
                lower: text.to_ascii_lowercase(),
                cased: text.to_string(),
            };
        }
        let mut lower = String::with_capacity(text.len());
        let mut cased = String::with_capacity(text.len());
        for c in text.nfkc().filter(|&c| !invisible(c)) {
            let mapped = match confusable(c) {
                Some(a) if c.is_uppercase() => a.to_ascii_uppercase(),
                Some(a) => a,
                None => c,
            };
            // Lower case only where it keeps the length, so offsets agree.
            let mut low = mapped.to_lowercase();
            let l = match (low.next(), low.next()) {
                (Some(l), None) if l.len_utf8() == mapped.len_utf8() => l,
                _ => mapped,
            };
            lower.push(l);
            cased.push(mapped);
        }
        View { lower, cased }
    }
}

/// How a vendor pattern's match is confirmed.
#[derive(Clone, Copy)]
enum Confirm {
    /// The match alone is enough.
    Always,
    /// Capture group `v` must contain a digit (or be 20+ characters).
    Digits,
    /// Capture group `v` (a command-line value) must not be a variable or placeholder.
    Literal,
    /// Capture group `v` must look like a secret ([`secret_like`]).
    Value,
}

/// One vendor (or command-line) format.
struct Vendor {
    what: &'static str,
    re: &'static str,
    confirm: Confirm,
}

const fn v(what: &'static str, re: &'static str) -> Vendor {
    Vendor {
        what,
        re,
        confirm: Confirm::Always,
    }
}

const fn vc(what: &'static str, confirm: Confirm, re: &'static str) -> Vendor {
    Vendor { what, re, confirm }
}

/// Known credential formats, matched on the lower-case view. Every pattern
/// is specific enough to stand alone (a prefix, a fixed shape or a keyword).
const VENDORS: &[Vendor] = &[
    v(
        "a private key block",
        r"-----\s*begin [a-z0-9 ]*private key(?: block)?\s*-----|\bputty-user-key-file-\d|\bage-secret-key-1[0-9a-z]{50,}",
    ),
    v(
        "an AWS access key id",
        r"\b(?:akia|asia|agpa|aida|aroa|aipa|anpa|anva|apka)[0-9a-z]{16}\b",
    ),
    v(
        "a GitHub token",
        r"\bgh[pousr][_-][a-z0-9]{30,}|\bgithub_pat_[a-z0-9_]{20,}",
    ),
    v(
        "a GitLab token",
        r"\b(?:glpat|gldt|glrt|glptt|glsoat|glcbt|glimt|glagent|gloas)-[a-z0-9_-]{10,}",
    ),
    v(
        "a Google credential",
        r"\baiza[0-9a-z_-]{20,}|\bgocspx-[a-z0-9_-]{20,}|\bya29\.[0-9a-z_-]{30,}|\b1//0[0-9a-z_-]{30,}",
    ),
    v(
        "a Slack token",
        r"\bxox[abposre]-[a-z0-9-]{10,}|\bxapp-[0-9]-[a-z0-9-]{10,}|hooks\.slack\.com/(?:services|workflows)/t[a-z0-9_]+/[a-z0-9_]+/[a-z0-9]{12,}",
    ),
    vc(
        "an API secret key",
        Confirm::Digits,
        r"\bsk-(?:proj-|svcacct-|admin-|ant-(?:[a-z]+\d\d-)?|or-v1-)?(?P<v>[a-z0-9_]{10,})",
    ),
    v(
        "a Stripe secret key",
        r"\b(?:sk|rk)_(?:live|test)_[a-z0-9]{10,}|\bwhsec_[a-z0-9]{20,}",
    ),
    v(
        "a package registry token",
        r"\bnpm_[a-z0-9]{30,}|\bhf_[a-z0-9]{30,}|\bpypi-[a-z0-9_-]{30,}|\brubygems_[0-9a-f]{40,}|\boy2[a-z0-9]{43}\b",
    ),
    v("a memd token", r"\bmh_[0-9a-f]{16,}|\bmh[ -][0-9a-f]{32,}"),
    v(
        "a JSON Web Token",
        r"\beyj[a-z0-9_-]{10,}\.eyj[a-z0-9_-]{10,}\.[a-z0-9_-]{10,}",
    ),
    vc(
        "an Authorization header",
        Confirm::Literal,
        r"authorization\s*:\s*(?:basic|bearer|token|digest|negotiate)\s+(?P<v>\S{6,})|\bbearer\s+(?P<v2>[a-z0-9._~+/=-]{20,})",
    ),
    vc(
        "a URL with a password",
        Confirm::Literal,
        r"\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@]*:(?P<v>[^\s/@]{2,})@[^\s/@]+",
    ),
    v("an Alibaba Cloud AccessKey", r"\bltai[0-9a-z]{12,24}\b"),
    v("a Tencent Cloud SecretId", r"\bakid[0-9a-z]{32,34}\b"),
    v(
        "an Azure key",
        r"\baccountkey\s*=\s*[a-z0-9+/]{40,}={0,2}|\bsharedaccesskey\s*=\s*[a-z0-9+/]{30,}={0,2}|[?&]sig=[a-z0-9%+/]{30,}|\b[a-z0-9_~.-]{3}\dq~[a-z0-9_~.-]{31,34}",
    ),
    v(
        "a SendGrid key",
        r"\bsg\.[a-z0-9_-]{16,32}\.[a-z0-9_-]{30,50}",
    ),
    v("a Telegram bot token", r"\b\d{8,10}:aa[a-z0-9_-]{31,34}"),
    v(
        "a Discord token",
        r"\b[mno][a-z0-9_-]{23,27}\.[a-z0-9_-]{6}\.[a-z0-9_-]{27,40}|discord(?:app)?\.com/api/webhooks/\d+/[a-z0-9_-]{40,}",
    ),
    v(
        "a Twilio, Mailgun or Mailchimp key",
        r"\bsk[0-9a-f]{32}\b|\bkey-[0-9a-z]{32}\b|\b[0-9a-f]{32}-us\d{1,2}\b",
    ),
    v(
        "a Shopify or Square token",
        r"\bshp(?:at|ss|ca|pa)_[0-9a-f]{32}\b|\bsq0(?:atp|csp)-[0-9a-z_-]{22,}|\beaaa[a-z0-9_-]{60}\b",
    ),
    v(
        "a cloud platform token",
        r"\bdo[opr]_v1_[0-9a-f]{64}\b|\bdapi[0-9a-f]{32}\b|\batatt3[a-z0-9_=-]{100,}|\bhv[sb]\.[a-z0-9_-]{24,}|\b[a-z0-9]{14}\.atlasv1\.[a-z0-9_-]{60,}|\bdp\.(?:pt|st|sa|ct|scim|audit)\.[a-z0-9]{40,}|\bpscale_(?:tkn|pw|oauth)_[a-z0-9_.-]{32,}|\baklt[a-z0-9_-]{30,}",
    ),
    v(
        "a SaaS API token",
        r"\bsecret_[a-z0-9]{43}\b|\bntn_[a-z0-9]{40,}|\blin_api_[a-z0-9]{40}\b|\bfigd_[a-z0-9_-]{40,}|\bpmak-[0-9a-f]{24}-[0-9a-f]{34}\b|\bsntry[su]_[a-z0-9_=+/-]{40,}|\bglsa_[a-z0-9]{32}_[0-9a-f]{8}\b|\bglc_[a-z0-9+/=]{32,}|\bnrak-[a-z0-9]{27}\b|\bsl\.[a-z0-9_-]{130,}|\beaa[bcdgi][a-z0-9]{80,}|\ba{20,}[a-z0-9%]{30,}",
    ),
    v(
        "an AI service key",
        r"\br8_[a-z0-9]{37}\b|\bgsk_[a-z0-9]{50,}|\bxai-[a-z0-9]{60,}|\bpplx-[a-z0-9]{40,}|\b[0-9a-f]{32}\.[a-z0-9]{16}\b|\bbce-v3/altak-[a-z0-9]{10,}",
    ),
    v(
        "a chat bot webhook key",
        r"oapi\.dingtalk\.com/robot/send\?access_token=[0-9a-f]{32,}|qyapi\.weixin\.qq\.com/cgi-bin/webhook/send\?key=[0-9a-f-]{30,}|open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/[0-9a-f-]{30,}",
    ),
    vc(
        "a secret in a URL",
        Confirm::Value,
        r"[?&](?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|client[_-]?secret|password|passwd|pwd|signature|sig|auth)=(?P<v>[^&#\s]{8,})",
    ),
    vc(
        "a password on a command line",
        Confirm::Literal,
        r#"\bcurl\b[^\n]*?\s(?:-u|--user)\s*['"]?[^\s:'"]+:(?P<v>[^\s'"]+)"#,
    ),
    vc(
        "a password on a command line",
        Confirm::Literal,
        r#"\b(?:mysql|mysqldump|mysqladmin|mariadb|mysqlsh|7z|7za|unrar|rar)\b[^\n]*?\s-p(?P<v>[^\s'"-][^\s'"]*)"#,
    ),
    vc(
        "a password on a command line",
        Confirm::Literal,
        r#"\b(?:sshpass|zip|docker\s+login|podman\s+login|mongo|mongosh)\b[^\n]*?\s-p\s+['"]?(?P<v>[^\s'"]+)|\bredis-cli\b[^\n]*?\s-a\s+['"]?(?P<v2>[^\s'"]+)"#,
    ),
    vc(
        "a password on a command line",
        Confirm::Literal,
        r#"--(?:password|passwd|pass|pwd|http-password|ftp-password)(?:=|\s+)['"]?(?P<v>[^\s'"-][^\s'"]*)"#,
    ),
    vc(
        "a password on a command line",
        Confirm::Literal,
        r"\bnet\s+user\s+\S+\s+(?P<v>[^\s/*]\S*)|\bsmbclient\b[^\n]*?\s-u\s+[^\s%]+%(?P<v2>\S+)|\bhtpasswd\s+-[a-z]*b[a-z]*\s+\S+\s+\S+\s+(?P<v3>\S+)",
    ),
    vc(
        "a login and password",
        Confirm::Value,
        r"(?:\blogin|\busername|\buser|\baccount|账号|账户|用户名|帳號)\b[^\n/]{0,40}?[:：]\s*\S+\s*/\s*(?P<v>\S{4,})",
    ),
    vc(
        "a password",
        Confirm::Value,
        r#"(?:^|[^a-z])pass\s*[:=]\s*["']?(?P<v>[\x21-\x7e]{4,})"#,
    ),
];

/// Vendor patterns compiled, with a set that finds which of them match in one pass.
struct Compiled {
    set: Patterns,
    each: Vec<Regex>,
}

/// A pattern with ASCII word boundaries: a Unicode `\b` keeps the fast
/// matching engines off any text that is not ASCII (most Chinese text).
fn ascii_boundaries(re: &str) -> String {
    re.replace(r"\b", r"(?-u:\b)")
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| Compiled {
    set: Patterns::new(
        &VENDORS
            .iter()
            .map(|v| ascii_boundaries(v.re))
            .collect::<Vec<_>>(),
    )
    .expect("vendor patterns compile"),
    each: VENDORS
        .iter()
        .map(|v| Regex::new(&ascii_boundaries(v.re)).expect("vendor pattern compiles"))
        .collect(),
});

/// A value that is a variable, a template or a mask, not a secret:
/// `$PASS`, `${PASS}`, `%(pw)s`, `<your password>`, `{{ pw }}`, `****`,
/// `xxxx`, `[REDACTED]`, a path.
fn placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c: char| matches!(c, '"' | '\'' | '`'));
    let lower = v.to_ascii_lowercase();
    let first = v.chars().next();
    first.is_none_or(|c| "$%<{[(/~*#".contains(c))
        || v.chars().all(|c| c == first.unwrap_or(' '))
        || [
            "xxxx",
            "****",
            "....",
            "…",
            "redacted",
            "placeholder",
            "your_",
            "your-",
            "yourpass",
        ]
        .iter()
        .any(|p| lower.contains(p))
        || lower.ends_with("_here")
}

/// Whether a value after `password is` / `token:` looks like a secret rather
/// than a word of a sentence ("the password is on the note"): at least four
/// characters and not a placeholder, with a digit, a symbol among letters, a
/// capital after a small letter, or quotes around it.
fn secret_like(value: &str, quoted: bool) -> bool {
    let v = value.trim_matches(|c: char| {
        matches!(
            c,
            '"' | '\''
                | '`'
                | '.'
                | ','
                | ';'
                | '。'
                | '，'
                | '('
                | ')'
                | '<'
                | '>'
                | '['
                | ']'
                | '{'
                | '}'
                | '「'
                | '」'
                | '“'
                | '”'
                | '‘'
                | '’'
                | '!'
                | '?'
        )
    });
    if v.chars().count() < 4 || placeholder(v) {
        return false;
    }
    let letters = v.chars().any(|c| c.is_ascii_alphabetic());
    let inner_capital = v
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    let first = v.chars().next().map_or(0, char::len_utf8);
    let last = v.chars().next_back().map_or(0, char::len_utf8);
    let inner = v.get(first..v.len() - last).unwrap_or("");
    quoted
        || v.chars().any(|c| c.is_ascii_digit())
        || inner_capital
        || (letters && inner.chars().any(|c| "!@#$%^&*+=?~|<>{}[]\\/".contains(c)))
}

/// Confirms one vendor match.
fn confirmed(confirm: Confirm, caps: &regex::Captures<'_>, cased: &str) -> bool {
    let value = ["v", "v2", "v3"].iter().find_map(|n| caps.name(n));
    match confirm {
        Confirm::Always => true,
        Confirm::Digits => value.is_some_and(|v| {
            v.len() >= 20 || (v.len() >= 4 && v.as_str().chars().any(|c| c.is_ascii_digit()))
        }),
        Confirm::Literal => {
            value.is_some_and(|v| v.as_str().chars().count() >= 3 && !placeholder(v.as_str()))
        }
        Confirm::Value => value.is_some_and(|v| {
            cased
                .get(v.range())
                .is_some_and(|orig| secret_like(orig, false))
        }),
    }
}

/// The first vendor format found in `view`.
fn vendor(view: &View) -> Option<&'static str> {
    let compiled = &*COMPILED;
    for i in compiled.set.matches(&view.lower) {
        let spec = &VENDORS[i];
        if compiled.each[i]
            .captures_iter(&view.lower)
            .any(|caps| confirmed(spec.confirm, &caps, &view.cased))
        {
            return Some(spec.what);
        }
    }
    None
}

/// A token format that is often cut when pasted: a prefix and a body of
/// one alphabet.
struct Split {
    what: &'static str,
    prefix: &'static str,
    /// Hex digits (else ASCII letters and digits, and `_` for `github_pat_`).
    hex: bool,
    /// Length of the whole body.
    body: usize,
}

const SPLITS: &[Split] = &[
    Split {
        what: "a memd token",
        prefix: "mh",
        hex: true,
        body: 64,
    },
    Split {
        what: "a GitHub token",
        prefix: "ghp_",
        hex: false,
        body: 36,
    },
    Split {
        what: "a GitHub token",
        prefix: "github_pat_",
        hex: false,
        body: 60,
    },
    Split {
        what: "a GitLab token",
        prefix: "glpat-",
        hex: false,
        body: 20,
    },
    Split {
        what: "an API secret key",
        prefix: "sk-",
        hex: false,
        body: 40,
    },
];

impl Split {
    fn in_body(&self, c: char) -> bool {
        if self.hex {
            c.is_ascii_hexdigit()
        } else {
            c.is_ascii_alphanumeric() || (c == '_' && self.prefix == "github_pat_")
        }
    }

    /// The body spelled by the pieces at the start of `rest`: runs of the
    /// alphabet (four or more characters after the first) cut by at most
    /// three dashes or line breaks, or by spaces where the body is hex (a
    /// run of ordinary words cannot spell 64 hex digits). Returns the body
    /// and the number of pieces.
    fn pieces(&self, rest: &str) -> (String, usize) {
        let mut body = String::new();
        let mut count = 0;
        let mut chars = rest.chars().peekable();
        loop {
            let mut piece = String::new();
            while let Some(&c) = chars.peek()
                && self.in_body(c)
            {
                piece.push(c);
                chars.next();
            }
            if piece.is_empty() || (count > 0 && piece.len() < 4) {
                break;
            }
            body.push_str(&piece);
            count += 1;
            if body.len() >= self.body {
                break;
            }
            let mut cut = String::new();
            while let Some(&c) = chars.peek()
                && cut.len() < 4
                && matches!(c, '-' | '_' | ' ' | '\t' | '\n' | '\r')
            {
                cut.push(c);
                chars.next();
            }
            let allowed = !cut.is_empty()
                && (self.hex || cut.contains('\n') || cut.chars().all(|c| c == '-'));
            if !allowed {
                break;
            }
        }
        (body, count)
    }
}

/// Tokens cut by dashes, spaces or line breaks (see [`Split`]): `mh_` + 64
/// hex cut in four, a `ghp_` token wrapped over two lines.
fn split_token(view: &View) -> Option<&'static str> {
    let lower = &view.lower;
    for split in SPLITS {
        for (at, _) in lower.match_indices(split.prefix) {
            let boundary = lower[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_ascii_alphanumeric());
            if !boundary {
                continue;
            }
            let rest = view.cased[at + split.prefix.len()..].trim_start_matches(['_', '-', ' ']);
            let (body, pieces) = split.pieces(rest);
            if pieces >= 2 && body.len() >= split.body && (split.hex || random_run(&body)) {
                return Some(split.what);
            }
        }
    }
    None
}

/// Words that introduce a password-like value (lower-case view). English
/// words must not follow a letter (`spin`, `shipping`); `DB_PASSWORD` counts.
const PASSWORD_WORDS: &str = r"(?:(?:^|[^a-z])(?:[a-z0-9]*_)?(?:passwords?|passwd|pwd|pswd|pword|pass ?phrase|pass ?code|pass ?word|p[a@4][s$5][s$5] ?w[o0]rds?|pw|pin(?: ?codes?| ?numbers?| ?码| ?碼)?)(?:[^a-z0-9_]|$)|pgpassword|mysql_pwd|密\s?[码碼]|口令|暗号|暗號|验证码|驗證碼|校验码|校驗碼|动态码|動態碼|安全码|安全碼|解锁码|解鎖碼|授权码|授權碼)";

/// Words that introduce an API credential (lower-case view).
const KEY_WORDS: &str = r"(?:(?:^|[^a-z])(?:[a-z0-9]*_)?(?:api[_ -]?keys?|apikey|api[_ -]?token|api[_ -]?secret|secret[_ -]?keys?|secret[_ -]?id|access[_ -]?key(?:[_ -]?(?:id|secret))?|secret[_ -]?access[_ -]?key|client[_ -]?secret|app[_ -]?secret|appsecret|access[_ -]?token|refresh[_ -]?token|auth[_ -]?token|bearer[_ -]?token|session[_ -]?token|private[_ -]?key|signing[_ -]?key|encryption[_ -]?key|master[_ -]?key|webhook[_ -]?secret|license[_ -]?key|subscription[_ -]?key|personal[_ -]?access[_ -]?token|tokens?|secrets?)(?:[^a-z0-9_]|$)|密钥|密鑰|秘钥|秘鑰|令牌|私钥|私鑰)";

static PASSWORD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(PASSWORD_WORDS).expect("password words compile"));
static KEY_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(KEY_WORDS).expect("key words compile"));

/// Words and signs between a keyword and its value.
const CONNECTORS: &[&str] = &[
    ":",
    "=",
    "==",
    ":=",
    "=>",
    "-",
    "->",
    "→",
    "is",
    "was",
    "are",
    "were",
    "now",
    "set",
    "to",
    "changed",
    "reset",
    "became",
    "became:",
    "be",
    "will",
    "of",
    "the",
    "my",
    "our",
    "as",
    "是",
    "为",
    "為",
    "就是",
    "改成",
    "改成了",
    "改为",
    "改為",
    "换成",
    "换成了",
    "設為",
    "设为",
    "设置为",
    "设置成",
    "設置為",
    "变成",
    "变成了",
    "都是",
    "还是",
    "也是",
    "：",
];

/// Small words of a clause between a keyword and its connector (`for my bank`).
const CLAUSE_START: &[&str] = &["for", "of", "to", "on", "at", "in", "with"];

/// Cuts text after a keyword into tokens: ASCII runs, runs of other
/// characters, and `:`, `=`, `：`, `，`, `,`, `。`, `;` on their own.
/// Returns `(token, quoted)`; stops at a line break.
fn tokens(text: &str, max: usize) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut prev_ascii: Option<bool> = None;
    let flush = |cur: &mut String, quoted: &mut bool, out: &mut Vec<(String, bool)>| {
        if !cur.is_empty() {
            out.push((std::mem::take(cur), *quoted));
        }
        *quoted = false;
    };
    for c in text.chars() {
        if out.len() >= max {
            break;
        }
        if c == '\n' {
            break;
        }
        if c.is_whitespace() {
            flush(&mut cur, &mut quoted, &mut out);
            prev_ascii = None;
            continue;
        }
        if matches!(
            c,
            '"' | '\'' | '`' | '“' | '”' | '‘' | '’' | '「' | '」' | '『' | '』'
        ) {
            if cur.is_empty() {
                quoted = true;
            } else {
                // A closing quote ends the token.
                let q = quoted;
                flush(&mut cur, &mut quoted, &mut out);
                if let Some(last) = out.last_mut() {
                    last.1 = q;
                }
            }
            prev_ascii = None;
            continue;
        }
        if matches!(c, ':' | '：' | '，' | '。' | ';' | '；' | '、') || (c == ',' && cur.is_empty())
        {
            flush(&mut cur, &mut quoted, &mut out);
            out.push((c.to_string(), false));
            prev_ascii = None;
            continue;
        }
        // `password=x`: the sign is its own token (base64 padding is not).
        let identifier = cur.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && cur.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if c == '=' && (cur.is_empty() || identifier) {
            flush(&mut cur, &mut quoted, &mut out);
            out.push(("=".into(), false));
            prev_ascii = None;
            continue;
        }
        let ascii = c.is_ascii();
        if prev_ascii.is_some_and(|p| p != ascii) {
            flush(&mut cur, &mut quoted, &mut out);
        }
        cur.push(c);
        prev_ascii = Some(ascii);
    }
    if out.len() < max {
        flush(&mut cur, &mut quoted, &mut out);
    }
    out
}

/// What a keyword's value must be.
#[derive(Clone, Copy, PartialEq)]
enum ValueKind {
    /// A password, PIN or code: [`secret_like`], or after a connector one
    /// long run of letters (`the password is correcthorsebatterystaple`).
    Password,
    /// An API credential: at least 8 characters, letters with digits (or
    /// 16+ with capitals inside).
    Key,
}

/// Whether `token` (after `connected` connectors or none) is a value of `kind`.
fn value_ok(kind: ValueKind, token: &str, quoted: bool, connected: bool) -> bool {
    let t = token.trim_end_matches(['.', ',', ';', ')', '!', '?']);
    if !t.is_ascii() || t.is_empty() {
        return false;
    }
    match kind {
        ValueKind::Password => {
            secret_like(t, quoted)
                || (connected && t.len() >= 16 && t.chars().all(|c| c.is_ascii_alphanumeric()))
        }
        ValueKind::Key => {
            let letters = t.chars().any(|c| c.is_ascii_alphabetic());
            let digits = t.chars().any(|c| c.is_ascii_digit());
            let inner_capital = t
                .as_bytes()
                .windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
            t.len() >= 8
                && !placeholder(t)
                && !code_expression(t)
                && t.chars().all(|c| c.is_ascii_graphic())
                && ((letters && digits)
                    || (t.len() >= 16 && inner_capital)
                    || (quoted && t.len() >= 12))
        }
    }
}

/// A value that is code, not a literal: a call, an index, an environment
/// lookup, a null.
fn code_expression(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.contains('(')
        || value.contains('[')
        || [
            "process.env",
            "os.environ",
            "getenv",
            "env.",
            "config.",
            "settings.",
            "self.",
            "this.",
        ]
        .iter()
        .any(|p| lower.starts_with(p))
        || matches!(
            lower.as_str(),
            "null" | "none" | "nil" | "undefined" | "true" | "false"
        )
}

/// Whether the text right after a keyword (`after`, cased) holds its value:
/// the first token (`wifi password hunter2`), or the token after the
/// connectors (`password is hunter2`, `密码：123456`), possibly behind a
/// short clause (`password for my bank is hunter2`).
fn keyword_value(after: &str, kind: ValueKind, connected_only: bool) -> bool {
    // `password-reset-2024`, `api-key-rotation`: the keyword is part of a
    // compound word; `password-hunter2` (a dash between word and value) is not.
    let after = match after.strip_prefix('-') {
        Some(rest) => {
            let segment = rest.split(char::is_whitespace).next().unwrap_or("");
            if segment.contains(['-', '_']) {
                return false;
            }
            rest
        }
        None => after,
    };
    let toks = tokens(after, 12);
    let is_connector = |t: &str| CONNECTORS.contains(&t.to_ascii_lowercase().as_str());
    let value_after = |start: usize| -> bool {
        let mut i = start;
        while i < toks.len() && is_connector(&toks[i].0) && i - start < 4 {
            i += 1;
        }
        // After `=` (an assignment in a config file) any literal is a value.
        let assigned = i > start && toks[i - 1].0 == "=";
        toks.get(i).is_some_and(|(t, q)| {
            value_ok(kind, t, *q, i > start)
                || (assigned
                    && t.len() >= 4
                    && t.is_ascii()
                    && !placeholder(t)
                    && !code_expression(t))
        })
    };
    let connected = toks.first().is_some_and(|(t, _)| is_connector(t));
    if (connected || !connected_only) && value_after(0) {
        return true;
    }
    // `for my bank is hunter2`, `of the router: Hunter2!`
    let Some((first, _)) = toks.first() else {
        return false;
    };
    if !CLAUSE_START.contains(&first.to_ascii_lowercase().as_str()) {
        return false;
    }
    toks.iter()
        .enumerate()
        .take(6)
        .skip(1)
        .find(|(_, (t, _))| {
            matches!(
                t.to_ascii_lowercase().as_str(),
                ":" | "=" | "is" | "was" | "：" | "是" | "为"
            )
        })
        .is_some_and(|(i, _)| value_after(i))
}

/// Where a keyword match ends: after its last letter (the pattern may
/// take the character after the word).
fn word_end(lower: &str, m: regex::Match<'_>) -> usize {
    lower[m.range()]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_alphanumeric())
        .map_or(m.end(), |(i, c)| m.start() + i + c.len_utf8())
}

/// Whether byte `at` of `text` lies inside a URL (a word with `://`):
/// secrets in URLs have their own patterns.
fn in_url(text: &str, at: usize) -> bool {
    let start = text[..at]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let end = text[at..]
        .find(char::is_whitespace)
        .map_or(text.len(), |i| at + i);
    text[start..end].contains("://")
}

/// A keyword followed by its value; with `connected_only` (identifiers,
/// where `token-8f3k2m9x` is a name), only after a connector (`=`, `:`, `is`).
fn keyword(view: &View, connected_only: bool) -> Option<&'static str> {
    for (re, kind, what) in [
        (&*PASSWORD_RE, ValueKind::Password, "a password"),
        (&*KEY_RE, ValueKind::Key, "a credential"),
    ] {
        for m in re.find_iter(&view.lower) {
            let end = word_end(&view.lower, m);
            if !in_url(&view.lower, m.start())
                && keyword_value(&view.cased[end..], kind, connected_only)
            {
                return Some(what);
            }
        }
    }
    None
}

/// Shannon entropy of `s` in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 128];
    let mut n = 0u32;
    for b in s.bytes() {
        counts[usize::from(b & 0x7f)] += 1;
        n += 1;
    }
    let n = f64::from(n.max(1));
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Whether an ASCII run reads like random key material: upper case, lower
/// case and digits mixed, switching between them as random text does, and
/// enough bits per character for its length.
fn random_run(run: &str) -> bool {
    let core: String = run.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let n = core.len();
    if n < 16 {
        return false;
    }
    let class = |c: char| {
        if c.is_ascii_uppercase() {
            0
        } else if c.is_ascii_lowercase() {
            1
        } else {
            2
        }
    };
    let mut seen = [0usize; 3];
    let mut switches = 0usize;
    let mut prev = None;
    for c in core.chars() {
        let k = class(c);
        seen[k] += 1;
        if prev.is_some_and(|p| p != k) {
            switches += 1;
        }
        prev = Some(k);
    }
    // Letters of both cases, and digits unless the run is long.
    if seen[0] == 0 || seen[1] == 0 || (seen[2] < 2 && n < 32) {
        return false;
    }
    let ratio = switches as f64 / (n - 1) as f64;
    // Random base62 of n characters carries close to log2(n) bits per
    // character up to ~5.9; words and camelCase names carry far less and
    // switch class only at word boundaries.
    let want = ((n as f64).log2() - 0.9).min(4.6);
    ratio >= 0.38 && entropy(&core) >= want
}

/// Words that say the next one is an identifier, not a secret.
const ID_WORDS: &[&str] = &[
    "id",
    "ids",
    "uuid",
    "guid",
    "ref",
    "reference",
    "number",
    "no",
    "no.",
    "#",
    "hash",
    "digest",
    "commit",
    "checksum",
    "fingerprint",
    "编号",
    "单号",
    "号码",
    "序列号",
    "编码",
    "链接",
];

/// Runs of key-like characters outside URLs that look random
/// ([`random_run`]), line by line: what a word says about the next one
/// (`doc id 1Bxi...`) stays on its line.
fn high_entropy(view: &View) -> Option<&'static str> {
    view.cased.lines().find_map(high_entropy_line)
}

/// Whether a character ends a word for the entropy test.
fn word_break(c: char) -> bool {
    c.is_whitespace() || "\"'`()<>,;[]{}|".contains(c)
}

/// [`high_entropy`] over one line.
fn high_entropy_line(line: &str) -> Option<&'static str> {
    static SHAPES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^(?:[0-9a-fA-F]+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[13][1-9A-HJ-NP-Za-km-z]{25,34}|(?:sha256|sha384|sha512)-.*)$",
        )
        .expect("benign shapes compile")
    });
    let words: Vec<&str> = line.split(word_break).filter(|w| !w.is_empty()).collect();
    let id_word = |w: &str| {
        let w = w.trim_end_matches([':', '：', '#']).to_lowercase();
        ID_WORDS.contains(&w.as_str())
            || ID_WORDS.iter().any(|id| !id.is_ascii() && w.ends_with(id))
    };
    for (i, word) in words.iter().enumerate() {
        if word.len() < 20
            || word.contains("://")
            || word.starts_with("www.")
            || word.contains("base64,")
        {
            continue;
        }
        let lower = word.to_ascii_lowercase();
        if ["sha1:", "sha256:", "sha384:", "sha512:", "md5:"]
            .iter()
            .any(|p| lower.starts_with(p))
        {
            continue;
        }
        let before = |n: usize| i.checked_sub(n).map_or("", |j| words[j]);
        let previous = before(1).to_ascii_lowercase();
        // An SSH public key (`ssh-ed25519 AAAAC3...`) is meant to be shared.
        if ["ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-"]
            .iter()
            .any(|p| previous.starts_with(p))
        {
            continue;
        }
        // An id, reference or digest said as one (`doc id is 1Bxi...`).
        let linked = matches!(previous.as_str(), "is" | "was" | "=" | ":" | "是" | "为");
        if id_word(before(1)) || (linked && id_word(before(2))) {
            continue;
        }
        for run in word.split(|c: char| {
            !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-'))
        }) {
            let run = run.trim_matches(|c: char| matches!(c, '-' | '_' | '/' | '='));
            if run.len() < 20 || SHAPES.is_match(run) {
                continue;
            }
            // A path (`src/content/credentials.rs`) splits into words.
            if run.split('/').all(|p| p.len() < 16) {
                continue;
            }
            if random_run(run) {
                return Some("a high-entropy secret");
            }
        }
    }
    None
}

/// If `text` looks like it contains a credential, what kind (never the value).
pub fn detect_credential(text: &str) -> Option<&'static str> {
    detect(text, true)
}

/// [`detect_credential`] for an identifier (idempotency key, session or
/// message id): without the entropy test, since a random id is expected
/// there, and with a keyword's value only after a connector
/// (`csrf-token-3f9a8b7c` is a name, `token=3f9a8b7c` is not).
pub(crate) fn detect_credential_in_id(text: &str) -> Option<&'static str> {
    detect(text, false)
}

/// `prose`: every test; else (an identifier) no entropy test, and a
/// keyword's value only after a connector.
fn detect(text: &str, prose: bool) -> Option<&'static str> {
    if text.is_empty() {
        return None;
    }
    let view = View::of(text);
    vendor(&view)
        .or_else(|| split_token(&view))
        .or_else(|| keyword(&view, !prose))
        .or_else(|| prose.then(|| high_entropy(&view)).flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Values that are variables, masks, templates or code are not secrets;
    /// commands that prompt for the password hold none.
    #[test]
    fn placeholders_and_prompts_are_kept() {
        for text in [
            "password: ********",
            "password=<your password here>",
            "DB_PASSWORD=${DB_PASSWORD}",
            "password = getpass.getpass()",
            "PWD=/home/alice/projects",
            "curl -u $USER:$TOKEN https://api.example.com",
            "mysql -u root -p my_database",
            "echo $TOKEN | docker login --password-stdin",
            "Authorization: Bearer <token>",
            "POSTGRES_PASSWORD_FILE=/run/secrets/pg",
        ] {
            assert_eq!(detect_credential(text), None, "should keep: {text}");
        }
    }

    /// Identifier fields hold random ids: only the entropy test is left out there.
    #[test]
    fn ids_skip_only_the_entropy_test() {
        let random = "aB3dE5gH7jK9mN1pQ3sTuV5xZ";
        assert!(detect_credential(&format!("key {random}")).is_some());
        assert_eq!(detect_credential_in_id(random), None);
        assert!(detect_credential_in_id("ghp_abcdefghijklmnopqrstuvwxyz0123456789").is_some());
        assert!(detect_credential_in_id("password=hunter22").is_some());
        assert!(detect_credential_in_id("w|cli|main|token:3f9a8b7c6d5e").is_some());
        for id in [
            "csrf-token-3f9a8b7c",
            "w|cli|main|password-reset-42",
            "sess_8f3kD92nLx0Qa7ZmWq4R",
            "ingest|qq:group:1|12345#abcdef012345",
            "550e8400-e29b-41d4-a716-446655440000",
            "chat-qq-group-42-mqz8k2p1-0001",
            "msg_01HXZ7Q9K3M2N8P4R6T0V5W7Y1",
            "token 2 of 5",
        ] {
            assert_eq!(detect_credential_in_id(id), None, "{id}");
        }
    }

    /// A keyword inside a compound word is a name, not the start of a value.
    #[test]
    fn compound_words_are_not_keywords_with_values() {
        for text in [
            "the password-reset-2024 ticket is closed",
            "api-key-rotation-v2 shipped",
            "secret-santa-2024 draw on Friday",
        ] {
            assert_eq!(detect_credential(text), None, "{text}");
        }
        for text in [
            "password-123456",
            "password\u{2014}hunter2",
            "password - hunter22",
        ] {
            assert!(detect_credential(text).is_some(), "{text}");
        }
    }

    /// Tokens cut by dashes, spaces or a line break are whole again.
    #[test]
    fn split_tokens_are_found() {
        let hex = "6488cf3a6b1d4e2f8a9c0b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f";
        let dashed: Vec<&str> = (0..4).map(|i| &hex[i * 16..i * 16 + 16]).collect();
        for text in [
            format!("mh_{}", dashed.join("-")),
            format!("mh_{}\n{}", &hex[..30], &hex[30..]),
            format!("mh {}", dashed.join(" ")),
            "ghp_Zx9vQ2mL8kP4rT6wY1\nnB3cD5fG7hJ0kLm2Np".to_string(),
        ] {
            assert!(detect_credential(&text).is_some(), "should refuse: {text}");
        }
        // Ordinary words after a prefix do not add up to a token.
        assert_eq!(
            detect_credential("the ghp_ prefix marks classic personal access tokens on github"),
            None
        );
    }

    proptest::proptest! {
        /// Any text, however odd, is judged without a panic (no slicing
        /// inside a character), as an identifier too.
        #[test]
        fn never_panics(parts in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("password".to_string()),
                proptest::strategy::Just("密码".to_string()),
                proptest::strategy::Just("：".to_string()),
                proptest::strategy::Just(" is ".to_string()),
                proptest::strategy::Just("mh_".to_string()),
                proptest::strategy::Just("ghp_".to_string()),
                proptest::strategy::Just("token".to_string()),
                proptest::strategy::Just("://".to_string()),
                proptest::strategy::Just("login: a / ".to_string()),
                proptest::strategy::Just("id ".to_string()),
                "\\PC{0,6}",
                "[a-zA-Z0-9+/=_-]{0,40}",
            ],
            0..10,
        )) {
            let text = parts.concat();
            let _ = detect_credential(&text);
            let _ = detect_credential_in_id(&text);
        }
    }
}
