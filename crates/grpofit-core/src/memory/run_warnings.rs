//! What the estimate says of a run beside its figures: the trainers' rules its knobs break and
//! what an fp32 run should know (`estimate` adds them to its warnings).

use crate::arch::Vision;
use crate::run::spread;
use crate::run::{Generation, Quant, RunConfig, Stack, vllm_max_lora_rank};

/// What an fp32 run should know: the step runs under the trainer's 16-bit autocast, and a full
/// fine-tune in fp32 holds 16 bytes a parameter.
pub(crate) fn dtype_warnings(run: &RunConfig) -> Vec<String> {
    let mut w = Vec::new();
    if run.quant == Quant::Fp32 {
        w.push("fp32 weights (TRL's ModelConfig dtype default): the step runs under the trainer's 16-bit autocast, which for trained fp32 weights keeps a 16-bit copy of each projection and of the head through the forward and carries an fp32 residual stream (counted); set [model] dtype = \"bfloat16\" to drop them".into());
        if run.full_finetuning && run.spread.engine == spread::Engine::Ddp {
            w.push("full fine-tuning in fp32 (TRL's default dtype; DDP casts nothing): weights, gradients and AdamW's moments are all fp32, 16 bytes a parameter; [model] dtype = \"bfloat16\" halves them".into());
        }
    } else if crate::memory::frozen::reference_model_bytes(run) > 0
        && run.versions.trl_reference_in_default_dtype()
        && run.spread.engine != spread::Engine::DeepSpeed
    {
        w.push(format!(
            "TRL {} loads the reference model in float32 whatever the policy's dtype (it refuses model_init_kwargs beside a model object, as its own `trl grpo` hands one over): counted at 4 bytes a parameter; a policy passed by name with model_init_kwargs = {{\"torch_dtype\": \"bfloat16\"}} gets a bf16 one",
            run.versions.trl
        ));
    }
    w
}

/// The trainers' rules the knobs can break, said as warnings: the micro-batch that really runs,
/// a context shorter than prompt + completion, Unsloth's max_lora_rank rounding.
pub(crate) fn rule_warnings(run: &RunConfig, targets: &[bool]) -> Vec<String> {
    let mut w = Vec::new();
    w.extend(crate::memory::by_version::batch_note(run));
    w.extend(crate::memory::by_version::reentrant_note(run));
    w.extend(generate_without_cache(run));
    if run.max_seq_len < run.sequence_len() {
        w.push(format!(
            "max_seq_length {} is smaller than prompt + completion = {}",
            run.max_seq_len,
            run.sequence_len()
        ));
    }
    if run.stack == Stack::Unsloth && matches!(run.generation, Generation::ColocatedVllm { .. }) {
        let m = run
            .max_lora_rank
            .unwrap_or_else(|| vllm_max_lora_rank(run.lora_rank));
        let served = vllm_max_lora_rank(m);
        if served != m {
            w.push(format!(
                "Unsloth rounds max_lora_rank {m} up to {served}, a rank vLLM supports (8, 16, 32, 64, 128, 256, 320, 512)"
            ));
        }
        if run.lora_rank > served {
            w.push(format!(
                "r = {} exceeds max_lora_rank = {m}: vLLM cannot load the adapter",
                run.lora_rank
            ));
        }
    }
    match &run.arch.vision {
        Vision::Counted(p) => w.push(format!(
            "multimodal checkpoint: its vision tower ({} parameters) is loaded and counted, on both stacks (AutoModelForCausalLM loads the whole model in transformers 5.17; so does Unsloth's FastModel)",
            crate::units::format_count(*p)
        )),
        Vision::Uncounted(kind) => w.push(format!(
            "multimodal checkpoint: its vision tower ({kind}) is loaded but not counted: grpofit sizes SigLIP towers only"
        )),
        Vision::None => {}
    }
    if let Some(m) = run.arch.moe {
        w.push(crate::memory::moe::words(run, m));
    }
    if !run.full_finetuning && !targets.iter().any(|t| *t) {
        w.push(format!(
            "no LoRA target module matches {}'s projections ({}): PEFT will refuse to start",
            run.arch.name,
            run.arch
                .projections()
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    w
}

/// TRL before 0.22 generates with checkpointing on, and transformers 4.53's checkpointed layers
/// then drop the KV cache (`run::generate_mode::drops_kv_cache`, which cites both functions):
/// the completions are generated blind, a correctness failure rather than a slow one.
fn generate_without_cache(run: &RunConfig) -> Option<String> {
    crate::run::generate_mode::drops_kv_cache(run).then(|| {
        format!(
            "generate runs without its KV cache, so completions are garbage and the reward will not rise: TRL {} keeps gradient checkpointing on around transformers {}'s generate, whose checkpointed decoder layers drop the cache in training mode (each new token attends only to itself, not to the prompt); use trl >= 0.22, use_vllm = true, or gradient_checkpointing = false",
            run.versions.trl, run.versions.transformers
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::contract::release::Release;

    #[test]
    fn trl_0_19_says_its_reference_model_is_float32() {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("in the catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.full_finetuning = true;
        run.beta = 0.04;
        run.quant = Quant::Bf16;
        run.versions.trl = Release::new(0, 19, 1);
        let said = |run: &RunConfig| {
            dtype_warnings(run)
                .iter()
                .any(|w| w.contains("reference model in float32"))
        };
        assert!(said(&run));
        run.versions.trl = Release::new(0, 22, 2);
        assert!(!said(&run));
        run.versions.trl = Release::new(0, 19, 1);
        run.beta = 0.0;
        assert!(!said(&run));
    }
}
