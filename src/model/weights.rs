//! Binding a model's weights by name: matrices bound on the device (read in
//! place from the file or repacked by it), small vectors (norms, biases) read
//! once as f32, and load progress.

use std::ops::Range;
use std::sync::Arc;

use crate::backend::{Device, Matrix, WeightSource};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::tensor::DType;

/// A tensor of the file: its type, its shape as rows x columns, its bytes.
#[derive(Clone, Debug)]
pub(crate) struct Tensor {
    pub name: String,
    pub dtype: DType,
    pub rows: usize,
    pub cols: usize,
    /// Where the bytes are: the file's part (0 unless split) and the range
    /// within it.
    pub part: usize,
    pub range: Range<usize>,
}

impl Tensor {
    /// The tensor's bytes in `file` (its own file: checked at parse time).
    pub fn bytes<'f>(&self, file: &'f GgufFile) -> &'f [u8] {
        file.part_bytes(self.part)
            .get(self.range.clone())
            .unwrap_or(&[])
    }
}

pub(crate) fn tensor(file: &GgufFile, name: &str) -> Result<Tensor> {
    let info = file.tensor(name).ok_or_else(|| Error::MissingTensor {
        name: name.to_string(),
    })?;
    let dtype = DType::of_tensor(info.ggml_type, name)?;
    let cols = info.shape.first().copied().unwrap_or(1) as usize;
    let rows = info.shape.iter().skip(1).product::<u64>() as usize;
    let (part, range) = file.tensor_location(info)?;
    Ok(Tensor {
        name: name.to_string(),
        dtype,
        rows,
        cols,
        part,
        range,
    })
}

/// `t`, checked to be `rows` x `cols`.
pub(crate) fn shaped(t: Tensor, rows: usize, cols: usize) -> Result<Tensor> {
    if (t.rows, t.cols) != (rows, cols) {
        return Err(Error::InvalidArgument(format!(
            "tensor '{}' is {}x{}, expected {rows}x{cols}",
            t.name, t.rows, t.cols
        )));
    }
    if rows == 0 || cols == 0 {
        return Err(Error::InvalidArgument(format!(
            "tensor '{}' is empty",
            t.name
        )));
    }
    Ok(t)
}

fn source<'a>(file: &'a Arc<GgufFile>, t: &'a Tensor) -> WeightSource<'a> {
    WeightSource {
        name: &t.name,
        dtype: t.dtype,
        rows: t.rows,
        cols: t.cols,
        file,
        part: t.part,
        range: t.range.clone(),
    }
}

/// A weight matrix bound on `device` for products.
pub(crate) fn matrix(device: &dyn Device, file: &Arc<GgufFile>, t: &Tensor) -> Result<Matrix> {
    device.bind_matrix(source(file, t))
}

/// The tensor `name`, shaped `rows` x `cols`, bound on `device` for
/// products.
pub(crate) fn named_matrix(
    device: &dyn Device,
    file: &Arc<GgufFile>,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Matrix> {
    matrix(device, file, &shaped(tensor(file, name)?, rows, cols)?)
}

/// A table of rows read by `get_rows` (and by products, as a tied output),
/// kept as in the file.
pub(crate) fn table(device: &dyn Device, file: &Arc<GgufFile>, t: &Tensor) -> Result<Matrix> {
    device.bind_table(source(file, t))
}

/// The small tensor `name` (`len` values) as f32, read once at load.
pub(crate) fn named_vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    vector(file, &tensor(file, name)?, len)
}

/// A small tensor (a norm's weights) as f32, read once at load.
pub(crate) fn vector(file: &GgufFile, t: &Tensor, len: usize) -> Result<Vec<f32>> {
    if t.cols * t.rows != len {
        return Err(Error::InvalidArgument(format!(
            "tensor '{}' has {} values, expected {len}",
            t.name,
            t.cols * t.rows
        )));
    }
    let mut v = vec![0.0; len];
    crate::tensor::convert::dequantize(t.dtype, t.bytes(file), &mut v)?;
    Ok(v)
}

/// What loading reports and whether it goes on.
pub type Progress<'a> = &'a mut dyn FnMut(f32) -> bool;

/// Load progress by weight bytes: `step(bytes)` after each part; the callback
/// stops the load by returning false.
pub(crate) struct LoadSteps<'a> {
    progress: Option<Progress<'a>>,
    done: usize,
    total: usize,
}

impl<'a> LoadSteps<'a> {
    pub fn new(file: &GgufFile, progress: Option<Progress<'a>>) -> Result<LoadSteps<'a>> {
        let total = file
            .tensors()
            .iter()
            .map(|t| t.n_bytes as usize)
            .sum::<usize>()
            .max(1);
        let mut steps = LoadSteps {
            progress,
            done: 0,
            total,
        };
        steps.step(0)?;
        Ok(steps)
    }

    pub fn step(&mut self, bytes: usize) -> Result<()> {
        self.done = (self.done + bytes).min(self.total);
        let go_on = match self.progress.as_mut() {
            Some(p) => p(self.done as f32 / self.total as f32),
            None => true,
        };
        if go_on {
            Ok(())
        } else {
            Err(Error::Cancelled("loading the model".into()))
        }
    }

    /// The rest of the file: the load is complete.
    pub fn finish(&mut self) -> Result<()> {
        self.step(self.total)
    }
}
