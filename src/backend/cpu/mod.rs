//! The CPU device: feature detection, variant selection, kernel tables, and a
//! host buffer type.

pub mod features;
pub mod kernels;
mod kquant_dot;
pub mod repack;
pub mod scalar;
pub mod variant;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "aarch64")]
pub mod neon;
#[cfg(target_arch = "wasm32")]
pub mod simd128;
#[cfg(target_arch = "aarch64")]
pub mod sve;

use std::sync::Arc;

pub use features::{CpuFeatures, Feature};
pub use kernels::Kernels;
pub use variant::CpuVariant;

use super::{Backend, Buffer, BufferType, Device, DeviceKind, Op, Registry};
use crate::error::{Error, Result};

/// The environment variable that forces a variant when no explicit choice is made.
pub const VARIANT_ENV: &str = "LAMINA_CPU_VARIANT";

/// The CPU registry: one device.
pub struct CpuRegistry {
    device: Arc<CpuDevice>,
}

impl CpuRegistry {
    /// `forced`: a variant name from the API or `--cpu-variant`; otherwise
    /// `LAMINA_CPU_VARIANT`; otherwise the best the machine supports.
    pub fn new(forced: Option<&str>) -> Result<CpuRegistry> {
        Ok(CpuRegistry {
            device: Arc::new(CpuDevice::new(forced)?),
        })
    }

    pub fn cpu(&self) -> &Arc<CpuDevice> {
        &self.device
    }
}

impl Registry for CpuRegistry {
    fn name(&self) -> &str {
        "CPU"
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        vec![self.device.clone()]
    }
}

/// The CPU, with the kernel variant selected for it.
pub struct CpuDevice {
    features: CpuFeatures,
    kernels: Kernels,
    forced: bool,
}

impl CpuDevice {
    pub fn new(forced: Option<&str>) -> Result<CpuDevice> {
        let features = CpuFeatures::detect();
        let from_env = std::env::var(VARIANT_ENV).ok().filter(|s| !s.is_empty());
        let choice = forced.map(str::to_string).or(from_env);
        let variant = match &choice {
            Some(name) => CpuVariant::force(name, &features)?,
            None => CpuVariant::best(&features),
        };
        Ok(CpuDevice {
            kernels: Kernels::for_supported_variant(variant, &features),
            features,
            forced: choice.is_some(),
        })
    }

    pub fn features(&self) -> &CpuFeatures {
        &self.features
    }

    pub fn variant(&self) -> CpuVariant {
        self.kernels.variant
    }

    /// Whether the variant was forced rather than chosen by score.
    pub fn forced(&self) -> bool {
        self.forced
    }

    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// The kernel table of another supported variant (for tests and benchmarks).
    pub fn kernels_for(&self, variant: CpuVariant) -> Result<Kernels> {
        CpuVariant::force(variant.name(), &self.features)?;
        Ok(Kernels::for_supported_variant(variant, &self.features))
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        "CPU"
    }

    fn description(&self) -> String {
        format!(
            "{} CPU ({}), kernels: {}",
            std::env::consts::ARCH,
            if self.features.present.is_empty() {
                "no SIMD".to_string()
            } else {
                self.features.describe().join(" ")
            },
            self.variant()
        )
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        Arc::new(HostBufferType)
    }

    fn supports_op(&self, _op: Op) -> bool {
        // Every op, for every type the engine can dequantize: the scalar
        // kernels are the CPU's fallback for anything a variant lacks.
        true
    }

    fn create_backend(&self) -> Result<Box<dyn Backend>> {
        Ok(Box::new(CpuBackend {
            kernels: self.kernels,
        }))
    }
}

/// Host memory, aligned for every kernel's loads.
pub struct HostBufferType;

/// Allocations are made of these, so they are 64-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct CacheLine([u8; 64]);

impl BufferType for HostBufferType {
    fn name(&self) -> &str {
        "CPU"
    }

    fn alignment(&self) -> usize {
        64
    }

    fn alloc(&self, size: usize) -> Result<Box<dyn Buffer>> {
        let lines = size.div_ceil(64);
        let mut storage = Vec::new();
        storage.try_reserve_exact(lines).map_err(|_| {
            Error::InvalidArgument(format!("cannot allocate a CPU buffer of {size} bytes"))
        })?;
        storage.resize(lines, CacheLine([0; 64]));
        Ok(Box::new(HostBuffer { storage, size }))
    }
}

struct HostBuffer {
    storage: Vec<CacheLine>,
    size: usize,
}

impl Buffer for HostBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn buffer_type_name(&self) -> &str {
        "CPU"
    }

    fn as_bytes(&self) -> &[u8] {
        // SAFETY: CacheLine is 64 plain bytes; `size` <= 64 * lines.
        unsafe { std::slice::from_raw_parts(self.storage.as_ptr().cast(), self.size) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, with exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.storage.as_mut_ptr().cast(), self.size) }
    }
}

/// Runs work on the CPU with the selected variant's kernels.
pub struct CpuBackend {
    kernels: Kernels,
}

impl CpuBackend {
    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("CPU ({})", self.kernels.variant)
    }

    fn device_name(&self) -> &str {
        "CPU"
    }
}
