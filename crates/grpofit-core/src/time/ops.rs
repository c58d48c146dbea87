//! The eager operators a pass dispatches, each costing the host `eager_op_seconds`, counted from
//! the trainers' own code by `tools/trace/ops.py` and recorded in `calibration/ops/ops.json`
//! (`tests::the_counts_are_the_record` holds this table to it): TRL 0.23's
//! `_get_per_token_logps_and_entropies` and its backward, transformers 4.56.1's decoder layers
//! and `generate`, PEFT 0.17.1's LoRA layers, torch 2.9.1, under bf16 autocast as accelerate
//! runs them. Only the operators that launch a kernel are charged (`EAGER_OP_SECONDS` is a
//! kernel launch through the eager dispatcher): views and allocations (`view`, `transpose`,
//! `slice`, `empty`) launch none, their host time is not measured, and they are recorded beside
//! them, not charged.

use crate::arch::Family;
use crate::memory::estimate::target_mask;
use crate::memory::step::dropout::{AdapterDropout, input_norm_readers};
use crate::run::{Checkpointing, RunConfig};

/// Operators of one pass: `per_layer` a decoder layer (its adapters aside), and the fixed part
/// outside the layers (the embedding, the final norm, the LM head, TRL's log-prob and entropy
/// code over a micro-batch of two sequences; a decode step's logits processors, sampling,
/// stopping criteria), fully fine-tuned and with LoRA (PEFT's wrapper; at `all-linear`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Count {
    pub per_layer: f64,
    pub full: f64,
    pub lora: f64,
}

/// One family's counts, each pass's kernels (`ops.json` `full` / `lora_all_linear`
/// `per_layer` and `fixed`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ops {
    /// a no-grad forward and TRL's log-probs (`score`)
    pub score: Count,
    /// the training forward (`train_forward`)
    pub forward: Count,
    /// autograd's backward, `per_layer` with every weight trained (`backward`)
    pub backward: Count,
    /// a LoRA layer's backward with its base frozen, its adapters aside (`lora_frozen_layer`)
    pub frozen_backward: f64,
    /// checkpointing's recompute inside the backward (`recompute`: transformers' reentrant
    /// default, the backward's excess with checkpointing on)
    pub recompute: Count,
    /// one step of `generate` with its KV cache (`decode_step`)
    pub decode: Count,
}

/// Operators PEFT's `lora.Linear.forward` and its backward add to each adapted projection
/// (`ops.json` `lora_per_adapter`, the same in every family): the adapter weights' autocast
/// copies, `lora_A`, `lora_B`, the scaling and the add; its backward's two weight gradients,
/// the input gradient, their casts and accumulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Adapter {
    pub forward: f64,
    pub backward: f64,
    pub recompute: f64,
    pub decode: f64,
}

pub(super) const ADAPTER: Adapter = Adapter {
    forward: 8.0,
    backward: 10.0,
    recompute: 8.0,
    decode: 6.0,
};

/// Kernels PEFT's adapter dropout (`RunConfig::lora_dropout`) adds to each adapter (`ops.json`
/// `lora_dropout_per_adapter`, every family's): `native_dropout` in each forward the adapters
/// run in training mode (the training forward, checkpointing's recompute, and TRL's no-grad
/// scoring, which runs with the model in training mode: `Trainer.training_step` calls
/// `model.train()` before `_prepare_inputs`), `native_dropout_backward` in the backward, but
/// not for the first layer's q, k and v without checkpointing (their input needs no gradient:
/// `memory::step::dropout::input_norm_readers`; the record's `backward`, 18 of 21 at three
/// Llama layers). TRL's training-mode `generate` runs `forward` in each decode step too
/// (`decode_step`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Dropout {
    pub forward: f64,
    pub backward: f64,
    pub recompute: f64,
}

pub(super) const DROPOUT: Dropout = Dropout {
    forward: 1.0,
    backward: 1.0,
    recompute: 1.0,
};

/// Kernels a dense layer's SiLU-gated MLP (`gate_proj`, `up_proj`, `down_proj`) dispatches in a
/// pass, inside the family's `per_layer` counts below. A MoE layer runs its MoE block in the
/// MLP's place, and the block's kernels are `experts::pass_ops`' (`moe_pass-*.json`, counted
/// inside the block's own forward and backward hooks), so a MoE run's layers are charged without
/// these ([`layer`]).
/// - `forward`: the three matmuls, `silu` and the gate's `mul`: `ops.json`'s `decode_step`
///   `per_layer` less `moe_decode`'s `outside_blocks` (Llama 40 against Mixtral's 35, Qwen3 56
///   against Qwen3-MoE's 51; `tests::a_moe_layer_is_charged_no_dense_mlp` holds them); the same
///   operators in a scoring forward, a training forward and checkpointing's recompute;
/// - `backward`: each projection's input and weight gradients, the two `mul`s of the gate's
///   backward, `silu_backward`, and the add of the gate's and up's input gradients;
/// - `frozen_backward`: the same with the frozen base's input gradients alone (one matmul a
///   projection fewer: the 3 of `ops.json`'s full-against-frozen backward, Llama 71 - 60 = 11,
///   whose other 8 are attention's four projections and the two norms' weights).
///
/// Both backward counts were read with `tools/trace/ops_moe.py`'s `instrument_passes` hooks on
/// the dense `layer.mlp` of ops.py's two-layer Llama and Qwen3 (bf16 autocast, 16 tokens), the
/// same in transformers 4.56.1 and 5.17.0 (torch 2.9.1): 5 forward, 10 backward, 7 with the MLP's
/// weights frozen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DenseMlp {
    pub forward: f64,
    pub backward: f64,
    pub frozen_backward: f64,
}

pub(super) const DENSE_MLP: DenseMlp = DenseMlp {
    forward: 5.0,
    backward: 10.0,
    frozen_backward: 7.0,
};

/// `c`'s layer as the run's layers run it: without the dense MLP's `mlp` kernels where a MoE
/// block stands in its place (its kernels are `experts::pass_ops`').
fn layer(run: &RunConfig, c: Count, mlp: f64) -> Count {
    if run.arch.moe.is_none() {
        return c;
    }
    Count {
        per_layer: c.per_layer - mlp,
        ..c
    }
}

const fn count(per_layer: f64, full: f64, lora: f64) -> Count {
    Count {
        per_layer,
        full,
        lora,
    }
}

/// Llama and Mistral (their counts are equal): two RMSNorms, rotary, SDPA, SiLU-gated MLP.
const LLAMA: Ops = Ops {
    score: count(38.0, 32.0, 31.0),
    forward: count(38.0, 41.0, 40.0),
    backward: count(71.0, 33.0, -3.0),
    frozen_backward: 60.0,
    recompute: count(38.0, 0.0, 32.0),
    decode: count(40.0, 53.0, 53.0),
};

/// Qwen2: Llama's, and the q/k/v biases' gradients when fully fine-tuned.
const QWEN2: Ops = Ops {
    backward: count(74.0, 33.0, -3.0),
    ..LLAMA
};

/// Qwen3: Llama's, and the RMSNorm on each query and key head.
const QWEN3: Ops = Ops {
    score: count(54.0, 32.0, 31.0),
    forward: count(54.0, 41.0, 40.0),
    backward: count(103.0, 33.0, -3.0),
    frozen_backward: 88.0,
    recompute: count(54.0, 0.0, 32.0),
    decode: count(56.0, 53.0, 53.0),
};

/// Gemma 3: four norms a layer, the query and key norms, the scaled embedding; a sliding-window
/// layer (five of each six).
const GEMMA3: Ops = Ops {
    score: count(87.0, 60.0, 59.0),
    forward: count(87.0, 69.0, 68.0),
    backward: count(144.0, 35.0, -3.0),
    frozen_backward: 119.0,
    recompute: count(87.0, 0.0, 32.0),
    decode: count(89.0, 101.0, 101.0),
};

/// Gemma 2: four norms a layer, the scaled embedding and the logits' soft-capping; its layers
/// alternate sliding-window and global attention, and at two and three layers the difference is
/// a sliding one (the global layer's few extra operators go to the fixed part).
const GEMMA2: Ops = Ops {
    score: count(67.0, 48.0, 47.0),
    forward: count(67.0, 57.0, 56.0),
    backward: count(110.0, 35.0, -3.0),
    frozen_backward: 91.0,
    recompute: count(67.0, -5.0, 28.0),
    decode: count(69.0, 79.0, 79.0),
};

/// Phi-3: Llama's layer with the fused `qkv_proj` and `gate_up_proj` (split in the forward).
const PHI3: Ops = Ops {
    backward: count(72.0, 33.0, 9.0),
    frozen_backward: 64.0,
    recompute: count(38.0, 0.0, 20.0),
    decode: count(39.0, 53.0, 53.0),
    ..LLAMA
};

/// The family's counts. gpt-oss's dense part is not counted apart for the passes (its tiny model
/// runs eager attention, 4.56 having no SDPA path for its sinks) and is taken as Llama's; its
/// experts' blocks in a pass and in a decode step are `experts`'.
pub(super) fn ops(family: Family) -> &'static Ops {
    match family {
        Family::Llama | Family::GptOss => &LLAMA,
        Family::Qwen2 => &QWEN2,
        Family::Qwen3 => &QWEN3,
        Family::Gemma2 => &GEMMA2,
        Family::Gemma3 => &GEMMA3,
        Family::Phi3 => &PHI3,
    }
}

/// Projections PEFT adapts in each layer.
fn adapters(run: &RunConfig) -> f64 {
    if run.full_finetuning {
        return 0.0;
    }
    target_mask(&run.arch, &run.lora_targets)
        .iter()
        .filter(|t| **t)
        .count() as f64
}

/// `c` over the run's layers, its adapters adding `adapter` each, and the fixed part.
fn total(run: &RunConfig, c: Count, adapter: f64) -> f64 {
    let fixed = if run.full_finetuning { c.full } else { c.lora };
    run.arch.layers as f64 * (c.per_layer + adapters(run) * adapter) + fixed
}

/// The adapters that drop their inputs in each layer ([`DROPOUT`]): none without dropout.
fn dropped(run: &RunConfig) -> f64 {
    if AdapterDropout::of(run) == AdapterDropout::Off {
        return 0.0;
    }
    adapters(run)
}

/// Operators of one no-grad scoring pass, the adapters' dropout among them (the policy scores
/// in training mode).
pub(super) fn scoring_pass(run: &RunConfig) -> f64 {
    let score = layer(run, ops(run.arch.family).score, DENSE_MLP.forward);
    total(run, score, ADAPTER.forward) + run.arch.layers as f64 * dropped(run) * DROPOUT.forward
}

/// The adapters' dropout in a training micro-batch ([`DROPOUT`]).
fn training_dropout(run: &RunConfig) -> f64 {
    let n = dropped(run);
    if n == 0.0 {
        return 0.0;
    }
    let layers = run.arch.layers as f64;
    let (forward, backward) = (layers * n * DROPOUT.forward, layers * n * DROPOUT.backward);
    match run.checkpointing {
        Checkpointing::Off => {
            let targets = target_mask(&run.arch, &run.lora_targets);
            let skipped = input_norm_readers(&run.arch, &targets).0 as f64;
            forward + backward - skipped * DROPOUT.backward
        }
        Checkpointing::On | Checkpointing::UnslothOffload => {
            forward + backward + layers * n * DROPOUT.recompute
        }
    }
}

/// Operators of a training micro-batch: the forward, the backward (every weight's gradients, or
/// a frozen base's input gradients and the adapters'), and checkpointing's recompute.
pub(super) fn training_micro_batch(run: &RunConfig) -> f64 {
    let o = ops(run.arch.family);
    let backward = if run.full_finetuning {
        total(run, layer(run, o.backward, DENSE_MLP.backward), 0.0)
    } else {
        let frozen = Count {
            per_layer: o.frozen_backward,
            ..o.backward
        };
        let frozen = layer(run, frozen, DENSE_MLP.frozen_backward);
        total(run, frozen, ADAPTER.backward)
    };
    let recompute = match run.checkpointing {
        Checkpointing::Off => 0.0,
        Checkpointing::On | Checkpointing::UnslothOffload => total(
            run,
            layer(run, o.recompute, DENSE_MLP.forward),
            ADAPTER.recompute,
        ),
    };
    let forward = layer(run, o.forward, DENSE_MLP.forward);
    total(run, forward, ADAPTER.forward) + backward + recompute + training_dropout(run)
}

/// Operators of one decode step of transformers' `generate`; a mixture of experts' on its path
/// through them when each layer's tokens hit `hits` experts (`experts::decode_step`). In
/// training mode (TRL's, `generate_mode::training`) each adapter also runs its dropout, one
/// kernel a step (`ops.json` `decode_step_training_dropout`); Unsloth's eval-mode decode none.
pub(super) fn decode_step(run: &RunConfig, hits: f64) -> f64 {
    let layers = match super::experts::path(run) {
        Some(path) => {
            super::experts::decode_step(&run.arch, path, hits, adapters(run) * ADAPTER.decode)
        }
        None => total(run, ops(run.arch.family).decode, ADAPTER.decode),
    };
    let dropout = if crate::run::generate_mode::training(run) {
        run.arch.layers as f64 * dropped(run) * DROPOUT.forward
    } else {
        0.0
    };
    layers + dropout
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn run(name: &str, full: bool) -> RunConfig {
        let mut run = RunConfig::example(catalog::find(name).unwrap().arch);
        run.full_finetuning = full;
        run
    }

    /// The table above is `calibration/ops/ops.json`'s kernel counts, as traced.
    #[test]
    fn the_counts_are_the_record() {
        let record: serde_json::Value =
            serde_json::from_str(include_str!("../../../../calibration/ops/ops.json")).unwrap();
        let families = [
            ("llama", Family::Llama),
            ("mistral", Family::Llama),
            ("qwen2", Family::Qwen2),
            ("qwen3", Family::Qwen3),
            ("gemma2", Family::Gemma2),
            ("gemma3", Family::Gemma3),
            ("phi3", Family::Phi3),
        ];
        for (name, family) in families {
            let f = &record["families"][name];
            let kernels = |v: &serde_json::Value| v["kernel"].as_f64().unwrap();
            let o = ops(family);
            let pairs = [
                (o.score, "score"),
                (o.forward, "train_forward"),
                (o.backward, "backward"),
                (o.recompute, "recompute"),
                (o.decode, "decode_step"),
                // TRL generates in training mode: a dense layer dispatches the same operators
                (o.decode, "decode_step_training"),
            ];
            for (c, key) in pairs {
                let at = |set: &str, part: &str| kernels(&f[set][key][part]);
                assert_eq!(c.per_layer, at("full", "per_layer"), "{name} {key}");
                assert_eq!(c.full, at("full", "fixed"), "{name} {key} full");
                assert_eq!(c.lora, at("lora_all_linear", "fixed"), "{name} {key} lora");
                // a frozen base's layer runs the full layer's forward operators
                if key != "backward" {
                    assert_eq!(
                        c.per_layer,
                        kernels(&f["lora_frozen_layer"][key]),
                        "{name} {key}"
                    );
                }
            }
            assert_eq!(
                o.frozen_backward,
                kernels(&f["lora_frozen_layer"]["backward"])
            );
            let a = &f["lora_per_adapter"];
            let adapter = [
                (ADAPTER.forward, "train_forward"),
                (ADAPTER.forward, "score"),
                (ADAPTER.backward, "backward"),
                (ADAPTER.recompute, "recompute"),
                (ADAPTER.decode, "decode_step"),
                (ADAPTER.decode, "decode_step_training"),
            ];
            for (ours, key) in adapter {
                assert_eq!(ours, kernels(&a[key]), "{name} adapter {key}");
            }
            // the adapters' dropout, at three layers of every linear layer adapted
            let d = &f["lora_dropout_per_adapter"];
            let n = d["adapters"].as_f64().unwrap();
            assert_eq!(DROPOUT.forward, kernels(&d["train_forward"]), "{name}");
            assert_eq!(
                DROPOUT.forward,
                kernels(&d["score_training_mode"]),
                "{name}"
            );
            assert_eq!(
                DROPOUT.backward + DROPOUT.recompute,
                kernels(&d["backward_checkpointed"]),
                "{name}"
            );
            // the first layer's q, k and v (Phi-3's qkv_proj) without a dropout backward
            let readers = if family == Family::Phi3 { 1.0 } else { 3.0 };
            let plain = kernels(&d["backward"]) * n;
            assert!(
                (plain - (n - readers) * DROPOUT.backward).abs() < 1e-9,
                "{name}"
            );
            // with `lora_dropout`, TRL's training-mode decode runs each adapter's dropout: one
            // kernel more, `DROPOUT.forward` (`decode_step`)
            let dropout = kernels(&a["decode_step_training_dropout"]);
            assert_eq!(
                dropout,
                ADAPTER.decode + DROPOUT.forward,
                "{name} adapter dropout"
            );
            let frozen = kernels(&f["lora_frozen_layer"]["decode_step_training_dropout"]);
            assert_eq!(frozen, o.decode.per_layer, "{name} dropout's layer");
        }
    }

    /// `lora_dropout` > 0: one `native_dropout` per adapter in each forward the adapters run in
    /// training mode (the scoring pass among them), one backward kernel, one in the recompute.
    #[test]
    fn the_adapters_dropout_adds_a_kernel_a_pass() {
        let off = run("Qwen/Qwen3-0.6B", false);
        let on = RunConfig {
            lora_dropout: 0.05,
            ..off.clone()
        };
        assert_eq!(scoring_pass(&on) - scoring_pass(&off), 28.0 * 7.0);
        assert_eq!(
            training_micro_batch(&on) - training_micro_batch(&off),
            28.0 * 7.0 * 3.0
        );
        let plain = |r: &RunConfig| RunConfig {
            checkpointing: Checkpointing::Off,
            ..r.clone()
        };
        assert_eq!(
            training_micro_batch(&plain(&on)) - training_micro_batch(&plain(&off)),
            28.0 * 7.0 * 2.0 - 3.0
        );
        let full = run("Qwen/Qwen3-0.6B", true);
        let full_on = RunConfig {
            lora_dropout: 0.05,
            ..full.clone()
        };
        assert_eq!(training_micro_batch(&full_on), training_micro_batch(&full));
    }

    /// TRL's `generate` runs in training mode, so each adapter's dropout runs every decode
    /// step; Unsloth's eval-mode decode (`for_inference`) and a run without dropout run none.
    #[test]
    fn a_training_mode_decode_runs_each_adapters_dropout() {
        let mut trl = run("Qwen/Qwen3-0.6B", false);
        trl.stack = crate::run::Stack::Trl;
        let plain = decode_step(&trl, 0.0);
        trl.lora_dropout = 0.05;
        assert_eq!(decode_step(&trl, 0.0), plain + 28.0 * 7.0 * DROPOUT.forward);
        let mut unsloth = trl.clone();
        unsloth.stack = crate::run::Stack::Unsloth;
        assert_eq!(decode_step(&unsloth, 0.0), plain);
    }

    /// A LoRA Qwen3-0.6B (28 layers, 7 adapters each) and its fully fine-tuned twin: each pass
    /// counted layer by layer, the fixed part once.
    #[test]
    fn a_pass_counts_its_layers_adapters_and_fixed_part() {
        let lora = run("Qwen/Qwen3-0.6B", false);
        assert_eq!(lora.arch.layers, 28);
        assert_eq!(decode_step(&lora, 0.0), 28.0 * (56.0 + 7.0 * 6.0) + 53.0);
        assert_eq!(scoring_pass(&lora), 28.0 * (54.0 + 7.0 * 8.0) + 31.0);
        // forward, the frozen backward with the adapters', the recompute
        let train = 28.0 * (54.0 + 56.0) + 40.0 + 28.0 * (88.0 + 70.0) - 3.0 + 28.0 * 110.0 + 32.0;
        assert_eq!(training_micro_batch(&lora), train);
        let full = run("Qwen/Qwen3-0.6B", true);
        assert_eq!(decode_step(&full, 0.0), 28.0 * 56.0 + 53.0);
        let mut plain = full.clone();
        plain.checkpointing = Checkpointing::Off;
        assert_eq!(
            training_micro_batch(&full) - training_micro_batch(&plain),
            28.0 * 54.0
        );
        assert_eq!(
            training_micro_batch(&plain),
            28.0 * (54.0 + 103.0) + 41.0 + 33.0
        );
    }

    /// A MoE layer's MLP is its MoE block, whose kernels `experts::pass_ops` charges: the
    /// family's dense MLP is taken out of every pass's layer (forward, backward, recompute,
    /// scoring), once (the decode step's MoE layers are counted outside their blocks already,
    /// `experts::decode_step`). The forward's 5 are the records' dense layer less a MoE layer
    /// outside its block.
    #[test]
    fn a_moe_layer_is_charged_no_dense_mlp() {
        let record: serde_json::Value =
            serde_json::from_str(include_str!("../../../../calibration/ops/ops.json")).unwrap();
        for (dense, moe) in [("llama", "mixtral"), ("qwen3", "qwen3_moe")] {
            let layer = record["families"][dense]["full"]["decode_step"]["per_layer"]["kernel"]
                .as_f64()
                .unwrap();
            let outside = &record["moe_decode"]["families"][moe]["training"]["outside_blocks"];
            let outside = outside["per_layer"]["kernel"].as_f64().unwrap();
            assert_eq!(layer - outside, DENSE_MLP.forward, "{dense} against {moe}");
        }
        // a frozen projection loses its weight's gradient, one matmul each
        assert_eq!(DENSE_MLP.backward - DENSE_MLP.frozen_backward, 3.0);

        // attention's adapters alone: PEFT adapts a MoE layer's experts otherwise than a
        // dense MLP's projections (`target_mask`)
        let mut moe = run("Qwen/Qwen3-30B-A3B", false);
        moe.lora_targets = ["q_proj", "k_proj", "v_proj", "o_proj"]
            .map(String::from)
            .to_vec();
        assert!(moe.arch.moe.is_some());
        assert_eq!(moe.checkpointing, Checkpointing::On);
        let mut dense = moe.clone();
        dense.arch.moe = None;
        let layers = moe.arch.layers as f64;
        let mlp = DENSE_MLP;
        assert_eq!(
            scoring_pass(&dense) - scoring_pass(&moe),
            layers * mlp.forward
        );
        // forward, the frozen backward, the recompute
        assert_eq!(
            training_micro_batch(&dense) - training_micro_batch(&moe),
            layers * (mlp.forward + mlp.frozen_backward + mlp.forward)
        );
        let (mut full_moe, mut full_dense) = (moe.clone(), dense.clone());
        full_moe.full_finetuning = true;
        full_dense.full_finetuning = true;
        assert_eq!(
            training_micro_batch(&full_dense) - training_micro_batch(&full_moe),
            layers * (mlp.forward + mlp.backward + mlp.forward)
        );
    }
}
