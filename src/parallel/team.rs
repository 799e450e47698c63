//! A team of threads that spin between parallel regions, for the threaded
//! wasm build. A forward pass has ~150 parallel regions per token; rayon's
//! idle workers go to sleep after a few microseconds of looking for work,
//! and in a browser waking a Web Worker from `Atomics.wait` costs far more
//! than a region's work (2 threads generated no faster than 1). Like ggml's
//! threads, a team's helpers spin for the whole forward pass: a region is
//! published by bumping an epoch counter, every member takes indices from a
//! shared counter, and the caller spins until all helpers have finished.

#![cfg_attr(
    not(all(target_arch = "wasm32", target_feature = "atomics")),
    allow(dead_code)
)]

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

    /// A helper thread's body: runs every region until `finish`.
    pub fn help(&self) {
        // No region is published before every helper has joined, so epoch 0
        // is the one this helper has seen.
        let mut seen = 0;
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
                std::hint::spin_loop();
            };
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
        while self.joined.load(Ordering::Acquire) < self.helpers {
            std::hint::spin_loop();
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
        while self.active.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
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
