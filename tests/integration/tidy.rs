//! Tidy checks over the source tree.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Issue 19: `unsafe` (blocks, functions, `allow(unsafe_code)`) appears in
/// one place only: `index/vector.rs`, the two calls into SQLite's C
/// interface (registering the sqlite-vec extension, reading SQLite's
/// memory count).
#[test]
fn unsafe_code_lives_only_in_the_calls_into_sqlite() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found the sources");
    let word = regex::Regex::new(r"\bunsafe(\b|_code)").unwrap();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            // Comments may talk about unsafe paths; code may not be unsafe.
            let code = line.split("//").next().unwrap_or("");
            if word.is_match(code) {
                let rel = file.strip_prefix(&src).unwrap().display().to_string();
                found.push(format!("{rel}:{}", n + 1));
            }
        }
    }
    assert!(
        found.iter().all(|at| at.starts_with("index/vector.rs:")),
        "unsafe outside index/vector.rs: {found:?}"
    );
    assert!(!found.is_empty(), "the registration itself is found");
}

/// Longest function body allowed, in lines (signature to closing brace).
const MAX_FN_LINES: usize = 100;

/// No function (outside tests) is longer than [`MAX_FN_LINES`] lines: a
/// longer one does several things, and each deserves a name.
#[test]
fn functions_are_at_most_100_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut long = Vec::new();
    let (mut functions, mut over_60) = (0usize, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let code: Vec<char> = super::layering::strip(&text).chars().collect();
        let rel = format!("src/{}", file.strip_prefix(&src).unwrap().display());
        for (name, line, range) in super::layering::fn_bodies(&code) {
            let lines = code[range].iter().filter(|&&c| c == '\n').count() + 1;
            functions += 1;
            if lines > 60 {
                over_60.push(format!("{rel}:{line}: fn {name} is {lines} lines"));
            }
            if lines > MAX_FN_LINES {
                long.push(format!("{rel}:{line}: fn {name} is {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them):\n{}",
        long.join("\n")
    );
    // Well-kept Rust codebases have 1.3–3.5% of their functions over 60 lines.
    let share = over_60.len() as f64 / functions as f64;
    eprintln!(
        "{} of {functions} functions over 60 lines ({:.1}%)",
        over_60.len(),
        share * 100.0
    );
    assert!(
        share <= 0.035,
        "{} of {functions} functions are over 60 lines (split some):\n{}",
        over_60.len(),
        over_60.join("\n")
    );
}
