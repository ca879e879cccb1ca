//! Periodic jobs of `memd serve` and the thread that runs them. When a job is
//! due is decided by [`crate::timetable`] (a pure function of its settings,
//! saved state and "now"); the jobs themselves (backup, archive, sleep
//! consolidation) are built here, above every module they drive. The runner
//! thread also commits pending text-index changes every second, so processes
//! that only read the index see recent writes, embeds memories that have
//! no vector yet, off the write path, and samples the health history once a
//! minute ([`crate::hub::history`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, Utc};

use crate::config::SleepConfig;
use crate::consolidate;
use crate::error::{Error, Result};
use crate::hub::Hub;
use crate::timetable::save_states;
pub use crate::timetable::{JobState, Period, Schedule, load_states, next_run, parse_at};

/// What a job does; returns a one-line summary.
pub(crate) type JobFn = Box<dyn Fn(&Hub) -> Result<String> + Send>;

/// A job: a name, a schedule and what to do.
pub struct Job {
    /// Stable name (the key in `data/scheduler.json`).
    pub(crate) name: &'static str,
    /// When.
    pub(crate) schedule: Schedule,
    /// What.
    pub(crate) run: JobFn,
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
    crate::timetable::state_path(hub.layout())
}

/// A running scheduler; stops when dropped.
pub(crate) struct SchedulerHandle {
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

/// Memories embedded per call of the background runner (it checks for a
/// stop between calls): enough for a few length-sorted batches per embedder
/// session, so every core has work and each call's bookkeeping (finding the
/// pending memories, storing their vectors) is spread over many memories.
const EMBED_GROUP: usize = 64;

/// Starts the runner: every second it commits pending index changes and
/// embeds memories that lack a vector; every 30 seconds it runs due jobs.
///
/// Dropping the handle stops it at once: the wait between rounds ends, a
/// backlog being embedded stops after its current group, and the first load
/// of the model happens on a thread of its own that nobody waits for.
pub(crate) fn spawn(hub: Arc<Hub>, jobs: Vec<Job>) -> Result<SchedulerHandle> {
    spawn_every(hub, jobs, Duration::from_secs(1))
}

/// [`spawn`] with the time between rounds (tests use a long one).
pub(crate) fn spawn_every(
    hub: Arc<Hub>,
    jobs: Vec<Job>,
    round: Duration,
) -> Result<SchedulerHandle> {
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
                // One health sample a minute by the hub's clock (see `hub::history`).
                if let Err(e) = hub.sample_health() {
                    tracing::warn!(error = %e, "cannot record a health sample");
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
                    tick(&hub, &jobs, &path, hub.now());
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
pub(crate) fn backup_job(dir: PathBuf, keep_days: u32) -> Job {
    Job {
        name: "backup",
        schedule: Schedule {
            at: NaiveTime::from_hms_opt(4, 0, 0).expect("valid time"),
            period: Period::Day,
            retry_minutes: 60,
        },
        run: Box::new(move |hub: &Hub| {
            let (path, manifest) = crate::backup::create(hub.layout(), &dir)?;
            let removed = crate::backup::prune(&dir, keep_days, hub.now())?;
            let links = match manifest.links_left_out.len() {
                0 => String::new(),
                n => format!(
                    "; {n} symbolic links under memories/ left out (first: {})",
                    manifest.links_left_out[0]
                ),
            };
            Ok(format!(
                "{} ({} files){links}; {} old archives removed",
                path.display(),
                manifest.files.len(),
                removed.len()
            ))
        }),
    }
}

/// The daily job that compresses journal months older than
/// `lifecycle.archiveAfterMonths` (added only when that is not 0).
pub(crate) fn archive_job() -> Job {
    Job {
        name: "archive",
        schedule: Schedule {
            at: NaiveTime::from_hms_opt(4, 30, 0).expect("valid time"),
            period: Period::Day,
            retry_minutes: 60,
        },
        run: Box::new(|hub: &Hub| {
            let months = hub.archive_journal(None)?;
            Ok(format!("{} months archived", months.len()))
        }),
    }
}

/// The scheduler job that runs consolidation once per period.
pub fn sleep_job(cfg: SleepConfig) -> Result<Job> {
    cfg.validate()?;
    let schedule = cfg.schedule()?;
    Ok(Job {
        name: consolidate::JOB_NAME,
        schedule,
        run: Box::new(move |hub: &Hub| {
            let now = hub.now();
            let last_success = load_states(&state_path(hub))
                .get(consolidate::JOB_NAME)
                .and_then(|s| s.last_success);
            let report = consolidate::run(
                hub,
                &cfg,
                &consolidate::RunOptions {
                    window: consolidate::Window::since_last_run(cfg.period, last_success, now),
                    dry_run: false,
                    now,
                },
            )?;
            Ok(report.summary_line())
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timetable::tests::{daily, local};

    #[test]
    fn tick_runs_due_jobs_once_and_remembers_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let layout = crate::layout::Layout::new(dir.path());
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
        let layout = crate::layout::Layout::new(dir.path());
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
