//! The terms of a run's step that depend on the trainer release in force: how its Unsloth
//! computes the logits, the breakdown's name for them, and what the estimate says when the
//! micro-batch that runs is not the one the file names. The releases' behaviours themselves are
//! `run::versions`.

use crate::memory::breakdown::Part;
use crate::memory::step::shape::{AttentionMask, StepPath};
use crate::run::attention::Attention;
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

/// The 4-D attention mask the step's padded batch builds ([`AttentionMask`]): TRL pads its
/// batches (prompts of different lengths), the calibration harness runs all-ones masks, TRL 0.14
/// passes none; then by the attention the layers call and the transformers release:
/// - flash attention: `masking_utils.flash_attention_mask` returns the 2-D padding mask, no 4-D
///   one;
/// - eager: `masking_utils.eager_mask` (4.50-4.52: `_prepare_4d_causal_attention_mask_with_cache_position`)
///   turns the bool mask into one float mask (`torch.where(mask, 0, min_dtype)`), held once;
///   eager adds it to the scores, no per-layer conversion;
/// - SDPA: 4.50-4.52's float mask, 4.53's bool mask that each SDPA call converts.
pub fn attention_mask(run: &RunConfig, on_trainer: bool) -> AttentionMask {
    match (on_trainer, run.versions.transformers_bool_mask()) {
        (false, _) => AttentionMask::None,
        _ if !run.versions.trl_passes_attention_mask() => AttentionMask::None,
        _ if matches!(run.attention, Attention::Flash(_)) => AttentionMask::None,
        _ if run.attention == Attention::Eager => AttentionMask::Float,
        (true, false) => AttentionMask::Float,
        (true, true) => AttentionMask::BoolConverted,
    }
}

/// Whose step the run is ([`StepPath`]): the trainer, under accelerate's bf16 autocast with padded
/// batches; or the calibration harness (`calibration/measure.py`), modelled as a TRL 1.15 run with
/// unfused logits, which TRL 1.15 itself never runs (`StackVersions::trl_fused_head`). float32
/// weights run the trainer's step too: the Trainer's `bf16=True` (TRL's GRPOConfig default)
/// makes accelerate wrap the forward in bf16 autocast whatever the weights' dtype (traced
/// `full_fp32`: `autocast` on in every loss forward; the step's activations bf16, its residual
/// stream fp32: `trl::Fp32Weights`).
pub fn step_path(run: &RunConfig) -> StepPath {
    if run.stack == Stack::Trl && !calibration_harness(run) {
        StepPath::Trainer
    } else {
        StepPath::Harness
    }
}

/// The calibration harness (`calibration/measure.py`): a TRL 1.15 run with unfused logits, one
/// micro-batch's step outside the trainer ([`step_path`]).
fn calibration_harness(run: &RunConfig) -> bool {
    !run.fused_logits && run.versions.trl_fused_head()
}

/// Whether every trainable gradient is live through the step's forward and backward: with
/// `gradient_accumulation_steps > 1` the trainer clears the gradients only after the optimizer
/// step (transformers `Trainer._inner_training_loop`: `model.zero_grad()` under `if
/// do_sync_step:`, `do_sync_step = (step + 1) % gradient_accumulation_steps == 0`; the same loop
/// in every transformers release TRL 0.14 to 1.16 runs on), so from the second micro-batch of
/// each optimizer step on, the first's gradients sit beside the step's activations. Traced:
/// trl 1.16.0 qwen2 `steps_per_generation2` (two micro-batches per step) peaks in the second
/// micro-batch's loss forward 159,272 B above `base`, the adapters' 149,504 B of fp32 gradients
/// and the buffered half of the generation batch. The harness runs one micro-batch. Under
/// DeepSpeed or FSDP the accumulated gradients are the engine's partitions and buckets
/// (`spread`), not each parameter's whole `.grad`.
pub fn gradients_live_through_step(run: &RunConfig) -> bool {
    run.stack == Stack::Trl
        && run.grad_accum > 1
        && run.spread.engine == crate::run::spread::Engine::Ddp
        && !calibration_harness(run)
}

/// The adapters' gradients at the step's peak: one layer's worth (the backward makes them layer
/// by layer, after the step's peak), or all of them where an earlier micro-batch's are kept.
pub fn adapter_gradients_at_peak(run: &RunConfig, adapters: u64) -> u64 {
    if gradients_live_through_step(run) {
        adapters
    } else {
        adapters / run.arch.layers.max(1)
    }
}

/// Of those, what the allocated peak holds: all of them where they are kept, else none (they
/// come after it).
pub fn kept_gradients(run: &RunConfig, gradients: u64) -> u64 {
    u64::from(gradients_live_through_step(run)) * gradients
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

    use crate::memory::breakdown::Phase;
    use crate::memory::estimate::{Estimate, GpuBudget, estimate};

    fn run(full_finetuning: bool, grad_accum: u64, fused_logits: bool) -> RunConfig {
        let arch = catalog::find("Qwen/Qwen2.5-0.5B-Instruct")
            .expect("catalog id")
            .arch
            .clone();
        let mut run = RunConfig::example(arch);
        run.full_finetuning = full_finetuning;
        run.grad_accum = grad_accum;
        // the generation batch stays put: only the accumulation moves
        run.steps_per_generation = Some(1);
        run.fused_logits = fused_logits;
        (run.micro_batch, run.prompt_len, run.completion_len) = (2, 64, 64);
        run.max_seq_len = 128;
        run
    }

    fn est(run: &RunConfig) -> Estimate {
        estimate(
            run,
            GpuBudget {
                capacity: 150 << 30,
                used_by_others: 0,
                context: None,
            },
        )
    }

    /// A part of the training phase (the estimate's only phase when vLLM runs elsewhere).
    fn training_part(e: &Estimate, part: Part) -> u64 {
        e.phases
            .iter()
            .find(|p| p.phase == Phase::Training)
            .map_or(&e.components, |p| &p.components)
            .iter()
            .find(|c| c.part == part)
            .map_or(0, |c| c.bytes)
    }

    /// `Trainer._inner_training_loop` clears gradients only after the optimizer step: with two
    /// micro-batches a step, the adapters' whole fp32 gradients sit beside the second one's
    /// activations (traced: trl 1.16.0 qwen2 `steps_per_generation2`, +149,504 B of gradients).
    #[test]
    fn accumulation_keeps_the_adapters_gradients_through_the_step() {
        let (one, two) = (est(&run(false, 1, true)), est(&run(false, 2, true)));
        let adapters = training_part(&two, Part::LoraAdapters);
        assert!(adapters > 0);
        assert_eq!(training_part(&two, Part::LoraGradients), adapters);
        assert_eq!(
            two.training_peak_allocated_bytes,
            one.training_peak_allocated_bytes + adapters
        );
        // the calibration harness runs one micro-batch whatever the run file accumulates
        let (h1, h2) = (est(&run(false, 1, false)), est(&run(false, 2, false)));
        assert_eq!(
            h1.training_peak_allocated_bytes,
            h2.training_peak_allocated_bytes
        );
    }

    /// Full fine-tuning on one GPU: without accumulation the step's activations are gone before
    /// every weight's gradient exists; with it, the first micro-batch's gradients are there from
    /// the second's forward on, so the step's activations and logits add to them.
    #[test]
    fn accumulation_keeps_every_weight_s_gradient_beside_the_step() {
        let (one, two) = (est(&run(true, 1, true)), est(&run(true, 2, true)));
        let of = |e: &Estimate, parts: &[Part]| parts.iter().map(|p| training_part(e, *p)).sum();
        let step: u64 = of(&two, &[Part::Activations, Part::Logits]);
        let held: u64 = of(
            &two,
            &[Part::Weights, Part::OptimizerStates, Part::Gradients],
        );
        assert!(step > 0);
        // with accumulation: the weights, their states and gradients, and the whole step
        assert_eq!(two.training_peak_allocated_bytes, held + step);
        // without: the gradients meet only the first layer's backward
        // (`trl::gradients_before_first_layer`), far less than the step
        assert!(one.training_peak_allocated_bytes < held + step / 100);
    }
}
