//! A team of threads that spin between parallel regions. A forward pass has
//! ~150 parallel regions per token, many of them a few microseconds long;
//! rayon's idle workers go to sleep after a little while of looking for
//! work, and waking one (a futex natively, `Atomics.wait` in a browser,
//! where 2 threads generated no faster than 1) costs as much as a small
//! region's work. Like ggml's threads, a team's helpers spin for the whole
//! forward pass: a region is published by bumping an epoch counter, every
//! member takes indices from a shared counter, and the caller spins until
//! all helpers have finished.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A region's work: called once per index.
type Job<'a> = &'a (dyn Fn(usize) + Sync);

pub struct Team {
    helpers: usize,
    /// Helpers spinning in `help` (all must have arrived before a region).
    joined: AtomicUsize,
    /// Bumped to publish a region.
    epoch: AtomicUsize,
    /// The current region's work; written only while no helper reads it.
    job: UnsafeCell<Option<Job<'static>>>,
    n: AtomicUsize,
    next: AtomicUsize,
    /// Helpers still in the current region.
    active: AtomicUsize,
    stop: AtomicBool,
}

// SAFETY: `job` is written by the caller of `run` only between regions (no
// helper reads it then: every helper has left the previous region and none
// enters the next before the epoch is bumped with Release ordering).
unsafe impl Sync for Team {}

thread_local! {
    /// Whether this thread is inside a region (a nested region runs inline).
    static IN_REGION: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running a region's job.
pub fn in_region() -> bool {
    IN_REGION.with(|r| r.get())
}

impl Team {
    /// A team for the caller plus `helpers` threads that will call `help`.
    pub fn new(helpers: usize) -> Team {
        Team {
            helpers,
            joined: AtomicUsize::new(0),
            epoch: AtomicUsize::new(0),
            job: UnsafeCell::new(None),
            n: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }

    pub fn helpers(&self) -> usize {
        self.helpers
    }

    /// A helper thread's body: runs every region until `finish`.
    pub fn help(&self) {
        // No region is published before every helper has joined, so epoch 0
        // is the one this helper has seen.
        let mut seen = 0;
        let mut spins = 0;
        self.joined.fetch_add(1, Ordering::AcqRel);
        loop {
            let epoch = loop {
                let epoch = self.epoch.load(Ordering::Acquire);
                if epoch != seen {
                    break epoch;
                }
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                spins = relax(spins);
            };
            spins = 0;
            seen = epoch;
            // SAFETY: published before the epoch was bumped (Acquire above),
            // and kept until this helper leaves the region (`active`).
            let job = unsafe { (*self.job.get()).expect("a published region has a job") };
            self.work(job);
            self.active.fetch_sub(1, Ordering::Release);
        }
    }

    /// Takes indices until none are left.
    fn work(&self, job: Job<'_>) {
        IN_REGION.with(|r| r.set(true));
        let n = self.n.load(Ordering::Relaxed);
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            job(i);
        }
        IN_REGION.with(|r| r.set(false));
    }

    /// `job(0..n)` over the caller and the helpers; returns when all are done.
    /// The helpers must be running `help` (the caller waits for them).
    pub fn run(&self, n: usize, job: Job<'_>) {
        if n <= 1 || self.helpers == 0 || IN_REGION.with(|r| r.get()) {
            (0..n).for_each(job);
            return;
        }
        let mut spins = 0;
        while self.joined.load(Ordering::Acquire) < self.helpers {
            spins = relax(spins);
        }
        // SAFETY: no helper is in a region (all left the last one), and the
        // reference is erased from `job` only until the helpers are done
        // with it below.
        unsafe {
            *self.job.get() = Some(std::mem::transmute::<Job<'_>, Job<'static>>(job));
        }
        self.n.store(n, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        self.active.store(self.helpers, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::Release);
        self.work(job);
        spins = 0;
        while self.active.load(Ordering::Acquire) != 0 {
            spins = relax(spins);
        }
        // SAFETY: every helper has left the region.
        unsafe {
            *self.job.get() = None;
        }
    }

    /// Lets the helpers return from `help`.
    pub fn finish(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// A guard that calls `finish` when dropped (also when unwinding).
    pub fn stop_on_drop(&self) -> StopOnDrop<'_> {
        StopOnDrop(self)
    }
}

pub struct StopOnDrop<'a>(&'a Team);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// One round of waiting: a spin hint, and after a few of them a yield to the
/// OS. Back-to-back regions are caught by the spins; after that, yielding
/// frees the core for a thread the OS has descheduled (more threads than
/// cores), and a waiting hyperthread stops taking its sibling's execution
/// units: always spinning made generation ~10% slower at 2 threads on this
/// 2-vCPU machine, while yielding from the start was as fast as this.
/// (`yield_now` does nothing in wasm, where helpers just spin.)
fn relax(spins: u32) -> u32 {
    const SPINS_BEFORE_YIELDING: u32 = 64;
    if spins < SPINS_BEFORE_YIELDING {
        std::hint::spin_loop();
        spins + 1
    } else {
        std::thread::yield_now();
        spins
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_once_per_region() {
        for helpers in [0, 1, 3] {
            let team = Team::new(helpers);
            std::thread::scope(|s| {
                for _ in 0..helpers {
                    s.spawn(|| team.help());
                }
                for n in [0, 1, 2, 7, 64, 1000] {
                    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    team.run(n, &|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                        // A nested region runs inline on this thread.
                        let inner = AtomicUsize::new(0);
                        team.run(3, &|_| {
                            inner.fetch_add(1, Ordering::Relaxed);
                        });
                        assert_eq!(inner.load(Ordering::Relaxed), 3);
                    });
                    assert!(
                        hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                        "n = {n}"
                    );
                }
                team.finish();
            });
        }
    }
}
