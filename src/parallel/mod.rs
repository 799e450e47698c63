//! The worker pool a context computes with. With one thread there is no
//! pool and work runs inline, which is also what the single-thread wasm
//! build gets. Natively each context has a rayon pool of its own, built once;
//! the threaded wasm build (`atomics`) cannot spawn threads itself: its Web
//! Workers are started from JavaScript (wasm-bindgen-rayon's
//! `initThreadPool`) as rayon's global pool, and every context of that wasm
//! instance shares it. Either way a forward pass (`install`) borrows
//! `n_threads - 1` of the pool's threads as a spinning `Team` (see team.rs
//! for why), and its parallel regions go to that team; regions outside a
//! forward pass (quantizing, say) use rayon's parallel iterators.

mod team;

use crate::error::{Error, Result};

enum Pool {
    /// One thread: everything runs on the caller.
    Inline,
    /// A pool of this context's own (native).
    #[cfg_attr(
        all(target_family = "wasm", target_feature = "atomics"),
        allow(dead_code)
    )]
    Own(rayon::ThreadPool),
    /// rayon's global pool, started by JavaScript (threaded wasm).
    #[cfg_attr(
        not(all(target_family = "wasm", target_feature = "atomics")),
        allow(dead_code)
    )]
    Global,
}

pub struct Workers {
    pool: Pool,
    n_threads: usize,
}

/// Threads of the global pool once JavaScript has started it (0 before).
#[cfg(all(target_family = "wasm", target_feature = "atomics"))]
static GLOBAL_POOL_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Records that `initThreadPool` has finished: rayon's global pool runs.
#[cfg(all(target_family = "wasm", target_feature = "atomics"))]
pub fn global_pool_started() {
    GLOBAL_POOL_THREADS.store(
        rayon::current_num_threads(),
        std::sync::atomic::Ordering::SeqCst,
    );
}

/// Threads of the pool JavaScript started (threaded wasm); 0 elsewhere.
pub fn global_pool_threads() -> usize {
    #[cfg(all(target_family = "wasm", target_feature = "atomics"))]
    return GLOBAL_POOL_THREADS.load(std::sync::atomic::Ordering::SeqCst);
    #[cfg(not(all(target_family = "wasm", target_feature = "atomics")))]
    0
}

thread_local! {
    /// The team of the `install` running on this thread.
    static CURRENT_TEAM: std::cell::Cell<*const team::Team> =
        const { std::cell::Cell::new(std::ptr::null()) };
}

/// Makes a team this thread's current one until dropped, then restores the
/// one before it.
struct CurrentTeam(*const team::Team);

impl CurrentTeam {
    fn set(team: &team::Team) -> CurrentTeam {
        CurrentTeam(CURRENT_TEAM.with(|t| t.replace(team as *const team::Team)))
    }

    /// Whether this thread leads a team (is inside an `install`).
    fn running() -> bool {
        CURRENT_TEAM.with(|t| !t.get().is_null())
    }
}

impl Drop for CurrentTeam {
    fn drop(&mut self) {
        CURRENT_TEAM.with(|t| t.set(self.0));
    }
}

/// Runs `f` as `team`'s lead: its regions go to the team.
fn lead_team<R>(team: &team::Team, f: impl FnOnce() -> R) -> R {
    // Both end the helpers' spinning and restore the thread's previous team
    // even if `f` unwinds, so the helpers return and the pool is free again.
    let _stop = team.stop_on_drop();
    let _current = CurrentTeam::set(team);
    f()
}

/// `count` helpers of `team`, each on a thread of the pool: one here, the
/// rest in a `join` that the pool's other threads steal.
fn help_team(team: &team::Team, count: usize) {
    match count {
        0 => {}
        1 => team.help(),
        _ => {
            rayon::join(|| team.help(), || help_team(team, count - 1));
        }
    }
}

/// A slice's base pointer handed to the team's threads (each touches only
/// the items whose index it took).
struct SharedMut<T>(*mut T);

// SAFETY: used only for disjoint items of a slice the caller borrows mutably.
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

/// The most worker threads per core a context may ask for.
pub const MAX_THREADS_PER_CORE: usize = 8;

impl Workers {
    pub fn new(n_threads: usize) -> Result<Workers> {
        if n_threads == 0 {
            return Err(Error::InvalidArgument(
                "the number of threads must be at least 1".into(),
            ));
        }
        if n_threads == 1 {
            return Ok(Workers {
                pool: Pool::Inline,
                n_threads,
            });
        }
        Self::with_threads(n_threads)
    }

    #[cfg(all(target_family = "wasm", target_feature = "atomics"))]
    fn with_threads(n_threads: usize) -> Result<Workers> {
        let started = global_pool_threads();
        if started == 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot use {n_threads} threads: the wasm thread pool is not started (initThreadPool)"
            )));
        }
        // The global pool has the size JavaScript gave it; that is what runs.
        Ok(Workers {
            pool: Pool::Global,
            n_threads: started,
        })
    }

    #[cfg(not(all(target_family = "wasm", target_feature = "atomics")))]
    fn with_threads(n_threads: usize) -> Result<Workers> {
        // More threads than cores only make them wait for each other; far
        // more (a typo, a wrapped negative number) would start thousands of
        // OS threads before the first token.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let most = MAX_THREADS_PER_CORE * cores;
        if n_threads > most {
            return Err(Error::InvalidArgument(format!(
                "{n_threads} threads is too many: at most {most} ({MAX_THREADS_PER_CORE} per core, {cores} cores here)"
            )));
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads)
            .thread_name(|i| format!("lamina-worker-{i}"))
            .build()
            .map_err(|e| {
                Error::InvalidArgument(format!("cannot start {n_threads} worker threads: {e}"))
            })?;
        Ok(Workers {
            pool: Pool::Own(pool),
            n_threads,
        })
    }

    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Runs `f` as the lead of a `Team` of `n_threads - 1` threads of the
    /// pool spinning beside it (inline without a pool); the parallel regions
    /// of `f` go to the team. Natively the lead is a thread of the pool, in
    /// threaded wasm the calling thread. A whole forward pass goes
    /// through here once, so its ~150 regions per token start at once on
    /// threads that are already awake instead of waking sleeping ones.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        // A nested call (from a team's lead or from inside a region) runs
        // as it is: the pool's threads are already the running team's.
        let nested = CurrentTeam::running() || team::in_region();
        if matches!(self.pool, Pool::Inline) || nested {
            return f();
        }
        let team = team::Team::new(self.n_threads - 1);
        match &self.pool {
            // `join` keeps its jobs on the stack (a spawn would allocate one
            // per forward pass): the lead on this worker, the helpers stolen
            // by the pool's others.
            Pool::Own(pool) => pool.install(|| {
                rayon::join(|| lead_team(&team, f), || help_team(&team, team.helpers())).0
            }),
            // The caller leads, so a browser's thread that called in stays
            // the one computing; the global pool lends the helpers.
            Pool::Global | Pool::Inline => rayon::in_place_scope(|s| {
                for _ in 0..team.helpers() {
                    s.spawn(|_| team.help());
                }
                lead_team(&team, f)
            }),
        }
    }

    /// Whether regions go to `on_team`: inside `install`, and always for the
    /// global pool (whose regions outside a forward pass run inline).
    fn use_team(&self) -> bool {
        matches!(self.pool, Pool::Global) || CurrentTeam::running()
    }

    /// `job(0..n)` on the team of the running `install`, or inline outside one.
    fn on_team(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        let team = CURRENT_TEAM.with(|t| t.get());
        // SAFETY: set only while `install` keeps the team alive (`CurrentTeam`).
        match unsafe { team.as_ref() } {
            Some(team) => team.run(n, job),
            None => (0..n).for_each(job),
        }
    }

    /// Runs `f` where this context's parallel iterators reach its workers.
    fn in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Pool::Own(pool) => pool.install(f),
            Pool::Global | Pool::Inline => f(),
        }
    }

    /// `f(0), f(1), ..., f(n - 1)`, spread over the workers, results in order.
    pub fn map<T: Send>(&self, n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
        if matches!(self.pool, Pool::Inline) || n <= 1 {
            return (0..n).map(f).collect();
        }
        if self.use_team() {
            let slots: Vec<std::sync::Mutex<Option<T>>> =
                (0..n).map(|_| std::sync::Mutex::new(None)).collect();
            self.on_team(n, &|i| {
                let value = f(i);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
            });
            return slots
                .into_iter()
                .map(|s| {
                    s.into_inner()
                        .unwrap_or_else(|e| e.into_inner())
                        .expect("every index of a region runs")
                })
                .collect();
        }
        self.in_pool(|| {
            use rayon::prelude::*;
            (0..n).into_par_iter().map(f).collect()
        })
    }

    /// `f(i, &mut items[i])` for every item, spread over the workers.
    pub fn for_each_mut<T: Send>(&self, items: &mut [T], f: impl Fn(usize, &mut T) + Sync + Send) {
        if matches!(self.pool, Pool::Inline) || items.len() <= 1 {
            items.iter_mut().enumerate().for_each(|(i, t)| f(i, t));
            return;
        }
        if self.use_team() {
            let base = SharedMut(items.as_mut_ptr());
            self.on_team(items.len(), &|i| {
                // SAFETY: each index is taken by exactly one thread, and
                // `items` outlives the region.
                let item = unsafe { &mut *base.at(i) };
                f(i, item);
            });
            return;
        }
        self.in_pool(|| {
            use rayon::prelude::*;
            items.par_iter_mut().enumerate().for_each(|(i, t)| f(i, t));
        })
    }

    /// `f(i, piece)` for the `chunk`-long pieces of `data` (the last may be
    /// shorter), spread over the workers, allocating nothing.
    pub fn for_each_chunk_mut<T: Send>(
        &self,
        data: &mut [T],
        chunk: usize,
        f: impl Fn(usize, &mut [T]) + Sync + Send,
    ) {
        let chunk = chunk.max(1);
        let n = data.len().div_ceil(chunk);
        if matches!(self.pool, Pool::Inline) || n <= 1 {
            data.chunks_mut(chunk)
                .enumerate()
                .for_each(|(i, c)| f(i, c));
            return;
        }
        if self.use_team() {
            let len = data.len();
            let base = SharedMut(data.as_mut_ptr());
            self.on_team(n, &|i| {
                let start = i * chunk;
                let end = (start + chunk).min(len);
                // SAFETY: the pieces [start, end) of distinct indices are
                // disjoint and inside `data`, which is borrowed mutably for
                // the whole region; each index is taken by one thread.
                let piece = unsafe { std::slice::from_raw_parts_mut(base.at(start), end - start) };
                f(i, piece);
            });
            return;
        }
        self.in_pool(|| {
            use rayon::prelude::*;
            data.par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(i, c)| f(i, c));
        })
    }

    /// `f(i, a_piece, b_piece)` for the `chunk_a`-long pieces of `a` paired
    /// with the `chunk_b`-long pieces of `b` (as many of each: the shorter
    /// list decides), spread over the workers, allocating nothing.
    pub fn for_each_chunk_pair_mut<T: Send, U: Send>(
        &self,
        a: &mut [T],
        chunk_a: usize,
        b: &mut [U],
        chunk_b: usize,
        f: impl Fn(usize, &mut [T], &mut [U]) + Sync + Send,
    ) {
        let (chunk_a, chunk_b) = (chunk_a.max(1), chunk_b.max(1));
        let n = (a.len() / chunk_a).min(b.len() / chunk_b);
        if matches!(self.pool, Pool::Inline) || n <= 1 {
            a.chunks_exact_mut(chunk_a)
                .zip(b.chunks_exact_mut(chunk_b))
                .enumerate()
                .for_each(|(i, (x, y))| f(i, x, y));
            return;
        }
        if self.use_team() {
            let (base_a, base_b) = (SharedMut(a.as_mut_ptr()), SharedMut(b.as_mut_ptr()));
            self.on_team(n, &|i| {
                // SAFETY: piece i of each slice is [i * chunk, (i + 1) *
                // chunk), inside it (i < n) and disjoint from the other
                // indices' pieces; both slices are borrowed mutably for the
                // whole region, and each index is taken by one thread.
                let (x, y) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(base_a.at(i * chunk_a), chunk_a),
                        std::slice::from_raw_parts_mut(base_b.at(i * chunk_b), chunk_b),
                    )
                };
                f(i, x, y);
            });
            return;
        }
        self.in_pool(|| {
            use rayon::prelude::*;
            a.par_chunks_exact_mut(chunk_a)
                .zip(b.par_chunks_exact_mut(chunk_b))
                .enumerate()
                .for_each(|(i, (x, y))| f(i, x, y));
        })
    }

    /// How many pieces to cut `n` units of work into: a few per thread, so an
    /// unlucky slow piece does not leave the others idle.
    pub fn pieces(&self, n: usize) -> usize {
        if self.n_threads == 1 {
            1
        } else {
            n.min(self.n_threads * 4).max(1)
        }
    }
}

#[cfg(all(test, not(target_family = "wasm")))]
mod tests {
    use super::*;

    #[test]
    fn regions_in_and_out_of_a_forward_pass_cover_every_item() {
        for threads in [1, 2, 3] {
            let workers = Workers::new(threads).unwrap();
            let check = |w: &Workers| {
                assert_eq!(
                    w.map(50, |i| i * i),
                    (0..50).map(|i| i * i).collect::<Vec<_>>()
                );
                let mut items = vec![0usize; 37];
                w.for_each_mut(&mut items, |i, x| *x = i + 1);
                assert!(items.iter().enumerate().all(|(i, &x)| x == i + 1));
                let mut data = vec![0usize; 100];
                w.for_each_chunk_mut(&mut data, 7, |i, piece| piece.fill(i));
                assert!(data.iter().enumerate().all(|(j, &x)| x == j / 7));
            };
            check(&workers);
            let sum = workers.install(|| {
                check(&workers);
                // A nested pass runs on the same team instead of waiting
                // for threads that are busy being it.
                workers.install(|| check(&workers));
                workers
                    .map(10, |i| workers.install(|| i))
                    .iter()
                    .sum::<usize>()
            });
            assert_eq!(sum, 45, "{threads} threads");
        }
    }
}
