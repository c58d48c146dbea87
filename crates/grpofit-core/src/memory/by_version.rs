//! The terms of a run's step that depend on the trainer release in force: how its Unsloth
//! computes the logits, the breakdown's name for them, and what the estimate says when the
//! micro-batch that runs is not the one the file names. The releases' behaviours themselves are
//! `run::versions`.

use crate::memory::breakdown::Part;
use crate::memory::step::shape::StepPath;
use crate::run::versions::{BatchRaise, UnslothLogits};
use crate::run::{RunConfig, Stack};

/// Whether Unsloth 2025's `FastLanguageModel.from_pretrained` hands the model to `FastModel`:
/// 8-bit loading, or a model type outside its own families (llama, mistral, gemma, gemma2,
/// qwen2, qwen3; unsloth 2025.5.2 loader.py): Gemma 3, Phi-3/4, gpt-oss and Qwen3-MoE here.
pub fn fast_model(run: &RunConfig) -> bool {
    use crate::arch::Family;
    run.quant == crate::run::Quant::Int8
        || run.arch.moe.is_some()
        || matches!(
            run.arch.family,
            Family::Gemma3 | Family::Phi3 | Family::GptOss
        )
}

/// How the run's Unsloth computes its step's log-probabilities: [`StackVersions::unsloth_logits`],
/// with the `FastModel` path of 2025.3 to 2025.7 (read in 2025.3.19 and 2025.5.2; 2025.8.9 no
/// longer takes it).
pub fn unsloth_logits_of(run: &RunConfig) -> UnslothLogits {
    let by_release = run.versions.unsloth_logits();
    if by_release == UnslothLogits::PerSequenceFp32
        && run.versions.unsloth.line() < (2025, 8)
        && fast_model(run)
    {
        UnslothLogits::MicroBatchFp32
    } else {
        by_release
    }
}

/// The breakdown's name for the step's logits term, by the trainer release that builds it.
pub fn logits_part(run: &RunConfig) -> Part {
    match run.stack {
        Stack::Trl if !run.fused_logits => Part::MicroBatchLogits,
        Stack::Trl => Part::Logits,
        Stack::Unsloth => match unsloth_logits_of(run) {
            UnslothLogits::TrlLoss => Part::MicroBatchLogits,
            UnslothLogits::PerSequenceFp32 => Part::SequenceLogitsFp32,
            UnslothLogits::MicroBatchFp32 => Part::MicroBatchLogitsFp32,
            UnslothLogits::Blocks => Part::Logits,
        },
    }
}

/// What the estimate says when the micro-batch that runs is not `per_device_train_batch_size`:
/// TRL 0.14 counting prompts, or Unsloth raising it to `num_generations` (unsloth#3572).
pub fn batch_note(run: &RunConfig) -> Option<String> {
    let g = run.num_generations.max(1);
    if run.unsloth_raises_batch() {
        let rule = match run.versions.batch_raise() {
            BatchRaise::EffectiveBatch => format!(
                "batch x accumulation x GPUs = {} is not divisible by num_generations = {g}",
                run.effective_batch()
            ),
            _ => format!(
                "per_device_train_batch_size = {} is not a multiple of num_generations = {g}",
                run.micro_batch
            ),
        };
        return Some(format!(
            "Unsloth {} will run micro-batch {g}, not {}: {rule}; it raises per_device_train_batch_size to num_generations without asking (unsloth#3572; estimated with {g})",
            run.versions.unsloth, run.micro_batch
        ));
    }
    run.versions.batch_counts_prompts().then(|| {
        format!(
            "TRL {} counts prompts in per_device_train_batch_size: {} prompts x num_generations {g} = {} completions per micro-batch",
            run.versions.trl,
            run.micro_batch,
            run.completions_per_device()
        )
    })
}

/// What the estimate says of LoRA with gradient checkpointing on TRL before 0.16
/// ([`StackVersions::trl_lora_needs_non_reentrant`]): the real trainer stops at its first
/// backward under transformers' reentrant default. The estimate is that of the run users make
/// instead, with `use_reentrant=False` (traced so: `calibration/cpu-trace/trl-0.14.0.jsonl`).
///
/// [`StackVersions::trl_lora_needs_non_reentrant`]: crate::run::versions::StackVersions::trl_lora_needs_non_reentrant
pub fn reentrant_note(run: &RunConfig) -> Option<String> {
    let applies = run.stack == Stack::Trl
        && !run.full_finetuning
        && run.checkpointing != crate::run::Checkpointing::Off
        && run.versions.trl_lora_needs_non_reentrant();
    applies.then(|| {
        format!(
            "TRL {} wraps the model in PEFT before gradient checkpointing is on, so under transformers' reentrant default the loss has no grad_fn (\"element 0 of tensors does not require grad\"; with a trainable head, modules_to_save, the adapters silently get no gradient); pass gradient_checkpointing_kwargs={{\"use_reentrant\": False}} (trl#3089; TRL 0.16 fixes it), as estimated",
            run.versions.trl
        )
    })
}

/// Whose step the run is ([`StepPath`]): the trainer, under accelerate's bf16 autocast with padded
/// batches; or the calibration harness (`calibration/measure.py`), modelled as a TRL 1.15 run with
/// unfused logits, which TRL 1.15 itself never runs (`StackVersions::trl_fused_head`). float32
/// weights run the trainer's step too: the Trainer's `bf16=True` (TRL's GRPOConfig default)
/// makes accelerate wrap the forward in bf16 autocast whatever the weights' dtype (traced
/// `full_fp32`: `autocast` on in every loss forward; the step's activations bf16, its residual
/// stream fp32: `trl::Fp32Weights`).
pub fn step_path(run: &RunConfig) -> StepPath {
    let harness = !run.fused_logits && run.versions.trl_fused_head();
    if run.stack == Stack::Trl && !harness {
        StepPath::Trainer
    } else {
        StepPath::Harness
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::contract::release::Release;

    #[test]
    fn lora_with_reentrant_checkpointing_on_trl_0_15_is_said_to_fail() {
        // trl 0.15.2 `GRPOTrainer.__init__`: `get_peft_model` before checkpointing is on, no
        // `enable_input_require_grads`; trl 0.16.1 `_enable_gradient_checkpointing` adds it
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let mut run = RunConfig::example(arch);
        run.stack = Stack::Trl;
        run.full_finetuning = false;
        run.checkpointing = crate::run::Checkpointing::On;
        run.versions.trl = Release::parse("0.15.2").expect("release");
        let note = reentrant_note(&run).expect("a note");
        assert!(note.contains("use_reentrant"), "{note}");
        run.checkpointing = crate::run::Checkpointing::Off;
        assert_eq!(reentrant_note(&run), None);
        run.checkpointing = crate::run::Checkpointing::On;
        run.full_finetuning = true;
        assert_eq!(reentrant_note(&run), None);
        run.full_finetuning = false;
        run.versions.trl = Release::parse("0.16.1").expect("release");
        assert_eq!(reentrant_note(&run), None);
    }
}
