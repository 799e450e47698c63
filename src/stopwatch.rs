//! Elapsed time for timings and benchmarks. `std::time::Instant` panics on
//! wasm32-unknown-unknown, so there the clock is JavaScript's `Date.now()`
//! (milliseconds; enough for per-completion timings).

#[derive(Clone, Copy, Debug)]
pub struct Stopwatch {
    #[cfg(not(target_family = "wasm"))]
    start: std::time::Instant,
    #[cfg(target_family = "wasm")]
    start_ms: f64,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch {
            #[cfg(not(target_family = "wasm"))]
            start: std::time::Instant::now(),
            #[cfg(target_family = "wasm")]
            start_ms: js_sys::Date::now(),
        }
    }

    pub fn elapsed_ms(&self) -> f64 {
        #[cfg(not(target_family = "wasm"))]
        {
            self.start.elapsed().as_secs_f64() * 1e3
        }
        #[cfg(target_family = "wasm")]
        {
            js_sys::Date::now() - self.start_ms
        }
    }
}
