//! llama-quantize's mixtures (Q4_K_M and friends, IQ4_NL, IQ4_XS): which type each
//! weight gets, by what it is (output, attention V, feed-forward down, ...)
//! and where its layer sits, as llama.cpp's `llama_tensor_get_type` decides
//! for a model without experts and without an importance matrix.

use crate::tensor::DType;

/// A mixture: the ftype's name selects its rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    Q2K,
    Q3KS,
    Q3KM,
    Q3KL,
    Q4KS,
    Q4KM,
    Q5KS,
    Q5KM,
    /// IQ4_NL and IQ4_XS (the same rules).
    IQ4,
}

/// What a weight is, as llama.cpp sorts them (by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Output,
    TokenEmbd,
    /// Attention V, or a fused QKV (both count as "attn_v" for the rules).
    AttnV,
    AttnK,
    AttnQ,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

impl Category {
    pub fn of(name: &str) -> Category {
        match name {
            "output.weight" => return Category::Output,
            "token_embd.weight" | "per_layer_token_embd.weight" => return Category::TokenEmbd,
            _ => {}
        }
        const BY_NAME: &[(&str, Category)] = &[
            ("attn_qkv.weight", Category::AttnV),
            ("attn_kv_b.weight", Category::AttnV),
            ("attn_v.weight", Category::AttnV),
            ("attn_k.weight", Category::AttnK),
            ("attn_q.weight", Category::AttnQ),
            ("attn_output.weight", Category::AttnOutput),
            ("ffn_up", Category::FfnUp),
            ("ffn_gate", Category::FfnGate),
            ("ffn_down", Category::FfnDown),
        ];
        BY_NAME
            .iter()
            .find(|(part, _)| name.contains(part))
            .map_or(Category::Other, |&(_, c)| c)
    }
}

/// The model facts the rules read.
#[derive(Clone, Copy, Debug)]
pub struct ModelFacts {
    pub n_layer: usize,
    /// Query heads per KV head.
    pub n_gqa: usize,
    /// llama.cpp's 70B type (80 layers): attention V gets more bits.
    pub is_70b: bool,
}

/// The running counts llama-quantize keeps while it walks the tensors in
/// order: attention-V tensors and feed-forward-down tensors seen so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub n_attn_v: usize,
    pub i_attn_v: usize,
    pub i_ffn_down: usize,
}

/// Layers where the mixtures spend more bits: the first and last eighth,
/// and every third between.
fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64) % 3 == 2
}

/// The type for a weight of `category` under `mix` (before the fallback for
/// rows that are not whole blocks), advancing the counters as llama.cpp
/// does. `default` is the mixture's base type.
pub fn mix_type(
    mix: Mix,
    default: DType,
    category: Category,
    facts: &ModelFacts,
    c: &mut Counters,
) -> DType {
    use DType::*;
    use Mix::*;
    let mut ty = default;
    match category {
        Category::AttnV => {
            let (i, n) = (c.i_attn_v, c.n_attn_v);
            ty = match mix {
                Q2K if facts.n_gqa >= 4 => Q4_K,
                Q2K => Q3_K,
                Q3KM if i < 2 => Q5_K,
                Q3KM => Q4_K,
                Q3KL => Q5_K,
                Q4KM | Q5KM if use_more_bits(i, n) => Q6_K,
                Q4KS if i < 4 => Q5_K,
                IQ4 if facts.n_gqa >= 4 => Q5_K,
                _ => ty,
            };
            if facts.is_70b && (ty == Q3_K || ty == Q4_K) {
                ty = Q5_K;
            }
            c.i_attn_v += 1;
        }
        Category::FfnDown => {
            let (i, n) = (c.i_ffn_down, facts.n_layer);
            ty = match mix {
                Q2K => Q3_K,
                Q3KM if i < n / 16 => Q5_K,
                // llama.cpp's test reads "not falcon or more bits": always
                // true for the architectures lamina runs.
                Q3KM => Q4_K,
                Q3KL => Q5_K,
                Q4KM | Q5KM if use_more_bits(i, n) => Q6_K,
                Q4KS if i < n / 8 => Q5_K,
                // Without an importance matrix (lamina never has one).
                IQ4 if i < n / 8 => Q5_K,
                _ => ty,
            };
            c.i_ffn_down += 1;
        }
        Category::AttnOutput => {
            ty = match mix {
                Q2K => Q3_K,
                Q3KM => Q4_K,
                Q3KL => Q5_K,
                _ => ty,
            };
        }
        _ => {}
    }
    ty
}

impl Mix {
    pub fn for_name(name: &str) -> Option<Mix> {
        Some(match name {
            "Q2_K" => Mix::Q2K,
            "Q3_K_S" => Mix::Q3KS,
            "Q3_K_M" => Mix::Q3KM,
            "Q3_K_L" => Mix::Q3KL,
            "Q4_K_S" => Mix::Q4KS,
            "Q4_K_M" => Mix::Q4KM,
            "Q5_K_S" => Mix::Q5KS,
            "Q5_K_M" => Mix::Q5KM,
            "IQ4_NL" | "IQ4_XS" => Mix::IQ4,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn more_bits_where_llama_cpp_puts_them() {
        // 30 layers: the first 3, the last 4, and every third from layer 5.
        let more: Vec<usize> = (0..30).filter(|&i| use_more_bits(i, 30)).collect();
        assert_eq!(more, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
    }

    #[test]
    fn categories_by_name() {
        assert_eq!(Category::of("blk.3.attn_qkv.weight"), Category::AttnV);
        assert_eq!(Category::of("blk.3.ffn_down.weight"), Category::FfnDown);
        assert_eq!(Category::of("output.weight"), Category::Output);
        assert_eq!(Category::of("blk.0.attn_norm.weight"), Category::Other);
    }
}
