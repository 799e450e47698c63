//! The engine's path is the tested path: every op of the CPU backend, called
//! as the model code calls it (`Device::bind_matrix`, `Backend::mul_mat`,
//! `attention`, norms, RoPE, activations, cache rows), for every variant this
//! machine supports at 1 and 2 threads, against the scalar backend on random
//! data. Ops built from exact kernels must match bit for bit; products and
//! attention through kernels that accumulate in vector lanes (AVX2's legacy
//! quant dots, every SIMD variant's f16/f32 dots) may differ by float
//! rounding: a relative 1e-5 of the row's magnitude (n·ε·Σ|terms| is below
//! that for these sizes, and any real error far above it).

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

use common::{ggml_test_values, Rng};
use lamina::backend::cpu::{CpuDevice, CpuVariant};
use lamina::backend::{
    AttentionArgs, Backend, CacheBuffer, CacheRows, CacheType, DeltaNetArgs, Device, Matrix, Op,
    Rope, RopeKind, WeightSource,
};
use lamina::gguf::{GgufFile, GgufWriter};
use lamina::tensor::DType;

fn devices() -> Vec<(CpuVariant, Arc<dyn Device>)> {
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    CpuVariant::compiled_variants()
        .into_iter()
        .filter(|v| v.supported(cpu.features()))
        .map(|v| (v, cpu.with_variant(v).unwrap().shared()))
        .collect()
}

fn scalar() -> Arc<dyn Device> {
    CpuDevice::new(Some("scalar")).unwrap().shared()
}

/// A file holding one `rows x cols` tensor of random values in `dtype`.
fn weight_file(dtype: DType, rows: usize, cols: usize, seed: u64) -> Arc<GgufFile> {
    let values = ggml_test_values(seed, rows * cols);
    let bytes = lamina::tensor::convert::from_f32(dtype, &values)
        .unwrap_or_else(|_| vec![0x11; rows * dtype.bytes_for(cols)]);
    let mut w = GgufWriter::new();
    w.add_tensor("w", dtype.ggml_type(), &[cols as u64, rows as u64], bytes)
        .unwrap();
    Arc::new(GgufFile::from_bytes(w.to_bytes()).unwrap())
}

fn bind(device: &dyn Device, file: &Arc<GgufFile>, table: bool) -> Matrix {
    let info = file.tensor("w").unwrap();
    let start = (file.data_offset() + info.offset) as usize;
    let src = WeightSource {
        name: "w",
        dtype: DType::of_tensor(info.ggml_type, "w").unwrap(),
        rows: info.shape[1] as usize,
        cols: info.shape[0] as usize,
        file,
        part: 0,
        range: start..start + info.n_bytes as usize,
    };
    if table {
        device.bind_table(src).unwrap()
    } else {
        device.bind_matrix(src).unwrap()
    }
}

/// Whether a variant's product with `dtype` weights must equal the scalar's
/// bit for bit (see the module note).
fn exact_product(variant: CpuVariant, dtype: DType) -> bool {
    match dtype {
        // Float dots accumulate in vector lanes on every SIMD variant.
        DType::F16 | DType::BF16 | DType::F32 => variant == CpuVariant::Scalar,
        // The k-quant and IQ4 kernels share the scalar combination code.
        DType::Q2_K
        | DType::Q3_K
        | DType::Q4_K
        | DType::Q5_K
        | DType::Q6_K
        | DType::IQ4_NL
        | DType::IQ4_XS => true,
        // Legacy types: only AVX2 (and avx-vnni and avx512, which keep its dots)
        // accumulates blocks in float lanes.
        _ => !matches!(
            variant,
            CpuVariant::Avx2 | CpuVariant::AvxVnni | CpuVariant::Avx512
        ),
    }
}

fn assert_rows_close(what: &str, got: &[f32], want: &[f32], width: usize, exact: bool) {
    assert_eq!(got.len(), want.len(), "{what}");
    if exact {
        if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
            panic!(
                "{what}: value {i} is {} where the scalar backend gives {}",
                got[i], want[i]
            );
        }
        return;
    }
    for (r, (g, w)) in got.chunks(width).zip(want.chunks(width)).enumerate() {
        let mag = w.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (c, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * mag,
                "{what}: row {r} col {c}: {a} vs scalar {b}"
            );
        }
    }
}

#[test]
fn products_through_the_backend_match_the_scalar_backend() {
    // 20 rows: two whole 8-row groups and a tail; 256 columns for the k-quants.
    let (rows, cols) = (20, 256);
    let reference = scalar();
    // Every type the device says it multiplies (fifteen today).
    let types: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&t| reference.supports_op(Op::MulMat(t)))
        .collect();
    assert_eq!(types.len(), 15, "{types:?}");
    let mut rng = Rng::new(11);
    for (t, &dtype) in types.iter().enumerate() {
        let file = weight_file(dtype, rows, cols, 100 + t as u64);
        let want_m = bind(reference.as_ref(), &file, false);
        let mut want_be = reference.create_backend(1).unwrap();
        for n in [1usize, 3, 5] {
            let x = ggml_test_values(rng.next_u64(), n * cols);
            let mut want = vec![0f32; n * rows];
            want_be.mul_mat(&want_m, &x, n, &mut want).unwrap();
            for (variant, device) in devices() {
                let m = bind(device.as_ref(), &file, false);
                for threads in [1, 2] {
                    let Ok(mut be) = device.create_backend(threads) else {
                        continue; // the single-thread wasm build has no pool
                    };
                    let mut got = vec![f32::NAN; n * rows];
                    be.mul_mat(&m, &x, n, &mut got).unwrap();
                    let what = format!("{dtype} {variant} {threads} t, {n} rows");
                    assert_rows_close(&what, &got, &want, rows, exact_product(variant, dtype));
                }
            }
        }
        // Shapes are checked: a wrong output length is an error, not a write.
        let mut be = reference.create_backend(1).unwrap();
        assert!(be
            .mul_mat(&want_m, &vec![0.0; cols], 1, &mut [0.0; 3])
            .is_err());
    }
}

/// Matrices that products read in the file's layout are copied into huge
/// pages where the system gives them (Linux's transparent huge pages,
/// `always` or `madvise`, of at most 32 MB), and stay in the file's bytes
/// elsewhere; products from the copy equal those from the file's bytes (a
/// table, which stays in the file) bit for bit, on every variant.
#[cfg(not(target_family = "wasm"))]
#[test]
fn matrices_read_in_place_are_copied_into_huge_pages_where_the_system_has_them() {
    let thp = |f: &str| {
        std::fs::read_to_string(format!("/sys/kernel/mm/transparent_hugepage/{f}"))
            .unwrap_or_default()
    };
    let (mode, size) = (thp("enabled"), thp("hpage_pmd_size"));
    let size: usize = size.trim().parse().unwrap_or(0);
    let expected = cfg!(target_os = "linux")
        && (mode.contains("[always]") || mode.contains("[madvise]"))
        && size.is_power_of_two()
        && size <= 32 << 20;
    assert_eq!(
        lamina::backend::cpu::huge_page_size(),
        expected.then_some(size),
        "THP {mode:?}, {size} bytes"
    );
    let (rows, cols) = (20, 256);
    for (seed, dtype) in [DType::F16, DType::BF16, DType::F32]
        .into_iter()
        .enumerate()
    {
        let file = weight_file(dtype, rows, cols, 300 + seed as u64);
        let x = ggml_test_values(seed as u64, 3 * cols);
        for (variant, device) in devices() {
            let m = bind(device.as_ref(), &file, false);
            let table = bind(device.as_ref(), &file, true);
            let what = format!("{dtype} {variant}");
            assert_eq!(m.is_copied(), expected, "{what}");
            assert!(!m.is_repacked() && !table.is_copied(), "{what}");
            assert_eq!(m.size_bytes(), table.size_bytes(), "{what}");
            let mut be = device.create_backend(2).unwrap();
            let (mut got, mut want) = (vec![f32::NAN; 3 * rows], vec![0f32; 3 * rows]);
            be.mul_mat(&m, &x, 3, &mut got).unwrap();
            be.mul_mat(&table, &x, 3, &mut want).unwrap();
            assert_rows_close(&what, &got, &want, rows, true);
        }
    }
}

/// `mul_mat_rows` (one token's experts) gives each product what `mul_mat`
/// gives it, bit for bit, on every variant and thread count, with one input
/// row for all products or a row each; a product that does not fit its
/// rows is an error naming it, before anything is written.
#[test]
fn row_products_equal_one_product_at_a_time() {
    let (rows, cols) = (24, 256);
    let types = [DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16];
    let files: Vec<_> = (0..6)
        .map(|j| weight_file(types[j % types.len()], rows, cols, 300 + j as u64))
        .collect();
    let shared_x = ggml_test_values(310, cols);
    let own_x = ggml_test_values(311, files.len() * cols);
    for (variant, device) in devices() {
        let ms: Vec<Matrix> = files
            .iter()
            .map(|f| bind(device.as_ref(), f, false))
            .collect();
        for threads in [1, 2, 3] {
            let Ok(mut be) = device.create_backend(threads) else {
                continue; // the single-thread wasm build has no pool
            };
            for (x, x_width) in [(&shared_x, 0), (&own_x, cols)] {
                // Outputs `rows + 3` apart: the gaps stay as they were.
                let width = rows + 3;
                let mut want = vec![-7.0f32; ms.len() * width];
                for (j, m) in ms.iter().enumerate() {
                    let xj = &x[j * x_width..j * x_width + cols];
                    be.mul_mat(m, xj, 1, &mut want[j * width..j * width + rows])
                        .unwrap();
                }
                let mut got = vec![-7.0f32; ms.len() * width];
                be.mul_mat_rows(ms.len(), &|j| &ms[j], x, x_width, &mut got, width)
                    .unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "{variant} {threads} t, inputs {x_width} apart"
                );
            }
            // Rows 20 apart cannot hold a product of 24 rows.
            let mut out = vec![-7.0f32; ms.len() * rows];
            let err = be
                .mul_mat_rows(ms.len(), &|j| &ms[j], &shared_x, 0, &mut out, 20)
                .unwrap_err();
            assert!(err.to_string().contains("product 0"), "{err}");
            assert!(
                out.iter().all(|&v| v == -7.0),
                "{variant}: written before the error"
            );
            // Too few input rows for the last product.
            let err = be
                .mul_mat_rows(
                    ms.len(),
                    &|j| &ms[j],
                    &own_x[..5 * cols],
                    cols,
                    &mut out,
                    rows,
                )
                .unwrap_err();
            assert!(err.to_string().contains("product 5"), "{err}");
            assert!(
                out.iter().all(|&v| v == -7.0),
                "{variant}: written before the error"
            );
        }
    }
}

/// `mul_mats` (a layer's Q, K and V, or gate and up, off one input) gives
/// each product what `mul_mat` gives it, bit for bit, on every variant and
/// thread count: weights that share their activations' preparation (one
/// type; Q4_K with Q6_K) and weights that do not (each then runs alone),
/// for a generated token's one row and a prompt's several; a product that
/// does not fit is an error before anything is written.
#[test]
fn shared_input_products_equal_one_product_at_a_time() {
    let cols = 256;
    let sets: [&[(DType, usize)]; 5] = [
        &[(DType::Q4_0, 40), (DType::Q4_0, 16), (DType::Q4_0, 16)],
        &[(DType::Q4_1, 48), (DType::Q4_1, 48)],
        &[(DType::Q8_0, 24), (DType::Q8_0, 8), (DType::Q8_0, 8)],
        &[(DType::Q4_K, 32), (DType::Q6_K, 16), (DType::Q4_K, 8)],
        &[(DType::Q8_0, 16), (DType::Q5_0, 24), (DType::F16, 8)],
    ];
    for (s, set) in sets.iter().enumerate() {
        let files: Vec<_> = set
            .iter()
            .enumerate()
            .map(|(j, &(dtype, rows))| {
                weight_file(dtype, rows, cols, 400 + 10 * s as u64 + j as u64)
            })
            .collect();
        for (variant, device) in devices() {
            let ms: Vec<Matrix> = files
                .iter()
                .map(|f| bind(device.as_ref(), f, false))
                .collect();
            let ws: Vec<&Matrix> = ms.iter().collect();
            for threads in [1, 2, 3] {
                let Ok(mut be) = device.create_backend(threads) else {
                    continue; // the single-thread wasm build has no pool
                };
                for n in [1, 3, 9] {
                    let x = ggml_test_values(450 + n as u64, n * cols);
                    let what = format!("set {s}, {variant}, {threads} t, {n} rows");
                    let mut want: Vec<Vec<f32>> =
                        set.iter().map(|&(_, rows)| vec![0.0; n * rows]).collect();
                    for (m, out) in ms.iter().zip(&mut want) {
                        be.mul_mat(m, &x, n, out).unwrap();
                    }
                    let mut got: Vec<Vec<f32>> = set
                        .iter()
                        .map(|&(_, rows)| vec![f32::NAN; n * rows])
                        .collect();
                    let mut outs: Vec<&mut [f32]> = got.iter_mut().map(|v| &mut v[..]).collect();
                    be.mul_mats(&ws, &x, n, &mut outs).unwrap();
                    let bits = |v: &[Vec<f32>]| {
                        v.iter()
                            .map(|r| r.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&got), bits(&want), "{what}");
                }
                // The last output one row short: an error naming the
                // product, and no output written.
                let x = ggml_test_values(460, cols);
                let mut got: Vec<Vec<f32>> =
                    set.iter().map(|&(_, rows)| vec![-7.0; rows]).collect();
                got.last_mut().unwrap().pop();
                let mut outs: Vec<&mut [f32]> = got.iter_mut().map(|v| &mut v[..]).collect();
                let err = be.mul_mats(&ws, &x, 1, &mut outs).unwrap_err();
                assert!(err.to_string().contains("product of 'w'"), "{err}");
                assert!(
                    got.iter().flatten().all(|&v| v == -7.0),
                    "set {s}, {variant}: written before the error"
                );
            }
        }
    }
}

#[test]
fn unsupported_product_types_are_refused_when_bound() {
    let file = weight_file(DType::Q8_K, 4, 256, 7);
    for (_, device) in devices() {
        let info = file.tensor("w").unwrap();
        let start = (file.data_offset() + info.offset) as usize;
        let src = WeightSource {
            name: "w",
            dtype: DType::Q8_K,
            rows: 4,
            cols: 256,
            file: &file,
            part: 0,
            range: start..start + info.n_bytes as usize,
        };
        let e = device.bind_matrix(src.clone()).err().unwrap();
        assert!(e.to_string().contains("'w' is Q8_K"), "{e}");
        // Rows of it can still be read (an embedding table).
        let table = device.bind_table(src).unwrap();
        let mut be = device.create_backend(1).unwrap();
        let mut out = vec![0f32; 2 * 256];
        be.get_rows(&table, &[3, 0], &mut out).unwrap();
        assert!(be.get_rows(&table, &[4], &mut out[..256]).is_err());
    }
}

/// Runs `f` on the scalar backend and on every variant's, and compares.
fn each_backend(what: &str, exact: bool, width: usize, f: impl Fn(&mut dyn Backend) -> Vec<f32>) {
    let want = f(scalar().create_backend(1).unwrap().as_mut());
    for (variant, device) in devices() {
        for threads in [1, 2] {
            let Ok(mut be) = device.create_backend(threads) else {
                continue;
            };
            let got = f(be.as_mut());
            let exact = exact || variant == CpuVariant::Scalar;
            assert_rows_close(
                &format!("{what} {variant} {threads} t"),
                &got,
                &want,
                width,
                exact,
            );
        }
    }
}

/// Every row-wise and element-wise op over `n` rows of `d` values, on every
/// backend at 1 and 2 threads, against the scalar backend bit for bit, with
/// RoPE at `positions` (one per row).
fn row_ops_match(n: usize, d: usize, seed: u64, positions: &[i32]) {
    let x = ggml_test_values(seed, n * d);
    let y = ggml_test_values(seed + 1, n * d);
    let w = ggml_test_values(seed + 2, d);
    let b = ggml_test_values(seed + 3, d);
    each_backend("rms_norm", true, d, |be| {
        let mut out = vec![0.0; n * d];
        be.rms_norm(&x, &w, 1e-5, &mut out).unwrap();
        out
    });
    type InPlace = fn(&mut dyn Backend, &mut [f32], &[f32], &[f32], &[f32]);
    let in_place: [(&str, InPlace); 8] = [
        ("layer_norm", |be, v, _, w, b| {
            be.layer_norm(v, w, b, 1e-12).unwrap()
        }),
        ("add_bias", |be, v, _, _, b| be.add_bias(v, b).unwrap()),
        ("add", |be, v, y, _, _| be.add(v, y).unwrap()),
        ("gelu", |be, v, _, _, _| be.gelu(v).unwrap()),
        ("silu_mul", |be, v, y, _, _| be.silu_mul(v, y).unwrap()),
        ("gelu_mul", |be, v, y, _, _| be.gelu_mul(v, y).unwrap()),
        ("silu", |be, v, _, _, _| be.silu(v).unwrap()),
        ("mul", |be, v, y, _, _| be.mul(v, y).unwrap()),
    ];
    for (name, op) in in_place {
        each_backend(name, true, d, |be| {
            let mut out = x.clone();
            op(be, &mut out, &y, &w, &b);
            out
        });
    }
    for kind in [RopeKind::Normal, RopeKind::Neox] {
        let rope = Rope {
            kind,
            head_dim: 32,
            dim: 32,
            base: 10000.0,
            freq_scale: 1.0,
            freq_factors: None,
            attn_factor: 1.0,
        };
        each_backend("rope", true, d, |be| {
            let mut r = x.clone();
            be.rope(&rope, &mut r, positions).unwrap();
            r
        });
    }
}

#[test]
fn row_ops_match_the_scalar_backend_bit_for_bit() {
    let (d, n) = (96, 5);
    row_ops_match(n, d, 21, &[0, 1, 7, 300, 4095]);
    // SiLU over its whole range (exp clamped past ±88) and a length that
    // leaves a remainder for every SIMD width.
    let x = ggml_test_values(21, n * d);
    let wide: Vec<f32> = ggml_test_values(24, 224)[..203]
        .iter()
        .map(|v| v * 120.0)
        .collect();
    each_backend("silu_mul wide", true, 203, |be| {
        let mut g = wide.clone();
        be.silu_mul(&mut g, &x[..203]).unwrap();
        g
    });
    // GELU (a table lookup at the f16 rounding of the input) over ±15,
    // both cut-offs and values next to them, zeros, infinities and inputs
    // whose f16 rounding is subnormal; a remainder for every SIMD width.
    let mut gelu_in: Vec<f32> = ggml_test_values(25, 224)[..200]
        .iter()
        .map(|v| v * 15.0)
        .collect();
    gelu_in.extend([
        -10.0,
        10.0,
        -9.999,
        9.999,
        -10.001,
        10.001,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        3e-6,
        -5e-8,
        6.1e-5,
    ]);
    each_backend("gelu wide", true, gelu_in.len(), |be| {
        let mut g = gelu_in.clone();
        be.gelu(&mut g).unwrap();
        g
    });
    each_backend("gelu_mul wide", true, gelu_in.len(), |be| {
        let mut g = gelu_in.clone();
        be.gelu_mul(&mut g, &x[..gelu_in.len()]).unwrap();
        g
    });
    // Wrong shapes are errors.
    let w = ggml_test_values(22, d);
    let mut be = scalar().create_backend(1).unwrap();
    assert!(be
        .rms_norm(&x, &w[..95], 1e-5, &mut vec![0.0; n * d])
        .is_err());
    assert!(be.add(&mut [0.0; 3], &[1.0; 4]).is_err());
}

/// Softmax rows (the experts' router) and sigmoids: probabilities that sum to one, equal
/// to exp(x - max) / sum within f32 rounding, the same on every backend, and
/// a length that is not a multiple of the width is an error.
#[test]
fn soft_max_rows_are_probabilities() {
    let (n, d) = (7, 64);
    let x: Vec<f32> = ggml_test_values(31, n * d)
        .iter()
        .map(|v| v * 30.0)
        .collect();
    each_backend("soft_max", true, d, |be| {
        let mut p = x.clone();
        be.soft_max(&mut p, d).unwrap();
        p
    });
    let mut p = x.clone();
    scalar()
        .create_backend(1)
        .unwrap()
        .soft_max(&mut p, d)
        .unwrap();
    for (row, want) in p.chunks_exact(d).zip(x.chunks_exact(d)) {
        let max = want
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, |m, v| m.max(v as f64));
        let sum: f64 = want.iter().map(|&v| (v as f64 - max).exp()).sum();
        let total: f64 = row.iter().map(|&v| v as f64).sum();
        assert!((total - 1.0).abs() < 1e-5, "row sums to {total}");
        for (&got, &v) in row.iter().zip(want) {
            let exact = (v as f64 - max).exp() / sum;
            assert!(
                (got as f64 - exact).abs() <= 1e-6 + 1e-5 * exact,
                "{got} vs {exact}"
            );
        }
    }
    // The experts' other gate: sigmoid(0) = 1/2, sigmoid(±ln 3) = 3/4, 1/4.
    let mut gates = [0.0, 3f32.ln(), -(3f32.ln())];
    scalar()
        .create_backend(1)
        .unwrap()
        .sigmoid(&mut gates)
        .unwrap();
    for (g, w) in gates.iter().zip([0.5, 0.75, 0.25]) {
        assert!((g - w).abs() < 1e-6, "{gates:?}");
    }
    // ln 3 apart: a quarter and three quarters.
    let mut two = [0.0, 3f32.ln()];
    scalar()
        .create_backend(1)
        .unwrap()
        .soft_max(&mut two, 2)
        .unwrap();
    assert!(
        (two[0] - 0.25).abs() < 1e-6 && (two[1] - 0.75).abs() < 1e-6,
        "{two:?}"
    );
    assert!(scalar()
        .create_backend(1)
        .unwrap()
        .soft_max(&mut [0.0; 5], 2)
        .is_err());
}

/// The causal depthwise convolution (LFM2's, Qwen3.5's), token by token on
/// every backend, against the convolution written out over the whole
/// sequence: out[t] = Σ_k taps[k] · x[t - (len-1) + k], zeros before the
/// first token; and the state it leaves is the last `len - 1` inputs.
#[test]
fn causal_conv_steps_equal_the_whole_convolution() {
    let (n, len, steps) = (5, 4, 6);
    let kernel = ggml_test_values(51, 32)[..n * len].to_vec();
    let xs: Vec<f32> = ggml_test_values(52, 96)[..steps * n].to_vec();
    let x = |t: usize, ch: usize| xs[t * n + ch];
    let mut want = vec![0.0f32; steps * n];
    for t in 0..steps {
        for ch in 0..n {
            let mut sum = 0.0f32;
            for k in 0..len {
                let back = len - 1 - k;
                if t >= back {
                    sum += x(t - back, ch) * kernel[ch * len + k];
                }
            }
            want[t * n + ch] = sum;
        }
    }
    let kernel = lamina::backend::tap_major(&kernel, n, len);
    // Every step of the sequence through one backend: outputs and the state.
    let run = |be: &mut dyn Backend| {
        let mut state = vec![0.0; (len - 1) * n];
        let mut out = vec![0.0; steps * n];
        for t in 0..steps {
            be.causal_conv(
                &kernel,
                len,
                &mut state,
                &xs[t * n..(t + 1) * n],
                &mut out[t * n..(t + 1) * n],
            )
            .unwrap();
        }
        (out, state)
    };
    each_backend("causal_conv", true, n, |be| {
        let (out, state) = run(be);
        for k in 0..len - 1 {
            for ch in 0..n {
                assert_eq!(state[k * n + ch], x(steps - (len - 1) + k, ch));
            }
        }
        out
    });
    let mut be = scalar().create_backend(1).unwrap();
    let (mut out, mut state) = run(be.as_mut());
    for (g, w) in out.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "{g} vs {w}");
    }
    // Shapes that do not fit are errors.
    assert!(be
        .causal_conv(&kernel, len, &mut state[1..], &xs[..n], &mut out[..n])
        .is_err());
    assert!(be
        .causal_conv(&kernel, 1, &mut [], &xs[..n], &mut out[..n])
        .is_err());
}

/// Gated DeltaNet over a run of tokens, on every backend at 1 and 2
/// threads (bit for bit: each head runs as on one thread), against the
/// recurrence written out in f64: per value head h (query and key head
/// h % n_head_k), S ← exp(g)·S; S ← S + β·k(v − Sᵀk)ᵀ; out = Sᵀq/√dim. Two
/// calls of 3 and 2 tokens leave the state one call of 5 does.
#[test]
fn gated_delta_net_follows_the_recurrence() {
    // Heads of 16 and 128 take the SIMD kernels' 8-lane path, 12 their
    // scalar fallback.
    for d in [16, 12, 128] {
        check_gated_delta_net(d);
    }
}

fn check_gated_delta_net(d: usize) {
    let (hk, hv, d, n) = (2usize, 4usize, d, 5usize);
    let width = (2 * hk + hv) * d;
    // Unit-length queries and keys, as the model's L2 norm makes them.
    let mut qkv = ggml_test_values(61, n * width);
    for row in qkv.chunks_exact_mut(width) {
        for head in row[..2 * hk * d].chunks_exact_mut(d) {
            let len = head.iter().map(|v| v * v).sum::<f32>().sqrt();
            head.iter_mut().for_each(|v| *v /= len);
        }
    }
    // Decays in (0, 1] and strengths in [0, 1], as the model's softplus
    // and sigmoid make them.
    let g: Vec<f32> = ggml_test_values(62, 32)[..n * hv]
        .iter()
        .map(|v| -v.abs().min(4.0))
        .collect();
    let beta: Vec<f32> = ggml_test_values(63, 32)[..n * hv]
        .iter()
        .map(|v| v.abs().min(1.0))
        .collect();
    let state0 = ggml_test_values(64, hv * d * d);
    let mut want = vec![0.0f64; n * hv * d];
    let mut s: Vec<f64> = state0.iter().map(|&v| v as f64).collect();
    for t in 0..n {
        let row = &qkv[t * width..(t + 1) * width];
        for h in 0..hv {
            let kh = h % hk;
            let q = &row[kh * d..(kh + 1) * d];
            let k = &row[(hk + kh) * d..(hk + kh + 1) * d];
            let v = &row[(2 * hk + h) * d..(2 * hk + h + 1) * d];
            let st = &mut s[h * d * d..(h + 1) * d * d];
            let decay = (g[t * hv + h] as f64).exp();
            st.iter_mut().for_each(|x| *x *= decay);
            for j in 0..d {
                let recall: f64 = (0..d).map(|i| st[j * d + i] * k[i] as f64).sum();
                let delta = (v[j] as f64 - recall) * beta[t * hv + h] as f64;
                for i in 0..d {
                    st[j * d + i] += k[i] as f64 * delta;
                }
            }
            for j in 0..d {
                let read: f64 = (0..d).map(|i| st[j * d + i] * q[i] as f64).sum();
                want[(t * hv + h) * d + j] = read / (d as f64).sqrt();
            }
        }
    }
    let run = |be: &mut dyn Backend, split: usize| {
        let mut state = state0.clone();
        let mut out = vec![0.0; n * hv * d];
        for (a, b) in [(0, split), (split, n)] {
            let args = DeltaNetArgs {
                qkv: &qkv[a * width..b * width],
                g: &g[a * hv..b * hv],
                beta: &beta[a * hv..b * hv],
                n_head_k: hk,
                n_head_v: hv,
                dim: d,
            };
            be.gated_delta_net(&args, &mut state, &mut out[a * hv * d..b * hv * d])
                .unwrap();
        }
        out.extend_from_slice(&state);
        out
    };
    each_backend(&format!("gated_delta_net of {d}"), true, hv * d, |be| {
        run(be, 3)
    });
    let mut be = scalar().create_backend(1).unwrap();
    let (split, whole) = (run(be.as_mut(), 3), run(be.as_mut(), n));
    assert_eq!(split, whole, "a run split in two equals the whole run");
    for (i, (g, w)) in split.iter().zip(&want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "output {i}: {g} vs {w}"
        );
    }
    for (i, (g, w)) in split[n * hv * d..].iter().zip(&s).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "state {i}: {g} vs {w}"
        );
    }
    // Shapes that do not fit are errors.
    let mut state = state0.clone();
    let mut out = vec![0.0; n * hv * d];
    let bad = |hk: usize, hv: usize, rows: usize| DeltaNetArgs {
        qkv: &qkv[..rows],
        g: &g,
        beta: &beta,
        n_head_k: hk,
        n_head_v: hv,
        dim: d,
    };
    assert!(be
        .gated_delta_net(&bad(3, hv, n * width), &mut state, &mut out)
        .is_err());
    assert!(be
        .gated_delta_net(&bad(hk, hv, n * width - 1), &mut state, &mut out)
        .is_err());
    assert!(be
        .gated_delta_net(&bad(hk, hv, n * width), &mut state[1..], &mut out)
        .is_err());
}

/// A prompt's rows: enough of them (and of values) that two threads split
/// every row-wise and element-wise op into pieces; each row or value must
/// still come out as on one thread.
#[test]
fn row_ops_split_over_threads_match_the_scalar_backend_bit_for_bit() {
    let n = 203;
    let positions: Vec<i32> = (0..n as i32).map(|p| p * 3).collect();
    row_ops_match(n, 96, 41, &positions);
}

#[test]
fn attention_matches_the_scalar_backend() {
    let (n_head, n_head_kv, hd) = (4, 2, 64);
    let (n, cells) = (3, 11);
    let kv_w = n_head_kv * hd;
    let q = ggml_test_values(31, n * n_head * hd);
    let k = ggml_test_values(32, cells * kv_w);
    let v = ggml_test_values(33, cells * kv_w);
    // Cells 0..8 belong to sequence 0 at positions 0..8, 8..11 to sequence 1.
    let cell_pos: Vec<i32> = (0..cells as i32)
        .map(|c| if c < 8 { c } else { c - 8 })
        .collect();
    let cell_seqs: Vec<u64> = (0..cells).map(|c| if c < 8 { 1 } else { 2 }).collect();
    let (query_pos, query_seq) = ([7, 2, 5], [0u32, 1, 0]);
    let host = scalar().buffer_type();
    for ty in [CacheType::F16, CacheType::F32, CacheType::Q8_0] {
        let mut kb = CacheBuffer::new(host.as_ref(), ty, kv_w, cells).unwrap();
        let mut vb = CacheBuffer::new(host.as_ref(), ty, kv_w, cells).unwrap();
        {
            let mut be = scalar().create_backend(1).unwrap();
            for c in 0..cells {
                be.set_row(&k[c * kv_w..(c + 1) * kv_w], kb.view_mut(), c)
                    .unwrap();
                be.set_row(&v[c * kv_w..(c + 1) * kv_w], vb.view_mut(), c)
                    .unwrap();
            }
            let mut row = vec![0.0; kv_w];
            be.get_row(kb.view(), 3, &mut row).unwrap();
            if ty == CacheType::F32 {
                assert_eq!(row, &k[3 * kv_w..4 * kv_w]);
            }
            assert!(be.get_row(kb.view(), cells, &mut row).is_err());
        }
        let base = AttentionArgs {
            q: &q,
            k: kb.view(),
            v: vb.view(),
            n_head,
            n_head_kv,
            head_dim: hd,
            scale: 0.125,
            cell_pos: &cell_pos,
            cell_seqs: &cell_seqs,
            query_pos: &query_pos,
            query_seq: &query_seq,
            causal: true,
            window: None,
        };
        for (causal, window) in [(true, None), (false, None), (true, Some(3))] {
            let args = AttentionArgs {
                causal,
                window,
                ..base
            };
            // The K dots of some variants accumulate in lanes (AVX2's).
            each_backend(
                &format!("attention {} causal {causal} window {window:?}", ty.name()),
                false,
                hd,
                |be| {
                    let mut out = vec![0.0; n * n_head * hd];
                    be.attention(&args, &mut out).unwrap();
                    out
                },
            );
        }
        // A window of one position: each query sees only the cell at its own
        // position (cells 7, 10 and 5), so its output is that cell's V row.
        let own = AttentionArgs {
            window: Some(1),
            ..base
        };
        let mut out = vec![0.0; n * n_head * hd];
        scalar()
            .create_backend(1)
            .unwrap()
            .attention(&own, &mut out)
            .unwrap();
        for (i, cell) in [7usize, 10, 5].into_iter().enumerate() {
            let mut v_row = vec![0.0; kv_w];
            let mut be = scalar().create_backend(1).unwrap();
            be.get_row(vb.view(), cell, &mut v_row).unwrap();
            for h in 0..n_head {
                let kv_head = h / (n_head / n_head_kv);
                let got = &out[(i * n_head + h) * hd..(i * n_head + h + 1) * hd];
                let want = &v_row[kv_head * hd..(kv_head + 1) * hd];
                for (g, w) in got.iter().zip(want) {
                    assert!(
                        (g - w).abs() <= 1e-3 * w.abs().max(1.0),
                        "{}: {g} vs {w}",
                        ty.name()
                    );
                }
            }
        }
        // A mismatched shape is an error naming it, not a silent zero.
        let bad = AttentionArgs {
            q: &q[..hd],
            ..base
        };
        let mut out = vec![0.0; hd];
        let mut be = scalar().create_backend(1).unwrap();
        assert!(be.attention(&bad, &mut out).is_err());
        let short = CacheRows::F32(&k[..kv_w], kv_w);
        let bad = AttentionArgs { k: short, ..bad };
        assert!(be.attention(&bad, &mut vec![0.0; n * n_head * hd]).is_err());
    }
}

/// Attention splits a token's heads into groups that share a KV head, and
/// splits the groups further when threads outnumber them; every split
/// gives each variant the bits it gives on one thread (one token, as in
/// generation, and a few, as in a batch of sequences).
#[test]
fn attention_is_the_same_on_any_number_of_threads() {
    let host = scalar().buffer_type();
    for (n_head, n_head_kv) in [(6, 2), (8, 2), (4, 4), (9, 3)] {
        // (ggml_test_values gives whole blocks of 32.)
        let hd = 64;
        let cells = 45;
        let kv_w = n_head_kv * hd;
        let k = ggml_test_values(71, cells * kv_w);
        let v = ggml_test_values(72, cells * kv_w);
        let cell_pos: Vec<i32> = (0..cells as i32).collect();
        let cell_seqs = vec![1u64; cells];
        for n in [1usize, 3] {
            let q = ggml_test_values(73, n * n_head * hd);
            let query_pos: Vec<i32> = (0..n as i32).map(|i| 44 - 9 * i).collect();
            let query_seq = vec![0u32; n];
            for ty in [CacheType::F16, CacheType::F32, CacheType::Q8_0] {
                let mut kb = CacheBuffer::new(host.as_ref(), ty, kv_w, cells).unwrap();
                let mut vb = CacheBuffer::new(host.as_ref(), ty, kv_w, cells).unwrap();
                let mut be = scalar().create_backend(1).unwrap();
                for c in 0..cells {
                    be.set_row(&k[c * kv_w..(c + 1) * kv_w], kb.view_mut(), c)
                        .unwrap();
                    be.set_row(&v[c * kv_w..(c + 1) * kv_w], vb.view_mut(), c)
                        .unwrap();
                }
                let args = AttentionArgs {
                    q: &q,
                    k: kb.view(),
                    v: vb.view(),
                    n_head,
                    n_head_kv,
                    head_dim: hd,
                    scale: 0.15,
                    cell_pos: &cell_pos,
                    cell_seqs: &cell_seqs,
                    query_pos: &query_pos,
                    query_seq: &query_seq,
                    causal: true,
                    window: None,
                };
                for (variant, device) in devices() {
                    // (A target without threads, wasm's single-threaded
                    // build, has no backend of several.)
                    let run = |threads: usize| {
                        let mut be = device.create_backend(threads).ok()?;
                        let mut out = vec![f32::NAN; n * n_head * hd];
                        be.attention(&args, &mut out).unwrap();
                        Some(out.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                    };
                    let one = run(1).expect("a backend of one thread");
                    for threads in [2, 3, 5] {
                        let Some(got) = run(threads) else { continue };
                        assert_eq!(
                            got,
                            one,
                            "{variant} {} {n_head}/{n_head_kv} heads, {n} tokens, {threads} threads",
                            ty.name()
                        );
                    }
                }
            }
        }
    }
}

/// An encoder's batch (f32 rows, not causal, each token seeing its whole
/// sequence) is attended in blocks of queries; the outputs follow the
/// attention's definition (computed here in f64) within a relative 1e-5,
/// equal bit for bit what each token gets alone (so an embedding does not
/// depend on the batch it was in), and are the same bits on every variant
/// and number of threads (the products are summed in one order
/// everywhere). Sequences of 36, 16 and 1 tokens (a block ends where a
/// sequence does and after 32 tokens), a token whose sequence has no cells
/// (zeros), grouped query heads and a head width that is no multiple of a
/// vector's.
#[test]
fn encoder_attention_in_blocks_follows_the_definition() {
    let (n_head, n_head_kv, hd) = (6, 2, 40);
    let kv_w = n_head_kv * hd;
    let seqs: Vec<u32> = [vec![0u32; 36], vec![1; 16], vec![2], vec![3]].concat();
    let n = seqs.len();
    // Every token but the last (sequence 3) is also a cell.
    let cells = n - 1;
    // Values in [-2, 2], as a model's activations (scores of a few units,
    // so f32 holds them to the test's tolerance).
    let mut rng = Rng::new(81);
    let mut values = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 22) as f32 - 2.0)
            .collect()
    };
    let (q, k, v) = (
        values(n * n_head * hd),
        values(cells * kv_w),
        values(cells * kv_w),
    );
    let pos: Vec<i32> = (0..n)
        .map(|i| seqs[..i].iter().filter(|&&s| s == seqs[i]).count() as i32)
        .collect();
    let cell_seqs: Vec<u64> = seqs[..cells].iter().map(|&s| 1u64 << s).collect();
    let args = |i: std::ops::Range<usize>| AttentionArgs {
        q: &q[i.start * n_head * hd..i.end * n_head * hd],
        k: CacheRows::F32(&k, kv_w),
        v: CacheRows::F32(&v, kv_w),
        n_head,
        n_head_kv,
        head_dim: hd,
        scale: 0.15,
        cell_pos: &pos[..cells],
        cell_seqs: &cell_seqs,
        query_pos: &pos[i.clone()],
        query_seq: &seqs[i],
        causal: false,
        window: None,
    };
    let all = args(0..n);
    let attend = |be: &mut dyn Backend, a: &AttentionArgs| {
        let mut out = vec![f32::NAN; a.q.len()];
        be.attention(a, &mut out).unwrap();
        out
    };
    let mut be = scalar().create_backend(1).unwrap();
    let blocked = attend(be.as_mut(), &all);
    for i in 0..n {
        let alone = attend(be.as_mut(), &args(i..i + 1));
        for h in 0..n_head {
            let kv = h / (n_head / n_head_kv);
            let qh = &q[(i * n_head + h) * hd..][..hd];
            let seen: Vec<usize> = (0..cells).filter(|&c| seqs[c] == seqs[i]).collect();
            let scores: Vec<f64> = seen
                .iter()
                .map(|&c| {
                    let kc = &k[c * kv_w + kv * hd..][..hd];
                    0.15 * qh
                        .iter()
                        .zip(kc)
                        .map(|(&x, &y)| x as f64 * y as f64)
                        .sum::<f64>()
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            for d in 0..hd {
                let want: f64 = seen
                    .iter()
                    .zip(&scores)
                    .map(|(&c, s)| (s - max).exp() / total * v[c * kv_w + kv * hd + d] as f64)
                    .sum();
                let at = (i * n_head + h) * hd + d;
                let got = blocked[at];
                assert!(
                    (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "token {i} head {h} value {d}: {got} vs {want}"
                );
                assert_eq!(
                    got.to_bits(),
                    alone[h * hd + d].to_bits(),
                    "token {i} head {h} value {d}: alone {} vs in the batch {got}",
                    alone[h * hd + d]
                );
            }
        }
    }
    for (variant, device) in devices() {
        for threads in [1, 2, 3] {
            let Ok(mut be) = device.create_backend(threads) else {
                continue;
            };
            let got = attend(be.as_mut(), &all);
            assert!(
                got.iter()
                    .zip(&blocked)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{variant} {threads} t: blocks differ from the scalar backend's"
            );
        }
    }
}

/// A GEMV kernel handed an output shorter than its group of rows refuses
/// (a panic before any write) instead of writing past the slice: this once
/// wrote 8 floats into a 1-element slice (AVX2), 4 on NEON.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn gemv_kernels_never_write_past_their_output() {
    use lamina::backend::cpu::repack::{BlockQ4_0x4, BlockQ4_0x8};
    use lamina::tensor::blocks::{Block, BlockQ8_0};
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    let x = vec![BlockQ8_0::zeroed(); 2];
    let g4 = vec![
        BlockQ4_0x4 {
            d: [half::f16::ONE; 4],
            qs: [0x99; 64]
        };
        2
    ];
    let g8 = vec![
        BlockQ4_0x8 {
            d: [half::f16::ONE; 8],
            qs: [0x99; 128]
        };
        2
    ];
    for variant in CpuVariant::compiled_variants() {
        if !variant.supported(cpu.features()) {
            continue;
        }
        let k = cpu.kernels_for(variant).unwrap();
        type Call<'a> = Box<dyn Fn(&mut [f32]) + 'a>;
        let calls: [(&str, Call); 3] = [
            (
                "x4i4",
                Box::new(|o: &mut [f32]| (k.gemv_q4_0_x4i4)(&g4, &x, o)),
            ),
            (
                "x4i8",
                Box::new(|o: &mut [f32]| (k.gemv_q4_0_x4i8)(&g4, &x, o)),
            ),
            (
                "x8i8",
                Box::new(|o: &mut [f32]| (k.gemv_q4_0_x8i8)(&g8, &x, o)),
            ),
        ];
        for (name, call) in calls {
            let mut guard = [7.0f32; 16];
            let r =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&mut guard[..1])));
            assert!(
                r.is_err(),
                "{variant} {name}: a 1-element output was accepted"
            );
            assert!(
                guard.iter().all(|&v| v == 7.0),
                "{variant} {name} wrote past its output"
            );
            let mut out = [0.0f32; 8];
            call(&mut out);
        }
    }
}

/// The causal convolution's sums against their scalar twin on every
/// variant, bit for bit (multiply then add, each channel's taps in the
/// twin's order), on channel counts around the vector widths and 2 to 5
/// taps; natively, taps that are not whole rows are refused.
#[test]
fn causal_conv_sums_equal_their_twin() {
    use lamina::backend::cpu::rows;
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    for n in [1usize, 3, 4, 7, 8, 9, 15, 16, 17, 64, 100] {
        for len in 2..=5 {
            let vals = ggml_test_values(90 + (n * len) as u64, (2 * len * n).div_ceil(32) * 32);
            let (taps, rest) = vals.split_at(len * n);
            let (state, rest) = rest.split_at((len - 1) * n);
            let x = &rest[..n];
            let mut want = vec![0.0f32; n];
            rows::causal_conv_sums(taps, state, x, &mut want);
            for variant in CpuVariant::compiled_variants() {
                if !variant.supported(cpu.features()) {
                    continue;
                }
                let kern = cpu.kernels_for(variant).unwrap();
                let mut got = vec![7.0f32; n];
                (kern.causal_conv)(taps, state, x, &mut got);
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "causal_conv {variant} n {n} len {len}"
                );
                // A panic aborts a wasm test, so the refusal is checked natively.
                if cfg!(not(target_family = "wasm")) {
                    let short = std::panic::catch_unwind(|| {
                        let mut out = vec![0.0f32; n];
                        (kern.causal_conv)(&taps[1..], state, x, &mut out)
                    });
                    assert!(short.is_err(), "{variant}: taps one short were accepted");
                }
            }
        }
    }
}

/// The gated DeltaNet's column steps against their scalar twin on every
/// variant, bit for bit (both dots keep eight lanes summed in one order,
/// and interleaved columns keep their own), on lengths around the vector
/// widths, 1 to 9 columns (the variants' groups and what is left over) and
/// several decays and strengths.
#[test]
fn delta_net_columns_equal_their_twin() {
    use lamina::backend::cpu::rows;
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    for d in [1usize, 3, 4, 7, 8, 9, 16, 31, 64, 100, 128] {
        for n_cols in [1usize, 2, 3, 4, 5, 8, 9] {
            let seed = 70 + (d * 10 + n_cols) as u64;
            let vals = ggml_test_values(seed, ((n_cols + 2) * d + n_cols).div_ceil(32) * 32);
            let (cols0, rest) = vals.split_at(n_cols * d);
            let (k, rest) = rest.split_at(d);
            let (q, rest) = rest.split_at(d);
            let v = &rest[..n_cols];
            for (decay, beta) in [(0.97f32, 0.6f32), (0.0, 1.0), (1.0, 0.05)] {
                let mut want = cols0.to_vec();
                let mut want_read = vec![0.0f32; n_cols];
                rows::delta_net_columns(&mut want, k, q, decay, v, beta, &mut want_read);
                for variant in CpuVariant::compiled_variants() {
                    if !variant.supported(cpu.features()) {
                        continue;
                    }
                    let kern = cpu.kernels_for(variant).unwrap();
                    let mut got = cols0.to_vec();
                    let mut got_read = vec![7.0f32; n_cols];
                    (kern.delta_net_columns)(&mut got, k, q, decay, v, beta, &mut got_read);
                    let what =
                        format!("delta_net_columns {variant} d {d} x {n_cols} decay {decay}");
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got_read), bits(&want_read), "{what}: reads");
                    assert_eq!(bits(&got), bits(&want), "{what}: columns");
                }
            }
        }
    }
}

/// The attention's kernels over cached rows against their scalar twins on
/// every variant, on head widths around the vector widths and scattered
/// cells: the f16 weighted sum and the f32 `axpy` bit for bit (multiply then
/// add, no fused multiply-add); each f16 score bit for bit equal to the
/// variant's own `vec_dot_f16` of the row and the query in f16.
#[test]
fn attention_row_kernels_equal_their_twins() {
    use half::f16;
    use lamina::backend::cpu::rows;
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for hd in [1usize, 7, 8, 9, 31, 40, 64, 100, 128] {
        let (stride, offset) = (3 * hd + 5, hd + 2);
        let cells: Vec<u32> = vec![0, 5, 2, 9, 9, 1, 7];
        let rows_f = ggml_test_values(50 + hd as u64, (10 * stride).div_ceil(32) * 32);
        let cache: Vec<f16> = rows_f.iter().map(|&x| f16::from_f32(x)).collect();
        let q: Vec<f32> = ggml_test_values(51, hd.div_ceil(32) * 32)[..hd]
            .iter()
            .map(|&x| f16::from_f32(x).to_f32())
            .collect();
        let q16: Vec<f16> = q.iter().map(|&x| f16::from_f32(x)).collect();
        let p: Vec<f32> = [0.5f32, 0.0, -1.5e-3, 17.0, 0.25, 3.0, -2.0].to_vec();
        let mut want_sum = vec![0.0f32; hd];
        rows::wsum_f16(&cache, stride, offset, &cells, &p, &mut want_sum);
        let v = &rows_f[..hd];
        let start = ggml_test_values(41, 32 * 4);
        let start = &start[..hd];
        let mut want32 = start.to_vec();
        rows::axpy_f32(0.37, v, &mut want32);
        for variant in CpuVariant::compiled_variants() {
            if !variant.supported(cpu.features()) {
                continue;
            }
            let k = cpu.kernels_for(variant).unwrap();
            let mut scores = vec![0.0f32; cells.len()];
            (k.scores_f16)(&cache, stride, offset, &cells, &q, &mut scores);
            for (j, &c) in cells.iter().enumerate() {
                let row = &cache[c as usize * stride + offset..][..hd];
                let want = (k.vec_dot_f16)(row, &q16);
                assert_eq!(
                    scores[j].to_bits(),
                    want.to_bits(),
                    "scores_f16 {variant} hd {hd} cell {c}"
                );
            }
            let mut got_sum = vec![f32::NAN; hd];
            (k.wsum_f16)(&cache, stride, offset, &cells, &p, &mut got_sum);
            assert_eq!(
                bits(&got_sum),
                bits(&want_sum),
                "wsum_f16 {variant} hd {hd}"
            );
            let mut got32 = start.to_vec();
            (k.axpy_f32)(0.37, v, &mut got32);
            assert_eq!(bits(&got32), bits(&want32), "axpy_f32 {variant} hd {hd}");
            // f32 rows (BERT's attention): each score the variant's own
            // `vec_dot_f32`, the weighted sum the twin's bit for bit.
            if let Some(scores_f32) = k.scores_f32 {
                let mut scores = vec![0.0f32; cells.len()];
                scores_f32(&rows_f, stride, offset, &cells, &q, &mut scores);
                for (j, &c) in cells.iter().enumerate() {
                    let row = &rows_f[c as usize * stride + offset..][..hd];
                    let want = (k.vec_dot_f32)(row, &q);
                    assert_eq!(
                        scores[j].to_bits(),
                        want.to_bits(),
                        "scores_f32 {variant} hd {hd}"
                    );
                }
            }
            if let Some(wsum_f32) = k.wsum_f32 {
                let mut want = vec![0.0f32; hd];
                rows::wsum_f32(&rows_f, stride, offset, &cells, &p, &mut want);
                let mut got = vec![f32::NAN; hd];
                wsum_f32(&rows_f, stride, offset, &cells, &p, &mut got);
                assert_eq!(bits(&got), bits(&want), "wsum_f32 {variant} hd {hd}");
            }
        }
    }
}

/// The kernels over cached rows for several heads sharing them (one KV
/// head), where a variant has them: each head's scores and weighted sum
/// equal the variant's single-head kernels bit for bit, for 1 to 5 heads
/// (past the widest group a kernel takes at once) and head widths around
/// the vector widths, over cells past the prefetch distance.
#[test]
fn attention_head_group_kernels_equal_one_head_at_a_time() {
    use half::f16;
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut tested = 0;
    for hd in [1usize, 8, 9, 16, 24, 40, 64, 100, 128] {
        let (stride, offset) = (3 * hd + 5, hd + 2);
        let cells: Vec<u32> = (0..40u32).map(|j| (j * 7) % 37).collect();
        let rows_f = ggml_test_values(60 + hd as u64, (38 * stride).div_ceil(32) * 32);
        let cache: Vec<f16> = rows_f.iter().map(|&x| f16::from_f32(x)).collect();
        for heads in 1..=5usize {
            let q: Vec<f32> = ggml_test_values(61, (heads * hd).div_ceil(32) * 32)[..heads * hd]
                .iter()
                .map(|&x| f16::from_f32(x).to_f32())
                .collect();
            let p: Vec<f32> = ggml_test_values(62, (heads * cells.len()).div_ceil(32) * 32)
                [..heads * cells.len()]
                .to_vec();
            for variant in CpuVariant::compiled_variants() {
                if !variant.supported(cpu.features()) {
                    continue;
                }
                let k = cpu.kernels_for(variant).unwrap();
                let n = cells.len();
                let mut want_scores = vec![0.0f32; heads * n];
                let mut want_sums = vec![0.0f32; heads * hd];
                for h in 0..heads {
                    let (q, p) = (&q[h * hd..(h + 1) * hd], &p[h * n..(h + 1) * n]);
                    (k.scores_f16)(
                        &cache,
                        stride,
                        offset,
                        &cells,
                        q,
                        &mut want_scores[h * n..][..n],
                    );
                    (k.wsum_f16)(
                        &cache,
                        stride,
                        offset,
                        &cells,
                        p,
                        &mut want_sums[h * hd..][..hd],
                    );
                }
                if let Some(scores_heads) = k.scores_f16_heads {
                    let mut got = vec![f32::NAN; heads * n];
                    scores_heads(&cache, stride, offset, &cells, &q, &mut got, heads);
                    let what = format!("scores_f16_heads {variant} hd {hd} heads {heads}");
                    assert_eq!(bits(&got), bits(&want_scores), "{what}");
                    tested += 1;
                }
                if let Some(wsum_heads) = k.wsum_f16_heads {
                    let mut got = vec![f32::NAN; heads * hd];
                    wsum_heads(&cache, stride, offset, &cells, &p, &mut got, heads);
                    let what = format!("wsum_f16_heads {variant} hd {hd} heads {heads}");
                    assert_eq!(bits(&got), bits(&want_sums), "{what}");
                    tested += 1;
                }
            }
        }
    }
    // Every x86_64 CPU the tests run on has AVX2, every aarch64 CPU NEON,
    // and the wasm tests are built with SIMD128; each table has them.
    if cfg!(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_feature = "simd128"
    )) {
        assert!(tested > 0, "no variant here has the head-group kernels");
    }
}

/// A cached row past the end of the cache is refused (a panic) before any
/// kernel reads it.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn attention_row_kernels_check_their_rows() {
    let cpu = CpuDevice::new(Some("scalar")).unwrap();
    for variant in CpuVariant::compiled_variants() {
        if !variant.supported(cpu.features()) {
            continue;
        }
        let k = cpu.kernels_for(variant).unwrap();
        let cache = vec![half::f16::ZERO; 64];
        let q = [0.0f32; 16];
        // Row 3 is 48..64: inside; row 4 would end at 80.
        let mut out = [0.0f32; 1];
        (k.scores_f16)(&cache, 16, 0, &[3], &q, &mut out);
        let past = std::panic::catch_unwind(|| {
            let mut out = [0.0f32; 1];
            (k.scores_f16)(&cache, 16, 0, &[4], &q, &mut out);
        });
        assert!(past.is_err(), "{variant}: scores_f16 read past the cache");
        let past = std::panic::catch_unwind(|| {
            let mut out = [0.0f32; 16];
            (k.wsum_f16)(&cache, 16, 1, &[3], &[1.0], &mut out);
        });
        assert!(past.is_err(), "{variant}: wsum_f16 read past the cache");
        if let Some(scores_heads) = k.scores_f16_heads {
            let q2 = [0.0f32; 32];
            scores_heads(&cache, 16, 0, &[3], &q2, &mut [0.0; 2], 2);
            let past = std::panic::catch_unwind(|| {
                scores_heads(&cache, 16, 0, &[4], &q2, &mut [0.0; 2], 2)
            });
            assert!(
                past.is_err(),
                "{variant}: scores_f16_heads read past the cache"
            );
            // Outputs for fewer heads than the queries hold: refused.
            let short = std::panic::catch_unwind(|| {
                scores_heads(&cache, 16, 0, &[3], &q2, &mut [0.0; 1], 2)
            });
            assert!(
                short.is_err(),
                "{variant}: scores_f16_heads took a short output"
            );
        }
        if let Some(wsum_heads) = k.wsum_f16_heads {
            wsum_heads(&cache, 16, 0, &[3], &[1.0, 1.0], &mut [0.0; 32], 2);
            let past = std::panic::catch_unwind(|| {
                wsum_heads(&cache, 16, 1, &[3], &[1.0, 1.0], &mut [0.0; 32], 2)
            });
            assert!(
                past.is_err(),
                "{variant}: wsum_f16_heads read past the cache"
            );
            let short = std::panic::catch_unwind(|| {
                wsum_heads(&cache, 16, 0, &[3], &[1.0], &mut [0.0; 32], 2)
            });
            assert!(
                short.is_err(),
                "{variant}: wsum_f16_heads took too few weights"
            );
        }
        let cache = vec![0.0f32; 64];
        if let Some(scores_f32) = k.scores_f32 {
            scores_f32(&cache, 16, 0, &[3], &q, &mut [0.0]);
            let past = std::panic::catch_unwind(|| scores_f32(&cache, 16, 0, &[4], &q, &mut [0.0]));
            assert!(past.is_err(), "{variant}: scores_f32 read past the cache");
        }
        if let Some(wsum_f32) = k.wsum_f32 {
            wsum_f32(&cache, 16, 0, &[3], &[1.0], &mut [0.0; 16]);
            let past =
                std::panic::catch_unwind(|| wsum_f32(&cache, 16, 1, &[3], &[1.0], &mut [0.0; 16]));
            assert!(past.is_err(), "{variant}: wsum_f32 read past the cache");
        }
    }
}
