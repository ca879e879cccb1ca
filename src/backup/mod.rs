//! Backups: a `.tar.gz` of `memories/`, `tokens.json` and `config.json` with a
//! manifest (sha256 and size of every file, counts, format versions) signed
//! with a key that never leaves this root. Never the index: it is rebuilt
//! after a restore.
//!
//! - `create` may run next to a live writer: the journal is append-only and
//!   each journal file is copied up to its last complete line, so a backup
//!   never contains a torn line. The archive is written durably
//!   ([`crate::base::durable::write_atomic_with`]), so a crash never leaves a
//!   half archive under the final name. Its manifest is signed (HMAC-SHA256,
//!   `signing.rs`) with `ROOT/backup.key`, made on first use and never
//!   archived, so a restore can tell an archive made on this root from one
//!   made elsewhere (or crafted).
//! - [`verify()`] streams the whole archive and checks every entry against the
//!   manifest and every size against a cap while it decompresses (a
//!   decompression bomb stops at the cap); any damage (gzip, tar, checksum,
//!   missing, extra or duplicate file, unsafe path, link or other non-file
//!   entry, a signature that does not match) is refused with `INVALID_INPUT`.
//! - `restore` needs the writer lock, so it is refused while `memd serve`
//!   runs. It verifies first and writes nothing unless the archive is sound
//!   and, if it was not made on this root, `foreign` is set. It then merges:
//!   files the root lacks are added, a journal file the archive extends is
//!   replaced by the longer copy, and nothing on the root is ever deleted or
//!   overwritten with different content (such a conflict refuses the whole
//!   restore). `tokens.json` and `config.json` stay as they are unless asked
//!   for (`with_tokens`, `with_config`), and then the plan (`plan.rs`) shows
//!   what changes before anything moves. Staging happens in
//!   `ROOT/.restore-*`, removed on every path out, and stale ones from a
//!   crash are removed by the next restore. Files under `memories/` are put
//!   in place by the store (`store::files`), the root's own files by
//!   [`crate::base::durable::rename_all`].
//!
//! Files: `manifest.rs` (what an archive holds, which paths it may hold),
//! `signing.rs` (the key and the signature), `create.rs`, `verify.rs`
//! (reading an archive, listing, pruning), `restore.rs` and `plan.rs` (what
//! a restore changes in `tokens.json` and `config.json`).

mod create;
pub(crate) mod manifest;
pub(crate) mod plan;
mod restore;
pub(crate) mod signing;
mod verify;

pub(crate) use create::create;
pub(crate) use plan::RestorePlan;
pub(crate) use restore::{RestoreOptions, restore};
pub use verify::{Checked, Limits, verify, verify_with};
pub(crate) use verify::{list, prune};
