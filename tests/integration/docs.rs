//! The README and the reference pages under `docs/` stay true to the code.
//!
//! - Every `memd …` command in a shell block, and in an inline code span that
//!   starts with `memd `, names a real subcommand and only flags that
//!   subcommand accepts. The truth is the built binary's own `--help` output
//!   (`env!("CARGO_BIN_EXE_memd")`), read once per subcommand.
//! - Every script a shell block runs (`scripts/…`) exists.
//! - Every relative link and image resolves to a file or directory inside the
//!   repository, and every `#anchor` to a heading of the page it points to
//!   (GitHub's heading ids).
//! - Every fenced block says its language, so a shell command cannot hide in
//!   an untagged block; indented code blocks are refused for the same reason.
//! - README.md is at most 250 lines, and no page carries lab notes or paths of
//!   a development machine.
//! - The README's shell examples work as written: they run, in order, in one
//!   shell, in a temporary HOME after `memd setup` and a `memd serve` started
//!   in another directory (see [`the_readme_examples_work_as_written`]).
//!
//! Only that last test needs the model (the one `memd setup` installed);
//! `--help` never loads it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// The longest README we accept (`wc -l README.md`).
const README_MAX_LINES: usize = 250;

/// Languages a fenced block may declare; the first three are checked as shell.
const SHELL_LANGS: &[&str] = &["sh", "bash", "shell"];
const OTHER_LANGS: &[&str] = &["json", "jsonl", "text", "yaml", "toml", "rust", "python"];

/// Words that must not appear in a page: lab notes and machine paths.
const FORBIDDEN_PHRASES: &[&str] = &[
    "this round",
    "the commit before",
    "issue #",
    "/work/",
    "../shared",
];

/// Words in command position that run the next word as the command.
const WRAPPERS: &[&str] = &[
    "exec", "nice", "nohup", "time", "env", "command", "sudo", "do", "then", "else", "if", "while",
    "until", "!",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every `docs/*.md`, as (path, text).
fn pages() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut paths = vec![root.join("README.md")];
    let docs = root.join("docs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&docs)
        .expect("docs/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    found.sort();
    paths.extend(found);
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// What the binary accepts, read from its --help.

/// One level of the command tree: the flags it accepts (and whether each takes
/// a value) and its subcommands.
#[derive(Debug, Clone, Default)]
struct HelpNode {
    flags: BTreeMap<String, bool>,
    subcommands: BTreeSet<String>,
    /// `Usage: … <COMMAND>`: a positional word here must be a subcommand.
    needs_subcommand: bool,
}

fn parse_help(text: &str) -> HelpNode {
    let mut node = HelpNode::default();
    let mut section = String::new();
    for line in text.lines() {
        if let Some(usage) = line.strip_prefix("Usage: ") {
            node.needs_subcommand = usage.contains("<COMMAND>");
            continue;
        }
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.to_string();
            continue;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match section.as_str() {
            "Commands:" if indent == 2 => {
                if let Some(name) = trimmed.split_whitespace().next() {
                    node.subcommands.insert(name.to_string());
                }
            }
            // Option lines are indented 2 (with a short flag) or 6; their
            // descriptions and possible values are indented further.
            "Options:" if indent <= 6 && trimmed.starts_with('-') => {
                let words: Vec<&str> = trimmed.split_whitespace().collect();
                let mut i = 0;
                while i < words.len() {
                    let w = words[i].trim_end_matches(',');
                    if !is_flag_word(w) {
                        break;
                    }
                    let takes_value = words
                        .get(i + 1)
                        .is_some_and(|n| n.starts_with('<') || n.starts_with("[<"));
                    node.flags.insert(w.to_string(), takes_value);
                    i += if takes_value { 2 } else { 1 };
                }
            }
            _ => {}
        }
    }
    node
}

/// `--long-name` or `-x`.
fn is_flag_word(w: &str) -> bool {
    if let Some(long) = w.strip_prefix("--") {
        return !long.is_empty()
            && long
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    }
    let mut chars = w.chars();
    chars.next() == Some('-')
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.next().is_none()
}

/// The binary's command tree, asked lazily and cached per subcommand path.
struct Cli {
    bin: PathBuf,
    cache: RefCell<HashMap<Vec<String>, HelpNode>>,
}

impl Cli {
    fn new() -> Cli {
        Cli {
            bin: PathBuf::from(env!("CARGO_BIN_EXE_memd")),
            cache: RefCell::new(HashMap::new()),
        }
    }

    fn node(&self, path: &[String]) -> HelpNode {
        if let Some(n) = self.cache.borrow().get(path) {
            return n.clone();
        }
        let out = Command::new(&self.bin)
            .args(path)
            .arg("--help")
            .env_remove("MEMD_ROOT")
            .env_remove("MEMD_TOKEN")
            .env_remove("MEMD_TOKEN_FILE")
            .env_remove("MEMD_URL")
            .output()
            .expect("run memd --help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "memd {} --help failed: {}",
            path.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        let node = parse_help(&text);
        assert!(
            node.flags.contains_key("--help"),
            "memd {} --help was read: {text}",
            path.join(" ")
        );
        self.cache.borrow_mut().insert(path.to_vec(), node.clone());
        node
    }

    /// Checks `memd ARGS…`: subcommands exist, every flag is accepted where it
    /// stands. Positional words (values, placeholders) are not judged.
    fn check(&self, args: &[String]) -> Result<(), String> {
        let mut path: Vec<String> = Vec::new();
        let mut node = self.node(&path);
        let mut positional_seen = false;
        let mut i = 0;
        while i < args.len() {
            // Optional parts are written `[--json]`; `…` stands for more.
            let w = args[i].trim_start_matches('[').trim_end_matches(']');
            if w.is_empty() || w == "…" || w == "..." {
                i += 1;
                continue;
            }
            if w == "--" {
                break;
            }
            let is_flag = w.starts_with('-')
                && w.len() > 1
                && !w[1..].starts_with(|c: char| c.is_ascii_digit());
            if is_flag {
                let (name, inline_value) = match w.split_once('=') {
                    Some((n, _)) => (n, true),
                    None => (w, false),
                };
                let shown = if path.is_empty() {
                    "memd".to_string()
                } else {
                    format!("memd {}", path.join(" "))
                };
                let Some(&takes_value) = node.flags.get(name) else {
                    return Err(format!(
                        "`{shown}` has no flag {name} (it accepts {})",
                        node.flags.keys().cloned().collect::<Vec<_>>().join(" ")
                    ));
                };
                i += if takes_value && !inline_value { 2 } else { 1 };
                continue;
            }
            if !positional_seen && !node.subcommands.is_empty() {
                if node.subcommands.contains(w) {
                    path.push(w.to_string());
                    node = self.node(&path);
                    i += 1;
                    continue;
                }
                if node.needs_subcommand {
                    return Err(format!(
                        "`memd {}` has no subcommand {w:?} (it has {})",
                        path.join(" "),
                        node.subcommands
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                    .replace("`memd ` ", "`memd` "));
                }
            }
            positional_seen = true;
            i += 1;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// A small shell lexer: enough to find simple commands and their words.

/// A simple command: its first line (0-based, within the block) and words.
type SimpleCommand = (usize, Vec<String>);

/// Splits shell text into simple commands (at newlines, `;`, `|`, `&`, `(`,
/// `)`, and inside `$(…)` and backticks), with quotes removed, comments
/// dropped, line continuations joined and redirections left out.
fn simple_commands(src: &str) -> Vec<SimpleCommand> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    lex(&chars, 0, &mut out);
    out
}

struct Lexer {
    words: Vec<String>,
    word: String,
    in_word: bool,
    first_line: Option<usize>,
}

impl Lexer {
    fn end_word(&mut self) {
        if self.in_word {
            self.words.push(std::mem::take(&mut self.word));
            self.in_word = false;
        }
    }

    fn end_command(&mut self, out: &mut Vec<SimpleCommand>) {
        self.end_word();
        if !self.words.is_empty() {
            out.push((
                self.first_line.unwrap_or(0),
                std::mem::take(&mut self.words),
            ));
        }
        self.first_line = None;
    }

    fn push(&mut self, c: char, line: usize) {
        self.word.push(c);
        self.in_word = true;
        self.first_line.get_or_insert(line);
    }

    fn push_str(&mut self, s: &str, line: usize) {
        self.word.push_str(s);
        self.in_word = true;
        self.first_line.get_or_insert(line);
    }
}

/// The index of the `)` closing the `(` at `open`, respecting quotes.
fn closing_paren(chars: &[char], open: usize) -> usize {
    let mut depth = 0;
    let mut i = open;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

fn lex(chars: &[char], line0: usize, out: &mut Vec<SimpleCommand>) {
    let mut lx = Lexer {
        words: Vec::new(),
        word: String::new(),
        in_word: false,
        first_line: None,
    };
    let mut line = line0;
    let mut i = 0;
    let count_lines = |s: &[char]| s.iter().filter(|&&c| c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                line += 1;
                i += 2;
            }
            '\\' => {
                if let Some(&n) = chars.get(i + 1) {
                    lx.push(n, line);
                }
                i += 2;
            }
            '\'' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                let s: String = chars[start..j.min(chars.len())].iter().collect();
                lx.push_str(&s, line);
                line += count_lines(&chars[start..j.min(chars.len())]);
                i = j + 1;
            }
            '"' => {
                lx.push_str("", line);
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '"' {
                    match chars[j] {
                        '\\' => {
                            if let Some(&n) = chars.get(j + 1) {
                                lx.push(n, line);
                            }
                            j += 2;
                        }
                        '$' if chars.get(j + 1) == Some(&'(') => {
                            let close = closing_paren(chars, j + 1);
                            lex(&chars[j + 2..close.min(chars.len())], line, out);
                            lx.push_str("$(…)", line);
                            j = close + 1;
                        }
                        '`' => {
                            let close = (j + 1..chars.len())
                                .find(|&k| chars[k] == '`')
                                .unwrap_or(chars.len());
                            lex(&chars[j + 1..close], line, out);
                            lx.push_str("`…`", line);
                            j = close + 1;
                        }
                        ch => {
                            if ch == '\n' {
                                line += 1;
                            }
                            lx.push(ch, line);
                            j += 1;
                        }
                    }
                }
                i = j + 1;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                let close = closing_paren(chars, i + 1);
                lex(&chars[i + 2..close.min(chars.len())], line, out);
                line += count_lines(&chars[i..close.min(chars.len())]);
                lx.push_str("$(…)", line);
                i = close + 1;
            }
            '`' => {
                let close = (i + 1..chars.len())
                    .find(|&k| chars[k] == '`')
                    .unwrap_or(chars.len());
                lex(&chars[i + 1..close], line, out);
                lx.push_str("`…`", line);
                i = close + 1;
            }
            '#' if !lx.in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ' ' | '\t' => {
                lx.end_word();
                i += 1;
            }
            '\n' | ';' | '|' | '&' | '(' | ')' | '{' | '}'
                if !(matches!(c, '{' | '}') && lx.in_word) =>
            {
                if c == '\n' {
                    line += 1;
                }
                lx.end_command(out);
                i += 1;
            }
            '<' | '>' => {
                // A redirection: drop a file-descriptor number before it and its target.
                if lx.in_word && lx.word.chars().all(|d| d.is_ascii_digit()) {
                    lx.word.clear();
                    lx.in_word = false;
                }
                lx.end_word();
                i += 1;
                while i < chars.len() && matches!(chars[i], '<' | '>' | '&') {
                    i += 1;
                }
                while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                    i += 1;
                }
                while i < chars.len() && !matches!(chars[i], ' ' | '\t' | '\n' | ';' | '|' | '&') {
                    i += 1;
                }
            }
            _ => {
                lx.push(c, line);
                i += 1;
            }
        }
    }
    lx.end_command(out);
}

/// `NAME=value`, a variable assignment before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The index of the word that runs as the command: after variable
/// assignments, and after wrappers (`nice -n 5`, `exec`, `do`, …) with their
/// options and numbers.
fn command_word(words: &[String]) -> Option<usize> {
    let mut i = 0;
    loop {
        let w = words.get(i)?;
        if is_assignment(w) {
            i += 1;
        } else if WRAPPERS.contains(&w.as_str()) {
            i += 1;
            while words
                .get(i)
                .is_some_and(|o| o.starts_with('-') || o.chars().all(|c| c.is_ascii_digit()))
            {
                i += 1;
            }
        } else {
            return Some(i);
        }
    }
}

/// The words after `memd` when this simple command runs memd.
fn memd_args(words: &[String]) -> Option<&[String]> {
    let i = command_word(words)?;
    let cmd = &words[i];
    (cmd == "memd" || cmd.ends_with("/memd")).then(|| &words[i + 1..])
}

/// The repository script a simple command runs, if any (`scripts/x.sh`,
/// `bash scripts/x.sh`).
fn script_run(words: &[String]) -> Option<&str> {
    let first = command_word(words)?;
    let mut cmd = words[first].as_str();
    if matches!(cmd, "bash" | "sh" | "python3" | "python") {
        cmd = words.get(first + 1)?.as_str();
    }
    let relative = cmd.contains('/')
        && !cmd.starts_with('/')
        && !cmd.starts_with('~')
        && !cmd.starts_with('$')
        && !cmd.starts_with("target/")
        && !cmd.starts_with("./target/")
        && !cmd.ends_with("/memd");
    relative.then_some(cmd)
}

/// Prose writes alternatives as `memd backup create|list|verify`: one command
/// per alternative, each checked (in a shell block `|` is a pipe instead).
fn alternatives(code: &str) -> Vec<String> {
    let words: Vec<&str> = code.split(' ').collect();
    let Some(at) = words
        .iter()
        .position(|w| w.contains('|') && !w.starts_with('|') && !w.ends_with('|'))
    else {
        return vec![code.to_string()];
    };
    words[at]
        .split('|')
        .flat_map(|choice| {
            let mut variant = words.clone();
            variant[at] = choice;
            alternatives(&variant.join(" "))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Headings and links.

/// GitHub's id for a heading: lowercase, letters/digits/`-`/`_` kept, spaces
/// become `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every heading id of a Markdown text (duplicates get `-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut current: Option<String> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) => current = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = current.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&current.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    out
}

/// A path inside the repository as the repository names it.
fn relative(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Resolves a link target written in `page`; `None` when it is fine.
fn check_link(page: &Path, page_text: &str, target: &str) -> Option<String> {
    if target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
    {
        return None;
    }
    let (path_part, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let (file, text) = if path_part.is_empty() {
        (page.to_path_buf(), page_text.to_string())
    } else {
        if path_part.starts_with('/') || path_part.contains("://") {
            return Some(format!("link {target:?} is not relative to the page"));
        }
        // Resolve lexically, then require the result inside the repository.
        let mut resolved = page.parent().expect("a page has a directory").to_path_buf();
        for part in Path::new(path_part).components() {
            match part {
                Component::ParentDir => {
                    resolved.pop();
                }
                Component::Normal(p) => resolved.push(p),
                _ => {}
            }
        }
        if !resolved.starts_with(repo()) {
            return Some(format!("link {target:?} leaves the repository"));
        }
        if !resolved.exists() {
            return Some(format!(
                "link {target:?}: {} does not exist",
                relative(&resolved)
            ));
        }
        let text = if anchor.is_some() {
            match std::fs::read_to_string(&resolved) {
                Ok(t) => t,
                Err(e) => {
                    return Some(format!(
                        "link {target:?}: cannot read the page for its anchor: {e}"
                    ));
                }
            }
        } else {
            String::new()
        };
        (resolved, text)
    };
    if let Some(anchor) = anchor {
        if file.extension().is_none_or(|e| e != "md") {
            return Some(format!(
                "link {target:?}: an anchor into a file that is not Markdown"
            ));
        }
        if !anchors(&text).contains(anchor) {
            return Some(format!(
                "link {target:?}: no heading with the id #{anchor} in {}",
                relative(&file)
            ));
        }
    }
    None
}

// ---------------------------------------------------------------------------
// One page.

/// Every problem of one page, as `path:line: what`.
fn check_page(cli: &Cli, page: &Path, text: &str) -> Vec<String> {
    let shown = relative(page);
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let mut problems = Vec::new();
    let lower = text.to_lowercase();
    for phrase in FORBIDDEN_PHRASES {
        if let Some(at) = lower.find(phrase) {
            problems.push(format!(
                "{shown}:{}: lab note or machine path {phrase:?}",
                line_of(at)
            ));
        }
    }
    let check_shell = |src: &str, first_line: usize, problems: &mut Vec<String>| {
        for (line, words) in simple_commands(src) {
            let at = first_line + line;
            if let Some(args) = memd_args(&words)
                && let Err(e) = cli.check(args)
            {
                problems.push(format!("{shown}:{at}: {e}"));
            }
            if let Some(script) = script_run(&words)
                && !repo().join(script).is_file()
            {
                problems.push(format!(
                    "{shown}:{at}: runs {script}, which is not in the repository"
                ));
            }
        }
    };
    let mut block: Option<(String, usize, String)> = None;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => {
                        problems.push(format!(
                            "{shown}:{}: an indented code block; use a fenced block with a language",
                            line_of(range.start)
                        ));
                        String::new()
                    }
                };
                if !lang.is_empty()
                    && !SHELL_LANGS.contains(&lang.as_str())
                    && !OTHER_LANGS.contains(&lang.as_str())
                {
                    problems.push(format!(
                        "{shown}:{}: unknown block language {lang:?}",
                        line_of(range.start)
                    ));
                } else if lang.is_empty() && text[range.clone()].starts_with(['`', '~']) {
                    problems.push(format!(
                        "{shown}:{}: a fenced block without a language",
                        line_of(range.start)
                    ));
                }
                // The block's text starts on the line after the fence.
                block = Some((lang, line_of(range.start) + 1, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, _, body)) = block.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((lang, first, body)) = block.take()
                    && SHELL_LANGS.contains(&lang.as_str())
                {
                    check_shell(&body, first, &mut problems);
                }
            }
            Event::Code(code) => {
                let code = code.trim();
                if code == "memd" || code.starts_with("memd ") {
                    for variant in alternatives(code) {
                        check_shell(&variant, line_of(range.start), &mut problems);
                    }
                }
            }
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                if let Some(p) = check_link(page, text, &dest_url) {
                    problems.push(format!("{shown}:{}: {p}", line_of(range.start)));
                }
            }
            _ => {}
        }
    }
    problems
}

/// The number of `memd` commands a page mentions in shell blocks and code spans.
fn memd_commands(text: &str) -> usize {
    let mut n = 0;
    let mut in_shell = false;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                in_shell = SHELL_LANGS.contains(&info.split_whitespace().next().unwrap_or(""));
            }
            Event::End(TagEnd::CodeBlock) => in_shell = false,
            Event::Text(t) if in_shell => {
                n += simple_commands(&t)
                    .iter()
                    .filter(|(_, w)| memd_args(w).is_some())
                    .count();
            }
            Event::Code(c) if c.trim().starts_with("memd ") => n += 1,
            _ => {}
        }
    }
    n
}

// ---------------------------------------------------------------------------
// Running the README's examples.

/// The shell blocks of a Markdown text, in order, as (first line, body).
fn shell_blocks(text: &str) -> Vec<(usize, String)> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info)))
                if SHELL_LANGS.contains(&info.split_whitespace().next().unwrap_or("")) =>
            {
                block = Some((line_of(range.start) + 1, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, body)) = block.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(block.take()),
            _ => {}
        }
    }
    out
}

/// Why a README block is not run by the examples test, if it is not: it
/// builds or installs from the checkout, runs a repository script, or starts
/// a process that keeps running (the test runs `memd setup` and `memd serve`
/// itself, as the README's install steps say).
fn not_run(body: &str) -> Option<String> {
    for (_, words) in simple_commands(body) {
        let Some(at) = command_word(&words) else {
            continue;
        };
        let word = words[at].as_str();
        if let Some(script) = script_run(&words) {
            return Some(format!("runs {script}"));
        }
        if ["cargo", "git", "rustup"].contains(&word) {
            return Some(format!("runs {word}"));
        }
        if let Some(args) = memd_args(&words)
            && let Some(sub) = args.iter().find(|a| !a.starts_with('-'))
            && ["serve", "mcp", "setup"].contains(&sub.as_str())
        {
            return Some(format!("runs memd {sub}"));
        }
    }
    None
}

/// A README block as the test runs it: the address of the daemon it started
/// instead of the default port, and placeholder values (`mh_0123…`, a value
/// with an ellipsis) taken from the environment (`README_TOKEN` for `TOKEN`).
fn as_run(body: &str, addr: &str) -> String {
    body.lines()
        .map(|line| {
            let line = line
                .replace("127.0.0.1:8787", addr)
                .replace("localhost:8787", addr);
            let trimmed = line.trim_start();
            if let Some(rest) = trimmed.strip_prefix("export ")
                && let Some((name, value)) = rest.split_once('=')
                && value.split('#').next().unwrap_or("").contains('…')
            {
                return format!("export {name}=\"$README_{name}\"");
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Error envelopes the README says a command prints (a comment showing one).
fn errors_shown(body: &str) -> usize {
    body.lines()
        .filter(|l| {
            l.split_once(" # ")
                .is_some_and(|(_, c)| c.contains("{\"error\""))
        })
        .count()
}

/// The models directory of this machine's install (scripts/test.sh runs `memd setup`'s logic).
fn installed_models() -> PathBuf {
    match std::env::var_os("MEMD_MODELS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/memory-hub/models")
        }
    }
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn every_memd_command_flag_script_and_link_in_the_docs_is_real() {
    let cli = Cli::new();
    let pages = pages();
    assert!(
        pages.len() >= 8,
        "README.md and the reference pages under docs/: {}",
        pages.len()
    );
    let mut problems = Vec::new();
    let mut commands = 0;
    for (path, text) in &pages {
        problems.extend(check_page(&cli, path, text));
        commands += memd_commands(text);
    }
    assert!(
        commands >= 60,
        "the pages show the commands they teach: {commands} found"
    );
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn readme_is_at_most_250_lines() {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = text.matches('\n').count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}"
    );
    assert!(lines > 50, "README.md teaches something: {lines} lines");
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut linked = BTreeSet::new();
    for event in Parser::new_ext(&readme, Options::ENABLE_TABLES) {
        if let Event::Start(Tag::Link { dest_url, .. }) = event {
            linked.insert(dest_url.split('#').next().unwrap_or("").to_string());
        }
    }
    let missing: Vec<String> = pages()
        .into_iter()
        .skip(1)
        .map(|(p, _)| p.strip_prefix(repo()).unwrap().display().to_string())
        .filter(|p| !linked.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "docs pages the README does not link to: {missing:?}"
    );
}

/// The checker itself: a misspelt flag, a misspelt subcommand, a flag of the
/// wrong subcommand, a missing script, a dead link and a missing anchor are
/// each reported; their correct forms are not.
#[test]
fn the_docs_check_catches_misspelt_flags_and_dead_links() {
    let cli = Cli::new();
    let page = repo().join("docs").join("example.md");
    let check = |text: &str| check_page(&cli, &page, text);
    let good = "# Title\n\n## A section\n\n```sh\nmemd --root /tmp/r search \"x\" --mode fulltext --limit 3 # note\n\
                TOKEN=$(memd token issue --name me --preset dsh-desktop)\n\
                memd backup restore ARCHIVE --foreign --with-tokens\n\
                memd archive --older-than-months 6\n\
                memd --json eval tests/fixtures/eval-tiny --mode hybrid \\\n  --per-query out.jsonl\n\
                scripts/test.sh 2>/dev/null | tail -1\n```\n\n\
                See `memd write --scene main --text x`, [the README](../README.md),\n\
                [a section](#a-section), [retrieval](retrieval.md#modes) and ![s](../tests/console/screenshots/search-desktop.png).\n";
    // The good text refers to docs/retrieval.md#modes, which the real page must have.
    let problems = check(good);
    assert!(problems.is_empty(), "{problems:#?}");

    let cases: &[(&str, &str)] = &[
        (
            "```sh\nmemd search x --mdoe fulltext\n```\n",
            "has no flag --mdoe",
        ),
        (
            "```sh\nmemd serach x\n```\n",
            "has no subcommand \"serach\"",
        ),
        (
            "```sh\nmemd token issue --name a --presett pet\n```\n",
            "`memd token issue` has no flag --presett",
        ),
        (
            "```sh\nmemd write --scene main --text x --mode hybrid\n```\n",
            "`memd write` has no flag --mode",
        ),
        (
            "```sh\nmemd --mode fulltext search x\n```\n",
            "`memd` has no flag --mode",
        ),
        (
            "```sh\nX=\"$(memd backup craete)\"\n```\n",
            "has no subcommand \"craete\"",
        ),
        (
            "```bash\nfor d in a b; do memd eval $d --modes x; done\n```\n",
            "`memd eval` has no flag --modes",
        ),
        (
            "Run `memd doctor --shalow` first.\n",
            "`memd doctor` has no flag --shalow",
        ),
        (
            "Use `memd token issue|lsit|revoke`.\n",
            "has no subcommand \"lsit\"",
        ),
        (
            "Use `memd search --mode fulltext|semantic --limt 3`.\n",
            "`memd search` has no flag --limt",
        ),
        (
            "```sh\nscripts/quickstrat.sh\n```\n",
            "runs scripts/quickstrat.sh",
        ),
        ("See [the API](http-api.mdx).\n", "does not exist"),
        (
            "See [the API](../README.md#no-such-heading).\n",
            "no heading with the id #no-such-heading",
        ),
        ("See [here](#nowhere).\n", "no heading with the id #nowhere"),
        ("See [data](/work/x.md).\n", "not relative"),
        ("See [up](../../outside.md).\n", "leaves the repository"),
        ("```\nmemd search x\n```\n", "without a language"),
        ("    memd search x\n", "indented code block"),
        ("As measured this round, it is fast.\n", "lab note"),
    ];
    for (text, expected) in cases {
        let problems = check(text);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{text:?} should report {expected:?}, got {problems:#?}"
        );
    }
}

#[test]
fn the_help_parser_reads_flags_values_and_subcommands() {
    let cli = Cli::new();
    let top = cli.node(&[]);
    for sub in [
        "write", "search", "serve", "mcp", "backup", "token", "sync", "archive",
    ] {
        assert!(
            top.subcommands.contains(sub),
            "{sub} in {:?}",
            top.subcommands
        );
    }
    assert_eq!(top.flags.get("--root"), Some(&true));
    assert_eq!(top.flags.get("--json"), Some(&false));
    assert!(top.needs_subcommand);
    let import = cli.node(&["import".to_string()]);
    assert_eq!(
        import.flags.get("--format"),
        Some(&true),
        "long help is read too"
    );
    assert!(
        !import.flags.contains_key("-"),
        "possible values are not flags"
    );
    let archive = cli.node(&["archive".to_string()]);
    assert!(
        !archive.needs_subcommand,
        "`memd archive` runs without a subcommand"
    );
    assert!(archive.subcommands.contains("restore"));
    let shell = simple_commands(
        "A=1 nice -n 5 memd get \"$(memd search 'a b' --json | head -1)\" # c\nmemd stats > out 2>&1",
    );
    let runs: Vec<Vec<String>> = shell
        .iter()
        .filter_map(|(_, w)| memd_args(w).map(<[String]>::to_vec))
        .collect();
    assert_eq!(
        runs,
        vec![
            vec!["search".to_string(), "a b".into(), "--json".into()],
            vec!["get".into(), "$(…)".into()],
            vec!["stats".into()],
        ]
    );
    assert_eq!(
        alternatives("memd backup create|verify ARCHIVE"),
        vec!["memd backup create ARCHIVE", "memd backup verify ARCHIVE"]
    );
    assert_eq!(
        slug("The HTTP API (`memd serve`)"),
        "the-http-api-memd-serve"
    );
    assert_eq!(slug("Tokens, scopes & scenes"), "tokens-scopes--scenes");
    assert_eq!(slug("隐私 Privacy"), "隐私-privacy");
}

/// On a fresh machine: the binary (here the one cargo built, as `cargo
/// install` would put it on PATH), `memd setup`, `memd serve` started in
/// another directory, then every shell example of the README, in order, in
/// one shell with `set -eo pipefail`, in a temporary HOME (so the root is the
/// default one under it). The model comes from this machine's install,
/// linked into the temporary HOME's cache: `memd setup` verifies it and
/// downloads nothing. Blocks that build, install or start long-running
/// processes are the steps the test takes itself (see [`not_run`]).
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "runs memd setup, which installs from the package registries"
)]
#[test]
fn the_readme_examples_work_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_memd"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::fs::create_dir_all(home.join(".cache/memory-hub")).unwrap();
    std::os::unix::fs::symlink(installed_models(), home.join(".cache/memory-hub/models")).unwrap();
    // The README's port may be taken on a shared machine: the daemon gets a
    // free one (config `listen`), and the examples' 127.0.0.1:8787 becomes it.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let root = home.join(".local/share/memd");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("config.json"),
        format!("{{\"listen\": \"{addr}\"}}"),
    )
    .unwrap();
    let elsewhere = home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let memd = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_memd"));
        c.args(args)
            .current_dir(&elsewhere)
            .env("HOME", home)
            .env("PATH", &path)
            .env_remove("MEMD_ROOT")
            .env_remove("MEMD_MODELS_DIR")
            .env_remove("XDG_DATA_HOME")
            .env_remove("MEMD_TOKEN")
            .env_remove("MEMD_LOG");
        c
    };
    let out = memd(&["setup"]).output().unwrap();
    assert!(
        out.status.success(),
        "memd setup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let issued = memd(&[
        "token",
        "issue",
        "--name",
        "readme",
        "--preset",
        "dsh-desktop",
        "--json",
    ])
    .output()
    .unwrap();
    let issued: serde_json::Value = serde_json::from_slice(&issued.stdout).unwrap();
    let token = issued["secret"].as_str().unwrap().to_string();
    let mut daemon = memd(&["serve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let announced = crate::support::serve_addr(&mut daemon);
    assert_eq!(announced, addr);

    let mut script = String::from("set -eo pipefail\n");
    let (mut ran, mut skipped, mut errors) = (Vec::new(), Vec::new(), 0);
    for (line, body) in shell_blocks(&readme) {
        match not_run(&body) {
            Some(why) => skipped.push(format!("README.md:{line}: {why}")),
            None => {
                script.push_str(&format!("echo '--- README.md:{line}' >&2\n"));
                script.push_str(&as_run(&body, &addr));
                script.push('\n');
                errors += errors_shown(&body);
                ran.push(line);
            }
        }
    }
    let work = home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env("HOME", home)
        .env("PATH", &path)
        .env("README_TOKEN", &token)
        .env_remove("MEMD_ROOT")
        .env_remove("MEMD_MODELS_DIR")
        .env_remove("XDG_DATA_HOME")
        .env_remove("MEMD_TOKEN")
        .output()
        .unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let stopped = daemon.wait().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("README blocks run (first lines): {ran:?}; not run: {skipped:?}");
    assert!(
        out.status.success(),
        "the README's examples failed (blocks at lines {ran:?}; not run: {skipped:?}):\n{stderr}\n{stdout}"
    );
    assert!(stopped.success(), "memd serve did not stop cleanly");
    assert!(ran.len() >= 2, "blocks run: {ran:?}; not run: {skipped:?}");
    let envelopes = stdout.matches("{\"error\":").count();
    assert_eq!(
        envelopes, errors,
        "error envelopes printed where the README shows none:\n{stdout}"
    );
    assert!(
        !stderr.contains("ROOT_LOCKED") && !stderr.contains("error["),
        "{stderr}"
    );
}

#[test]
fn the_readme_runner_reads_blocks_and_placeholders() {
    let text = "# T\n\n```sh\nscripts/quickstart.sh\n```\n\n```json\n{}\n```\n\n```sh\n\
                export TOKEN=mh_0123…   # printed once\nURL=http://127.0.0.1:8787\n\
                curl -s $URL/v1/get      # {\"error\":{\"code\":\"NOT_FOUND\"}}\n```\n\n\
                ```bash\ncargo install --locked --path .\nmemd setup\n```\n\n\
                ```sh\nnohup memd serve &\nmemd search x\n```\n";
    let blocks = shell_blocks(text);
    assert_eq!(blocks.len(), 4);
    assert_eq!(
        not_run(&blocks[0].1).as_deref(),
        Some("runs scripts/quickstart.sh")
    );
    assert_eq!(not_run(&blocks[1].1), None);
    assert_eq!(not_run(&blocks[2].1).as_deref(), Some("runs cargo"));
    assert_eq!(not_run(&blocks[3].1).as_deref(), Some("runs memd serve"));
    let run = as_run(&blocks[1].1, "127.0.0.1:5555");
    assert!(
        run.starts_with("export TOKEN=\"$README_TOKEN\"\nURL=http://127.0.0.1:5555\n"),
        "{run}"
    );
    assert_eq!(errors_shown(&blocks[1].1), 1);
}
