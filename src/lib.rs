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
//!  CLI (cmd/)  ──►  Hub (hub/): use-cases + the single writer;
//!                    │         searches pass gate.rs (one per core, FIFO)
//!                    │            │                          │
//!        store/ (source of truth) index/ (derived)           embed/
//!        journal.rs  JSONL + fsync  text.rs   tantivy         onnx.rs  ort + tokenizers
//!        markdown.rs docs → chunks  meta.rs   SQLite          hash.rs  test embedder
//!        lock.rs     one writer     vector.rs sqlite-vec rows cache.rs data/cache/vectors.db
//!                                   vector_scan.rs 1-bit pass
//!                                   filter.rs visibility → query clauses
//!                                   fusion.rs reciprocal rank fusion
//!                   search.rs fulltext (AND, OR fallback) | semantic | hybrid,
//!                             + a cross-lingual pass (query.rs translate, CC-CEDICT)
//! ```
//!
//! A write goes: validate (one rule set for every way in, [`model::Record::validate`])
//! → append one JSON line per record to this device's journal file → `fsync`
//! (one per group of concurrent writes) → read the appended bytes back (a
//! failure truncates the file to its previous length) → acknowledge after the same catch-up that
//! runs at startup has applied the new lines to SQLite and tantivy (queued for
//! tantivy's next commit, which is lazy and coalesced: before the next search,
//! or within a second; a commit never holds up a write, see [`index::text`]). Vectors are
//! computed off the write path: in the background, by reindex, and before any
//! semantic or hybrid search (from the cache where possible).
//!
//! ## Layers
//!
//! Each row may import only the rows below it (and what the table allows
//! within its row); `tests/integration/layering.rs` reads every
//! `crate::`/`super::`/`self::` path in `src/` and fails on an import the
//! table does not list, on any cycle among modules and on any cycle among the
//! files of one module (`mod.rs` is a module's facade; unit tests may use any
//! file of their own module).
//!
//! ```text
//!  cmd/                                          the binary: one file per subcommand
//!  mcp ─────────────────────► http   console      surfaces (MCP is a /v1 client)
//!  scheduler                                     runs the periodic jobs it builds
//!  consolidate backup transfer migrate eval      use-cases driving the hub
//!  doctor watch audit
//!  hub                                           the application service, single writer,
//!                                                owner of the live Config
//!  config   auth   api                           composes the sub-configs; tokens → Filter; /v1 wire types
//!  search   relevance                            ranking over the index
//!  index    query   embed   sync                 derived index, query plans, embedders
//!  store    lifecycle   policy   timetable       source of truth and pure rules
//!  model ids layout analysis disk client when    foundation: types, paths, text analysis,
//!  base   error                                  dates, the outbound HTTP client, durable
//!                                                writes, the domain error
//! ```
//!
//! A sub-config lives with the module it configures when that module sits
//! below `config` (`search::SearchConfig`, `embed::EmbedderConfig`,
//! `lifecycle::LifecycleConfig`, `store::markdown::DocsConfig`,
//! `policy::PrivacyConfig`, `sync::SyncConfig`); `config` composes and
//! re-exports them. The settings of modules above the hub (`http`, `mcp`,
//! ingest, backup, sleep consolidation) are defined in `config`, since the hub
//! holds the whole [`config::Config`].
//!
//! | module | may import |
//! |---|---|
//! | `error` | — |
//! | `base` | `error` |
//! | `when` | — |
//! | `model` | `error`, `when` |
//! | `ids` | `base`, `error`, `model` |
//! | `layout` | `base`, `error` |
//! | `analysis` | — |
//! | `disk` | `error` |
//! | `client` | `error` |
//! | `policy` | `error`, `model` |
//! | `api` | `error`, `model`, `search` |
//! | `lifecycle` | `error`, `ids`, `model` |
//! | `timetable` | `base`, `error`, `layout` |
//! | `store` | `base`, `error`, `ids`, `layout`, `model`, `policy` |
//! | `embed` | `analysis`, `error`, `layout` |
//! | `query` | `analysis` |
//! | `index` | `analysis`, `base`, `embed`, `error`, `layout`, `lifecycle`, `model`, `store` |
//! | `sync` | `error`, `layout`, `client`, `store` |
//! | `search` | `analysis`, `embed`, `error`, `index`, `lifecycle`, `model`, `query`, `when` |
//! | `relevance` | `analysis`, `embed`, `error`, `index`, `query`, `search` |
//! | `auth` | `base`, `error`, `ids`, `index`, `layout`, `model`, `store` |
//! | `config` | `base`, `embed`, `error`, `layout`, `lifecycle`, `policy`, `search`, `store`, `sync`, `timetable` |
//! | `hub` | `analysis`, `config`, `disk`, `embed`, `error`, `ids`, `index`, `layout`, `lifecycle`, `model`, `policy`, `query`, `relevance`, `search`, `store`, `timetable` |
//! | `audit` | `error`, `layout` |
//! | `watch` | `config`, `error`, `hub`, `layout`, `store` |
//! | `transfer` | `error`, `hub`, `layout`, `model`, `store` |
//! | `migrate` | `error`, `hub`, `model`, `store`, `transfer` |
//! | `backup` | `base`, `config`, `error`, `ids`, `layout`, `model`, `store` |
//! | `doctor` | `config`, `embed`, `error`, `index`, `layout`, `client`, `model`, `store` |
//! | `eval` | `base`, `config`, `embed`, `error`, `hub`, `index`, `layout`, `model`, `search` |
//! | `consolidate` | `analysis`, `base`, `client`, `config`, `embed`, `error`, `hub`, `index`, `layout`, `model`, `policy`, `store`, `timetable` |
//! | `scheduler` | `backup`, `config`, `consolidate`, `error`, `hub`, `layout`, `timetable` |
//! | `console` | — |
//! | `http` | `api`, `audit`, `auth`, `base`, `config`, `consolidate`, `embed`, `error`, `hub`, `index`, `layout`, `model`, `search`, `store` |
//! | `mcp` | `api`, `auth`, `client`, `config`, `error`, `http`, `layout` |
//! | `cmd` | `*` (the binary side may use every module) |
//!
//! ## Code map
//!
//! An item is `pub` only if the binary, `tests/` (integration, bench,
//! footprint, calibration), a public signature, a re-export or a public doc
//! link needs it; everything else is `pub(crate)`, so the dead-code lint
//! reports unused code.
//!
//! - [`base`]: durable file writes ([`base::durable`]: temp file, `fsync`,
//!   rename, directory `fsync`, in one function every whole-file replacement
//!   uses; create-if-absent; moves into place) and byte helpers
//!   ([`base::bytes`]: hex, constant-time comparison); knows nothing about
//!   memories. [`error`]: the domain error, its stable code table and the
//!   [`error::Coded`] trait the typed errors of the store and the index
//!   implement.
//! - [`layout`]: root paths (`memories/`, `data/`, `config.json`, …) and private
//!   file modes; the lowest layer. [`analysis`]: the tokenizer (words, CJK
//!   bigrams) and light English stemmer shared by the index, query planning and
//!   the test embedder, and the bilingual lexicon parsed from CC-CEDICT
//!   ([`analysis::lexicon`]) that [`query::translate`] uses for the
//!   cross-lingual full-text pass.
//! - [`config`]: the typed `config.json`: composes the sub-configs of the
//!   modules it configures (each defined by its owner below it) and validates the file.
//! - [`model`], [`ids`]: plain domain types and id schemes; no IO.
//! - [`when`]: dates in memories and queries (ISO, English and Chinese free
//!   text; relative expressions such as last week / 上周 / 去年五月); no IO.
//! - [`store`]: the only writer of `memories/`: [`store::journal`] (per-device
//!   files), [`store::device`] (the device id), [`store::syncfiles`] (sync
//!   conflict copies, temporary files, the `.stignore`), [`store::markdown`]
//!   (strict front matter, no links; front matter emitted by a YAML emitter),
//!   [`store::categories`] (category files and their revisions),
//!   [`store::files`] (documents an import or migration adds, files a restore
//!   takes from a backup), [`store::lock`], [`store::members`] (group
//!   membership for disclosure), [`store::archive`] (compressed journal
//!   months); [`store::StoreError`] for the failures callers tell apart.
//! - [`index`]: the only writer of `data/index/`: [`index::text`] (tantivy),
//!   [`index::meta`] (SQLite), [`index::meta_read`] (time-ordered reads),
//!   [`index::vector`] (vectors in sqlite-vec, their change log, the SQL
//!   visibility check), [`index::vector_scan`] (the in-process 1-bit coarse pass
//!   that picks the candidates and ranks them exactly over float copies in an
//!   unlinked side file, caught up from the log in each search's snapshot; the
//!   filter inside the pass and again in SQL), [`index::fusion`] (RRF; learned fusion, checked in disabled), the tokenizer (from [`analysis`]),
//!   [`index::filter`], [`index::merge`] (device merge rules: later
//!   `(at, device)` wins, forgets beat older puts), [`index::scoped_stats`] (BM25 statistics over what the
//!   caller may read), [`index::neighbours`] (session neighbours as a lower-weight
//!   context field), [`index::lifecycle`] (supersede marks, `touch` replay);
//!   [`index::IndexError`] wraps the SQLite and tantivy errors (full disk,
//!   damaged files).
//! - [`embed`]: the [`embed::Embedder`] trait, the ONNX model
//!   ([`embed::onnx`]) with a compact Unigram tokenizer model ([`embed::unigram`]:
//!   the same token ids as `tokenizers` in ~7 MiB instead of ~280), a deterministic test embedder ([`embed::hash`]),
//!   the vector cache under `data/cache/` ([`embed::cache`]) and the installed
//!   lexicon beside the model ([`embed::dictionary`], optional, loaded on first use
//!   from a compact binary form it builds from the CC-CEDICT text once).
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
//! - [`timetable`]: when periodic jobs are due (pure: settings + saved state +
//!   now) and `data/scheduler.json`, replaced durably; [`scheduler`]: the runner thread of `memd serve`
//!   and every job it runs (index commits, background embedding, daily backup,
//!   archive, sleep consolidation); [`watch`]: the server's watcher of `memories/` and
//!   `config.json`.
//! - [`sync`]: Syncthing glue for several devices (`.stignore`, folder and
//!   peers over its REST API, status); [`migrate`]: `memd import --from memory-hub`.
//! - [`backup`] (its own files: manifest, signing, create, verify, restore,
//!   plan), [`transfer`], [`doctor`]: backups with signed (HMAC-SHA256),
//!   checksummed manifests, import/export, readiness checks; [`disk`], [`client`]: free space and
//!   the one outbound HTTP client (daemon, the MCP stdio process's `/v1`
//!   calls, Syncthing, model endpoint).
//! - [`policy`]: content normalisation, credential refusal over text, title and
//!   tags (NFKC + confusables; secret writes are exempt), tier assignment.
//! - [`hub`]: the application service every surface calls: the single writer
//!   (`writer.rs`: queue, group commit, write rules), catch-up (`replay.rs`),
//!   self-healing open (`heal.rs`); reads, recall, ingest, categories in their own files.
//! - [`auth`]: tokens (hashed in `tokens.json`, presets) and [`auth::policy`], which
//!   turns a token and a request into the [`index::filter::Filter`] of every query.
//! - [`api`]: the `/v1` wire types: one request body per operation (and reply
//!   types where the reply is not a domain type), with serde and JSON Schema;
//!   the axum handlers read them, the MCP tools take them as their parameters,
//!   the CLI prints them, and `tests/integration/openapi.rs` checks
//!   `openapi.yaml` against them.
//! - [`http`]: the `/v1` API (axum on its own hyper accept loop: header-read
//!   and idle timeouts, loopback Host check); the only module that knows its wire format.
//! - [`console`]: the web console at `/`: embedded static files, strict CSP;
//!   all data through `/v1` with the signed-in token.
//! - [`mcp`]: the MCP server (official `rmcp` SDK): tools, resources and
//!   instructions, served over stdio by `memd mcp` and over streamable HTTP at
//!   `/mcp` by `memd serve`. Every tool is a `/v1` call with the caller's token
//!   ([`mcp::upstream`]: loopback HTTP through [`client`] from the stdio process, the router
//!   in-process inside the daemon), so MCP has exactly the token's rights.
//! - [`audit`]: `data/audit.jsonl`, one line per authenticated request.
//! - [`error`]: the domain error with stable codes; input errors are
//!   messages, the store and the index have typed errors folded in (see
//!   the module docs).
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
//! - The hub owns the one live config ([`hub::Hub::config`] is an `Arc`
//!   snapshot); the `config.json` watcher and `POST /v1/config` swap its
//!   editable keys; there is no second copy.
//! - One process writes a root (`ROOT/.memd.lock`); a second writer gets `ROOT_LOCKED`.
//! - Visibility filters are part of every index query, never a filter applied
//!   to results afterwards: in full text, the set of documents the filter
//!   admits (computed with the BM25 statistics) is the only set the scoring
//!   pass collects from; in SQL a `WHERE` (checked per row where rows are
//!   found by id); in the vector pass each row's visibility values, and again
//!   in the SQL that rescores the candidates. HTTP
//!   builds them from the token and the request ([`auth::policy`]); a request's
//!   scene outside its token's scenes is `FORBIDDEN`, and expired short-term
//!   memories never match.
//! - Without an embedder the service still works: full text as usual, hybrid
//!   runs as full text (and says so), semantic answers `EMBEDDING_UNAVAILABLE`.
//! - Every searchable memory has exactly one vector of the current model once
//!   the background embedding has caught up (`pending_vectors` in health);
//!   `data/cache/` only ever saves work.
//! - `http` never touches rusqlite or tantivy types; `store`, `index`, `hub` and
//!   `auth` never mention axum; rusqlite and tantivy appear only in `index`
//!   (and the vector cache and the tokenizer adapter), so everything else
//!   meets them as `index::IndexError` sources; imports follow the Layers
//!   table (all checked by `tests/integration/layering.rs`).
//! - Only `store` writes `memories/`: outside it, a function that writes a
//!   file and names a path under `memories/` fails
//!   `tests/integration/layering.rs` (two listed exceptions write elsewhere:
//!   doctor's probe and the export's copies).
//! - Every file memd replaces whole (scheduler state, tokens, config,
//!   members, categories, backups, the index's `FORMAT` marker, eval's
//!   caches) is replaced durably by [`base::durable::write_atomic`]: temp
//!   file, `fsync`, rename, directory `fsync`; a crash leaves the old file or
//!   the new one, never a torn one.
//! - One outbound HTTP client ([`client`]) for every remote call, the MCP
//!   stdio process's included; inside `memd serve`, MCP calls the `/v1`
//!   router in-process, with no client at all.
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
//! - A memory's `context` field holds only text of neighbours that any reader
//!   of the memory may read (same scene, session, privacy, stage, kind and
//!   subject); forgetting or superseding a turn removes its words from its
//!   neighbours' context.
//! - An archived journal month reads exactly as the plain file did.
//! - Consolidation changes memories only through the writer (`source: sleep`,
//!   the run id on every fact it writes); a rollback appends compensating lines
//!   and never edits the journal.

pub mod analysis;
pub mod api;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod base;
pub mod client;
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
pub mod layout;
pub mod lifecycle;
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
pub mod timetable;
pub mod transfer;
pub mod watch;
pub mod when;

pub use error::{Error, ErrorCode, Result};
