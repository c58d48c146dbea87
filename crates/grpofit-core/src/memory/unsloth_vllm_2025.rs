//! Unsloth's vLLM batch limits before unsloth_zoo 2025.11.6 (`UnslothVllmLimits::SequencesByKv`):
//! `unsloth_zoo.vllm_utils.load_vllm` takes `memory_left_for_kv_cache_gb` from
//! `approximate_vllm_memory_usage`, picks `max_num_seqs` from a tier of it (128 to 400) and passes
//! `max_num_batched_tokens = max_seq_length` ("Chunked prefill tokens"). The same code in the
//! unsloth_zoo 2025.2.4, 2025.2.7, 2025.5.2, 2025.8.9, 2025.11.3 and 2025.11.5 wheels; replaced
//! in 2025.11.6 by the paired table in `vllm::batch_limits`.

use super::unsloth_checkpoint::loads_prequantized;
use crate::arch::Arch;
use crate::contract::release::Release;
use crate::run::{Quant, RunConfig};
use crate::units::GIB;

/// `approximate_vllm_memory_usage`'s `bytes_for_model`: Unsloth's own count of vLLM's weights,
/// not vLLM's. Per layer q, k, v, o (`kv_size = hidden // heads x kv_heads`) and a three-matrix
/// MLP in 16 bits, divided by `factor`; the embedding, the untied LM head and one layer's two
/// norms (sic: not times the layers) in 16 bits; fp16 LoRA A and B of `max_lora_rank` on all
/// seven projections, one adapter (`max_loras = 1`).
/// `factor`: 16/5 when 4-bit (2025.2.4 to 2025.9.7: `"quantization_config" in config`, a
/// pre-quantized bnb checkpoint, `counted_quant`; 2025.9.8 to 2025.11.5:
/// `load_in_4bit = use_bitsandbytes`), 8/5 for fp8 (2025.11.5: `load_in_8bit = is_fp8`), else 1.
pub fn model_bytes(arch: &Arch, quant: Quant, max_lora_rank: u64) -> f64 {
    let (hd, mlp_size, layers, r) = (arch.hidden, arch.intermediate, arch.layers, max_lora_rank);
    let kv_size = hd / arch.heads.max(1) * arch.kv_heads;
    let qkvo = (hd + kv_size + kv_size + hd) * hd;
    let mlp = hd * mlp_size * 3;
    let layernorms = 2 * hd;
    let embed_tokens = arch.vocab * hd;
    let lm_head = if arch.tied_embeddings {
        0
    } else {
        arch.vocab * hd
    };
    let qkvo_a = hd * r * 4;
    let qkvo_b = r * (hd + kv_size + kv_size + hd);
    let mlp_a = hd * r * 2 + mlp_size * r;
    let mlp_b = r * (mlp_size + mlp_size) + r * hd;
    let lora = (qkvo_a + qkvo_b + mlp_a + mlp_b) * layers * 2;
    let quantizable = (qkvo + mlp) * layers * 2;
    let float16 = (layernorms + embed_tokens + lm_head) * 2;
    let factor = match quant {
        Quant::Nf4 => 16.0 / 5.0,
        Quant::Fp8 => 8.0 / 5.0,
        _ => 1.0,
    };
    quantizable as f64 / factor + float16 as f64 + lora as f64
}

/// `memory_left_for_kv_cache`, bytes: vLLM's share (`free_memory` after the activation cap,
/// which is `budget`) less `model_bytes`, at least 0.
pub fn kv_estimate(run: &RunConfig, budget: u64) -> f64 {
    let rank = run.max_lora_rank.unwrap_or(run.lora_rank);
    (budget as f64 - model_bytes(&run.arch, counted_quant(run), rank)).max(0.0)
}

/// The first Unsloth release to require an unsloth_zoo (>= 2025.9.9, its METADATA) whose
/// `approximate_vllm_memory_usage` counts 4-bit by `load_in_4bit = use_bitsandbytes`, the
/// `load_in_4bit` of `from_pretrained` (unsloth_zoo 2025.9.8 on; 2025.9.7 and before read the
/// checkpoint's config).
const COUNTS_BY_FLAG: Release = Release::new(2025, 9, 7);

/// The weights' format as `approximate_vllm_memory_usage` counts them. Before `COUNTS_BY_FLAG`,
/// 4-bit only when the checkpoint Unsloth loads is pre-quantized (`load_in_4bit =
/// "quantization_config" in config`, unsloth_zoo 2025.2.4 to 2025.9.7, with `config` the
/// `AutoConfig` of the name `get_model_name` gives, unsloth `FastLlamaModel.from_pretrained`):
/// a name Unsloth's mapper does not swap for a `-bnb-4bit` upload is quantized on the fly, yet
/// counted in 16 bits (`unsloth_checkpoint::loads_prequantized`).
fn counted_quant(run: &RunConfig) -> Quant {
    let unsloth = run.versions.unsloth;
    match run.quant {
        Quant::Nf4 if unsloth < COUNTS_BY_FLAG && !loads_prequantized(&run.model_name, unsloth) => {
            Quant::Bf16
        }
        quant => quant,
    }
}

/// `load_vllm`'s tier: "Default vLLM max_num_seqs is 256", fewer below 16 GB of KV estimate and
/// more above. The 40-48 GB tier is 226 in every wheel read (its comment says "+ 16"): kept as
/// written, since that is what vLLM was given.
pub fn sequences_for(kv_gb: f64) -> u64 {
    match kv_gb {
        g if g <= 2.0 => 128,
        g if g <= 4.0 => 160,
        g if g <= 8.0 => 192,
        g if g <= 12.0 => 224,
        g if g <= 16.0 => 256,
        g if g <= 24.0 => 288,
        g if g <= 40.0 => 320,
        g if g <= 48.0 => 226,
        g if g <= 80.0 => 368,
        _ => 400,
    }
}

/// `(max_num_batched_tokens, max_num_seqs)` as `load_vllm` passes them to vLLM:
/// - seqs: `sequences_for` the KV estimate, x 1.05 (floored) with `float8_kv_cache`;
/// - tokens: `max_seq_length` ("vLLM errors out from max_seq_length being bigger than
///   chunked_prefill_tokens": both branches set it to `max_seq_length`), after the check that
///   lowers `max_seq_length` to the KV estimate's token count
///   (`int(0.95 x left / kv_elements)` rounded down to 256, 256 when that is 0).
pub fn limits(run: &RunConfig, budget: u64) -> (u64, u64) {
    let left = kv_estimate(run, budget);
    let seqs = sequences_for(left / GIB as f64);
    let seqs = if run.vllm_kv_fp8 {
        (seqs as f64 * 1.05) as u64
    } else {
        seqs
    };
    (max_seq_length(run, budget), seqs)
}

/// `max_seq_length` after `load_vllm`'s two checks (unsloth_zoo 2025.8.9, and 2025.4.4
/// likewise): 256 when the KV estimate's token count (`int(0.95 x left / kv_elements)` rounded
/// down to 256) is 0 ("if max_num_batched_tokens <= 0"), else lowered to that count when it is
/// no more ("Your GPU cannot handle sequence lengths of ..."). It becomes vLLM's
/// `max_model_len` (`LLM(max_model_len = max_seq_length)`) and its chunked-prefill tokens.
pub fn max_seq_length(run: &RunConfig, budget: u64) -> u64 {
    let left = kv_estimate(run, budget);
    let arch = &run.arch;
    let kv_size = arch.hidden / arch.heads.max(1) * arch.kv_heads;
    let float_bytes = if run.vllm_kv_fp8 { 1.25 } else { 2.0 };
    let kv_elements = (kv_size * 2 * arch.layers) as f64 * float_bytes;
    let kv_tokens = ((0.95 * left / kv_elements.max(1.0)) as u64) / 256 * 256;
    if kv_tokens == 0 {
        256
    } else {
        run.max_seq_len.min(kv_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::memory::vllm::{Surroundings, plan};
    use crate::run::versions::Release;
    use crate::run::{Generation, Stack};

    /// Qwen2.5-3B-Instruct in 4 bits under Unsloth, `max_lora_rank = 64`, `max_seq_length =
    /// 1024`, on `unsloth` (the Unsloth release).
    fn qwen_3b(unsloth: Release) -> RunConfig {
        let mut run = RunConfig::example(
            catalog::find("Qwen/Qwen2.5-3B-Instruct")
                .expect("in the catalog")
                .arch,
        );
        run.stack = Stack::Unsloth;
        run.quant = Quant::Nf4;
        run.lora_rank = 64;
        run.max_seq_len = 1024;
        run.generation = Generation::ColocatedVllm { share: 0.5 };
        run.versions.unsloth = unsloth;
        run
    }

    #[test]
    fn unsloth_2025_counts_qwen_3b_as_its_estimate_did() {
        // hidden 2048, 16 heads, 2 KV heads: kv_size 256. Per layer qkvo (2048+256+256+2048) x
        // 2048 = 9,437,184 and mlp 2048 x 11008 x 3 = 67,633,152; x 36 layers x 2 B =
        // 5,549,064,192, / (16/5) = 1,734,082,560. Embedding 151,936 x 2048 and two norms of
        // 2048, tied head: (311,164,928 + 4,096) x 2 = 622,338,048. LoRA r 64: qkvo_A 524,288 +
        // qkvo_B 294,912 + mlp_A 966,656 + mlp_B 1,540,096 = 3,325,952, x 36 x 2 = 239,468,544.
        let bytes = model_bytes(&qwen_3b(Release::new(2025, 2, 4)).arch, Quant::Nf4, 64);
        assert!((bytes - 2_595_889_152.0).abs() < 1.0, "{bytes}");
        // 16-bit: the quantizable part counts whole
        let bf16 = model_bytes(&qwen_3b(Release::new(2025, 2, 4)).arch, Quant::Bf16, 64);
        assert!(
            (bf16 - (5_549_064_192.0 + 861_806_592.0)).abs() < 1.0,
            "{bf16}"
        );
    }

    #[test]
    fn unsloth_2025_gives_the_feb_2025_notebook_192_sequences_of_1024_tokens() {
        // the notebook printed "actual GPU utilization = 49.66%" of 14.741 GiB and "KV Cache can
        // use up to 4.9 GB": 7.3204 GiB less 2,595,889,152 B is 4.90 GiB, a tier of (4, 8] GB:
        // 192 sequences; tokens = max_seq_length 1024 (the KV estimate holds 0.95 x 4.90 GiB /
        // (256 x 2 x 36 x 2 B) = 135,663 tokens, 135,424 rounded to 256: far more)
        let run = qwen_3b(Release::new(2025, 2, 4));
        let budget = (0.4966 * 14.741 * GIB as f64) as u64;
        let kv = kv_estimate(&run, budget) / GIB as f64;
        assert!((kv - 4.90).abs() < 0.005, "{kv}");
        assert_eq!(limits(&run, budget), (1024, 192));
        // float8_kv_cache: int(192 x 1.05) = 201
        let mut fp8 = run.clone();
        fp8.vllm_kv_fp8 = true;
        assert_eq!(limits(&fp8, budget).1, 201);
        // 20 MiB left: int(0.95 x 20,971,520 / 36,864) = 540 tokens, rounded down to 512 <
        // 1024, so max_seq_length and the tokens become 512; 0.02 GB is the <= 2 GB tier: 128
        let tight = model_bytes(&run.arch, Quant::Nf4, 64) as u64 + 20 * 1024 * 1024;
        assert_eq!(limits(&run, tight), (512, 128));
        // nothing left: 256 tokens
        assert_eq!(limits(&run, GIB), (256, 128));
    }

    #[test]
    fn unsloth_2025_counts_a_checkpoint_its_mapper_does_not_swap_in_16_bits() {
        // the DeepSeek-R1-0528-Qwen3-8B notebook (unsloth 2025.5, tests/realworld): `load_in_4bit`
        // on Erland/DeepSeek-R1-0528-Qwen3-8B, no mapper name, so vLLM quantizes it on the fly
        // ("Model loading took 5.9072 GiB") while Unsloth's estimate counts it whole: "actual GPU
        // utilization = 69.19%" of 39.381 GiB less 15.42 GiB leaves "KV Cache can use up to
        // 11.83 GB", the (8, 12] GB tier: "Num Sequences = 224", "Chunked prefill tokens = 2048"
        let qwen3 = catalog::find("Qwen/Qwen3-8B").expect("in the catalog").arch;
        let mut run = RunConfig::example(qwen3);
        run.stack = Stack::Unsloth;
        run.quant = Quant::Nf4;
        run.lora_rank = 32;
        run.max_lora_rank = Some(32);
        run.max_seq_len = 2048;
        run.model_name = "Erland/DeepSeek-R1-0528-Qwen3-8B".into();
        run.versions.unsloth = Release::new(2025, 5, 0);
        let budget = (0.6919 * 39.381 * GIB as f64) as u64;
        let kv = kv_estimate(&run, budget) / GIB as f64;
        assert!((kv - 11.83).abs() < 0.005, "{kv}");
        assert_eq!(limits(&run, budget), (2048, 224));
        // the base model's own name is swapped for unsloth/Qwen3-8B-unsloth-bnb-4bit: 4-bit
        run.model_name = "Qwen/Qwen3-8B".into();
        assert_eq!(limits(&run, budget).1, 288);
        // from unsloth 2025.9.7 the flag decides, whatever the checkpoint
        run.model_name = "Erland/DeepSeek-R1-0528-Qwen3-8B".into();
        run.versions.unsloth = Release::new(2025, 9, 7);
        assert_eq!(limits(&run, budget).1, 288);
    }

    #[test]
    fn unsloth_2025_tiers_as_written() {
        let tiers = [
            (2.0, 128),
            (2.01, 160),
            (4.0, 160),
            (8.0, 192),
            (12.0, 224),
            (16.0, 256),
            (24.0, 288),
            (40.0, 320),
            (44.0, 226),
            (80.0, 368),
            (80.5, 400),
        ];
        for (gb, seqs) in tiers {
            assert_eq!(sequences_for(gb), seqs, "{gb} GB");
        }
    }

    #[test]
    fn the_release_picks_the_rule() {
        // 14.741 GiB, share 0.5 of the free 14.321 GiB (0.42 GiB context): a budget of 7.16 GiB.
        // unsloth 2025.11.5 (the older rule): 7.16 - 2.42 GiB (Unsloth's count above) = 4.74 GB,
        // 192 sequences and max_seq_length 1024 tokens.
        // unsloth 2025.11.6 (the paired table, `unsloth_pairs`): 7.16 GiB less Unsloth's own
        // count of the weights and LoRA (`unsloth_counted_weights`, 3B at 5 bits a packed weight)
        // and the 0.15 GiB graph reserve, in (4, 8]: 32 sequences and 4096 tokens.
        let around = Surroundings {
            capacity: (14.741 * GIB as f64) as u64,
            used_by_others: 0,
            trainer_at_start: 0,
            weights: (2.2 * GIB as f64) as u64,
        };
        let at = |v: Release| {
            let p = plan(&qwen_3b(v), &around).expect("colocated");
            (p.max_num_seqs, p.max_num_batched_tokens)
        };
        assert_eq!(at(Release::new(2025, 11, 5)), (192, 1024));
        assert_eq!(at(Release::new(2025, 11, 6)), (32, 4096));
        // the file's own limits win on both
        let mut pinned = qwen_3b(Release::new(2025, 2, 4));
        pinned.vllm_max_num_seqs = Some(64);
        pinned.vllm_max_num_batched_tokens = Some(2048);
        let p = plan(&pinned, &around).expect("colocated");
        assert_eq!((p.max_num_seqs, p.max_num_batched_tokens), (64, 2048));
    }
}
