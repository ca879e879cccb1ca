//! Whole-file replacement that never leaves a half-written file behind.

use std::path::Path;

use crate::error::{IoContext, Result};

/// Writes `bytes` to `path` through a temp file, fsync and rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    {
        // Tokens, config and members are private whatever the umask.
        let mut f = crate::layout::create_private(&tmp).ctx("cannot create", &tmp)?;
        f.write_all(bytes).ctx("cannot write", &tmp)?;
        f.sync_all().ctx("cannot fsync", &tmp)?;
    }
    std::fs::rename(&tmp, path).ctx("cannot replace", path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        // Persists the rename; a failure here only risks the previous version surviving a power cut.
        let _ = d.sync_all();
    }
    Ok(())
}
