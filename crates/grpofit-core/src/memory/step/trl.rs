//! One GRPO training step of the `trl` stack (transformers + PEFT + TRL), analytically:
//! which large tensors exist, in which order they come and go, and so what PyTorch's
//! `max_memory_allocated()` and `max_memory_reserved()` report.
//!
//! Evidence: allocator traces of the calibration step (calibration/measure.py) (`torch.cuda.memory._record_memory_history`,
//! recorded on the H200 on 2026-11-29, `tools/calibration/extend.py`), summarised in
//! `calibration/README.md`. The forward peak comes while the entropy of the logits is computed
//! in 128-row chunks; with checkpointing the backward peak comes while the last layer is recomputed.

use super::replay;
use super::shape::{Logits, StepPeak, StepShape, layer_tensors};
use crate::arch::Arch;
use crate::run::versions::LigerLoss;

/// The step's peak, for the `trl` stack.
pub fn trl_step(arch: &Arch, targets: &[bool], s: &StepShape) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let hidden = tokens * arch.hidden * 2;
    let layer = layer_tensors(arch, targets, s.rank, s.quantised_base, s.path);
    let layer_bytes = layer.per_token() * tokens;
    let logits = Logits::new(arch, s);
    // The final norm keeps its fp32 input, and the normed bf16 output feeds the head.
    let final_norm = tokens * arch.hidden * 6;
    // With beta > 0, two hidden-state-sized bf16 tensors of the reference pass outlive it (trace).
    let residue = if s.reference_pass { 2 * hidden } else { 0 };
    let stored = if s.checkpointing {
        arch.layers * hidden
    } else {
        arch.layers * layer_bytes
    };
    let (logits_peak, copy_grad) = logits_moment(arch, targets, s, &logits);
    let forward = stored + final_norm + logits_peak + residue;
    // Recomputing the last layer: all its saved tensors, plus the fp32 gradient of the down
    // projection's input and the fp32 incoming gradient (and a fused gate_up gradient).
    let backward = if s.checkpointing {
        let fused = if arch.family.fused_projections() {
            tokens * arch.intermediate * 4
        } else {
            0
        };
        stored
            + residue
            + layer_bytes
            + tokens * (arch.intermediate + arch.hidden) * 4
            + fused
            + copy_grad
    } else {
        0
    };
    let activations = forward.max(backward) - if forward >= backward { logits_peak } else { 0 };
    // the Liger loss's chunks are replayed as the fused head's tiles: both hold no micro-batch
    // logits, and the reserved peak then follows the chunked step, not the materialised one
    let reserved = if s.liger != LigerLoss::Off {
        let chunked = StepShape {
            fused_logits: true,
            ..*s
        };
        replay::replay(
            arch,
            targets,
            tokens,
            &Logits::new(arch, &chunked),
            &chunked,
        )
        .peak_reserved
    } else {
        replay::replay(arch, targets, tokens, &logits, s).peak_reserved
    };
    let step = StepPeak {
        activations,
        logits: if forward >= backward { logits_peak } else { 0 },
        reserved,
    };
    if s.scoring_rows == 0 {
        return step;
    }
    let scoring = if s.fused_logits {
        trl_scoring_pass(arch, s, &logits)
    } else {
        whole_batch_reference(arch, s)
    };
    let reserved = step.reserved.max(scoring.activations + scoring.logits);
    if scoring.activations + scoring.logits > step.activations + step.logits {
        StepPeak {
            reserved,
            ..scoring
        }
    } else {
        StepPeak { reserved, ..step }
    }
}

/// The logits' moment of the step (the head's output or its chunks, with the head's weight
/// gradient where the head trains), and the bf16 gradient of PEFT's head copy, which outlives it.
fn logits_moment(arch: &Arch, targets: &[bool], s: &StepShape, logits: &Logits) -> (u64, u64) {
    // Full fine-tuning (no adapter) trains the head too, and so does PEFT's trainable copy of it
    // (`modules_to_save`): `ChunkedLogProbFunction.backward` (trl 1.15.0
    // kernels/chunked_logprob.py) fills an fp32 `grad_weight` (V x H) and returns it cast to
    // bf16, both live at once. Under DDP the bf16 copy becomes the `.grad` the static gradients
    // already count (2 V H over there). Traced (qwen2 `modules_to_save`, trl 1.15.0): the
    // backward's peak is the base run's plus the copy's static states plus exactly 6 V H.
    let head_trained = s.head_copy || !targets.iter().any(|t| *t);
    let head_grad = if s.fused_logits && head_trained {
        6 * arch.vocab * arch.hidden
    } else {
        0
    };
    // The head copy's bf16 `.grad` (2 V H) is made by the logits' backward and stays until the
    // optimizer step, through the recomputed layers' backward; the loss's forward (its entropy
    // chunks) comes before it. Traced (qwen2 `modules_to_save`, trl 0.19.1, 1.0.0, 1.14.2): the
    // loss forward's peak is the base run's plus the copy's static states, the backward's plus
    // 2 V H more. So with checkpointing it joins the recomputation's moment; without, the
    // logits' moment (whose backward comes while every saved tensor is live).
    let copy_grad = if s.head_copy {
        2 * arch.vocab * arch.hidden
    } else {
        0
    };
    let at_logits = if s.checkpointing { 0 } else { copy_grad };
    let peak = if s.fused_logits {
        logits.fused_peak() + head_grad
    } else if s.liger != LigerLoss::Off {
        // N8: the Liger loss builds no micro-batch logits, only its chunk's
        super::liger::liger_peak(arch, s, head_trained) + at_logits
    } else {
        logits.peak(s, arch.final_logit_softcapping) + at_logits
    };
    (peak, copy_grad)
}

/// The no-grad scoring before training (trl 1.15.0 `_generate_and_score_completions`): old
/// log-probs, and reference log-probs with the adapter disabled when `beta > 0`, in chunks of
/// `per_device_train_batch_size` rows, with gradient checkpointing switched off. Nothing is
/// saved for a backward, so the peak is one layer's working set (residual stream, normed input,
/// PEFT's fp32 copy of a projection's input, the MLP's gate, up and product), or the final
/// norm's output and the fused head's forward. Read from the wheel; not measured.
fn trl_scoring_pass(arch: &Arch, s: &StepShape, logits: &Logits) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let widest_input = arch.intermediate.max(arch.hidden);
    let layer = tokens * (2 * arch.hidden * 2 + widest_input * 4 + 3 * arch.intermediate * 2);
    let head = tokens * arch.hidden * 6;
    let scoring = logits.gathered + logits.tile + logits.stats;
    StepPeak::larger_moment(layer, (head, scoring))
}

/// trl 0.19.1's reference pass (N4, `StackVersions::trl_reference_over_generation_batch`): one
/// no-grad forward over all `scoring_rows`, its logits fp32 as the trainer returns them
/// (`shape::logits_element`). The peak is the larger of a layer's working set over every row
/// (as [`trl_scoring_pass`]) and the logits' moments: the head's bf16 output with its fp32 cast,
/// then the fp32 output with its temperature copy, beside the final norm's output.
fn whole_batch_reference(arch: &Arch, s: &StepShape) -> StepPeak {
    let rows = StepShape {
        seqs: s.scoring_rows,
        ..*s
    };
    let tokens = rows.seqs * (s.prompt + s.completion);
    let widest_input = arch.intermediate.max(arch.hidden);
    let layer = tokens * (2 * arch.hidden * 2 + widest_input * 4 + 3 * arch.intermediate * 2);
    let lg = Logits::new(arch, &rows);
    let logits = (lg.cast_from + lg.head).max(lg.head + lg.copy);
    StepPeak::larger_moment(layer, (tokens * arch.hidden * 6, logits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::run::versions::UnslothLogits;

    fn shape(scoring_rows: u64) -> StepShape {
        StepShape {
            seqs: 8,
            path: super::super::shape::StepPath::Harness,
            prompt: 256,
            completion: 768,
            rank: 16,
            checkpointing: true,
            reference_pass: false,
            quantised_base: false,
            expandable_segments: false,
            fused_logits: true,
            head_copy: false,
            liger: crate::run::versions::LigerLoss::Off,
            scoring_rows,
            free_at_step: 0,
            small_card: false,
            unsloth_logits: UnslothLogits::Blocks,
            reference_logits: false,
            every_position_logits: false,
            entropy: crate::run::versions::EntropyChunk::Rows128,
        }
    }

    /// The scoring pass goes a micro-batch at a time with nothing saved, so it neither grows
    /// with the generation batch nor, for the catalog's models, outgrows a checkpointed step.
    #[test]
    fn trl_scoring_pass_stays_below_a_checkpointed_step() {
        for id in catalog::ids() {
            let arch = &catalog::find(id).expect("catalog id").arch;
            let targets = vec![true; arch.projections().len()];
            let s = shape(8);
            let logits = Logits::new(arch, &s);
            let pass = trl_scoring_pass(arch, &s, &logits);
            let scored = trl_step(arch, &targets, &s);
            let quiet = trl_step(arch, &targets, &shape(0));
            assert_eq!(pass, trl_scoring_pass(arch, &shape(64), &logits));
            assert!(pass.activations + pass.logits > 0);
            assert!(
                pass.activations + pass.logits < quiet.activations + quiet.logits,
                "{}",
                arch.name
            );
            assert_eq!(scored, quiet, "{}", arch.name);
        }
    }

    /// PEFT's trainable copy of the head (`modules_to_save`): TRL 1.15's fused head makes its
    /// fp32 gradient and the bf16 cast (6 V H, traced); with materialised logits its bf16
    /// gradient (2 V H) joins the backward's moments only: the recomputation's with
    /// checkpointing (which the logits' forward may outweigh), the logits' own without.
    #[test]
    fn a_head_copy_adds_its_gradient_to_the_step() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let targets = vec![true; arch.projections().len()];
        let vh = arch.vocab * arch.hidden;
        let grew = |s: StepShape| {
            let copy = StepShape {
                head_copy: true,
                ..s
            };
            let (a, b) = (
                trl_step(arch, &targets, &s),
                trl_step(arch, &targets, &copy),
            );
            (b.activations + b.logits) - (a.activations + a.logits)
        };
        let fused = grew(shape(0));
        assert!((2 * vh..=6 * vh).contains(&fused), "fused: {fused}");
        let unfused = StepShape {
            fused_logits: false,
            ..shape(0)
        };
        let checkpointed = grew(unfused);
        assert!(checkpointed > 0 && checkpointed <= 2 * vh, "{checkpointed}");
        let without = grew(StepShape {
            checkpointing: false,
            ..unfused
        });
        assert_eq!(without, 2 * vh);
    }

    /// bitsandbytes' 8-bit matmul keeps its inputs in the replay as in the analytic step: without
    /// checkpointing every layer holds them at the peak.
    #[test]
    fn the_replay_keeps_the_eight_bit_inputs() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let targets = vec![true; arch.projections().len()];
        let s = StepShape {
            checkpointing: false,
            fused_logits: false,
            ..shape(0)
        };
        let tokens = s.seqs * (s.prompt + s.completion);
        let peak = |quantised_base| {
            let s = StepShape {
                quantised_base,
                ..s
            };
            replay::replay(arch, &targets, tokens, &Logits::new(arch, &s), &s).peak_allocated
        };
        let kept = arch.layers * tokens * (4 * arch.hidden + 2 * arch.intermediate);
        assert_eq!(peak(true) - peak(false), kept);
    }

    /// The replay (for the reserved peak) and the analytic step (for the allocated peak) walk
    /// the same tensors, so the replay's allocated peak must land near the analytic one. Found
    /// on the catalog: 0 % without checkpointing, +2 to +15 % with it (the replay keeps the
    /// recomputed layer's transients alive a little longer than the analytic peak counts; the
    /// most for Mixtral, whose two active experts make a 28672-wide MLP).
    #[test]
    fn the_replay_tracks_the_analytic_allocated_peak() {
        let mut worst = (0.0f64, String::new());
        let mut lowest = f64::MAX;
        for id in catalog::ids() {
            let arch = &catalog::find(id).expect("catalog id").arch;
            let targets = vec![true; arch.projections().len()];
            for (checkpointing, fused, beta) in [
                (true, true, false),
                (false, false, true),
                (true, false, false),
            ] {
                let s = StepShape {
                    checkpointing,
                    fused_logits: fused,
                    reference_pass: beta,
                    scoring_rows: 0,
                    ..shape(0)
                };
                let tokens = s.seqs * (s.prompt + s.completion);
                let analytic = trl_step(arch, &targets, &s);
                let replayed = replay::replay(arch, &targets, tokens, &Logits::new(arch, &s), &s);
                let a = (analytic.activations + analytic.logits) as f64;
                let err = (replayed.peak_allocated as f64 - a) / a;
                lowest = lowest.min(err);
                if err.abs() > worst.0 {
                    worst = (
                        err.abs(),
                        format!(
                            "{id} gc={checkpointing} fused={fused}: {:+.1} %",
                            err * 100.0
                        ),
                    );
                }
            }
        }
        assert!(worst.0 < 0.20, "worst {}", worst.1);
        assert!(
            lowest > -0.02,
            "the replay's peak falls below the analytic one: {lowest}"
        );
    }
}
