//! The rules a run must keep to be estimated at all, in one place: the loader, the screen and the
//! fit search all call `validate`, so a run one of them can reach, the others accept.
//! (What the trainers would merely warn about, or do differently, is a warning of the estimate.)

use crate::run::knobs::Knob;
use crate::run::{Checkpointing, RunConfig, Stack};

/// Past 16 M tokens in one micro-batch no GPU comes close, and byte counts lose their meaning.
pub const MAX_MICRO_BATCH_TOKENS: u64 = 1 << 24;

/// One broken rule: the knob it concerns (when one does) and what is wrong, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub knob: Option<Knob>,
    pub message: String,
}

/// Checks `run` against every knob's declared range (the prompt and the completion within
/// [`MAX_PART_LENGTH`](crate::run::knobs::MAX_PART_LENGTH) among them) and the rules between knobs.
pub fn validate(run: &RunConfig) -> Result<(), Broken> {
    for knob in Knob::ALL {
        let Some(value) = knob.get(run) else {
            continue;
        };
        let (lo, hi) = knob.range();
        if value < lo || value > hi {
            return Err(Broken {
                knob: Some(knob),
                message: format!(
                    "{} = {}: out of range, expected {} to {}{}",
                    knob.trainer_key(run.stack),
                    knob.show(value),
                    knob.show(lo),
                    knob.show(hi),
                    knob.range_reason()
                ),
            });
        }
    }
    let tokens = run.micro_batch.saturating_mul(run.sequence_len());
    if tokens > MAX_MICRO_BATCH_TOKENS {
        return Err(Broken {
            knob: Some(Knob::MicroBatch),
            message: format!(
                "per_device_train_batch_size = {} x (prompt + completion = {}) = {tokens} tokens in one micro-batch: past any GPU (at most {MAX_MICRO_BATCH_TOKENS})",
                run.micro_batch,
                run.sequence_len()
            ),
        });
    }
    if let Some((_, why)) = run.spread.refusal() {
        return Err(Broken {
            knob: None,
            message: why.to_string(),
        });
    }
    if run.stack == Stack::Unsloth
        && run.spread.engine == crate::run::spread::Engine::Fsdp
        && matches!(run.generation, crate::run::Generation::ColocatedVllm { .. })
    {
        // unsloth 2026.10.9 models/loader_utils.py `raise_if_fast_inference_under_fsdp2`
        return Err(Broken {
            knob: None,
            message: "Unsloth: `fast_inference = True` (vLLM) is not supported with FSDP2: set fast_inference = false, or train without FSDP".into(),
        });
    }
    trl_rules(run)
}

/// Whole groups: `num_generations` divides the generation batch (`per_device_train_batch_size x
/// GPUs x steps_per_generation`), on either stack. TRL refuses a run that splits a group
/// (`GRPOConfig.__post_init__`, in [`validate`]); Unsloth, whose GRPOConfig is TRL's, first
/// raises `per_device_train_batch_size` to `num_generations` without asking (unsloth#3572,
/// [`RunConfig::unsloth_raises_batch`]), so the run that trains is not the one set. The screen's
/// steps and clicks land on neither, and it exports neither: this is that rule.
pub fn whole_groups(run: &RunConfig) -> Result<(), Broken> {
    let g = run.num_generations.max(1);
    if run.unsloth_raises_batch() {
        return Err(Broken {
            knob: Some(Knob::Generations),
            message: format!(
                "num_generations = {g}: the batch (per_device_train_batch_size x accumulation x GPUs = {}) is not a whole number of groups; Unsloth would raise per_device_train_batch_size {} to {g} without asking (unsloth#3572)",
                run.effective_batch(),
                run.micro_batch
            ),
        });
    }
    let batch = run
        .completions_per_device()
        .saturating_mul(run.processes())
        .saturating_mul(run.steps_per_generation());
    if !batch.is_multiple_of(g) {
        return Err(Broken {
            knob: Some(Knob::Generations),
            message: format!(
                "num_generations = {g}: the generation batch (per_device_train_batch_size x GPUs x steps_per_generation = {batch}) must be divisible by it (trl GRPOConfig.__post_init__)"
            ),
        });
    }
    Ok(())
}

/// What TRL itself refuses: a generation batch that splits a prompt's group
/// (`GRPOConfig.__post_init__`: "generation_batch_size ... must be divisible by
/// num_generations"; Unsloth replaces the micro-batch instead, a warning of the estimate), and
/// Unsloth's own offloaded checkpointing.
fn trl_rules(run: &RunConfig) -> Result<(), Broken> {
    if run.stack != Stack::Trl {
        return Ok(());
    }
    if run.checkpointing == Checkpointing::UnslothOffload {
        return Err(Broken {
            knob: None,
            message: "gradient checkpointing \"unsloth\" (offloaded to CPU) is Unsloth's: TRL checkpoints on the GPU (true or false)".into(),
        });
    }
    if run.full_finetuning && run.quant.is_quantised() {
        return Err(Broken {
            knob: None,
            message: "full fine-tuning of quantised weights: transformers' Trainer refuses \"purely quantized models\" without adapters (`Trainer.__init__`): load the model in bfloat16 or train LoRA adapters".into(),
        });
    }
    let tp = run.vllm_tensor_parallel.max(1);
    if matches!(run.generation, crate::run::Generation::ColocatedVllm { .. })
        && !run.processes().is_multiple_of(tp)
    {
        return Err(Broken {
            knob: None,
            message: format!(
                "vllm_tensor_parallel_size = {tp} must divide the {} training processes (trl `VLLMGeneration`: \"tensor_parallel_size must divide world size\")",
                run.processes()
            ),
        });
    }
    // completions: TRL 0.14's per_device_train_batch_size counts prompts
    let batch = run
        .completions_per_device()
        .saturating_mul(run.processes())
        .saturating_mul(run.steps_per_generation());
    if !batch.is_multiple_of(run.num_generations.max(1)) {
        return Err(Broken {
            knob: Some(Knob::Generations),
            message: format!(
                "num_generations = {}: TRL needs the generation batch (per_device_train_batch_size x GPUs x steps_per_generation = {batch}) divisible by it (GRPOConfig.__post_init__)",
                run.num_generations
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::run::knobs::MAX_PART_LENGTH;

    fn run() -> RunConfig {
        RunConfig::example(catalog::find("Qwen/Qwen2.5-1.5B-Instruct").unwrap().arch)
    }

    #[test]
    fn ranges_and_the_token_cap_are_checked() {
        assert_eq!(validate(&run()), Ok(()));
        let mut r = run();
        r.num_generations = 1;
        let e = validate(&r).unwrap_err();
        assert_eq!(e.knob, Some(Knob::Generations));
        assert!(e.message.contains("num_generations = 1"), "{}", e.message);
        let mut r = run();
        r.micro_batch = 1024;
        r.max_seq_len = 262_144;
        r.completion_len = 262_144 - r.prompt_len;
        let e = validate(&r).unwrap_err();
        assert_eq!(e.knob, Some(Knob::MicroBatch));
        // the loader reads the prompt and the completion up to 2^21 tokens: longer ones are
        // refused here too, and a sequence the knob allows no longer rewrites them
        let mut r = run();
        Knob::SequenceLength.set(&mut r, 1 << 24);
        assert_eq!(validate(&r), Ok(()));
        r.completion_len = MAX_PART_LENGTH + 1;
        let e = validate(&r).unwrap_err();
        assert_eq!(e.knob, Some(Knob::CompletionLength));
        assert!(e.message.contains("max_completion_length"), "{}", e.message);
        let mut r = run();
        r.prompt_len = 0;
        let e = validate(&r).unwrap_err();
        assert_eq!(e.knob, Some(Knob::PromptLength));
        assert!(e.message.contains("max_prompt_length = 0"), "{}", e.message);
    }

    #[test]
    fn trl_refuses_what_its_config_refuses() {
        let mut r = run();
        r.stack = Stack::Trl;
        r.micro_batch = 4;
        r.grad_accum = 1;
        r.num_generations = 3;
        let e = validate(&r).unwrap_err();
        assert_eq!(e.knob, Some(Knob::Generations));
        r.num_generations = 4;
        assert_eq!(validate(&r), Ok(()));
        r.checkpointing = Checkpointing::UnslothOffload;
        assert!(validate(&r).unwrap_err().message.contains("Unsloth's"));
        // Unsloth replaces the micro-batch instead of refusing
        r.switch_stack(Stack::Unsloth);
        r.num_generations = 3;
        assert_eq!(validate(&r), Ok(()));
    }
}
