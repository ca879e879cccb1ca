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
//!  web console (`/`, the signed-in token) ──────────────────────────────┤
//!                                                                      ▼
//!  HTTP /v1 (http/): bearer → auth/ Grant → Caller, audit.rs; parse, call, reply
//!        ▲ │ spawn_blocking                (api.rs: the /v1 request and reply types)
//!        │ └─ the CLI, when a daemon runs: ROOT/.memd.addr + local credential = operator
//!  CLI (cmd/): the local operator ──► Hub (hub/): one use case per request,
//!                                      hub.<use_case>(&caller, request) → reply
//!                                      (caller.rs: scenes and filters; write.rs,
//!                                      supersede.rs, search.rs, recall.rs, …)
//!                                      over its parts (hub/parts/): writer,
//!                                      catchup, searcher (gate), lifecycle
//!                    │            │                          │
//!        store/ (source of truth) index/ (derived)           embed/
//!        journal.rs  JSONL + fsync  text.rs   tantivy         onnx.rs  ort + tokenizers
//!        markdown.rs docs → chunks  meta.rs   SQLite          hash.rs  test embedder
//!        lock.rs     one writer     vector.rs sqlite-vec rows cache.rs data/cache/vectors.db
//!                                   vector_scan.rs 1-bit pass
//!                                   filter.rs visibility → query clauses
//!                                   fusion.rs reciprocal rank fusion
//!                   search/ fulltext (by evidence: own pass + cross-lingual
//!                           pass, query.rs translate, CC-CEDICT; fuzzy.rs typos
//!                           and prefixes when weak) | semantic |
//!                           hybrid (rank + evidence fusion); exact phrases first;
//!                           rerank.rs: trees (a question model, a dialogue model)
//!                           reorder the hybrid candidates;
//!                           relevance.rs: P(relevant) per hit, below the floor dropped
//! ```
//!
//! Every surface speaks the same requests: HTTP deserializes an
//! [`api`] body, the CLI builds the same body from its arguments, MCP
//! forwards it to `/v1`; each then calls the same [`hub`] use case with a
//! [`hub::Caller`] (HTTP: the bearer token's grant; CLI: the local operator,
//! every scope and scene, token name `cli`). The CLI is one CLI whether or
//! not a daemon runs: `memd serve` records its address and a random local
//! credential in `ROOT/.memd.addr`, and `write`, `forget`, `search`, `get`,
//! `ingest`, `consolidate`, `reindex` and the operator's commands (`list`,
//! `tier`, `gc`, `audit`, `category`, `stats --expiring`, `archive list`)
//! send their body to that daemon's `/v1` route
//! (the credential is the operator, from loopback peers only), else call the
//! use case in process; both ways print the same reply. The rules (scene resolution,
//! privacy and pin permission, defaults, the short-stage TTL, idempotency
//! namespacing, supersede visibility and inheritance, restores, what counts
//! as an access, disclosure, the relevance floor a search or recall asks
//! of [`search`], config edits) are written once, in `hub/`.
//!
//! A write goes: validate (one rule set for every way in, [`model::Record::validate`])
//! → check that the index can take it (not behind after a storage error, the
//! file systems of `data/` and `memories/` above their reserve, see [`disk`];
//! else `STORAGE_FULL` before anything is stored) → append one JSON line per
//! record, ending in a CRC-32 of the line, to this device's journal file → `fsync`
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
//! table does not list, on a right the table lists and nothing uses, on a
//! surface (`http`, `mcp`, `console`) importing the engine (`index`,
//! `store`, `consolidate`, `embed`, `search`, …) instead of calling the hub,
//! on any cycle among modules and on any cycle among the files of one module
//! (a `mod.rs` is a facade; unit tests may use any file of their own module).
//!
//! ```text
//!  cmd/                                          the binary: one file per subcommand
//!  mcp ─────────────────────► http   console      surfaces: parse, call one hub use case, reply
//!  scheduler                                     runs the periodic jobs it builds
//!  consolidate backup transfer migrate eval      drivers of the hub's lower-level API
//!  doctor watch audit
//!  hub                                           the use cases (Caller + /v1 request → reply),
//!                                                a facade over its parts; owner of the live Config
//!  config   auth   api                           sub-configs composed; tokens → Grant; /v1 types
//!  search                                        ranking over the index, the relevance decision
//!  relevance   rerank                            the evidence and model of that decision;
//!                                                the second stage's trees (pure evaluator)
//!  index    query   embed   sync                 derived index, query plans, embedders
//!  store    lifecycle   content  timetable       source of truth and pure rules
//!  model ids layout analysis disk client when    foundation: types, paths, text analysis,
//!  base   error                                  dates, the outbound HTTP client, durable
//!                                                writes, pattern sets, the domain error
//! ```
//!
//! A sub-config lives with the module it configures when that module sits
//! below `config` (`search::SearchConfig`, `embed::EmbedderConfig`,
//! `lifecycle::LifecycleConfig`, `store::markdown::DocsConfig`,
//! `content::PrivacyConfig`, `sync::SyncConfig`); `config` composes and
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
//! | `ids` | `base`, `model` |
//! | `layout` | `base`, `error` |
//! | `analysis` | — |
//! | `contradiction` | `analysis` |
//! | `disk` | — |
//! | `client` | `error` |
//! | `content` | `base`, `error`, `model` |
//! | `api` | `model`, `search` |
//! | `lifecycle` | `error`, `ids`, `model` |
//! | `timetable` | `base`, `error`, `layout` |
//! | `store` | `base`, `content`, `error`, `ids`, `layout`, `model` |
//! | `embed` | `analysis`, `error` |
//! | `query` | `analysis` |
//! | `index` | `analysis`, `base`, `disk`, `embed`, `error`, `lifecycle`, `model`, `store` |
//! | `sync` | `client`, `error`, `layout`, `store` |
//! | `relevance` | `analysis`, `embed`, `error`, `index`, `model`, `query` |
//! | `rerank` | — |
//! | `search` | `analysis`, `embed`, `error`, `index`, `lifecycle`, `model`, `query`, `relevance`, `rerank`, `when` |
//! | `auth` | `base`, `error`, `ids`, `model` |
//! | `config` | `base`, `content`, `embed`, `error`, `layout`, `lifecycle`, `search`, `store`, `sync`, `timetable` |
//! | `hub` | `api`, `auth`, `base`, `config`, `content`, `contradiction`, `disk`, `embed`, `error`, `ids`, `index`, `layout`, `lifecycle`, `model`, `search`, `store`, `timetable` |
//! | `audit` | `base`, `disk` |
//! | `watch` | `error`, `hub` |
//! | `transfer` | `content`, `error`, `hub`, `model`, `store` |
//! | `migrate` | `content`, `error`, `hub`, `model`, `store`, `transfer` |
//! | `backup` | `base`, `config`, `disk`, `error`, `ids`, `layout`, `model`, `store` |
//! | `doctor` | `client`, `config`, `content`, `embed`, `error`, `index`, `layout`, `model`, `store` |
//! | `eval` | `analysis`, `api`, `base`, `config`, `embed`, `error`, `hub`, `index`, `layout`, `model`, `relevance`, `rerank`, `search` |
//! | `consolidate` | `analysis`, `base`, `client`, `config`, `content`, `embed`, `error`, `hub`, `index`, `layout`, `model`, `store`, `timetable`, `when` |
//! | `scheduler` | `backup`, `config`, `consolidate`, `error`, `hub`, `layout`, `timetable` |
//! | `console` | — |
//! | `http` | `api`, `audit`, `auth`, `base`, `error`, `hub` |
//! | `mcp` | `api`, `auth`, `client`, `config`, `error`, `http` |
//! | `cmd` | `*` (the binary side may use every module) |
//!
//! ## Code map
//!
//! An item is `pub` only if the binary, `tests/` (integration, bench,
//! footprint, calibration), a public signature, a re-export or a public doc
//! link needs it; everything else is `pub(crate)`, so the dead-code lint
//! reports unused code.
//!
//! - [`layout`]: root paths (`memories/`, `data/`, `config.json`, the daemon's
//!   address file, …), private file modes and the default root (the platform's
//!   data directory, never the current directory); the lowest layer. [`analysis`]: the tokenizer (words, CJK
//!   bigrams) and light English stemmer shared by the index, query planning and
//!   the test embedder, and the bilingual lexicon parsed from CC-CEDICT
//!   ([`analysis::lexicon`]) that [`query::translate`] uses for the
//!   cross-lingual full-text pass; `analysis::presence` finds which of a
//!   query's terms a text holds without cutting all of it (the coverage
//!   re-rank of full text).
//! - [`base`]: durable file writes ([`base::durable`]: temp file, `fsync`,
//!   rename, directory `fsync`, in one function every whole-file replacement
//!   uses; create-if-absent; moves into place) and byte helpers
//!   ([`base::bytes`]: hex, constant-time comparison) and repeated log lines
//!   ([`base::repeat`]: once a minute, counted) and [`base::patterns`] (a
//!   regular expression set with a bounded number of search caches, so a
//!   server whose threads come and go does not grow one per thread); knows nothing about
//!   memories. [`error`]: the domain error, its stable code table and the
//!   [`error::Coded`] trait the typed errors of the store and the index
//!   implement.
//! - [`config`]: the typed `config.json`: composes the sub-configs of the
//!   modules it configures (each defined by its owner below it) and validates the file.
//! - [`model`], [`ids`]: plain domain types and id schemes; no IO.
//! - [`contradiction`]: whether two memories likely contradict each other
//!   (negation, antonym preference, a changed number or date, another value
//!   of a one-valued relation) and why; pure, over the [`analysis`] words.
//! - [`when`]: dates in memories and queries (ISO, English and Chinese free
//!   text; relative expressions such as last week / 上周 / 去年五月), and
//!   relative dates in a statement resolved against when it was said
//!   ([`when::relative`]); no IO.
//! - [`store`]: the only writer of `memories/`: [`store::journal`] (per-device
//!   files), [`store::device`] (the device id), [`store::syncfiles`] (sync
//!   conflict copies, temporary files, the `.stignore`), [`store::markdown`]
//!   (strict front matter, no links; front matter emitted by a YAML emitter),
//!   [`store::categories`] (category files and their revisions),
//!   [`store::files`] (documents an import or migration adds, files a restore
//!   takes from a backup), [`store::lock`], [`store::members`] (group
//!   membership for disclosure), [`store::archive`] (compressed journal
//!   months), [`store::renames`] (the ledger that keeps a moved document's
//!   id, read at every rebuild), `store/cut.rs` (the files as they stood at an
//!   instant, copied for an `as_of` read; the journal's line times kept
//!   between reads), `store/listing.rs` (the journal's file names and
//!   archive lengths kept while its directories are unchanged, for the lag
//!   every reply reports), [`store::links`] (files opened with `O_NOFOLLOW`, links
//!   listed for doctor, health and backups); [`store::StoreError`] for the
//!   failures callers tell apart.
//! - [`index`]: the only writer of `data/index/`: [`index::text`] (tantivy),
//!   [`index::meta`] (SQLite), [`index::meta_read`] (time-ordered reads),
//!   [`index::vector`] (vectors in sqlite-vec, their change log, the SQL
//!   visibility check), [`index::vector_scan`] (the in-process 1-bit coarse pass
//!   that picks the candidates and ranks them exactly over float copies in an
//!   unlinked side file, caught up from the log in each search's snapshot; the
//!   filter inside the pass and again in SQL), [`index::fusion`] (RRF; learned fusion, checked in disabled), the tokenizer (from [`analysis`]),
//!   [`index::filter`], [`index::merge`] (device merge rules: later
//!   `(at, device)` wins, forgets beat older puts, a line that would move an
//!   id or lower its privacy is quarantined), [`index::scoped_stats`] (BM25 statistics over what the
//!   caller may read), [`index::neighbours`] (session neighbours as a lower-weight
//!   context field), [`index::lifecycle`] (supersede marks: versions form a
//!   line, `touch` replay);
//!   [`index::IndexError`] wraps the SQLite and tantivy errors (full disk,
//!   damaged files).
//! - [`embed`]: the [`embed::Embedder`] trait, the ONNX model
//!   ([`embed::onnx`]) with a compact Unigram tokenizer model ([`embed::unigram`]:
//!   the same token ids as `tokenizers` in ~7 MiB instead of ~280), a deterministic test embedder ([`embed::hash`]),
//!   the vector cache under `data/cache/` ([`embed::cache`]) and the installed
//!   lexicon beside the model ([`embed::dictionary`], optional, loaded on first use
//!   from a compact binary form it builds from the CC-CEDICT text once).
//! - [`search`]: ranking in three modes (`fulltext.rs`: by evidence, own
//!   pass first, the cross-lingual pass adding; `fuzzy.rs`: typos and word
//!   forms when the exact pass is weak; `hybrid.rs`: reciprocal
//!   rank and evidence fusion), exact phrases first, and the relevance
//!   decision on every hit; [`relevance`]: the evidence of a hit (coverage,
//!   BM25, phrase, translated coverage, script-aware cosine) and the
//!   calibrated logistic model over it (`relevance_weights.json`).
//! - [`lifecycle`]: retention tiers, opt-in tier expiry, promotion, the exact
//!   dedup key and ranking signals (short-term weight, importance, T0 boost).
//! - [`eval`]: recall@k / MRR evaluation on labelled datasets;
//!   `precision.rs` (exact-first and off-topic rates on a mixed root),
//!   `training.rs` (the relevance model's training rows).
//! - [`consolidate`]: nightly ("sleep") consolidation — a deterministic pass
//!   (fold, promote, expire, flag stale) with offline salience
//!   ([`consolidate::salience`]) and promotions rewritten as the statement the
//!   person meant ([`consolidate::statement`]: no cue words or particles,
//!   relative dates made absolute), an optional model pass (one request per scene) whose
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
//!   checksummed manifests, import/export, readiness checks; [`disk`]: free
//!   space, and the reserve and floor kept on each file system memd writes;
//!   [`client`]: the one outbound HTTP client (daemon, the MCP stdio process's `/v1`
//!   calls, Syncthing, model endpoint).
//! - [`content`]: the content rules of what is stored: normalisation,
//!   credential detection (vendor formats, keyword and value in English and
//!   Chinese, entropy; over NFKC with look-alikes mapped) and the one
//!   credential check over every field of a record ([`content::in_record`];
//!   the text, title and tags of a secret memory are exempt), tier
//!   assignment, and where sensitive and secret memories may live
//!   ([`content::PrivacyConfig`]).
//! - [`hub`]: the application service every surface calls. Its use cases,
//!   one file each, take a [`hub::Caller`] and an [`api`] request:
//!   [`hub::caller`] (scene resolution, read and write filters), write,
//!   supersede, forget, restore, forgotten (what may be restored), conflicts
//!   (links between memories that likely contradict each other: found at
//!   write and by consolidation, shown newer first, dismissed or accepted), documents
//!   (the list and whole documents), search, read (get, recent, timeline, bootstrap,
//!   audience), recall, `as_of` reads (`asof.rs`: search, recall, get, recent and
//!   timeline at an earlier instant, from a temporary index of the journal cut), ingest (and members), disclose, categories, tags
//!   (and the archive), settings (config edits), admin (health,
//!   capabilities, tokens), consolidation (runs, installed by the
//!   server), reindex (rebuilding the index in place in a running
//!   daemon), and the operator's use cases: list (paged by a `(time, id)`
//!   cursor), tiers, gc (the cleanup now), audit (reading the audit log),
//!   scenes (what a token may use), profile (the bootstrap interview's
//!   answers) and history (the rolling health samples the scheduler takes). The [`hub::Hub`] facade owns four parts under `hub/parts/`:
//!   the writer (queue, group commit, write rules), catch-up (journal and
//!   document replay, self-healing open), the searcher (the fair search
//!   gate with its per-token queues, search with its relevance decision,
//!   vectors) and the lifecycle (accesses, tiers, expiry,
//!   edits), over one core (root, live config, index, device, the one clock).
//! - [`auth`]: tokens (hashed in `tokens.json`, presets), the `Grant`
//!   of an authenticated token (what [`hub::Caller`] decides with) and the
//!   daemon's local credential ([`auth::OperatorSecret`]).
//! - [`api`]: the `/v1` request and reply types: one request body per
//!   operation (and reply types where the reply is not a domain type), with
//!   serde and JSON Schema; the hub's use cases take and return them, the
//!   axum handlers deserialize them, the CLI builds them from its arguments,
//!   the MCP tools take them as their parameters, and
//!   `tests/integration/openapi.rs` checks `openapi.yaml` against them.
//! - [`http`]: the `/v1` API (axum on its own hyper accept loop: header-read
//!   and idle timeouts, loopback Host check, the peer address of each
//!   request): authentication (tokens, and the local credential from
//!   loopback peers), audit, metrics, and handlers that parse, call one hub
//!   use case and reply; the only module that knows its wire format.
//! - [`console`]: the web console at `/`: embedded static files, strict CSP;
//!   all data through `/v1` with the signed-in token (its pages stand on the
//!   document list and whole documents, the forgotten list and search paging,
//!   use cases in `hub/documents.rs`, `hub/forgotten.rs` and `hub/search.rs`).
//! - [`mcp`]: the MCP server (official `rmcp` SDK): tools, resources,
//!   prompts (the bootstrap interview) and instructions, served over stdio
//!   by `memd mcp` and over streamable HTTP at
//!   `/mcp` by `memd serve`. Every tool is a `/v1` call with the caller's token
//!   ([`mcp::upstream`]: loopback HTTP through [`client`] from the stdio process, the router
//!   in-process inside the daemon), so MCP has exactly the token's rights.
//! - [`audit`]: `data/audit.jsonl`, one line per authenticated request.
//! - [`error`]: the domain error with stable codes; input errors are
//!   messages, the store and the index have typed errors folded in (see
//!   the module docs).
//! - `cmd/` (binary side, [`cmd`]): one file per subcommand; the only code that
//!   prints to stdout. `cmd/daemon.rs` is the CLI's transport: the address
//!   file `memd serve` records, finding a live daemon through it, and the
//!   `/v1` calls a command makes instead of opening the root; `cmd/setup.rs`
//!   is `memd setup`, which carries `scripts/setup.sh` (and its converter and
//!   check) inside the binary and runs it from a private temporary directory.
//!
//! ## Invariants
//!
//! - Nothing is acknowledged before its journal line is fsync'd and read back;
//!   memd appends only to its own device's journal files, and a failed append
//!   leaves no fragment. A full disk is `STORAGE_FULL` (507, retryable), and
//!   so is a write the index could not take: memd keeps a reserve free on
//!   each file system it writes (`memories/`, `data/`, backups; see [`disk`])
//!   and refuses writes below it, the index stops growing at a lower floor
//!   (it never takes the journal's last bytes), and `memd serve` started on a
//!   full disk serves reads and resumes writes by itself once there is room.
//! - The index is never silently behind the journal: while it is (a full
//!   disk, another device's file just arrived) the watcher's loop retries the
//!   catch-up with back-off until every journal file is applied, and rescans
//!   the tree every 30 s for missed events; search and recall say
//!   `index_behind`, every answer carries `x-memd-index-behind` (both count
//!   only lines the caller could read), and `get` reads a memory not applied
//!   yet from the journal, under the caller's filter.
//! - A damaged derived index is moved aside and rebuilt at open, never an
//!   outage; a full disk is not damage and never moves the index aside.
//! - Documents are read and parsed outside the writer; a document the rules
//!   refuse is reported and never indexed.
//! - No symbolic link under `memories/` is followed, to read or to write: a
//!   linked journal or document is not indexed, nothing is appended or
//!   created through a link (the writer refuses), and doctor names every
//!   link, health counts them and a backup lists the ones it leaves out.
//! - No credential enters through any way in: every field of every record
//!   meets one check ([`content::in_record`]) on a write, an ingest, a
//!   membership change, an import, a forget's reason, a replayed journal
//!   line and a Markdown document (only the text, title and tags of a
//!   `secret` memory may hold one). A refusal names the field and the kind,
//!   never the value; a replayed line or a document that fails is
//!   quarantined (reported by health, doctor and stats, never indexed,
//!   never dropped silently).
//! - No score, count, list or error shows a token anything about memories it
//!   cannot read: BM25 statistics are computed under the caller's filter, and a
//!   superseded or forgotten memory appears in no list, block or disclosure.
//! - `data/index/` equals a replay of `memories/`: `memd reindex` rebuilds it and
//!   gives the same search results as the incrementally maintained index.
//! - A torn or corrupt journal line is reported with `file:line` and skipped; it
//!   never blocks startup and never hides the lines around it. A line's
//!   checksum (when it has one) is verified, so a flipped bit is reported, not
//!   served; a line damaged after it was indexed is reported as soon as its
//!   file changes (health and stats count it), not first by a reindex.
//! - The hub owns the one live config ([`hub::Hub::config`] is an `Arc`
//!   snapshot); the `config.json` watcher and `POST /v1/config` swap its
//!   editable keys; there is no second copy.
//! - The hub owns the one clock ([`hub::Hub::now`]): every rule, filter,
//!   expiry and relative date ("last week") of a request reads it through its
//!   [`hub::Caller`], so a test that moves it moves all of them.
//! - Every rule of a request is written once, in a `hub/` use case; HTTP,
//!   MCP (through `/v1`), the console (through `/v1`) and the CLI only parse,
//!   call and reply, and store the same records for the same request
//!   (`tests/integration/parity.rs`).
//! - One process writes a root (`ROOT/.memd.lock`); a second writer gets `ROOT_LOCKED`.
//!   The CLI never becomes a second writer next to a daemon: the commands
//!   that write go through the daemon the root's address file names, and
//!   `memd reindex` rebuilds in it (`POST /v1/reindex`, in place, under its
//!   writer). The local credential of that file is accepted only from a
//!   loopback peer, and the operator's reads through the daemon are not
//!   counted as retrievals, as in process.
//! - A document keeps its id when its file is renamed or moved (same bytes
//!   under a new path while the old one is gone): the move is recorded in
//!   `memories/renames/`, so a rebuilt index gives it the same id.
//! - Every list pages by a `(time, id)` cursor: rows sharing a timestamp are
//!   never skipped or repeated.
//! - The default root is the platform's data directory, never the current
//!   directory, so a source checkout is never a root by accident (and its
//!   `.gitignore` keeps everything personal out of git if one is made on purpose).
//! - Visibility filters are part of every index query, never a filter applied
//!   to results afterwards: in full text, the set of documents the filter
//!   admits (computed with the BM25 statistics) is the only set the scoring
//!   pass collects from; in SQL a `WHERE` (checked per row where rows are
//!   found by id); in the vector pass each row's visibility values, and again
//!   in the SQL that rescores the candidates. The hub's [`hub::Caller`]
//!   builds them from the token and the request; a request's
//!   scene outside its token's scenes is `FORBIDDEN`, and expired short-term
//!   memories never match.
//! - Without an embedder the service still works: full text as usual, hybrid
//!   runs as full text (and says so), semantic answers `EMBEDDING_UNAVAILABLE`.
//! - Every searchable memory has exactly one vector of the current model once
//!   the background embedding has caught up (`pending_vectors` in health);
//!   `data/cache/` only ever saves work.
//! - `http` never touches rusqlite or tantivy types, nor the index, the store,
//!   consolidation or the embedder; `store`, `index`, `hub` and `auth` never
//!   mention axum; rusqlite and tantivy appear only in `index` (and the
//!   vector cache and the tokenizer adapter), so everything else meets them
//!   as `index::IndexError` sources; imports follow the Layers table (all
//!   checked by `tests/integration/layering.rs`).
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
//!   with the same id, so a rebuilt index has the same lifecycle state.
//! - Reading never writes. Only an agent's retrieval is an access: a recall
//!   (unless it says `touch: false`), or a search or get asked with
//!   `touch: true`. Get, search, recent, timeline, bootstrap, the console and
//!   the CLI count nothing and append nothing; accesses are buffered and
//!   journaled as one `touch` line within a few seconds.
//! - Versions form a line: a new version inherits every field its request
//!   does not set; only the newest version is superseded or edited (else
//!   `CONFLICT`, naming the newest when the caller may read it); forgetting
//!   the newest version never brings an older one back. Only an explicit
//!   restore does, as a journal line (`/v1/restore`; a consolidation
//!   rollback restores what its run replaced the same way).
//! - A superseded memory never matches a search (its expiry in tantivy and
//!   vec0 is the epoch); expired memories never match any caller's query.
//! - `*` widens what a token reads, never where it writes: forgetting,
//!   superseding, restoring and editing stay in the token's write scenes
//!   (only the local operator acts in every scene).
//! - No journal line moves an id to another scene or lowers its privacy:
//!   memd never writes one, and replay quarantines one from another device
//!   (reported with the journal's issues, never applied, never dropped
//!   silently), whatever order the lines arrive in.
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
pub mod content;
pub mod contradiction;
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
pub mod query;
pub mod relevance;
pub mod rerank;
pub mod scheduler;
pub mod search;
pub mod store;
pub mod sync;
pub mod timetable;
pub mod transfer;
pub mod watch;
pub mod when;

pub use error::{Error, ErrorCode, Result};
