//! The searcher's gate: a fair counting semaphore that admits about one
//! search per core, with one queue per caller (token), so that one caller's
//! heavy load delays only that caller.
//!
//! Searches are CPU-bound. With more concurrent searches than cores, the
//! scheduler time-slices them: every search waits for all the others, and a
//! long one is stretched by the number of searches per core. Behind the gate
//! each admitted search runs without being preempted by another search.
//! Throughput is unchanged (the cores are busy either way).
//!
//! A single first-come queue lets one caller starve the others: six threads
//! of 2,000-character hybrid searches from one token made another token's
//! 15 ms search wait behind all of them. So each caller (a token by name;
//! the local operator and in-process callers as their own) has its own
//! queue, and admission is fair between queues:
//!
//! - **Least service first.** Each search carries a cost estimate ([`cost`]:
//!   estimated milliseconds from its mode and length). When a permit frees,
//!   the caller that has received the least service (the sum of the costs
//!   of its admitted searches) goes next, oldest search first within a
//!   caller (start-time fair queueing). A caller that was idle starts level
//!   with the others, banking no credit. A caller of short searches beside
//!   one of long ones is thus served many times per long search.
//! - **Per-caller concurrency.** A caller holds at most `concurrencyPerToken`
//!   permits (default: all but one core, at least one), so a permit stays
//!   free of it for the others: searches cannot be preempted, and a free
//!   permit is what lets another caller's search start at once. Cheap
//!   searches (a short full-text query, [`CHEAP_COST`]) are the exception:
//!   a permit that no search within its caller's limit waits for goes to
//!   one, so eight clients of one token searching full text use both cores
//!   of a 2-core machine, and another caller waits at most for one such
//!   search (about a millisecond) before its own starts.
//! - **A lane for cheap searches.** Heavy searches (estimated at more than
//!   [`HEAVY_COST`], e.g. embedding a long query) hold at most all permits
//!   but one together, whoever sends them: a full-text search or a short
//!   hybrid one never waits behind long queries' embeddings, even when
//!   several callers send them.
//! - **A bounded queue per caller.** A caller with `queuePerToken` searches
//!   already waiting is refused at once with `RATE_LIMITED` (HTTP 429 with
//!   `Retry-After`, retryable); no other caller's queue is touched.
//!
//! Only searches pass the gate. Writes never do: a write never waits for a
//! reader, whatever the number of searches in flight or queued. Waiting
//! blocks on a condition variable (no busy waiting), and a permit is
//! released when its guard drops, on unwinding too.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::search::SearchMode;

/// Searches estimated above this cost (in milliseconds of one core) are
/// heavy: together they may hold all permits but one.
pub(crate) const HEAVY_COST: u64 = 100;

/// Searches estimated at no more than this cost (a full-text query of up to
/// 39 characters; never one that embeds) may take a permit past their
/// caller's limit when no search within its limit waits for it.
pub(crate) const CHEAP_COST: u64 = 5;

/// The estimated cost, in milliseconds of one core, of a search of
/// `chars` characters in `mode` (measured on e5-small with 2,000 memories:
/// a 1,950-character hybrid query takes ~530 ms, of which ~135 ms embed
/// it and ~300 ms rank its terms; a short one ~20 ms). Only the ratios
/// matter: they decide who goes next and which searches are heavy.
pub(crate) fn cost(mode: SearchMode, chars: usize) -> u64 {
    let chars = chars as u64;
    let text = 1 + chars / 8;
    let embed = 14 + chars / 14;
    match mode {
        SearchMode::Fulltext => text,
        SearchMode::Semantic => embed,
        SearchMode::Hybrid => text + embed,
    }
}

/// The limits a search is admitted under (from `searchGate` in `config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Permits one caller may hold at once; 0 means all but one (at least one).
    pub(crate) per_caller: usize,
    /// Searches one caller may have waiting; past it the next is refused.
    pub(crate) queue: usize,
}

impl Limits {
    /// The limits `searchGate` sets.
    pub(crate) fn of(config: &crate::config::SearchGateConfig) -> Limits {
        Limits {
            per_caller: config.concurrency_per_token,
            queue: config.queue_per_token,
        }
    }
}

/// The queue of the local operator (token names cannot hold parentheses).
pub(crate) const OPERATOR: &str = "(operator)";
/// The queue of in-process callers (evaluation, tests, tools in the process).
pub(crate) const IN_PROCESS: &str = "(in-process)";

/// A search refused because its caller's own queue is full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Searches the caller already had waiting.
    pub(crate) waiting: usize,
    /// Seconds until the caller's queue has likely drained (at least 1).
    pub(crate) retry_after: u64,
}

/// A fair gate (see the module docs).
#[derive(Debug)]
pub(crate) struct Gate {
    permits: usize,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    callers: HashMap<String, Queue>,
    /// Permits held.
    held: usize,
    /// Permits held by heavy searches.
    heavy_held: usize,
    /// The next search's arrival number.
    next: u64,
    /// The service received by the caller admitted last, when it was
    /// admitted: a caller that becomes busy starts there.
    clock: u64,
    /// Searches admitted whose thread has not taken its permit yet.
    admitted: HashSet<u64>,
    /// Permits one caller may hold, as the last arrival's limits said.
    per_caller: usize,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<Waiter>,
    /// Permits this caller holds (or was admitted to).
    running: usize,
    /// Cost of the searches admitted so far.
    served: u64,
    /// Cost of the searches waiting and running, for `Retry-After`.
    pending_cost: u64,
}

#[derive(Debug, Clone, Copy)]
struct Waiter {
    arrival: u64,
    cost: u64,
}

/// Holding the gate; dropping it lets the next search in.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    gate: &'a Gate,
    caller: String,
    cost: u64,
}

impl Gate {
    /// A gate admitting `permits` searches at once (at least one).
    pub(crate) fn new(permits: usize) -> Gate {
        Gate {
            permits: permits.max(1),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// A gate admitting one search per core this process may use.
    pub(crate) fn per_core() -> Gate {
        Gate::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Permits one caller may hold under `limits`.
    fn per_caller(&self, limits: Limits) -> usize {
        match limits.per_caller {
            0 => (self.permits - 1).max(1),
            n => n,
        }
    }

    /// Permits heavy searches may hold together.
    fn heavy_permits(&self) -> usize {
        (self.permits - 1).max(1)
    }

    /// Waits for this search's turn among `caller`'s and the other callers'
    /// (see the module docs), then holds the gate; refused at once when
    /// `caller` already has `limits.queue` searches waiting.
    pub(crate) fn enter(
        &self,
        caller: &str,
        cost: u64,
        limits: Limits,
    ) -> Result<Permit<'_>, Refused> {
        let per_caller = self.per_caller(limits);
        let mut state = self.lock();
        state.per_caller = per_caller;
        let clock = state.clock;
        let queue = state.callers.entry(caller.to_string()).or_default();
        if queue.waiting.len() >= limits.queue.max(1) {
            let ms = queue.pending_cost.div_ceil(per_caller as u64);
            return Err(Refused {
                waiting: queue.waiting.len(),
                retry_after: ms.div_ceil(1000).max(1),
            });
        }
        if queue.waiting.is_empty() && queue.running == 0 {
            // Idle until now: no credit banked, no debt kept beyond the others'.
            queue.served = queue.served.max(clock);
        }
        let arrival = state.next;
        state.next += 1;
        let queue = state.callers.get_mut(caller).expect("inserted above");
        queue.waiting.push_back(Waiter { arrival, cost });
        queue.pending_cost += cost;
        if self.dispatch(&mut state) {
            self.changed.notify_all();
        }
        while !state.admitted.remove(&arrival) {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        Ok(Permit {
            gate: self,
            caller: caller.to_string(),
            cost,
        })
    }

    /// Admits waiting searches while permits are free, least-served caller
    /// first; returns whether any was admitted.
    fn dispatch(&self, state: &mut State) -> bool {
        let per_caller = state.per_caller.max(1);
        let mut any = false;
        while state.held < self.permits {
            let heavy_full = state.heavy_held >= self.heavy_permits();
            let next = state
                .callers
                .iter()
                .filter_map(|(name, q)| {
                    let head = q.waiting.front()?;
                    let allowed = q.running < per_caller && !(heavy_full && head.cost > HEAVY_COST);
                    allowed.then_some((q.served, head.arrival, name))
                })
                .min()
                .map(|(_, _, name)| name.clone());
            // A permit no caller may take under its limit goes to a cheap
            // search past its caller's limit (work-conserving): another
            // caller arriving meanwhile waits at most for one cheap search.
            let next = next.or_else(|| {
                state
                    .callers
                    .iter()
                    .filter_map(|(name, q)| {
                        let head = q.waiting.front()?;
                        (head.cost <= CHEAP_COST).then_some((q.served, head.arrival, name))
                    })
                    .min()
                    .map(|(_, _, name)| name.clone())
            });
            let Some(name) = next else { break };
            let queue = state.callers.get_mut(&name).expect("chosen above");
            let head = queue.waiting.pop_front().expect("chosen for its head");
            let start = queue.served;
            queue.served += head.cost;
            queue.running += 1;
            state.clock = start;
            state.held += 1;
            if head.cost > HEAVY_COST {
                state.heavy_held += 1;
            }
            state.admitted.insert(head.arrival);
            any = true;
        }
        any
    }

    /// Permits held, and searches waiting (for tests and metrics).
    /// Whether the one search holding the gate (the caller's) is the only
    /// one: none other holds it or waits for it, so a core is likely free
    /// for a second thread of that search.
    pub(crate) fn alone(&self) -> bool {
        let (held, waiting) = self.load();
        held <= 1 && waiting == 0
    }

    pub(crate) fn load(&self) -> (usize, usize) {
        let state = self.lock();
        let waiting = state.callers.values().map(|q| q.waiting.len()).sum();
        (state.held, waiting)
    }

    // Every update under the lock leaves the state consistent (nothing in it
    // can panic halfway), so a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let gate = self.gate;
        let mut state = gate.lock();
        state.held -= 1;
        if self.cost > HEAVY_COST {
            state.heavy_held -= 1;
        }
        if let Some(queue) = state.callers.get_mut(&self.caller) {
            queue.running -= 1;
            queue.pending_cost -= self.cost;
        }
        gate.dispatch(&mut state);
        // A caller with nothing left and no lead over the clock is
        // forgotten: it would start at the clock anyway.
        let clock = state.clock;
        state
            .callers
            .retain(|_, q| q.running > 0 || !q.waiting.is_empty() || q.served > clock);
        drop(state);
        gate.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The default per-caller concurrency and a queue no test fills.
    const LIMITS: Limits = Limits {
        per_caller: 0,
        queue: 64,
    };

    /// Returns once `n` searches wait at the gate (their threads have queued).
    fn until_waiting(gate: &Gate, n: usize) {
        while gate.load().1 < n {
            std::thread::yield_now();
        }
    }

    /// With one permit held, `arrivals` (caller, cost) queue one after the
    /// other; then the permit is released. Returns the order they got in.
    fn admission_order(arrivals: &[(&str, u64)]) -> Vec<usize> {
        let gate = Arc::new(Gate::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let holder = gate.enter("holder", 1, LIMITS).unwrap();
        let handles: Vec<_> = arrivals
            .iter()
            .enumerate()
            .map(|(i, &(caller, cost))| {
                let (g, order, caller) = (gate.clone(), order.clone(), caller.to_string());
                let h = std::thread::spawn(move || {
                    let _p = g.enter(&caller, cost, LIMITS).unwrap();
                    order.lock().unwrap().push(i);
                });
                until_waiting(&gate, i + 1);
                h
            })
            .collect();
        drop(holder);
        for h in handles {
            h.join().unwrap();
        }
        Arc::try_unwrap(order).unwrap().into_inner().unwrap()
    }

    #[test]
    fn a_caller_queued_behind_another_callers_backlog_goes_next() {
        let order = admission_order(&[("a", 10), ("a", 10), ("a", 10), ("a", 10), ("b", 10)]);
        assert_eq!(order, vec![0, 4, 1, 2, 3]);
    }

    #[test]
    fn cheap_searches_are_served_many_times_per_costly_one() {
        // a's searches cost ten times b's: after one of a's, b gets five in
        // before a's next (b has then received half of a's service).
        let mut arrivals = vec![("a", 10); 3];
        arrivals.extend([("b", 1); 5]);
        assert_eq!(admission_order(&arrivals), vec![0, 3, 4, 5, 6, 7, 1, 2]);
    }

    #[test]
    fn callers_take_turns_in_arrival_order_within_each() {
        let order = admission_order(&[("a", 5), ("b", 5), ("a", 5), ("b", 5), ("c", 5)]);
        assert_eq!(order, vec![0, 1, 4, 2, 3]);
    }

    #[test]
    fn a_caller_holds_at_most_all_permits_but_one() {
        let gate = Arc::new(Gate::new(3));
        let cost = CHEAP_COST + 1;
        let a1 = gate.enter("a", cost, LIMITS).unwrap();
        let _a2 = gate.enter("a", cost, LIMITS).unwrap();
        let g = gate.clone();
        let a3 = std::thread::spawn(move || drop(g.enter("a", cost, LIMITS).unwrap()));
        until_waiting(&gate, 1);
        // A permit is free, but not for a: b takes it at once.
        let b = gate.enter("b", 1, LIMITS).unwrap();
        assert_eq!(gate.load(), (3, 1));
        drop(b);
        assert_eq!(gate.load(), (2, 1), "a's third search still waits");
        drop(a1);
        a3.join().unwrap();
        // An explicit limit replaces the default.
        let explicit = Limits {
            per_caller: 3,
            queue: 64,
        };
        let _a3 = gate.enter("a", 1, explicit).unwrap();
        let _a4 = gate.enter("a", 1, explicit).unwrap();
        assert_eq!(gate.load(), (3, 0));
    }

    #[test]
    fn cheap_searches_use_a_permit_past_their_limit_that_nobody_else_wants() {
        let gate = Arc::new(Gate::new(2));
        let a1 = gate.enter("a", CHEAP_COST, LIMITS).unwrap();
        // Nobody else waits: a's second cheap search takes the last permit.
        let a2 = gate.enter("a", CHEAP_COST, LIMITS).unwrap();
        assert_eq!(gate.load(), (2, 0));
        // b arrives: it waits for one of a's, and goes before a's third.
        let g = gate.clone();
        let a3 = std::thread::spawn(move || drop(g.enter("a", CHEAP_COST, LIMITS).unwrap()));
        until_waiting(&gate, 1);
        let g = gate.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let b = std::thread::spawn(move || {
            let p = g.enter("b", CHEAP_COST, LIMITS).unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(p);
        });
        until_waiting(&gate, 2);
        drop(a1);
        rx.recv().unwrap();
        assert_eq!(
            gate.load(),
            (2, 1),
            "b holds the freed permit, a's third waits"
        );
        drop(a2);
        a3.join().unwrap();
        b.join().unwrap();
        // A costlier search stays within its caller's limit.
        let _a = gate.enter("a", CHEAP_COST + 1, LIMITS).unwrap();
        let g = gate.clone();
        let again = std::thread::spawn(move || drop(g.enter("a", CHEAP_COST + 1, LIMITS).unwrap()));
        until_waiting(&gate, 1);
        assert_eq!(gate.load(), (1, 1), "a permit is free, but not for a");
        drop(_a);
        again.join().unwrap();
    }

    #[test]
    fn heavy_searches_leave_a_permit_to_cheap_ones_whoever_sends_them() {
        let gate = Arc::new(Gate::new(2));
        let heavy = HEAVY_COST + 1;
        let a = gate.enter("a", heavy, LIMITS).unwrap();
        let g = gate.clone();
        let b = std::thread::spawn(move || drop(g.enter("b", heavy, LIMITS).unwrap()));
        until_waiting(&gate, 1);
        // b's heavy search waits with a permit free; c's cheap one takes it.
        let c = gate.enter("c", HEAVY_COST, LIMITS).unwrap();
        assert_eq!(gate.load(), (2, 1));
        drop(c);
        assert_eq!(gate.load(), (1, 1));
        drop(a);
        b.join().unwrap();
        assert_eq!(gate.load(), (0, 0));
    }

    #[test]
    fn a_full_queue_refuses_its_caller_only() {
        let gate = Arc::new(Gate::new(1));
        let limits = Limits {
            per_caller: 0,
            queue: 2,
        };
        let holder = gate.enter("holder", 1, limits).unwrap();
        let mut handles = Vec::new();
        for i in 0..2 {
            let g = gate.clone();
            handles.push(std::thread::spawn(move || {
                drop(g.enter("a", 1500, limits).unwrap())
            }));
            until_waiting(&gate, i + 1);
        }
        // a has 3,000 ms of searches waiting, one at a time: retry in 3 s.
        assert_eq!(
            gate.enter("a", 1500, limits).unwrap_err(),
            Refused {
                waiting: 2,
                retry_after: 3
            }
        );
        let g = gate.clone();
        handles.push(std::thread::spawn(move || {
            drop(g.enter("b", 1, limits).unwrap())
        }));
        until_waiting(&gate, 3);
        drop(holder);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(gate.load(), (0, 0));
        assert!(gate.lock().admitted.is_empty());
    }

    #[test]
    fn admits_at_most_permits_and_every_caller_finishes() {
        let gate = Arc::new(Gate::new(2));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let per_caller: Arc<Vec<AtomicUsize>> =
            Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
        let handles: Vec<_> = (0..9)
            .map(|t| {
                let (gate, inside, most, per_caller) = (
                    gate.clone(),
                    inside.clone(),
                    most.clone(),
                    per_caller.clone(),
                );
                std::thread::spawn(move || {
                    let caller = t % 3;
                    for k in 0..200 {
                        let cost = if k % 7 == 0 {
                            HEAVY_COST * 3
                        } else {
                            CHEAP_COST + 1
                        };
                        let _p = gate.enter(&format!("c{caller}"), cost, LIMITS).unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let mine = per_caller[caller].fetch_add(1, Ordering::SeqCst) + 1;
                        assert_eq!(mine, 1, "a caller holds one permit of two");
                        std::thread::yield_now();
                        per_caller[caller].fetch_sub(1, Ordering::SeqCst);
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
        let state = gate.lock();
        assert_eq!((state.held, state.heavy_held), (0, 0));
        assert!(state.admitted.is_empty());
    }

    #[test]
    fn a_panicking_holder_gives_its_permit_back() {
        let gate = Arc::new(Gate::new(1));
        let g = gate.clone();
        let _ = std::thread::spawn(move || {
            let _p = g.enter("a", HEAVY_COST + 1, LIMITS).unwrap();
            panic!("search failed");
        })
        .join();
        drop(gate.enter("a", HEAVY_COST + 1, LIMITS).unwrap());
        assert_eq!(gate.load(), (0, 0));
        assert_eq!(gate.lock().heavy_held, 0);
    }

    #[test]
    fn costs_grow_with_length_and_embedding() {
        let short = cost(SearchMode::Fulltext, 20);
        assert!(short < cost(SearchMode::Hybrid, 20));
        assert!(
            cost(SearchMode::Hybrid, 20) <= HEAVY_COST,
            "a short hybrid search is cheap"
        );
        assert!(cost(SearchMode::Hybrid, 2000) > HEAVY_COST);
        assert!(cost(SearchMode::Fulltext, 2000) > HEAVY_COST);
        assert!(cost(SearchMode::Semantic, 2000) > HEAVY_COST);
    }
}
