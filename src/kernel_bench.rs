//! Kernel micro-benchmarks (`lamina bench-kernels`): how fast each variant's
//! kernels stream weights, in GB/s of weight bytes, on matrices the size of a
//! small model's layers. Speed is measured here, never asserted in tests.

use std::time::{Duration, Instant};

/// Default measurement time per kernel.
pub const DEFAULT_TIME: Duration = Duration::from_millis(300);

use half::f16;

use crate::backend::cpu::kernels::VecDot4Fn;
use crate::backend::cpu::repack::{RepackLayout, RepackedQ4_0};
use crate::backend::cpu::{CpuFeatures, CpuVariant, Kernels};
use crate::tensor::blocks::*;
use crate::tensor::quants::{q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, q8_1, q8_k};

/// One measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KernelResult {
    pub kernel: &'static str,
    pub variant: &'static str,
    /// Weight bytes read per second, in GB/s.
    pub gb_per_s: f64,
    /// Multiply-adds per second, in G/s.
    pub gops: f64,
}

/// A deterministic pseudo-random stream (SplitMix64) for benchmark data.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z >> 40) as f32 / 16777216.0 - 0.5) * 2.0
    }

    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn blocks<B: Block>(x: &[f32], f: fn(&[f32], &mut [B])) -> Vec<B> {
    let mut out = vec![B::zeroed(); x.len() / B::ELEMENTS];
    f(x, &mut out);
    out
}

/// How long to measure each kernel.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// Repeat for at least this long (wall-clock speed).
    Time(Duration),
    /// Exactly this many passes, no warm-up (for counting instructions under
    /// an emulator, where time means nothing).
    Passes(u32),
}

/// Runs `run` (one pass over the matrix) as the budget says; seconds per pass.
fn time_rows(budget: Budget, mut run: impl FnMut() -> f32) -> f64 {
    let mut sink = 0.0f32;
    let secs = match budget {
        // The fastest pass: on a shared machine other work only ever adds
        // time, so the minimum is the steadiest estimate.
        Budget::Time(min_time) => {
            sink += run(); // warm up
            let begin = Instant::now();
            let (mut best, mut passes) = (f64::INFINITY, 0);
            while begin.elapsed() < min_time || passes < 3 {
                let pass = Instant::now();
                sink += run();
                best = best.min(pass.elapsed().as_secs_f64());
                passes += 1;
            }
            best
        }
        Budget::Passes(n) => {
            let begin = Instant::now();
            for _ in 0..n {
                sink += run();
            }
            begin.elapsed().as_secs_f64() / n.max(1) as f64
        }
    };
    std::hint::black_box(sink);
    secs
}

/// Rows of `cols` weights times one activation row, like a GEMV.
#[allow(clippy::too_many_arguments)] // the kernel, its operands and the budget
fn bench_dot<X: Block, Y: Block>(
    filter: Option<&str>,
    name: &'static str,
    variant: CpuVariant,
    dot: fn(&[X], &[Y]) -> f32,
    w: &[X],
    x: &[Y],
    cols: usize,
    min_time: Budget,
) -> Option<KernelResult> {
    if !filter.is_none_or(|f| name.contains(f)) {
        return None;
    }
    Some(bench_rows(name, variant, w, cols, 1, min_time, |row| {
        dot(row, x)
    }))
}

/// Rows of `cols` weights times four activation rows with a four-row kernel,
/// as a prompt's product runs them.
#[allow(clippy::too_many_arguments)] // the kernel, its operands and the budget
fn bench_dot4<X: Block, Y: Block>(
    filter: Option<&str>,
    name: &'static str,
    variant: CpuVariant,
    dot4: Option<VecDot4Fn<X, Y>>,
    w: &[X],
    x: &[Y],
    cols: usize,
    min_time: Budget,
) -> Option<KernelResult> {
    let dot4 = dot4?;
    if !filter.is_none_or(|f| name.contains(f)) {
        return None;
    }
    Some(bench_rows(name, variant, w, cols, 4, min_time, |row| {
        dot4(row, [x, x, x, x])[3]
    }))
}

/// Times `row_product` over every weight row of `w` (`cols` values each)
/// meeting `acts` activation rows: GB/s of weights and G multiply-adds/s.
fn bench_rows<X: Block>(
    name: &'static str,
    variant: CpuVariant,
    w: &[X],
    cols: usize,
    acts: usize,
    min_time: Budget,
    row_product: impl Fn(&[X]) -> f32,
) -> KernelResult {
    let per_row = cols / X::ELEMENTS;
    let rows = w.len() / per_row;
    let secs = time_rows(min_time, || w.chunks_exact(per_row).map(&row_product).sum());
    KernelResult {
        kernel: name,
        variant: variant.name(),
        gb_per_s: std::mem::size_of_val(w) as f64 / secs / 1e9,
        gops: (acts * rows * cols) as f64 / secs / 1e9,
    }
}

/// Benchmarks every kernel (or those whose name contains `filter`) of the given
/// variants on a `rows` x `cols` weight matrix (cols a multiple of 256).
pub fn run(
    features: &CpuFeatures,
    variants: &[CpuVariant],
    filter: Option<&str>,
    rows: usize,
    cols: usize,
    budget: Budget,
) -> Vec<KernelResult> {
    let mut noise = Noise(42);
    let wf = noise.values(rows * cols);
    let xf = noise.values(cols);
    let w4_0 = blocks(&wf, q4_0::quantize);
    let w4_1 = blocks(&wf, q4_1::quantize);
    let w5_0 = blocks(&wf, q5_0::quantize);
    let w5_1 = blocks(&wf, q5_1::quantize);
    let w8_0 = blocks(&wf, q8_0::quantize);
    let w4k = blocks(&wf, q4_k::quantize);
    let w5k = blocks(&wf, q5_k::quantize);
    let w6k = blocks(&wf, q6_k::quantize);
    let wf16: Vec<f16> = wf.iter().map(|&v| f16::from_f32(v)).collect();
    let x8_0 = blocks(&xf, q8_0::quantize);
    let x8_1 = blocks(&xf, q8_1::quantize);
    let x8k = blocks(&xf, q8_k::quantize);
    let xf16: Vec<f16> = xf.iter().map(|&v| f16::from_f32(v)).collect();

    let mut results = Vec::new();
    for &variant in variants {
        if !variant.supported(features) {
            continue;
        }
        let Ok(supported) = crate::backend::cpu::SupportedVariant::check(variant) else {
            continue;
        };
        let k = Kernels::for_variant(supported);
        let t = budget;
        // Kernels the filter leaves out are not run at all (so instruction
        // counts under qemu cover only the kernel asked for).
        let wanted = |name: &str| filter.is_none_or(|f| name.contains(f));
        results.extend(bench_dot(
            filter,
            "q4_0·q8_0",
            variant,
            k.vec_dot_q4_0_q8_0,
            &w4_0,
            &x8_0,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q4_1·q8_1",
            variant,
            k.vec_dot_q4_1_q8_1,
            &w4_1,
            &x8_1,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q5_0·q8_0",
            variant,
            k.vec_dot_q5_0_q8_0,
            &w5_0,
            &x8_0,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q5_1·q8_1",
            variant,
            k.vec_dot_q5_1_q8_1,
            &w5_1,
            &x8_1,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q8_0·q8_0",
            variant,
            k.vec_dot_q8_0_q8_0,
            &w8_0,
            &x8_0,
            cols,
            t,
        ));
        results.extend(bench_dot4(
            filter,
            "dot4 q4_1·q8_1",
            variant,
            k.vec_dot4_q4_1_q8_1,
            &w4_1,
            &x8_1,
            cols,
            t,
        ));
        results.extend(bench_dot4(
            filter,
            "dot4 q5_0·q8_0",
            variant,
            k.vec_dot4_q5_0_q8_0,
            &w5_0,
            &x8_0,
            cols,
            t,
        ));
        results.extend(bench_dot4(
            filter,
            "dot4 q8_0·q8_0",
            variant,
            k.vec_dot4_q8_0_q8_0,
            &w8_0,
            &x8_0,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q4_K·q8_K",
            variant,
            k.vec_dot_q4_k_q8_k,
            &w4k,
            &x8k,
            cols,
            t,
        ));
        results.extend(bench_dot4(
            filter,
            "dot4 q4_K·q8_K",
            variant,
            k.vec_dot4_q4_k_q8_k,
            &w4k,
            &x8k,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q5_K·q8_K",
            variant,
            k.vec_dot_q5_k_q8_k,
            &w5k,
            &x8k,
            cols,
            t,
        ));
        results.extend(bench_dot(
            filter,
            "q6_K·q8_K",
            variant,
            k.vec_dot_q6_k_q8_k,
            &w6k,
            &x8k,
            cols,
            t,
        ));
        results.extend(bench_dot4(
            filter,
            "dot4 q6_K·q8_K",
            variant,
            k.vec_dot4_q6_k_q8_k,
            &w6k,
            &x8k,
            cols,
            t,
        ));
        results.extend(bench_plain(
            filter,
            "f16·f16",
            variant,
            k.vec_dot_f16,
            &wf16,
            &xf16,
            cols,
            t,
        ));
        results.extend(bench_plain(
            filter,
            "f32·f32",
            variant,
            k.vec_dot_f32,
            &wf,
            &xf,
            cols,
            t,
        ));
        // Repacked Q4_0: GEMV (one activation row) and GEMM (8 rows).
        for layout in [RepackLayout::X4I4, RepackLayout::X4I8, RepackLayout::X8I8] {
            if k.repack != Some(layout) || !(wanted("gemv q4_0") || wanted("gemm8 q4_0")) {
                continue;
            }
            let Ok(packed) = RepackedQ4_0::new(&w4_0, rows, cols, layout) else {
                continue;
            };
            if wanted("gemv q4_0") {
                let mut out = vec![0f32; rows];
                let secs = time_rows(t, || {
                    let _ = packed.gemv(&k, &x8_0, &mut out);
                    out[0]
                });
                let name = match layout {
                    RepackLayout::X4I4 => "gemv q4_0 4x4",
                    RepackLayout::X4I8 => "gemv q4_0 4x8",
                    RepackLayout::X8I8 => "gemv q4_0 8x8",
                };
                results.push(KernelResult {
                    kernel: name,
                    variant: variant.name(),
                    gb_per_s: std::mem::size_of_val(&w4_0[..]) as f64 / secs / 1e9,
                    gops: (rows * cols) as f64 / secs / 1e9,
                });
            }
            if !wanted("gemm8 q4_0") {
                continue;
            }
            let n = 8;
            let xs = blocks(&noise.values(n * cols), q8_0::quantize);
            let mut out = vec![0f32; n * rows];
            let secs = time_rows(t, || {
                let _ = packed.gemm(&k, &xs, n, &mut out);
                out[0]
            });
            results.push(KernelResult {
                kernel: match layout {
                    RepackLayout::X4I4 => "gemm8 q4_0 4x4",
                    RepackLayout::X4I8 => "gemm8 q4_0 4x8",
                    RepackLayout::X8I8 => "gemm8 q4_0 8x8",
                },
                variant: variant.name(),
                gb_per_s: std::mem::size_of_val(&w4_0[..]) as f64 / secs / 1e9,
                gops: (n * rows * cols) as f64 / secs / 1e9,
            });
        }
        // Activation quantization: bytes of f32 read.
        if !wanted("quantize q8_0") {
            continue;
        }
        let mut q = vec![BlockQ8_0::zeroed(); cols / QK];
        let secs = time_rows(t, || {
            for _ in 0..rows / 16 {
                (k.quantize_q8_0)(&xf, &mut q);
            }
            q[0].qs[0] as f32
        });
        let n = (rows / 16 * cols) as f64;
        results.push(KernelResult {
            kernel: "quantize q8_0",
            variant: variant.name(),
            gb_per_s: n * 4.0 / secs / 1e9,
            gops: n / secs / 1e9,
        });
    }
    results
}

fn bench_plain<T: Copy>(
    filter: Option<&str>,
    name: &'static str,
    variant: CpuVariant,
    dot: fn(&[T], &[T]) -> f32,
    w: &[T],
    x: &[T],
    cols: usize,
    min_time: Budget,
) -> Option<KernelResult> {
    if !filter.is_none_or(|f| name.contains(f)) {
        return None;
    }
    let rows = w.len() / cols;
    let secs = time_rows(min_time, || {
        let mut s = 0.0;
        for r in 0..rows {
            s += dot(&w[r * cols..(r + 1) * cols], x);
        }
        s
    });
    Some(KernelResult {
        kernel: name,
        variant: variant.name(),
        gb_per_s: std::mem::size_of_val(w) as f64 / secs / 1e9,
        gops: (rows * cols) as f64 / secs / 1e9,
    })
}
