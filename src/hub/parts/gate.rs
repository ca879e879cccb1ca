//! The searcher's gate: a fair (FIFO) counting semaphore that admits about one
//! search per core; the others wait in arrival order.
//!
//! Searches are CPU-bound. With more concurrent searches than cores, the
//! scheduler time-slices them: every search waits for all the others, and a
//! long one is stretched by the number of searches per core (processor
//! sharing). Behind the gate each admitted search runs without being
//! preempted by another search, and the wait is a FIFO queue: a search's
//! latency is its own service time plus the work queued ahead of it, which
//! bounds the tail. Throughput is unchanged (the cores are busy either way).
//!
//! Only searches pass the gate. Writes never do: a write never waits for a
//! reader, whatever the number of searches in flight or queued.
//!
//! Admission works by tickets: the k-th arrival (k from 0) enters once
//! `k < released + permits`, so the admitted tickets are always a prefix of
//! the arrivals (nobody overtakes) and at most `permits` searches hold the
//! gate. A permit is released when its guard drops, on unwinding too.

use std::sync::{Condvar, Mutex, MutexGuard};

/// A FIFO counting semaphore (see the module docs).
#[derive(Debug)]
pub(crate) struct Gate {
    permits: u64,
    state: Mutex<Tickets>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct Tickets {
    /// Tickets handed out (the next arrival's ticket).
    issued: u64,
    /// Permits given back.
    released: u64,
}

/// Holding the gate; dropping it lets the next arrival in.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    gate: &'a Gate,
}

impl Gate {
    /// A gate admitting `permits` holders at once (at least one).
    pub(crate) fn new(permits: usize) -> Gate {
        Gate {
            permits: permits.max(1) as u64,
            state: Mutex::new(Tickets::default()),
            released: Condvar::new(),
        }
    }

    /// A gate admitting one search per core this process may use.
    pub(crate) fn per_core() -> Gate {
        Gate::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Waits for this caller's turn (arrival order), then holds the gate.
    pub(crate) fn enter(&self) -> Permit<'_> {
        let mut state = self.lock();
        let ticket = state.issued;
        state.issued += 1;
        while ticket >= state.released + self.permits {
            state = self.released.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        Permit { gate: self }
    }

    /// Holders now, and callers waiting for their turn (for tests and metrics).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn load(&self) -> (usize, usize) {
        let state = self.lock();
        let in_flight = state.issued - state.released;
        let holding = in_flight.min(self.permits);
        (holding as usize, (in_flight - holding) as usize)
    }

    // The counters stay consistent whatever panicked while holding the lock
    // (each update is a single increment), so a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, Tickets> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.released += 1;
        drop(state);
        // Every waiter rechecks its own ticket; the one now inside the window enters.
        self.gate.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn admits_at_most_permits_and_every_caller_finishes() {
        let gate = Arc::new(Gate::new(2));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (gate, inside, most) = (gate.clone(), inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _p = gate.enter();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 2);
        assert_eq!(gate.load(), (0, 0));
    }

    #[test]
    fn callers_enter_in_arrival_order() {
        let gate = Arc::new(Gate::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = gate.enter();
        let mut handles = Vec::new();
        for i in 0..4 {
            let (g, o) = (gate.clone(), order.clone());
            handles.push(std::thread::spawn(move || {
                let _p = g.enter();
                o.lock().unwrap().push(i);
            }));
            // Wait until this caller holds its ticket before the next arrives.
            while gate.load().1 < i + 1 {
                std::thread::yield_now();
            }
        }
        drop(first);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_panicking_holder_gives_its_permit_back() {
        let gate = Arc::new(Gate::new(1));
        let g = gate.clone();
        let _ = std::thread::spawn(move || {
            let _p = g.enter();
            panic!("search failed");
        })
        .join();
        drop(gate.enter());
        assert_eq!(gate.load(), (0, 0));
    }
}
