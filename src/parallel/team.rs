//! A team of threads that spin between parallel regions. A forward pass has
//! ~150 parallel regions per token, many of them a few microseconds long;
//! rayon's idle workers go to sleep after a little while of looking for
//! work, and waking one (a futex natively, `Atomics.wait` in a browser,
//! where 2 threads generated no faster than 1) costs as much as a small
//! region's work. Like ggml's threads, a team's helpers spin for the whole
//! forward pass.
//!
//! A region is one atomic word: its number of indices and how many have
//! been taken. Every member takes indices with one `fetch_add` on it, and
//! the lead waits only until every index it or a helper took has finished,
//! never for a helper to show up: a helper the OS has descheduled (in a
//! browser, Chromium's own threads share the cores) misses the region
//! instead of holding up the lead until it runs again.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// A region's work: called once per index.
type Job<'a> = &'a (dyn Fn(usize) + Sync);

pub struct Team {
    helpers: usize,
    /// The current region: its number of indices in the high 32 bits, the
    /// count taken so far in the low 32 (which runs past the number by at
    /// most one per member: each member's last take finds none left).
    region: AtomicU64,
    /// Points to the current region's job (a reference on the lead's
    /// stack); read only by a member holding one of its indices, which
    /// keeps the region, and so the reference, alive.
    job: AtomicPtr<Job<'static>>,
    /// Indices of the current region finished (each member adds its count
    /// when it finds none left); on a cache line of its own, which the lead
    /// polls while the others take indices from `region`.
    done: CacheLine<AtomicUsize>,
    stop: AtomicBool,
}

#[repr(align(64))]
struct CacheLine<T>(T);

thread_local! {
    /// Whether this thread is inside a region (a nested region runs inline).
    static IN_REGION: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running a region's job.
pub fn in_region() -> bool {
    IN_REGION.with(|r| r.get())
}

/// The most indices a region has: its count of taken indices runs past the
/// number by one per member without reaching the high half of the word.
const MAX_INDICES: usize = 1 << 31;

fn indices_in(region: u64) -> u64 {
    region >> 32
}

fn taken_in(region: u64) -> u64 {
    region & u64::from(u32::MAX)
}

impl Team {
    /// A team for the caller plus `helpers` threads that will call `help`.
    pub fn new(helpers: usize) -> Team {
        Team {
            helpers,
            region: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            done: CacheLine(AtomicUsize::new(0)),
            stop: AtomicBool::new(false),
        }
    }

    pub fn helpers(&self) -> usize {
        self.helpers
    }

    /// A helper thread's body: helps with every region it finds open until
    /// `finish`. (A helper that starts late joins whatever region is open.)
    pub fn help(&self) {
        let mut spins = 0;
        loop {
            let region = self.region.load(Ordering::Relaxed);
            if taken_in(region) < indices_in(region) {
                spins = 0;
                self.work();
                continue;
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            spins = relax(spins);
        }
    }

    /// Takes indices of the open region until none are left, then counts
    /// those it ran as finished. (A member's takes all fall in one region:
    /// the next is not published before this one's indices are all counted
    /// finished, this member's among them.)
    fn work(&self) {
        // Counts also the index whose job panics, so the lead is not left
        // waiting for it.
        let mut finished = Finished {
            done: &self.done.0,
            count: 0,
        };
        IN_REGION.with(|r| r.set(true));
        loop {
            let region = self.region.fetch_add(1, Ordering::Acquire);
            if taken_in(region) >= indices_in(region) {
                break;
            }
            finished.count += 1;
            // SAFETY: the index just taken is not finished, so the lead is
            // still in `run` for this region: the pointer, stored before the
            // region was published (the Release store this Acquire read
            // from), points to its live job.
            let job = unsafe { *self.job.load(Ordering::Relaxed) };
            job(taken_in(region) as usize);
        }
        IN_REGION.with(|r| r.set(false));
    }

    /// `job(0..n)` over the caller and the helpers; returns when all are done.
    pub fn run(&self, n: usize, job: Job<'_>) {
        if n <= 1 || self.helpers == 0 || in_region() || n > MAX_INDICES {
            (0..n).for_each(job);
            return;
        }
        // Only the lead writes `job` or a new region, and the last region
        // is over: every index was taken and has finished.
        self.job.store(
            (&job as *const Job<'_>).cast_mut().cast(),
            Ordering::Relaxed,
        );
        self.done.0.store(0, Ordering::Relaxed);
        self.region.store((n as u64) << 32, Ordering::Release);
        let _close = CloseOnUnwind { team: self, n };
        self.work();
        self.wait_until_done(n);
    }

    fn wait_until_done(&self, n: usize) {
        let mut spins = 0;
        while self.done.0.load(Ordering::Acquire) < n {
            spins = relax(spins);
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

/// Adds the indices a member took to `done` when it leaves a region.
struct Finished<'a> {
    done: &'a AtomicUsize,
    count: usize,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        if self.count > 0 {
            self.done.fetch_add(self.count, Ordering::Release);
        }
    }
}

/// If the lead's job panics, closes the region and waits for the indices
/// helpers hold before the job's reference goes away with the unwinding.
struct CloseOnUnwind<'a> {
    team: &'a Team,
    n: usize,
}

impl Drop for CloseOnUnwind<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // Marks every index taken; those that were not are never run.
        let before = self
            .team
            .region
            .swap((self.n as u64) << 32 | self.n as u64, Ordering::Acquire);
        let taken = (taken_in(before) as usize).min(self.n);
        self.team.wait_until_done(taken);
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

    /// Helpers that never arrive (descheduled, or their threads busy
    /// elsewhere) leave the lead to run the whole region itself.
    #[test]
    fn the_lead_never_waits_for_absent_helpers() {
        let team = Team::new(2);
        let sum = AtomicUsize::new(0);
        for _ in 0..3 {
            team.run(100, &|i| {
                sum.fetch_add(i, Ordering::Relaxed);
            });
        }
        assert_eq!(sum.load(Ordering::Relaxed), 3 * 4950);
    }

    /// A job that panics, on the lead or on a helper, ends in a panic from
    /// the scope, not in a lead spinning forever.
    #[test]
    fn a_panicking_job_ends_the_regions_without_hanging() {
        let team = Team::new(1);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            std::thread::scope(|s| {
                s.spawn(|| team.help());
                let _stop = team.stop_on_drop();
                for _ in 0..100 {
                    team.run(64, &|i| assert_ne!(i, 0, "index 0 fails"));
                }
            })
        }));
        assert!(outcome.is_err());
    }
}
