//! Small models of each decoder family with seeded random weights and a real
//! tokenizer (taken from a vocab GGUF of `native-tests/golden/vocab/`),
//! written with lamina's GGUF writer and quantizers (bit-exact with ggml's).
//! Deterministic on every target: the same bytes for the same family, so
//! the reference's outputs on them (`scripts/reference/make-goldens.sh`) are
//! goldens that CI compares against without downloading a model.

use lamina::gguf::{GgufFile, GgufWriter, Value};
use lamina::tensor::{convert, DType, GgmlType};

use super::{golden_path, read_file, Rng};

/// One family's small model: its architecture and what makes it differ.
pub struct Synth {
    /// Name of the model (and of its golden files).
    pub name: &'static str,
    pub arch: &'static str,
    /// The vocab GGUF the tokenizer comes from.
    pub vocab: &'static str,
    /// The type of the layers' matrices.
    pub weights: GgmlType,
    /// The token embedding's type (the output's too where they are tied).
    pub embedding: GgmlType,
    /// The amplitude of the token embedding and output values. At 1.0 the
    /// logits spread about 2.5 times wider (std ≈ 9.5) than a trained
    /// model's (std ≈ 3.6), and so do their rounding differences.
    pub vocab_amplitude: f32,
    pub n_layer: u32,
    pub n_embd: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    pub n_ff: u32,
    /// `output.weight` of its own (else tied to the token embedding).
    pub output: bool,
    pub qkv_bias: bool,
    pub qk_norm: bool,
    pub post_norms: bool,
    /// Llama 3.x's `rope_freqs.weight`.
    pub rope_freqs: bool,
    /// Phi-3's fused `attn_qkv` and gate-and-up `ffn_up`.
    pub fused: bool,
    /// Phi-3's LongRoPE `rope_factors_{short,long}.weight`.
    pub rope_factors: bool,
    /// `{arch}.*` keys beyond the shape.
    pub keys: &'static [(&'static str, f32)],
    /// `{arch}.*` u32 keys beyond the shape.
    pub u32_keys: &'static [(&'static str, u32)],
    /// `{arch}.*` bool keys beyond the shape.
    pub bool_keys: &'static [(&'static str, bool)],
    /// A mixture of experts in place of each layer's feed-forward.
    pub experts: Option<Experts>,
    /// LFM2's short convolutions in place of attention in some layers.
    pub short_conv: Option<ShortConv>,
    /// Qwen3.5's gated DeltaNets in place of attention in some layers.
    pub delta_net: Option<DeltaNet>,
    /// The final norm's tensor name.
    pub output_norm: &'static str,
    /// The feed-forward norm's tensor name.
    pub ffn_norm: &'static str,
    /// Rotated dimensions (0: the whole head).
    pub rope_dim: u32,
    /// `rope.dimension_sections` (multi-section RoPE), where given.
    pub rope_sections: Option<[i32; 4]>,
    /// `tokenizer.ggml.pre` in place of the vocab file's.
    pub pre: Option<&'static str>,
    /// Gemma 4's layers (`head_dim` is then the global layers').
    pub gemma4: Option<Gemma4>,
}

/// Gemma 4's additions: sliding layers (`sliding`, one flag per layer) with
/// heads of `swa_head_dim`; global layers rotating a quarter of their head
/// ("proportional" `rope_freqs`) and without `attn_v` (keys serve as
/// values); the last `shared_kv` layers sharing earlier layers' caches, with
/// feed-forwards of `wide_ff`; per-layer inputs of `per_layer` values; a
/// `layer_output_scale` per layer; with `global_kv`, global layers of that
/// many KV heads (`head_count_kv` per layer, as the 31B's file has it).
#[derive(Clone, Copy)]
pub struct Gemma4 {
    pub sliding: &'static [bool],
    pub swa_head_dim: u32,
    pub shared_kv: u32,
    pub wide_ff: u32,
    pub per_layer: u32,
    pub global_kv: Option<u32>,
}

impl Gemma4 {
    /// Layer `i`'s head size and whether it computes and stores its own
    /// keys and values.
    fn layer(&self, s: &Synth, i: u32) -> (u32, bool) {
        let hd = if self.sliding[i as usize] {
            self.swa_head_dim
        } else {
            s.head_dim
        };
        (hd, i < s.n_layer - self.shared_kv)
    }

    /// Layer `i`'s KV heads.
    fn kv_heads(&self, s: &Synth, i: u32) -> u32 {
        match self.global_kv {
            Some(kv) if !self.sliding[i as usize] => kv,
            _ => s.n_head_kv,
        }
    }
}

/// Gated DeltaNets of `n_head_v` value heads over `n_head_k` key heads of
/// `dim`, a convolution of `taps`, in every layer but each `interval`-th
/// (which attends, its Q product also giving the output's gates).
#[derive(Clone, Copy)]
pub struct DeltaNet {
    pub taps: u32,
    pub n_head_k: u32,
    pub n_head_v: u32,
    pub dim: u32,
    pub interval: u32,
}

impl DeltaNet {
    fn recurrent(&self, layer: u32) -> bool {
        (layer + 1) % self.interval != 0
    }
}

/// Short-convolution layers (`layers`, with no KV heads) of `taps` taps.
#[derive(Clone, Copy)]
pub struct ShortConv {
    pub taps: u32,
    pub layers: &'static [u32],
}

/// A mixture of experts' sizes: `n_used` of `n_expert` feed-forwards of
/// `n_ff` each, routed by an F32 `ffn_gate_inp` (as converted files have it),
/// and a shared expert of `shared_ff` (0: none).
#[derive(Clone, Copy)]
pub struct Experts {
    pub n_expert: u32,
    pub n_used: u32,
    pub n_ff: u32,
    pub shared_ff: u32,
    /// LFM2-MoE's routing: sigmoid gating (`expert_gating_func` 2) and a
    /// selection bias `exp_probs_b.bias`; its first `dense_lead` layers
    /// keep a dense feed-forward.
    pub sigmoid_bias: bool,
    pub dense_lead: u32,
    /// Qwen3.5-MoE's per-token gate of the shared expert
    /// (`ffn_gate_inp_shexp`).
    pub shared_gate: bool,
}

const BASE: Synth = Synth {
    name: "",
    arch: "",
    vocab: "",
    weights: GgmlType::Q8_0,
    embedding: GgmlType::Q8_0,
    vocab_amplitude: 1.0,
    n_layer: 2,
    n_embd: 256,
    n_head: 4,
    n_head_kv: 2,
    head_dim: 64,
    n_ff: 512,
    output: false,
    qkv_bias: false,
    qk_norm: false,
    post_norms: false,
    rope_freqs: false,
    fused: false,
    rope_factors: false,
    keys: &[],
    u32_keys: &[],
    bool_keys: &[],
    experts: None,
    short_conv: None,
    delta_net: None,
    output_norm: "output_norm",
    ffn_norm: "ffn_norm",
    rope_dim: 0,
    rope_sections: None,
    pre: None,
    gemma4: None,
};

/// Phi-3: fused products, LongRoPE factors (a context of up to 4096
/// positions takes the short ones).
const PHI3: Synth = Synth {
    name: "phi3",
    arch: "phi3",
    vocab: "ggml-vocab-phi-3.gguf",
    weights: GgmlType::Q5_1,
    n_head_kv: 4,
    output: true,
    fused: true,
    rope_factors: true,
    keys: &[
        ("rope.freq_base", 10000.0),
        ("rope.scaling.attn_factor", 1.19),
    ],
    u32_keys: &[
        ("rope.scaling.original_context_length", 4096),
        // Ignored, as the reference ignores it.
        ("attention.sliding_window", 8),
    ],
    ..BASE
};

/// Gemma 3: six layers, a window of 8 on two layers in three, Q/K norms and
/// post-norms (the IQ4_XS family takes the same shape).
const GEMMA3: Synth = Synth {
    name: "gemma3",
    arch: "gemma3",
    vocab: "ggml-vocab-llama-spm.gguf",
    weights: GgmlType::Q4_0,
    n_layer: 6,
    head_dim: 128,
    n_head_kv: 1,
    qk_norm: true,
    post_norms: true,
    keys: &[
        ("rope.freq_base", 1000000.0),
        ("rope.freq_base_swa", 10000.0),
    ],
    u32_keys: &[
        ("attention.sliding_window", 8),
        ("attention.sliding_window_pattern", 3),
    ],
    ..BASE
};

/// Gemma 4: six layers, sliding (heads of 64, a window of 8) but for
/// layers 3 and 5 (heads of 128, RoPE on a quarter of them); layers 4 and
/// 5 share the caches of layers 2 and 3 and have double-wide
/// feed-forwards; per-layer inputs of 32 values.
const GEMMA4: Synth = Synth {
    name: "gemma4",
    arch: "gemma4",
    vocab: "ggml-vocab-llama-spm.gguf",
    weights: GgmlType::Q4_K,
    n_layer: 6,
    head_dim: 128,
    n_head_kv: 1,
    qk_norm: true,
    post_norms: true,
    keys: &[
        ("rope.freq_base", 1000000.0),
        ("rope.freq_base_swa", 10000.0),
        ("final_logit_softcapping", 30.0),
    ],
    u32_keys: &[
        ("attention.sliding_window", 8),
        ("attention.key_length_swa", 64),
        ("attention.value_length_swa", 64),
        ("rope.dimension_count_swa", 64),
        ("attention.shared_kv_layers", 2),
        ("embedding_length_per_layer_input", 32),
    ],
    gemma4: Some(GEMMA4_LAYERS),
    ..BASE
};

const GEMMA4_LAYERS: Gemma4 = Gemma4 {
    sliding: &[true, true, true, false, true, false],
    swa_head_dim: 64,
    shared_kv: 2,
    wide_ff: 1024,
    per_layer: 32,
    global_kv: None,
};

/// Qwen3.5: gated DeltaNets (4 value heads over 2 key heads of 64) in
/// layers 0 to 2, gated attention with Q/K norms over a quarter of each
/// head's dimensions in layer 3; Qwen2's vocabulary with Qwen3.5's
/// pre-tokenizer.
const QWEN35: Synth = Synth {
    name: "qwen35",
    arch: "qwen35",
    vocab: "ggml-vocab-qwen2.gguf",
    weights: GgmlType::Q4_K,
    n_layer: 4,
    qk_norm: true,
    keys: &[("rope.freq_base", 10000000.0)],
    delta_net: Some(DeltaNet {
        taps: 4,
        n_head_k: 2,
        n_head_v: 4,
        dim: 64,
        interval: 4,
    }),
    ffn_norm: "post_attention_norm",
    rope_dim: 16,
    rope_sections: Some([3, 3, 2, 0]),
    pre: Some("qwen35"),
    ..BASE
};

/// The families the reference's goldens cover.
pub const FAMILIES: &[Synth] = &[
    Synth {
        name: "llama3",
        arch: "llama",
        vocab: "ggml-vocab-llama-bpe.gguf",
        weights: GgmlType::Q4_K,
        rope_freqs: true,
        keys: &[("rope.freq_base", 500000.0)],
        ..BASE
    },
    Synth {
        name: "qwen2",
        arch: "qwen2",
        vocab: "ggml-vocab-qwen2.gguf",
        weights: GgmlType::Q8_0,
        qkv_bias: true,
        keys: &[("rope.freq_base", 1000000.0)],
        ..BASE
    },
    Synth {
        name: "qwen3",
        arch: "qwen3",
        vocab: "ggml-vocab-qwen2.gguf",
        weights: GgmlType::Q5_K,
        qk_norm: true,
        keys: &[("rope.freq_base", 1000000.0)],
        ..BASE
    },
    GEMMA3,
    Synth {
        name: "smollm3",
        arch: "smollm3",
        vocab: "ggml-vocab-llama-bpe.gguf",
        weights: GgmlType::Q6_K,
        n_layer: 4,
        keys: &[("rope.freq_base", 2000000.0)],
        ..BASE
    },
    PHI3,
    // Trained for 256 positions: the tests' contexts of 512 take LongRoPE's
    // long factors.
    Synth {
        name: "phi3-long",
        u32_keys: &[
            ("rope.scaling.original_context_length", 256),
            ("attention.sliding_window", 8),
        ],
        ..PHI3
    },
    // The 2- and 3-bit k-quants, on a small vocabulary.
    Synth {
        name: "llama-q2_k",
        arch: "llama",
        vocab: "ggml-vocab-llama-spm.gguf",
        weights: GgmlType::Q2_K,
        ..BASE
    },
    Synth {
        name: "qwen3-q3_k",
        arch: "qwen3",
        vocab: "ggml-vocab-llama-spm.gguf",
        weights: GgmlType::Q3_K,
        qk_norm: true,
        output: true,
        keys: &[("rope.freq_base", 1000000.0)],
        ..BASE
    },
    Synth {
        name: "qwen2-iq4_nl",
        arch: "qwen2",
        vocab: "ggml-vocab-llama-spm.gguf",
        weights: GgmlType::IQ4_NL,
        embedding: GgmlType::IQ4_NL,
        qkv_bias: true,
        keys: &[("rope.freq_base", 1000000.0)],
        ..BASE
    },
    Synth {
        name: "gemma3-iq4_xs",
        weights: GgmlType::IQ4_XS,
        embedding: GgmlType::IQ4_XS,
        n_layer: 3,
        ..GEMMA3
    },
    Synth {
        name: "llama-bf16",
        arch: "llama",
        vocab: "ggml-vocab-llama-spm.gguf",
        weights: GgmlType::BF16,
        embedding: GgmlType::BF16,
        // A trained model's logit spread: the F16/BF16 tolerance (max abs
        // 0.1) is set for it, and bf16 rounds 8 times coarser than f16.
        vocab_amplitude: 0.35,
        keys: &[("rope.freq_base", 500000.0)],
        ..BASE
    },
    GRANITE,
    // LFM2: short convolutions of 3 taps in layers 0 and 2, attention (Q/K
    // norms, NeoX RoPE) in layers 1 and 3; the final norm is
    // `token_embd_norm`.
    Synth {
        name: "lfm2",
        arch: "lfm2",
        vocab: "ggml-vocab-llama-bpe.gguf",
        weights: GgmlType::Q4_K,
        n_layer: 4,
        qk_norm: true,
        keys: &[("rope.freq_base", 1000000.0)],
        short_conv: Some(ShortConv {
            taps: 3,
            layers: &[0, 2],
        }),
        output_norm: "token_embd_norm",
        ..BASE
    },
    // LFM2-MoE: LFM2's layers; a dense feed-forward in layer 0, then 2 of 8
    // experts picked by sigmoid plus a selection bias.
    Synth {
        name: "lfm2moe",
        arch: "lfm2moe",
        vocab: "ggml-vocab-llama-bpe.gguf",
        weights: GgmlType::Q4_K,
        n_layer: 4,
        qk_norm: true,
        keys: &[("rope.freq_base", 1000000.0)],
        short_conv: Some(ShortConv {
            taps: 3,
            layers: &[0, 2],
        }),
        output_norm: "token_embd_norm",
        experts: Some(Experts {
            n_expert: 8,
            n_used: 2,
            n_ff: 256,
            shared_ff: 0,
            sigmoid_bias: true,
            dense_lead: 1,
            shared_gate: false,
        }),
        ..BASE
    },
    QWEN35,
    GEMMA4,
    // Gemma 4 with 2 KV heads in its sliding layers and 1 in its global
    // ones (`head_count_kv` per layer, the 31B's layout).
    Synth {
        name: "gemma4-kv",
        n_head_kv: 2,
        gemma4: Some(Gemma4 {
            global_kv: Some(1),
            ..GEMMA4_LAYERS
        }),
        ..GEMMA4
    },
    // Qwen3.5-MoE: Qwen3.5's layers with 2 of 8 experts and a shared expert
    // gated per token; a small vocabulary (Qwen3.5's pre-tokenizer is
    // `qwen35`'s to test), which keeps its runs under emulation short.
    Synth {
        name: "qwen35moe",
        arch: "qwen35moe",
        vocab: "ggml-vocab-llama-spm.gguf",
        pre: None,
        experts: Some(Experts {
            n_expert: 8,
            n_used: 2,
            n_ff: 256,
            shared_ff: 256,
            sigmoid_bias: false,
            dense_lead: 0,
            shared_gate: true,
        }),
        ..QWEN35
    },
    // Qwen3-MoE: 2 of 8 experts per token; a router spread wider than the
    // other matrices, so no two experts' scores sit close enough for
    // rounding to swap them.
    Synth {
        name: "qwen3moe",
        arch: "qwen3moe",
        vocab: "ggml-vocab-qwen2.gguf",
        weights: GgmlType::Q4_K,
        qk_norm: true,
        keys: &[("rope.freq_base", 1000000.0)],
        experts: Some(Experts {
            n_expert: 8,
            n_used: 2,
            n_ff: 256,
            shared_ff: 0,
            sigmoid_bias: false,
            dense_lead: 0,
            shared_gate: false,
        }),
        ..BASE
    },
    // Granite MoE with a shared expert: Granite's multipliers, 2 of 4
    // experts as wide as feed_forward_length.
    Synth {
        name: "granitemoe",
        arch: "granitemoe",
        weights: GgmlType::Q8_0,
        n_ff: 256,
        experts: Some(Experts {
            n_expert: 4,
            n_used: 2,
            n_ff: 256,
            shared_ff: 512,
            sigmoid_bias: false,
            dense_lead: 0,
            shared_gate: false,
        }),
        // Milder multipliers than `granite`'s, so the experts' weights
        // move the logits by more than the tolerance.
        keys: &[
            ("embedding_scale", 2.0),
            ("residual_scale", 0.5),
            ("attention.scale", 0.125),
            ("logit_scale", 0.5),
        ],
        ..GRANITE
    },
    // Granite's RoPE switch off: no layer rotates. Sharper attention than
    // `granite`'s (whose 1/64 makes it nearly uniform), so positions matter.
    Synth {
        name: "granite-nope",
        keys: &[
            ("embedding_scale", 12.0),
            ("residual_scale", 0.22),
            ("attention.scale", 1.0),
            ("logit_scale", 8.0),
        ],
        bool_keys: &[("rope.scaling.finetuned", false)],
        ..GRANITE
    },
];

/// Granite: its four multipliers.
const GRANITE: Synth = Synth {
    name: "granite",
    arch: "granite",
    vocab: "ggml-vocab-gpt-2.gguf",
    weights: GgmlType::F16,
    output: true,
    keys: &[
        ("embedding_scale", 12.0),
        ("residual_scale", 0.22),
        ("attention.scale", 0.015625),
        ("logit_scale", 8.0),
    ],
    ..BASE
};

/// Gemma 4 E2B's layer kinds: four sliding layers, then a global one.
const E2B_SLIDING: [bool; 35] = {
    let mut flags = [true; 35];
    let mut i = 4;
    while i < 35 {
        flags[i] = false;
        i += 5;
    }
    flags
};

/// Random-weight models at the shapes of real releases, for speed side by
/// side with the reference (`scripts/bench-synth.sh`), not for goldens.
pub const BENCH: &[Synth] = &[
    // Gemma 4 E2B: 35 layers of 1536, 8 heads over 1 KV head (256 wide in
    // the sliding layers, window 512; 512 wide in every fifth), the last 20
    // sharing caches with feed-forwards of 12288 (6144 before), per-layer
    // inputs of 256 (Llama's 32k vocabulary stands in for Gemma's 262k).
    Synth {
        name: "gemma4-e2b",
        n_layer: 35,
        n_embd: 1536,
        n_head: 8,
        n_head_kv: 1,
        head_dim: 512,
        n_ff: 6144,
        u32_keys: &[
            ("attention.sliding_window", 512),
            ("attention.key_length_swa", 256),
            ("attention.value_length_swa", 256),
            ("rope.dimension_count_swa", 256),
            ("attention.shared_kv_layers", 20),
            ("embedding_length_per_layer_input", 256),
        ],
        gemma4: Some(Gemma4 {
            sliding: &E2B_SLIDING,
            swa_head_dim: 256,
            shared_kv: 20,
            wide_ff: 12288,
            per_layer: 256,
            global_kv: None,
        }),
        ..GEMMA4
    },
    // IBM Granite 3.1 1B-A400M: 24 layers of 8 of 32 experts.
    Synth {
        name: "granitemoe-1b-a400m",
        arch: "granitemoe",
        weights: GgmlType::Q4_K,
        n_layer: 24,
        n_embd: 1024,
        n_head: 16,
        n_head_kv: 8,
        head_dim: 64,
        n_ff: 512,
        experts: Some(Experts {
            n_expert: 32,
            n_used: 8,
            n_ff: 512,
            shared_ff: 0,
            sigmoid_bias: false,
            dense_lead: 0,
            shared_gate: false,
        }),
        ..GRANITE
    },
    // LFM2-350M: 16 layers, attention in 6 of them, convolutions in the
    // others (llama-bpe's vocabulary stands in for LFM2's smaller one).
    Synth {
        name: "lfm2-350m",
        arch: "lfm2",
        vocab: "ggml-vocab-llama-bpe.gguf",
        weights: GgmlType::Q4_K,
        n_layer: 16,
        n_embd: 1024,
        n_head: 16,
        n_head_kv: 8,
        head_dim: 64,
        n_ff: 4608,
        qk_norm: true,
        keys: &[("rope.freq_base", 1000000.0)],
        short_conv: Some(ShortConv {
            taps: 3,
            layers: &[0, 1, 3, 4, 6, 7, 9, 11, 13, 15],
        }),
        output_norm: "token_embd_norm",
        ..BASE
    },
    // Qwen3.5-0.8B: 24 layers, gated DeltaNet (16 heads of 128) in three of
    // every four, gated attention (8 heads of 256 over 2 KV heads, RoPE on
    // a quarter of each head) in the fourth (Qwen2's vocabulary stands in
    // for Qwen3.5's larger one).
    Synth {
        name: "qwen35-0.8b",
        n_layer: 24,
        n_embd: 1024,
        n_head: 8,
        n_head_kv: 2,
        head_dim: 256,
        n_ff: 3584,
        delta_net: Some(DeltaNet {
            taps: 4,
            n_head_k: 16,
            n_head_v: 16,
            dim: 128,
            interval: 4,
        }),
        rope_dim: 64,
        rope_sections: Some([11, 11, 10, 0]),
        ..QWEN35
    },
];

pub fn family(name: &str) -> &'static Synth {
    FAMILIES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no synthetic family {name}"))
}

/// Uniform in [-a, a), from 24 random bits (exact in f32 on every target).
fn uniform(rng: &mut Rng, a: f32) -> f32 {
    ((rng.next_u64() >> 40) as f32 / 16777216.0 * 2.0 - 1.0) * a
}

impl Synth {
    /// `head_count_kv`: one count, or with short convolutions one per layer
    /// (0 for theirs), as i32 as the reference's converter writes it.
    fn kv_heads(&self) -> Value {
        match self.short_conv {
            Some(c) => Value::Array(lamina::gguf::Array::I32(
                (0..self.n_layer)
                    .map(|i| {
                        if c.layers.contains(&i) {
                            0
                        } else {
                            self.n_head_kv as i32
                        }
                    })
                    .collect(),
            )),
            None => match self.gemma4 {
                Some(g) if g.global_kv.is_some() => Value::Array(lamina::gguf::Array::U32(
                    (0..self.n_layer).map(|i| g.kv_heads(self, i)).collect(),
                )),
                _ => Value::U32(self.n_head_kv),
            },
        }
    }

    /// The model file's bytes.
    pub fn write(&self) -> Vec<u8> {
        self.write_with(&[])
    }

    /// The model file's bytes with F32 vectors of 4 values named `extra`
    /// besides its own tensors (ones the model does not read).
    pub fn write_with(&self, extra: &[&str]) -> Vec<u8> {
        let vocab = GgufFile::from_bytes(read_file(&golden_path(&format!("vocab/{}", self.vocab))))
            .expect("a vocab GGUF");
        let n_vocab = vocab
            .metadata()
            .get_str_array("tokenizer.ggml.tokens")
            .expect("tokens")
            .len() as u64;
        let mut w = GgufWriter::new();
        let key = |k: &str| format!("{}.{k}", self.arch);
        let mut meta: Vec<(String, Value)> = vec![
            (
                "general.architecture".into(),
                Value::String(self.arch.into()),
            ),
            (
                "general.name".into(),
                Value::String(format!("lamina synthetic {}", self.name)),
            ),
            (key("block_count"), Value::U32(self.n_layer)),
            (key("context_length"), Value::U32(4096)),
            (key("embedding_length"), Value::U32(self.n_embd)),
            (key("feed_forward_length"), Value::U32(self.n_ff)),
            (key("attention.head_count"), Value::U32(self.n_head)),
            (key("attention.head_count_kv"), self.kv_heads()),
            (key("attention.key_length"), Value::U32(self.head_dim)),
            (key("attention.value_length"), Value::U32(self.head_dim)),
            (
                key("rope.dimension_count"),
                Value::U32(if self.rope_dim > 0 {
                    self.rope_dim
                } else {
                    self.head_dim
                }),
            ),
            (key("attention.layer_norm_rms_epsilon"), Value::F32(1e-6)),
        ];
        if let Some(c) = self.short_conv {
            meta.push((key("shortconv.l_cache"), Value::U32(c.taps)));
        }
        if let Some(dn) = self.delta_net {
            meta.extend([
                (key("ssm.conv_kernel"), Value::U32(dn.taps)),
                (key("ssm.state_size"), Value::U32(dn.dim)),
                (key("ssm.group_count"), Value::U32(dn.n_head_k)),
                (key("ssm.time_step_rank"), Value::U32(dn.n_head_v)),
                (key("ssm.inner_size"), Value::U32(dn.n_head_v * dn.dim)),
                (key("full_attention_interval"), Value::U32(dn.interval)),
            ]);
        }
        if let Some(g) = self.gemma4 {
            meta.push((
                key("attention.sliding_window_pattern"),
                Value::Array(lamina::gguf::Array::Bool(g.sliding.to_vec())),
            ));
            let ff = (0..self.n_layer)
                .map(|i| {
                    if g.layer(self, i).1 {
                        self.n_ff
                    } else {
                        g.wide_ff
                    }
                })
                .collect();
            meta.retain(|(k, _)| *k != key("feed_forward_length"));
            meta.push((
                key("feed_forward_length"),
                Value::Array(lamina::gguf::Array::U32(ff)),
            ));
        }
        if let Some(sections) = self.rope_sections {
            meta.push((
                key("rope.dimension_sections"),
                Value::Array(lamina::gguf::Array::I32(sections.to_vec())),
            ));
        }
        if let Some(e) = self.experts {
            meta.extend([
                (key("expert_count"), Value::U32(e.n_expert)),
                (key("expert_used_count"), Value::U32(e.n_used)),
                (key("expert_feed_forward_length"), Value::U32(e.n_ff)),
            ]);
            if e.sigmoid_bias {
                meta.push((key("expert_gating_func"), Value::U32(2)));
                meta.push((key("leading_dense_block_count"), Value::U32(e.dense_lead)));
            }
            if e.shared_ff > 0 {
                meta.push((
                    key("expert_shared_feed_forward_length"),
                    Value::U32(e.shared_ff),
                ));
            }
        }
        meta.extend(self.keys.iter().map(|(k, v)| (key(k), Value::F32(*v))));
        meta.extend(self.u32_keys.iter().map(|(k, v)| (key(k), Value::U32(*v))));
        meta.extend(
            self.bool_keys
                .iter()
                .map(|(k, v)| (key(k), Value::Bool(*v))),
        );
        for (k, v) in vocab.metadata().iter() {
            if k == "tokenizer.ggml.pre" && self.pre.is_some() {
                meta.push((k.to_string(), Value::String(self.pre.unwrap_or("").into())));
            } else if k.starts_with("tokenizer.") {
                meta.push((k.to_string(), v.clone()));
            }
        }
        for (k, v) in meta {
            w.add_metadata(k, v).expect("metadata");
        }

        let mut t = Tensors {
            list: Vec::new(),
            rng: Rng::new(0x5EED_0000 ^ self.name.len() as u64 ^ (self.n_layer as u64) << 8),
        };
        // Sizes per layer are set in the loop (Gemma 4's differ).
        let (d, ff) = (self.n_embd as u64, self.n_ff as u64);
        let wt = self.weights;
        t.matrix(
            "token_embd.weight",
            self.embedding,
            n_vocab,
            d,
            self.vocab_amplitude,
        );
        let mut norms: Vec<(String, u64)> = vec![(format!("{}.weight", self.output_norm), d)];
        let scale = |cols: u64| 2.0 / (cols as f32).sqrt();
        for i in 0..self.n_layer {
            let n = |n: &str| format!("blk.{i}.{n}.weight");
            // Gemma 4's layers differ in heads, caches and feed-forwards.
            let (hd, stores) = self
                .gemma4
                .map_or((self.head_dim, true), |g| g.layer(self, i));
            let n_head_kv = self.gemma4.map_or(self.n_head_kv, |g| g.kv_heads(self, i));
            let (qw, kvw) = ((self.n_head * hd) as u64, (n_head_kv * hd) as u64);
            let ff = match self.gemma4 {
                Some(g) if !stores => g.wide_ff as u64,
                _ => ff,
            };
            let keys_as_values = self.gemma4.is_some_and(|g| !g.sliding[i as usize]);
            let conv = self.short_conv.filter(|c| c.layers.contains(&i));
            let delta_net = self.delta_net.filter(|dn| dn.recurrent(i));
            let gated_q = self.delta_net.is_some();
            if let Some(dn) = delta_net {
                let (kd, vd, hv) = (
                    (dn.n_head_k * dn.dim) as u64,
                    (dn.n_head_v * dn.dim) as u64,
                    dn.n_head_v as u64,
                );
                t.matrix(&n("attn_qkv"), wt, 2 * kd + vd, d, scale(d));
                t.matrix(&n("attn_gate"), wt, vd, d, scale(d));
                t.matrix(
                    &n("ssm_conv1d"),
                    GgmlType::F32,
                    2 * kd + vd,
                    dn.taps as u64,
                    0.5,
                );
                t.matrix(&n("ssm_alpha"), wt, hv, d, scale(d));
                t.matrix(&n("ssm_beta"), wt, hv, d, scale(d));
                let dt: Vec<f32> = (0..hv).map(|_| uniform(&mut t.rng, 1.0)).collect();
                t.vector(&format!("blk.{i}.ssm_dt.bias"), &dt);
                // -exp(A_log) as the converter stores it: negative, here in
                // (-1.9, -0.1] (drawn without exp, whose last bit differs
                // between targets' libms).
                let a: Vec<f32> = (0..hv).map(|_| -1.0 - uniform(&mut t.rng, 0.9)).collect();
                t.vector(&format!("blk.{i}.ssm_a"), &a);
                t.matrix(&n("ssm_out"), wt, d, vd, scale(vd));
                norms.push((n("ssm_norm"), dn.dim as u64));
            } else if let Some(c) = conv {
                let taps = c.taps as u64;
                t.matrix(&n("shortconv.conv"), GgmlType::F32, d, taps, 1.0);
                t.matrix(&n("shortconv.in_proj"), wt, 3 * d, d, scale(d));
                t.matrix(&n("shortconv.out_proj"), wt, d, d, scale(d));
            } else if self.fused {
                t.matrix(&n("attn_qkv"), wt, qw + 2 * kvw, d, scale(d));
            } else {
                let q_rows = if gated_q { 2 * qw } else { qw };
                t.matrix(&n("attn_q"), wt, q_rows, d, scale(d));
                if stores {
                    t.matrix(&n("attn_k"), wt, kvw, d, scale(d));
                }
                if stores && !keys_as_values {
                    t.matrix(&n("attn_v"), wt, kvw, d, scale(d));
                }
            }
            if conv.is_none() && delta_net.is_none() {
                t.matrix(&n("attn_output"), wt, d, qw, scale(qw));
            }
            let experts = self.experts.filter(|e| i >= e.dense_lead);
            if let Some(e) = experts {
                let (ne, eff) = (e.n_expert as u64, e.n_ff as u64);
                t.matrix(&n("ffn_gate_inp"), GgmlType::F32, ne, d, 3.0 * scale(d));
                if e.sigmoid_bias {
                    let b: Vec<f32> = (0..ne).map(|_| uniform(&mut t.rng, 0.5)).collect();
                    t.vector(&format!("blk.{i}.exp_probs_b.bias"), &b);
                }
                t.stacked(&n("ffn_gate_exps"), wt, ne, eff, d, scale(d));
                t.stacked(&n("ffn_up_exps"), wt, ne, eff, d, scale(d));
                t.stacked(&n("ffn_down_exps"), wt, ne, d, eff, scale(eff));
                let sff = e.shared_ff as u64;
                if sff > 0 {
                    t.matrix(&n("ffn_gate_shexp"), wt, sff, d, scale(d));
                    t.matrix(&n("ffn_up_shexp"), wt, sff, d, scale(d));
                    t.matrix(&n("ffn_down_shexp"), wt, d, sff, scale(sff));
                    if e.shared_gate {
                        t.matrix(&n("ffn_gate_inp_shexp"), GgmlType::F32, 1, d, scale(d));
                        // A 1-D tensor in the file, as the converter writes it.
                        let last = t.list.last_mut().expect("just written");
                        last.2 = vec![d];
                    }
                }
            } else if self.fused {
                t.matrix(&n("ffn_up"), wt, 2 * ff, d, scale(d));
            } else {
                t.matrix(&n("ffn_gate"), wt, ff, d, scale(d));
                t.matrix(&n("ffn_up"), wt, ff, d, scale(d));
            }
            if experts.is_none() {
                t.matrix(&n("ffn_down"), wt, d, ff, scale(ff));
            }
            norms.push((n("attn_norm"), d));
            norms.push((n(self.ffn_norm), d));
            if self.qk_norm && conv.is_none() && delta_net.is_none() {
                norms.push((n("attn_q_norm"), hd as u64));
                if stores {
                    norms.push((n("attn_k_norm"), hd as u64));
                }
            }
            if let Some(g) = self.gemma4 {
                let pl = g.per_layer as u64;
                t.matrix(&n("inp_gate"), wt, pl, d, scale(d));
                // Q8_0: Q4_K's blocks are wider than the 32 inputs.
                t.matrix(&n("proj"), GgmlType::Q8_0, d, pl, scale(pl));
                norms.push((n("post_norm"), d));
                let s = 0.75 + uniform(&mut t.rng, 0.25);
                t.vector(&n("layer_output_scale"), &[s]);
            }
            if self.post_norms {
                norms.push((n("post_attention_norm"), d));
                norms.push((n("post_ffw_norm"), d));
            }
            if self.qkv_bias {
                for (b, len) in [("attn_q", qw), ("attn_k", kvw), ("attn_v", kvw)] {
                    let v: Vec<f32> = (0..len).map(|_| uniform(&mut t.rng, 0.5)).collect();
                    t.vector(&format!("blk.{i}.{b}.bias"), &v);
                }
            }
        }
        if self.output {
            t.matrix("output.weight", wt, n_vocab, d, self.vocab_amplitude);
        }
        for (name, len) in norms {
            let v: Vec<f32> = (0..len).map(|_| 1.0 + uniform(&mut t.rng, 0.25)).collect();
            t.vector(&name, &v);
        }
        let half = self.head_dim as usize / 2;
        let ramp = |top: f32| -> Vec<f32> {
            (0..half)
                .map(|i| 1.0 + (top - 1.0) * (i as f32 / (half - 1) as f32).powi(2))
                .collect()
        };
        if let Some(g) = self.gemma4 {
            let all = (g.per_layer * self.n_layer) as u64;
            t.matrix(
                "per_layer_token_embd.weight",
                self.embedding,
                n_vocab,
                all,
                1.0,
            );
            t.matrix("per_layer_model_proj.weight", wt, all, d, scale(d));
            let norm: Vec<f32> = (0..g.per_layer)
                .map(|_| 1.0 + uniform(&mut t.rng, 0.25))
                .collect();
            t.vector("per_layer_proj_norm.weight", &norm);
            // Proportional RoPE as the converter writes it: a quarter of
            // the global heads' pairs rotate, the others' angles are
            // divided by 1e30.
            let rotated = half / 4;
            let factors: Vec<f32> = (0..half)
                .map(|i| if i < rotated { 1.0 } else { 1e30 })
                .collect();
            t.vector("rope_freqs.weight", &factors);
        }
        if self.rope_freqs {
            // Llama 3.1's shape: high frequencies kept, low ones divided by
            // up to 8, a smooth ramp between.
            t.vector("rope_freqs.weight", &ramp(8.0));
        }
        if self.rope_factors {
            // LongRoPE's: short factors near 1, long ones growing further.
            t.vector("rope_factors_short.weight", &ramp(1.5));
            t.vector("rope_factors_long.weight", &ramp(12.0));
        }
        for name in extra {
            t.vector(name, &[0.5; 4]);
        }
        for (name, ty, shape, data) in t.list {
            w.add_tensor(name, ty, &shape, data).expect("tensor");
        }
        w.to_bytes()
    }
}

/// The tensors of a model being written, and the random values they take.
struct Tensors {
    list: Vec<(String, GgmlType, Vec<u64>, Vec<u8>)>,
    rng: Rng,
}

impl Tensors {
    /// `rows` x `cols` values uniform in [-a, a), quantized to `ty`.
    fn matrix(&mut self, name: &str, ty: GgmlType, rows: u64, cols: u64, a: f32) {
        let values: Vec<f32> = (0..rows * cols)
            .map(|_| uniform(&mut self.rng, a))
            .collect();
        let dtype = DType::try_from(ty).expect("a supported type");
        let mut bytes = vec![0u8; dtype.bytes_for(values.len())];
        convert::quantize(dtype, &values, &mut bytes).expect("quantize");
        self.list.push((name.into(), ty, vec![cols, rows], bytes));
    }

    /// `n` matrices of `rows` x `cols` as one 3-D tensor (experts).
    fn stacked(&mut self, name: &str, ty: GgmlType, n: u64, rows: u64, cols: u64, a: f32) {
        self.matrix(name, ty, n * rows, cols, a);
        let last = self.list.last_mut().expect("just written");
        last.2 = vec![cols, rows, n];
    }

    fn vector(&mut self, name: &str, v: &[f32]) {
        self.list
            .push((name.into(), GgmlType::F32, vec![v.len() as u64], f32_le(v)));
    }
}

fn f32_le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
