//! The audit log: `data/audit.jsonl`, one JSON line per authenticated request.
//!
//! A line names the route, the token (by name, never its secret), the scene,
//! the ids returned, whether the request was denied, the status and the
//! duration. When the current file's first line is older than the retention
//! (30 days), the file is renamed to `audit-<first day>.jsonl` and a new one
//! started; rotated files older than twice the retention are deleted.
//! The log is derived data: it lives under `data/` and is not fsync'd per line.
//! It never takes the last bytes of its file system (below the floor of
//! [`crate::disk`] a line is dropped, so the index can still grow there),
//! and a failure to write is logged once a minute with the number of lines
//! lost meanwhile, not once per request.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

/// How long one audit file is used before it is rotated.
pub(crate) const RETENTION_DAYS: i64 = 30;

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AuditEntry {
    /// When the request arrived.
    pub(crate) ts: DateTime<Utc>,
    /// `METHOD /v1/path`.
    pub(crate) route: String,
    /// Token name, if one was presented and valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) token: Option<String>,
    /// Scene acted in, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scene: Option<String>,
    /// Ids returned or changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) hits: Vec<String>,
    /// 1 when the request was refused (401/403), else 0.
    pub(crate) denied: u32,
    /// HTTP status.
    pub(crate) status: u16,
    /// Duration in milliseconds.
    pub(crate) duration_ms: u64,
    /// Route-specific facts (disclosure: group and asker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extra: Option<serde_json::Value>,
}

struct Current {
    file: Option<File>,
    started: Option<DateTime<Utc>>,
}

/// Appends audit lines, rotating by age.
pub(crate) struct AuditLog {
    path: PathBuf,
    current: Mutex<Current>,
    /// Failures to write, logged once a minute with a count.
    repeats: crate::base::repeat::Repeats,
    /// Whether the last line failed (the next success says so).
    failing: std::sync::atomic::AtomicBool,
}

impl AuditLog {
    /// A log at `path` (normally `data/audit.jsonl`).
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        AuditLog {
            path: path.into(),
            current: Mutex::new(Current {
                file: None,
                started: None,
            }),
            repeats: Default::default(),
            failing: Default::default(),
        }
    }

    fn first_ts(path: &Path) -> Option<DateTime<Utc>> {
        use std::io::BufRead;
        let mut first = String::new();
        std::io::BufReader::new(File::open(path).ok()?)
            .read_line(&mut first)
            .ok()?;
        let v: serde_json::Value = serde_json::from_str(first.trim_end()).ok()?;
        v.get("ts")?.as_str()?.parse().ok()
    }

    /// Appends one entry. Failures are logged, never returned: auditing must
    /// not turn a served request into an error.
    pub(crate) fn record(&self, entry: &AuditEntry) {
        use std::sync::atomic::Ordering;
        match self.append(entry) {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(audit.path = %self.path.display(), "audit lines are written again");
                    self.repeats.clear("audit");
                }
            }
            Err(e) => {
                self.failing.store(true, Ordering::Relaxed);
                if let Some(lost) = self.repeats.admit("audit") {
                    tracing::error!(
                        audit.path = %self.path.display(),
                        error = %e,
                        audit.lines_lost_since_last_report = lost,
                        "cannot write audit line (reported once a minute while it lasts)"
                    );
                }
            }
        }
    }

    fn append(&self, entry: &AuditEntry) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent()
            && crate::disk::Room::of(dir).is_some_and(|r| !r.above_floor())
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "the file system of data/ is below the room memd keeps for the index",
            ));
        }
        let mut cur = self.current.lock().expect("audit log poisoned");
        if cur.file.is_none() {
            cur.started = Self::first_ts(&self.path);
        }
        if let Some(started) = cur.started
            && entry.ts - started > Duration::days(RETENTION_DAYS)
        {
            cur.file = None;
            self.rotate(started, entry.ts)?;
            cur.started = None;
        }
        if cur.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            cur.file = Some({
                use std::os::unix::fs::OpenOptionsExt;
                // Audit lines name tokens and ids: private whatever the umask.
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(&self.path)?
            });
        }
        if cur.started.is_none() {
            cur.started = Some(entry.ts);
        }
        let mut line = serde_json::to_string(entry).expect("audit entries serialise");
        line.push('\n');
        cur.file
            .as_mut()
            .expect("opened above")
            .write_all(line.as_bytes())
    }

    fn rotate(&self, started: DateTime<Utc>, now: DateTime<Utc>) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let rotated = dir.join(format!("audit-{}.jsonl", started.format("%Y%m%d")));
        std::fs::rename(&self.path, &rotated)?;
        let cutoff = (now - Duration::days(2 * RETENTION_DAYS))
            .format("%Y%m%d")
            .to_string();
        for entry in std::fs::read_dir(dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(day) = name
                .strip_prefix("audit-")
                .and_then(|r| r.strip_suffix(".jsonl"))
                && day < cutoff.as_str()
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Flushes and fsyncs the current file.
    pub(crate) fn sync(&self) {
        let cur = self.current.lock().expect("audit log poisoned");
        if let Some(f) = &cur.file {
            let _ = f.sync_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ts: DateTime<Utc>) -> AuditEntry {
        AuditEntry {
            ts,
            route: "POST /v1/search".into(),
            token: Some("t".into()),
            scene: None,
            hits: vec!["a".into()],
            denied: 0,
            status: 200,
            duration_ms: 1,
            extra: None,
        }
    }

    #[test]
    fn rotates_after_retention() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::new(dir.path().join("audit.jsonl"));
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        log.record(&entry(t0));
        log.record(&entry(t0 + Duration::days(1)));
        assert_eq!(
            std::fs::read_to_string(&log.path).unwrap().lines().count(),
            2
        );
        let fresh = AuditLog::new(dir.path().join("audit.jsonl"));
        fresh.record(&entry(t0 + Duration::days(31)));
        assert!(dir.path().join("audit-20260101.jsonl").exists());
        assert_eq!(
            std::fs::read_to_string(&log.path).unwrap().lines().count(),
            1
        );
    }
}
