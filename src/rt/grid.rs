//! The grid periodic loops wake on, and the one timer they share.
//!
//! Every deadline handed to async-io costs its reactor thread twice: the
//! insert (a queued operation, an eventfd write that wakes the thread, a
//! `timerfd_settime`) and the expiry (the thread wakes this one). With a
//! hollow fleet's ten thousand probes, that was a sixth of the process's
//! idle CPU even after the deadlines fell on one grid (`perf`, 1,000 hollow
//! nodes, docs/fleet.md).
//!
//! So the grid's sleepers wait in a queue of this thread's own (a
//! `BTreeMap` by deadline), and async-io holds one timer: the earliest
//! deadline's, registered with that sleeper's waker. When it fires, that
//! sleeper wakes the others due at the same tick, on this thread, and arms
//! the timer for the next tick. A sleeper whose deadline is later than the
//! armed one costs async-io nothing. Each thread has its own queue (the
//! agent runs on one), and nothing here needs the executor: a sleep polled
//! under any `block_on` works.
//!
//! Deadlines wait here too (`rt::timeout`, hyper's keep-alive timer): they
//! are nearly always dropped before they are due, and a dropped sleeper
//! that did not hold the timer is a map removal on this thread, where
//! async-io's timer woke its thread for the insert and again for the
//! removal.
//!
//! Must not know: who sleeps or why.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The grid that periodic work wakes on: see [`on_grid`].
pub const TICK_GRID: Duration = Duration::from_millis(100);

/// `deadline` rounded up to the next multiple of [`TICK_GRID`], counted
/// from one instant of the process. Never earlier than `deadline`.
///
/// For the loops that wake on a period (a probe's tick, a relist, a Lease
/// renewal, the node status and housekeeping passes): deadlines on one
/// grid fall together, so the loops due in the same 100 ms wake at one
/// expiry of the shared timer. 100 ms is a tenth of the shortest period (a
/// probe's one second); kubelet's periodic work runs on Go timers with no
/// finer promise.
pub fn on_grid(deadline: Instant) -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    let grid = TICK_GRID.as_nanos();
    let steps = deadline
        .saturating_duration_since(base)
        .as_nanos()
        .div_ceil(grid);
    let on = base + Duration::from_nanos(u64::try_from(steps * grid).unwrap_or(u64::MAX));
    on.max(deadline)
}

/// Sleeps `duration`, then until the next tick of [`TICK_GRID`]: for
/// periodic loops ([`on_grid`]).
pub fn sleep_on_grid(duration: Duration) -> GridSleep {
    sleep_until_on_grid(Instant::now() + duration)
}

/// Sleeps until `deadline`, then until the next tick of [`TICK_GRID`].
pub fn sleep_until_on_grid(deadline: Instant) -> GridSleep {
    GridSleep {
        deadline: on_grid(deadline),
        key: None,
    }
}

/// A sleeper's place in the queue: its deadline, then a number that makes
/// it unique.
type Key = (Instant, u64);

/// This thread's sleepers and the one async-io timer.
struct Queue {
    sleepers: BTreeMap<Key, Waker>,
    next_id: u64,
    /// The timer, set for `armed`'s deadline with `armed`'s waker.
    timer: smol::Timer,
    armed: Option<Key>,
}

thread_local! {
    static QUEUE: RefCell<Queue> = RefCell::new(Queue {
        sleepers: BTreeMap::new(),
        next_id: 0,
        timer: smol::Timer::never(),
        armed: None,
    });
}

impl Queue {
    /// Takes sleeper `key` out; true when it held the timer.
    fn remove(&mut self, key: Key) -> bool {
        self.sleepers.remove(&key);
        let held = self.armed == Some(key);
        if held {
            self.armed = None;
        }
        held
    }

    /// Takes out the sleepers due by `now` (their wakers, to be woken once
    /// the queue is no longer borrowed) and arms the timer for the earliest
    /// one left, unless it already is.
    fn rearm(&mut self, mut now: Instant, due: &mut Vec<Waker>) {
        loop {
            while let Some(entry) = self.sleepers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                if self.armed == Some(*entry.key()) {
                    self.armed = None;
                }
                due.push(entry.remove());
            }
            let Some((&key, waker)) = self.sleepers.first_key_value() else {
                // Nobody sleeps: the old registration goes (no wake-up of
                // the reactor thread for a removal).
                self.armed = None;
                self.timer = smol::Timer::never();
                return;
            };
            if self.armed == Some(key) {
                return;
            }
            // A new timer, not `set_at`: that would register the old waker
            // first and this poll the new one, two inserts for one.
            self.timer = smol::Timer::at(key.0);
            let mut cx = Context::from_waker(waker);
            match Pin::new(&mut self.timer).poll(&mut cx) {
                Poll::Pending => {
                    self.armed = Some(key);
                    return;
                }
                // Due while it was being armed: take it out with the rest.
                Poll::Ready(_) => now = Instant::now(),
            }
        }
    }
}

/// Wakes `due` (outside the queue's borrow: a waker may poll nothing, but
/// may drop a sleeper of this thread).
fn wake_all(due: Vec<Waker>) {
    for w in due {
        w.wake();
    }
}

/// The future of [`sleep_on_grid`] and [`sleep_until_on_grid`].
#[derive(Debug)]
#[must_use = "a sleep does nothing unless awaited"]
pub struct GridSleep {
    deadline: Instant,
    /// Its place in the queue, once polled and not yet due.
    key: Option<Key>,
}

impl Future for GridSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        let mut due = Vec::new();
        let done = QUEUE.with(|q| {
            let mut q = q.borrow_mut();
            if now >= self.deadline {
                if let Some(key) = self.key.take() {
                    q.remove(key);
                }
                // Whoever held the timer was woken by it: wake the rest of
                // its tick and arm it for the next.
                q.rearm(now, &mut due);
                return true;
            }
            match self.key {
                Some(key) => {
                    let fresh = match q.sleepers.get_mut(&key) {
                        // Queued as it was: nothing to arm (the timer is
                        // armed for the earliest sleeper whenever one
                        // waits, and its expiry wakes whoever is due). A
                        // deadline polled along with every poll of the
                        // future it bounds ends here.
                        Some(w) if w.will_wake(cx.waker()) => return false,
                        Some(w) => {
                            w.clone_from(cx.waker());
                            true
                        }
                        None => {
                            q.sleepers.insert(key, cx.waker().clone());
                            true
                        }
                    };
                    // The timer holds the old waker: register the new one.
                    if fresh && q.armed == Some(key) {
                        q.armed = None;
                    }
                }
                None => {
                    let key = (self.deadline, q.next_id);
                    q.next_id += 1;
                    q.sleepers.insert(key, cx.waker().clone());
                    self.key = Some(key);
                }
            }
            q.rearm(now, &mut due);
            false
        });
        wake_all(due);
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for GridSleep {
    fn drop(&mut self) {
        let Some(key) = self.key else {
            return;
        };
        let mut due = Vec::new();
        // At thread exit the queue may be gone already: nothing to do then.
        let _ = QUEUE.try_with(|q| {
            let Ok(mut q) = q.try_borrow_mut() else {
                return;
            };
            if q.remove(key) {
                q.rearm(Instant::now(), &mut due);
            }
        });
        wake_all(due);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn a_deadline_on_the_grid_is_never_earlier_and_deadlines_in_one_step_fall_together() {
        let now = Instant::now();
        let a = on_grid(now + Duration::from_millis(1));
        let b = on_grid(now + Duration::from_millis(2));
        assert!(a >= now + Duration::from_millis(1));
        assert!(a - (now + Duration::from_millis(1)) < TICK_GRID);
        // Within one step of the grid: one deadline (unless the step
        // boundary fell between them, then one step apart).
        assert!(b == a || b - a == TICK_GRID);
        let c = on_grid(a);
        assert_eq!(c, a, "a deadline on the grid stays");
        let later = on_grid(now + Duration::from_secs(5));
        assert_eq!(
            (later - a).as_nanos() % TICK_GRID.as_nanos(),
            0,
            "every deadline on the grid is a whole number of steps from another"
        );
    }

    fn queued() -> (usize, Option<Key>) {
        QUEUE.with(|q| {
            let q = q.borrow();
            (q.sleepers.len(), q.armed)
        })
    }

    #[test]
    fn sleepers_of_one_tick_all_wake_and_leave_the_queue_empty() {
        let woke = Rc::new(Cell::new(0));
        super::super::block_on(async {
            let tasks: Vec<_> = (0..50)
                .map(|i| {
                    let woke = woke.clone();
                    super::super::spawn(async move {
                        // Two ticks, and some sleepers on a later one.
                        sleep_on_grid(Duration::from_millis(1 + (i % 2) * 150)).await;
                        woke.set(woke.get() + 1);
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
        });
        assert_eq!(woke.get(), 50);
        assert_eq!(queued(), (0, None));
    }

    #[test]
    fn a_sleeper_dropped_while_it_holds_the_timer_hands_it_to_the_next() {
        super::super::block_on(async {
            let soon = Instant::now() + Duration::from_millis(1);
            let mut first = Box::pin(sleep_until_on_grid(soon));
            // Polled once: queued, and the holder of the timer.
            assert!(smol::future::poll_once(first.as_mut()).await.is_none());
            let held = queued().1.expect("armed");
            assert_eq!(Some(held), first.key);
            let later = sleep_until_on_grid(soon + TICK_GRID);
            let later = super::super::spawn(later);
            smol::future::yield_now().await;
            drop(first);
            // The later sleeper now holds the timer and still wakes.
            later.await;
        });
        assert_eq!(queued(), (0, None));
    }

    #[test]
    fn a_sleep_polled_under_another_block_on_still_wakes() {
        smol::future::block_on(sleep_on_grid(Duration::from_millis(1)));
        assert_eq!(queued(), (0, None));
    }
}
