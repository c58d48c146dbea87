//! Which path a mixture of experts takes in a decode step of transformers' `generate`, as each
//! trainer calls it, and the operators that step dispatches (`calibration/ops/ops.json`
//! `moe_decode`, `moe_decode-4.51.3.json` and `moe_decode-5.17.0.json`, counted by
//! `tools/trace/ops_moe.py`;
//! `tests::the_counts_are_the_records` holds the tables below to them).
//!
//! The mode `generate` runs in is its trainer's (`generate_mode`): TRL's training mode, Unsloth's
//! eval.
//!
//! The path each block then takes:
//! - transformers 4.x's Mixtral, Qwen2-MoE and Qwen3-MoE blocks loop over the experts hit in
//!   every mode (4.56.2 `Qwen3MoeSparseMoeBlock.forward`: `expert_hit = ....nonzero()`, then per
//!   expert `self.experts[expert_idx]` and `torch.where(expert_mask[expert_idx])`); gpt-oss's
//!   `GptOssExperts.forward` loops only `if self.training` (4.55.4; 4.56 and 4.57 add "or on
//!   CPU"), else runs every expert on every token with `bmm` ("for inference we can sacrifice
//!   some memory and compute the output for all experts at once");
//! - Unsloth's gpt-oss decode (unsloth_zoo 2025.10.4 `temporary_patches/gpt_oss.py`
//!   `patch_GptOssModel`: `not self.training and qlen == 1`) runs the block through
//!   `moe_forward_inference_bf16` (or `moe_forward_inference` for its 4-bit linearised experts),
//!   every expert on every token, compiled `fullgraph` with inductor's CUDA graphs;
//! - transformers 5 runs every family's experts through `grouped_mm` in either mode (its default
//!   `experts_implementation`, `PreTrainedModel.get_correct_experts_implementation`: read in
//!   5.5.4, 5.17.0 and 5.25.0; `integrations/moe.py` `grouped_mm_experts_forward`): the hit
//!   experts' weights, a fixed count of kernels, no host sync (newer unsloth_zoo, 2026.10.9,
//!   takes `grouped_mm` for gpt-oss as well).
//!
//! The loop's host syncs (a `nonzero` a block, then a `nonzero`, and an `.item()` (Qwen, Mixtral)
//! or six (gpt-oss) an expert hit; one `torch.where` an expert in the older loop) stop the host from running ahead of the GPU there. The decode step is charged
//! its GPU time plus its operators' host time with no overlap (`phases::generation`, as every
//! eager decode step), which is what a sync at every expert makes of it: the syncs add no term
//! of their own beyond their operators, counted among the kernels.

use crate::arch::{Arch, Family};
use crate::run::RunConfig;

/// The path a decode step's MoE blocks take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    /// transformers 4.x's loop over the experts the step's tokens hit: only their weights read,
    /// each hit dispatching the expert's operators and syncing the host
    Loop,
    /// the older loop over every expert (`for expert_idx in range(self.num_experts)`: Mixtral
    /// and Qwen2-MoE before transformers 4.52, Qwen3-MoE before 4.53; read in 4.46.3, 4.48.1 to
    /// 4.51.3, and 4.52.4 / 4.53.1 for the change): each expert's operators and `torch.where`
    /// sync every step, hit or not, the hit experts' weights read (an expert with no tokens
    /// multiplies empty tensors)
    LoopEvery,
    /// every expert on every token: all the experts' weights read and multiplied
    Dense,
    /// transformers 5's `grouped_mm`: the hit experts' weights, a fixed count of operators
    Grouped,
}

/// The path the run's `generate` takes through its experts, in its trainer's mode
/// (`generate_mode::training`); `None` without experts.
pub(super) fn path(run: &RunConfig) -> Option<Path> {
    path_in(run, crate::run::generate_mode::training(run))
}

/// The path a training micro-batch's forward and backward and a scoring pass take: in training
/// mode (`Trainer.training_step` runs `model.train()` before `_prepare_inputs`, so TRL's old and
/// reference log-probs in `_generate_and_score_completions` run in it too, under
/// `torch.no_grad()` only).
pub(super) fn pass_path(run: &RunConfig) -> Option<Path> {
    path_in(run, true)
}

fn path_in(run: &RunConfig, training: bool) -> Option<Path> {
    run.arch.moe?;
    if run.versions.transformers.line() >= (5, 0) {
        return Some(Path::Grouped);
    }
    let every_expert_before = match run.arch.family {
        Family::Qwen3 => (4, 53),
        _ => (4, 52),
    };
    Some(match run.arch.family {
        Family::GptOss if !training => Path::Dense,
        Family::GptOss => Path::Loop,
        _ if run.versions.transformers.line() < every_expert_before => Path::LoopEvery,
        _ => Path::Loop,
    })
}

/// A family's decode step through its MoE layers: a layer's kernels outside the MoE block
/// (`outside_blocks` `per_layer`), the step's outside the layers (`fixed`), and the block's own
/// kernels a call, `block + per_hit x` the experts hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Decode {
    pub outside: f64,
    pub fixed: f64,
    pub block: f64,
    pub per_hit: f64,
}

const fn decode(outside: f64, fixed: f64, block: f64, per_hit: f64) -> Decode {
    Decode {
        outside,
        fixed,
        block,
        per_hit,
    }
}

/// transformers 4.56.1, training mode (`ops.json` `moe_decode`): the loop of every family.
const LOOP_GPT_OSS: Decode = decode(48.0, 85.0, 11.0, 22.0);
const LOOP_QWEN3_MOE: Decode = decode(51.0, 53.0, 11.0, 12.0);
const LOOP_QWEN2_MOE: Decode = decode(37.0, 53.0, 20.0, 12.0);
const LOOP_MIXTRAL: Decode = decode(35.0, 53.0, 13.0, 12.0);

/// transformers 4.51.3 (`moe_decode-4.51.3.json`): the loop over every expert, `per_hit` a
/// visited expert's kernels (`per_expert`).
const EVERY_QWEN3_MOE: Decode = decode(53.0, 53.0, 8.0, 10.0);
const EVERY_QWEN2_MOE: Decode = decode(37.0, 53.0, 17.0, 10.0);
const EVERY_MIXTRAL: Decode = decode(37.0, 53.0, 10.0, 10.0);

/// transformers 5.17.0 (`moe_decode-5.17.0.json`): `grouped_mm`, whatever the hits.
const GROUPED_GPT_OSS: Decode = decode(48.0, 82.0, 33.0, 0.0);
const GROUPED_QWEN3_MOE: Decode = decode(51.0, 54.0, 26.0, 0.0);
const GROUPED_QWEN2_MOE: Decode = decode(35.0, 71.0, 35.0, 0.0);
const GROUPED_MIXTRAL: Decode = decode(35.0, 54.0, 28.0, 0.0);

/// Launches of Unsloth's compiled dense block a decode step: `moe_forward_inference_bf16` is
/// compiled `fullgraph` with `triton.cudagraphs` (unsloth_zoo 2025.10.4
/// `no_combo_fused_torch_compile_options`: `cudagraphs = True`), so each call replays one CUDA
/// graph, one launch, where transformers' own eager dense path dispatches 19 kernels
/// (`ops.json` `moe_decode` gpt_oss `eval`).
const UNSLOTH_COMPILED_BLOCK: f64 = 1.0;

/// The counted family whose blocks `arch`'s are: gpt-oss's, Qwen3-MoE's, Qwen2-MoE's (its shared
/// expert), else Mixtral's (a Llama layer with a routed MLP).
fn counts(arch: &Arch, path: Path) -> Decode {
    if path == Path::LoopEvery {
        return match arch.family {
            Family::Qwen3 => EVERY_QWEN3_MOE,
            Family::Qwen2 => EVERY_QWEN2_MOE,
            _ => EVERY_MIXTRAL,
        };
    }
    let grouped = path == Path::Grouped;
    match (arch.family, grouped) {
        (Family::GptOss, false) => LOOP_GPT_OSS,
        (Family::GptOss, true) => GROUPED_GPT_OSS,
        (Family::Qwen3, false) => LOOP_QWEN3_MOE,
        (Family::Qwen3, true) => GROUPED_QWEN3_MOE,
        (Family::Qwen2, false) => LOOP_QWEN2_MOE,
        (Family::Qwen2, true) => GROUPED_QWEN2_MOE,
        (_, false) => LOOP_MIXTRAL,
        (_, true) => GROUPED_MIXTRAL,
    }
}

/// Kernels of one decode step of a MoE model on `path` when each layer's tokens hit `hits`
/// experts, every layer's adapters adding `adapters` kernels.
pub(super) fn decode_step(arch: &Arch, path: Path, hits: f64, adapters: f64) -> f64 {
    let c = counts(arch, path);
    let every = arch.moe.map_or(0.0, |m| m.experts as f64);
    let block = match path {
        Path::Loop => c.block + c.per_hit * hits,
        Path::LoopEvery => c.block + c.per_hit * every,
        Path::Grouped => c.block,
        Path::Dense => UNSLOTH_COMPILED_BLOCK,
    };
    arch.layers as f64 * (c.outside + block + adapters) + c.fixed
}

/// A MoE block's kernels a call in a pass over a micro-batch: `fixed + per x` the experts its
/// path visits (hit on the loop, every one on the older loop, none counted on `grouped_mm`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Block {
    pub fixed: f64,
    pub per: f64,
}

/// A block's kernels in a training forward, its backward, and a no-grad scoring forward, all in
/// training mode (`calibration/ops/moe_pass-*.json`, `ops_moe.py --passes`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Pass {
    pub forward: Block,
    pub backward: Block,
    pub scoring: Block,
}

const fn b(x: [f64; 2]) -> Block {
    Block {
        fixed: x[0],
        per: x[1],
    }
}

const fn pass(forward: [f64; 2], backward: [f64; 2], scoring: [f64; 2]) -> Pass {
    Pass {
        forward: b(forward),
        backward: b(backward),
        scoring: b(scoring),
    }
}

/// transformers 4.56.1 (`moe_pass-4.56.1.json`): the loop over the experts hit, `per` a hit
/// (gpt-oss's and Qwen3-MoE's the same as `ops.json` `moe_training_loop` `per_expert`).
const PASS_LOOP_GPT_OSS: Pass = pass([11.0, 22.0], [2.0, 43.0], [11.0, 22.0]);
const PASS_LOOP_QWEN3_MOE: Pass = pass([11.0, 12.0], [6.0, 20.0], [11.0, 12.0]);
const PASS_LOOP_QWEN2_MOE: Pass = pass([20.0, 12.0], [24.0, 20.0], [20.0, 12.0]);
const PASS_LOOP_MIXTRAL: Pass = pass([14.0, 12.0], [13.0, 20.0], [13.0, 12.0]);

/// transformers 4.51.3 (`moe_pass-4.51.3.json`): the loop over every expert, `per` an expert
/// visited (its `torch.where` and operators on no tokens too).
const PASS_EVERY_QWEN3_MOE: Pass = pass([8.0, 10.0], [6.0, 20.0], [8.0, 10.0]);
const PASS_EVERY_QWEN2_MOE: Pass = pass([17.0, 10.0], [24.0, 20.0], [17.0, 10.0]);
const PASS_EVERY_MIXTRAL: Pass = pass([11.0, 10.0], [13.0, 20.0], [10.0, 10.0]);

/// transformers 5.17.0 (`moe_pass-5.17.0.json`): `grouped_mm`, a fixed count whatever the hits.
const PASS_GROUPED_GPT_OSS: Pass = pass([33.0, 0.0], [46.0, 0.0], [33.0, 0.0]);
const PASS_GROUPED_QWEN3_MOE: Pass = pass([26.0, 0.0], [29.0, 0.0], [26.0, 0.0]);
const PASS_GROUPED_QWEN2_MOE: Pass = pass([35.0, 0.0], [47.0, 0.0], [35.0, 0.0]);
const PASS_GROUPED_MIXTRAL: Pass = pass([29.0, 0.0], [37.0, 0.0], [28.0, 0.0]);

/// The counted family's pass on `path` (the dense path is decode's alone: every pass runs in
/// training mode, where gpt-oss loops; counted as the loop).
fn pass_counts(arch: &Arch, path: Path) -> Pass {
    match (path, arch.family) {
        (Path::LoopEvery, Family::Qwen3) => PASS_EVERY_QWEN3_MOE,
        (Path::LoopEvery, Family::Qwen2) => PASS_EVERY_QWEN2_MOE,
        (Path::LoopEvery, _) => PASS_EVERY_MIXTRAL,
        (Path::Grouped, Family::GptOss) => PASS_GROUPED_GPT_OSS,
        (Path::Grouped, Family::Qwen3) => PASS_GROUPED_QWEN3_MOE,
        (Path::Grouped, Family::Qwen2) => PASS_GROUPED_QWEN2_MOE,
        (Path::Grouped, _) => PASS_GROUPED_MIXTRAL,
        (_, Family::GptOss) => PASS_LOOP_GPT_OSS,
        (_, Family::Qwen3) => PASS_LOOP_QWEN3_MOE,
        (_, Family::Qwen2) => PASS_LOOP_QWEN2_MOE,
        _ => PASS_LOOP_MIXTRAL,
    }
}

/// Kernels the MoE blocks of a pass over a micro-batch add, its layers' tokens hitting `hits`
/// experts each: (training forward, its backward, scoring forward); zeros without experts.
pub(super) fn pass_ops(run: &RunConfig, hits: f64) -> (f64, f64, f64) {
    let (Some(moe), Some(path)) = (run.arch.moe, pass_path(run)) else {
        return (0.0, 0.0, 0.0);
    };
    let visited = match path {
        Path::LoopEvery => moe.experts as f64,
        Path::Grouped => 0.0,
        Path::Loop | Path::Dense => hits,
    };
    let c = pass_counts(&run.arch, path);
    let layers = run.arch.layers as f64;
    let at = |b: Block| layers * (b.fixed + b.per * visited);
    (at(c.forward), at(c.backward), at(c.scoring))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::contract::release::Release;
    use crate::run::Stack;

    fn moe_run(name: &str, stack: Stack, transformers: Release) -> RunConfig {
        let mut run = RunConfig::example(catalog::find(name).unwrap().arch);
        run.stack = stack;
        run.versions.transformers = transformers;
        run
    }

    /// The tables are the traced records: 4.56.1's loop (`ops.json` `moe_decode`, training mode,
    /// which for the Qwen and Mixtral blocks is eval's too) and 5.17.0's `grouped_mm`.
    #[test]
    fn the_counts_are_the_records() {
        let loop_record: serde_json::Value =
            serde_json::from_str(include_str!("../../../../calibration/ops/ops.json")).unwrap();
        let grouped_record: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../calibration/ops/moe_decode-5.17.0.json"
        ))
        .unwrap();
        let tables = [
            ("gpt_oss", LOOP_GPT_OSS, GROUPED_GPT_OSS),
            ("qwen3_moe", LOOP_QWEN3_MOE, GROUPED_QWEN3_MOE),
            ("qwen2_moe", LOOP_QWEN2_MOE, GROUPED_QWEN2_MOE),
            ("mixtral", LOOP_MIXTRAL, GROUPED_MIXTRAL),
        ];
        let read = |r: &serde_json::Value, family: &str, mode: &str| {
            let m = &r["families"][family][mode];
            let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
            decode(
                f(&m["outside_blocks"]["per_layer"]["kernel"]),
                f(&m["outside_blocks"]["fixed"]["kernel"]),
                f(&m["block"]["kernel"]["fixed"]),
                f(&m["block"]["kernel"]["per_hit"]),
            )
        };
        for (family, looped, grouped) in tables {
            assert_eq!(read(&loop_record["moe_decode"], family, "training"), looped);
            assert_eq!(read(&grouped_record, family, "training"), grouped);
            assert_eq!(read(&grouped_record, family, "eval"), grouped);
            if family != "gpt_oss" {
                assert_eq!(read(&loop_record["moe_decode"], family, "eval"), looped);
            }
        }
        let every_record: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../calibration/ops/moe_decode-4.51.3.json"
        ))
        .unwrap();
        let every = [
            ("qwen3_moe", EVERY_QWEN3_MOE),
            ("qwen2_moe", EVERY_QWEN2_MOE),
            ("mixtral", EVERY_MIXTRAL),
        ];
        for (family, table) in every {
            for mode in ["training", "eval"] {
                let m = &every_record["families"][family][mode];
                let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
                let block = &m["block"]["kernel"];
                assert_eq!(block["visits"], "every expert", "{family}");
                let read = decode(
                    f(&m["outside_blocks"]["per_layer"]["kernel"]),
                    f(&m["outside_blocks"]["fixed"]["kernel"]),
                    f(&block["fixed"]),
                    f(&block["per_expert"]),
                );
                assert_eq!(read, table, "{family} {mode}");
            }
        }
        // gpt-oss outside training: every expert with `bmm`, no expert loop and no sync
        let eval = &loop_record["moe_decode"]["families"]["gpt_oss"]["eval"]["block"];
        assert_eq!(eval["kernel"]["per_hit"].as_f64(), Some(0.0));
        assert_eq!(eval["sync"]["fixed"].as_f64(), Some(0.0));
        assert_eq!(eval["kernel"]["fixed"].as_f64(), Some(19.0));
    }

    /// TRL's training-mode `generate` loops over gpt-oss's hit experts; Unsloth's `for_inference`
    /// runs them all; Qwen3-MoE loops either way; transformers 5 groups them.
    #[test]
    fn the_path_follows_the_trainer_mode_family_and_transformers() {
        let old = Release::new(4, 56, 2);
        let new = Release::new(5, 17, 0);
        let oss = "openai/gpt-oss-20b";
        let qwen = "Qwen/Qwen3-30B-A3B";
        assert_eq!(path(&moe_run(oss, Stack::Trl, old)), Some(Path::Loop));
        assert_eq!(path(&moe_run(oss, Stack::Unsloth, old)), Some(Path::Dense));
        assert_eq!(path(&moe_run(qwen, Stack::Trl, old)), Some(Path::Loop));
        assert_eq!(path(&moe_run(qwen, Stack::Unsloth, old)), Some(Path::Loop));
        for stack in [Stack::Trl, Stack::Unsloth] {
            assert_eq!(path(&moe_run(oss, stack, new)), Some(Path::Grouped));
            assert_eq!(path(&moe_run(qwen, stack, new)), Some(Path::Grouped));
        }
        let dense = moe_run("Qwen/Qwen3-0.6B", Stack::Trl, old);
        assert_eq!(path(&dense), None);
        // the loop visited every expert before 4.53 (Qwen3-MoE) and 4.52 (Mixtral)
        let mixtral = "mistralai/Mixtral-8x7B-Instruct-v0.1";
        for (name, changed) in [(qwen, (4, 53)), (mixtral, (4, 52))] {
            let before = Release::new(changed.0, changed.1 - 1, 3);
            let after = Release::new(changed.0, changed.1, 0);
            assert_eq!(
                path(&moe_run(name, Stack::Trl, before)),
                Some(Path::LoopEvery)
            );
            assert_eq!(path(&moe_run(name, Stack::Trl, after)), Some(Path::Loop));
        }
    }

    /// The loop dispatches its expert's operators for each hit; grouped and dense do not.
    #[test]
    fn only_the_loop_charges_each_hit() {
        let arch = catalog::find("openai/gpt-oss-20b").unwrap().arch;
        let layers = arch.layers as f64;
        let at = |p: Path, hits: f64| decode_step(&arch, p, hits, 0.0);
        assert_eq!(at(Path::Loop, 4.0) - at(Path::Loop, 3.0), layers * 22.0);
        assert_eq!(
            at(Path::Loop, 4.0),
            layers * (48.0 + 11.0 + 4.0 * 22.0) + 85.0
        );
        assert_eq!(at(Path::Grouped, 4.0), at(Path::Grouped, 3.0));
        let mixtral = catalog::find("mistralai/Mixtral-8x7B-Instruct-v0.1")
            .unwrap()
            .arch;
        let every = |hits: f64| decode_step(&mixtral, Path::LoopEvery, hits, 0.0);
        assert_eq!(every(2.0), every(8.0));
        assert_eq!(every(2.0), 32.0 * (37.0 + 10.0 + 8.0 * 10.0) + 53.0);
        assert_eq!(at(Path::Dense, 4.0), layers * (48.0 + 1.0) + 85.0);
        // adapters add per layer
        assert_eq!(
            decode_step(&arch, Path::Dense, 4.0, 6.0) - at(Path::Dense, 4.0),
            6.0 * layers
        );
    }

    /// The pass tables are the traced records (`ops_moe.py --passes`), and 4.56.1's per hit is
    /// `ops.json` `moe_training_loop`'s per expert (every expert hit there).
    #[test]
    fn the_pass_counts_are_the_records() {
        let load = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        let records = [
            (
                load(include_str!(
                    "../../../../calibration/ops/moe_pass-4.56.1.json"
                )),
                Path::Loop,
                "per_hit",
            ),
            (
                load(include_str!(
                    "../../../../calibration/ops/moe_pass-4.51.3.json"
                )),
                Path::LoopEvery,
                "per_expert",
            ),
            (
                load(include_str!(
                    "../../../../calibration/ops/moe_pass-5.17.0.json"
                )),
                Path::Grouped,
                "per_hit",
            ),
        ];
        // the catalog has no Qwen2-MoE: Qwen3-MoE's arch as the Qwen2 family
        let families = [
            ("gpt_oss", "openai/gpt-oss-20b", Family::GptOss),
            ("qwen3_moe", "Qwen/Qwen3-30B-A3B", Family::Qwen3),
            ("qwen2_moe", "Qwen/Qwen3-30B-A3B", Family::Qwen2),
            (
                "mixtral",
                "mistralai/Mixtral-8x7B-Instruct-v0.1",
                Family::Llama,
            ),
        ];
        let arch_of = |model: &str, family: Family| Arch {
            family,
            ..catalog::find(model).unwrap().arch
        };
        let mut checked = 0;
        for (record, path, per) in &records {
            assert_eq!(record["mode"], "training");
            for (family, model, kind) in families {
                let f = &record["families"][family];
                if f.is_null() {
                    assert_eq!((*path, family), (Path::LoopEvery, "gpt_oss"));
                    continue;
                }
                let block = |v: &serde_json::Value| Block {
                    fixed: v["kernel"]["fixed"].as_f64().unwrap(),
                    per: v["kernel"][*per].as_f64().unwrap(),
                };
                let c = pass_counts(&arch_of(model, kind), *path);
                assert_eq!(c.forward, block(&f["training"]["forward"]), "{family}");
                assert_eq!(c.backward, block(&f["training"]["backward"]), "{family}");
                assert_eq!(c.scoring, block(&f["scoring"]["forward"]), "{family}");
                checked += 1;
            }
        }
        assert_eq!(checked, 11);
        let ops = load(include_str!("../../../../calibration/ops/ops.json"));
        for (family, model, kind) in [families[0], families[1]] {
            let e = &ops["moe_training_loop"][family]["per_expert"];
            let c = pass_counts(&arch_of(model, kind), Path::Loop);
            assert_eq!(Some(c.forward.per), e["forward"]["kernel"].as_f64());
            assert_eq!(Some(c.backward.per), e["backward"]["kernel"].as_f64());
        }
    }

    /// The passes run in training mode whatever the trainer generates in: Unsloth's gpt-oss loops
    /// there though its decode runs dense; transformers 5 groups; before 4.53 every expert.
    #[test]
    fn the_passes_take_the_training_mode_path_of_their_release() {
        let oss = "openai/gpt-oss-20b";
        let qwen = "Qwen/Qwen3-30B-A3B";
        let old = Release::new(4, 56, 2);
        let unsloth_oss = moe_run(oss, Stack::Unsloth, old);
        assert_eq!(path(&unsloth_oss), Some(Path::Dense));
        assert_eq!(pass_path(&unsloth_oss), Some(Path::Loop));
        for stack in [Stack::Trl, Stack::Unsloth] {
            let new = moe_run(qwen, stack, Release::new(5, 17, 0));
            assert_eq!(pass_path(&new), Some(Path::Grouped));
            let before = moe_run(qwen, stack, Release::new(4, 52, 4));
            assert_eq!(pass_path(&before), Some(Path::LoopEvery));
        }
        let dense = moe_run("Qwen/Qwen3-0.6B", Stack::Trl, old);
        assert_eq!(pass_path(&dense), None);
        assert_eq!(pass_ops(&dense, 4.0), (0.0, 0.0, 0.0));
    }

    /// Only the 4.53+ loop charges each hit: `grouped_mm` a fixed count, the older loop every
    /// expert whatever the hits.
    #[test]
    fn a_pass_charges_its_paths_blocks() {
        let qwen = "Qwen/Qwen3-30B-A3B";
        let layers = catalog::find(qwen).unwrap().arch.layers as f64;
        let experts = catalog::find(qwen).unwrap().arch.moe.unwrap().experts as f64;
        let at = |release: Release, hits: f64| pass_ops(&moe_run(qwen, Stack::Trl, release), hits);
        let looped = Release::new(4, 56, 2);
        assert_eq!(
            at(looped, 5.0),
            (
                layers * (11.0 + 12.0 * 5.0),
                layers * (6.0 + 20.0 * 5.0),
                layers * (11.0 + 12.0 * 5.0)
            )
        );
        let grouped = Release::new(5, 17, 0);
        assert_eq!(at(grouped, 5.0), at(grouped, 128.0));
        assert_eq!(
            at(grouped, 5.0),
            (layers * 26.0, layers * 29.0, layers * 26.0)
        );
        let every = Release::new(4, 52, 4);
        assert_eq!(at(every, 5.0), at(every, 100.0));
        assert_eq!(at(every, 5.0).1, layers * (6.0 + 20.0 * experts));
    }
}
