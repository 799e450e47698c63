//! The backend registry, in ggml-backend's layers: `Registry` enumerates
//! devices; a `Device` answers questions (memory, which ops it supports) and
//! creates `BufferType`s and `Backend`s; a `BufferType` allocates `Buffer`s; a
//! `Backend` runs work on its device. Today there is one device, the CPU, whose
//! kernel variant is picked from the features of the machine it runs on.

pub mod cpu;

use std::sync::Arc;

use crate::error::Result;
use crate::tensor::DType;

/// What kind of hardware a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Gpu,
    Accelerator,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Gpu => "gpu",
            DeviceKind::Accelerator => "accelerator",
        }
    }
}

/// An operation the model code may ask a device about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Matrix times activations, with weights of this type.
    MulMat(DType),
    /// Rows of an embedding table of this type.
    GetRows(DType),
    RmsNorm,
    LayerNorm,
    Rope,
    SoftMax,
    Add,
    Mul,
    Silu,
    Gelu,
}

/// Enumerates the devices of one kind of backend.
pub trait Registry {
    fn name(&self) -> &str;
    fn devices(&self) -> Vec<Arc<dyn Device>>;
}

/// One device.
pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> String;
    fn kind(&self) -> DeviceKind;
    /// (free, total) bytes of memory, where known. Default: unknown, (0, 0).
    fn memory(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Where this device keeps tensors.
    fn buffer_type(&self) -> Arc<dyn BufferType>;
    /// Whether the device can run `op` (the model code asks; it never guesses
    /// from the device's name).
    fn supports_op(&self, op: Op) -> bool;
    /// An execution stream on this device.
    fn create_backend(&self) -> Result<Box<dyn Backend>>;
}

/// A kind of memory and how to allocate it.
pub trait BufferType: Send + Sync {
    fn name(&self) -> &str;
    /// Alignment of every allocation, in bytes.
    fn alignment(&self) -> usize;
    /// Whether the CPU can read the memory directly. Default: yes.
    fn is_host(&self) -> bool {
        true
    }
    fn alloc(&self, size: usize) -> Result<Box<dyn Buffer>>;
}

/// A block of device memory.
pub trait Buffer: Send + Sync {
    fn size(&self) -> usize;
    fn buffer_type_name(&self) -> &str;
    /// The contents, for host buffers.
    fn as_bytes(&self) -> &[u8];
    fn as_bytes_mut(&mut self) -> &mut [u8];
}

/// An execution stream on a device.
pub trait Backend: Send {
    fn name(&self) -> String;
    fn device_name(&self) -> &str;
}
