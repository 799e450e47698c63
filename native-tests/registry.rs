//! The backend registry: feature detection, the selected variant (checked
//! against the CPU model scripts/test.sh runs under), forcing, and errors.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use lamina::backend::cpu::{CpuDevice, CpuFeatures, CpuRegistry, CpuVariant, Feature};
use lamina::backend::{DeviceKind, Registry};
use lamina::Error;

/// What scripts/test.sh says this run's CPU is (native and qemu runs set
/// LAMINA_EXPECT_VARIANT and, for SVE, LAMINA_EXPECT_SVE_BITS); a wasm module
/// selects the best instruction set it was built with: relaxed-simd, else
/// simd128.
fn expected() -> Option<(String, usize)> {
    if cfg!(target_arch = "wasm32") {
        let variant = if cfg!(target_feature = "relaxed-simd") {
            "relaxed-simd"
        } else if cfg!(target_feature = "simd128") {
            "simd128"
        } else {
            "scalar"
        };
        return Some((variant.into(), 0));
    }
    let variant = std::env::var("LAMINA_EXPECT_VARIANT").ok()?;
    let bits = std::env::var("LAMINA_EXPECT_SVE_BITS")
        .ok()
        .map(|b| b.parse().expect("LAMINA_EXPECT_SVE_BITS is a number"))
        .unwrap_or(0);
    Some((variant, bits))
}

#[test]
fn selects_the_expected_variant_for_this_cpu() {
    let device = CpuDevice::new(None).unwrap();
    let features = device.features().clone();
    // The selection is the best-scoring supported variant...
    assert_eq!(device.variant(), CpuVariant::best(&features));
    assert!(device.variant().supported(&features));
    // ...and for the CPU models the test command runs under, the named one.
    match expected() {
        Some((variant, sve_bits)) => {
            assert_eq!(
                device.variant().name(),
                variant,
                "features: {:?}",
                features.describe()
            );
            assert_eq!(features.sve_bytes * 8, sve_bits, "SVE vector length");
        }
        None => eprintln!(
            "LAMINA_EXPECT_VARIANT not set: selected {} for {:?}",
            device.variant(),
            features.describe()
        ),
    }
}

#[test]
fn forcing_a_variant() {
    let features = CpuFeatures::detect();
    for v in CpuVariant::compiled_variants() {
        let forced = CpuDevice::new(Some(v.name()));
        if v.supported(&features) {
            let device = forced.unwrap();
            assert_eq!(device.variant(), v);
            assert!(device.forced());
        } else {
            let e = forced.err().expect("unsupported variant refused");
            assert!(matches!(e, Error::UnsupportedVariant { .. }), "{e}");
            assert!(e.to_string().contains("this CPU lacks"), "{e}");
        }
    }
    // Scalar runs everywhere.
    assert_eq!(
        CpuDevice::new(Some("scalar")).unwrap().variant(),
        CpuVariant::Scalar
    );
    // A variant of another architecture names the problem.
    let foreign = if cfg!(target_arch = "x86_64") {
        "neon-i8mm"
    } else {
        "avx2"
    };
    let e = CpuDevice::new(Some(foreign)).err().unwrap();
    assert!(e.to_string().contains("is not built for"), "{e}");
    let e = CpuDevice::new(Some("avx10")).err().unwrap();
    assert_eq!(
        e.to_string(),
        "invalid argument: unknown CPU variant 'avx10'; variants are: scalar, avx2, avx-vnni, avx512, neon, neon-dotprod, neon-i8mm, sve, simd128, relaxed-simd"
    );
}

#[test]
fn missing_features_are_named() {
    let none = CpuFeatures::default();
    for v in CpuVariant::compiled_variants() {
        if v != CpuVariant::Scalar {
            assert!(!v.supported(&none));
            let e = CpuVariant::force(v.name(), &none).unwrap_err().to_string();
            for f in v.requires() {
                assert!(e.contains(f.name()), "{e}");
            }
        }
    }
    assert_eq!(CpuVariant::best(&none), CpuVariant::Scalar);
    // Selection by score on a described machine.
    let arm = |fs: &[Feature], sve_bytes| CpuFeatures {
        present: fs.to_vec(),
        sve_bytes,
    };
    if cfg!(target_arch = "aarch64") {
        use Feature::*;
        assert_eq!(CpuVariant::best(&arm(&[Neon], 0)), CpuVariant::Neon);
        assert_eq!(
            CpuVariant::best(&arm(&[Neon, Dotprod], 0)),
            CpuVariant::NeonDotprod
        );
        assert_eq!(
            CpuVariant::best(&arm(&[Neon, Dotprod, I8mm], 0)),
            CpuVariant::NeonI8mm
        );
        assert_eq!(
            CpuVariant::best(&arm(&[Neon, Dotprod, I8mm, Sve], 32)),
            CpuVariant::Sve
        );
    }
}

#[test]
fn registry_layers() {
    let registry = CpuRegistry::new(Some("scalar")).unwrap();
    assert_eq!(registry.name(), "CPU");
    let devices = registry.devices();
    assert_eq!(devices.len(), 1);
    let cpu = &devices[0];
    assert_eq!(cpu.kind(), DeviceKind::Cpu);
    assert!(
        cpu.description().contains("kernels: scalar"),
        "{}",
        cpu.description()
    );
    let buft = cpu.buffer_type();
    assert!(buft.is_host());
    let mut buf = buft.alloc(1000).unwrap();
    assert_eq!(buf.size(), 1000);
    assert_eq!(buf.as_bytes().as_ptr() as usize % buft.alignment(), 0);
    buf.as_bytes_mut()[999] = 7;
    assert_eq!(buf.as_bytes()[999], 7);
    assert!(buft.alloc(usize::MAX / 2).is_err());
    // The single-thread wasm build has no pool: one thread there.
    let threads = if cfg!(target_arch = "wasm32") { 1 } else { 2 };
    let backend = cpu.create_backend(threads).unwrap();
    assert_eq!(backend.name(), "CPU (scalar)");
    assert_eq!(backend.n_threads(), threads);
    // The device tells the truth about what it cannot multiply with.
    use lamina::backend::Op;
    use lamina::tensor::DType;
    for t in [
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_0,
        DType::Q8_0,
        DType::Q4_K,
        DType::Q6_K,
        DType::IQ4_NL,
        DType::IQ4_XS,
        DType::F16,
        DType::BF16,
        DType::F32,
    ] {
        assert!(cpu.supports_op(Op::MulMat(t)), "{t}");
    }
    for t in [DType::Q8_1, DType::Q8_K] {
        assert!(!cpu.supports_op(Op::MulMat(t)), "{t}");
        assert!(cpu.supports_op(Op::GetRows(t)), "{t}");
    }
}
