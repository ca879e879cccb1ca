//! The installed dictionary: the CC-CEDICT file found next to the embedding
//! model, loaded once, on first use, into the bilingual lexicon
//! ([`crate::analysis::lexicon`], which parses it) of the cross-lingual
//! full-text pass ([`crate::query::translate`]).
//!
//! `memd setup` (or `scripts/setup.sh`) extracts `cedict_1_0_ts_utf-8_mdbg.txt` into
//! `$MEMD_MODELS_DIR/cedict/`. Without the file memd works as before: the
//! cross-lingual pass is simply off (`memd doctor` says so). `MEMD_LEXICON`
//! names another file, or `off` to disable the pass.
//!
//! Parsing the text takes a second or more, so the first load writes the
//! parsed lexicon in compact binary form next to the text ([`compact_path`],
//! [`Lexicon::to_compact`]); later starts read that in one go (a few
//! milliseconds) as long as it was built from the same file (its length and
//! modification time). The text stays the source: deleting the compact file,
//! or changing the text, rebuilds it.

use std::path::{Path, PathBuf};
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
    /// Where it was read from (the CC-CEDICT text, whatever form was read).
    pub path: PathBuf,
    /// Milliseconds spent reading it (and parsing it, the first time).
    pub load_ms: u128,
    /// Whether it came from the compact form ([`compact_path`]) rather
    /// than from parsing the text.
    pub from_compact: bool,
}

static LEXICON: OnceLock<Option<Loaded>> = OnceLock::new();

/// The compact form of the lexicon in `path`, built from it on first load:
/// the same name with `.memd-lexicon` appended, in the same directory.
pub fn compact_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".memd-lexicon");
    PathBuf::from(name)
}

/// What identifies the text a compact form was built from: its length and
/// modification time. A replaced or edited dictionary differs in one of
/// them, and its compact form is built again.
fn stamp(meta: &std::fs::Metadata) -> Vec<u8> {
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("cc-cedict {} bytes, modified {modified} ns", meta.len()).into_bytes()
}

/// Reads the lexicon in `path` (CC-CEDICT text): from its compact form when
/// that was built from this very file, else by parsing the text, after which
/// the compact form is written (atomically, next to it) for the next start.
/// `None` if the file is missing, unreadable or holds no entry.
pub fn load_from(path: &Path) -> Option<Loaded> {
    let start = std::time::Instant::now();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "lexicon unreadable: cross-lingual full text is off");
            }
            return None;
        }
    };
    let stamp = stamp(&meta);
    let compact = compact_path(path);
    let (lexicon, from_compact) = match std::fs::read(&compact)
        .ok()
        .and_then(|b| Lexicon::from_compact(&b, &stamp))
    {
        Some(l) => (l, true),
        None => {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "lexicon unreadable: cross-lingual full text is off");
                    return None;
                }
            };
            let lexicon = Lexicon::parse(&text);
            if let Err(e) = write_compact(&compact, &lexicon.to_compact(&stamp)) {
                // Still works, parsing the text at every start.
                tracing::warn!(path = %compact.display(), error = %e, "cannot write the compact lexicon; the text is parsed at each start");
            }
            (lexicon, false)
        }
    };
    let load_ms = start.elapsed().as_millis();
    tracing::info!(
        path = %path.display(),
        entries = lexicon.entries(),
        heap_bytes = lexicon.heap_bytes(),
        load_ms,
        from_compact,
        "lexicon loaded"
    );
    (lexicon.entries() > 0).then(|| Loaded {
        lexicon,
        path: path.to_path_buf(),
        load_ms,
        from_compact,
    })
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// reader never sees half of it (a torn file would fail its checks anyway).
fn write_compact(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn load() -> Option<Loaded> {
    load_from(&lexicon_path()?)
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

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "開心 开心 [kai1 xin1] /to feel happy/happy/\n\
高興 高兴 [gao1 xing4] /happy/glad/\n\
魔術 魔术 [mo2 shu4] /magic/\n";

    #[test]
    fn the_first_load_builds_the_compact_form_and_later_loads_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join(CEDICT_FILE);
        std::fs::write(&text, SAMPLE).unwrap();
        let first = load_from(&text).expect("loads");
        assert!(!first.from_compact, "parsed from the text the first time");
        assert!(compact_path(&text).is_file(), "compact form written");
        let second = load_from(&text).expect("loads");
        assert!(second.from_compact, "read from the compact form");
        assert_eq!(second.lexicon, first.lexicon);
        assert_eq!(second.lexicon.chinese_of("happy"), ["开心", "高兴"]);

        // The text stays the source: a changed dictionary is parsed again.
        std::fs::write(&text, format!("{SAMPLE}貓 猫 [mao1] /cat/\n")).unwrap();
        let changed = load_from(&text).expect("loads");
        assert!(!changed.from_compact, "a stale compact form is not read");
        assert_eq!(changed.lexicon.english_of("猫"), ["cat"]);
        assert!(load_from(&text).unwrap().from_compact);

        // A damaged compact file is rebuilt, never trusted.
        std::fs::write(compact_path(&text), b"memd-lexicon-1\ngarbage").unwrap();
        let rebuilt = load_from(&text).expect("loads");
        assert!(!rebuilt.from_compact);
        assert_eq!(rebuilt.lexicon, changed.lexicon);
        assert!(load_from(&text).unwrap().from_compact);

        // No dictionary, no lexicon.
        assert!(load_from(&dir.path().join("missing.txt")).is_none());
    }

    #[test]
    fn an_unwritable_directory_still_loads_from_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join(CEDICT_FILE);
        std::fs::write(&text, SAMPLE).unwrap();
        // A directory where the compact file should go makes writing it fail.
        std::fs::create_dir(compact_path(&text)).unwrap();
        let loaded = load_from(&text).expect("loads");
        assert!(!loaded.from_compact);
        assert_eq!(loaded.lexicon.english_of("魔术"), ["magic"]);
        assert!(!load_from(&text).unwrap().from_compact);
    }
}
