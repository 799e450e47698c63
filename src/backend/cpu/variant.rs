//! The CPU device's variants: each states the features it needs and a score;
//! the best-scoring variant this machine supports is selected, and any
//! supported one can be forced by name.

use super::features::{CpuFeatures, Feature};
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuVariant {
    Scalar,
    Avx2,
    AvxVnni,
    Avx512,
    Neon,
    NeonDotprod,
    NeonI8mm,
    Sve,
    Simd128,
    RelaxedSimd,
}

impl CpuVariant {
    /// Every variant, whatever the target.
    pub const ALL: [CpuVariant; 10] = [
        CpuVariant::Scalar,
        CpuVariant::Avx2,
        CpuVariant::AvxVnni,
        CpuVariant::Avx512,
        CpuVariant::Neon,
        CpuVariant::NeonDotprod,
        CpuVariant::NeonI8mm,
        CpuVariant::Sve,
        CpuVariant::Simd128,
        CpuVariant::RelaxedSimd,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CpuVariant::Scalar => "scalar",
            CpuVariant::Avx2 => "avx2",
            CpuVariant::AvxVnni => "avx-vnni",
            CpuVariant::Avx512 => "avx512",
            CpuVariant::Neon => "neon",
            CpuVariant::NeonDotprod => "neon-dotprod",
            CpuVariant::NeonI8mm => "neon-i8mm",
            CpuVariant::Sve => "sve",
            CpuVariant::Simd128 => "simd128",
            CpuVariant::RelaxedSimd => "relaxed-simd",
        }
    }

    /// The features the variant's kernels use.
    pub fn requires(self) -> &'static [Feature] {
        match self {
            CpuVariant::Scalar => &[],
            CpuVariant::Avx2 => &[Feature::Avx2, Feature::Fma, Feature::F16c],
            CpuVariant::AvxVnni => &[Feature::Avx2, Feature::Fma, Feature::F16c, Feature::AvxVnni],
            CpuVariant::Avx512 => &[
                Feature::Avx2,
                Feature::Fma,
                Feature::F16c,
                Feature::Avx512f,
                Feature::Avx512bw,
                Feature::Avx512vl,
                Feature::Avx512vnni,
            ],
            CpuVariant::Neon => &[Feature::Neon],
            CpuVariant::NeonDotprod => &[Feature::Neon, Feature::Dotprod],
            CpuVariant::NeonI8mm => &[Feature::Neon, Feature::Dotprod, Feature::I8mm],
            CpuVariant::Sve => &[Feature::Neon, Feature::Sve],
            CpuVariant::Simd128 => &[Feature::Simd128],
            CpuVariant::RelaxedSimd => &[Feature::Simd128, Feature::RelaxedSimd],
        }
    }

    /// Whether this build contains the variant's kernels (they exist only for
    /// their own architecture).
    pub fn compiled(self) -> bool {
        match self {
            CpuVariant::Scalar => true,
            CpuVariant::Avx2 | CpuVariant::AvxVnni | CpuVariant::Avx512 => {
                cfg!(target_arch = "x86_64")
            }
            CpuVariant::Neon | CpuVariant::NeonDotprod | CpuVariant::NeonI8mm | CpuVariant::Sve => {
                cfg!(target_arch = "aarch64")
            }
            CpuVariant::Simd128 => cfg!(target_family = "wasm"),
            // Its instructions fail validation in engines without them, so
            // only a module built for them contains them.
            CpuVariant::RelaxedSimd => {
                cfg!(all(target_family = "wasm", target_feature = "relaxed-simd"))
            }
        }
    }

    /// Variants compiled into this build, in order.
    pub fn compiled_variants() -> Vec<CpuVariant> {
        CpuVariant::ALL
            .into_iter()
            .filter(|v| v.compiled())
            .collect()
    }

    pub fn missing(self, features: &CpuFeatures) -> Vec<Feature> {
        self.requires()
            .iter()
            .copied()
            .filter(|&f| !features.has(f))
            .collect()
    }

    pub fn supported(self, features: &CpuFeatures) -> bool {
        self.compiled() && self.missing(features).is_empty()
    }

    /// Higher is preferred. SVE ranks first where present: its kernels read the
    /// vector length at run time and use SDOT/SMMLA at any width.
    pub fn score(self) -> u32 {
        match self {
            CpuVariant::Scalar => 1,
            CpuVariant::Neon => 10,
            CpuVariant::NeonDotprod => 20,
            CpuVariant::NeonI8mm => 30,
            CpuVariant::Sve => 40,
            CpuVariant::Avx2 => 20,
            CpuVariant::AvxVnni => 25,
            CpuVariant::Avx512 => 30,
            CpuVariant::Simd128 => 10,
            CpuVariant::RelaxedSimd => 20,
        }
    }

    pub fn from_name(name: &str) -> Result<CpuVariant> {
        CpuVariant::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = CpuVariant::ALL.iter().map(|v| v.name()).collect();
                Error::InvalidArgument(format!(
                    "unknown CPU variant '{name}'; variants are: {}",
                    names.join(", ")
                ))
            })
    }

    /// The best supported variant.
    pub fn best(features: &CpuFeatures) -> CpuVariant {
        CpuVariant::ALL
            .into_iter()
            .filter(|v| v.supported(features))
            .max_by_key(|v| v.score())
            .unwrap_or(CpuVariant::Scalar)
    }

    /// `name` if this machine supports it; otherwise an error naming what is
    /// missing.
    pub fn force(name: &str, features: &CpuFeatures) -> Result<CpuVariant> {
        let v = CpuVariant::from_name(name)?;
        if !v.compiled() {
            return Err(Error::UnsupportedVariant {
                variant: v.name().to_string(),
                why: format!("it is not built for {}", std::env::consts::ARCH),
            });
        }
        let missing = v.missing(features);
        if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(|f| f.name()).collect();
            return Err(Error::UnsupportedVariant {
                variant: v.name().to_string(),
                why: format!("this CPU lacks {}", names.join(", ")),
            });
        }
        Ok(v)
    }
}

impl std::fmt::Display for CpuVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
