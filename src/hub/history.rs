//! Use case: a small rolling history of the key health figures
//! (`GET /v1/health/history`, `memd health --history`, the console's plots),
//! so that trends can be seen without a Prometheus server.
//!
//! `memd serve`'s scheduler calls [`Hub::sample_health`] every round; it
//! takes a sample when [`SAMPLE_INTERVAL`] has passed on the hub's clock
//! since the last one (so a test that moves the clock takes samples without
//! waiting). A sample holds the counts (memories, facts), pending vectors,
//! the index's lag behind the journal, free disk under `data/`, and the
//! requests and median search and write latencies since the previous sample
//! (recorded by the HTTP layer through `Hub::note_request`). Samples are
//! appended to `data/health-history.jsonl` (derived data, like the audit
//! log: not fsync'd per line); past twice [`HISTORY_CAPACITY`] lines the
//! file is replaced durably by its newest [`HISTORY_CAPACITY`], so it stays
//! small (a day at one sample a minute). A torn line is skipped on reading.
//! The figures cover every scene, so reading them needs the `admin` scope.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

use super::parts::backlog;
use super::{Caller, Hub};
use crate::api::{HealthHistory, HealthSample};
use crate::auth::scope;
use crate::error::{Error, IoContext, Result};

/// Time between samples, by the hub's clock.
pub const SAMPLE_INTERVAL: Duration = Duration::seconds(60);

/// Samples kept: a day at one a minute.
pub const HISTORY_CAPACITY: usize = 1440;

/// Latencies kept per window between samples (older ones are dropped first).
const MAX_LATENCIES: usize = 10_000;

/// Requests seen since the last sample.
#[derive(Debug, Default)]
struct Window {
    requests: u64,
    search_ms: Vec<f64>,
    write_ms: Vec<f64>,
    last_sample: Option<DateTime<Utc>>,
    /// Whether `last_sample` was read from the file (once, on first use).
    loaded: bool,
}

/// The history's in-memory part, owned by the hub.
#[derive(Debug, Default)]
pub(crate) struct History {
    window: Mutex<Window>,
}

impl History {
    fn push(list: &mut Vec<f64>, ms: f64) {
        if list.len() >= MAX_LATENCIES {
            list.remove(0);
        }
        list.push(ms);
    }
}

/// The history file of a root.
fn history_path(hub: &Hub) -> PathBuf {
    hub.core.layout.data().join("health-history.jsonl")
}

/// The median of `values` in milliseconds, rounded to 0.01 ms.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    let m = if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    };
    Some((m * 100.0).round() / 100.0)
}

/// Every sample the file holds, oldest first (torn lines skipped).
fn read_samples(path: &Path) -> Result<Vec<HealthSample>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).ctx("cannot read the health history", path),
    }
}

impl Hub {
    /// Counts one request (the HTTP layer calls it for every request to a
    /// known route): `route` is `METHOD /path`, `seconds` how long it took.
    pub(crate) fn note_request(&self, route: &str, seconds: f64) {
        let mut w = self.history.window.lock().expect("history poisoned");
        w.requests += 1;
        let ms = seconds * 1000.0;
        match route {
            "POST /v1/search" | "POST /v1/recall" => History::push(&mut w.search_ms, ms),
            "POST /v1/write" | "POST /v1/ingest" => History::push(&mut w.write_ms, ms),
            _ => {}
        }
    }

    /// Takes a sample if [`SAMPLE_INTERVAL`] has passed since the last one
    /// (by the hub's clock) and appends it to the history; returns it.
    pub fn sample_health(&self) -> Result<Option<HealthSample>> {
        let path = history_path(self);
        let now = self.now();
        // The window is taken under the lock and the figures read without
        // it: requests being counted never wait for the sample.
        let (requests, mut search_ms, mut write_ms) = {
            let mut w = self.history.window.lock().expect("history poisoned");
            if !w.loaded {
                w.loaded = true;
                w.last_sample = read_samples(&path)?.last().map(|s| s.ts);
            }
            if w.last_sample
                .is_some_and(|t| now - t < SAMPLE_INTERVAL && now >= t)
            {
                return Ok(None);
            }
            w.last_sample = Some(now);
            (
                std::mem::take(&mut w.requests),
                std::mem::take(&mut w.search_ms),
                std::mem::take(&mut w.write_ms),
            )
        };
        let stats = self.stats()?;
        let lag = backlog::lag(&self.core)?;
        let sample = HealthSample {
            ts: now,
            memories: stats.counts.memories,
            facts: stats.counts.facts,
            pending_vectors: stats.pending_vectors,
            index_lag_bytes: lag.bytes,
            disk_free_bytes: crate::disk::space(&self.core.layout.data()).map_or(0, |(f, _)| f),
            requests,
            search_p50_ms: median(&mut search_ms),
            write_p50_ms: median(&mut write_ms),
        };
        append(&path, &sample)?;
        Ok(Some(sample))
    }

    /// The rolling health history, oldest first (needs `admin`).
    pub fn health_history(&self, caller: &Caller) -> Result<HealthHistory> {
        caller.require(scope::ADMIN)?;
        let mut samples = read_samples(&history_path(self))?;
        let extra = samples.len().saturating_sub(HISTORY_CAPACITY);
        samples.drain(..extra);
        Ok(HealthHistory {
            interval_seconds: SAMPLE_INTERVAL.num_seconds().unsigned_abs(),
            capacity: HISTORY_CAPACITY,
            samples,
        })
    }
}

/// Appends one sample; past twice the capacity, keeps the newest samples only.
fn append(path: &Path, sample: &HealthSample) -> Result<()> {
    let line = serde_json::to_string(sample)
        .map_err(|e| Error::Internal(format!("health sample: {e}")))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ctx("cannot create", dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ctx("cannot open the health history", path)?;
    file.write_all(format!("{line}\n").as_bytes())
        .ctx("cannot append to the health history", path)?;
    drop(file);
    let lines = std::fs::read(path)
        .ctx("cannot read the health history", path)?
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    if lines > 2 * HISTORY_CAPACITY {
        let samples = read_samples(path)?;
        let keep = &samples[samples.len() - HISTORY_CAPACITY..];
        let mut text = String::new();
        for s in keep {
            let l = serde_json::to_string(s)
                .map_err(|e| Error::Internal(format!("health sample: {e}")))?;
            text.push_str(&l);
            text.push('\n');
        }
        crate::base::durable::write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn the_file_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let t0 = DateTime::from_timestamp(1_790_000_000, 0).unwrap();
        for i in 0..(2 * HISTORY_CAPACITY + 1) {
            let s = HealthSample {
                ts: t0 + Duration::minutes(i as i64),
                ..HealthSample::default()
            };
            append(&path, &s).unwrap();
        }
        let kept = read_samples(&path).unwrap();
        assert_eq!(kept.len(), HISTORY_CAPACITY);
        assert_eq!(
            kept.last().unwrap().ts,
            t0 + Duration::minutes(2 * HISTORY_CAPACITY as i64)
        );
    }
}
