//! # memory-hub
//!
//! A local-first memory service for AI agents. Memories live as Markdown
//! documents and append-only JSONL facts under `ROOT/memories/` — the source of
//! truth. Everything under `ROOT/data/` is derived and can be rebuilt from the
//! files at any time with identical results.
//!
//! ## Bird's-eye view
//!
//! ```text
//!  CLI (cmd/)  ──►  Hub (hub.rs): use-cases + the single writer
//!                    │            │
//!        store/ (source of truth) index/ (derived)
//!        journal.rs  JSONL + fsync  text.rs   tantivy, our tokenizer
//!        markdown.rs docs → chunks  meta.rs   SQLite + migrations
//!        lock.rs     one writer     filter.rs visibility → query clauses
//!                                   search.rs AND pass, OR fallback
//! ```
//!
//! A write goes: validate → append one JSON line per record → `fsync` (one per
//! group of concurrent writes) → acknowledge after the same catch-up that
//! runs at startup has applied the new lines to tantivy and SQLite.
//!
//! ## Code map
//!
//! - [`config`]: root layout (`memories/`, `data/`, `config.json`) and typed config.
//! - [`model`], [`ids`]: plain domain types and id schemes; no IO.
//! - [`store`]: the only writer of `memories/`: [`store::journal`], [`store::markdown`], [`store::lock`].
//! - [`index`]: the only writer of `data/index/`: [`index::text`] (tantivy),
//!   [`index::meta`] (SQLite), [`index::tokenizer`], [`index::filter`].
//! - [`search`]: query planning and ranking.
//! - [`hub`]: the application service every surface calls.
//! - [`error`]: one error type with stable codes.
//! - `cmd/` (binary side, [`cmd`]): one file per subcommand; the only code that prints to stdout.
//!
//! ## Invariants
//!
//! - Nothing is acknowledged before its journal line is fsync'd.
//! - `data/index/` equals a replay of `memories/`: `memd reindex` rebuilds it and
//!   gives the same search results as the incrementally maintained index.
//! - A torn or corrupt journal line is reported with `file:line` and skipped; it
//!   never blocks startup and never hides the lines around it.
//! - One process writes a root (`ROOT/.memd.lock`); a second writer gets `ROOT_LOCKED`.
//! - Visibility filters are clauses of the tantivy query and of the SQL `WHERE`,
//!   never a filter applied to results afterwards.

pub mod cmd;
pub mod config;
pub mod embed;
pub mod error;
pub mod eval;
pub mod hub;
pub mod ids;
pub mod index;
pub mod model;
pub mod search;
pub mod store;

pub use error::{Error, ErrorCode, Result};
