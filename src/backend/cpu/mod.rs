//! The CPU device: feature detection, variant selection, kernel tables, a
//! host buffer type, the repacked-Q4_0 extra buffer type, and the backend
//! that runs every op with the selected variant's kernels.

pub mod act_rows;
mod attention;
mod attention_blocks;
mod backend;
pub mod features;
#[cfg(not(target_family = "wasm"))]
pub(crate) mod huge_pages;
// The SIMD group kernels' frame (x86 and aarch64 have group kernels).
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_family = "wasm"
))]
mod group_tiles;
pub mod interleaved;
mod iq4_dot;
pub mod kernels;
mod kquant_dot;
mod matmul;
mod products;
pub mod repack;
pub mod repack_q4_1;
pub mod repack_q4_k;
pub mod repack_q5_0;
pub mod repack_q6_k;
pub mod repack_q8_0;
pub mod rows;
pub mod scalar;
mod touch_ahead;
pub mod variant;
pub mod widen;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avxvnni;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_groups;
#[cfg(target_arch = "aarch64")]
mod neon_i8mm;
#[cfg(target_arch = "aarch64")]
mod neon_q4_0;
#[cfg(target_arch = "aarch64")]
mod neon_q8_0;
#[cfg(target_family = "wasm")]
mod relaxed_q4_k;
#[cfg(target_family = "wasm")]
mod relaxed_q6_k;
#[cfg(target_family = "wasm")]
mod relaxed_simd;
#[cfg(target_family = "wasm")]
mod simd128;
#[cfg(target_arch = "aarch64")]
mod sve;
#[cfg(target_arch = "aarch64")]
mod sve256;
#[cfg(target_family = "wasm")]
mod wasm_q5_0;

use std::sync::Arc;

pub use backend::CpuBackend;
pub use features::{CpuFeatures, Feature};
#[cfg(not(target_family = "wasm"))]
pub use huge_pages::huge_page_size;
pub use kernels::{Kernels, SupportedVariant};
pub use variant::CpuVariant;

use super::matrix::{Matrix, Repacked, WeightSource};
use super::{Backend, Buffer, BufferType, Device, DeviceKind, Op, Registry};
use crate::error::{Error, Result};
use crate::tensor::blocks::{
    as_blocks, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ6K, BlockQ8_0,
};
use crate::tensor::DType;

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
#[derive(Clone)]
pub struct CpuDevice {
    features: CpuFeatures,
    kernels: Kernels,
    forced: bool,
    /// Where matrices read in place are copied, in huge pages.
    #[cfg(not(target_family = "wasm"))]
    arena: Arc<huge_pages::WeightArena>,
}

impl CpuDevice {
    pub fn new(forced: Option<&str>) -> Result<CpuDevice> {
        let from_env = std::env::var(VARIANT_ENV).ok().filter(|s| !s.is_empty());
        let choice = forced.map(str::to_string).or(from_env);
        let supported = match &choice {
            Some(name) => SupportedVariant::check(CpuVariant::from_name(name)?)?,
            None => SupportedVariant::best(),
        };
        Ok(CpuDevice {
            features: supported.features().clone(),
            kernels: Kernels::for_variant(supported),
            forced: choice.is_some(),
            #[cfg(not(target_family = "wasm"))]
            arena: Arc::default(),
        })
    }

    /// This CPU with another variant (an error naming the missing features
    /// when the machine lacks them).
    pub fn with_variant(&self, variant: CpuVariant) -> Result<CpuDevice> {
        Ok(CpuDevice {
            kernels: Kernels::for_variant(SupportedVariant::check(variant)?),
            features: self.features.clone(),
            forced: true,
            #[cfg(not(target_family = "wasm"))]
            arena: self.arena.clone(),
        })
    }

    /// The device as the model code takes it.
    pub fn shared(&self) -> Arc<dyn Device> {
        Arc::new(self.clone())
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
        Ok(Kernels::for_variant(SupportedVariant::check(variant)?))
    }

    /// `src` as the device holds it: repacked where the variant has a
    /// layout for its type, else copied into huge pages, else read in place.
    fn place_matrix(&self, src: &WeightSource) -> Result<Matrix> {
        if !self.supports_op(Op::MulMat(src.dtype)) {
            return Err(Error::InvalidArgument(format!(
                "tensor '{}' is {}: the CPU backend has no matrix product for {} weights",
                src.name, src.dtype, src.dtype
            )));
        }
        let mapped = Matrix::mapped(src)?;
        match self.kernels.repack {
            Some(layout) if src.dtype == DType::Q4_0 && src.rows % layout.rows() == 0 => {
                let blocks = as_blocks::<BlockQ4_0>(src.bytes())?;
                let packed = repack::RepackedQ4_0::new(blocks, src.rows, src.cols, layout)?;
                Ok(Matrix::repacked(src, Repacked::Q4_0(packed)))
            }
            _ if src.dtype == DType::Q5_0
                && self.kernels.gemm_q5_0_x8.is_some()
                && src.rows % interleaved::ROWS == 0 =>
            {
                let blocks = as_blocks::<BlockQ5_0>(src.bytes())?;
                let packed = repack_q5_0::RepackedQ5_0::new(blocks, src.rows, src.cols)?;
                Ok(Matrix::repacked(src, Repacked::Q5_0(packed)))
            }
            _ if src.dtype == DType::Q4_K
                && self.kernels.gemm_q4_k_x8.is_some()
                && src.rows % interleaved::ROWS == 0 =>
            {
                let blocks = as_blocks::<BlockQ4K>(src.bytes())?;
                let packed = repack_q4_k::RepackedQ4K::new(blocks, src.rows, src.cols)?;
                Ok(Matrix::repacked(src, Repacked::Q4K(packed)))
            }
            _ if src.dtype == DType::Q6_K
                && self.kernels.gemm_q6_k_x8.is_some()
                && src.rows % interleaved::ROWS == 0 =>
            {
                let blocks = as_blocks::<BlockQ6K>(src.bytes())?;
                let packed = repack_q6_k::RepackedQ6K::new(blocks, src.rows, src.cols)?;
                Ok(Matrix::repacked(src, Repacked::Q6K(packed)))
            }
            // Runs of four where the variant has kernels for them
            // (neon-dotprod), else of eight.
            _ if src.dtype == DType::Q8_0
                && self.kernels.gemm_q8_0_x8i4.is_some()
                && src.rows % interleaved::ROWS == 0 =>
            {
                let blocks = as_blocks::<BlockQ8_0>(src.bytes())?;
                let packed = repack_q8_0::RepackedQ8_0x8i4::new(blocks, src.rows, src.cols)?;
                Ok(Matrix::repacked(src, Repacked::Q8_0x8i4(packed)))
            }
            _ if src.dtype == DType::Q8_0
                && self.kernels.gemm_q8_0_x8.is_some()
                && src.rows % interleaved::ROWS == 0 =>
            {
                let blocks = as_blocks::<BlockQ8_0>(src.bytes())?;
                let packed = repack_q8_0::RepackedQ8_0::new(blocks, src.rows, src.cols)?;
                Ok(Matrix::repacked(src, Repacked::Q8_0(packed)))
            }
            _ if src.dtype == DType::Q4_1
                && self.kernels.gemm_q4_1_x8.is_some()
                && src.rows % interleaved::ROWS == 0 =>
            {
                let blocks = as_blocks::<BlockQ4_1>(src.bytes())?;
                let packed = repack_q4_1::RepackedQ4_1::new(blocks, src.rows, src.cols)?;
                Ok(Matrix::repacked(src, Repacked::Q4_1(packed)))
            }
            _ => Ok(self.in_huge_pages(src).unwrap_or(mapped)),
        }
    }

    /// A matrix read in place, copied into huge pages where the system has
    /// them (`huge_pages`): its products then stream it with a TLB entry per
    /// 2 MB. None where it stays in the file's mapping.
    fn in_huge_pages(&self, src: &WeightSource) -> Option<Matrix> {
        #[cfg(not(target_family = "wasm"))]
        {
            let copy = self.arena.copy(src.file, src.bytes())?;
            Some(Matrix::copied(src, copy))
        }
        #[cfg(target_family = "wasm")]
        {
            let _ = src;
            None
        }
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

    fn extra_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        self.kernels
            .repack
            .map(|layout| Arc::new(RepackBufferType(layout)) as Arc<dyn BufferType>)
    }

    fn supports_op(&self, op: Op) -> bool {
        match op {
            // Products need a dot-product kernel for the weight type (every
            // variant has every type the scalar table has).
            Op::MulMat(dtype) => matmul::supports(dtype),
            // Rows of any type are dequantized.
            Op::GetRows(_) => true,
            Op::RmsNorm
            | Op::LayerNorm
            | Op::Rope
            | Op::Attention(_)
            | Op::Add
            | Op::Mul
            | Op::Silu
            | Op::Gelu
            | Op::Tanh => true,
        }
    }

    fn bind_matrix(&self, src: WeightSource) -> Result<Matrix> {
        let matrix = self.place_matrix(&src)?;
        // With a copy of its own, the device no longer reads the file's
        // pages: the process's resident memory stops counting them twice
        // (the page cache keeps them; a tied embedding's lookups fault the
        // rows they read back in).
        if matrix.is_copied() {
            src.file.release_pages(src.part, src.range.clone());
        }
        Ok(matrix)
    }

    fn bind_table(&self, src: WeightSource) -> Result<Matrix> {
        if !self.supports_op(Op::GetRows(src.dtype)) {
            return Err(Error::InvalidArgument(format!(
                "tensor '{}' is {}: the CPU backend cannot read its rows",
                src.name, src.dtype
            )));
        }
        Matrix::mapped(&src)
    }

    fn create_backend(&self, n_threads: usize) -> Result<Box<dyn Backend>> {
        Ok(Box::new(CpuBackend::new(self.kernels, n_threads)?))
    }
}

/// The repacked Q4_0 layout of a variant, as an extra buffer type.
struct RepackBufferType(repack::RepackLayout);

impl BufferType for RepackBufferType {
    fn name(&self) -> &str {
        match self.0 {
            repack::RepackLayout::X4I4 => "CPU_REPACK_Q4_0_4x4",
            repack::RepackLayout::X4I8 => "CPU_REPACK_Q4_0_4x8",
            repack::RepackLayout::X8I8 => "CPU_REPACK_Q4_0_8x8",
        }
    }

    fn alignment(&self) -> usize {
        64
    }

    fn alloc(&self, size: usize) -> Result<Box<dyn Buffer>> {
        HostBufferType.alloc(size)
    }
}

/// Host memory, aligned for every kernel's loads.
pub struct HostBufferType;

/// Every allocation's alignment (a cache line; enough for every kernel).
const HOST_ALIGN: usize = 64;

impl BufferType for HostBufferType {
    fn name(&self) -> &str {
        "CPU"
    }

    fn alignment(&self) -> usize {
        HOST_ALIGN
    }

    fn alloc(&self, size: usize) -> Result<Box<dyn Buffer>> {
        let too_large =
            || Error::InvalidArgument(format!("cannot allocate a CPU buffer of {size} bytes"));
        let layout = std::alloc::Layout::from_size_align(size.max(1), HOST_ALIGN)
            .map_err(|_| too_large())?;
        // Zeroed by the allocator: fresh pages from the system stay
        // untouched until used (a large KV cache costs nothing up front).
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).ok_or_else(too_large)?;
        Ok(Box::new(HostBuffer { ptr, layout, size }))
    }
}

/// `size` zeroed bytes at a 64-byte aligned address, owned.
struct HostBuffer {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    size: usize,
}

// SAFETY: the buffer owns its memory exclusively (no aliasing pointer is
// kept anywhere); shared access only reads through `&self`.
unsafe impl Send for HostBuffer {}
// SAFETY: as above: `&HostBuffer` gives only `&[u8]`.
unsafe impl Sync for HostBuffer {}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl Buffer for HostBuffer {
    fn size(&self) -> usize {
        self.size
    }

    fn buffer_type_name(&self) -> &str {
        "CPU"
    }

    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `size` (<= the layout's size) initialized
        // (zeroed) bytes owned by this buffer for its whole life.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.size) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.size) }
    }
}
