//! Q4_0 weights interleaved at load for fast matrix-vector and matrix-matrix
//! products, as llama.cpp's "extra buffer type" does: blocks of 4 or 8 rows are
//! stored together so one SIMD load feeds several output rows.
//!
//! Layouts (rows per group, bytes taken from each row in turn):
//! - `X4I4`: 4 rows, 4 bytes at a time: one SDOT lane per row (every aarch64
//!   variant with dotprod, SIMD128). Each nibble is stored XOR 8
//!   (`X4I4_FLIP`): q − 8 in four-bit two's complement, so a shift or a mask
//!   alone makes 16·(q − 8) as an i8.
//! - `X4I8`: 4 rows, 8 bytes at a time (SMMLA takes 8-byte rows; no variant
//!   selects it, see `RepackLayout::for_variant`).
//! - `X8I8`: 8 rows, 8 bytes at a time: 32 bytes feed 4 rows (AVX2 and the
//!   other x86 variants, relaxed SIMD; on aarch64 wherever i8mm is there,
//!   and SVE without dotprod). On aarch64 its nibbles are stored XOR 8 as `X4I4`'s
//!   (`X8I8_FLIP`): its kernels there all unpack 16·(q − 8); x86's
//!   subtract 8 through the activations' sums and keep Q4_0's nibbles, as
//!   relaxed SIMD's do.
//!
//! The other layouts keep the nibbles as in Q4_0 (value + 8). Rows that do
//! not fill a last group stay plain Q4_0 and go through `vec_dot`. Every layout's scalar kernel sums
//! each block exactly and scales it in `vec_dot`'s order, so repacked products
//! equal row-by-row `vec_dot` bit for bit.

use half::f16;

use super::act_rows::{interleave_rows, ActRows, BlockQ8_0x2, BlockQ8_0x4};
use super::features::{CpuFeatures, Feature};
use super::kernels::{GemmFn, GemmSumsFn, GemvFn, InterleavedGemmFn, Kernels};
use super::repack_q5_0::activation_sums;
use super::touch_ahead::touch_ahead;
use super::variant::CpuVariant;
use super::widen::f16_to_f32;
use crate::error::{Error, Result};
use crate::parallel::Workers;
use crate::tensor::blocks::{BlockQ4_0, BlockQ8_0, QK};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepackLayout {
    X4I4,
    X4I8,
    X8I8,
}

impl RepackLayout {
    pub fn rows(self) -> usize {
        match self {
            RepackLayout::X4I4 | RepackLayout::X4I8 => 4,
            RepackLayout::X8I8 => 8,
        }
    }

    pub fn interleave(self) -> usize {
        match self {
            RepackLayout::X4I4 => 4,
            RepackLayout::X4I8 | RepackLayout::X8I8 => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RepackLayout::X4I4 => "4x4",
            RepackLayout::X4I8 => "4x8",
            RepackLayout::X8I8 => "8x8",
        }
    }

    /// The layout a variant accelerates: 8x8 for AVX2 (as llama.cpp), for
    /// relaxed SIMD (a 16-byte load of two rows meets eight activation
    /// bytes in both halves of a vector, as Q4_1's tile has it) and
    /// wherever i8mm is there (NEON and SVE at every width: its 16-byte
    /// loads hold eight bytes of two rows, SMMLA's operand, and its SDOT GEMV
    /// runs as few instructions per token as the 4x4 one); 4x4 where SDOT is
    /// there without i8mm (SDOT by element, `neon_q4_0`) and for SIMD128
    /// (its i16 products take four bytes of each row per load);
    /// else the SVE 8x8 kernel where vectors hold 256 bits or more (A64FX).
    /// 4x8 serves only callers that name it (`RepackedQ4_0::new`, the kernel
    /// bench).
    pub fn for_variant(variant: CpuVariant, features: &CpuFeatures) -> Option<RepackLayout> {
        let has = |f| features.has(f);
        match variant {
            CpuVariant::Avx2 | CpuVariant::AvxVnni | CpuVariant::Avx512 => Some(RepackLayout::X8I8),
            CpuVariant::NeonI8mm => Some(RepackLayout::X8I8),
            CpuVariant::Sve if has(Feature::I8mm) => Some(RepackLayout::X8I8),
            CpuVariant::Sve if has(Feature::Dotprod) => Some(RepackLayout::X4I4),
            CpuVariant::Sve if features.sve_bytes >= 32 => Some(RepackLayout::X8I8),
            CpuVariant::NeonDotprod | CpuVariant::Simd128 => Some(RepackLayout::X4I4),
            CpuVariant::RelaxedSimd => Some(RepackLayout::X8I8),
            CpuVariant::Sve | CpuVariant::Scalar | CpuVariant::Neon => None,
        }
    }
}

/// One column block of 4 rows: their scales, then their quants interleaved.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_0x4 {
    pub d: [f16; 4],
    pub qs: [u8; 64],
}

/// One column block of 8 rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_0x8 {
    pub d: [f16; 8],
    pub qs: [u8; 128],
}

const _: () = assert!(std::mem::size_of::<BlockQ4_0x4>() == 72);
const _: () = assert!(std::mem::size_of::<BlockQ4_0x8>() == 144);

/// What the `X4I4` layout XORs each byte with: bit 3 of both nibbles.
pub const X4I4_FLIP: u8 = 0x88;

/// What the `X8I8` layout XORs each byte with in this build: as `X4I4` on
/// aarch64, whose kernels then save one XOR per load; nothing elsewhere.
pub const X8I8_FLIP: u8 = if cfg!(target_arch = "aarch64") {
    0x88
} else {
    0
};

/// Interleaves the blocks of `R` rows at one column block.
fn interleave<const R: usize, const Q: usize>(
    rows: [&BlockQ4_0; R],
    step: usize,
) -> ([f16; R], [u8; Q]) {
    let mut d = [f16::ZERO; R];
    let mut qs = [0u8; Q];
    for (r, b) in rows.iter().enumerate() {
        d[r] = b.d;
    }
    let mut out = 0;
    for k in 0..16 / step {
        for b in rows.iter() {
            qs[out..out + step].copy_from_slice(&b.qs[k * step..(k + 1) * step]);
            out += step;
        }
    }
    (d, qs)
}

/// How a product takes its activation rows (`RepackedQ4_0::act_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActLayout {
    /// As quantized, row after row.
    Rows,
    /// Also in pairs (`act_rows::BlockQ8_0x2`): `product_rows_pairs`.
    Pairs,
    /// Also in quads (`act_rows::BlockQ8_0x4`): `product_rows_quads`.
    Quads,
}

#[derive(Clone, Debug)]
enum Groups {
    X4(Vec<BlockQ4_0x4>),
    X8(Vec<BlockQ4_0x8>),
}

/// A Q4_0 weight matrix in a repacked layout.
#[derive(Clone, Debug)]
pub struct RepackedQ4_0 {
    layout: RepackLayout,
    rows: usize,
    cols: usize,
    groups: Groups,
    /// Rows past the last whole group, as plain Q4_0.
    tail: Vec<BlockQ4_0>,
}

impl RepackedQ4_0 {
    /// Repacks `rows` rows of `cols` values (`cols` a multiple of 32).
    pub fn new(
        weights: &[BlockQ4_0],
        rows: usize,
        cols: usize,
        layout: RepackLayout,
    ) -> Result<RepackedQ4_0> {
        if cols % QK != 0 || weights.len() != rows * (cols / QK) {
            return Err(Error::InvalidArgument(format!(
                "cannot repack {} Q4_0 blocks as {rows} rows of {cols}",
                weights.len()
            )));
        }
        let per_row = cols / QK;
        let r = layout.rows();
        let whole = rows / r * r;
        let row = |i: usize, b: usize| &weights[i * per_row + b];
        let groups = match layout {
            RepackLayout::X8I8 => Groups::X8(
                (0..whole / 8)
                    .flat_map(|g| (0..per_row).map(move |b| (g, b)))
                    .map(|(g, b)| {
                        let (d, qs) =
                            interleave::<8, 128>(std::array::from_fn(|k| row(8 * g + k, b)), 8);
                        let qs = qs.map(|q| q ^ X8I8_FLIP);
                        BlockQ4_0x8 { d, qs }
                    })
                    .collect(),
            ),
            _ => Groups::X4(
                (0..whole / 4)
                    .flat_map(|g| (0..per_row).map(move |b| (g, b)))
                    .map(|(g, b)| {
                        let (d, qs) = interleave::<4, 64>(
                            std::array::from_fn(|k| row(4 * g + k, b)),
                            layout.interleave(),
                        );
                        let qs = if layout == RepackLayout::X4I4 {
                            qs.map(|q| q ^ X4I4_FLIP)
                        } else {
                            qs
                        };
                        BlockQ4_0x4 { d, qs }
                    })
                    .collect(),
            ),
        };
        Ok(RepackedQ4_0 {
            layout,
            rows,
            cols,
            groups,
            tail: weights[whole * per_row..].to_vec(),
        })
    }

    pub fn layout(&self) -> RepackLayout {
        self.layout
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// out[r] = row r · x, for one activation row `x` (cols / 32 Q8_0
    /// blocks): `product_rows` over every row.
    pub fn gemv(&self, k: &Kernels, x: &[BlockQ8_0], out: &mut [f32]) -> Result<()> {
        let per_row = self.cols / QK;
        if x.len() != per_row || out.len() != self.rows {
            return Err(Error::InvalidArgument(format!(
                "gemv of a {}x{} matrix needs {per_row} activation blocks and {} outputs, got {} and {}",
                self.rows,
                self.cols,
                self.rows,
                x.len(),
                out.len()
            )));
        }
        self.product_rows(k, x, &self.sums_for(k, x), 1, 0..self.rows, out)
    }

    /// out[i][r] = row r · x[i] for `n` activation rows stored one after
    /// another (out is `n` rows of `rows`): `product_rows` over every row.
    pub fn gemm(&self, k: &Kernels, x: &[BlockQ8_0], n: usize, out: &mut [f32]) -> Result<()> {
        let per_row = self.cols / QK;
        if x.len() != n * per_row || out.len() != n * self.rows {
            return Err(Error::InvalidArgument(format!(
                "gemm of a {}x{} matrix with {n} activation rows needs {} blocks and {} outputs, got {} and {}",
                self.rows,
                self.cols,
                n * per_row,
                n * self.rows,
                x.len(),
                out.len()
            )));
        }
        match self.act_layout(k, n) {
            ActLayout::Pairs => {
                let mut pairs = Vec::new();
                interleave_rows(&Workers::new(1)?, x, n, per_row, &mut pairs);
                self.product_rows_pairs(k, x, &pairs, n, 0..self.rows, out)
            }
            ActLayout::Quads => {
                let mut quads = Vec::new();
                interleave_rows(&Workers::new(1)?, x, n, per_row, &mut quads);
                self.product_rows_quads(k, x, &quads, n, 0..self.rows, out)
            }
            ActLayout::Rows => self.product_rows(k, x, &self.sums_for(k, x), n, 0..self.rows, out),
        }
    }
}

impl RepackedQ4_0 {
    /// The sums `product_rows` reads for `x`: `activation_sums(x)` where
    /// `wants_sums`, else none.
    fn sums_for(&self, k: &Kernels, x: &[BlockQ8_0]) -> Vec<i32> {
        let mut sums = Vec::new();
        if self.wants_sums(k) {
            activation_sums(x, &mut sums);
        }
        sums
    }

    /// Whether `product_rows` reads the activation blocks' sums: where the
    /// variant's kernel for the 8x8 layout takes them (AVX2, avx512,
    /// relaxed SIMD).
    pub fn wants_sums(&self, k: &Kernels) -> bool {
        matches!(self.groups, Groups::X8(_)) && k.gemm_q4_0_x8i8_sums.is_some()
    }

    /// The variant's kernels for a four-row layout: its matrix-matrix one,
    /// if it has one for this layout, and its GEMV.
    fn kernels_x4(&self, k: &Kernels) -> (Option<GemmFn<BlockQ4_0x4>>, GemvFn<BlockQ4_0x4>) {
        match self.layout {
            RepackLayout::X4I4 => (k.gemm_q4_0_x4i4, k.gemv_q4_0_x4i4),
            _ => (k.gemm_q4_0_x4i8, k.gemv_q4_0_x4i8),
        }
    }

    /// How a product of `n` activation rows takes them: interleaved as well
    /// where the variant has a kernel for this layout that reads them so
    /// (`act_rows`), and there are enough rows.
    pub fn act_layout(&self, k: &Kernels, n: usize) -> ActLayout {
        match &self.groups {
            Groups::X8(_) if n >= 2 && k.gemm_q4_0_x8i8_pairs.is_some() => ActLayout::Pairs,
            Groups::X4(_)
                if n >= 4
                    && self.layout == RepackLayout::X4I4
                    && k.gemm_q4_0_x4i4_quads.is_some() =>
            {
                ActLayout::Quads
            }
            _ => ActLayout::Rows,
        }
    }

    /// Rows `rows` of the product with `n` activation rows: `out[i * len + j]`
    /// = row `rows.start + j` · activation row `i`, where `len = rows.len()`.
    /// The range must start and end at group boundaries (or end at the last
    /// row), so threads split a matrix between whole groups. `sums` are
    /// `activation_sums(x)` where `wants_sums`, else not read (may be empty).
    pub fn product_rows(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        sums: &[i32],
        n: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let sums_fit = !self.wants_sums(k) || sums.len() == x.len();
        self.in_groups(
            k,
            x,
            n,
            rows,
            out,
            sums_fit,
            |blocks, per_row, r, out, len| match &self.groups {
                Groups::X4(g) => {
                    let (gemm, gemv) = self.kernels_x4(k);
                    groups_through(&g[blocks], per_row, r, gemm, gemv, x, n, out, len)
                }
                Groups::X8(g) => match k.gemm_q4_0_x8i8_sums {
                    Some(gemm) => {
                        groups_with_sums(&g[blocks], per_row, r, gemm, x, sums, n, out, len)
                    }
                    None => {
                        let (gemm, gemv) = (k.gemm_q4_0_x8i8, k.gemv_q4_0_x8i8);
                        groups_through(&g[blocks], per_row, r, gemm, gemv, x, n, out, len)
                    }
                },
            },
        )
    }

    /// `product_rows` with the activation rows also in pairs: `pairs` is
    /// `act_rows::interleave_rows` of `x`. Only where `act_layout` says
    /// `Pairs`.
    pub fn product_rows_pairs(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        pairs: &[BlockQ8_0x2],
        n: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        match (&self.groups, k.gemm_q4_0_x8i8_pairs, self.act_layout(k, n)) {
            (Groups::X8(g), Some(gemm), ActLayout::Pairs) => {
                self.interleaved_through(k, x, pairs, n, rows, out, g, gemm)
            }
            _ => Err(self.no_kernel_for(k, "pairs", n)),
        }
    }

    /// `product_rows` with the activation rows also in quads, likewise.
    pub fn product_rows_quads(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        quads: &[BlockQ8_0x4],
        n: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        match (&self.groups, k.gemm_q4_0_x4i4_quads, self.act_layout(k, n)) {
            (Groups::X4(g), Some(gemm), ActLayout::Quads) => {
                self.interleaved_through(k, x, quads, n, rows, out, g, gemm)
            }
            _ => Err(self.no_kernel_for(k, "quads", n)),
        }
    }

    fn no_kernel_for(&self, k: &Kernels, what: &str, n: usize) -> Error {
        Error::InvalidArgument(format!(
            "the {} kernels take no activation {what} for {n} rows of the {} layout",
            k.variant,
            self.layout.name()
        ))
    }

    /// The groups of `groups` through `gemm`, with the activations `x` also
    /// interleaved (`acts`), in `in_groups`' frame.
    #[allow(clippy::too_many_arguments)] // the product's operands
    fn interleaved_through<G, A: ActRows>(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        acts: &[A],
        n: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
        groups: &[G],
        gemm: InterleavedGemmFn<G, A>,
    ) -> Result<()> {
        let fit = acts.len() == n / A::ROWS * (self.cols / QK);
        self.in_groups(k, x, n, rows, out, fit, |blocks, per_row, r, out, len| {
            for (i, group) in groups[blocks].chunks_exact(per_row).enumerate() {
                gemm(group, acts, x, n, &mut out[i * r..], len);
            }
        })
    }

    /// The frame of `product_rows`: the shapes checked (with `prepared_fit`,
    /// whether what the caller prepared from the activations fits them),
    /// then `groups(blocks, per_row, r, out, len)` over the range's whole
    /// groups (`blocks`: their blocks' range in the layout), then the rows
    /// past the last whole group through `vec_dot`.
    #[allow(clippy::too_many_arguments)] // the product's operands
    fn in_groups(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        n: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
        prepared_fit: bool,
        groups: impl FnOnce(std::ops::Range<usize>, usize, usize, &mut [f32], usize),
    ) -> Result<()> {
        let per_row = self.cols / QK;
        let r = self.layout.rows();
        let len = rows.len();
        if rows.start % r != 0
            || (rows.end % r != 0 && rows.end != self.rows)
            || rows.end > self.rows
            || x.len() != n * per_row
            || !prepared_fit
            || out.len() != n * len
        {
            return Err(Error::InvalidArgument(format!(
                "product of rows {rows:?} of a {}x{} repacked matrix with {n} activation rows",
                self.rows, self.cols
            )));
        }
        let whole = self.rows / r * r;
        let group_end = rows.end.min(whole);
        if rows.start < group_end {
            groups(
                rows.start / r * per_row..group_end / r * per_row,
                per_row,
                r,
                out,
                len,
            );
        }
        for row in rows.start.max(whole)..rows.end {
            let w = &self.tail[(row - whole) * per_row..(row - whole + 1) * per_row];
            for (i, xi) in x.chunks_exact(per_row).enumerate() {
                out[i * len + row - rows.start] = (k.vec_dot_q4_0_q8_0)(w, xi);
            }
        }
        Ok(())
    }
}

/// `groups_through` for a kernel that takes the activation blocks' sums
/// (`activation_sums(x)`): it takes one activation row as well (its frame
/// goes straight to the tile), so no GEMV is needed.
#[allow(clippy::too_many_arguments)]
fn groups_with_sums<G>(
    groups: &[G],
    per_row: usize,
    r: usize,
    gemm: GemmSumsFn<G>,
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &mut [f32],
    len: usize,
) {
    for (g, group) in groups.chunks_exact(per_row).enumerate() {
        touch_ahead(groups, g * per_row);
        gemm(group, x, sums, n, &mut out[g * r..], len);
    }
}

/// Whole groups of `r` rows (`per_row` blocks each) times `n` activation
/// rows `x`: output row `g * r + j` of activation row `i` goes to
/// `out[i * len + g * r + j]`. With more than one activation row the
/// matrix-matrix kernel, where there is one; else the GEMV per activation
/// row, straight into `out`.
#[allow(clippy::too_many_arguments)]
fn groups_through<G>(
    groups: &[G],
    per_row: usize,
    r: usize,
    gemm: Option<GemmFn<G>>,
    gemv: GemvFn<G>,
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    len: usize,
) {
    if n == 1 {
        // One activation row (every generated token): one GEMV per group,
        // zipped with its outputs (index arithmetic per call costs more).
        for (g, (group, out)) in groups
            .chunks_exact(per_row)
            .zip(out.chunks_exact_mut(r))
            .enumerate()
        {
            touch_ahead(groups, g * per_row);
            gemv(group, x, out);
        }
        return;
    }
    for (g, group) in groups.chunks_exact(per_row).enumerate() {
        touch_ahead(groups, g * per_row);
        let at = g * r;
        match gemm {
            Some(f) => f(group, x, n, &mut out[at..], len),
            None => {
                for (i, xi) in x.chunks_exact(per_row).enumerate() {
                    gemv(group, xi, &mut out[i * len + at..][..r]);
                }
            }
        }
    }
}

// ---- Length checks shared by every variant's GEMV and GEMM kernels. Each
// kernel (these scalar ones and every SIMD one) calls its check once per
// call, before any load or store, so whatever slices safe code passes, a
// kernel never reads or writes out of bounds, and every variant accepts the
// same arguments.

/// Panics unless one repacked group (`rows` rows) and one activation row
/// have the same number of blocks and `out` has room for the `rows` outputs.
#[inline(always)]
#[track_caller]
pub(crate) fn check_gemv<G>(group: &[G], x: &[BlockQ8_0], out: &[f32], rows: usize) {
    assert!(
        group.len() == x.len(),
        "gemv: a group of {} repacked blocks against {} activation blocks",
        group.len(),
        x.len()
    );
    assert!(
        out.len() >= rows,
        "gemv: {} outputs for a group of {rows} rows",
        out.len()
    );
}

/// Panics unless `x` holds `n` activation rows of `group.len()` blocks and
/// `out` reaches output `rows - 1` of activation row `n - 1`
/// (`out[(n - 1) * stride + rows - 1]`).
// Only the x86 and aarch64 variants have GEMM kernels.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
#[inline(always)]
#[track_caller]
pub(crate) fn check_gemm<G, Y>(
    group: &[G],
    x: &[Y],
    n: usize,
    out: &[f32],
    stride: usize,
    rows: usize,
) {
    assert!(
        n.checked_mul(group.len()) == Some(x.len()),
        "gemm: {} activation blocks are not {n} rows of {}",
        x.len(),
        group.len()
    );
    if n > 0 {
        let need = (n - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(rows));
        assert!(
            need.is_some_and(|need| out.len() >= need),
            "gemm: {} outputs for {n} activation rows of stride {stride} and a group of {rows} rows",
            out.len()
        );
    }
}

// ---- Scalar kernels for every layout.

/// Signed value of a Q4_0 nibble.
fn nib(v: u8) -> i32 {
    v as i32 - 8
}

/// One group of `R` rows against one activation row: exact integer sums per
/// block, scaled as `vec_dot` scales them. The caller has checked the
/// lengths (`check_gemv`).
fn gemv_scalar<const R: usize>(
    d: impl Fn(usize) -> [f16; R],
    qs: impl Fn(usize) -> [u8; 128],
    x: &[BlockQ8_0],
    step: usize,
    out: &mut [f32],
) {
    let mut acc = [0f32; R];
    for (b, y) in x.iter().enumerate() {
        let (dw, q) = (d(b), qs(b));
        let mut sumi = [0i32; R];
        let mut i = 0;
        for k in 0..16 / step {
            for s in sumi.iter_mut() {
                for t in 0..step {
                    let j = k * step + t;
                    *s += nib(q[i] & 0x0F) * y.qs[j] as i32 + nib(q[i] >> 4) * y.qs[j + 16] as i32;
                    i += 1;
                }
            }
        }
        for r in 0..R {
            acc[r] += sumi[r] as f32 * f16_to_f32(dw[r]) * f16_to_f32(y.d);
        }
    }
    out[..R].copy_from_slice(&acc);
}

fn widen<const N: usize>(q: &[u8; N]) -> [u8; 128] {
    let mut out = [0u8; 128];
    out[..N].copy_from_slice(q);
    out
}

pub fn gemv_q4_0_x4i4(group: &[BlockQ4_0x4], x: &[BlockQ8_0], out: &mut [f32]) {
    check_gemv(group, x, out, 4);
    let qs = |b: usize| widen(&group[b].qs.map(|q| q ^ X4I4_FLIP));
    gemv_scalar::<4>(|b| group[b].d, qs, x, 4, out)
}

pub fn gemv_q4_0_x4i8(group: &[BlockQ4_0x4], x: &[BlockQ8_0], out: &mut [f32]) {
    check_gemv(group, x, out, 4);
    gemv_scalar::<4>(|b| group[b].d, |b| widen(&group[b].qs), x, 8, out)
}

pub fn gemv_q4_0_x8i8(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    check_gemv(group, x, out, 8);
    gemv_scalar::<8>(
        |b| group[b].d,
        |b| group[b].qs.map(|q| q ^ X8I8_FLIP),
        x,
        8,
        out,
    )
}
