//! Each phase's seconds. Compute is FLOPs over the sheet's dense tensor rate times
//! `matmul_peak` (attention's at FlashAttention's share of it); memory traffic is bytes over the
//! sheet's bandwidth times `decode_bandwidth`; PyTorch eager work adds its operators' dispatch
//! time (`eager_op_seconds`). A training or scoring pass sums its kernels (`kernels`).

use super::efficiency::*;
use super::kernels;
pub(super) use super::machine::Machine;
use super::ops;
use crate::arch::Arch;
use crate::memory::estimate::{Estimate, target_mask};
use crate::memory::vllm::kv_bytes_per_token;
use crate::run::spread::Engine;
use crate::run::{Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack};

/// The completions' lengths the step is timed for.
pub(super) struct Lengths {
    pub prompt: f64,
    /// the cap (`max_completion_length`)
    pub max: f64,
    /// the mean: the user's `mean_completion_length`, else the cap
    pub mean: f64,
    pub given: bool,
}

impl Lengths {
    pub(super) fn of(run: &RunConfig, mean: Option<f64>) -> Lengths {
        let max = run.completion_len.max(1) as f64;
        Lengths {
            prompt: run.prompt_len as f64,
            max,
            mean: mean.map_or(max, |m| m.max(1.0).min(max)),
            given: mean.is_some(),
        }
    }

    /// The longest of `n` completions, which a batch waits for. With the mean known, lengths
    /// are taken as geometric (the model ends a completion with a constant chance a token),
    /// whose longest of n has the mean times the n-th harmonic number; capped at the maximum.
    pub(super) fn longest(&self, n: f64) -> f64 {
        if !self.given {
            return self.max;
        }
        (self.mean * harmonic(n.max(1.0).round())).min(self.max)
    }
}

/// Below this `n` the harmonic number is summed; above, the asymptotic series' error
/// (under 1 / (120 n^4)) is below 1.3e-7.
const HARMONIC_SUMMED: f64 = 16.0;

/// The n-th harmonic number `1 + 1/2 + ... + 1/n`, in constant time: summed for small `n`, else
/// `ln n + γ + 1/(2n) - 1/(12n²)` (the Euler-Maclaurin series, whose next term, 1/(120 n^4),
/// bounds its error), so any generation batch is timed instantly.
pub(super) fn harmonic(n: f64) -> f64 {
    if n <= HARMONIC_SUMMED {
        return (1..=n.max(0.0) as u64).map(|k| 1.0 / k as f64).sum();
    }
    n.ln() + EULER_GAMMA + 1.0 / (2.0 * n) - 1.0 / (12.0 * n * n)
}

/// The Euler-Mascheroni constant γ.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Matmul parameters one token passes through: each layer's projections and active experts, and
/// the LM head.
fn active_params(arch: &Arch) -> f64 {
    dense_params(arch) + expert_params(arch, arch.moe.map_or(0.0, |m| m.active as f64))
}

/// The projections of every layer and the LM head.
fn dense_params(arch: &Arch) -> f64 {
    let projections: u64 = arch
        .projections()
        .iter()
        .map(|p| p.fan_in * p.fan_out)
        .sum();
    (projections * arch.layers + arch.vocab * arch.hidden) as f64
}

/// `experts` experts' gate, up and down projections over every layer.
fn expert_params(arch: &Arch, experts: f64) -> f64 {
    arch.moe.map_or(0.0, |m| {
        experts * (3 * arch.hidden * m.expert_intermediate * arch.layers) as f64
    })
}

/// Experts a step over `tokens` tokens touches in a layer, each token routed to `active` of
/// `experts` at random: `experts x (1 - (1 - active/experts)^tokens)`.
fn experts_touched(arch: &Arch, tokens: f64) -> f64 {
    arch.moe.map_or(0.0, |m| {
        let e = m.experts.max(1) as f64;
        e * (1.0 - (1.0 - m.active as f64 / e).powf(tokens.max(1.0)))
    })
}

/// Seconds of a forward's FLOPs over `tokens` tokens in sequences of `len` on `gpus` cards: 2
/// per matmul parameter at the GEMM efficiency, and the attention's scores and weighted sum at
/// FlashAttention's (`kernels::attention`).
fn forward_compute(arch: &Arch, m: &Machine, tokens: f64, len: f64, gpus: f64) -> f64 {
    let attention = kernels::attention_flops(arch, tokens, len);
    m.compute(2.0 * active_params(arch) * tokens, gpus) + kernels::attention(m, attention) / gpus
}

/// Bytes one use of the decoder's weights moves, stored as `quant`, when `experts` experts of
/// each layer are read.
fn weight_traffic(arch: &Arch, quant: Quant, experts: f64) -> f64 {
    let per_weight = match quant {
        Quant::Bf16 => 2.0,
        Quant::Fp32 => 4.0,
        Quant::Fp8 => 1.0,
        Quant::Int8 => INT8_BYTES_MOVED,
        Quant::Nf4 => NF4_BYTES_MOVED,
    };
    // the LM head stays 16-bit in every format; bitsandbytes leaves experts' 3-D tensors 16-bit
    let head = (arch.vocab * arch.hidden) as f64;
    let expert_bytes = if quant == Quant::Fp8 { 1.0 } else { 2.0 };
    (dense_params(arch) - head) * per_weight
        + head * 2.0
        + expert_params(arch, experts) * expert_bytes
}

/// Eager operators transformers' MoE blocks add to passes over `tokens` tokens, on the path
/// `experts::pass_path` gives (training mode, TRL's scoring too): a training forward, its
/// backward, and a no-grad scoring forward (`experts::pass_ops`).
fn expert_ops(run: &RunConfig, tokens: f64) -> (f64, f64, f64) {
    super::experts::pass_ops(run, experts_touched(&run.arch, tokens))
}

/// Micro-steps between generations: trl 1.15.0 `_prepare_inputs` (`generate_every =
/// steps_per_generation * num_iterations`; 0.18.2 the same; 0.16.1 and 0.17.0 generate when
/// `global_step % num_iterations == 0`, every `num_iterations` optimizer steps, the same rate).
fn generate_every(run: &RunConfig) -> u64 {
    run.steps_per_generation()
        .saturating_mul(run.num_iterations.max(1))
}

/// Generation calls per optimizer step: one every `generate_every` micro-batches.
fn generations_per_step(run: &RunConfig) -> f64 {
    run.grad_accum as f64 / generate_every(run) as f64
}

/// Generation: vLLM's prefill and decode (continuous batching), or transformers' `generate`.
pub(super) fn generation(run: &RunConfig, est: &Estimate, m: &Machine, l: &Lengths) -> f64 {
    let arch = &run.arch;
    let rows = run.generation_rows() as f64;
    let kv_token = kv_bytes_per_token(arch, run.vllm_kv_fp8, (l.prompt + l.max) as u64) as f64;
    let per_call = match run.generation {
        Generation::Transformers => transformers_generate(run, m, l, rows, kv_token),
        Generation::ColocatedVllm { .. } | Generation::VllmServer => {
            // a server of `data_parallel_size` copies splits the sequences among them, each
            // copy reading its whole weights every decode step; `tensor_parallel_size` splits
            // each copy's weights and KV reads (vLLM's `--data-parallel-size` engines)
            let (seqs, gpus) = match run.generation {
                Generation::VllmServer => (
                    rows * run.processes() as f64
                        / run.vllm_server.data_parallel_size.max(1) as f64,
                    run.vllm_server.tensor_parallel_size.max(1) as f64,
                ),
                _ => (
                    rows * run.vllm_tensor_parallel as f64,
                    run.vllm_tensor_parallel as f64,
                ),
            };
            // Unsloth's vLLM serves the trainer's own (quantised) weights; TRL's loads 16-bit
            let quant = match run.stack {
                Stack::Unsloth => run.quant,
                Stack::Trl => Quant::Bf16,
            };
            let (max_seqs, full) = est.vllm.as_ref().map_or((seqs, seqs), |p| {
                (p.max_num_seqs as f64, p.run_length_sequences.floor())
            });
            let concurrency = seqs.min(max_seqs).min(full).max(1.0);
            let steps = l.longest(seqs).max((seqs * l.mean / concurrency).ceil());
            let kv = seqs * l.mean * (l.prompt + l.mean / 2.0) * kv_token;
            let touched = experts_touched(arch, concurrency);
            let reads = m.traffic(steps * weight_traffic(arch, quant, touched) + kv, gpus);
            let compute = forward_compute(arch, m, seqs * l.mean, l.prompt + l.mean / 2.0, gpus);
            let prefill = forward_compute(arch, m, seqs * l.prompt, l.prompt, gpus);
            // each decode step's host work, and vLLM's LoRA kernels where it serves the adapters
            let per_step = VLLM_STEP_SECONDS + super::vllm_lora::per_decode_step(run);
            reads.max(compute) + prefill + steps * per_step
        }
    };
    per_call * generations_per_step(run)
}

/// One call of transformers' `generate`: one padded batch until its longest completion ends,
/// every row's KV read each step (none where the trainer's mode drops the cache:
/// `generate_mode::drops_kv_cache`), and the weights of the experts its path reads
/// (`experts::path`): on the loop and `grouped_mm` paths the experts a step's rows hit, on the
/// dense path every expert, multiplied on every token too.
fn transformers_generate(run: &RunConfig, m: &Machine, l: &Lengths, rows: f64, kv: f64) -> f64 {
    let arch = &run.arch;
    let steps = l.longest(rows);
    let kv = if crate::run::generate_mode::drops_kv_cache(run) {
        0.0
    } else {
        rows * steps * (l.prompt + steps / 2.0) * kv
    };
    let hits = experts_touched(arch, rows);
    let (experts, extra) = match (arch.moe, super::experts::path(run)) {
        (Some(moe), Some(super::experts::Path::Dense)) => {
            let all = moe.experts as f64;
            (all, expert_params(arch, all - moe.active as f64))
        }
        _ => (hits, 0.0),
    };
    let weights = steps * weight_traffic(arch, run.quant, experts);
    let reads = m.traffic(weights + kv, 1.0);
    let compute = forward_compute(arch, m, rows * steps, l.prompt + steps / 2.0, 1.0)
        + m.compute(2.0 * extra * rows * steps, 1.0);
    let prefill = forward_compute(arch, m, rows * l.prompt, l.prompt, 1.0)
        + m.compute(2.0 * extra * rows * l.prompt, 1.0);
    reads.max(compute) + m.eager(steps * ops::decode_step(run, hits)) + prefill
}

/// Moving the trained weights into vLLM once an optimizer step, and vLLM's sleep and wake.
pub(super) fn weight_sync(run: &RunConfig, est: &Estimate, m: &Machine) -> f64 {
    let weights16 = (run.arch.parameters() * 2) as f64;
    let sync = match (run.generation, run.stack) {
        (Generation::Transformers, _) => 0.0,
        // Unsloth's vLLM shares the trainer's weights and takes the adapters as a LoRA request
        (Generation::ColocatedVllm { .. }, Stack::Unsloth) => 0.0,
        // TRL `_move_model_to_vllm`: PEFT's `merge_adapter`, each tensor through vLLM's
        // `load_weights`, `unmerge_adapter`: every weight read and written three times (once
        // when nothing is merged), one eager call per tensor
        (Generation::ColocatedVllm { .. }, Stack::Trl) => {
            let passes = if run.full_finetuning { 1.0 } else { 3.0 };
            let tensors = run.arch.parameter_tensors().count() as f64;
            m.traffic(2.0 * passes * weights16, 1.0) + m.eager(4.0 * tensors)
        }
        // the server: the same merge here, then NCCL's broadcast over the link to its GPUs
        (Generation::VllmServer, _) => {
            let merge = if run.full_finetuning { 0.0 } else { 4.0 };
            m.traffic(merge * weights16, 1.0) + weights16 / (m.gpu.link_gb_s * 1e9)
        }
    };
    // TRL's sleep mode (`llm.sleep(level=2)` after each generation, as memory/vllm.rs reads
    // it) discards vLLM's weights: waking writes their memory again before the sync fills it.
    // Unsloth's standby only frees the KV cache (its weights are the trainer's): no copy
    let sleep = if run.vllm_sleep && run.stack == Stack::Trl {
        let vllm_weights = est
            .vllm
            .as_ref()
            .map_or(weights16, |p| p.weights_bytes as f64);
        m.traffic(vllm_weights, 1.0)
    } else {
        0.0
    };
    (sync + sleep) * generations_per_step(run).min(1.0)
}

/// Micro-batch tokens, padded to the longest completion of the micro-batch as the trainer's
/// collation pads them, and the prompts and completions each to a multiple of
/// `pad_to_multiple_of` where the run sets one (trl 1.16.0 `_generate_and_score_completions`
/// pads `prompt_ids` left and `completion_ids` right with it: every pass runs on those tensors).
fn micro_batch_tokens(run: &RunConfig, l: &Lengths) -> (f64, f64) {
    let mb = run.running_micro_batch().max(1) as f64;
    let pad = |n: f64| match run.pad_to_multiple_of {
        Some(m) if m > 1 => run.padded(n.ceil() as u64) as f64,
        _ => n,
    };
    let len = pad(l.prompt) + pad(l.longest(mb));
    (mb * len, len)
}

/// What each pass over a micro-batch moves beside its kernels: the quantised weights'
/// dequantisation.
fn dequantisation(run: &RunConfig, m: &Machine, tokens: f64) -> f64 {
    if run.quant.is_quantised() {
        let experts = experts_touched(&run.arch, tokens);
        m.traffic(weight_traffic(&run.arch, run.quant, experts), 1.0)
    } else {
        0.0
    }
}

/// One no-grad forward over a micro-batch (`kernels::forward`), its dequantisation and its
/// operators' dispatch (`ops::scoring_pass`).
fn pass(run: &RunConfig, m: &Machine, tokens: f64, len: f64) -> f64 {
    let experts = experts_touched(&run.arch, tokens);
    kernels::forward(run, m, tokens, len, experts)
        + dequantisation(run, m, tokens)
        + m.eager(ops::scoring_pass(run) + expert_ops(run, tokens).2)
}

/// The no-grad passes over each generation batch (trl 1.15 `_generate_and_score_completions`):
/// old log-probs when vLLM generated or `gradient_accumulation_steps % generate_every != 0`,
/// reference log-probs when `beta != 0`; in micro-batches of `per_device_train_batch_size`,
/// `steps_per_generation` of them a generation.
pub(super) fn scoring(run: &RunConfig, m: &Machine, l: &Lengths) -> f64 {
    let old = run.generation.uses_vllm() || !run.grad_accum.is_multiple_of(generate_every(run));
    let (tokens, len) = micro_batch_tokens(run, l);
    let micro_batches = run.steps_per_generation() as f64 * generations_per_step(run);
    let policy = if old { pass(run, m, tokens, len) } else { 0.0 };
    let reference = if run.beta != 0.0 {
        pass(&reference_model(run), m, tokens, len)
    } else {
        0.0
    };
    micro_batches * (policy + reference)
}

/// The model the reference log-probs run. With adapters, the policy itself under PEFT's
/// `disable_adapter()` (trl 1.15.0 `_generate_and_score_completions`, `ref_model` None for a
/// PEFT model; Unsloth's compiled copy of it alike): `lora.Linear.forward` then takes the
/// base layer alone, so no adapter matmul, scaling, add or dropout runs. A full fine-tune's
/// reference is a frozen copy of the policy, the same pass.
fn reference_model(run: &RunConfig) -> RunConfig {
    if run.full_finetuning {
        return run.clone();
    }
    RunConfig {
        lora_targets: Vec::new(),
        lora_dropout: 0.0,
        ..run.clone()
    }
}

/// The reward models' forward over each generation batch: trl 1.15.0 `_calculate_rewards` runs
/// each `AutoModelForSequenceClassification` over the whole local generation batch at once,
/// its texts padded to the longest (`padding=True`), one model after another; Unsloth's path
/// takes no reward model ([`crate::memory::frozen::reward_forward_bytes`] alike). A reward
/// model is its base model with a `score` head of hidden x 1 in place of the LM head, loaded as
/// the policy is (`from_pretrained(reward_func, num_labels=1, **model_init_kwargs)`, its
/// quantisation included; [`crate::memory::frozen::reward_models_bytes`] alike) with no adapters:
/// the pass is a scoring pass of that model.
pub(super) fn reward_models(run: &RunConfig, m: &Machine, l: &Lengths) -> f64 {
    if run.stack != Stack::Trl {
        return 0.0;
    }
    let rows = run.generation_rows() as f64;
    let len = l.prompt + l.longest(rows);
    let per_generation: f64 = run
        .reward_models
        .iter()
        .map(|model| {
            let mut reward = run.clone();
            reward.arch = model.arch.clone();
            reward.arch.vocab = 1;
            reward.full_finetuning = true;
            pass(&reward, m, rows * len, len)
        })
        .sum();
    per_generation * generations_per_step(run)
}

/// Forward, backward (input gradients only for frozen weights: half a full backward),
/// checkpointing's recomputed forward, the optimizer step, and the gradients' exchange.
pub(super) fn training(run: &RunConfig, m: &Machine, l: &Lengths) -> f64 {
    let (tokens, len) = micro_batch_tokens(run, l);
    let recompute = match run.checkpointing {
        Checkpointing::Off => 0.0,
        Checkpointing::On | Checkpointing::UnslothOffload => 1.0,
    };
    // the forward (again for checkpointing's recompute) and the backward each dequantise the
    // quantised weights once (bitsandbytes `MatMul4Bit.backward` dequantises again for the
    // input's gradient); the operators counted for the three (`ops`), the expert loop's in each
    let experts = experts_touched(&run.arch, tokens);
    let passes = 2.0 + recompute;
    let (experts_forward, experts_backward, _) = expert_ops(run, tokens);
    let per_micro = kernels::forward(run, m, tokens, len, experts)
        + recompute * kernels::recompute(run, m, tokens, len, experts)
        + kernels::backward(run, m, tokens, len, experts)
        + passes * dequantisation(run, m, tokens)
        + m.eager(
            ops::training_micro_batch(run) + experts_forward * (1.0 + recompute) + experts_backward,
        );
    let trainable = trainable_parameters(run);
    // torch AdamW (`_multi_tensor_adamw`) reads the parameter, its gradient and both moments and
    // writes three of them: 28 bytes an fp32 parameter; bitsandbytes' 8-bit moments: 16
    let optimizer_bytes = match run.optimizer {
        Optimizer::AdamW | Optimizer::PagedAdamW => 28.0,
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => 16.0,
        Optimizer::Sgd => 12.0,
    };
    // offloaded, the host's cores step it (`offload`), its traffic over PCIe
    let optimizer = if super::offload::optimizer_on_host(run) {
        super::offload::host_optimizer(run, trainable)
    } else {
        m.traffic(trainable * optimizer_bytes, 1.0)
    };
    per_micro * run.grad_accum as f64
        + optimizer
        + exchange(run, m, trainable)
        + super::offload::pcie(run, m.gpu, trainable)
}

/// The gradients' ring all-reduce (DDP, ZeRO-1/2) once a step, or ZeRO-3 / FSDP gathering every
/// layer's weights for each forward, backward and recompute of each micro-batch.
fn exchange(run: &RunConfig, m: &Machine, trainable: f64) -> f64 {
    let n = run.processes() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let link = m.gpu.link_gb_s * 1e9;
    let ring = 2.0 * (n - 1.0) / n;
    let grad_bytes = if run.full_finetuning { 2.0 } else { 4.0 };
    let gathers = if run.spread.stage() >= 3 || run.spread.engine == Engine::Fsdp {
        let passes = 3.0 + (run.checkpointing != Checkpointing::Off) as u8 as f64;
        passes * run.grad_accum as f64 * (n - 1.0) / n * (run.arch.parameters() * 2) as f64 / link
    } else {
        0.0
    };
    ring * trainable * grad_bytes / link + gathers
}

/// Parameters the optimizer updates: every weight, or the adapters' `r x (in + out)` per
/// targeted projection.
pub(super) fn trainable_parameters(run: &RunConfig) -> f64 {
    if run.full_finetuning {
        return run.arch.parameters() as f64;
    }
    let mask = target_mask(&run.arch, &run.lora_targets);
    let per_layer: u64 = run
        .arch
        .projections()
        .iter()
        .zip(mask)
        .filter(|(_, t)| *t)
        .map(|(p, _)| run.lora_rank * (p.fan_in + p.fan_out))
        .sum();
    (per_layer * run.arch.layers) as f64
}

/// vLLM's decode alone: output tokens a second at `batch` running sequences whose context
/// averages `context` tokens, 16-bit weights and KV (the model's decode term, checked against
/// measured serving throughput).
pub(super) fn decode_tokens_per_second(arch: &Arch, m: &Machine, batch: f64, context: f64) -> f64 {
    let kv = kv_bytes_per_token(arch, false, context as u64) as f64 * batch * context;
    let weights = weight_traffic(arch, Quant::Bf16, experts_touched(arch, batch));
    batch / (m.traffic(weights + kv, 1.0) + VLLM_STEP_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    /// An H100 SXM timed with operators dispatched at `EAGER_OP_SECONDS` (`on`) and with none
    /// (`off`): the operators a phase dispatches are the difference of its two timings.
    struct Dispatch {
        gpu: crate::hardware::GpuSpeed,
        on: Efficiencies,
        off: Efficiencies,
    }

    impl Dispatch {
        fn h100() -> Dispatch {
            let at = |seconds: f64| Efficiencies {
                eager_op_seconds: seconds,
                ..Efficiencies::default()
            };
            Dispatch {
                gpu: crate::hardware::lookup("H100 SXM").unwrap().speed(),
                on: at(EAGER_OP_SECONDS),
                off: at(0.0),
            }
        }

        fn on(&self) -> Machine<'_> {
            Machine {
                gpu: &self.gpu,
                eff: &self.on,
            }
        }

        fn off(&self) -> Machine<'_> {
            Machine {
                gpu: &self.gpu,
                eff: &self.off,
            }
        }

        /// The operators `f`'s phase dispatches.
        fn ops(&self, f: impl Fn(&Machine) -> f64) -> f64 {
            (f(&self.on()) - f(&self.off())) / EAGER_OP_SECONDS
        }
    }

    /// The dispatch each phase charges is its counted operators (`ops`) at `eager_op_seconds`:
    /// a Qwen3-0.6B LoRA run's `generate` pays each decode step's 28 x (56 + 7 x 6) + 53
    /// operators, its reference pass (adapters disabled) 28 x 54 + 31, its training micro-batch the forward,
    /// frozen backward and recompute (`ops::tests`), not the hand count's 28 x (30 + 7 x 5).
    #[test]
    fn each_phase_charges_its_counted_operators() {
        use crate::memory::estimate::{GpuBudget, estimate};
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen3-0.6B").unwrap().arch);
        run.generation = Generation::Transformers;
        // a reference model, so that a scoring pass runs
        run.beta = 0.04;
        let est = estimate(
            &run,
            GpuBudget {
                capacity: 80 << 30,
                used_by_others: 0,
                context: None,
            },
        );
        let d = Dispatch::h100();
        let l = Lengths::of(&run, None);
        let eager = |f: &dyn Fn(&Machine) -> f64| d.ops(f);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        let decode = 28.0 * (56.0 + 7.0 * 6.0) + 53.0;
        let steps = l.longest(run.generation_rows() as f64) * generations_per_step(&run);
        let generated = eager(&|m| generation(&run, &est, m, &l));
        assert!(close(generated, steps * decode), "{generated}");
        let (tokens, _) = micro_batch_tokens(&run, &l);
        assert_eq!(expert_ops(&run, tokens), (0.0, 0.0, 0.0));
        let scored = eager(&|m| scoring(&run, m, &l));
        let passes = scored / (28.0 * 54.0 + 31.0);
        assert!(passes >= 1.0 && close(passes, passes.round()), "{passes}");
        let trained = eager(&|m| training(&run, m, &l));
        let micro = ops::training_micro_batch(&run);
        assert!(close(trained, run.grad_accum as f64 * micro), "{trained}");
    }

    /// PEFT's reference pass runs under `disable_adapter()`: the base layers alone, none of the
    /// adapters' kernels or operators; a full fine-tune's frozen copy runs the policy's pass.
    #[test]
    fn the_reference_pass_runs_no_adapter() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen3-0.6B").unwrap().arch);
        run.generation = Generation::Transformers;
        run.beta = 0.04;
        let gpu = crate::hardware::lookup("H100 SXM").unwrap().speed();
        let eff = Efficiencies::default();
        let m = Machine {
            gpu: &gpu,
            eff: &eff,
        };
        let l = Lengths::of(&run, None);
        let (tokens, len) = micro_batch_tokens(&run, &l);
        let micro_batches = run.steps_per_generation() as f64 * generations_per_step(&run);
        let base = RunConfig {
            lora_targets: Vec::new(),
            ..run.clone()
        };
        let (adapted, plain) = (pass(&run, &m, tokens, len), pass(&base, &m, tokens, len));
        assert!(adapted > plain, "{adapted} {plain}");
        let scored = scoring(&run, &m, &l);
        assert!(
            (scored - micro_batches * plain).abs() < 1e-12 * scored,
            "{scored}"
        );
        run.full_finetuning = true;
        let full = scoring(&run, &m, &l);
        let policy = pass(&run, &m, tokens, len);
        assert!(
            (full - micro_batches * policy).abs() < 1e-12 * full,
            "{full}"
        );
    }

    /// A MoE run's training and scoring passes charge their blocks on the training-mode path of
    /// their transformers: on 5.17 `grouped_mm`'s fixed 26 forward and 29 backward kernels a
    /// Qwen3-MoE layer, whatever the experts hit, not the loop's 12 and 20 a hit.
    #[test]
    fn a_moe_pass_charges_its_releases_experts_path() {
        use crate::contract::release::Release;
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen3-30B-A3B").unwrap().arch);
        run.generation = Generation::Transformers;
        run.stack = Stack::Trl;
        run.beta = 0.04;
        run.checkpointing = Checkpointing::On;
        run.versions.transformers = Release::new(5, 17, 0);
        let d = Dispatch::h100();
        let l = Lengths::of(&run, None);
        let eager = |f: &dyn Fn(&Machine) -> f64| d.ops(f);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        let layers = run.arch.layers as f64;
        let trained = eager(&|m| training(&run, m, &l));
        // forward, checkpointing's recompute and the backward
        let blocks = layers * (26.0 * 2.0 + 29.0);
        let micro = ops::training_micro_batch(&run) + blocks;
        assert!(close(trained, run.grad_accum as f64 * micro), "{trained}");
        let (tokens, len) = micro_batch_tokens(&run, &l);
        let scored = eager(&|m| pass(&run, m, tokens, len));
        assert!(
            close(scored, ops::scoring_pass(&run) + layers * 26.0),
            "{scored}"
        );
        // 4.56's loop: its hits' operators, more than grouped's fixed count
        run.versions.transformers = Release::new(4, 56, 2);
        let looped = eager(&|m| training(&run, m, &l));
        let hits = experts_touched(&run.arch, tokens);
        let per_micro = layers * ((11.0 + 12.0 * hits) * 2.0 + 6.0 + 20.0 * hits);
        let expected = run.grad_accum as f64 * (ops::training_micro_batch(&run) + per_micro);
        assert!(close(looped, expected), "{looped}");
    }

    /// PEFT's reference pass runs under `disable_adapter()`: no dropout in it; the policy's
    /// old log-probs (vLLM generated) run the adapters' dropout in training mode.
    #[test]
    fn only_the_policy_s_scoring_pass_runs_the_adapters_dropout() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen3-0.6B").unwrap().arch);
        run.generation = Generation::Transformers;
        run.beta = 0.04;
        let gpu = crate::hardware::lookup("H100 SXM").unwrap().speed();
        let eff = Efficiencies::default();
        let m = Machine {
            gpu: &gpu,
            eff: &eff,
        };
        let l = Lengths::of(&run, None);
        let dropped = |r: &RunConfig| RunConfig {
            lora_dropout: 0.05,
            ..r.clone()
        };
        assert_eq!(scoring(&dropped(&run), &m, &l), scoring(&run, &m, &l));
        run.generation = Generation::VllmServer;
        let (on, off) = (scoring(&dropped(&run), &m, &l), scoring(&run, &m, &l));
        let (tokens, len) = micro_batch_tokens(&run, &l);
        let micro_batches = run.steps_per_generation() as f64 * generations_per_step(&run);
        let one = pass(&dropped(&run), &m, tokens, len) - pass(&run, &m, tokens, len);
        assert!(one > 0.0);
        assert!(
            (on - off - micro_batches * one).abs() < 1e-9 * on,
            "{on} {off}"
        );
    }

    /// gpt-oss-20b generating with transformers 4.56.2 on an H100: TRL's training-mode `generate`
    /// loops over the experts its rows hit, reading only theirs and dispatching each hit's 22
    /// operators in every layer; Unsloth's eval-mode decode reads every expert and multiplies it
    /// on every token, in one compiled launch a layer; transformers 5's `grouped_mm` reads the
    /// hit experts with a fixed count of operators.
    #[test]
    fn generate_reads_and_dispatches_the_experts_its_path_runs() {
        use crate::contract::release::Release;
        use crate::memory::estimate::{GpuBudget, estimate};
        let mut trl = RunConfig::example(catalog::find("openai/gpt-oss-20b").unwrap().arch);
        trl.generation = Generation::Transformers;
        trl.quant = Quant::Bf16;
        trl.versions.transformers = Release::new(4, 56, 2);
        let mut unsloth = trl.clone();
        unsloth.stack = Stack::Unsloth;
        let mut grouped = trl.clone();
        grouped.versions.transformers = Release::new(5, 17, 0);
        let d = Dispatch::h100();
        let (m, m0) = (d.on(), d.off());
        let l = Lengths::of(&trl, None);
        let budget = GpuBudget {
            capacity: 80 << 30,
            used_by_others: 0,
            context: None,
        };
        let at = |run: &RunConfig, m: &Machine| generation(run, &estimate(run, budget), m, &l);
        let rows = trl.generation_rows() as f64;
        let steps = l.longest(rows) * generations_per_step(&trl);
        let arch = &trl.arch;
        let moe = arch.moe.unwrap();
        let hits = experts_touched(arch, rows);
        assert!(hits > 1.0 && hits < moe.experts as f64, "{hits}");
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        // the GPU: the loop and grouped_mm read the hit experts, the dense path all of them
        let all = moe.experts as f64;
        let gap = m0.traffic(
            steps
                * (weight_traffic(arch, Quant::Bf16, all)
                    - weight_traffic(arch, Quant::Bf16, hits)),
            1.0,
        );
        let (loop_gpu, dense_gpu) = (at(&trl, &m0), at(&unsloth, &m0));
        assert!(gap > 0.0 && loop_gpu < dense_gpu, "{loop_gpu} {dense_gpu}");
        assert!(
            dense_gpu - loop_gpu >= gap * (1.0 - 1e-9),
            "{dense_gpu} - {loop_gpu} < {gap}"
        );
        assert!(close(at(&grouped, &m0), loop_gpu));
        // the host: each step's operators on its path
        let eager = |run: &RunConfig| (at(run, &m) - at(run, &m0)) / EAGER_OP_SECONDS;
        let adapters = 6.0
            * target_mask(arch, &trl.lora_targets)
                .iter()
                .filter(|t| **t)
                .count() as f64;
        let layers = arch.layers as f64;
        let looped = layers * (48.0 + 11.0 + 22.0 * hits + adapters) + 85.0;
        assert!(close(eager(&trl), steps * looped), "{}", eager(&trl));
        let dense = layers * (48.0 + 1.0 + adapters) + 85.0;
        assert!(close(eager(&unsloth), steps * dense), "{}", eager(&unsloth));
        let grouped_ops = layers * (48.0 + 33.0 + adapters) + 82.0;
        assert!(
            close(eager(&grouped), steps * grouped_ops),
            "{}",
            eager(&grouped)
        );
    }

    /// TRL 0.21 on transformers 4.54 with checkpointing generates without its KV cache: the same
    /// generation less exactly its KV reads; TRL 0.22 reads them.
    #[test]
    fn generate_without_its_cache_reads_no_kv() {
        use crate::contract::release::Release;
        use crate::memory::estimate::{GpuBudget, estimate};
        let mut cached = RunConfig::example(catalog::find("Qwen/Qwen3-8B").unwrap().arch);
        cached.generation = Generation::Transformers;
        cached.checkpointing = Checkpointing::On;
        cached.versions.trl = Release::new(0, 22, 2);
        cached.versions.transformers = Release::new(4, 54, 1);
        let mut dropped = cached.clone();
        dropped.versions.trl = Release::new(0, 21, 0);
        let gpu = crate::hardware::lookup("H100 SXM").unwrap().speed();
        let eff = Efficiencies::default();
        let m = Machine {
            gpu: &gpu,
            eff: &eff,
        };
        let l = Lengths::of(&cached, None);
        let budget = GpuBudget {
            capacity: 80 << 30,
            used_by_others: 0,
            context: None,
        };
        let at = |run: &RunConfig| generation(run, &estimate(run, budget), &m, &l);
        let rows = cached.generation_rows() as f64;
        let steps = l.longest(rows);
        let kv_token = kv_bytes_per_token(&cached.arch, false, (l.prompt + l.max) as u64) as f64;
        let kv = m.traffic(rows * steps * (l.prompt + steps / 2.0) * kv_token, 1.0);
        let gap = at(&cached) - at(&dropped);
        let expected = kv * generations_per_step(&cached);
        assert!(
            kv > 0.0 && (gap - expected).abs() <= 1e-9 * expected,
            "{gap} {expected}"
        );
    }

    #[test]
    fn the_harmonic_number_is_exact_within_its_bound_and_instant_at_any_size() {
        for n in [1u64, 2, 7, 16, 17, 100, 1000, 123_457] {
            let summed: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
            let bound = 1.0 / (120.0 * (n as f64).powi(4)) + 1e-12;
            let got = harmonic(n as f64);
            assert!(
                (got - summed).abs() <= bound,
                "H({n}) = {got}, summed {summed}"
            );
        }
        // 2^24 and 2^60 completions: a sum would take seconds and years; H grows as ln n
        let big = harmonic((1u64 << 60) as f64);
        assert!(
            (big - (60.0 * 2f64.ln() + EULER_GAMMA)).abs() < 1e-12,
            "{big}"
        );
        assert!(harmonic(f64::MAX).is_finite());
    }

    /// `DECODE_BANDWIDTH` and `VLLM_STEP_SECONDS` are the least-squares line through ML.ENERGY's
    /// five Qwen3-8B points on one H100 (median inter-token latency against the bytes a step
    /// reads), recomputed here from the model's own byte counts.
    #[test]
    fn the_decode_constants_are_the_ml_energy_line() {
        let arch = catalog::find("Qwen/Qwen3-8B").unwrap().arch;
        // (running sequences, mean output tokens, median ITL in ms)
        let points = [
            (8.0, 7854.2, 9.7),
            (16.0, 7861.3, 11.91),
            (32.0, 8170.4, 16.87),
            (63.3, 8366.6, 26.64),
            (82.0, 8052.4, 27.88),
        ];
        let weights = weight_traffic(&arch, Quant::Bf16, 0.0);
        let xy: Vec<(f64, f64)> = points
            .iter()
            .map(|&(batch, out, itl)| {
                let context = (out / 2.0_f64).floor();
                let kv = kv_bytes_per_token(&arch, false, context as u64) as f64;
                (weights + batch * context * kv, itl * 1e-3)
            })
            .collect();
        let n = xy.len() as f64;
        let (mx, my) = (
            xy.iter().map(|p| p.0).sum::<f64>() / n,
            xy.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxy: f64 = xy.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        let sxx: f64 = xy.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        let seconds_a_byte = sxy / sxx;
        let fraction = 1.0 / (seconds_a_byte * 3350e9);
        let intercept = my - seconds_a_byte * mx;
        assert!((fraction - DECODE_BANDWIDTH).abs() < 0.005, "{fraction}");
        assert!(
            (intercept - VLLM_STEP_SECONDS).abs() < 0.1e-3,
            "{intercept}"
        );
    }
}
