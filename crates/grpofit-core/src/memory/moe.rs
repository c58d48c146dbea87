//! A mixture of experts as the stacks load and train it: which stack packs the 3-D expert
//! parameters below 16 bits, and the LoRA Unsloth puts on them.

use crate::arch::Arch;
use crate::run::{Quant, RunConfig, Stack};

/// Whether the experts' `gate_up_proj` and `down_proj` are stored below 16 bits.
/// - fp8 checkpoints quantise them (block-wise fp8, as the linear layers).
/// - Unsloth's 4-bit: unsloth_zoo 2026.10.9 `temporary_patches/moe_utils_bnb4bit.py`
///   `replace_expert_params_with_bnb_params` turns transformers 5's 3-D expert parameters into
///   bitsandbytes `Params4bit` (NF4, registered by `_register_transformers_v5_moe_bnb4bit_patches`),
///   and `temporary_patches/gpt_oss.py` loads gpt-oss's experts as NF4 `Linear4bit`s.
/// - TRL with bitsandbytes: transformers 5.17's `Bnb4BitHfQuantizer` quantises `nn.Linear`
///   only, so the experts stay 16-bit.
pub fn experts_quantised(run: &RunConfig) -> bool {
    match run.quant {
        Quant::Fp8 => true,
        Quant::Nf4 => run.stack == Stack::Unsloth,
        Quant::Bf16 | Quant::Fp32 | Quant::Int8 => false,
    }
}

/// The LoRA tensors on one layer's experts, element counts (A then B of each projection).
/// unsloth 2026.10.9 `models/_utils.py` `get_moe_target_parameters` adds the experts'
/// `gate_up_proj` (for a `gate_proj` or `up_proj` target) and `down_proj` (for `down_proj`) to
/// PEFT's `target_parameters`; peft 0.21.2 `tuners/lora/layer.py` `ParamWrapper.update_layer`
/// gives each `lora_A = Linear(in, r x experts)` and `lora_B = Linear(r x experts, out)`. TRL's
/// `target_modules` match no 3-D parameter: no expert LoRA there.
pub fn expert_lora_tensors(run: &RunConfig) -> Vec<u64> {
    let Some(m) = run.arch.moe else {
        return Vec::new();
    };
    if run.stack != Stack::Unsloth || run.full_finetuning {
        return Vec::new();
    }
    let wants = |names: &[&str]| {
        run.lora_targets
            .iter()
            .any(|t| t == "all-linear" || names.contains(&t.as_str()))
    };
    let (h, i, re) = (
        run.arch.hidden,
        m.expert_intermediate,
        run.lora_rank * m.experts,
    );
    let mut t = Vec::new();
    if wants(&["gate_proj", "up_proj", "gate_up_proj"]) {
        t.extend([h * re, re * 2 * i]);
    }
    if wants(&["down_proj"]) {
        t.extend([i * re, re * h]);
    }
    t
}

/// A mixture of experts in words: its expert weights as this stack stores them, and where LoRA
/// reaches .
pub fn words(run: &RunConfig, m: crate::arch::Moe) -> String {
    let packed = experts_quantised(run);
    let expert_bytes: u64 = run
        .arch
        .expert_tensors()
        .iter()
        .take(2)
        .map(|t| crate::memory::bytes::tensor_bytes(*t, run.quant, packed))
        .sum::<u64>()
        * run.arch.layers;
    let how = match (packed, run.quant) {
        (true, Quant::Nf4) => "4-bit NF4: Unsloth packs the 3-D experts with bitsandbytes",
        (true, _) => "fp8",
        (false, Quant::Nf4 | Quant::Int8) => {
            "16-bit: on the TRL stack bitsandbytes quantises nn.Linear only, not transformers 5's 3-D experts (Unsloth packs them)"
        }
        (false, _) => "16-bit",
    };
    let lora: u64 = expert_lora_tensors(run).iter().sum::<u64>() * run.arch.layers;
    let reach = if lora > 0 {
        format!(
            "expert LoRA: Unsloth adds the experts to PEFT's target_parameters, {} fp32 parameters",
            crate::units::format_count(lora)
        )
    } else {
        format!(
            "LoRA reaches the attention{} only, since the experts are no linear layers",
            if m.shared_intermediate > 0 {
                " and the shared expert"
            } else {
                ""
            }
        )
    };
    format!(
        "mixture of experts: all {} experts stay resident ({} of expert weights, {how}); activations follow the {} active per token; {reach}",
        m.experts,
        crate::units::format_size(expert_bytes),
        m.active,
    )
}

/// vLLM's bytes for a checkpoint whose experts are MXFP4 (openai/gpt-oss), `None` for any
/// other. vLLM keeps them packed (vllm 0.31.0 `model_executor/layers/quantization/mxfp4.py`
/// `Mxfp4MoEMethod.create_weights`: `w13_weight` and `w2_weight` uint8, two values a byte, and
/// `w13_weight_scale` / `w2_weight_scale` one uint8 per 32 values; the biases bf16): 17/32 of a
/// byte per expert weight, the rest of the model in 16-bit. The triton backend pads nothing at
/// gpt-oss's widths (`mxfp4_round_up_hidden_size_and_intermediate_size`: the intermediate to 64);
/// Marlin's 256-wide hidden padding is not modelled. TRL passes the checkpoint to vLLM as it is.
pub fn vllm_mxfp4_bytes(arch: &Arch) -> Option<u64> {
    let m = arch.moe.filter(|m| m.mxfp4_experts)?;
    let experts = 3 * m.experts * m.expert_intermediate * arch.hidden * arch.layers;
    Some(2 * (arch.parameters() - experts) + experts / 2 + experts / 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn unsloth(id: &str) -> RunConfig {
        let mut run = RunConfig::example(catalog::find(id).expect("in the catalog").arch);
        run.stack = Stack::Unsloth;
        run
    }

    #[test]
    fn qwen3_30b_expert_lora_at_rank_16_is_629m_parameters() {
        // hidden 2,048, 128 experts of width 768, 48 layers, r = 16 (r x E = 2,048):
        // gate_up A 2,048 x 2,048 = 4,194,304, B 2,048 x 1,536 = 3,145,728; down A 768 x
        // 2,048 = 1,572,864, B 2,048 x 2,048 = 4,194,304: 13,107,200 a layer, 629,145,600 in
        // all, 2,516,582,400 B in fp32 (2.34 GiB), and AdamW's two fp32 moments twice that.
        let run = unsloth("Qwen/Qwen3-30B-A3B");
        let t = expert_lora_tensors(&run);
        assert_eq!(t, vec![4_194_304, 3_145_728, 1_572_864, 4_194_304]);
        assert_eq!(t.iter().sum::<u64>() * run.arch.layers, 629_145_600);
        // TRL: none; attention-only targets: none
        let mut trl = run.clone();
        trl.stack = Stack::Trl;
        assert!(expert_lora_tensors(&trl).is_empty());
        let mut attention = run;
        attention.lora_targets = vec!["q_proj".into(), "v_proj".into()];
        assert!(expert_lora_tensors(&attention).is_empty());
    }

    #[test]
    fn gpt_oss_20b_in_vllm_keeps_its_mxfp4_experts() {
        // gpt-oss-20b: 32 experts of width 2,880, hidden 2,880, 24 layers: 3 x 32 x 2,880 x
        // 2,880 = 796,262,400 expert weights a layer, 19,110,297,600 in all, at 17/32 of a byte:
        // 10,152,345,600 B. The other 20,914,757,184 - 19,110,297,600 = 1,804,459,584
        // parameters in bf16: 3,608,919,168 B. Sum 13,761,264,768 B = 12.82 GiB (2 bytes a
        // parameter said 41,829,514,368 B = 38.96 GiB).
        let a = catalog::find("openai/gpt-oss-20b")
            .expect("in the catalog")
            .arch;
        assert_eq!(a.parameters(), 20_914_757_184);
        assert_eq!(vllm_mxfp4_bytes(&a), Some(13_761_264_768));
        let q = catalog::find("Qwen/Qwen3-30B-A3B")
            .expect("in the catalog")
            .arch;
        assert_eq!(vllm_mxfp4_bytes(&q), None);
    }

    #[test]
    fn only_unsloth_packs_the_experts_in_4_bit() {
        let mut run = unsloth("Qwen/Qwen3-30B-A3B");
        run.quant = Quant::Nf4;
        assert!(experts_quantised(&run));
        run.stack = Stack::Trl;
        assert!(!experts_quantised(&run));
    }
}
