//! The frame every SIMD group kernel runs in, whatever the instruction
//! set: the checks, then the activation rows in tiles of up to four that
//! share each decoded group block (`interleaved` says what a group is).
//! The kernels themselves are per variant (`avx2`, `avx512`, `avxvnni`,
//! `neon_groups`, `neon_q4_0`).

use super::act_rows::ActRows;
use super::repack::check_gemm;
use super::repack_q5_0::check_group;
use crate::tensor::blocks::BlockQ8_0;

/// Runs `tile(rows, take, res)` over the `n` activation rows four at a
/// time, so up to four rows share each decoded weight block (`rows`: the
/// tile's row indices, the last repeated to fill a short tile; `take`: how
/// many are real), and stores each real row's `R` outputs (one per weight
/// row of the group) at `out[row * stride..]`. The callers have checked
/// that `out` reaches them. This runs once per group and call, so it is
/// kept short: `res` is zeroed once, not per tile.
#[inline(always)]
fn in_tiles_of_four<const R: usize>(
    n: usize,
    out: &mut [f32],
    stride: usize,
    mut tile: impl FnMut([usize; 4], usize, &mut [[f32; R]; 4]),
) {
    let mut res = [[0f32; R]; 4];
    let mut i = 0;
    while i < n {
        let take = (n - i).min(4);
        let last = i + take - 1;
        tile(
            [i, (i + 1).min(last), (i + 2).min(last), last],
            take,
            &mut res,
        );
        for (j, res) in res[..take].iter().enumerate() {
            out[(i + j) * stride..][..R].copy_from_slice(res);
        }
        i += take;
    }
}
/// A group kernel's common frame: `check_gemm`, then `tile(take, xs, res)`
/// over the activation rows four at a time (`in_tiles_of_four`), each `xs`
/// row sliced to the group's length, so a tile may index `group.len()`
/// blocks of each. `R` is the number of weight rows in a group.
#[inline(always)]
pub fn gemm_in_tiles<G, Y, const R: usize>(
    group: &[G],
    x: &[Y],
    n: usize,
    out: &mut [f32],
    stride: usize,
    mut tile: impl FnMut(usize, &[&[Y]; 4], &mut [[f32; R]; 4]),
) {
    check_gemm(group, x, n, out, stride, R);
    if n == 1 {
        // A GEMV (every generated token): the activation row is `x` itself.
        let mut res = [[0f32; R]; 4];
        tile(1, &[x; 4], &mut res);
        out[..R].copy_from_slice(&res[0]);
        return;
    }
    let per_row = group.len();
    let row = |a: usize| &x[a * per_row..][..per_row];
    in_tiles_of_four(n, out, stride, |rows, take, res| {
        tile(
            take,
            &[row(rows[0]), row(rows[1]), row(rows[2]), row(rows[3])],
            res,
        )
    });
}

/// `tile::<A>(args)` for the `take` (1..=4) real rows of a tile.
macro_rules! by_take {
    ($take:expr, $tile:ident($($arg:expr),*)) => {
        match $take {
            4 => $tile::<4>($($arg),*),
            3 => $tile::<3>($($arg),*),
            2 => $tile::<2>($($arg),*),
            _ => $tile::<1>($($arg),*),
        }
    };
}
pub(crate) use by_take;

/// `gemm_in_tiles` for `R`-row groups whose kernels also take the
/// activation blocks' sums (Q5_0; Q4_0 on AVX2, avx512 and relaxed SIMD):
/// `repack_q5_0::check_group`, then `tile(take, xs, ss, res)` over the
/// activation rows four at a time, each `xs` and `ss` row sliced to the
/// group's length.
#[inline(always)]
pub fn gemm_sums_in_tiles<G, const R: usize>(
    group: &[G],
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &mut [f32],
    stride: usize,
    mut tile: impl FnMut(usize, &[&[BlockQ8_0]; 4], &[&[i32]; 4], &mut [[f32; R]; 4]),
) {
    check_group(group, x, sums, n, out, stride, R);
    if n == 1 {
        // A GEMV (every generated token), as in `gemm_in_tiles`.
        let mut res = [[0f32; R]; 4];
        tile(1, &[x; 4], &[sums; 4], &mut res);
        out[..R].copy_from_slice(&res[0]);
        return;
    }
    let per_row = group.len();
    let row = |a: usize| &x[a * per_row..][..per_row];
    let sums_of = |a: usize| &sums[a * per_row..][..per_row];
    in_tiles_of_four(n, out, stride, |r, take, res| {
        let xs = [row(r[0]), row(r[1]), row(r[2]), row(r[3])];
        let ss = [sums_of(r[0]), sums_of(r[1]), sums_of(r[2]), sums_of(r[3])];
        tile(take, &xs, &ss, res)
    });
}

/// The frame of kernels that take the activation rows also interleaved
/// (`act_rows`): `check_gemm` and the blocks of rows' length, then
/// `tile(take, blocks, res)` over the `n / A::ROWS` blocks of rows up to
/// `T` at a time (`blocks`: the tile's blocks of rows sliced to the group's
/// length, the last repeated to fill a short tile; `take`: how many are
/// real; `res[A::ROWS · b + j]`: row j of block b), then `rest(x, count,
/// out)` for the rows past the last whole block of rows (their activations,
/// how many, their outputs at the same stride).
// Only the aarch64 kernels take interleaved rows.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
#[allow(clippy::too_many_arguments)] // the product's operands, and the two steps
#[inline(always)]
pub fn gemm_in_row_block_tiles<const T: usize, G, A: ActRows, const R: usize>(
    group: &[G],
    acts: &[A],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
    mut tile: impl FnMut(usize, &[&[A]; 4], &mut [[f32; R]; 8]),
    rest: impl FnOnce(&[BlockQ8_0], usize, &mut [f32]),
) {
    const { assert!(T <= 4) };
    assert!(T * A::ROWS <= 8, "a tile's rows fit its results");
    check_gemm(group, x, n, out, stride, R);
    let per_row = group.len();
    let blocks = n / A::ROWS;
    assert_eq!(
        acts.len(),
        blocks * per_row,
        "gemm: {} interleaved blocks for {n} activation rows of {per_row}",
        acts.len()
    );
    let block = |b: usize| &acts[b * per_row..][..per_row];
    let mut res = [[0f32; R]; 8];
    let mut b = 0;
    while b < blocks {
        let take = (blocks - b).min(T);
        let tile_blocks: [&[A]; 4] = std::array::from_fn(|j| block(b + j.min(take - 1)));
        tile(take, &tile_blocks, &mut res);
        for (j, res) in res[..A::ROWS * take].iter().enumerate() {
            out[(A::ROWS * b + j) * stride..][..R].copy_from_slice(res);
        }
        b += take;
    }
    let done = blocks * A::ROWS;
    if done < n {
        rest(&x[done * per_row..], n - done, &mut out[done * stride..]);
    }
}
