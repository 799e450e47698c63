//! The worker pool a context computes with: one rayon pool per context, built
//! once and reused for every matrix product and attention pass. With one
//! thread there is no pool at all and work runs inline, which is also what a
//! wasm build without threads gets.

use crate::error::{Error, Result};

pub struct Workers {
    pool: Option<rayon::ThreadPool>,
    n_threads: usize,
}

impl Workers {
    pub fn new(n_threads: usize) -> Result<Workers> {
        if n_threads == 0 {
            return Err(Error::InvalidArgument(
                "the number of threads must be at least 1".into(),
            ));
        }
        let pool = if n_threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n_threads)
                    .thread_name(|i| format!("lamina-worker-{i}"))
                    .build()
                    .map_err(|e| {
                        Error::InvalidArgument(format!(
                            "cannot start {n_threads} worker threads: {e}"
                        ))
                    })?,
            )
        } else {
            None
        };
        Ok(Workers { pool, n_threads })
    }

    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Runs `f` on a worker of the pool (inline without one). A whole forward
    /// pass goes through here once: its many parallel regions then start
    /// from inside the pool, where idle workers are still spinning and take
    /// the work at once, instead of each region waking them from outside.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// `f(0), f(1), ..., f(n - 1)`, spread over the workers, results in order.
    pub fn map<T: Send>(&self, n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
        match &self.pool {
            Some(pool) if n > 1 => pool.install(|| {
                use rayon::prelude::*;
                (0..n).into_par_iter().map(f).collect()
            }),
            _ => (0..n).map(f).collect(),
        }
    }

    /// `f(i, &mut items[i])` for every item, spread over the workers.
    pub fn for_each_mut<T: Send>(&self, items: &mut [T], f: impl Fn(usize, &mut T) + Sync + Send) {
        match &self.pool {
            Some(pool) if items.len() > 1 => pool.install(|| {
                use rayon::prelude::*;
                items.par_iter_mut().enumerate().for_each(|(i, t)| f(i, t));
            }),
            _ => items.iter_mut().enumerate().for_each(|(i, t)| f(i, t)),
        }
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
