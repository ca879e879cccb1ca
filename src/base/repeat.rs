//! Rate limiting of repeated log lines.
//!
//! A failure that repeats on every request (the audit log on a full disk,
//! an index that cannot grow) must not write the same line thousands of
//! times: the first occurrence of a line is logged at once, the repeats of
//! the same key within a window are counted, and the next occurrence after
//! the window is logged with that count ("… repeated 12836 times since").

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long repeats of one line are counted before it is logged again.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Counts repeats of log lines by key (see the module docs).
#[derive(Debug, Default)]
pub struct Repeats {
    seen: Mutex<HashMap<String, (Instant, u64)>>,
}

impl Repeats {
    /// Whether the line `key` should be logged now, and how many repeats
    /// were suppressed since it last was (`Some(0)` for a first line,
    /// `None` while it is being counted).
    pub fn admit(&self, key: &str) -> Option<u64> {
        self.admit_at(key, Instant::now())
    }

    fn admit_at(&self, key: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().expect("log repeats poisoned");
        match seen.get_mut(key) {
            Some((since, count)) if now.duration_since(*since) < WINDOW => {
                *count += 1;
                None
            }
            Some((since, count)) => {
                let suppressed = *count;
                *since = now;
                *count = 0;
                Some(suppressed)
            }
            None => {
                // Bounded: keys are a handful of failure kinds, but never let
                // a stream of distinct messages grow the map without end.
                if seen.len() >= 256 {
                    seen.retain(|_, (since, _)| now.duration_since(*since) < WINDOW);
                }
                seen.insert(key.to_string(), (now, 0));
                Some(0)
            }
        }
    }

    /// Forgets `key`, so that its next occurrence is logged at once (the
    /// failure it stood for is over).
    pub fn clear(&self, key: &str) {
        self.seen.lock().expect("log repeats poisoned").remove(key);
    }
}

/// The process-wide counter for failures that are not owned by one object
/// (the index falling behind, a journal append on a full disk).
pub fn global() -> &'static Repeats {
    static GLOBAL: std::sync::LazyLock<Repeats> = std::sync::LazyLock::new(Repeats::default);
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_counted_and_logged_once_per_window() {
        let r = Repeats::default();
        let t0 = Instant::now();
        assert_eq!(r.admit_at("disk full", t0), Some(0));
        for i in 1..=5 {
            assert_eq!(r.admit_at("disk full", t0 + Duration::from_secs(i)), None);
        }
        // Another line is its own.
        assert_eq!(r.admit_at("other", t0 + Duration::from_secs(2)), Some(0));
        // After the window: logged with the count of what was held back.
        assert_eq!(r.admit_at("disk full", t0 + WINDOW), Some(5));
        assert_eq!(
            r.admit_at("disk full", t0 + WINDOW + Duration::from_secs(1)),
            None
        );
        r.clear("disk full");
        assert_eq!(
            r.admit_at("disk full", t0 + WINDOW + Duration::from_secs(2)),
            Some(0)
        );
    }
}
