//! `memd setup`: the install logic of `scripts/setup.sh`, carried by the
//! binary. Against the install already in the cache (scripts/test.sh makes
//! sure there is one) it changes nothing and is fast; `--check` names what
//! is missing in a models directory; without Python it says what to
//! install before anything is downloaded. Nothing here downloads.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::Value;

/// The models directory the tests' install lives in.
fn installed_models() -> PathBuf {
    match std::env::var_os("MEMD_MODELS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/memory-hub/models")
        }
    }
}

fn setup(models: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memd"))
        .arg("setup")
        .args(args)
        .env("MEMD_MODELS_DIR", models)
        .env_remove("MEMD_ROOT")
        .output()
        .expect("run memd setup")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Mirrors the installed files of `from` into `to` (hard links where the
/// file system allows, copies otherwise; symbolic links as links), without
/// the venv and wheel cache the check does not look at.
fn mirror(from: &Path, to: &Path) {
    for dir in ["multilingual-e5-small", "onnxruntime", "cedict"] {
        std::fs::create_dir_all(to.join(dir)).unwrap();
        for entry in std::fs::read_dir(from.join(dir)).unwrap().flatten() {
            let target = to.join(dir).join(entry.file_name());
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.file_type().is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target)
                    .unwrap();
            } else if std::fs::hard_link(entry.path(), &target).is_err() {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs an installed model cache (scripts/setup.sh)"
)]
#[test]
fn memd_setup_is_idempotent_and_fast_on_an_installed_cache() {
    let models = installed_models();
    let stamp = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let model = models.join("multilingual-e5-small/model_int8.onnx");
    let before = stamp(&model);
    let started = Instant::now();
    let first = setup(&models, &["--json"]);
    let took = started.elapsed();
    assert!(
        first.status.success(),
        "the model is installed by scripts/setup.sh (scripts/test.sh runs it): {}",
        text(&first.stderr)
    );
    let paths: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(
        paths["model_dir"].as_str().map(PathBuf::from),
        Some(models.join("multilingual-e5-small"))
    );
    assert_eq!(
        paths["onnxruntime_lib"].as_str().map(PathBuf::from),
        Some(models.join("onnxruntime/libonnxruntime.so"))
    );
    assert!(text(&first.stderr).contains("already installed"));
    // Nothing was rebuilt, and a verified install costs only its checksums.
    assert_eq!(stamp(&model), before);
    assert!(took.as_secs() < 60, "took {took:?}");
    eprintln!("memd setup on an installed cache took {took:?}");
    // The same lines as the script prints, run after run.
    let second = setup(&models, &[]);
    assert!(second.status.success());
    assert_eq!(
        text(&second.stdout),
        format!(
            "model_dir={}\nonnxruntime_lib={}\n",
            models.join("multilingual-e5-small").display(),
            models.join("onnxruntime/libonnxruntime.so").display()
        )
    );
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "needs an installed model cache (scripts/setup.sh)"
)]
#[test]
fn memd_setup_check_names_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    // An empty directory: nothing installed.
    std::fs::create_dir_all(&models).unwrap();
    let out = setup(&models, &["--check"]);
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("memd setup"),
        "{}",
        text(&out.stderr)
    );

    // A whole install verifies; without its tokenizer it does not.
    mirror(&installed_models(), &models);
    let out = setup(&models, &["--check"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_file(models.join("multilingual-e5-small/tokenizer.json")).unwrap();
    let out = setup(&models, &["--check", "--json"]);
    assert_eq!(out.status.code(), Some(6));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["error"]["code"], "EMBEDDING_UNAVAILABLE");
    let message = envelope["error"]["message"].as_str().unwrap();
    assert!(message.contains("tokenizer.json missing"), "{message}");
    // Only the mirror lost its file, not the install it links to.
    assert!(
        installed_models()
            .join("multilingual-e5-small/tokenizer.json")
            .is_file()
    );
}

#[test]
fn memd_setup_without_python_says_what_to_install_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memd"))
        .args(["setup"])
        .env("MEMD_MODELS_DIR", dir.path())
        .env("PYTHON", dir.path().join("no-python3"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Python 3 with venv and pip") && stderr.contains("install python3"),
        "{stderr}"
    );
    // Nothing was fetched or half-installed.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
