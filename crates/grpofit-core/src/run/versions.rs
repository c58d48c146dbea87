//! The trainer versions a run uses (TRL, Unsloth, transformers, vLLM), where each came from, and
//! the memory behaviours that moved between their releases. Every rule below names the release
//! and the function it was read from (the wheels on PyPI). No I/O: the binary reads the user's
//! Python environment and hands the versions it found here as plain values.

use crate::contract::Call;
use crate::contract::requires;
use crate::contract::unsloth_ladder::{self, UnslothCall};
use serde::Serialize;

pub use crate::contract::release::Release;

/// The packages whose version changes the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Package {
    Trl,
    Unsloth,
    Transformers,
    Vllm,
}

impl Package {
    pub const ALL: [Package; 4] = [
        Package::Trl,
        Package::Unsloth,
        Package::Transformers,
        Package::Vllm,
    ];

    /// The distribution's name (its `*.dist-info` folder and `pip install` name).
    pub fn name(self) -> &'static str {
        match self {
            Package::Trl => "trl",
            Package::Unsloth => "unsloth",
            Package::Transformers => "transformers",
            Package::Vllm => "vllm",
        }
    }

    /// The `[grpofit]` key that pins it.
    pub fn key(self) -> &'static str {
        match self {
            Package::Trl => "trl_version",
            Package::Unsloth => "unsloth_version",
            Package::Transformers => "transformers_version",
            Package::Vllm => "vllm_version",
        }
    }

    /// The command-line flag that pins it: `--trl-version` for `trl_version` (the binary's
    /// flags are named after the same keys).
    pub fn flag(self) -> String {
        format!("--{}", self.key().replace('_', "-"))
    }

    /// The releases grpofit models, oldest and newest: the rungs of the ladders read from the
    /// wheels (`contract::requires`, which lists each ladder's rungs):
    /// - TRL from 0.14 (the first release with `GRPOTrainer`) to 1.16 (the newest wheel read);
    /// - Unsloth from 2025.2 (its first GRPO patch, `PatchFastRL`) to 2026.10;
    /// - transformers from 4.46 (what trl 0.14.0's METADATA requires) to 5.25;
    /// - vLLM from 0.7 (trl 0.15.2's `vllm` extra pins 0.7.2) to 0.34.
    ///
    /// A release older than the oldest line is refused; one newer than the newest line is
    /// estimated with the newest rung's rules, with a warning ([`Package::newer_warning`]).
    pub fn range(self) -> (Release, Release) {
        let rungs = requires::releases(self.name());
        let target = self.targeted();
        (
            rungs.first().copied().unwrap_or(target),
            rungs.last().copied().unwrap_or(target),
        )
    }

    /// The version grpofit targets when nothing says otherwise: the releases its contract and
    /// rules were read from.
    pub fn targeted(self) -> Release {
        match self {
            Package::Trl => Release::new(1, 15, 0),
            Package::Unsloth => Release::new(2026, 10, 9),
            Package::Transformers => Release::new(5, 17, 0),
            // the newest vLLM TRL 1.15 accepts: trl 1.15.0's METADATA requires
            // `vllm>=0.21.0,<=0.31.0` for its `vllm` extra, and its `vllm-serve` passes
            // `--weight-transfer-config`, which older releases (0.11) lack
            Package::Vllm => Release::new(0, 31, 0),
        }
    }

    /// Whether `r` is inside the modelled range (by release line).
    pub fn models(self, r: Release) -> bool {
        let (lo, hi) = self.range();
        r.line() >= lo.line() && r.line() <= hi.line()
    }

    /// `trl 1.17.0 is newer than the newest release modelled, 1.16.0: estimated with 1.16's
    /// rules`, for a release past the newest modelled line (its rules and ladders are the newest
    /// rung's: every rule compares release lines, every ladder reads the newest rung at or
    /// before the release).
    pub fn newer_warning(self, r: Release) -> Option<String> {
        let (_, hi) = self.range();
        (r.line() > hi.line()).then(|| {
            format!(
                "{} {r} is newer than the newest release modelled, {hi}: estimated with {}.{}'s rules",
                self.name(),
                hi.major,
                hi.minor
            )
        })
    }

    /// The range in words: `0.14 to 1.15`.
    pub fn range_text(self) -> String {
        let (lo, hi) = self.range();
        format!("{}.{} to {}.{}", lo.major, lo.minor, hi.major, hi.minor)
    }
}

/// Where a version came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from", content = "detail")]
pub enum Origin {
    /// the run file's `[grpofit]` key
    RunFile,
    /// a command-line flag (`--trl-version`)
    CommandLine(String),
    /// the `METADATA` of the user's Python environment, at this path
    Environment(String),
    /// chosen to go with another pinned version, for this reason
    Implied(String),
    /// grpofit's targeted release
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::RunFile => f.write_str("run file"),
            Origin::CommandLine(flag) => f.write_str(flag),
            Origin::Environment(path) => write!(f, "environment: {path}"),
            Origin::Implied(why) => write!(f, "implied: {why}"),
            Origin::Default => f.write_str("grpofit's default"),
        }
    }
}

/// One package's version and its origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pinned {
    pub package: Package,
    pub version: Release,
    pub origin: Origin,
}

/// What the user's Python environment holds: each package found, its version text and the
/// `METADATA` file it was read from. Filled by the binary; empty in tests and presets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Installed {
    pub found: Vec<(Package, String, String)>,
}

impl Installed {
    pub(crate) fn of(&self, p: Package) -> Option<(&str, &str)> {
        self.found
            .iter()
            .find(|(q, _, _)| *q == p)
            .map(|(_, v, path)| (v.as_str(), path.as_str()))
    }
}

/// Why a version cannot be used: the package, the text, where it came from, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub package: Package,
    pub text: String,
    pub origin: Origin,
    pub reason: String,
}

/// The trainer versions of a run, as the memory rules read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct StackVersions {
    pub trl: Release,
    pub unsloth: Release,
    pub transformers: Release,
}

impl Default for StackVersions {
    fn default() -> StackVersions {
        StackVersions {
            trl: Package::Trl.targeted(),
            unsloth: Package::Unsloth.targeted(),
            transformers: Package::Transformers.targeted(),
        }
    }
}

/// The versions the memory rules read, from the resolved pins.
pub fn stack_versions(pins: &[Pinned]) -> StackVersions {
    let of = |p: Package| {
        pins.iter()
            .find(|x| x.package == p)
            .map_or(p.targeted(), |x| x.version)
    };
    StackVersions {
        trl: of(Package::Trl),
        unsloth: of(Package::Unsloth),
        transformers: of(Package::Transformers),
    }
}

/// How TRL's loss forward computes the entropy of its unfused logits (`entropy_from_logits`,
/// under `torch.no_grad()` in `_get_per_token_logps_and_entropies`): each chunk's fp32
/// `log_softmax`, its `exp` and their product are live at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntropyChunk {
    /// no entropy: trl 0.14-0.19 `_get_per_token_logps` returns log-probs only (read in 0.16.1
    /// and 0.19.1)
    None,
    /// `chunk_size: int = 1` over the batch dimension, one whole sequence (K x V) at a time
    /// (trl 0.20.0 `trainer/utils.py`)
    Sequence,
    /// `chunk_size: int = 128` rows of the logits flattened to (N, V) (trl 0.23.0, 0.26.2, 1.0.0,
    /// 1.14.2 `trainer/utils.py`), and the calibration harness
    Rows128,
}

/// What TRL's Liger flag computes the loss with (`[grpo] use_liger_loss` in trl 0.17-0.25,
/// `use_liger_kernel` in 0.26-1.14): the policy's log-probabilities from the last hidden states
/// and the head's weight in chunks, the micro-batch's logits never built (N8). Read from each
/// release's `GRPOTrainer.__init__` / `compute_loss`; Liger cannot run on CPU, so not traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LigerLoss {
    /// no flag, or a release where it changes no logits (before 0.17; from 1.15 TRL's own fused
    /// head runs whatever the flag says)
    Off,
    /// liger-kernel's `LigerFusedLinearGRPOLoss` (trl 0.17.0 to 1.12.0 `compute_liger_loss`;
    /// liger_kernel 0.6.1 `chunked_loss/fused_linear_ppo.py`): `chunk_size=1`, one sequence
    /// at a time through `torch.func.grad_and_value`, its logits and fp32 log-softmax eager
    LigerKernel,
    /// TRL 1.13's own copy (`trl/losses/fused_linear_ppo.py`): the same `chunk_size=1` and
    /// `grad_weight = torch.zeros_like(weight)`, the log-probs in 2048-token x 4096-vocabulary
    /// tiles (`_SELECTIVE_LOGPROB_SEQ_CHUNK_SIZE`, `_VOCAB_CHUNK_SIZE`)
    TrlLosses,
    /// trl 1.14.2 `_chunked_logps`: `_ChunkedLogProbFunction` (trainer/utils.py) over the
    /// completion's tokens, 2048-token (`_CHUNKED_LOGPROB_TOKEN_CHUNK_SIZE`) x 8192-vocabulary
    /// (`_CHUNKED_LOGPROB_CHUNK_SIZE`) tiles, a compute-dtype `mm_buf` and an fp32 `logits_buf`
    Chunked,
}

/// How an Unsloth release computes the log-probabilities of its training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnslothLogits {
    /// Unsloth 2025.2: it patches only vLLM into TRL's GRPOTrainer (unsloth 2025.2.4
    /// `_patch_trl_rl_trainers`), so TRL's own `compute_loss` builds the micro-batch's logits.
    TrlLoss,
    /// Unsloth 2025.3 to 2025.12: `grpo_accumulated_loss` passes the final hidden states to
    /// `UnslothEfficientGRPO`, which splits the micro-batch into `unsloth_num_chunks` chunks
    /// (default -1: one sequence each) and, per chunk, multiplies by the LM head and upcasts the
    /// logits to fp32 in `grpo_compute_loss` (unsloth_zoo 2025.5.2, 2025.8.9, 2025.11.6
    /// rl_replacements.py).
    PerSequenceFp32,
    /// Unsloth 2025.3 to 2025.7 with a model `FastLanguageModel` hands to `FastModel` (see
    /// [`fast_model`]): `FastBaseModel.from_pretrained` sets `UNSLOTH_USE_NEW_MODEL=1`, so the
    /// replaced `_get_per_token_logps` returns the micro-batch's logits (it returns None only when
    /// that flag is 0), and `compute_loss` hands them, with the reference's from `_prepare_inputs`,
    /// to `grpo_compute_loss_slow`, which upcasts both to fp32 whole (unsloth 2025.3.19 and
    /// 2025.5.2 rl_replacements.py; 2025.8.9's replacement returns None whatever the flag).
    MicroBatchFp32,
    /// Unsloth 2026.1 on: mini-batches from `autotune_batch_and_chunks` and blocked log-probs
    /// (unsloth_zoo 2026.1.4; `fused_linear_logprobs` in 2026.10.9).
    Blocks,
}

/// Which rule raises Unsloth's `per_device_train_batch_size` to `num_generations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchRaise {
    /// unsloth 2025.2.4 has no such rule
    Never,
    /// `per_device_train_batch_size % num_generations != 0` (unsloth 2025.5.2
    /// `grpo_trainer_fix_batch_size`, 2025.8.9 `_patch_trl_rl_trainers`)
    PerDevice,
    /// `per_device x gradient_accumulation x world_size % num_generations != 0` when neither
    /// `steps_per_generation` nor `generation_batch_size` is set (unsloth 2025.11.6 on)
    EffectiveBatch,
}

/// How Unsloth's `load_vllm` picks vLLM's `max_num_seqs` and `max_num_batched_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnslothVllmLimits {
    /// Before unsloth_zoo 2025.11.6: `max_num_seqs` from a tier of its KV estimate (128 to 400
    /// sequences) and `max_num_batched_tokens = max_seq_length` (unsloth_zoo 2025.2.4 to 2025.11.5
    /// `vllm_utils.load_vllm`, "Chunked prefill tokens = ... Num Sequences = ...").
    SequencesByKv,
    /// unsloth_zoo 2025.11.6 on: a tier gives both, 8 to 256 sequences and 2048 to 8192 tokens
    /// (`load_vllm`, "Benchmarks for max_batched_tokens, max_num_seqs").
    PairsByKv,
}

impl StackVersions {
    /// TRL 0.14's `per_device_train_batch_size` counts prompts: `compute_loss` repeats each
    /// prompt `num_generations` times (`torch.repeat_interleave(prompt_inputs["input_ids"],
    /// self.num_generations)`, trl 0.14.0 grpo_trainer.py). From 0.15 it counts completions
    /// (`RepeatRandomSampler`, trl 0.15.2 `_get_train_sampler`).
    pub fn batch_counts_prompts(self) -> bool {
        self.trl.line() < (0, 15)
    }

    /// TRL 1.15's fused LM head: `GRPOTrainer.__init__` calls `add_fused_lm_head` (trl 1.15.0;
    /// absent from 1.14.2, which returns the micro-batch's logits from `_get_per_token_logps_and_entropies`
    /// and reads them with `selective_log_softmax` in the compute dtype). 1.16.0 keeps it on CUDA
    /// unchanged (`ChunkedLogProbFunction`, `_fused_forward`: the completion tokens, Triton
    /// kernels); its new torch fallback (`_forward_tile`, every position scored) runs only where
    /// `kernels/chunked_logprob.py` `_use_triton(device)` is false, on no NVIDIA GPU.
    pub fn trl_fused_head(self) -> bool {
        self.trl.line() >= (1, 15)
    }

    /// Whether the reference log-probs are computed inside `compute_loss`, beside the policy's
    /// logits (N15): trl 0.14.0 `compute_loss` calls `get_per_token_logps(self.ref_model, ...)`
    /// itself; from 0.15.2 `_prepare_inputs` / `_generate_and_score_completions` compute them
    /// under `torch.no_grad()` before the loss's forward, which reads `inputs["ref_per_token_logps"]`
    /// (read in 0.15.2, 0.18.2, 0.19.1; traced: trl 0.16.1 to 1.14.2 `beta` records' step
    /// peaks equal their `base` records' within 512 B).
    pub fn trl_reference_in_loss(self) -> bool {
        self.trl.line() < (0, 15)
    }

    /// Whether TRL keeps a reference whatever `beta` is: trl 0.14.0 and 0.15.2
    /// `GRPOTrainer.__init__` build one for every model that is not a PEFT model (`elif
    /// peft_config is None: self.ref_model = create_reference_model(model)`), and compute the
    /// reference log-probs every step (0.14.0 `compute_loss`, 0.15.2 `_prepare_inputs`, under
    /// `torch.inference_mode()`, with the adapter disabled under LoRA), `beta` only weighting the
    /// KL term; trl 0.16.1 `__init__` sets `self.ref_model = None` when `self.beta == 0.0` and
    /// skips the pass. Traced: 0.14.0 and 0.15.2 `full` hold the same reference model bytes and
    /// reach the same step peaks as `full_beta`.
    pub fn trl_reference_whatever_beta(self) -> bool {
        self.trl.line() < (0, 16)
    }

    /// Whether TRL takes the log-probs one sequence at a time with a plain `log_softmax`, the
    /// reference pass following inside the step: trl 0.14.0 `compute_loss`'s local
    /// `get_per_token_logps` runs `logits_row.log_softmax(dim=-1)` and `torch.gather` per row
    /// (each row's log-softmax saved for the backward), then the reference model's (or the
    /// adapter-disabled model's) pass under `torch.inference_mode()` while those rows are held.
    /// 0.15.2 moves the reference pass to `_prepare_inputs` and reads the logits with
    /// `selective_log_softmax`.
    pub fn trl_row_log_softmax(self) -> bool {
        self.trl.line() < (0, 15)
    }

    /// Whether TRL hands the log-prob forwards the batch's attention mask, so that the model
    /// builds a 4-D mask (`memory::step::shape::AttentionMask`): trl 0.14.0 `compute_loss`'s
    /// local `get_per_token_logps` calls `model(input_ids, num_logits_to_keep=...)` with none
    /// (SDPA runs `is_causal`; traced: no mask tensor at any 0.14.0 peak), trl 0.15.2
    /// `_get_per_token_logps` passes `attention_mask=attention_mask`.
    pub fn trl_passes_attention_mask(self) -> bool {
        self.trl.line() >= (0, 15)
    }

    /// Whether TRL leaves a LoRA model without the input-gradient hook that reentrant
    /// checkpointing needs: trl 0.14.0 and 0.15.2 `GRPOTrainer.__init__` call `get_peft_model`
    /// before the Trainer turns checkpointing on, so peft 0.14.0 `PeftModel.__init__` skips
    /// `_prepare_model_for_gradient_checkpointing` (only when `model.is_gradient_checkpointing`)
    /// and its `enable_input_require_grads`; transformers 4.48 / 4.49
    /// `gradient_checkpointing_enable` defaults to `use_reentrant=True`, and the loss has no
    /// grad_fn. trl 0.16.1 `_enable_gradient_checkpointing` calls `enable_input_require_grads`
    /// itself. Traced: every 0.14.0 / 0.15.2 LoRA mix with checkpointing fails so on CPU and runs
    /// with `gradient_checkpointing_kwargs={"use_reentrant": False}` (trl issue 3089).
    pub fn trl_lora_needs_non_reentrant(self) -> bool {
        self.trl.line() < (0, 16)
    }

    /// Whether the reference log-probs go through the model over the whole generation batch at
    /// once (N4): trl 0.19.1 `_generate_and_score_completions` passes `batch_size` to the old
    /// log-probs' `_get_per_token_logps` but not to the reference model's, so `batch_size =
    /// batch_size or input_ids.size(0)` takes every row; 0.20.0 passes it to both.
    pub fn trl_reference_over_generation_batch(self) -> bool {
        self.trl.line() == (0, 19)
    }

    /// Whether TRL loads its reference model (full fine-tuning, `beta != 0`) in transformers'
    /// default dtype, float32, whatever the policy's: trl 0.19.1, 0.20.0 and 0.21.0
    /// `GRPOTrainer.__init__` run `ref_model = ...from_pretrained(model_id, **model_init_kwargs)`
    /// for every non-PEFT policy, and refuse `model_init_kwargs` beside a model object ("This
    /// argument can only be used when the `model` argument is a string"), so a policy handed over
    /// in bf16 (as their own `trl grpo` script hands over an object: 0.19.1 `scripts/grpo.py`
    /// `main`) gets an fp32 reference. 0.14.0 to 0.18.2 copy the policy object
    /// (`create_reference_model`) off ZeRO-3 / FSDP; 0.22.2 on take `model_init_kwargs` beside an
    /// object (read in 0.22.2, 0.23.0, 0.26.2, 1.0.0, 1.15.0). Traced: trl 0.19.1 qwen2
    /// `full_beta`, `reference_model_bytes` twice the policy's.
    pub fn trl_reference_in_default_dtype(self) -> bool {
        matches!(self.trl.line(), (0, 19) | (0, 20) | (0, 21))
    }

    /// Whether the transformers in force builds a padded batch's attention mask as a bool
    /// tensor (`memory::step::shape::AttentionMask::BoolConverted`): `masking_utils`
    /// (`create_causal_mask` -> `sdpa_mask`), which every decoder calls from 4.53 (read in
    /// 4.53.1, 4.57.3, 5.4.0, 5.20.0 `models/qwen2/modeling_qwen2.py`); 4.50 to 4.52 (read in
    /// 4.50.3 and 4.52.4) fill a float mask in the model's dtype
    /// (`_prepare_4d_causal_attention_mask_with_cache_position`).
    pub fn transformers_bool_mask(self) -> bool {
        self.transformers.line() >= (4, 53)
    }

    /// Whether TRL divides the unfused logits by the temperature in place, so that the head's own
    /// output is what the loss keeps: trl 1.0.0 `_get_per_token_logps_and_entropies` runs
    /// `logits.div_(self.temperature)` on the sliced head output (1.14.2 passes `temperature`
    /// into `selective_log_softmax`, no copy either). trl 0.16.1 to 0.29.1 (`_get_per_token_logps`,
    /// then `_get_per_token_logps_and_entropies`; read in 0.16.1, 0.19.1, 0.20.0, 0.23.0, 0.26.2,
    /// 0.27.2, 0.28.0, 0.29.1) write `logits = logits / self.temperature`: the copy replaces the
    /// head's output, which nothing else holds.
    pub fn trl_divides_logits_in_place(self) -> bool {
        self.trl.line() >= (1, 0)
    }

    /// [`EntropyChunk`] by TRL release: none before 0.20, one sequence at a time in 0.20 (read
    /// in 0.20.0; 0.21 and 0.22 not read, taken as 0.20), 128 flattened rows from 0.23.
    /// What the Liger flag computes the loss with in this TRL release ([`LigerLoss`]): the
    /// releases read are 0.17.0, 0.19.1, 0.20.0, 0.23.0, 0.26.2, 0.29.1, 1.0.0, 1.5.0, 1.10.0,
    /// 1.12.0 (liger-kernel), 1.13.0 (`trl.losses`), 1.14.2 (`_chunked_logps`) and 1.15.0
    /// (deprecated: only Liger's layer kernels).
    pub fn trl_liger_loss(self) -> LigerLoss {
        match self.trl.line() {
            l if l < (0, 17) => LigerLoss::Off,
            l if l < (1, 13) => LigerLoss::LigerKernel,
            l if l < (1, 14) => LigerLoss::TrlLosses,
            l if l < (1, 15) => LigerLoss::Chunked,
            _ => LigerLoss::Off,
        }
    }

    /// The GRPOConfig key that turns the Liger loss on in this release: `use_liger_loss` (trl
    /// 0.17 to 0.25; `use_liger_kernel` is then TrainingArguments' layer patching, no loss), else
    /// `use_liger_kernel` (renamed in trl 0.26.2's GRPOConfig).
    pub fn trl_liger_key(self) -> &'static str {
        if self.trl.line() < (0, 26) {
            "use_liger_loss"
        } else {
            "use_liger_kernel"
        }
    }

    pub fn trl_entropy_chunk(self) -> EntropyChunk {
        match self.trl.line() {
            l if l < (0, 20) => EntropyChunk::None,
            l if l < (0, 23) => EntropyChunk::Sequence,
            _ => EntropyChunk::Rows128,
        }
    }

    /// Whether the model ignores the `logits_to_keep` TRL asks it for, so that it returns the
    /// logits of every position and TRL slices the completion's out of them: TRL from 0.15
    /// calls `model(..., logits_to_keep=logits_to_keep + 1)` (trl 0.15.2
    /// `GRPOTrainer._get_per_token_logps`, which slices `logits[:, -logits_to_keep:]` itself "for
    /// transformers<=4.48"; trl 0.14.0 still passes `num_logits_to_keep`), and unsloth 2025.2.4's
    /// `CausalLM_fast_forward` takes only `num_logits_to_keep`, the new name landing unread in
    /// `**kwargs`. unsloth 2025.2.15 takes both (`max(num_logits_to_keep, logits_to_keep)`);
    /// unsloth 2025.2.4 accepts any trl >= 0.7.9 but 0.9.x (its METADATA).
    pub fn unsloth_returns_every_position(self) -> bool {
        self.unsloth < Release::new(2025, 2, 15) && self.trl.line() >= (0, 15)
    }

    /// Whether TRL sizes its colocated vLLM's context as `max_prompt_length +
    /// max_completion_length`: trl 0.18.2 and 0.19.1 `GRPOTrainer.__init__` pass
    /// `LLM(max_model_len=self.max_prompt_length + self.max_completion_length)` in colocate
    /// mode, and 0.20.0 to 0.25.1 the same sum when both are set (None, the model's own context,
    /// only when `max_prompt_length` is None). Before 0.18 the call passes
    /// `vllm_max_model_len` (0.15) or nothing; from 0.26.2 `vllm_max_model_length`, None by
    /// default. `trl vllm-serve` takes its own `--max_model_len` in every release.
    pub fn trl_context_is_prompt_and_completion(self) -> bool {
        ((0, 18)..(0, 26)).contains(&self.trl.line())
    }

    /// Micro-batches TRL's colocated vLLM is sized for (`max_num_seqs = per_device_train_batch_size
    /// x vllm_tensor_parallel_size x this`): `gradient_accumulation_steps` in trl 0.18.2 and
    /// 0.19.1 (`GRPOTrainer.__init__`, though both already generate `steps_per_generation`
    /// micro-batches at once), `steps_per_generation` from 0.20.0.
    pub fn trl_colocated_seqs_per_micro_batch(
        self,
        grad_accum: u64,
        steps_per_generation: u64,
    ) -> u64 {
        if self.trl.line() < (0, 20) {
            grad_accum
        } else {
            steps_per_generation
        }
    }

    /// Whether TRL prepares a quantised base with peft's `prepare_model_for_kbit_training`
    /// (its `prepare_peft_model`, trl 0.22.0 to 0.25.1 `GRPOTrainer.__init__`; 0.21.0 calls
    /// `get_peft_model` alone, 0.26.2 no longer calls `prepare_peft_model`):
    /// `memory::kbit_cast::kbit_fp32_bytes`.
    pub fn trl_prepares_kbit_model(self) -> bool {
        ((0, 22)..(0, 26)).contains(&self.trl.line())
    }

    /// Whether TRL casts a quantised model's trainable parameters to bf16 after
    /// `get_peft_model` (trl 0.26.2 to 1.15.0 `GRPOTrainer.__init__`):
    /// `memory::kbit_cast::adapter_element_bytes`.
    pub fn trl_casts_quantised_adapters_to_bf16(self) -> bool {
        self.trl.line() >= (0, 26)
    }

    pub fn unsloth_logits(self) -> UnslothLogits {
        match self.unsloth.line() {
            l if l < (2025, 3) => UnslothLogits::TrlLoss,
            l if l < (2026, 1) => UnslothLogits::PerSequenceFp32,
            _ => UnslothLogits::Blocks,
        }
    }

    pub fn batch_raise(self) -> BatchRaise {
        match self.unsloth.line() {
            l if l < (2025, 3) => BatchRaise::Never,
            l if l < (2025, 11) => BatchRaise::PerDevice,
            _ => BatchRaise::EffectiveBatch,
        }
    }

    /// Unsloth's vLLM sequence table by release. unsloth_zoo 2025.11.5 still has the older rule
    /// and 2025.11.6 the newer (both wheels read); unsloth 2025.11.6 requires
    /// `unsloth_zoo>=2025.11.6` (its METADATA), so an Unsloth release before 2025.11.6 is taken to
    /// run the older rule.
    pub fn unsloth_vllm_limits(self) -> UnslothVllmLimits {
        if self.unsloth < Release::new(2025, 11, 6) {
            UnslothVllmLimits::SequencesByKv
        } else {
            UnslothVllmLimits::PairsByKv
        }
    }

    /// Whether Unsloth scores the generation batch in a no-grad pass before training. Before
    /// 2026 its `_get_per_token_logps` returns None (unsloth 2025.5.2 "Unsloth efficient GRPO";
    /// 2025.8.9 `_get_per_token_logps_and_entropies` returns `None, None`) and the reference
    /// log-probs come from hidden states inside the loss.
    pub fn unsloth_scores_before_training(self) -> bool {
        self.unsloth_logits() == UnslothLogits::Blocks
    }

    /// `GRPOConfig`'s default for `key` in the TRL release in force, from the ladder of release
    /// contracts (`contract/trl_ladder.json`, read from the wheels by tools/contract/ladder.py):
    /// e.g. `beta` 0.04 before 0.19, `gradient_checkpointing` False before 0.22 (TrainingArguments'),
    /// `max_completion_length` 256 before 1.10, `per_device_train_batch_size` 1 in 0.14 (prompts).
    /// None where that release gives no value (the targeted contract's default applies).
    pub fn trl_default(self, key: &str) -> Option<serde_json::Value> {
        crate::contract::ladder::grpo_default(self.trl, key)
            .filter(|v| !v.is_null())
            .cloned()
    }

    /// `call`'s default for `key` in the releases in force. Unsloth's `from_pretrained`,
    /// `get_peft_model` and `load_vllm` read the pinned Unsloth's own signature
    /// (`contract/unsloth_ladder.json`, from each wheel's unsloth/models/loader.py and llama.py
    /// by tools/contract/stack_ladders.py): e.g. `get_peft_model(use_gradient_checkpointing =
    /// True)` before 2025.8 ("unsloth" from 2025.8.9), `from_pretrained(max_seq_length = None)`
    /// in 2025.2 (2048 from 2025.3.19). `Some(Null)` where that release spells `None`. A key the
    /// release does not name, and every other call, take the targeted contract's default
    /// (`GRPOConfig`'s moved defaults: [`StackVersions::trl_default`]).
    pub fn call_default(self, call: Call, key: &str) -> Option<&'static serde_json::Value> {
        let unsloth = match call {
            Call::UnslothFromPretrained => Some(UnslothCall::FromPretrained),
            Call::UnslothGetPeftModel => Some(UnslothCall::GetPeftModel),
            Call::UnslothLoadVllm => Some(UnslothCall::LoadVllm),
            Call::GrpoConfig | Call::TrlModelConfig | Call::LoraConfig | Call::VllmServe => None,
        };
        unsloth
            .and_then(|c| unsloth_ladder::default(c, self.unsloth, key))
            .or_else(|| call.default(key))
    }

    /// Whether Unsloth runs `lora_dropout` inside its fused LoRA kernels: from 2026.10.7
    /// `kernels/fast_lora.py` `FUSED_LORA_DROPOUT` (read in 2026.10.7 and 2026.10.9; absent in
    /// 2026.10.1, 2026.10.5 and 2026.10.6); 2025.2.4 to 2026.10.6 `FastLlamaModel.patch_peft_model`
    /// fuses only `if lora_dropout == 0` (`memory::step::dropout`).
    pub fn unsloth_fused_lora_dropout(self) -> bool {
        self.unsloth >= Release::new(2026, 10, 7)
    }

    /// Whether `get_peft_model(use_gradient_checkpointing = True)` offloads layer inputs as
    /// "unsloth" does, `from_pretrained` left at its own `use_gradient_checkpointing =
    /// "unsloth"`: from 2025.3 `FastLanguageModel.from_pretrained` then calls
    /// `patch_unsloth_smart_gradient_checkpointing` (unsloth 2025.3.19 to 2026.1.4 loader.py),
    /// which puts unsloth_zoo's `UnslothCheckpointFunction` (layer inputs copied to CPU) in
    /// place of torch's `CheckpointFunction`, and the layers checkpoint through
    /// `torch.utils.checkpoint.checkpoint(..., use_reentrant = True)` (llama.py
    /// `LlamaModel_fast_forward`). Unsloth 2025.2.4 and 2025.2.15's `from_pretrained` patch
    /// nothing, so `True` is torch's own checkpointing on the GPU (`_utils.py`
    /// `prepare_model_for_kbit_training` marks `_offloaded_gradient_checkpointing` only for
    /// "unsloth"); 2026.10.9's `get_peft_model` undoes the patch for `True`
    /// (`_utils.py` `apply_unsloth_gradient_checkpointing`: `unpatch_unsloth_smart_gradient_checkpointing`).
    pub fn unsloth_true_checkpointing_offloads(self) -> bool {
        (2025, 3) <= self.unsloth.line() && self.unsloth.line() < (2026, 10)
    }

    /// The shortest `max_seq_length` for which "unsloth" checkpointing offloads: from 2026.10,
    /// below 512 tokens Unsloth takes torch's own checkpointing instead ("Offloading is not worth
    /// it below ~512", unsloth 2026.10.9 `_utils.py` `apply_unsloth_gradient_checkpointing`, which
    /// `from_pretrained` and `get_peft_model` call; 2026.1.4's loader.py patches at any length).
    pub fn unsloth_offload_min_seq_len(self) -> u64 {
        if self.unsloth.line() >= (2026, 10) {
            512
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trl_0_19_to_0_21_load_the_reference_model_in_float32() {
        let at = |trl: &str| StackVersions {
            trl: Release::parse(trl).expect("release"),
            ..StackVersions::default()
        };
        assert!(!at("0.18.2").trl_reference_in_default_dtype());
        assert!(at("0.19.1").trl_reference_in_default_dtype());
        assert!(at("0.21.0").trl_reference_in_default_dtype());
        assert!(!at("0.22.2").trl_reference_in_default_dtype());
        assert!(!at("1.15.0").trl_reference_in_default_dtype());
    }

    #[test]
    fn trl_divides_the_logits_in_place_from_1_0() {
        // trl 0.29.1 `logits = logits / self.temperature`; 1.0.0 `logits.div_(self.temperature)`
        let at = |trl: &str| StackVersions {
            trl: Release::parse(trl).expect("release"),
            ..StackVersions::default()
        };
        assert!(!at("0.16.1").trl_divides_logits_in_place());
        assert!(!at("0.29.1").trl_divides_logits_in_place());
        assert!(at("1.0.0").trl_divides_logits_in_place());
        assert!(at("1.14.2").trl_divides_logits_in_place());
    }

    #[test]
    fn trl_computes_entropy_from_0_20() {
        let at = |trl: &str| StackVersions {
            trl: Release::parse(trl).expect("release"),
            ..StackVersions::default()
        };
        assert_eq!(at("0.19.1").trl_entropy_chunk(), EntropyChunk::None);
        assert_eq!(at("0.20.0").trl_entropy_chunk(), EntropyChunk::Sequence);
        assert_eq!(at("0.23.0").trl_entropy_chunk(), EntropyChunk::Rows128);
        assert_eq!(at("1.14.2").trl_entropy_chunk(), EntropyChunk::Rows128);
        assert!(at("0.14.0").trl_reference_in_loss());
        assert!(!at("0.15.2").trl_reference_in_loss());
        assert!(at("0.19.1").trl_reference_over_generation_batch());
        assert!(!at("0.20.0").trl_reference_over_generation_batch());
    }

    #[test]
    fn trl_before_0_16_keeps_its_reference_whatever_beta() {
        let at = |trl: &str| StackVersions {
            trl: Release::parse(trl).expect("release"),
            ..StackVersions::default()
        };
        for old in ["0.14.0", "0.15.2"] {
            assert!(at(old).trl_reference_whatever_beta(), "{old}");
            assert!(at(old).trl_lora_needs_non_reentrant(), "{old}");
        }
        for new in ["0.16.1", "1.15.0"] {
            assert!(!at(new).trl_reference_whatever_beta(), "{new}");
            assert!(!at(new).trl_lora_needs_non_reentrant(), "{new}");
        }
        assert!(at("0.14.0").trl_row_log_softmax());
        assert!(!at("0.15.2").trl_row_log_softmax());
    }

    #[test]
    fn releases_parse_with_their_suffixes() {
        assert_eq!(Release::parse("0.8.5.post1"), Some(Release::new(0, 8, 5)));
        assert_eq!(Release::parse("0.15.0.dev0"), Some(Release::new(0, 15, 0)));
        assert_eq!(Release::parse("v1.15"), Some(Release::new(1, 15, 0)));
        assert_eq!(Release::parse("2.6.0+cu124"), Some(Release::new(2, 6, 0)));
        assert_eq!(Release::parse("soon"), None);
    }

    #[test]
    fn unsloths_defaults_are_the_pinned_releases() {
        use serde_json::json;
        let at = |unsloth: &str| StackVersions {
            unsloth: Release::parse(unsloth).unwrap(),
            ..StackVersions::default()
        };
        let (old, new) = (at("2025.2.4"), StackVersions::default());
        let from = Call::UnslothFromPretrained;
        let peft = Call::UnslothGetPeftModel;
        assert_eq!(old.call_default(from, "max_seq_length"), Some(&json!(null)));
        assert_eq!(new.call_default(from, "max_seq_length"), Some(&json!(2048)));
        assert_eq!(
            at("2025.5.9").call_default(peft, "use_gradient_checkpointing"),
            Some(&json!(true))
        );
        assert_eq!(
            at("2025.8.9").call_default(peft, "use_gradient_checkpointing"),
            Some(&json!("unsloth"))
        );
        // a key 2025.2.4 does not name: the targeted contract's; other calls: the contract's
        assert_eq!(old.call_default(from, "load_in_8bit"), Some(&json!(false)));
        assert_eq!(old.call_default(Call::LoraConfig, "r"), Some(&json!(8)));
        assert!(!old.unsloth_true_checkpointing_offloads());
        assert!(at("2025.3.19").unsloth_true_checkpointing_offloads());
        assert!(at("2026.1.4").unsloth_true_checkpointing_offloads());
        assert!(!new.unsloth_true_checkpointing_offloads());
        assert_eq!(new.unsloth_offload_min_seq_len(), 512);
        assert_eq!(at("2026.1.4").unsloth_offload_min_seq_len(), 0);
    }

    #[test]
    fn behaviours_move_at_the_releases_read() {
        let at = |trl: &str, unsloth: &str| StackVersions {
            trl: Release::parse(trl).unwrap(),
            unsloth: Release::parse(unsloth).unwrap(),
            transformers: Package::Transformers.targeted(),
        };
        assert!(at("0.14.0", "2025.2.4").batch_counts_prompts());
        assert!(!at("0.15.2", "2025.2.4").batch_counts_prompts());
        assert!(!at("1.14.2", "2026.10.9").trl_fused_head());
        assert!(at("1.15.0", "2026.10.9").trl_fused_head());
        assert_eq!(
            at("0.15.2", "2025.5.2").unsloth_logits(),
            UnslothLogits::PerSequenceFp32
        );
        assert_eq!(
            at("0.24.0", "2026.1.4").unsloth_logits(),
            UnslothLogits::Blocks
        );
        assert_eq!(
            at("0.15.2", "2025.5.2").batch_raise(),
            BatchRaise::PerDevice
        );
        assert_eq!(
            at("0.18.2", "2025.11.6").batch_raise(),
            BatchRaise::EffectiveBatch
        );
        for (unsloth, limits) in [
            ("2025.2.4", UnslothVllmLimits::SequencesByKv),
            ("2025.11", UnslothVllmLimits::SequencesByKv),
            ("2025.11.5", UnslothVllmLimits::SequencesByKv),
            ("2025.11.6", UnslothVllmLimits::PairsByKv),
            ("2026.10.9", UnslothVllmLimits::PairsByKv),
        ] {
            assert_eq!(
                at("0.15.2", unsloth).unsloth_vllm_limits(),
                limits,
                "{unsloth}"
            );
        }
        assert_eq!(
            at("0.17.0", "2025.5.2").trl_default("beta"),
            Some(serde_json::json!(0.04))
        );
        assert_eq!(
            at("0.19.1", "2025.5.2").trl_default("beta"),
            Some(serde_json::json!(0.0))
        );
        assert_eq!(
            at("1.9.2", "2026.10.9").trl_default("max_completion_length"),
            Some(serde_json::json!(256))
        );
        assert_eq!(
            at("0.21.0", "2026.10.9").trl_default("gradient_checkpointing"),
            Some(serde_json::json!(false))
        );
        assert_eq!(
            at("0.14.0", "2025.2.4").trl_default("per_device_train_batch_size"),
            Some(serde_json::json!(1))
        );
    }
}
