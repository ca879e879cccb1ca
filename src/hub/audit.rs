//! Use case: recent audit lines (`POST /v1/audit`, `memd audit`).
//!
//! The HTTP server writes one line per authenticated request to
//! `data/audit.jsonl` (rotated to `audit-<day>.jsonl` after 30 days; see
//! `crate::audit`). This reads them back, newest first, optionally for one
//! token or one operation. Lines name every token and every scene, so
//! reading them needs the `admin` scope; a line that cannot be read is
//! counted, never shown half. Reading the log writes nothing.

use std::path::{Path, PathBuf};

use super::{Caller, Hub};
use crate::api::{AuditBody, AuditLine, AuditReply};
use crate::auth::scope;
use crate::error::{Error, IoContext, Result};

/// Largest `limit`.
const MAX_AUDIT: usize = 1000;

impl Hub {
    /// The newest audit lines matching `body` (default 50).
    pub fn audit(&self, caller: &Caller, body: AuditBody) -> Result<AuditReply> {
        caller.require(scope::ADMIN)?;
        let limit = body.limit.unwrap_or(50);
        if !(1..=MAX_AUDIT).contains(&limit) {
            return Err(Error::invalid(format!(
                "limit must be between 1 and {MAX_AUDIT}"
            )));
        }
        let action = body
            .action
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let wanted = |line: &AuditLine| {
            body.token
                .as_deref()
                .is_none_or(|t| line.token.as_deref() == Some(t))
                && action.is_none_or(|a| names_route(&line.route, a))
        };
        let mut reply = AuditReply {
            entries: Vec::new(),
            unreadable: 0,
        };
        for file in audit_files(&self.core.layout.audit())? {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).ctx("cannot read the audit log", &file),
            };
            for raw in text.lines().rev().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<AuditLine>(raw) {
                    Ok(line) if wanted(&line) => reply.entries.push(line),
                    Ok(_) => {}
                    Err(_) => reply.unreadable += 1,
                }
                if reply.entries.len() >= limit {
                    return Ok(reply);
                }
            }
        }
        Ok(reply)
    }
}

/// Whether `route` (`POST /v1/archive/search`) is the operation `action`
/// names: the path after `/v1/` (`archive/search`), the path, or the route.
fn names_route(route: &str, action: &str) -> bool {
    let path = route.split_once(' ').map_or(route, |(_, p)| p);
    route.eq_ignore_ascii_case(action)
        || path == action
        || path.strip_prefix("/v1/") == Some(action.trim_start_matches('/'))
}

/// The current log, then the rotated ones, newest first.
fn audit_files(current: &Path) -> Result<Vec<PathBuf>> {
    let mut rotated = Vec::new();
    if let Some(dir) = current.parent() {
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.starts_with("audit-") && name.ends_with(".jsonl") {
                        rotated.push(entry.path());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).ctx("cannot list", dir),
        }
    }
    // `audit-YYYYMMDD.jsonl`: the name orders them by day.
    rotated.sort();
    rotated.reverse();
    let mut files = vec![current.to_path_buf()];
    files.extend(rotated);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_name_routes() {
        for (route, action, want) in [
            ("POST /v1/write", "write", true),
            ("POST /v1/write", "/v1/write", true),
            ("POST /v1/write", "post /v1/write", true),
            ("POST /v1/archive/search", "archive/search", true),
            ("POST /v1/archive/search", "search", false),
            ("POST /v1/writer", "write", false),
        ] {
            assert_eq!(names_route(route, action), want, "{route} {action}");
        }
    }
}
