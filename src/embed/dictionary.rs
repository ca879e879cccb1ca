//! The installed dictionary: the CC-CEDICT file found next to the embedding
//! model, loaded once, on first use, into the bilingual lexicon
//! ([`crate::analysis::lexicon`], which parses it) of the cross-lingual
//! full-text pass ([`crate::query::translate`]).
//!
//! `memd setup` (or `scripts/setup.sh`) extracts `cedict_1_0_ts_utf-8_mdbg.txt` into
//! `$MEMD_MODELS_DIR/cedict/`. Without the file memd works as before: the
//! cross-lingual pass is simply off (`memd doctor` says so). `MEMD_LEXICON`
//! names another file, or `off` to disable the pass.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::analysis::lexicon::Lexicon;

/// The dictionary file's name inside `$MEMD_MODELS_DIR/cedict/`.
pub const CEDICT_FILE: &str = "cedict_1_0_ts_utf-8_mdbg.txt";

/// The lexicon file in force: `MEMD_LEXICON`, else the installed
/// CC-CEDICT; `None` when `MEMD_LEXICON=off`.
pub fn lexicon_path() -> Option<PathBuf> {
    match std::env::var_os("MEMD_LEXICON").filter(|v| !v.is_empty()) {
        Some(v) if v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(
            super::EmbedderConfig::models_dir()
                .join("cedict")
                .join(CEDICT_FILE),
        ),
    }
}

/// The loaded lexicon with how long loading took, if it is installed.
pub struct Loaded {
    /// The lexicon.
    pub lexicon: Lexicon,
    /// Where it was read from.
    pub path: PathBuf,
    /// Milliseconds spent reading and parsing it.
    pub load_ms: u128,
}

static LEXICON: OnceLock<Option<Loaded>> = OnceLock::new();

fn load() -> Option<Loaded> {
    let path = lexicon_path()?;
    let start = std::time::Instant::now();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "lexicon unreadable: cross-lingual full text is off");
            }
            return None;
        }
    };
    let lexicon = Lexicon::parse(&text);
    let load_ms = start.elapsed().as_millis();
    tracing::info!(
        path = %path.display(),
        entries = lexicon.entries(),
        heap_bytes = lexicon.heap_bytes(),
        load_ms,
        "lexicon loaded"
    );
    (lexicon.entries() > 0).then_some(Loaded {
        lexicon,
        path,
        load_ms,
    })
}

/// The installed lexicon, loaded on first call; `None` when it is not installed (or off).
pub fn lexicon() -> Option<&'static Lexicon> {
    loaded().map(|l| &l.lexicon)
}

/// The installed lexicon with where it came from and its load time.
pub fn loaded() -> Option<&'static Loaded> {
    LEXICON.get_or_init(load).as_ref()
}

/// Where the lexicon stands, without loading it (for `/v1/health`).
pub fn status() -> String {
    match (LEXICON.get(), lexicon_path()) {
        (Some(Some(l)), _) => format!(
            "cross-lingual lexicon loaded ({} headwords)",
            l.lexicon.entries()
        ),
        (_, None) => "cross-lingual lexicon off (MEMD_LEXICON=off)".into(),
        (Some(None), Some(_)) => "no cross-lingual lexicon: full text stays within one language".into(),
        (None, Some(p)) if p.is_file() => {
            "cross-lingual lexicon installed, loads on first need".into()
        }
        (None, Some(_)) => {
            "no cross-lingual lexicon (`memd setup` installs it): full text stays within one language".into()
        }
    }
}
