//! What every decoder family reads from its metadata: `{arch}.*` keys
//! with the checks they need, the shape, and the rotation.

use super::{LayerSpec, Recipe};
use crate::backend::{Rope, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::{Array, GgufFile, Metadata, Value};
use crate::model::weights::{tensor, vector};

/// Reads `{arch}.{key}` metadata with the checks every architecture needs.
pub(crate) struct Keys<'a> {
    md: &'a Metadata,
    arch: &'static str,
}

impl<'a> Keys<'a> {
    pub fn new(file: &'a GgufFile, arch: &'static str) -> Keys<'a> {
        Keys {
            md: file.metadata(),
            arch,
        }
    }

    pub fn name(&self, key: &str) -> String {
        format!("{}.{key}", self.arch)
    }

    /// The raw value of a key, if the file has it.
    pub fn value(&self, key: &str) -> Option<&'a crate::gguf::Value> {
        self.md.get(&self.name(key))
    }

    /// A count or size the file must have.
    pub fn usize(&self, key: &str) -> Result<usize> {
        Ok(self.md.get_u32(&self.name(key))? as usize)
    }

    /// A count or size the file may leave out (a key of another type is an
    /// error, not a default).
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        if self.md.contains(&self.name(key)) {
            self.usize(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        let name = self.name(key);
        if self.md.contains(&name) {
            self.md.get_f32(&name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        let name = self.name(key);
        if self.md.contains(&name) {
            self.md.get_bool(&name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        let name = self.name(key);
        if self.md.contains(&name) {
            self.md.get_str(&name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A number that must be finite and above zero (an epsilon, a base, a
    /// multiplier), `default` when the file has none.
    pub fn positive(&self, key: &str, default: Option<f32>) -> Result<f32> {
        let v = match (self.opt_f32(key)?, default) {
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => {
                return Err(Error::MissingKey {
                    key: self.name(key),
                })
            }
        };
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(Error::InvalidArgument(format!(
                "{} is {v}: it must be a positive number",
                self.name(key)
            )))
        }
    }
}

/// The sizes of a decoder, checked against each other.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Values per attention head (keys and values alike).
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    /// Each layer's KV heads where `head_count_kv` is given per layer (0:
    /// no attention, as LFM2's convolution layers; Gemma 4's global layers
    /// with fewer heads than its sliding ones); empty when every layer has
    /// `n_head_kv`, which is otherwise the first attending layer's count.
    pub kv_layers: Vec<usize>,
    /// Each layer's feed-forward size where `feed_forward_length` is given
    /// per layer (Gemma 4's double-wide layers; `n_ff` is then the widest);
    /// empty when every layer has `n_ff`.
    pub ff_layers: Vec<usize>,
}

/// `head_count_kv` given per layer: the first attending layer's count and
/// every layer's. Each attending layer's count must divide the query heads.
fn per_layer_kv_heads(
    keys: &Keys,
    a: &Array,
    n_layer: usize,
    n_head: usize,
) -> Result<(usize, Vec<usize>)> {
    let key = "attention.head_count_kv";
    let counts = per_layer_sizes(keys, key, a, n_layer)?;
    match counts.iter().copied().find(|&c| c != 0) {
        Some(first) if counts.iter().all(|&c| c == 0 || n_head % c == 0) => Ok((first, counts)),
        _ => Err(Error::InvalidArgument(format!(
            "{} is {counts:?}: each attending layer's KV head count must divide the {n_head} heads, and some layer must attend",
            keys.name(key)
        ))),
    }
}

/// A key given as one value per layer: `n_layer` u32 or i32 values.
fn per_layer_values(keys: &Keys, key: &str, a: &Array, n_layer: usize) -> Result<Vec<i64>> {
    let name = keys.name(key);
    let values: Vec<i64> = match a {
        Array::U32(v) => v.iter().map(|&c| c as i64).collect(),
        Array::I32(v) => v.iter().map(|&c| c as i64).collect(),
        other => {
            return Err(Error::InvalidArgument(format!(
                "{name} is an array of {}: per-layer values are u32 or i32",
                other.element_type().name()
            )))
        }
    };
    if values.len() != n_layer {
        return Err(Error::InvalidArgument(format!(
            "{name} has {} values for {n_layer} layers",
            values.len()
        )));
    }
    Ok(values)
}

/// A size given per layer: `n_layer` non-negative counts, u32 or i32.
pub(crate) fn per_layer_sizes(
    keys: &Keys,
    key: &str,
    a: &Array,
    n_layer: usize,
) -> Result<Vec<usize>> {
    let name = keys.name(key);
    let sizes = per_layer_values(keys, key, a, n_layer)?;
    sizes
        .iter()
        .map(|&v| {
            usize::try_from(v).map_err(|_| {
                Error::InvalidArgument(format!("{name} has {v}: sizes cannot be negative"))
            })
        })
        .collect()
}

impl Shape {
    /// The sizes every decoder's keys give: `block_count`,
    /// `embedding_length`, the head counts, `attention.key_length` (else the
    /// embedding over the heads), `feed_forward_length`, `context_length`.
    pub(crate) fn read(keys: &Keys, n_vocab: usize) -> Result<Shape> {
        let n_layer = keys.usize("block_count")?;
        if n_layer == 0 {
            return Err(Error::InvalidArgument(format!(
                "{} is 0: the model has no layers",
                keys.name("block_count")
            )));
        }
        let n_embd = keys.usize("embedding_length")?;
        let n_head = keys.usize("attention.head_count")?;
        let (n_head_kv, kv_layers) = match keys.value("attention.head_count_kv") {
            Some(Value::Array(a)) => per_layer_kv_heads(keys, a, n_layer, n_head)?,
            _ => (
                keys.opt_usize("attention.head_count_kv")?.unwrap_or(n_head),
                Vec::new(),
            ),
        };
        if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(Error::InvalidArgument(format!(
                "inconsistent attention shape: {n_head} heads over {n_head_kv} KV heads"
            )));
        }
        let head_dim = match keys.opt_usize("attention.key_length")? {
            Some(k) => k,
            None if n_embd % n_head == 0 => n_embd / n_head,
            None => {
                return Err(Error::InvalidArgument(format!(
                    "an embedding of {n_embd} does not split into {n_head} heads"
                )))
            }
        };
        let value_dim = keys
            .opt_usize("attention.value_length")?
            .unwrap_or(head_dim);
        if head_dim == 0 || value_dim != head_dim {
            return Err(Error::InvalidArgument(format!(
                "heads of {head_dim} keys and {value_dim} values are not supported"
            )));
        }
        // A mixture of experts may leave it out (0: the dense layers that
        // need it then say it is missing).
        let (n_ff, ff_layers) = match keys.value("feed_forward_length") {
            Some(Value::Array(a)) => {
                let sizes = per_layer_sizes(keys, "feed_forward_length", a, n_layer)?;
                (sizes.iter().copied().max().unwrap_or(0), sizes)
            }
            _ => (
                keys.opt_usize("feed_forward_length")?.unwrap_or(0),
                Vec::new(),
            ),
        };
        let n_ctx_train = keys.usize("context_length")?;
        if n_ctx_train == 0 {
            return Err(Error::InvalidArgument(format!(
                "{} is 0: the model was trained on no positions",
                keys.name("context_length")
            )));
        }
        // Sizes that overflow here would overflow every buffer later.
        let too_big = |v: usize| v > (1 << 24);
        if [n_layer, n_embd, n_head, head_dim, n_ff]
            .into_iter()
            .any(too_big)
        {
            return Err(Error::InvalidArgument(format!(
                "model sizes out of range: {n_layer} layers, {n_embd} wide, {n_head} heads of {head_dim}, feed-forward {n_ff}"
            )));
        }
        Ok(Shape {
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            n_ctx_train,
            kv_layers,
            ff_layers,
        })
    }

    /// Layer `i`'s feed-forward size.
    pub fn n_ff_of(&self, i: usize) -> usize {
        self.ff_layers.get(i).copied().unwrap_or(self.n_ff)
    }

    /// Layer `i`'s KV heads (0: it does not attend).
    pub fn n_head_kv_of(&self, i: usize) -> usize {
        self.kv_layers.get(i).copied().unwrap_or(self.n_head_kv)
    }

    /// Whether layer `i` has KV heads.
    pub fn attends(&self, i: usize) -> bool {
        self.n_head_kv_of(i) != 0
    }

    /// Whether some layer has no KV heads (LFM2's convolution layers).
    pub fn some_layer_free_of_kv(&self) -> bool {
        self.kv_layers.contains(&0)
    }

    /// Whether attending layers differ in KV heads.
    pub fn kv_heads_differ(&self) -> bool {
        self.kv_layers
            .iter()
            .any(|&c| c != 0 && c != self.n_head_kv)
    }
}

/// What every family reads first: its keys, the shape (the vocabulary from
/// the token embedding's rows), the plain recipe with the file's RMS
/// epsilon, and the rotation its layers use.
pub(crate) fn common<'a>(
    file: &'a GgufFile,
    arch: &'static str,
    kind: RopeKind,
) -> Result<(Keys<'a>, Shape, Recipe, Rope)> {
    let keys = Keys::new(file, arch);
    let shape = Shape::read(&keys, tensor(file, "token_embd.weight")?.rows)?;
    check_layers_against_tensors(file, &keys, shape.n_layer)?;
    let recipe = Recipe::plain(
        keys.positive("attention.layer_norm_rms_epsilon", None)?,
        &shape,
    );
    let rope = rope(&keys, file, kind, shape.head_dim)?;
    Ok((keys, shape, recipe, rope))
}

/// A file whose `blk.N.` tensors go past `block_count` says two different
/// things about its depth: llama.cpp refuses it (it counts the tensors it
/// did not use), and so does lamina. A `block_count` above the file's
/// tensor count (every layer has several) is refused before the layer list
/// is reserved: 2^24 layers would reserve gigabytes for a small file.
fn check_layers_against_tensors(file: &GgufFile, keys: &Keys, n_layer: usize) -> Result<()> {
    let n_tensors = file.tensors().len();
    if n_layer > n_tensors {
        return Err(Error::InvalidArgument(format!(
            "{} is {n_layer}, but the file has only {n_tensors} tensors",
            keys.name("block_count")
        )));
    }
    let beyond = file.tensors().iter().find_map(|t| {
        let layer: usize = t
            .name
            .strip_prefix("blk.")?
            .split('.')
            .next()?
            .parse()
            .ok()?;
        (layer >= n_layer).then_some((layer, &t.name))
    });
    match beyond {
        Some((layer, name)) => Err(Error::InvalidArgument(format!(
            "tensor '{name}' is of layer {layer}, but {} is {n_layer}",
            keys.name("block_count")
        ))),
        None => Ok(()),
    }
}

/// Every layer alike: rotated by `rope`, seeing every position.
pub(crate) fn uniform(rope: &Rope) -> impl Fn(usize) -> LayerSpec + '_ {
    move |_| LayerSpec {
        mixer: super::Mixer::Attention,
        rope: Some(rope.clone()),
        window: None,
        heads: None,
        kv_from: None,
    }
}

/// The rotation of a family's layers from `{arch}.rope.*`: the rotated
/// dimensions (default the whole head), the base (default 10000), linear
/// position scaling, and the per-pair factors of `rope_freqs.weight`.
pub(crate) fn rope(keys: &Keys, file: &GgufFile, kind: RopeKind, head_dim: usize) -> Result<Rope> {
    let dim = keys.opt_usize("rope.dimension_count")?.unwrap_or(head_dim);
    if dim == 0 || dim > head_dim || dim % 2 != 0 {
        return Err(Error::InvalidArgument(format!(
            "rope dimension {dim} does not fit heads of {head_dim}"
        )));
    }
    let freq_scale = match keys.opt_str("rope.scaling.type")? {
        // LongRoPE scales by its per-pair factors (and attn_factor) only.
        None | Some("none") | Some("longrope") => 1.0,
        Some("linear") => 1.0 / keys.positive("rope.scaling.factor", Some(1.0))?,
        Some(other) => {
            return Err(Error::InvalidArgument(format!(
                "unsupported rope scaling type '{other}'"
            )))
        }
    };
    Ok(Rope {
        kind,
        head_dim,
        dim,
        base: keys.positive("rope.freq_base", Some(10000.0))?,
        freq_scale,
        freq_factors: freq_factors(file, dim)?,
        attn_factor: keys.positive("rope.scaling.attn_factor", Some(1.0))?,
    })
}

/// The rotation factors of `rope_freqs.weight` (Llama 3.x scaling), one per
/// rotated pair, when the file has them.
fn freq_factors(file: &GgufFile, rope_dim: usize) -> Result<Option<Vec<f32>>> {
    factors(file, "rope_freqs.weight", rope_dim)
}

/// Per-pair rotation factors from the tensor `name`, when the file has it.
pub(crate) fn factors(file: &GgufFile, name: &str, rope_dim: usize) -> Result<Option<Vec<f32>>> {
    match super::layers::optional(file, name)? {
        Some(t) => Ok(Some(vector(file, &t, rope_dim / 2)?)),
        None => Ok(None),
    }
}

/// Which layers use the sliding window: `attention.sliding_window_pattern`
/// as one flag per layer, or as a period n (layer i slides unless
/// i % n == n - 1; n = 0: every layer slides), `default` when absent.
pub(crate) fn sliding_layers(keys: &Keys, n_layer: usize, default: usize) -> Result<Vec<bool>> {
    let key = "attention.sliding_window_pattern";
    match keys.value(key) {
        Some(Value::Array(Array::Bool(flags))) if flags.len() == n_layer => {
            return Ok(flags.clone())
        }
        Some(Value::Array(_)) => {
            return Err(Error::InvalidArgument(format!(
                "{} must be {n_layer} booleans, one per layer",
                keys.name(key)
            )))
        }
        _ => {}
    }
    let n = keys.opt_usize(key)?.unwrap_or(default);
    Ok((0..n_layer).map(|i| n == 0 || i % n < n - 1).collect())
}
