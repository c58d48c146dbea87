//! The attention implementation the policy is loaded with (`attn_implementation`, a
//! `from_pretrained` keyword: TRL's `ModelConfig.attn_implementation`, or
//! `GRPOConfig.model_init_kwargs`), as transformers 5.17.0 resolves it
//! (`PreTrainedModel.get_correct_attn_implementation`: unset is "sdpa"; `_global_mapping` in
//! `AttentionInterface` names the functions). Each saves different tensors for the backward
//! (`memory::step::shape::layer_tensors`, `memory::step::recompute`).

use serde::{Serialize, Serializer};

/// Which attention function each decoder layer calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Attention {
    /// `sdpa_attention_forward` (`integrations/sdpa_attention.py`), transformers' default: a
    /// padded batch's 4-D mask, K and V repeated to the query's heads (`repeat_kv`) when a mask
    /// is passed; the scores never leave the kernel
    #[default]
    Sdpa,
    /// `eager_attention_forward` (each family's modeling file): `repeat_kv`, `softmax(QK^T)`
    /// materialised in fp32 and cast back, both kept for the backward; a float 4-D mask
    Eager,
    /// `flash_attention_forward` (`integrations/flash_attention.py`) for flash_attention_2, 3
    /// or 4 and the Hub kernels transformers falls back to for them
    /// (`FLASH_ATTN_KERNEL_FALLBACK`): grouped K and V as they are, a 2-D padding mask only
    /// (`masking_utils.flash_attention_mask`), the padded batch unpadded by `_upad_input`
    Flash(u8),
}

/// The Hub kernels transformers 5.17.0 loads for a flash-attention version
/// (`modeling_flash_attention_utils.FLASH_ATTN_KERNEL_FALLBACK`; ROCm's flash_attention_3 is
/// `aiter-flash-attn`), and the version each stands for.
const FLASH_KERNELS: [(&str, u8); 4] = [
    ("kernels-community/flash-attn2", 2),
    ("kernels-community/vllm-flash-attn3", 3),
    ("kernels-community/aiter-flash-attn", 3),
    ("kernels-community/flash-attn4", 4),
];

/// What `parse` accepts, for the message that refuses anything else.
pub const ACCEPTED: &str = "\"sdpa\", \"eager\", \"flash_attention_2\", \"flash_attention_3\", \"flash_attention_4\" or one of the Hub kernels transformers loads for them (\"kernels-community/flash-attn2\", \"kernels-community/vllm-flash-attn3\", \"kernels-community/aiter-flash-attn\", \"kernels-community/flash-attn4\")";

impl Attention {
    /// The implementation a value names, or `None` for one grpofit does not model
    /// (`flex_attention`, the `paged|` implementations of continuous batching, other kernels).
    pub fn parse(value: &str) -> Option<Attention> {
        match value {
            "sdpa" => Some(Attention::Sdpa),
            "eager" => Some(Attention::Eager),
            "flash_attention_2" => Some(Attention::Flash(2)),
            "flash_attention_3" => Some(Attention::Flash(3)),
            "flash_attention_4" => Some(Attention::Flash(4)),
            _ => FLASH_KERNELS
                .iter()
                .find(|(name, _)| *name == value)
                .map(|(_, v)| Attention::Flash(*v)),
        }
    }

    /// The name transformers gives it.
    pub fn name(self) -> &'static str {
        match self {
            Attention::Sdpa => "sdpa",
            Attention::Eager => "eager",
            Attention::Flash(3) => "flash_attention_3",
            Attention::Flash(4) => "flash_attention_4",
            Attention::Flash(_) => "flash_attention_2",
        }
    }

    /// K and V repeated to the query's head count before the kernel (`repeat_kv`): eager always,
    /// SDPA when a mask is passed (`use_gqa_in_sdpa` needs `attention_mask is None` on CUDA);
    /// flash attention takes grouped K and V.
    pub fn repeats_kv_with_mask(self) -> bool {
        !matches!(self, Attention::Flash(_))
    }

    pub fn is_default(&self) -> bool {
        *self == Attention::Sdpa
    }
}

impl std::fmt::Display for Attention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Attention {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_what_transformers_runs() {
        assert_eq!(Attention::parse("sdpa"), Some(Attention::Sdpa));
        assert_eq!(Attention::parse("eager"), Some(Attention::Eager));
        assert_eq!(
            Attention::parse("flash_attention_2"),
            Some(Attention::Flash(2))
        );
        assert_eq!(
            Attention::parse("kernels-community/vllm-flash-attn3"),
            Some(Attention::Flash(3))
        );
        assert_eq!(
            Attention::parse("kernels-community/flash-attn2").map(Attention::name),
            Some("flash_attention_2")
        );
        for unknown in ["flash", "Eager", "flex_attention", "paged|sdpa", ""] {
            assert_eq!(Attention::parse(unknown), None, "{unknown}");
        }
        assert!(Attention::Eager.repeats_kv_with_mask());
        assert!(Attention::Sdpa.repeats_kv_with_mask());
        assert!(!Attention::Flash(2).repeats_kv_with_mask());
    }
}
