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
/// one place only: registering the sqlite-vec extension with SQLite.
#[test]
fn unsafe_code_lives_only_in_the_sqlite_vec_registration() {
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
        "unsafe outside the sqlite-vec registration: {found:?}"
    );
    assert!(!found.is_empty(), "the registration itself is found");
}
