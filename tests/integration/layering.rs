//! The layering of `src/` is enforced, not only written down: this test reads
//! every `crate::`/`super::`/`self::` path in the sources (in `use` lines and
//! inline), maps it to the top-level module and the file it names (a file of
//! a sub-module such as `hub/parts/writer.rs` is `parts/writer`), and fails
//! on any import the "Layers" table in the crate docs (`src/lib.rs`) does not
//! allow (unit tests included), on a right in that table nothing uses, on a
//! surface (`http`, `mcp`, `console`) reaching the engine (`index`, `store`,
//! `consolidate`, `embed`, …) instead of the hub's use cases, on any cycle
//! among top-level modules, and on any cycle among the files of one module
//! (there a file's `#[cfg(test)]` module may use any sibling, and a `mod.rs`
//! is a facade). Violations are printed as `file:line`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A source file's place: top-level module and file inside it (`mod` for
/// `mod.rs`, the module's own name for a single-file module).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    top: String,
    file: String,
}

struct Source {
    path: String,
    place: Place,
    /// The module path of the file inside its top-level module: `[]` for
    /// `src/<top>.rs` and `src/<top>/mod.rs`, `["x"]` for `src/<top>/x.rs`
    /// and `src/<top>/x/mod.rs`, `["x", "y"]` for `src/<top>/x/y.rs`.
    module: Vec<String>,
    /// Whether the file is a `mod.rs`: a module's facade, whose `self` is
    /// its directory and whose children it names directly.
    facade: bool,
    text: String,
}

/// One reference from a file to another place, with its line.
#[derive(Debug, Clone)]
struct Edge {
    from: usize,
    line: usize,
    to: Place,
    /// Inside a `#[cfg(test)]` module.
    in_test: bool,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn sources() -> Vec<Source> {
    let src = src_dir();
    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut out = Vec::new();
    for p in files {
        let rel: Vec<String> = p
            .strip_prefix(&src)
            .unwrap()
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let stem = |s: &str| s.trim_end_matches(".rs").to_string();
        let (top, module, facade): (String, Vec<String>, bool) = match rel.as_slice() {
            [f] if f == "lib.rs" || f == "main.rs" => continue,
            [f] => (stem(f), Vec::new(), false),
            [d, f] if f == "mod.rs" => (d.clone(), Vec::new(), true),
            [d, f] => (d.clone(), vec![stem(f)], false),
            [d, sub, f] if f == "mod.rs" => (d.clone(), vec![sub.clone()], true),
            [d, sub, f] => (d.clone(), vec![sub.clone(), stem(f)], false),
            other => panic!("unexpected source depth: {other:?}"),
        };
        let file = match (module.is_empty(), facade) {
            (true, true) => "mod".to_string(),
            (true, false) => top.clone(),
            (false, _) => module.join("/"),
        };
        let text = std::fs::read_to_string(&p).unwrap();
        out.push(Source {
            path: format!("src/{}", rel.join("/")),
            place: Place { top, file },
            module,
            facade,
            text,
        });
    }
    out
}

/// Blanks comments, string and char literals (keeping newlines), so only code remains.
pub(crate) fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !(i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // raw string r"..." / r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == '"' {
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let close: Vec<char> = close.chars().collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                let end = (j + close.len()).min(b.len());
                for &ch in &b[i..end] {
                    out.push(blank(ch));
                }
                i = end;
            } else {
                out.push(c);
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // char literal ('x', '\n', '\u{..}') or a lifetime ('a)
            let is_char = matches!(
                (next, b.get(i + 2)),
                (Some('\\'), _) | (Some(_), Some('\''))
            );
            if is_char {
                out.push(' ');
                i += 1;
                while i < b.len() && b[i] != '\'' {
                    if b[i] == '\\' {
                        out.push(' ');
                        i += 1;
                    }
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // ::
    Open, // {
    Close,
    Comma,
    Semi,
    Hash,
    Other(char),
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' || ch == '$' {
            let s = i;
            i += 1;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[s..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((
                match ch {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ',' => Tok::Comma,
                    ';' => Tok::Semi,
                    '#' => Tok::Hash,
                    o => Tok::Other(o),
                },
                line,
            ));
            i += 1;
        }
    }
    out
}

/// A path found in code: its segments, line, how many inline modules enclose
/// it, and whether it is inside a `#[cfg(test)]` module.
#[derive(Debug)]
struct FoundPath {
    segs: Vec<String>,
    line: usize,
    inline_depth: usize,
    in_test: bool,
    is_pub_use: bool,
}

/// Parses a path tree starting at `toks[i]` (an identifier), appending every
/// full path to `out`; returns the index after it.
fn path_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut segs = prefix;
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(s)) => {
                if s == "self" && !segs.is_empty() {
                    // `a::{self, ..}` names `a` itself
                } else {
                    segs.push(s.clone());
                }
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::Path) {
                    i += 1;
                    continue;
                }
                out.push(segs);
                return i;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Close) => {
                            return i + 1;
                        }
                        Some(Tok::Comma) => i += 1,
                        Some(Tok::Ident(_)) | Some(Tok::Open) => {
                            i = path_tree(toks, i, segs.clone(), out);
                        }
                        Some(Tok::Other('*')) => {
                            out.push(segs.clone());
                            i += 1;
                        }
                        None => return i,
                        Some(_) => i += 1,
                    }
                }
            }
            Some(Tok::Other('*')) => {
                out.push(segs);
                return i + 1;
            }
            _ => {
                out.push(segs);
                return i;
            }
        }
    }
}

fn find_paths(text: &str, child_files: &BTreeSet<String>) -> Vec<FoundPath> {
    let toks = tokens(&strip(text));
    let mut out = Vec::new();
    let mut depth = 0usize;
    // brace depth at which each open inline module started, and whether it is a test module
    let mut inline: Vec<(usize, bool)> = Vec::new();
    let mut pending_cfg_test = false;
    let mut i = 0;
    let mut prev_path_sep = false;
    while i < toks.len() {
        let (t, line) = &toks[i];
        match t {
            Tok::Hash => {
                // #[cfg(test)]
                let words: Vec<String> = toks[i..(i + 8).min(toks.len())]
                    .iter()
                    .filter_map(|(t, _)| match t {
                        Tok::Ident(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect();
                if words.len() >= 2 && words[0] == "cfg" && words[1] == "test" {
                    pending_cfg_test = true;
                }
                i += 1;
                prev_path_sep = false;
                continue;
            }
            Tok::Open => {
                depth += 1;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Semi => pending_cfg_test = false,
            Tok::Ident(s) if s == "mod" => {
                if let (Some((Tok::Ident(_), _)), Some((Tok::Open, _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    let test = pending_cfg_test || inline.last().is_some_and(|(_, t)| *t);
                    inline.push((depth + 1, test));
                    pending_cfg_test = false;
                }
            }
            Tok::Ident(s)
                if !prev_path_sep
                    && (s == "crate"
                        || s == "$crate"
                        || s == "super"
                        || s == "self"
                        || child_files.contains(s))
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) =>
            {
                let is_pub_use = {
                    let back: Vec<&Tok> = toks[i.saturating_sub(6)..i]
                        .iter()
                        .map(|(t, _)| t)
                        .collect();
                    let has_use = back
                        .iter()
                        .any(|t| matches!(t, Tok::Ident(w) if w == "use"));
                    let has_pub = back
                        .iter()
                        .any(|t| matches!(t, Tok::Ident(w) if w == "pub"));
                    let stmt_break = back
                        .iter()
                        .rposition(|t| matches!(t, Tok::Semi | Tok::Close | Tok::Open))
                        .map(|p| {
                            back[p + 1..]
                                .iter()
                                .any(|t| matches!(t, Tok::Ident(w) if w == "pub"))
                        });
                    has_use && has_pub && stmt_break.unwrap_or(true)
                };
                let mut paths = Vec::new();
                let end = path_tree(&toks, i, Vec::new(), &mut paths);
                let in_test = inline.iter().any(|(_, t)| *t) || pending_cfg_test;
                for segs in paths {
                    out.push(FoundPath {
                        segs,
                        line: *line,
                        inline_depth: inline.len(),
                        in_test,
                        is_pub_use,
                    });
                }
                i = end;
                prev_path_sep = false;
                continue;
            }
            _ => {}
        }
        prev_path_sep = matches!(t, Tok::Path) || matches!(t, Tok::Other('.'));
        i += 1;
    }
    out
}

struct Crate {
    sources: Vec<Source>,
    /// top module → its files (empty for single-file modules)
    files: BTreeMap<String, BTreeSet<String>>,
    /// (top, name) → where a `pub use` in `mod.rs` (or lib.rs, top "") takes `name` from
    reexports: BTreeMap<(String, String), Place>,
}

impl Crate {
    fn load() -> Crate {
        let sources = sources();
        let mut files: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for s in &sources {
            let e = files.entry(s.place.top.clone()).or_default();
            if !s.module.is_empty() {
                e.insert(s.place.file.clone());
            }
        }
        let mut c = Crate {
            sources,
            files,
            reexports: BTreeMap::new(),
        };
        // lib.rs re-exports (e.g. `pub use error::{Error, ErrorCode, Result}`)
        let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
        let tops: BTreeSet<String> = c.files.keys().cloned().collect();
        for p in find_paths(&lib, &tops) {
            if p.is_pub_use && p.segs.len() >= 2 {
                let name = p.segs.last().unwrap().clone();
                let target = c.place_at(&p.segs[0], &[], &p.segs[1..2]);
                c.reexports.insert((String::new(), name), target);
            }
        }
        // re-exports of module roots, resolved in two rounds so chains settle
        for _ in 0..2 {
            for idx in 0..c.sources.len() {
                let s = &c.sources[idx];
                if !s.module.is_empty() {
                    continue;
                }
                let children = c.children(idx);
                let top = s.place.top.clone();
                for p in find_paths(&s.text, &children) {
                    if !p.is_pub_use || p.in_test || p.segs.len() < 2 {
                        continue;
                    }
                    if let Some(to) = c.resolve(idx, &p) {
                        c.reexports
                            .insert((top.clone(), p.segs.last().unwrap().clone()), to);
                    }
                }
            }
        }
        c
    }

    /// The files a facade declares directly (the next level of its directory).
    fn children(&self, idx: usize) -> BTreeSet<String> {
        let s = &self.sources[idx];
        if !s.facade {
            return BTreeSet::new();
        }
        let depth = s.module.len() + 1;
        self.sources
            .iter()
            .filter(|o| {
                o.place.top == s.place.top
                    && o.module.len() == depth
                    && o.module.starts_with(&s.module)
            })
            .map(|o| o.module[depth - 1].clone())
            .collect()
    }

    /// Whether `file` of `top` is a facade (`mod.rs` of the module or of a sub-module).
    fn is_facade(&self, place: &Place) -> bool {
        place.file == "mod" || self.sources.iter().any(|s| s.facade && s.place == *place)
    }

    /// The place `<top>::<base>::<rest>` names: what the top module
    /// re-exports as `rest[0]` (from its root), else the deepest file along
    /// the path, else the module's facade (or the single-file module itself).
    fn place_at(&self, top: &str, base: &[String], rest: &[String]) -> Place {
        if base.is_empty()
            && let Some(p) = rest
                .first()
                .and_then(|n| self.reexports.get(&(top.to_string(), n.clone())))
        {
            return p.clone();
        }
        let files = self.files.get(top);
        let has = |path: &[String]| files.is_some_and(|f| f.contains(&path.join("/")));
        let mut path = base.to_vec();
        let mut best = (!base.is_empty() && has(&path)).then(|| path.join("/"));
        for seg in rest {
            path.push(seg.clone());
            if !has(&path) {
                break;
            }
            best = Some(path.join("/"));
        }
        let file = match best {
            Some(f) => f,
            None if files.is_none_or(|f| f.is_empty()) => top.to_string(),
            None => "mod".into(),
        };
        Place {
            top: top.to_string(),
            file,
        }
    }

    fn in_crate(&self, segs: &[String]) -> Option<Place> {
        let first = segs.first()?;
        if self.files.contains_key(first) {
            return Some(self.place_at(first, &[], &segs[1..]));
        }
        self.reexports.get(&(String::new(), first.clone())).cloned()
    }

    /// Where a path found in source `idx` points, if inside this crate.
    fn resolve(&self, idx: usize, p: &FoundPath) -> Option<Place> {
        let s = &self.sources[idx];
        let segs = &p.segs;
        let first = segs.first()?.as_str();
        let top = s.place.top.as_str();
        match first {
            "crate" | "$crate" => self.in_crate(&segs[1..]),
            "self" => {
                if p.inline_depth > 0 || !s.facade {
                    None
                } else {
                    Some(self.place_at(top, &s.module, &segs[1..]))
                }
            }
            "super" => {
                let n = segs.iter().take_while(|x| *x == "super").count();
                if n <= p.inline_depth {
                    return None;
                }
                let rest = &segs[n..];
                let n = n - p.inline_depth;
                // A file's own module is its path; each `super` goes one up,
                // and one past the top module is the crate.
                let m = &s.module;
                if n > m.len() {
                    (n == m.len() + 1).then(|| self.in_crate(rest)).flatten()
                } else {
                    Some(self.place_at(top, &m[..m.len() - n], rest))
                }
            }
            child => {
                // a facade naming one of its files directly
                if s.facade && p.inline_depth == 0 && self.children(idx).contains(child) {
                    let mut base = s.module.clone();
                    base.push(child.to_string());
                    Some(self.place_at(top, &base, &segs[1..]))
                } else {
                    None
                }
            }
        }
    }

    fn edges(&self) -> Vec<Edge> {
        let mut out = Vec::new();
        for (idx, s) in self.sources.iter().enumerate() {
            let children = self.children(idx);
            for p in find_paths(&s.text, &children) {
                if let Some(to) = self.resolve(idx, &p)
                    && to != s.place
                {
                    out.push(Edge {
                        from: idx,
                        line: p.line,
                        to,
                        in_test: p.in_test,
                    });
                }
            }
        }
        out
    }
}

/// The allowed imports, read from the "Layers" table of the crate docs:
/// lines `//! | `module` | `a`, `b` |`.
fn allowed() -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let mut out = BTreeMap::new();
    let mut in_section = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with("## ") {
            in_section = doc == "## Layers";
            continue;
        }
        if !in_section || !doc.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = doc.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 2 || !cells[0].starts_with('`') {
            continue;
        }
        let names = |cell: &str| -> Vec<String> {
            cell.split(',')
                .map(|x| {
                    x.split(" (")
                        .next()
                        .unwrap_or("")
                        .trim()
                        .trim_matches('`')
                        .to_string()
                })
                .filter(|x| !x.is_empty() && x != "—")
                .collect()
        };
        let mods = names(cells[0]);
        let may: BTreeSet<String> = names(cells[1]).into_iter().collect();
        for m in mods {
            out.insert(m, may.clone());
        }
    }
    out
}

/// A cycle in a graph, if any (as the list of nodes around it).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|x| x == m).unwrap();
                    let mut c = stack[start..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, graph, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

/// Every reference along a cycle, as `file:line` lines.
fn explain(
    c: &Crate,
    edges: &[Edge],
    cycle: &[String],
    key: impl Fn(&Edge, &Place) -> (String, String),
) -> String {
    let mut lines = Vec::new();
    for w in cycle.windows(2) {
        for e in edges {
            let (a, b) = key(e, &c.sources[e.from].place);
            let line = format!("  {}:{} ({a} -> {b})", c.sources[e.from].path, e.line);
            if a == w[0] && b == w[1] && !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn imports_follow_the_layers_table() {
    let c = Crate::load();
    let edges = c.edges();
    let allowed = allowed();
    assert!(
        !allowed.is_empty(),
        "no `## Layers` table found in src/lib.rs"
    );
    let table: BTreeMap<String, BTreeSet<String>> = allowed
        .iter()
        .map(|(k, v)| (k.clone(), v.iter().filter(|m| *m != "*").cloned().collect()))
        .collect();
    if let Some(cycle) = find_cycle(&table) {
        panic!(
            "the Layers table itself has a cycle: {}",
            cycle.join(" -> ")
        );
    }
    let mut bad = Vec::new();
    for top in c.files.keys() {
        if !allowed.contains_key(top) {
            bad.push(format!(
                "module `{top}` has no row in the Layers table of src/lib.rs"
            ));
        }
    }
    for m in allowed.keys() {
        if !c.files.contains_key(m) {
            bad.push(format!(
                "the Layers table names `{m}`, which is not a module"
            ));
        }
    }
    for e in &edges {
        let from = &c.sources[e.from];
        if from.place.top == e.to.top {
            continue;
        }
        if allowed
            .get(&from.place.top)
            .is_some_and(|a| a.contains(&e.to.top) || a.contains("*"))
        {
            continue;
        }
        bad.push(format!(
            "{}:{}: `{}` may not import `{}` (see the Layers table in src/lib.rs)",
            from.path, e.line, from.place.top, e.to.top
        ));
    }
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

#[test]
fn no_cycle_among_top_level_modules() {
    let c = Crate::load();
    let edges = c.edges();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &edges {
        let from = &c.sources[e.from].place.top;
        if *from != e.to.top {
            g.entry(from.clone()).or_default().insert(e.to.top.clone());
        }
    }
    if let Some(cycle) = find_cycle(&g) {
        panic!(
            "import cycle among modules: {}\n{}",
            cycle.join(" -> "),
            explain(&c, &edges, &cycle, |e, p| (p.top.clone(), e.to.top.clone()))
        );
    }
}

/// Files of one module import each other without cycles; `mod.rs` is the
/// module's facade (it declares and re-exports its files, which extend the
/// types it defines), so references through it count as references to the
/// file a name is re-exported from, and references to items it defines are
/// not edges. A file's unit tests may use any file of their module.
#[test]
fn no_cycle_among_files_of_a_module() {
    let c = Crate::load();
    let edges = c.edges();
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for e in &edges {
        let from = &c.sources[e.from].place;
        if from.top == e.to.top && !c.is_facade(from) && !c.is_facade(&e.to) && !e.in_test {
            graphs
                .entry(from.top.clone())
                .or_default()
                .entry(from.file.clone())
                .or_default()
                .insert(e.to.file.clone());
        }
    }
    let mut bad = String::new();
    for (top, g) in &graphs {
        if let Some(cycle) = find_cycle(g) {
            bad.push_str(&format!(
                "import cycle among the files of `{top}`: {}\n",
                cycle.join(" -> ")
            ));
            bad.push_str(&explain(&c, &edges, &cycle, |e, p| {
                if p.top == *top && e.to.top == *top {
                    (p.file.clone(), e.to.file.clone())
                } else {
                    (String::new(), String::new())
                }
            }));
        }
    }
    assert!(bad.is_empty(), "{bad}");
}

/// Every right the Layers table grants is used by at least one import: a
/// row lists what its module needs, not what it might.
#[test]
fn the_layers_table_has_no_unused_rights() {
    let c = Crate::load();
    let edges = c.edges();
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &edges {
        let from = &c.sources[e.from].place.top;
        if *from != e.to.top {
            used.entry(from.clone())
                .or_default()
                .insert(e.to.top.clone());
        }
    }
    let mut unused = Vec::new();
    for (module, may) in allowed() {
        for m in may.iter().filter(|m| *m != "*") {
            if !used.get(&module).is_some_and(|u| u.contains(m)) {
                unused.push(format!("`{module}` may import `{m}` but does not"));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "unused rights in the Layers table of src/lib.rs (remove them):\n{}",
        unused.join("\n")
    );
}

/// The surfaces parse, call one use case of the hub and reply: they never
/// reach the engine below it. The table says so, and so do the imports.
#[test]
fn surfaces_reach_the_engine_only_through_the_hub() {
    const ENGINE: &[&str] = &[
        "index",
        "store",
        "consolidate",
        "embed",
        "search",
        "relevance",
        "query",
        "lifecycle",
        "content",
        "backup",
        "transfer",
        "migrate",
    ];
    let table = allowed();
    let c = Crate::load();
    let mut bad = Vec::new();
    for surface in ["http", "mcp", "console"] {
        for m in ENGINE {
            if table.get(surface).is_some_and(|a| a.contains(*m)) {
                bad.push(format!("the Layers table lets `{surface}` import `{m}`"));
            }
        }
    }
    for e in c.edges() {
        let from = &c.sources[e.from];
        if ["http", "mcp", "console"].contains(&from.place.top.as_str())
            && ENGINE.contains(&e.to.top.as_str())
        {
            bad.push(format!(
                "{}:{}: `{}` reaches `{}`; call a hub use case instead",
                from.path, e.line, from.place.top, e.to.top
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Third-party types stay in their layer: `http` never touches rusqlite or
/// tantivy; `store`, `index`, `hub` and `auth` never mention axum; rusqlite
/// appears only in `index` and the vector cache (`embed/cache.rs`), tantivy
/// only in `index` and the tokenizer adapter (`analysis/tokenizer.rs`), so
/// the domain error and everything above the index meet the backends only
/// as `index::IndexError` sources; ureq (the one outbound HTTP client) only
/// in `client`, hyper only in the `http` server.
#[test]
fn foreign_types_keep_to_their_layer() {
    let c = Crate::load();
    let backend = regex::Regex::new(r"\b(rusqlite|tantivy)\b").unwrap();
    for s in &c.sources {
        let code = strip(&s.text);
        let words: &[&str] = match s.place.top.as_str() {
            "http" => &["rusqlite::", "tantivy::", "use rusqlite", "use tantivy"],
            "index" | "store" | "hub" | "auth" => &["axum::", "use axum"],
            _ => &[],
        };
        for w in words {
            if let Some(pos) = code.find(w) {
                let line = code[..pos].lines().count().max(1);
                panic!("{}:{line} mentions {w}", s.path);
            }
        }
        let may_use_backends = s.place.top == "index"
            || matches!(
                s.path.as_str(),
                "src/embed/cache.rs" | "src/analysis/tokenizer.rs"
            );
        // One outbound HTTP client: ureq lives in `client` only, and hyper
        // (the server's HTTP stack) in `http` only.
        for (word, home) in [("ureq", "src/client.rs"), ("hyper", "src/http/")] {
            let re = regex::Regex::new(&format!(r"\b{word}(_util)?\b")).unwrap();
            if let Some(m) = re.find(&code).filter(|_| !s.path.starts_with(home)) {
                let line = code[..m.start()].lines().count().max(1);
                panic!("{}:{line} mentions {}; only {home} may", s.path, m.as_str());
            }
        }
        if let Some(m) = backend.find(&code).filter(|_| !may_use_backends) {
            let line = code[..m.start()].lines().count().max(1);
            panic!(
                "{}:{line} mentions {}; only the index (and the vector cache, the tokenizer \
                 adapter) may",
                s.path,
                m.as_str()
            );
        }
    }
}

/// Calls that create, replace, move or remove files: std's, and the durable
/// writes of `base` (which know nothing about where they write).
const FILE_WRITES: &[&str] = &[
    "fs::write(",
    "File::create(",
    "OpenOptions::new(",
    "fs::rename(",
    "fs::copy(",
    "fs::remove_file(",
    "fs::remove_dir_all(",
    "fs::hard_link(",
    ".set_len(",
    "create_private(",
    "write_atomic(",
    "write_atomic_with(",
    "copy_atomic(",
    "create_new(",
    "rename_all(",
];

/// Functions outside `store` allowed to write files while naming a path
/// under `memories/`, and why none of their writes lands there.
const MEMORIES_WRITE_EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "src/doctor.rs",
        "directories",
        "creates and removes a probe file to prove memories/ is writable; nothing stays",
    ),
    (
        "src/transfer.rs",
        "export",
        "reads documents from memories/ and writes copies into the export directory",
    ),
];

/// The function bodies of `code` (comments and strings blanked) outside
/// `#[cfg(test)]` items: `(name, first line, char range)`.
pub(crate) fn fn_bodies(code: &[char]) -> Vec<(String, usize, std::ops::Range<usize>)> {
    let text: String = code.iter().collect();
    let line_of = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let block_end = |open: usize| {
        let mut depth = 0usize;
        for (i, &c) in code.iter().enumerate().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        }
        code.len()
    };
    // Test items: the block after each `#[cfg(test)]`.
    let mut skipped: Vec<std::ops::Range<usize>> = Vec::new();
    let cfg = regex::Regex::new(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]").unwrap();
    for m in cfg.find_iter(&text) {
        let start = text[..m.start()].chars().count();
        if let Some(open) = code[start..].iter().position(|&c| c == '{') {
            skipped.push(start..block_end(start + open));
        }
    }
    let fn_re = regex::Regex::new(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut out = Vec::new();
    for cap in fn_re.captures_iter(&text) {
        let at = text[..cap.get(0).unwrap().start()].chars().count();
        if skipped.iter().any(|r| r.contains(&at)) {
            continue;
        }
        // The body opens at the first `{` before any `;` (a declaration has none).
        let rest = &code[at..];
        let Some(open) = rest.iter().position(|&c| c == '{' || c == ';') else {
            continue;
        };
        if rest[open] == ';' {
            continue;
        }
        out.push((cap[1].to_string(), line_of(at), at..block_end(at + open)));
    }
    out
}

/// The functions of a source file that write files and name a path under
/// `memories/` (`.memories()`, `.facts()`, a `"memories/…"` literal), with
/// their line and the write found.
fn memories_writers(text: &str) -> Vec<(String, usize, &'static str)> {
    let names_memories = regex::Regex::new(r#"\.(memories|facts)\(\)|"memories(/|")"#).unwrap();
    let raw: Vec<char> = text.chars().collect();
    let code: Vec<char> = strip(text).chars().collect();
    let mut out = Vec::new();
    for (name, line, range) in fn_bodies(&code) {
        let body: String = code[range.clone()].iter().collect();
        let Some(write) = FILE_WRITES.iter().find(|w| body.contains(*w)) else {
            continue;
        };
        // String literals are blanked in `code`: look for them in the raw
        // text, without its line comments.
        let raw_body: String = raw[range].iter().collect();
        let without_comments: String = raw_body
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        if names_memories.is_match(&without_comments) {
            out.push((name, line, *write));
        }
    }
    out
}

/// "Only `store` writes `memories/`": outside `store` (and `base`, whose
/// durable writes take any path), no function both writes files and names a
/// path under `memories/`, except the listed functions whose writes land
/// elsewhere. Such a write goes through a `store` function instead
/// (categories, imported documents, a restore's files, `.stignore`).
#[test]
fn only_store_writes_memories() {
    let c = Crate::load();
    let mut bad = Vec::new();
    let mut used = BTreeSet::new();
    for s in &c.sources {
        if matches!(s.place.top.as_str(), "store" | "base") {
            continue;
        }
        for (name, line, write) in memories_writers(&s.text) {
            if let Some(e) = MEMORIES_WRITE_EXCEPTIONS
                .iter()
                .find(|(file, f, _)| *file == s.path && *f == name)
            {
                used.insert((e.0, e.1));
                continue;
            }
            bad.push(format!(
                "{}:{line}: fn {name} calls {write}… and names a path under memories/; \
                 write through a `store` function",
                s.path
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "writes to memories/ outside store:\n{}",
        bad.join("\n")
    );
    for (file, f, why) in MEMORIES_WRITE_EXCEPTIONS {
        assert!(
            used.contains(&(*file, *f)),
            "the exception for {file} fn {f} ({why}) no longer applies; remove it"
        );
    }
}

/// The rule above finds the writes it is about: a write next to
/// `.memories()` or a `"memories/…"` path is caught, the same write elsewhere
/// is not, and test modules and comments are ignored.
#[test]
fn the_memories_rule_sees_what_it_forbids() {
    let src = r#"
fn categories(hub: &Hub) {
    let p = hub.layout().memories().join("x.md");
    std::fs::write(&p, "y").unwrap();
}
fn elsewhere(out: &Path) {
    // not hub.layout().memories()
    std::fs::write(out.join("x"), "y").unwrap();
}
fn restore(root: &Path, a: &Path) -> std::io::Result<()> {
    std::fs::rename(a, root.join("memories/facts/a.jsonl"))
}
fn reads_only(hub: &Hub) -> Vec<u8> {
    std::fs::read(hub.layout().memories().join("x.md")).unwrap()
}
#[cfg(test)]
mod tests {
    fn fixture(l: &Layout) {
        std::fs::write(l.memories().join("a.md"), "x").unwrap();
    }
}
"#;
    let found: Vec<(String, usize, &str)> = memories_writers(src);
    assert_eq!(
        found,
        [
            ("categories".to_string(), 2, "fs::write("),
            ("restore".to_string(), 10, "fs::rename("),
        ]
    );
}
