//! The `ggml_type` ids stored in GGUF tensor infos, with each type's block size
//! (elements per block) and block byte size. Ids that ggml retired (Q4_2, Q4_3, the
//! Q4_0_x_y and IQ4_NL_x_y repacks) are not valid in files and are not listed.

use std::fmt;

macro_rules! ggml_types {
    ($($variant:ident = $id:literal, $name:literal, $block:literal, $bytes:literal;)*) => {
        /// A tensor element type as stored in a GGUF file.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $($variant = $id,)*
        }

        impl GgmlType {
            /// Every type a GGUF file may carry, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant,)*];

            /// The type with this on-disk id, if ggml defines one.
            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $($id => Some(GgmlType::$variant),)*
                    _ => None,
                }
            }

            /// ggml's name for the type, as llama.cpp prints it ("Q4_1", "F32").
            pub fn name(self) -> &'static str {
                match self { $(GgmlType::$variant => $name,)* }
            }

            /// Elements per block (1 for plain element types).
            pub fn block_size(self) -> u64 {
                match self { $(GgmlType::$variant => $block,)* }
            }

            /// Bytes per block.
            pub fn block_bytes(self) -> u64 {
                match self { $(GgmlType::$variant => $bytes,)* }
            }
        }
    };
}

// id, name, elements per block, bytes per block (from ggml's block struct layouts).
ggml_types! {
    F32 = 0, "F32", 1, 4;
    F16 = 1, "F16", 1, 2;
    Q4_0 = 2, "Q4_0", 32, 18;
    Q4_1 = 3, "Q4_1", 32, 20;
    Q5_0 = 6, "Q5_0", 32, 22;
    Q5_1 = 7, "Q5_1", 32, 24;
    Q8_0 = 8, "Q8_0", 32, 34;
    Q8_1 = 9, "Q8_1", 32, 36;
    Q2_K = 10, "Q2_K", 256, 84;
    Q3_K = 11, "Q3_K", 256, 110;
    Q4_K = 12, "Q4_K", 256, 144;
    Q5_K = 13, "Q5_K", 256, 176;
    Q6_K = 14, "Q6_K", 256, 210;
    Q8_K = 15, "Q8_K", 256, 292;
    IQ2_XXS = 16, "IQ2_XXS", 256, 66;
    IQ2_XS = 17, "IQ2_XS", 256, 74;
    IQ3_XXS = 18, "IQ3_XXS", 256, 98;
    IQ1_S = 19, "IQ1_S", 256, 50;
    IQ4_NL = 20, "IQ4_NL", 32, 18;
    IQ3_S = 21, "IQ3_S", 256, 110;
    IQ2_S = 22, "IQ2_S", 256, 82;
    IQ4_XS = 23, "IQ4_XS", 256, 136;
    I8 = 24, "I8", 1, 1;
    I16 = 25, "I16", 1, 2;
    I32 = 26, "I32", 1, 4;
    I64 = 27, "I64", 1, 8;
    F64 = 28, "F64", 1, 8;
    IQ1_M = 29, "IQ1_M", 256, 56;
    BF16 = 30, "BF16", 1, 2;
    TQ1_0 = 34, "TQ1_0", 256, 54;
    TQ2_0 = 35, "TQ2_0", 256, 66;
    MXFP4 = 39, "MXFP4", 32, 17;
}

impl GgmlType {
    /// The type whose name is `name` (case-insensitive), e.g. "q4_0".
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Bytes taken by one row of `row_len` elements, or `None` when the row does not
    /// fill whole blocks or the size overflows.
    pub fn row_bytes(self, row_len: u64) -> Option<u64> {
        if row_len % self.block_size() != 0 {
            return None;
        }
        (row_len / self.block_size()).checked_mul(self.block_bytes())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn ids_and_names_round_trip() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t as u32), Some(t));
            assert_eq!(GgmlType::from_name(&t.name().to_lowercase()), Some(t));
        }
        for retired in [4, 5, 31, 32, 33, 36, 37, 38, 40, 1000] {
            assert_eq!(GgmlType::from_id(retired), None, "id {retired}");
        }
    }

    #[test]
    fn row_bytes_needs_whole_blocks() {
        assert_eq!(GgmlType::Q4_1.row_bytes(576), Some(18 * 20));
        assert_eq!(GgmlType::Q4_K.row_bytes(576), None);
        assert_eq!(GgmlType::F32.row_bytes(3), Some(12));
        assert_eq!(GgmlType::F32.row_bytes(u64::MAX), None);
    }
}
