//! Generation without vLLM: TRL's `use_vllm = false` (and Unsloth's `fast_inference = false`)
//! has the trained model generate the whole local generation batch in one `generate` call on
//! the training GPU (trl 1.15.0 `GRPOTrainer._generate_single_turn`), between training steps.
//! Read from the wheels (transformers 5.17.0, trl 1.15.0, unsloth 2026.10.9); not measured.

use crate::arch::Arch;
use crate::run::attention::Attention;
use crate::run::{RunConfig, Stack};

/// The generation phase's memory above the trainer's static memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GenerateMemory {
    /// the KV cache of every row at full length
    pub kv_cache: u64,
    /// the prefill forward's working set, or the cache's growth copy while decoding
    pub activations: u64,
    /// one decoding step's last-token logits and the sampler's fp32 copies
    pub logits: u64,
}

impl GenerateMemory {
    pub fn total(&self) -> u64 {
        self.kv_cache + self.activations + self.logits
    }
}

/// Unsloth's decoding cache grows 512 positions at a time (`KV_CACHE_INCREMENT`,
/// unsloth/models/llama.py), starting at the prompt plus 512 plus one.
const UNSLOTH_KV_INCREMENT: u64 = 512;

/// The memory of generating `run`'s generation batch (`per_device_train_batch_size x
/// steps_per_generation` rows, each prompt already repeated per completion by TRL's sampler):
/// - the KV cache, `DynamicCache` (transformers `_prepare_cache_for_generation` with
///   `cache_implementation = None`): every layer's keys and values for prompt + completion
///   tokens of every row, in bf16 (the projections run under the trainer's autocast);
///   sliding-window layers keep their window. Every row runs to the longest completion;
/// - the prefill: one forward of all prompts (`logits_to_keep = 1`), whose largest working set
///   is a layer's MLP (gate, up and their product) beside the residual stream;
/// - decoding: `DynamicLayer.update` grows a layer's cache with `torch.cat`, a second copy of
///   that layer for a moment; the last position's logits are copied to fp32
///   (`outputs.logits[:, -1].to(copy=True, dtype=torch.float32)`), and the sampler's
///   temperature and softmax make two more fp32 copies.
pub fn generate_memory(run: &RunConfig) -> GenerateMemory {
    let arch = &run.arch;
    let rows = run.generation_rows();
    let length = run.sequence_len();
    let cached = match run.stack {
        Stack::Trl => length,
        Stack::Unsloth => {
            run.prompt_len
                + 1
                + run.completion_len.div_ceil(UNSLOTH_KV_INCREMENT).max(1) * UNSLOTH_KV_INCREMENT
        }
    };
    let kv_cache = rows * arch.kv_bytes_for(cached);
    let prompt_cache = rows * arch.kv_bytes_for(run.prompt_len);
    let prefill = prefill_working_set(arch, rows * run.prompt_len).max(eager_prefill(run, rows));
    let growth = rows * 2 * arch.kv_dim() * 2 * length;
    let logits = rows * arch.vocab * (2 + 3 * 4);
    // the prefill happens with the prompts' cache only; decoding ends with the whole cache
    if prompt_cache + prefill > kv_cache + growth + logits {
        GenerateMemory {
            kv_cache: prompt_cache,
            activations: prefill,
            logits: 0,
        }
    } else {
        GenerateMemory {
            kv_cache,
            activations: growth,
            logits,
        }
    }
}

/// A no-grad forward's largest moment, per layer: the residual stream and the normed input
/// (bf16), and the MLP's gate, up and product.
fn prefill_working_set(arch: &Arch, tokens: u64) -> u64 {
    tokens * (2 * arch.hidden * 2 + 3 * arch.intermediate * 2)
}

/// TRL's prefill under `attn_implementation = "eager"` (`eager_attention_forward`, transformers
/// 5.17.0): one layer at a time, the prompts' scores `rows x heads x P x P`, scaled and masked in
/// bf16 (2 bytes), then `softmax(..., dtype=torch.float32)`, which casts them to fp32 (4) before
/// its fp32 output (4) (torch 2.9 `at::softmax`: `toType(dtype)` then `_softmax`): 10 bytes a
/// score at once, beside the residual stream and the normed input (2 H each) and the padded
/// prompts' float mask (`eager_mask`, 2 bytes `rows x P x P`). SDPA and flash attention keep
/// the scores on chip. Unsloth generates through its own attention.
fn eager_prefill(run: &RunConfig, rows: u64) -> u64 {
    if run.stack != Stack::Trl || run.attention != Attention::Eager {
        return 0;
    }
    let p = run.prompt_len;
    rows * p * 2 * run.arch.hidden * 2 + rows * p * p * (run.arch.heads * 10 + 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    #[test]
    fn cache_covers_every_row_of_the_generation_batch() {
        let arch = catalog::find("Qwen/Qwen2.5-1.5B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch.clone());
        run.micro_batch = 4;
        run.grad_accum = 4;
        let m = generate_memory(&run);
        // 16 rows x 1024 tokens x 28 layers x 2 x 256 x 2 bytes
        assert_eq!(m.kv_cache, 16 * arch.kv_bytes_for(1024));
        assert_eq!(m.kv_cache, 16 * 1024 * 28 * 2 * 256 * 2);
        run.grad_accum = 8;
        assert_eq!(generate_memory(&run).kv_cache, 2 * m.kv_cache);
    }

    /// Eager attention's prefill holds one layer's scores of every prompt at once: 64 rows of
    /// 2,048 tokens at Qwen2.5-1.5B (12 heads), 10 bytes a score and the 2-byte mask, 32.7 GB
    /// beside a few hundred MB of MLP; SDPA's prefill stays the MLP's.
    #[test]
    fn eager_prefill_holds_a_layers_scores() {
        let arch = catalog::find("Qwen/Qwen2.5-1.5B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch.clone());
        run.micro_batch = 8;
        run.grad_accum = 8;
        run.prompt_len = 2048;
        run.completion_len = 256;
        let rows = run.generation_rows();
        assert_eq!(rows, 64);
        let sdpa = generate_memory(&run);
        assert_eq!(
            sdpa.activations,
            prefill_working_set(&arch, rows * 2048),
            "{sdpa:?}"
        );
        run.attention = Attention::Eager;
        let eager = generate_memory(&run);
        let scores = 64 * 2048 * 2048;
        assert_eq!(
            eager.activations,
            rows * 2048 * 4 * arch.hidden + scores * (12 * 10 + 2)
        );
        run.attention = Attention::Flash(2);
        assert_eq!(generate_memory(&run), sdpa);
    }

    #[test]
    fn unsloth_cache_grows_in_steps_of_512() {
        let arch = catalog::find("Qwen/Qwen2.5-1.5B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch.clone());
        run.switch_stack(Stack::Unsloth);
        run.completion_len = 600;
        let m = generate_memory(&run);
        assert_eq!(
            m.kv_cache,
            run.generation_rows() * arch.kv_bytes_for(256 + 1 + 1024)
        );
    }
}
