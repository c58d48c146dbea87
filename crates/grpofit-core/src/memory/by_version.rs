//! The terms of a run's step that depend on the trainer release in force: how its Unsloth
//! computes the logits, the breakdown's name for them, and what the estimate says when the
//! micro-batch that runs is not the one the file names. The releases' behaviours themselves are
//! `run::versions`.

use crate::memory::breakdown::Part;
use crate::memory::step::shape::StepPath;
use crate::run::versions::{BatchRaise, UnslothLogits};
use crate::run::{Quant, RunConfig, Stack};

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

/// Whether the run's Liger loss builds the step's log-probabilities in chunks (N8).
fn liger_on(run: &RunConfig) -> bool {
    run.liger_loss && run.versions.trl_liger_loss() != crate::run::versions::LigerLoss::Off
}

/// The breakdown's name for the step's logits term, by the trainer release that builds it.
pub fn logits_part(run: &RunConfig) -> Part {
    match run.stack {
        // the Liger loss (N8) builds chunks, not the micro-batch's logits
        Stack::Trl if !run.fused_logits && !liger_on(run) => Part::MicroBatchLogits,
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

/// Whose step the run is ([`StepPath`]): the trainer, under accelerate's bf16 autocast with padded
/// batches; or the calibration harness (`calibration/measure.py`), modelled as a TRL 1.15 run with
/// unfused logits, which TRL 1.15 itself never runs (`StackVersions::trl_fused_head`).
pub fn step_path(run: &RunConfig) -> StepPath {
    let harness = !run.fused_logits && run.versions.trl_fused_head();
    if run.stack == Stack::Trl && !harness && run.quant != Quant::Fp32 {
        StepPath::Trainer
    } else {
        StepPath::Harness
    }
}
