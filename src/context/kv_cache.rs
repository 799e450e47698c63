//! The KV cache: `n_ctx` cells shared by every sequence, as llama.cpp's unified
//! cache. A cell holds one position's keys and values for every layer, the
//! position, and the set of sequences that see it (a token shared by a prefix
//! of several sequences is stored once). Sequences are cleared, cut and shifted
//! by editing cells; a shift re-rotates the stored keys by the position delta.

use half::f16;

use crate::backend::cpu::Kernels;
use crate::error::{Error, Result};
use crate::tensor::blocks::{Block, BlockQ8_0, QK};

/// Most sequences one cache can tell apart (one bit each).
pub const MAX_SEQUENCES: usize = 64;

pub type SeqId = u32;

/// How K or V rows are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvType {
    F16,
    F32,
    Q8_0,
}

impl KvType {
    pub fn from_name(name: &str) -> Result<KvType> {
        match name.to_ascii_lowercase().as_str() {
            "f16" => Ok(KvType::F16),
            "f32" => Ok(KvType::F32),
            "q8_0" => Ok(KvType::Q8_0),
            _ => Err(Error::InvalidArgument(format!(
                "unsupported KV cache type '{name}' (supported: f16, f32, q8_0)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvType::F16 => "f16",
            KvType::F32 => "f32",
            KvType::Q8_0 => "q8_0",
        }
    }

    fn bytes_per_row(self, width: usize) -> usize {
        match self {
            KvType::F16 => width * 2,
            KvType::F32 => width * 4,
            KvType::Q8_0 => width / QK * std::mem::size_of::<BlockQ8_0>(),
        }
    }
}

/// Rows of one layer's K or V, `width` values per cell.
pub(crate) enum Rows {
    F16(Vec<f16>),
    F32(Vec<f32>),
    Q8_0(Vec<BlockQ8_0>),
}

impl Rows {
    fn new(kind: KvType, cells: usize, width: usize) -> Rows {
        match kind {
            KvType::F16 => Rows::F16(vec![f16::ZERO; cells * width]),
            KvType::F32 => Rows::F32(vec![0.0; cells * width]),
            KvType::Q8_0 => Rows::Q8_0(vec![BlockQ8_0::zeroed(); cells * width / QK]),
        }
    }

    /// Stores `values` (one cell's row) at `cell`.
    pub(crate) fn store(&mut self, k: &Kernels, cell: usize, values: &[f32]) {
        let w = values.len();
        match self {
            Rows::F16(v) => {
                for (d, &s) in v[cell * w..(cell + 1) * w].iter_mut().zip(values) {
                    *d = f16::from_f32(s);
                }
            }
            Rows::F32(v) => v[cell * w..(cell + 1) * w].copy_from_slice(values),
            Rows::Q8_0(v) => (k.quantize_q8_0)(values, &mut v[cell * w / QK..(cell + 1) * w / QK]),
        }
    }

    /// Reads `out.len()` values of `cell`'s row starting at `offset`, as f32.
    pub(crate) fn load(&self, cell: usize, width: usize, offset: usize, out: &mut [f32]) {
        let start = cell * width + offset;
        match self {
            Rows::F16(v) => {
                use half::slice::HalfFloatSliceExt;
                v[start..start + out.len()].convert_to_f32_slice(out);
            }
            Rows::F32(v) => out.copy_from_slice(&v[start..start + out.len()]),
            Rows::Q8_0(v) => {
                for (o, b) in out.chunks_exact_mut(QK).zip(&v[start / QK..]) {
                    let d = b.d.to_f32();
                    for (x, &q) in o.iter_mut().zip(&b.qs) {
                        *x = q as f32 * d;
                    }
                }
            }
        }
    }
}

/// One layer's keys and values.
pub(crate) struct LayerKv {
    pub k: Rows,
    pub v: Rows,
}

#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    /// Sequences that see this cell (bit s for sequence s); 0 means free.
    seqs: u64,
    pos: i32,
}

/// Where a batch's tokens went, so a failed decode can take them back.
pub(crate) struct Placement {
    pub cells: Vec<usize>,
}

pub struct KvCache {
    cells: Vec<Cell>,
    pub(crate) layers: Vec<LayerKv>,
    /// Values per cell row: KV heads x head dim.
    pub(crate) width: usize,
    pub(crate) type_k: KvType,
    pub(crate) type_v: KvType,
    /// One past the highest occupied cell: attention scans cells below it.
    used_end: usize,
}

fn seq_bit(seq: SeqId) -> Result<u64> {
    if (seq as usize) < MAX_SEQUENCES {
        Ok(1u64 << seq)
    } else {
        Err(Error::InvalidArgument(format!(
            "sequence id {seq} is out of range (at most {} sequences)",
            MAX_SEQUENCES
        )))
    }
}

/// Positions `[p0, p1)`, with llama.cpp's convention that a negative bound
/// means "open" on that side.
fn in_range(pos: i32, p0: i32, p1: i32) -> bool {
    (p0 < 0 || pos >= p0) && (p1 < 0 || pos < p1)
}

impl KvCache {
    pub fn new(
        n_layer: usize,
        n_ctx: usize,
        width: usize,
        head_dim: usize,
        type_k: KvType,
        type_v: KvType,
    ) -> Result<KvCache> {
        for (what, t) in [("K", type_k), ("V", type_v)] {
            if t == KvType::Q8_0 && head_dim % QK != 0 {
                return Err(Error::InvalidArgument(format!(
                    "a q8_0 {what} cache needs a head size that is a multiple of {QK}, this model's is {head_dim}"
                )));
            }
        }
        if n_ctx == 0 {
            return Err(Error::InvalidArgument("n_ctx must be at least 1".into()));
        }
        Ok(KvCache {
            cells: vec![Cell::default(); n_ctx],
            layers: (0..n_layer)
                .map(|_| LayerKv {
                    k: Rows::new(type_k, n_ctx, width),
                    v: Rows::new(type_v, n_ctx, width),
                })
                .collect(),
            width,
            type_k,
            type_v,
            used_end: 0,
        })
    }

    /// Cells (positions) the cache holds in all.
    pub fn n_ctx(&self) -> usize {
        self.cells.len()
    }

    /// Cells in use by any sequence.
    pub fn used(&self) -> usize {
        self.cells.iter().filter(|c| c.seqs != 0).count()
    }

    /// Bytes of K and V storage.
    pub fn size_bytes(&self) -> usize {
        let n = self.cells.len() * self.layers.len();
        n * (self.type_k.bytes_per_row(self.width) + self.type_v.bytes_per_row(self.width))
    }

    /// Frees every cell.
    pub fn clear(&mut self) {
        self.cells.fill(Cell::default());
        self.used_end = 0;
    }

    fn refresh_used_end(&mut self) {
        self.used_end = self
            .cells
            .iter()
            .rposition(|c| c.seqs != 0)
            .map_or(0, |i| i + 1);
    }

    /// Removes sequence `seq`'s positions in `[p0, p1)` (negative bounds are
    /// open); `seq < 0` removes them from every sequence.
    pub fn seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> Result<()> {
        let mask = if seq < 0 {
            u64::MAX
        } else {
            seq_bit(seq as SeqId)?
        };
        for c in &mut self.cells {
            if c.seqs & mask != 0 && in_range(c.pos, p0, p1) {
                c.seqs &= !mask;
            }
        }
        self.refresh_used_end();
        Ok(())
    }

    /// Makes sequence `dst` see `src`'s positions in `[p0, p1)` too (no copy:
    /// the cells become shared).
    pub fn seq_cp(&mut self, src: SeqId, dst: SeqId, p0: i32, p1: i32) -> Result<()> {
        let (s, d) = (seq_bit(src)?, seq_bit(dst)?);
        for c in &mut self.cells {
            if c.seqs & s != 0 && in_range(c.pos, p0, p1) {
                c.seqs |= d;
            }
        }
        Ok(())
    }

    /// Removes every sequence but `seq`.
    pub fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        let bit = seq_bit(seq)?;
        for c in &mut self.cells {
            c.seqs &= bit;
        }
        self.refresh_used_end();
        Ok(())
    }

    /// The highest position of `seq`, or None when it has none.
    pub fn seq_pos_max(&self, seq: SeqId) -> Option<i32> {
        let bit = seq_bit(seq).ok()?;
        self.cells
            .iter()
            .filter(|c| c.seqs & bit != 0)
            .map(|c| c.pos)
            .max()
    }

    /// Adds `delta` to the positions of `seq` in `[p0, p1)`, re-rotating their
    /// keys so they read as if computed at the new positions. Cells pushed
    /// below position 0 are removed from the sequence. A cell shared with
    /// another sequence cannot move for one of them alone: that is an error,
    /// and nothing changes.
    pub fn seq_add(
        &mut self,
        k: &Kernels,
        rope: &dyn Fn(&mut [f32], i32),
        seq: SeqId,
        p0: i32,
        p1: i32,
        delta: i32,
    ) -> Result<()> {
        let bit = seq_bit(seq)?;
        if delta == 0 {
            return Ok(());
        }
        let moving: Vec<usize> = (0..self.cells.len())
            .filter(|&i| self.cells[i].seqs & bit != 0 && in_range(self.cells[i].pos, p0, p1))
            .collect();
        if let Some(&i) = moving.iter().find(|&&i| self.cells[i].seqs != bit) {
            return Err(Error::InvalidArgument(format!(
                "cannot shift sequence {seq}: position {} is shared with another sequence",
                self.cells[i].pos
            )));
        }
        let mut row = vec![0.0f32; self.width];
        for &i in &moving {
            let new_pos = self.cells[i].pos + delta;
            if new_pos < 0 {
                self.cells[i] = Cell::default();
                continue;
            }
            self.cells[i].pos = new_pos;
            for layer in &mut self.layers {
                layer.k.load(i, self.width, 0, &mut row);
                rope(&mut row, delta);
                layer.k.store(k, i, &row);
            }
        }
        self.refresh_used_end();
        Ok(())
    }

    /// Finds a free cell for each of `n` tokens, lowest first, without taking
    /// them; an error (and no change) when the cache has too few.
    pub(crate) fn find_cells(&self, n: usize) -> Result<Placement> {
        let cells: Vec<usize> = (0..self.cells.len())
            .filter(|&i| self.cells[i].seqs == 0)
            .take(n)
            .collect();
        if cells.len() < n {
            return Err(Error::ContextFull {
                n_ctx: self.cells.len(),
                free: cells.len(),
                needed: n,
            });
        }
        Ok(Placement { cells })
    }

    /// Marks `cell` as holding position `pos` of the sequences in `seqs`.
    pub(crate) fn occupy(&mut self, cell: usize, pos: i32, seqs: &[SeqId]) -> Result<()> {
        let mut mask = 0;
        for &s in seqs {
            mask |= seq_bit(s)?;
        }
        self.cells[cell] = Cell { seqs: mask, pos };
        self.used_end = self.used_end.max(cell + 1);
        Ok(())
    }

    /// Frees cells taken by a decode that failed.
    pub(crate) fn release(&mut self, cells: &[usize]) {
        for &c in cells {
            self.cells[c] = Cell::default();
        }
        self.refresh_used_end();
    }

    /// One past the highest occupied cell.
    pub(crate) fn used_end(&self) -> usize {
        self.used_end
    }

    /// Layer `l`'s V rows of cells `0..n` as f32, into `out` (converted once
    /// per layer, not once per query head).
    pub(crate) fn v_f32(&self, l: usize, n: usize, out: &mut Vec<f32>) {
        out.resize(n * self.width, 0.0);
        match &self.layers[l].v {
            Rows::F16(v) => {
                use half::slice::HalfFloatSliceExt;
                v[..n * self.width].convert_to_f32_slice(out);
            }
            Rows::F32(v) => out.copy_from_slice(&v[..n * self.width]),
            rows @ Rows::Q8_0(_) => {
                for (c, row) in out.chunks_exact_mut(self.width).enumerate() {
                    rows.load(c, self.width, 0, row);
                }
            }
        }
    }

    /// Cells a token of sequence `seq` at `pos` attends to (causal: positions
    /// up to its own), in cell order.
    pub(crate) fn visible(&self, seq: SeqId, pos: i32, out: &mut Vec<usize>) {
        out.clear();
        let bit = 1u64 << seq;
        out.extend(
            self.cells[..self.used_end]
                .iter()
                .enumerate()
                .filter(|(_, c)| c.seqs & bit != 0 && c.pos <= pos)
                .map(|(i, _)| i),
        );
    }
}
