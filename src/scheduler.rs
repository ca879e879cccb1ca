//! Periodic jobs of `memd serve`: run once per period after a time of day,
//! retry with backoff after a failure, never twice in a period after a
//! success, and remember all that across restarts (`data/scheduler.json`).
//!
//! The decision is a pure function of the job's settings, its saved state and
//! "now" ([`next_run`]), so tests drive it with an injected clock. The runner
//! thread also commits pending text-index changes every second, so processes
//! that only read the index see recent writes, and embeds memories that have
//! no vector yet, off the write path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, Datelike, Local, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::hub::Hub;

/// How often a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// Every day after `at`.
    Day,
    /// Every Monday after `at`.
    Week,
    /// The 1st of every month after `at`.
    Month,
    /// January 1st after `at`.
    Year,
}

/// When a job runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Local time of day after which the job is due.
    pub at: NaiveTime,
    /// Once per this period.
    pub period: Period,
    /// First retry delay after a failure; doubles per failure, at most a day.
    pub retry_minutes: u32,
}

/// What is remembered about a job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// Last successful run.
    pub last_success: Option<DateTime<Utc>>,
    /// Last attempt, successful or not.
    pub last_attempt: Option<DateTime<Utc>>,
    /// Failures since the last success.
    pub failures: u32,
    /// Last error message.
    pub last_error: Option<String>,
    /// Summary of the last successful run.
    pub last_result: Option<String>,
    /// When the job will next run (as of the last tick).
    #[serde(default)]
    pub next_run: Option<DateTime<Utc>>,
}

/// Parses `HH:MM`.
pub fn parse_at(s: &str) -> Result<NaiveTime> {
    NaiveTime::parse_from_str(s.trim(), "%H:%M")
        .map_err(|_| Error::invalid(format!("time of day must be HH:MM, got {s:?}")))
}

/// Start of the period containing `now` (local time), at `at`. If `now` is
/// before that moment, the previous period's start and `true`.
fn period_start_at(s: &Schedule, now: DateTime<Local>) -> (DateTime<Local>, bool) {
    let date = now.date_naive();
    let start_date = |d: chrono::NaiveDate| match s.period {
        Period::Day => d,
        Period::Week => d - chrono::Days::new(u64::from(d.weekday().num_days_from_monday())),
        Period::Month => d.with_day(1).expect("day 1 exists"),
        Period::Year => d
            .with_month(1)
            .and_then(|d| d.with_day(1))
            .expect("Jan 1 exists"),
    };
    let at = |d: chrono::NaiveDate| {
        Local
            .from_local_datetime(&d.and_time(s.at))
            .earliest()
            .unwrap_or_else(|| Local.from_utc_datetime(&d.and_time(s.at)))
    };
    let this = at(start_date(date));
    if now >= this {
        return (this, false);
    }
    let prev_day = start_date(date) - chrono::Days::new(1);
    (at(start_date(prev_day)), true)
}

fn period_start(s: &Schedule, now: DateTime<Local>) -> DateTime<Local> {
    period_start_at(s, now).0
}

/// The next period's start after `start`.
fn next_period_start(s: &Schedule, start: DateTime<Local>) -> DateTime<Local> {
    let mut probe = start + chrono::Duration::hours(1);
    // Walk forward by days until the period start changes (at most 366 steps).
    for _ in 0..400 {
        probe += chrono::Duration::days(1);
        let p = period_start(s, probe);
        if p > start {
            return p;
        }
    }
    probe
}

fn backoff(s: &Schedule, failures: u32) -> chrono::Duration {
    let minutes = u64::from(s.retry_minutes.max(1)) << failures.saturating_sub(1).min(10);
    chrono::Duration::minutes(minutes.min(24 * 60) as i64)
}

/// When the job should run next: `now` or earlier means due now.
///
/// A job that never ran waits for the first `at` from now; a job that ran
/// before makes up a missed period (the daemon was down at `at`) at once.
pub fn next_run(s: &Schedule, state: &JobState, now: DateTime<Utc>) -> DateTime<Utc> {
    let local_now = now.with_timezone(&Local);
    let (start, previous) = period_start_at(s, local_now);
    if previous && state.last_success.is_none() && state.last_attempt.is_none() {
        return next_period_start(s, start).with_timezone(&Utc);
    }
    let done_this_period = state
        .last_success
        .is_some_and(|t| t >= start.with_timezone(&Utc));
    if done_this_period {
        return next_period_start(s, start).with_timezone(&Utc);
    }
    match (state.failures, state.last_attempt) {
        (n, Some(attempt)) if n > 0 && attempt >= start.with_timezone(&Utc) => {
            (attempt + backoff(s, n)).max(start.with_timezone(&Utc))
        }
        _ => start.with_timezone(&Utc),
    }
}

/// What a job does; returns a one-line summary.
pub type JobFn = Box<dyn Fn(&Hub) -> Result<String> + Send>;

/// A job: a name, a schedule and what to do.
pub struct Job {
    /// Stable name (the key in `data/scheduler.json`).
    pub name: &'static str,
    /// When.
    pub schedule: Schedule,
    /// What.
    pub run: JobFn,
}

/// Saved states of every job.
pub fn load_states(path: &Path) -> BTreeMap<String, JobState> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn save_states(path: &Path, states: &BTreeMap<String, JobState>) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_vec_pretty(states).expect("job states serialise");
    std::fs::write(&tmp, text).ctx("cannot write", &tmp)?;
    std::fs::rename(&tmp, path).ctx("cannot replace", path)
}

/// Runs every due job once at `now`; returns the names that ran.
pub fn tick(hub: &Hub, jobs: &[Job], state_path: &Path, now: DateTime<Utc>) -> Vec<&'static str> {
    let mut states = load_states(state_path);
    let before = states.clone();
    let mut ran = Vec::new();
    for job in jobs {
        let state = states.entry(job.name.to_string()).or_default();
        let due = next_run(&job.schedule, state, now);
        if due > now {
            state.next_run = Some(due);
            continue;
        }
        state.last_attempt = Some(now);
        match (job.run)(hub) {
            Ok(summary) => {
                tracing::info!(job = job.name, result = %summary, "scheduled job done");
                state.last_success = Some(now);
                state.failures = 0;
                state.last_error = None;
                state.last_result = Some(summary);
            }
            Err(e) => {
                tracing::warn!(job = job.name, error = %e, "scheduled job failed; will retry");
                state.failures += 1;
                state.last_error = Some(e.to_string());
            }
        }
        state.next_run = Some(next_run(&job.schedule, state, now));
        ran.push(job.name);
    }
    if states != before
        && let Err(e) = save_states(state_path, &states)
    {
        tracing::warn!(error = %e, "cannot save scheduler state");
    }
    ran
}

/// The scheduler state file of a hub's root.
pub fn state_path(hub: &Hub) -> PathBuf {
    hub.layout().data().join("scheduler.json")
}

/// A running scheduler; stops when dropped.
pub struct SchedulerHandle {
    stop: Arc<AtomicBool>,
    /// Dropping it wakes the runner from its wait between rounds.
    wake: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Memories embedded per hold of the writer by the background runner.
const EMBED_GROUP: usize = 16;

/// Starts the runner: every second it commits pending index changes and
/// embeds memories that lack a vector; every 30 seconds it runs due jobs.
///
/// Dropping the handle stops it at once: the wait between rounds ends, a
/// backlog being embedded stops after its current group, and the first load
/// of the model happens on a thread of its own that nobody waits for.
pub fn spawn(hub: Arc<Hub>, jobs: Vec<Job>) -> Result<SchedulerHandle> {
    spawn_every(hub, jobs, Duration::from_secs(1))
}

/// [`spawn`] with the time between rounds (tests use a long one).
pub fn spawn_every(hub: Arc<Hub>, jobs: Vec<Job>, round: Duration) -> Result<SchedulerHandle> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let (wake, woken) = mpsc::channel::<()>();
    let path = state_path(&hub);
    let thread = std::thread::Builder::new()
        .name("memd-scheduler".into())
        .spawn(move || {
            let mut seconds = 0u64;
            let mut load_started = false;
            while !flag.load(Ordering::SeqCst) {
                if let Err(e) = hub.flush() {
                    tracing::warn!(error = %e, "index commit failed");
                }
                // Retrievals wait at most a few seconds before they are journaled.
                if let Err(e) = hub.flush_accesses(false) {
                    tracing::warn!(error = %e, "journaling accesses failed; this window is not counted");
                }
                if hub.embedder_load_pending() {
                    // The first load takes seconds; a stop must not wait for it.
                    if !load_started {
                        load_started = true;
                        if let Err(e) = hub.load_embedder_in_background() {
                            tracing::warn!(error = %e, "memories stay without vectors");
                        }
                    }
                } else {
                    // Embed the backlog in small groups so writes never wait
                    // long for the writer.
                    while !flag.load(Ordering::SeqCst)
                        && hub.embed_pending(EMBED_GROUP) >= EMBED_GROUP as u64
                    {}
                }
                if seconds.is_multiple_of(30) {
                    tick(&hub, &jobs, &path, Utc::now());
                }
                seconds += 1;
                match woken.recv_timeout(round) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
        })
        .map_err(|e| Error::Internal(format!("cannot start the scheduler thread: {e}")))?;
    Ok(SchedulerHandle {
        stop,
        wake: Some(wake),
        thread: Some(thread),
    })
}

/// The daily backup job from the backup config.
pub fn backup_job(dir: PathBuf, keep_days: u32) -> Job {
    Job {
        name: "backup",
        schedule: Schedule {
            at: NaiveTime::from_hms_opt(4, 0, 0).expect("valid time"),
            period: Period::Day,
            retry_minutes: 60,
        },
        run: Box::new(move |hub: &Hub| {
            let (path, manifest) = crate::backup::create(hub.layout(), &dir)?;
            let removed = crate::backup::prune(&dir, keep_days, Utc::now())?;
            Ok(format!(
                "{} ({} files); {} old archives removed",
                path.display(),
                manifest.files.len(),
                removed.len()
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(s: &str) -> DateTime<Utc> {
        let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap();
        Local
            .from_local_datetime(&naive)
            .earliest()
            .unwrap()
            .with_timezone(&Utc)
    }

    fn daily() -> Schedule {
        Schedule {
            at: parse_at("03:00").unwrap(),
            period: Period::Day,
            retry_minutes: 10,
        }
    }

    #[test]
    fn once_per_day_after_at() {
        let s = daily();
        let fresh = JobState::default();
        // A job that never ran waits for the first 03:00 ...
        assert_eq!(
            next_run(&s, &fresh, local("2026-11-30 02:00")),
            local("2026-11-30 03:00")
        );
        assert!(next_run(&s, &fresh, local("2026-11-30 03:01")) <= local("2026-11-30 03:01"));
        // ... while one that ran before makes up a missed day at once.
        let yesterday = JobState {
            last_success: Some(local("2026-11-28 03:00")),
            last_attempt: Some(local("2026-11-28 03:00")),
            ..JobState::default()
        };
        assert!(next_run(&s, &yesterday, local("2026-11-30 02:00")) <= local("2026-11-30 02:00"));
        // After a success today, the next run is tomorrow 03:00.
        let done = JobState {
            last_success: Some(local("2026-11-30 03:00")),
            last_attempt: Some(local("2026-11-30 03:00")),
            ..JobState::default()
        };
        assert_eq!(
            next_run(&s, &done, local("2026-11-30 10:00")),
            local("2026-12-01 03:00")
        );
        assert_eq!(
            next_run(&s, &done, local("2026-12-01 02:59")),
            local("2026-12-01 03:00")
        );
        assert!(next_run(&s, &done, local("2026-12-01 03:00")) <= local("2026-12-01 03:00"));
    }

    #[test]
    fn failures_back_off_and_success_stops_retries() {
        let s = daily();
        let failed = JobState {
            last_attempt: Some(local("2026-11-30 03:00")),
            failures: 1,
            ..JobState::default()
        };
        assert_eq!(
            next_run(&s, &failed, local("2026-11-30 03:01")),
            local("2026-11-30 03:10")
        );
        let failed_twice = JobState {
            last_attempt: Some(local("2026-11-30 03:10")),
            failures: 2,
            ..JobState::default()
        };
        assert_eq!(
            next_run(&s, &failed_twice, local("2026-11-30 03:11")),
            local("2026-11-30 03:30")
        );
    }

    #[test]
    fn weeks_months_years() {
        let mut s = daily();
        s.period = Period::Week;
        let done = JobState {
            last_success: Some(local("2026-11-30 03:00")), // a Monday
            ..JobState::default()
        };
        assert_eq!(
            next_run(&s, &done, local("2026-12-02 12:00")),
            local("2026-12-07 03:00")
        );
        s.period = Period::Month;
        assert_eq!(
            next_run(&s, &done, local("2026-11-30 12:00")),
            local("2026-12-01 03:00")
        );
        s.period = Period::Year;
        assert_eq!(
            next_run(&s, &done, local("2026-11-30 12:00")),
            local("2027-01-01 03:00")
        );
    }

    #[test]
    fn tick_runs_due_jobs_once_and_remembers_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let layout = crate::config::Layout::new(dir.path());
        let hub = Hub::open(layout, Default::default(), crate::hub::Mode::Write).unwrap();
        let path = dir.path().join("scheduler.json");
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let fail_first = Arc::new(AtomicBool::new(true));
        let jobs = || {
            let count = Arc::clone(&count);
            let fail_first = Arc::clone(&fail_first);
            vec![Job {
                name: "test",
                schedule: daily(),
                run: Box::new(move |_hub: &Hub| {
                    count.fetch_add(1, Ordering::SeqCst);
                    if fail_first.swap(false, Ordering::SeqCst) {
                        Err(Error::Internal("first attempt fails".into()))
                    } else {
                        Ok("ok".into())
                    }
                }),
            }]
        };
        assert_eq!(
            tick(&hub, &jobs(), &path, local("2026-11-30 03:05")),
            ["test"]
        );
        assert_eq!(
            tick(&hub, &jobs(), &path, local("2026-11-30 03:06")),
            Vec::<&str>::new(),
            "backing off"
        );
        assert_eq!(
            tick(&hub, &jobs(), &path, local("2026-11-30 03:15")),
            ["test"],
            "retried"
        );
        // A restart (fresh job list, same state file) does not run it again today.
        assert!(tick(&hub, &jobs(), &path, local("2026-11-30 23:00")).is_empty());
        assert_eq!(
            tick(&hub, &jobs(), &path, local("2026-12-01 03:00")),
            ["test"]
        );
        assert_eq!(count.load(Ordering::SeqCst), 3);
        let states = load_states(&path);
        assert_eq!(states["test"].failures, 0);
        assert_eq!(states["test"].last_result.as_deref(), Some("ok"));
    }

    /// Regression (slow `memd serve` shutdown): dropping the handle wakes the
    /// runner instead of waiting out its round. With an hour-long round, only
    /// the wake-up can make the drop return within the bound below.
    #[test]
    fn dropping_the_handle_wakes_the_runner() {
        let dir = tempfile::tempdir().unwrap();
        let layout = crate::config::Layout::new(dir.path());
        let hub = Arc::new(Hub::open(layout, Default::default(), crate::hub::Mode::Write).unwrap());
        let handle = spawn_every(Arc::clone(&hub), Vec::new(), Duration::from_secs(3600)).unwrap();
        let (done, stopped) = mpsc::channel();
        std::thread::spawn(move || {
            drop(handle);
            let _ = done.send(());
        });
        assert!(
            stopped.recv_timeout(Duration::from_secs(120)).is_ok(),
            "the scheduler did not stop when its handle was dropped"
        );
        // The runner let go of the hub: this is the last handle.
        assert_eq!(Arc::strong_count(&hub), 1);
    }
}
