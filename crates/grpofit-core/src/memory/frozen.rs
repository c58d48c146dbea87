//! Frozen models the trainer keeps on every training GPU beside the trained one: TRL's reference
//! model in full fine-tuning with `beta > 0`, and the reward models `reward_funcs` names.
//! Each is sized as the pinned trl 1.15.0 loads and prepares it, cited where it is computed.

use crate::run::spread::{Engine, Spread};
use crate::run::{Quant, RunConfig, Stack};

/// Bytes of a parameter as TRL loads a frozen copy: its ModelConfig `dtype` (`trl grpo` passes
/// `dtype=model_args.dtype` in `model_init_kwargs`, "float32" unless set), the quantisation
/// config aside (`trl/scripts/grpo.py` `main`).
fn loaded_bytes(quant: Quant) -> u64 {
    if quant == Quant::Fp32 { 4 } else { 2 }
}

/// What one rank holds of a frozen model of `parameters` elements loaded `bytes` each, as trl
/// 1.15.0 prepares it: `prepare_deepspeed` (trl/models/utils.py) runs it at stage 0 unless the
/// config is ZeRO-3, and the engine casts it to bf16 (deepspeed `_configure_distributed_model`);
/// ZeRO-3 shards it over the processes. `fsdp_shards`: the reference model goes through
/// `prepare_fsdp`, `fully_shard` on the root without an upcast, so each rank holds 1/N of it as
/// loaded; reward models go through `Accelerator.prepare_model(evaluation_mode=True)`, whole on
/// each GPU. DDP and a single GPU: the whole model, as loaded.
fn per_rank(
    parameters: u64,
    bytes: u64,
    spread: &Spread,
    processes: u64,
    fsdp_shards: bool,
) -> u64 {
    let n = processes.max(1);
    match spread.engine {
        Engine::DeepSpeed if spread.stage() >= 3 => 2 * parameters / n,
        Engine::DeepSpeed => 2 * parameters,
        Engine::Fsdp if fsdp_shards => bytes * parameters / n,
        Engine::Fsdp | Engine::Ddp => bytes * parameters,
    }
}

/// TRL's reference model on one rank, bytes: trl 1.15.0 `GRPOTrainer.__init__` loads a second
/// copy of the policy with `create_model_from_path` and the same `model_init_kwargs` when
/// `beta != 0` and the model is no PEFT model (LoRA disables its adapter instead); TRL before
/// 0.16 whatever `beta` is (`StackVersions::trl_reference_whatever_beta`).
pub fn reference_model_bytes(run: &RunConfig) -> u64 {
    let kept = run.beta != 0.0 || run.versions.trl_reference_whatever_beta();
    if run.stack != Stack::Trl || !run.full_finetuning || !kept {
        return 0;
    }
    // `_cast_lm_head_to_fp32` runs on the reference model too (`lm_head::fp32_head_bytes`)
    let (head, _, _) = super::lm_head::fp32_head_bytes(run);
    let bytes = if run.versions.trl_reference_in_default_dtype() {
        4
    } else {
        loaded_bytes(run.quant)
    };
    per_rank(
        run.arch.parameters(),
        bytes,
        &run.spread,
        run.processes(),
        true,
    ) + head
}

/// The reward models on one rank, bytes: each `reward_funcs` string is loaded with
/// `AutoModelForSequenceClassification.from_pretrained(reward_func, num_labels=1,
/// **model_init_kwargs)` on every training process (trl 1.15.0 `GRPOTrainer.__init__`) and
/// prepared with `prepare_deepspeed` or `Accelerator.prepare_model`.
pub fn reward_models_bytes(run: &RunConfig) -> u64 {
    run.reward_models
        .iter()
        .map(|m| {
            per_rank(
                m.parameters(),
                loaded_bytes(run.quant),
                &run.spread,
                run.processes(),
                false,
            )
        })
        .sum()
}

/// The reward models' forward over the generation batch (N9), bytes above what is held: trl
/// 1.15.0 `_calculate_rewards` tokenizes each prompt and completion again (right-padded) and
/// runs each reward model over the whole local generation batch under `torch.inference_mode()`,
/// one model after another, after generation and before the step. Its peak comes in the last
/// layer's MLP (traced: qwen2 `reward_model`, trl 0.19.1, `at_peak` of the reward phase, every
/// large tensor accounted for): the MLP's activation, up projection and their product (3 x 2 I
/// bytes a token); four hidden-wide bf16 tensors (the embedding output, the residual stream
/// before and after attention, the normed input); and every layer's keys and values, which the
/// model's `DynamicCache` keeps (transformers `Qwen2Model.forward`: `if use_cache and
/// past_key_values is None`; TRL loads reward models without `use_cache`, so the config's True
/// holds): 2 x 2 kv_dim bytes a layer and token. The score head's output (a token's num_labels
/// logits) is negligible.
pub fn reward_forward_bytes(run: &RunConfig) -> u64 {
    if run.stack != Stack::Trl {
        return 0;
    }
    let (prompt, completion) = run.step_lengths();
    let tokens = run.generation_rows() * (prompt + completion);
    run.reward_models
        .iter()
        .map(|m| {
            let a = &m.arch;
            tokens * (6 * a.intermediate + 8 * a.hidden + a.layers * 4 * a.kv_dim())
        })
        .max()
        .unwrap_or(0)
}

/// TRL's reference model and the reward models on this rank, bytes.
pub fn frozen_models(run: &RunConfig) -> (u64, u64) {
    (reference_model_bytes(run), reward_models_bytes(run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::run::reward::RewardModel;

    fn run_7b() -> RunConfig {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("in the catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.full_finetuning = true;
        run.beta = 0.04;
        run
    }

    #[test]
    fn the_reference_model_is_a_stage_0_copy_unless_zero_3() {
        // Qwen2.5-7B: embed 152,064 x 3,584 = 544,997,376, twice (untied head);
        // per layer q 3584^2 + 3584 bias, k and v 3584 x 512 + 512 bias each, o 3584^2,
        // gate/up/down 3 x 3584 x 18,944, 2 norms x 3584:
        // 12,845,056 + 3,584 + 2 x (1,835,008 + 512) + 12,845,056 + 203,685,888 + 7,168
        // = 233,057,792; x 28 = 6,525,618,176; + 2 x 544,997,376 + 3,584 (final norm)
        // = 7,615,616,512 parameters.
        let mut run = run_7b();
        let p = 7_615_616_512u64;
        assert_eq!(run.arch.parameters(), p);
        // one GPU, dtype bfloat16: the whole copy in bf16, 15,231,233,024 B = 14.19 GiB
        run.quant = Quant::Bf16;
        assert_eq!(reference_model_bytes(&run), 15_231_233_024);
        // TRL's default dtype (float32): 30,462,466,048 B
        run.quant = Quant::Fp32;
        assert_eq!(reference_model_bytes(&run), 30_462_466_048);
        // DeepSpeed ZeRO-2 on 7 GPUs: prepare_deepspeed drops it to stage 0, cast to bf16
        run.gpus = 7;
        run.spread = Spread {
            engine: Engine::DeepSpeed,
            zero_stage: 2,
            ..Spread::default()
        };
        assert_eq!(reference_model_bytes(&run), 15_231_233_024);
        // ZeRO-3: a 1/7 bf16 shard, 15,231,233,024 / 7 = 2,175,890,432 B = 2.03 GiB
        run.spread.zero_stage = 3;
        assert_eq!(reference_model_bytes(&run), 2_175_890_432);
        // beta = 0 or LoRA: none
        run.beta = 0.0;
        assert_eq!(reference_model_bytes(&run), 0);
        run.beta = 0.04;
        run.full_finetuning = false;
        assert_eq!(reference_model_bytes(&run), 0);
    }

    #[test]
    fn trl_before_0_16_keeps_the_reference_model_at_beta_0() {
        // trl 0.14.0 / 0.15.2 `GRPOTrainer.__init__`: `create_reference_model(model)` for every
        // non-PEFT model; trl 0.16.1: `if self.beta == 0.0: self.ref_model = None`. Traced:
        // 0.15.2 qwen2 `full` (beta 0) holds reference_model_bytes 1,233,152 like `full_beta`
        let mut run = run_7b();
        run.quant = Quant::Bf16;
        run.beta = 0.0;
        for (trl, kept) in [("0.14.0", true), ("0.15.2", true), ("0.16.1", false)] {
            run.versions.trl = crate::contract::release::Release::parse(trl).expect("release");
            let want = if kept { 15_231_233_024 } else { 0 };
            assert_eq!(reference_model_bytes(&run), want, "{trl}");
        }
        // LoRA disables the adapter instead, in every release
        run.versions.trl = crate::contract::release::Release::parse("0.14.0").expect("release");
        run.full_finetuning = false;
        assert_eq!(reference_model_bytes(&run), 0);
    }

    #[test]
    fn trl_0_19_loads_the_reference_model_in_float32() {
        // trl 0.19.1 `GRPOTrainer.__init__`: `from_pretrained(model_id, **model_init_kwargs)`,
        // kwargs refused beside a model object: 4 bytes a parameter (30,462,466,048 B) beside a
        // bf16 policy; under ZeRO-3 DeepSpeed still casts its shard to bf16
        let mut run = run_7b();
        run.quant = Quant::Bf16;
        run.versions.trl = crate::contract::release::Release::new(0, 19, 1);
        assert_eq!(reference_model_bytes(&run), 30_462_466_048);
        run.versions.trl = crate::contract::release::Release::new(0, 22, 2);
        assert_eq!(reference_model_bytes(&run), 15_231_233_024);
        run.versions.trl = crate::contract::release::Release::new(0, 19, 1);
        run.gpus = 7;
        run.spread = Spread {
            engine: Engine::DeepSpeed,
            zero_stage: 3,
            ..Spread::default()
        };
        assert_eq!(reference_model_bytes(&run), 2_175_890_432);
    }

    #[test]
    fn a_reward_model_is_the_base_model_with_a_one_label_score_head() {
        // Qwen2.5-1.5B (tied): 1,543,714,304 parameters + a 1,536 x 1 score head, in bf16
        let arch = catalog::find("Qwen/Qwen2.5-1.5B-Instruct")
            .expect("in the catalog")
            .arch;
        let mut run = run_7b();
        run.quant = Quant::Bf16;
        run.reward_models = vec![RewardModel {
            name: "r".into(),
            arch: arch.clone(),
        }];
        assert_eq!(arch.parameters(), 1_543_714_304);
        assert_eq!(reward_models_bytes(&run), 2 * (1_543_714_304 + 1_536));
        // FSDP places a reward model whole on each GPU (prepare_model, not prepare_fsdp)
        run.gpus = 4;
        run.spread = Spread {
            engine: Engine::Fsdp,
            zero_stage: 3,
            ..Spread::default()
        };
        assert_eq!(reward_models_bytes(&run), 2 * (1_543_714_304 + 1_536));
    }
}
