//! The KV cache: `n_ctx` cells shared by every sequence, as llama.cpp's unified
//! cache. A cell holds one position's keys and values for every layer, the
//! position, and the set of sequences that see it (a token shared by a prefix
//! of several sequences is stored once). Sequences are cleared, cut and shifted
//! by editing cells; a shift re-rotates the stored keys by the position delta.
//! The rows live in buffers of the device's buffer type, in the cache's type;
//! the backend's ops write and read them. `Memory` pairs the cells with the
//! recurrent states of models that have recurrent layers (`recurrent.rs`).

mod memory;
mod recurrent;

pub use memory::Memory;
pub use recurrent::{RecurrentLayout, RecurrentStates};

use crate::backend::{AttentionArgs, Backend, BufferType, CacheBuffer, CacheRows};
use crate::error::{Error, Result};
use crate::tensor::blocks::QK;

pub use crate::backend::CacheType as KvType;

/// Most sequences one cache can tell apart (one bit each).
pub const MAX_SEQUENCES: usize = 64;

pub type SeqId = u32;

/// One layer's keys and values.
struct LayerKv {
    k: CacheBuffer,
    v: CacheBuffer,
}

/// The shape of a model's cache: what an architecture asks for, one entry
/// per cache layer (Gemma 4's sliding and global layers differ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvLayout {
    pub layers: Vec<KvRows>,
}

/// One cache layer's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvRows {
    /// Values per cell row: KV heads x head dim.
    pub width: usize,
    pub head_dim: usize,
}

impl KvLayout {
    /// `n_layer` layers of the same rows.
    pub fn uniform(n_layer: usize, rows: KvRows) -> KvLayout {
        KvLayout {
            layers: vec![rows; n_layer],
        }
    }
}

/// Positions `0..n_cells` of one sequence copied out of a cache: each
/// layer's K rows and V rows as stored, in the cache's types (what a
/// session file holds).
#[derive(Clone, Debug, PartialEq)]
pub struct KvSnapshot {
    pub type_k: KvType,
    pub type_v: KvType,
    /// Values per row, per layer.
    pub widths: Vec<usize>,
    pub n_cells: usize,
    /// Per layer, `n_cells` K rows then `n_cells` V rows.
    pub layers: Vec<(Vec<u8>, Vec<u8>)>,
}

pub struct KvCache {
    /// Sequences that see each cell (bit s for sequence s); 0 means free.
    cell_seqs: Vec<u64>,
    cell_pos: Vec<i32>,
    layers: Vec<LayerKv>,
    type_k: KvType,
    type_v: KvType,
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

/// What re-rotates one layer's stored key row by a position delta.
pub type ShiftKeys<'a> = &'a dyn Fn(&mut dyn Backend, usize, &mut [f32], i32) -> Result<()>;

/// `n_ctx` zeroed per-cell entries, or an error when they cannot be
/// allocated (an encoder's context has no cache rows to fail first).
fn cells<T: Default + Clone>(n_ctx: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n_ctx).map_err(|_| {
        Error::InvalidArgument(format!(
            "a context of {n_ctx} positions cannot be allocated"
        ))
    })?;
    v.resize(n_ctx, T::default());
    Ok(v)
}

impl KvCache {
    /// A cache of `n_ctx` cells for `layout`, its rows from `bt`.
    pub fn new(
        bt: &dyn BufferType,
        layout: KvLayout,
        n_ctx: usize,
        type_k: KvType,
        type_v: KvType,
    ) -> Result<KvCache> {
        for (what, t) in [("K", type_k), ("V", type_v)] {
            if let Some(rows) = layout
                .layers
                .iter()
                .find(|r| t == KvType::Q8_0 && r.head_dim % QK != 0)
            {
                return Err(Error::InvalidArgument(format!(
                    "a q8_0 {what} cache needs a head size that is a multiple of {QK}, this model's is {}",
                    rows.head_dim
                )));
            }
        }
        if n_ctx == 0 {
            return Err(Error::InvalidArgument("n_ctx must be at least 1".into()));
        }
        // The whole cache is checked against the memory available before
        // any of it is allocated (allocations succeed lazily and fill memory
        // as they are zeroed).
        let row_bytes: u64 = layout
            .layers
            .iter()
            .map(|r| (type_k.bytes_per_row(r.width) + type_v.bytes_per_row(r.width)) as u64)
            .sum();
        let bytes = row_bytes.saturating_mul(n_ctx as u64);
        crate::memory::check_fits(
            &format!("a KV cache of {n_ctx} positions"),
            bytes,
            "n_ctx / -c sets the positions",
        )?;
        let mut layers = Vec::new();
        layers.try_reserve_exact(layout.layers.len()).map_err(|_| {
            Error::InvalidArgument(format!("{} cache layers are too many", layout.layers.len()))
        })?;
        for rows in &layout.layers {
            layers.push(LayerKv {
                k: CacheBuffer::new(bt, type_k, rows.width, n_ctx)?,
                v: CacheBuffer::new(bt, type_v, rows.width, n_ctx)?,
            });
        }
        Ok(KvCache {
            cell_seqs: cells(n_ctx)?,
            cell_pos: cells(n_ctx)?,
            layers,
            type_k,
            type_v,
            used_end: 0,
        })
    }

    /// Cells (positions) the cache holds in all.
    pub fn n_ctx(&self) -> usize {
        self.cell_seqs.len()
    }

    /// Cells in use by any sequence.
    pub fn used(&self) -> usize {
        self.cell_seqs.iter().filter(|&&s| s != 0).count()
    }

    pub fn type_k(&self) -> KvType {
        self.type_k
    }

    pub fn type_v(&self) -> KvType {
        self.type_v
    }

    /// Bytes of K and V storage.
    pub fn size_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.k.size_bytes() + l.v.size_bytes())
            .sum()
    }

    /// Frees every cell.
    pub fn clear(&mut self) {
        self.cell_seqs.fill(0);
        self.used_end = 0;
    }

    fn refresh_used_end(&mut self) {
        self.used_end = self
            .cell_seqs
            .iter()
            .rposition(|&s| s != 0)
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
        for (s, &pos) in self.cell_seqs.iter_mut().zip(&self.cell_pos) {
            if *s & mask != 0 && in_range(pos, p0, p1) {
                *s &= !mask;
            }
        }
        self.refresh_used_end();
        Ok(())
    }

    /// Makes sequence `dst` see `src`'s positions in `[p0, p1)` too (no copy:
    /// the cells become shared).
    pub fn seq_cp(&mut self, src: SeqId, dst: SeqId, p0: i32, p1: i32) -> Result<()> {
        let (s, d) = (seq_bit(src)?, seq_bit(dst)?);
        for (seqs, &pos) in self.cell_seqs.iter_mut().zip(&self.cell_pos) {
            if *seqs & s != 0 && in_range(pos, p0, p1) {
                *seqs |= d;
            }
        }
        Ok(())
    }

    /// Removes every sequence but `seq`.
    pub fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        let bit = seq_bit(seq)?;
        for s in &mut self.cell_seqs {
            *s &= bit;
        }
        self.refresh_used_end();
        Ok(())
    }

    /// The highest position of `seq`, or None when it has none.
    pub fn seq_pos_max(&self, seq: SeqId) -> Option<i32> {
        let bit = seq_bit(seq).ok()?;
        self.cell_seqs
            .iter()
            .zip(&self.cell_pos)
            .filter(|(&s, _)| s & bit != 0)
            .map(|(_, &p)| p)
            .max()
    }

    /// Adds `delta` to the positions of `seq` in `[p0, p1)`, re-rotating their
    /// keys (through `shift`, per layer) so they read as if computed at the
    /// new positions. Cells pushed below position 0 are removed from the
    /// sequence. A cell shared with another sequence cannot move for one of
    /// them alone: that is an error, and nothing changes.
    pub fn seq_add(
        &mut self,
        be: &mut dyn Backend,
        shift: ShiftKeys,
        seq: SeqId,
        p0: i32,
        p1: i32,
        delta: i32,
    ) -> Result<()> {
        let bit = seq_bit(seq)?;
        if delta == 0 {
            return Ok(());
        }
        let moves = |i: usize| self.cell_seqs[i] & bit != 0 && in_range(self.cell_pos[i], p0, p1);
        if let Some(i) = (0..self.n_ctx()).find(|&i| moves(i) && self.cell_seqs[i] != bit) {
            return Err(Error::InvalidArgument(format!(
                "cannot shift sequence {seq}: position {} is shared with another sequence",
                self.cell_pos[i]
            )));
        }
        let moving: Vec<usize> = (0..self.n_ctx()).filter(|&i| moves(i)).collect();
        let widest = self.layers.iter().map(|l| l.k.width()).max().unwrap_or(0);
        let mut row = vec![0.0f32; widest];
        for &i in &moving {
            let new_pos = self.cell_pos[i] + delta;
            if new_pos < 0 {
                self.cell_seqs[i] = 0;
                continue;
            }
            self.cell_pos[i] = new_pos;
            for (l, layer) in self.layers.iter_mut().enumerate() {
                let row = &mut row[..layer.k.width()];
                be.get_row(layer.k.view(), i, row)?;
                shift(be, l, row, delta)?;
                be.set_row(row, layer.k.view_mut(), i)?;
            }
        }
        self.refresh_used_end();
        Ok(())
    }

    /// Copies positions `0..n` of `seq` out of the cache; an error when one
    /// of them is missing (the sequence was cut or shifted).
    pub fn snapshot(&self, seq: SeqId, n: usize) -> Result<KvSnapshot> {
        let bit = seq_bit(seq)?;
        let mut cell_of = vec![None; n];
        for (i, (&s, &pos)) in self.cell_seqs.iter().zip(&self.cell_pos).enumerate() {
            if s & bit != 0 && pos >= 0 && (pos as usize) < n {
                cell_of[pos as usize] = Some(i);
            }
        }
        let cells = cell_of
            .iter()
            .enumerate()
            .map(|(p, c)| {
                c.ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "sequence {seq} has no position {p} in the cache"
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let copy = |rows: &CacheBuffer| -> Result<Vec<u8>> {
            let mut out = Vec::with_capacity(n * rows.row_bytes());
            for &c in &cells {
                out.extend_from_slice(rows.raw_rows(c, 1)?);
            }
            Ok(out)
        };
        Ok(KvSnapshot {
            type_k: self.type_k,
            type_v: self.type_v,
            widths: self.widths(),
            n_cells: n,
            layers: self
                .layers
                .iter()
                .map(|l| Ok((copy(&l.k)?, copy(&l.v)?)))
                .collect::<Result<_>>()?,
        })
    }

    /// Replaces the whole cache with `snap` as sequence `seq`'s positions
    /// `0..n_cells`. Everything is checked first: on an error (another
    /// model's shape, other cache types, more cells than the cache has)
    /// nothing changes.
    pub fn restore(&mut self, seq: SeqId, snap: &KvSnapshot) -> Result<()> {
        let bit = seq_bit(seq)?;
        if snap.type_k != self.type_k || snap.type_v != self.type_v {
            return Err(Error::InvalidArgument(format!(
                "the saved cache is {}/{} (K/V), this context's is {}/{}",
                snap.type_k.name(),
                snap.type_v.name(),
                self.type_k.name(),
                self.type_v.name()
            )));
        }
        if snap.widths != self.widths() || snap.layers.len() != self.layers.len() {
            return Err(Error::InvalidArgument(format!(
                "the saved cache has {} layers of rows of {}, this model's has {} of {}",
                snap.layers.len(),
                widths_text(&snap.widths),
                self.layers.len(),
                widths_text(&self.widths())
            )));
        }
        if snap.n_cells > self.n_ctx() {
            return Err(Error::InvalidArgument(format!(
                "the saved cache holds {} positions, more than this context's n_ctx = {}",
                snap.n_cells,
                self.n_ctx()
            )));
        }
        let n = snap.n_cells;
        for (l, (k, v)) in snap.layers.iter().enumerate() {
            let layer = &self.layers[l];
            if k.len() != n * layer.k.row_bytes() || v.len() != n * layer.v.row_bytes() {
                return Err(Error::InvalidArgument(format!(
                    "layer {l} of the saved cache has {} and {} bytes for {n} rows",
                    k.len(),
                    v.len()
                )));
            }
        }
        self.clear();
        for (layer, (k, v)) in self.layers.iter_mut().zip(&snap.layers) {
            layer.k.raw_rows_mut(0, n)?.copy_from_slice(k);
            layer.v.raw_rows_mut(0, n)?.copy_from_slice(v);
        }
        for i in 0..n {
            self.cell_seqs[i] = bit;
            self.cell_pos[i] = i as i32;
        }
        self.used_end = n;
        Ok(())
    }

    /// Finds a free cell for each of `n` tokens, lowest first, into `cells`,
    /// without taking them; an error (and no change) when the cache has too few.
    pub fn find_cells(&self, n: usize, cells: &mut Vec<usize>) -> Result<()> {
        cells.clear();
        cells.extend(
            self.cell_seqs
                .iter()
                .enumerate()
                .filter(|(_, &s)| s == 0)
                .map(|(i, _)| i)
                .take(n),
        );
        if cells.len() < n {
            return Err(Error::ContextFull {
                n_ctx: self.n_ctx(),
                free: cells.len(),
                needed: n,
            });
        }
        Ok(())
    }

    /// Marks `cell` as holding position `pos` of the sequences in `mask`
    /// (bit s for sequence s).
    pub fn occupy(&mut self, cell: usize, pos: i32, mask: u64) -> Result<()> {
        if cell >= self.n_ctx() {
            return Err(Error::InvalidArgument(format!(
                "cell {cell} is outside the cache of {}",
                self.n_ctx()
            )));
        }
        self.cell_seqs[cell] = mask;
        self.cell_pos[cell] = pos;
        self.used_end = self.used_end.max(cell + 1);
        Ok(())
    }

    /// Frees cells taken by a decode that failed.
    pub fn release(&mut self, cells: &[usize]) {
        for &c in cells {
            if let Some(s) = self.cell_seqs.get_mut(c) {
                *s = 0;
            }
        }
        self.refresh_used_end();
    }

    /// Stores layer `l`'s key and value rows for `cells` (one row each of
    /// `k` and `v`, in order).
    pub fn store(
        &mut self,
        be: &mut dyn Backend,
        l: usize,
        cells: &[usize],
        k: &[f32],
        v: &[f32],
    ) -> Result<()> {
        let layer = self
            .layers
            .get_mut(l)
            .ok_or_else(|| Error::InvalidArgument(format!("layer {l} has no cache")))?;
        let w = layer.k.width();
        if k.len() != cells.len() * w || v.len() != cells.len() * w {
            return Err(Error::InvalidArgument(format!(
                "cache store: {} and {} values for {} rows of {w}",
                k.len(),
                v.len(),
                cells.len()
            )));
        }
        for (i, &c) in cells.iter().enumerate() {
            be.set_row(&k[i * w..(i + 1) * w], layer.k.view_mut(), c)?;
            be.set_row(&v[i * w..(i + 1) * w], layer.v.view_mut(), c)?;
        }
        Ok(())
    }

    /// The attention call of layer `l` for query tokens at `pos` of the
    /// sequences `seq` over the occupied cells (causal; within `window`
    /// positions behind the query when given).
    #[allow(clippy::too_many_arguments)]
    pub fn attend(
        &self,
        be: &mut dyn Backend,
        l: usize,
        q: &[f32],
        n_head: usize,
        scale: f32,
        window: Option<u32>,
        pos: &[i32],
        seq: &[SeqId],
        out: &mut [f32],
    ) -> Result<()> {
        let layer = self
            .layers
            .get(l)
            .ok_or_else(|| Error::InvalidArgument(format!("layer {l} has no cache")))?;
        let cells = self.used_end;
        let (k, v) = (layer.k.view(), layer.v.view());
        let width = layer.k.width();
        let head_dim = head_dim_of(n_head, q.len() / pos.len().max(1), width)?;
        let args = AttentionArgs {
            q,
            k: trim(k, cells),
            v: trim(v, cells),
            n_head,
            n_head_kv: width / head_dim,
            head_dim,
            scale,
            cell_pos: &self.cell_pos[..cells],
            cell_seqs: &self.cell_seqs[..cells],
            query_pos: pos,
            query_seq: seq,
            causal: true,
            window,
        };
        be.attention(&args, out)
    }

    /// Values per row, per layer.
    fn widths(&self) -> Vec<usize> {
        self.layers.iter().map(|l| l.k.width()).collect()
    }
}

/// The head size, from the query width per token and its heads, checked
/// against cache rows of `width`.
fn head_dim_of(n_head: usize, q_width: usize, width: usize) -> Result<usize> {
    let head_dim = q_width / n_head.max(1);
    if n_head == 0 || head_dim == 0 || q_width % n_head != 0 || width % head_dim != 0 {
        return Err(Error::InvalidArgument(format!(
            "queries of {q_width} values in {n_head} heads do not fit cache rows of {width}"
        )));
    }
    Ok(head_dim)
}

/// Row widths for a message: one number when every layer has it.
fn widths_text(widths: &[usize]) -> String {
    match widths.first() {
        Some(w) if widths.iter().all(|o| o == w) => w.to_string(),
        _ => format!("{widths:?}"),
    }
}

/// The first `cells` rows of a cache view.
fn trim(rows: CacheRows, cells: usize) -> CacheRows {
    match rows {
        CacheRows::F16(v, w) => CacheRows::F16(&v[..cells * w], w),
        CacheRows::F32(v, w) => CacheRows::F32(&v[..cells * w], w),
        CacheRows::Q8_0(v, w) => CacheRows::Q8_0(&v[..cells * w / QK], w),
    }
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KvCache {{ n_ctx: {}, used: {}, k: {}, v: {} }}",
            self.n_ctx(),
            self.used(),
            self.type_k.name(),
            self.type_v.name()
        )
    }
}
