//! What this CPU can do, detected once at run time: aarch64 hwcaps (NEON,
//! dotprod, i8mm, SVE and its vector length), x86 cpuid (AVX2, FMA, F16C,
//! AVX-512 F/BW/VL and VNNI, AVX-VNNI). On
//! wasm32 nothing can be asked at run time: the features are what the module
//! was compiled with (simd128).

use std::fmt;

/// One CPU feature a kernel variant can depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    Avx2,
    Fma,
    F16c,
    Avx512f,
    Avx512bw,
    Avx512vl,
    Avx512vnni,
    AvxVnni,
    Neon,
    Dotprod,
    I8mm,
    Sve,
    Simd128,
    RelaxedSimd,
}

impl Feature {
    pub fn name(self) -> &'static str {
        match self {
            Feature::Avx2 => "avx2",
            Feature::Fma => "fma",
            Feature::F16c => "f16c",
            Feature::Avx512f => "avx512f",
            Feature::Avx512bw => "avx512bw",
            Feature::Avx512vl => "avx512vl",
            Feature::Avx512vnni => "avx512vnni",
            Feature::AvxVnni => "avxvnni",
            Feature::Neon => "neon",
            Feature::Dotprod => "dotprod",
            Feature::I8mm => "i8mm",
            Feature::Sve => "sve",
            Feature::Simd128 => "simd128",
            Feature::RelaxedSimd => "relaxed-simd",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The features present, and the SVE vector length in bytes (0 without SVE).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    pub present: Vec<Feature>,
    pub sve_bytes: usize,
}

impl CpuFeatures {
    pub fn has(&self, f: Feature) -> bool {
        self.present.contains(&f)
    }

    /// The features of the machine this runs on.
    pub fn detect() -> CpuFeatures {
        #[allow(unused_mut)] // filled on x86_64 and aarch64 only
        let mut present = Vec::new();
        #[allow(unused_mut)] // set on aarch64 only
        let mut sve_bytes = 0;
        #[cfg(target_arch = "x86_64")]
        {
            let checks = [
                (Feature::Avx2, std::arch::is_x86_feature_detected!("avx2")),
                (Feature::Fma, std::arch::is_x86_feature_detected!("fma")),
                (Feature::F16c, std::arch::is_x86_feature_detected!("f16c")),
                (
                    Feature::Avx512f,
                    std::arch::is_x86_feature_detected!("avx512f"),
                ),
                (
                    Feature::Avx512bw,
                    std::arch::is_x86_feature_detected!("avx512bw"),
                ),
                (
                    Feature::Avx512vl,
                    std::arch::is_x86_feature_detected!("avx512vl"),
                ),
                (
                    Feature::Avx512vnni,
                    std::arch::is_x86_feature_detected!("avx512vnni"),
                ),
                (
                    Feature::AvxVnni,
                    std::arch::is_x86_feature_detected!("avxvnni"),
                ),
            ];
            present.extend(checks.iter().filter(|c| c.1).map(|c| c.0));
        }
        #[cfg(target_arch = "aarch64")]
        {
            let checks = [
                (
                    Feature::Neon,
                    std::arch::is_aarch64_feature_detected!("neon"),
                ),
                (
                    Feature::Dotprod,
                    std::arch::is_aarch64_feature_detected!("dotprod"),
                ),
                (
                    Feature::I8mm,
                    std::arch::is_aarch64_feature_detected!("i8mm"),
                ),
                (Feature::Sve, std::arch::is_aarch64_feature_detected!("sve")),
            ];
            present.extend(checks.iter().filter(|c| c.1).map(|c| c.0));
            if present.contains(&Feature::Sve) {
                // SAFETY: SVE was detected just above (`vector_bytes` needs it).
                sve_bytes = unsafe { super::sve::vector_bytes() };
            }
        }
        // wasm has no run-time detection: an engine that instantiated the
        // module validated every instruction in it, so the module's own
        // target features are present (the JS loader picks the module).
        #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
        present.push(Feature::Simd128);
        #[cfg(all(target_family = "wasm", target_feature = "relaxed-simd"))]
        present.push(Feature::RelaxedSimd);
        CpuFeatures { present, sve_bytes }
    }

    /// Names of the features present, plus the SVE width ("sve256").
    pub fn describe(&self) -> Vec<String> {
        self.present
            .iter()
            .map(|f| match f {
                Feature::Sve => format!("sve{}", self.sve_bytes * 8),
                f => f.name().to_string(),
            })
            .collect()
    }
}
