//! How many bytes a tensor of weights takes in each format a run can load its weights in.

use crate::run::Quant;

/// Bytes of `elements` weights stored as `quant`; `quantisable`: whether the stack quantises
/// this tensor (bitsandbytes and fp8 pack linear layers; norms and embeddings stay 16-bit).
pub fn tensor_bytes(elements: u64, quant: Quant, quantisable: bool) -> u64 {
    match (quant, quantisable) {
        // TRL's ModelConfig default dtype: every tensor in fp32
        (Quant::Fp32, _) => elements * 4,
        (Quant::Bf16, _) | (_, false) => elements * 2,
        // fp8 e4m3 with one fp32 scale per 128 x 128 block (Unsloth's FP8 checkpoints,
        // vLLM's block-wise fp8): a byte a weight
        (Quant::Fp8, true) => elements + elements / (128 * 128) * 4,
        // LLM.int8: one byte a weight plus one fp32 scale per output row (taken as per 4096 weights)
        (Quant::Int8, true) => elements + elements / 1024,
        // NF4: half a byte a weight; one 8-bit absmax per 64 weights; one fp32 per 256 absmaxes
        (Quant::Nf4, true) => elements / 2 + elements / 64 + elements / (64 * 256) * 4,
    }
}
