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
//!  MCP over stdio (`memd mcp`, one per agent session) ─ loopback HTTP ─┐
//!  MCP over streamable HTTP (`/mcp` in `memd serve`) ── in-process ────┤  mcp/: tools, resources
//!                                                                      ▼
//!  HTTP /v1 (http/) ─ auth/ (tokens, policy → Filter), audit.rs
//!        │ spawn_blocking
//!  CLI (cmd/)  ──►  Hub (hub/): use-cases + the single writer
//!                    │            │                          │
//!        store/ (source of truth) index/ (derived)           embed/
//!        journal.rs  JSONL + fsync  text.rs   tantivy         onnx.rs  ort + tokenizers
//!        markdown.rs docs → chunks  meta.rs   SQLite          hash.rs  test embedder
//!        lock.rs     one writer     vector.rs sqlite-vec KNN  cache.rs data/cache/vectors.db
//!                                   filter.rs visibility → query clauses
//!                                   fusion.rs reciprocal rank fusion
//!                   search.rs fulltext (AND, OR fallback) | semantic | hybrid
//! ```
//!
//! A write goes: validate (one rule set for every way in, [`model::Record::validate`])
//! → append one JSON line per record to this device's journal file → `fsync`
//! (one per group of concurrent writes) → read the appended bytes back (a
//! failure truncates the file to its previous length) → acknowledge after the same catch-up that
//! runs at startup has applied the new lines to SQLite and tantivy (whose
//! commit is lazy: before the next search, or within a second). Vectors are
//! computed off the write path: in the background, by reindex, and before any
//! semantic or hybrid search (from the cache where possible).
//!
//! ## Code map
//!
//! - [`config`]: root layout (`memories/`, `data/`, `config.json`) and typed config.
//! - [`model`], [`ids`]: plain domain types and id schemes; no IO.
//! - [`store`]: the only writer of `memories/`: [`store::journal`] (per-device
//!   files), [`store::device`] (the device id), [`store::syncfiles`] (sync
//!   conflict copies and temporary files), [`store::markdown`] (strict front
//!   matter, no links), [`store::lock`], [`store::members`] (group membership for
//!   disclosure), [`store::archive`] (compressed journal months).
//! - [`index`]: the only writer of `data/index/`: [`index::text`] (tantivy),
//!   [`index::meta`] (SQLite), [`index::meta_read`] (time-ordered reads),
//!   [`index::vector`] (sqlite-vec), [`index::fusion`], [`index::tokenizer`],
//!   [`index::filter`], [`index::merge`] (device merge rules: later
//!   `(at, device)` wins, forgets beat older puts), [`index::scoped_stats`] (BM25 statistics over what the
//!   caller may read), [`index::lifecycle`] (supersede marks, `touch` replay).
//! - [`embed`]: the [`embed::Embedder`] trait, the ONNX model
//!   ([`embed::onnx`]), a deterministic test embedder ([`embed::hash`]) and the
//!   vector cache under `data/cache/` ([`embed::cache`]).
//! - [`search`]: query planning and ranking in three modes; [`relevance`]:
//!   the relevance floor of recall (script-aware cosine, else term coverage).
//! - [`lifecycle`]: retention tiers, opt-in tier expiry, promotion, the exact
//!   dedup key and ranking signals (short-term weight, importance, T0 boost).
//! - [`eval`]: recall@k / MRR evaluation on labelled datasets.
//! - [`consolidate`]: nightly ("sleep") consolidation — a deterministic pass
//!   (fold, promote, expire, flag stale) with offline salience
//!   ([`consolidate::salience`]), an optional model pass (one request per scene) whose
//!   operations are validated before they go through the normal write path,
//!   run reports under `data/consolidation/`, and rollback by run or source.
//! - [`scheduler`]: periodic jobs of `memd serve` (index commits, background
//!   embedding, daily backup, archive, sleep consolidation) with state in
//!   `data/scheduler.json`; [`watch`]: the server's watcher of `memories/` and
//!   `config.json`.
//! - [`sync`]: Syncthing glue for several devices (`.stignore`, folder and
//!   peers over its REST API, status); [`migrate`]: `memd import --from memory-hub`.
//! - [`backup`], [`transfer`], [`doctor`]: backups with signed, checksummed manifests,
//!   import/export, readiness checks; [`disk`], [`loopback`]: free space and
//!   the CLI's HTTP client for a running daemon.
//! - [`policy`]: content normalisation, credential refusal over text, title and
//!   tags (NFKC + confusables; secret writes are exempt), tier assignment.
//! - [`hub`]: the application service every surface calls: the single writer
//!   (`writer.rs`: queue, group commit, write rules), catch-up (`replay.rs`),
//!   self-healing open (`heal.rs`); reads, recall, ingest, categories in their own files.
//! - [`auth`]: tokens (hashed in `tokens.json`, presets) and [`auth::policy`], which
//!   turns a token and a request into the [`index::filter::Filter`] of every query.
//! - [`http`]: the `/v1` API (axum on its own hyper accept loop: header-read
//!   and idle timeouts, loopback Host check); the only module that knows its wire format.
//! - [`console`]: the web console at `/`: embedded static files, strict CSP;
//!   all data through `/v1` with the signed-in token.
//! - [`mcp`]: the MCP server (official `rmcp` SDK): tools, resources and
//!   instructions, served over stdio by `memd mcp` and over streamable HTTP at
//!   `/mcp` by `memd serve`. Every tool is a `/v1` call with the caller's token
//!   ([`mcp::upstream`]: loopback HTTP from the stdio process, the router
//!   in-process inside the daemon), so MCP has exactly the token's rights.
//! - [`audit`]: `data/audit.jsonl`, one line per authenticated request.
//! - [`error`]: one error type with stable codes.
//! - `cmd/` (binary side, [`cmd`]): one file per subcommand; the only code that prints to stdout.
//!
//! ## Invariants
//!
//! - Nothing is acknowledged before its journal line is fsync'd and read back;
//!   memd appends only to its own device's journal files, and a failed append
//!   leaves no fragment. A full disk is `STORAGE_FULL` (507, retryable).
//! - A damaged derived index is moved aside and rebuilt at open, never an outage.
//! - Documents are read and parsed outside the writer; a document the rules
//!   refuse is reported and never indexed; no link under `memories/` is followed.
//! - No score, count, list or error shows a token anything about memories it
//!   cannot read: BM25 statistics are computed under the caller's filter, and a
//!   superseded or forgotten memory appears in no list, block or disclosure.
//! - `data/index/` equals a replay of `memories/`: `memd reindex` rebuilds it and
//!   gives the same search results as the incrementally maintained index.
//! - A torn or corrupt journal line is reported with `file:line` and skipped; it
//!   never blocks startup and never hides the lines around it.
//! - One process writes a root (`ROOT/.memd.lock`); a second writer gets `ROOT_LOCKED`.
//! - Visibility filters are clauses of the tantivy query, of the SQL `WHERE`
//!   and of the vec0 KNN, never a filter applied to results afterwards. HTTP
//!   builds them from the token and the request ([`auth::policy`]); a request's
//!   scene outside its token's scenes is `FORBIDDEN`, and expired short-term
//!   memories never match.
//! - Without an embedder the service still works: full text as usual, hybrid
//!   runs as full text (and says so), semantic answers `EMBEDDING_UNAVAILABLE`.
//! - Every searchable memory has exactly one vector of the current model once
//!   the background embedding has caught up (`pending_vectors` in health);
//!   `data/cache/` only ever saves work.
//! - `http` never touches rusqlite or tantivy types; `store`, `index`, `hub` and
//!   `auth` never mention axum (a tidy test greps for it).
//! - `openapi.yaml` lists exactly the router's routes (a test parses both).
//! - MCP never opens the root: `memd mcp` sessions, however many, write
//!   through the daemon's single writer; both MCP transports expose the same
//!   tools and go through `/v1` authentication, privacy filters and audit.
//! - Nothing but the MCP stdio transport and `cmd/` writes to stdout.
//! - Lifecycle state (tiers, access counts, expiry, supersede marks) is a
//!   replay of the journal: retrievals become `touch` lines, edits `put` lines
//!   with the same id, so a rebuilt index has the same lifecycle state. Reads
//!   never write synchronously; accesses are journaled within a few seconds.
//! - A superseded memory never matches a search (its expiry in tantivy and
//!   vec0 is the epoch); expired memories never match any caller's query.
//! - An archived journal month reads exactly as the plain file did.
//! - Consolidation changes memories only through the writer (`source: sleep`,
//!   the run id on every fact it writes); a rollback appends compensating lines
//!   and never edits the journal.

pub mod api;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod cmd;
pub mod config;
pub mod console;
pub mod consolidate;
pub mod disk;
pub mod doctor;
pub mod embed;
pub mod error;
pub mod eval;
pub mod http;
pub mod hub;
pub mod ids;
pub mod index;
pub mod lifecycle;
pub mod loopback;
pub mod mcp;
pub mod migrate;
pub mod model;
pub mod policy;
pub mod query;
pub mod relevance;
pub mod scheduler;
pub mod search;
pub mod store;
pub mod sync;
pub mod transfer;
pub mod watch;

pub use error::{Error, ErrorCode, Result};
