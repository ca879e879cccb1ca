//! The timetable of periodic jobs: when each one is due (once per period
//! after a time of day, retried with backoff after a failure, never twice in
//! a period after a success) and what is remembered about its runs across
//! restarts (`data/scheduler.json`).
//!
//! The decision is a pure function of the job's settings, its saved state and
//! "now" ([`next_run`]), so tests drive it with an injected clock. The
//! runner that holds the jobs and runs them is [`crate::scheduler`]; health
//! and consolidation status read the saved states from here. The state file
//! is replaced durably ([`crate::base::durable::write_atomic`]): after a
//! crash or a power cut it holds the states before or after the last save,
//! never a torn file that would read as "never ran" and run every job again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Datelike, Local, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layout::Layout;

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
    pub(crate) at: NaiveTime,
    /// Once per this period.
    pub(crate) period: Period,
    /// First retry delay after a failure; doubles per failure, at most a day.
    pub(crate) retry_minutes: u32,
}

/// What is remembered about a job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// Last successful run.
    pub(crate) last_success: Option<DateTime<Utc>>,
    /// Last attempt, successful or not.
    pub(crate) last_attempt: Option<DateTime<Utc>>,
    /// Failures since the last success.
    pub(crate) failures: u32,
    /// Last error message.
    pub(crate) last_error: Option<String>,
    /// Summary of the last successful run.
    pub(crate) last_result: Option<String>,
    /// When the job will next run (as of the last tick).
    #[serde(default)]
    pub(crate) next_run: Option<DateTime<Utc>>,
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

/// Saved states of every job.
pub fn load_states(path: &Path) -> BTreeMap<String, JobState> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Replaces the saved states durably.
pub(crate) fn save_states(path: &Path, states: &BTreeMap<String, JobState>) -> Result<()> {
    let text = serde_json::to_vec_pretty(states).expect("job states serialise");
    crate::base::durable::write_atomic(path, &text)
}

/// The scheduler state file of a root.
pub(crate) fn state_path(layout: &Layout) -> PathBuf {
    layout.data().join("scheduler.json")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A local wall-clock time (`YYYY-MM-DD HH:MM`) as UTC.
    pub(crate) fn local(s: &str) -> DateTime<Utc> {
        let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap();
        Local
            .from_local_datetime(&naive)
            .earliest()
            .unwrap()
            .with_timezone(&Utc)
    }

    /// Daily at 03:00, retried after 10 minutes.
    pub(crate) fn daily() -> Schedule {
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

    fn states(failures: u32) -> BTreeMap<String, JobState> {
        let state = JobState {
            last_success: Some(local("2026-11-30 03:00")),
            last_attempt: Some(local("2026-11-30 03:00")),
            failures,
            last_error: (failures > 0).then(|| "the disk is full".to_string()),
            last_result: Some("memd-backup-20261130.tar.gz (12 files)".into()),
            next_run: Some(local("2026-12-01 03:00")),
        };
        ["archive", "backup", "sleep"]
            .into_iter()
            .map(|name| (name.to_string(), state.clone()))
            .collect()
    }

    /// The saved states survive a restart, and a crash at any step of a save
    /// leaves the states of the save before or of this one: never a torn
    /// file, which `load_states` would read as "no job ever ran".
    #[test]
    fn saved_states_survive_a_crash_at_any_step_of_a_save() {
        use crate::base::durable::{Step, crash_after};
        let (before, after) = (states(0), states(2));
        for step in Step::ALL {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("scheduler.json");
            save_states(&path, &before).unwrap();
            assert_eq!(load_states(&path), before, "a save reads back");
            crash_after(Some(step));
            assert!(save_states(&path, &after).is_err(), "{step:?}");
            crash_after(None);
            let want = if step >= Step::Renamed {
                &after
            } else {
                &before
            };
            assert_eq!(&load_states(&path), want, "after a crash at {step:?}");
        }
    }
}
