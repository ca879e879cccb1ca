//! The domain error and its table of stable codes.
//!
//! [`Error`] is what every public operation returns; [`Error::code`] is the
//! stable string the CLI, HTTP and MCP surfaces report, and [`ErrorCode`]
//! holds the one table of codes, HTTP statuses, retryability and exit codes.
//!
//! - Input that breaks a rule is [`Error::Invalid`] with a message written
//!   for the person who sent it (what was wrong, what to do); nobody branches
//!   on those beyond the code.
//! - Where callers branch on what went wrong below the hub, the module has a
//!   typed error: [`crate::store::StoreError`] (journal appends: full disk,
//!   read-back mismatch; files the store owns that are not what they must be)
//!   and [`crate::index::IndexError`] (SQLite and tantivy failures, told
//!   apart as full disk or damaged files). Each implements [`Coded`] and is
//!   folded in as [`Error::Typed`], keeping its own code; callers get it
//!   back with [`Error::downcast_ref`]. Backend errors (rusqlite, tantivy)
//!   are sources of the index's error, never variants of this one: this
//!   module, the lowest layer, knows no backend.
//! - Domain conditions every layer shares have their own variants
//!   ([`Error::NotFound`], [`Error::RootLocked`], [`Error::Unavailable`], …),
//!   and a file operation outside those modules is [`Error::Io`] with the
//!   path in its context.
//!
//! Causes stay in `#[source]`.

use std::path::PathBuf;

/// One entry of the stable error-code table shared by every surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The request or input is malformed or violates a rule; nothing was changed.
    InvalidInput,
    /// The id does not exist or is not visible to the caller.
    NotFound,
    /// The request contradicts the memory's current state: an older version
    /// cannot be superseded or edited (the message names the newest version
    /// when the caller may read it). Retrying unchanged fails the same way.
    Conflict,
    /// The caller is authenticated but not allowed to do this.
    Forbidden,
    /// The caller is not authenticated.
    Unauthorized,
    /// Another process holds the writer lock on this root.
    RootLocked,
    /// Semantic search was requested but no embedder is loaded.
    EmbeddingUnavailable,
    /// The token sent more requests than its per-minute allowance.
    RateLimited,
    /// A file or index could not be read or written.
    Storage,
    /// The disk (or the user's quota) holding the root is full; nothing was
    /// stored. Retry once space is freed.
    StorageFull,
    /// A service this operation depends on (the memd daemon, the
    /// consolidation model server) could not be reached or did not answer in
    /// time; nothing was changed by this call. Retry later.
    Unavailable,
    /// A service this operation depends on answered with something unusable
    /// (not HTTP, too large, not the expected JSON).
    UpstreamInvalid,
    /// An invariant broke; the log has the details.
    Internal,
}

impl ErrorCode {
    /// Every code, in table order.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::InvalidInput,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::RootLocked,
        ErrorCode::EmbeddingUnavailable,
        ErrorCode::RateLimited,
        ErrorCode::Storage,
        ErrorCode::StorageFull,
        ErrorCode::Unavailable,
        ErrorCode::UpstreamInvalid,
        ErrorCode::Internal,
    ];

    /// The code as it appears on the wire, e.g. `INVALID_INPUT`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::RootLocked => "ROOT_LOCKED",
            ErrorCode::EmbeddingUnavailable => "EMBEDDING_UNAVAILABLE",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Storage => "STORAGE",
            ErrorCode::StorageFull => "STORAGE_FULL",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::UpstreamInvalid => "UPSTREAM_INVALID",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The code with this wire name, e.g. `INVALID_INPUT`.
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == name)
    }

    /// The HTTP status of this code. The one status ↔ code table: the server
    /// answers with it, and clients read it back with [`ErrorCode::from_status`].
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidInput => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::RateLimited => 429,
            ErrorCode::RootLocked | ErrorCode::EmbeddingUnavailable | ErrorCode::Unavailable => 503,
            ErrorCode::UpstreamInvalid => 502,
            ErrorCode::StorageFull => 507,
            ErrorCode::Storage | ErrorCode::Internal => 500,
        }
    }

    /// The code of an error reply that carries no readable envelope: the
    /// first code of the table with this status, `UNAVAILABLE` for other
    /// 503s and gateway timeouts, `UPSTREAM_INVALID` for redirects and bad
    /// gateways, `INTERNAL` for anything else.
    pub fn from_status(status: u16) -> ErrorCode {
        match status {
            503 | 504 => ErrorCode::Unavailable,
            // A redirect (never followed) or a gateway error: not an answer.
            300..=399 | 502 => ErrorCode::UpstreamInvalid,
            _ => ErrorCode::ALL
                .iter()
                .copied()
                .find(|c| c.http_status() == status && *c != ErrorCode::Storage)
                .unwrap_or(ErrorCode::Internal),
        }
    }

    /// Whether the same request may succeed if retried later unchanged.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::RootLocked
                | ErrorCode::Storage
                | ErrorCode::StorageFull
                | ErrorCode::EmbeddingUnavailable
                | ErrorCode::RateLimited
                | ErrorCode::Unavailable
        )
    }

    /// The process exit code the CLI uses for this error.
    pub(crate) fn exit_code(self) -> i32 {
        match self {
            ErrorCode::InvalidInput => 2,
            ErrorCode::NotFound => 3,
            ErrorCode::Forbidden | ErrorCode::Unauthorized => 4,
            ErrorCode::RootLocked => 5,
            ErrorCode::EmbeddingUnavailable => 6,
            ErrorCode::RateLimited => 7,
            ErrorCode::StorageFull => 8,
            ErrorCode::Unavailable => 9,
            ErrorCode::UpstreamInvalid => 10,
            ErrorCode::Conflict => 11,
            ErrorCode::Storage | ErrorCode::Internal => 1,
        }
    }
}

/// The error every public operation of the library returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input was rejected; the message says why.
    #[error("{0}")]
    Invalid(String),
    /// Nothing visible to the caller has this id.
    #[error("no {what} with id {id:?}")]
    NotFound {
        /// What kind of thing was looked for: "memory", "consolidation run", …
        what: &'static str,
        /// The id that was asked for.
        id: String,
    },
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The request contradicts the memory's current state (an older version
    /// superseded or edited); the message names the newest version when the
    /// caller may read it.
    #[error("{0}")]
    Conflict(String),
    /// Another process writes to the same root.
    #[error(
        "another memd process (pid {pid}) is writing to {}; stop it or talk to it over HTTP",
        root.display()
    )]
    RootLocked {
        /// The root that is locked.
        root: PathBuf,
        /// The pid recorded in the lock file, if readable.
        pid: String,
    },
    /// Semantic search is not available.
    #[error("semantic search is unavailable: {0}")]
    EmbeddingUnavailable(String),
    /// A file operation failed.
    #[error("{context}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A typed error of the store or the index, with the code it chose (see [`Coded`]).
    #[error(transparent)]
    Typed(Typed),
    /// The disk or quota is full (ENOSPC, EDQUOT); the text says what was being done.
    #[error(
        "{0}: the disk holding the memory root is full; nothing was stored. \
         Free some space and retry"
    )]
    StorageFull(String),
    /// A service this operation depends on could not be reached or did not
    /// answer in time.
    #[error("{service} is unavailable: {reason}")]
    Unavailable {
        /// Who did not answer, e.g. "the memd daemon at 127.0.0.1:8787".
        service: String,
        /// What happened, in a few words ("connection refused").
        reason: String,
        /// The transport error, if there was one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A service this operation depends on answered with something unusable.
    #[error("{service} sent an unusable answer: {reason}")]
    UpstreamInvalid {
        /// Who answered.
        service: String,
        /// What was wrong with the answer.
        reason: String,
        /// The transport or decoding error, if there was one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The caller sent more than its own share allows (its search queue is
    /// full); nothing was done. Retry after `retry_after` seconds.
    #[error("{message}")]
    RateLimited {
        /// What was refused, for the caller.
        message: String,
        /// Seconds to wait before retrying (HTTP `Retry-After`).
        retry_after: u64,
    },
    /// A memd daemon answered a request with this error envelope.
    #[error("{message}")]
    Reply {
        /// The envelope's stable code (or the one its HTTP status stands for).
        code: ErrorCode,
        /// The envelope's message.
        message: String,
    },
    /// An invariant broke.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The stable code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid(_) => ErrorCode::InvalidInput,
            Error::NotFound { .. } => ErrorCode::NotFound,
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::RootLocked { .. } => ErrorCode::RootLocked,
            Error::EmbeddingUnavailable(_) => ErrorCode::EmbeddingUnavailable,
            Error::StorageFull(_) => ErrorCode::StorageFull,
            Error::Io { .. } if self.is_storage_full() => ErrorCode::StorageFull,
            Error::Io { .. } => ErrorCode::Storage,
            Error::Typed(t) => t.0.code(),
            Error::Unavailable { .. } => ErrorCode::Unavailable,
            Error::UpstreamInvalid { .. } => ErrorCode::UpstreamInvalid,
            Error::RateLimited { .. } => ErrorCode::RateLimited,
            Error::Reply { code, .. } => *code,
            Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// Seconds the caller should wait before retrying, when the error says.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// Whether the cause is a full disk or quota (ENOSPC, EDQUOT, a full
    /// SQLite database), anywhere in the chain of causes.
    pub(crate) fn is_storage_full(&self) -> bool {
        match self {
            Error::StorageFull(_) => true,
            Error::Io { source, .. } => io_is_full(source),
            Error::Typed(t) => t.0.code() == ErrorCode::StorageFull,
            _ => false,
        }
    }

    /// Folds a module's typed error in, keeping its code.
    pub fn typed(e: impl Coded) -> Self {
        Error::Typed(Typed(Box::new(e)))
    }

    /// The typed error of a module, if this is one, e.g.
    /// `e.downcast_ref::<IndexError>()` to tell a damaged index from a full disk.
    pub fn downcast_ref<T: Coded>(&self) -> Option<&T> {
        match self {
            Error::Typed(t) => {
                let inner: &(dyn std::error::Error + 'static) = &*t.0;
                inner.downcast_ref::<T>()
            }
            _ => None,
        }
    }

    /// A copy of this error for one more caller of a failed group commit:
    /// the same code and message (the cause is logged once by the writer).
    pub(crate) fn for_caller(&self) -> Error {
        match self.code() {
            ErrorCode::StorageFull => Error::StorageFull(match self {
                Error::StorageFull(what) => what.clone(),
                other => other.to_string(),
            }),
            ErrorCode::Storage => Error::Io {
                context: format!("write not stored: {self}"),
                source: std::io::Error::other(
                    std::error::Error::source(self)
                        .map(|s| s.to_string())
                        .unwrap_or_default(),
                ),
            },
            _ => Error::Internal(format!("write not stored: {self}")),
        }
    }

    /// "No `what` with id `id`".
    pub(crate) fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            id: id.into(),
        }
    }

    /// A daemon's error reply read back (see [`ReplyEnvelope::read`]).
    pub(crate) fn from_reply(status: u16, body: &str) -> Self {
        let reply = ReplyEnvelope::read(status, body.as_bytes());
        Error::Reply {
            code: reply.code,
            message: reply.message,
        }
    }

    /// Shorthand for an input error.
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }

    /// The `{error:{code,message,retryable}}` envelope used on every surface.
    pub(crate) fn envelope(&self) -> serde_json::Value {
        let code = self.code();
        serde_json::json!({
            "error": {
                "code": code.as_str(),
                "message": self.to_string(),
                "retryable": code.retryable(),
            }
        })
    }
}

/// The error reply of a memd daemon as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplyEnvelope {
    /// The envelope's code; for a code this build does not know (a newer
    /// daemon) or a body that is no envelope, the code its HTTP status
    /// stands for ([`ErrorCode::from_status`]).
    pub(crate) code: ErrorCode,
    /// The envelope's code as sent, when this build does not know it.
    pub(crate) unknown_code: Option<String>,
    /// The envelope's message, else `HTTP status N`.
    pub(crate) message: String,
}

impl ReplyEnvelope {
    /// Reads a non-2xx answer: `{"error":{"code","message"}}`, or whatever
    /// the body is (HTML from a proxy, nothing at all).
    pub(crate) fn read(status: u16, body: &[u8]) -> Self {
        let value: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let envelope = value.as_ref().and_then(|v| v.get("error"));
        let wire = envelope
            .and_then(|e| e.get("code"))
            .and_then(serde_json::Value::as_str);
        let known = wire.and_then(ErrorCode::parse);
        ReplyEnvelope {
            code: known.unwrap_or_else(|| ErrorCode::from_status(status)),
            unknown_code: wire.filter(|_| known.is_none()).map(str::to_string),
            message: envelope
                .and_then(|e| e.get("message"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("HTTP status {status}")),
        }
    }
}

/// A module's typed error that folds into [`Error`] ([`Error::typed`]):
/// it says which stable code it stands for.
pub trait Coded: std::error::Error + Send + Sync + 'static {
    /// The stable code callers see.
    fn code(&self) -> ErrorCode;
}

/// A boxed [`Coded`] error: [`Error::Typed`]'s payload. It reads as the
/// error it holds (same message, same source).
#[derive(Debug)]
pub struct Typed(Box<dyn Coded>);

impl std::fmt::Display for Typed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for Typed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// OS messages of a full disk, for errors that only carry text.
pub(crate) const FULL_MESSAGES: &[&str] = &[
    "No space left on device",
    "Disk quota exceeded",
    "database or disk is full",
];

/// Whether an IO error is a full disk or quota.
pub(crate) fn io_is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Whether any error in the chain from `e` is a full disk or quota.
pub(crate) fn chain_is_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && (io_is_full(io)
                || io.get_ref().is_some_and(|inner| {
                    FULL_MESSAGES.iter().any(|m| inner.to_string().contains(m))
                }))
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Attaches a path-bearing context to an IO error.
pub(crate) trait IoContext<T> {
    /// Wraps the error with "`what` `path`".
    fn ctx(self, what: &str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: &str, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: format!("{what} {}", path.display()),
            source,
        })
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_what_was_missing() {
        let e = Error::not_found("consolidation run", "run-1");
        assert_eq!(e.to_string(), r#"no consolidation run with id "run-1""#);
        assert_eq!(
            Error::not_found("memory", "f-1").to_string(),
            r#"no memory with id "f-1""#
        );
    }

    #[test]
    fn status_table_reads_back() {
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let back = ErrorCode::from_status(code.http_status());
            // Codes that share a status read back as the first of them.
            assert_eq!(back.http_status(), code.http_status(), "{code:?}");
        }
        assert_eq!(ErrorCode::from_status(500), ErrorCode::Internal);
        assert_eq!(ErrorCode::from_status(418), ErrorCode::Internal);
        assert_eq!(ErrorCode::from_status(302), ErrorCode::UpstreamInvalid);
        assert_eq!(ErrorCode::from_status(307), ErrorCode::UpstreamInvalid);
        assert_eq!(ErrorCode::parse("NOPE"), None);
    }

    #[test]
    fn replies_of_a_newer_daemon_fall_back_to_their_status() {
        let r = ReplyEnvelope::read(
            503,
            br#"{"error":{"code":"SHARD_MOVING","message":"try again"}}"#,
        );
        assert_eq!(r.code, ErrorCode::Unavailable);
        assert_eq!(r.unknown_code.as_deref(), Some("SHARD_MOVING"));
        assert_eq!(r.message, "try again");
        let known = ReplyEnvelope::read(400, br#"{"error":{"code":"NOT_FOUND","message":"m"}}"#);
        assert_eq!(
            (known.code, known.unknown_code),
            (ErrorCode::NotFound, None)
        );
        let html = ReplyEnvelope::read(502, b"<html>");
        assert_eq!(html.code, ErrorCode::UpstreamInvalid);
        assert_eq!(html.message, "HTTP status 502");
    }

    #[test]
    fn codes_are_stable_strings() {
        let table = [
            (Error::invalid("x"), "INVALID_INPUT", false),
            (Error::not_found("memory", "a"), "NOT_FOUND", false),
            (
                Error::Unavailable {
                    service: "the memd daemon at 127.0.0.1:9".into(),
                    reason: "connection refused".into(),
                    source: None,
                },
                "UNAVAILABLE",
                true,
            ),
            (
                Error::UpstreamInvalid {
                    service: "the consolidation model".into(),
                    reason: "more than 1 MiB".into(),
                    source: None,
                },
                "UPSTREAM_INVALID",
                false,
            ),
            (
                Error::from_reply(401, r#"{"error":{"code":"UNAUTHORIZED","message":"no"}}"#),
                "UNAUTHORIZED",
                false,
            ),
            (Error::from_reply(503, "<html>"), "UNAVAILABLE", true),
            (Error::from_reply(404, ""), "NOT_FOUND", false),
            (Error::Forbidden("f".into()), "FORBIDDEN", false),
            (Error::Conflict("c".into()), "CONFLICT", false),
            (Error::from_reply(409, ""), "CONFLICT", false),
            (
                Error::RootLocked {
                    root: "/r".into(),
                    pid: "1".into(),
                },
                "ROOT_LOCKED",
                true,
            ),
            (
                Error::EmbeddingUnavailable("no model".into()),
                "EMBEDDING_UNAVAILABLE",
                true,
            ),
            (
                Error::StorageFull("cannot append to journal".into()),
                "STORAGE_FULL",
                true,
            ),
            (
                Error::Io {
                    context: "cannot append".into(),
                    source: std::io::Error::from_raw_os_error(libc::ENOSPC),
                },
                "STORAGE_FULL",
                true,
            ),
            (
                Error::Io {
                    context: "cannot append".into(),
                    source: std::io::Error::from_raw_os_error(libc::EDQUOT),
                },
                "STORAGE_FULL",
                true,
            ),
            (
                Error::Io {
                    context: "cannot read".into(),
                    source: std::io::Error::from_raw_os_error(libc::EIO),
                },
                "STORAGE",
                true,
            ),
            (
                Error::RateLimited {
                    message: "too many searches waiting".into(),
                    retry_after: 2,
                },
                "RATE_LIMITED",
                true,
            ),
        ];
        for (err, code, retryable) in table {
            let env = err.envelope();
            assert_eq!(env["error"]["code"], code);
            assert_eq!(env["error"]["retryable"], retryable);
            assert!(!env["error"]["message"].as_str().unwrap().is_empty());
            // A failed group commit answers every caller with the same storage code.
            if code.starts_with("STORAGE") {
                assert_eq!(err.for_caller().code().as_str(), code);
            }
        }
    }
}
