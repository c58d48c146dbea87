//! One pass of the model over a micro-batch, timed by what its kernels do: each projection's
//! GEMM by roofline (the larger of its FLOPs at `matmul_peak` of the sheet and its bytes at the
//! kernels' bandwidth fraction, `KERNEL_BANDWIDTH`), the attention's FLOPs at FlashAttention-2's efficiency
//! ([`ATTENTION_OF_GEMM`]), and the bytes the memory-bound operators move (the RMSNorms in fp32,
//! rotary, the activation and product, the residual adds, the LM head's log-softmax over the
//! vocabulary), counted from the trainer's own operators ([`Traffic`]). A small micro-batch's
//! GEMMs are weight-bound and a narrow model's time goes to the memory-bound operators: the
//! matmuls' share of the sheet, its MFU, rises with the tokens per micro-batch and the width.

use super::efficiency::ATTENTION_OF_GEMM;
use super::machine::Machine;
use crate::arch::{Arch, Family};
use crate::memory::estimate::target_mask;
use crate::memory::step::dropout::{AdapterDropout, adapted_fan_in, input_norm_readers};
use crate::run::{Checkpointing, RunConfig};

/// Bytes 16-bit weights and activations take an element.
const BF16: f64 = 2.0;

/// Seconds for one GEMM of `tokens` rows through a `fan_in x fan_out` weight (`experts` copies
/// of it read, each used by its share of the rows): the larger of its FLOPs at the GEMM
/// efficiency and its bytes (the weights read once, the activations in and out) at the
/// bandwidth fraction.
fn gemm(m: &Machine, tokens: f64, fan_in: f64, fan_out: f64, weights: f64) -> f64 {
    let flops = 2.0 * tokens * fan_in * fan_out;
    let bytes = BF16 * (weights * fan_in * fan_out + tokens * (fan_in + fan_out));
    m.compute(flops, 1.0).max(m.kernel_traffic(bytes))
}

/// One forward's GEMMs over `tokens` tokens: every layer's projections, the active experts'
/// (each touched expert's weights read once, its tokens `tokens x active / experts`), the LM head.
pub(super) fn linear(arch: &Arch, m: &Machine, tokens: f64, experts_touched: f64) -> f64 {
    let layer: f64 = arch
        .projections()
        .iter()
        .map(|p| gemm(m, tokens, p.fan_in as f64, p.fan_out as f64, 1.0))
        .sum();
    let experts = arch.moe.map_or(0.0, |e| {
        let h = arch.hidden as f64;
        let width = e.expert_intermediate as f64;
        let routed = tokens * e.active as f64;
        // gate and up (h -> width each), down (width -> h), over the touched experts' weights
        gemm(m, routed, h, 2.0 * width, experts_touched)
            + gemm(m, routed, width, h, experts_touched)
    });
    arch.layers as f64 * (layer + experts) + head_gemm(arch, m, tokens)
}

/// The LM head's GEMM over `tokens` tokens.
fn head_gemm(arch: &Arch, m: &Machine, tokens: f64) -> f64 {
    gemm(m, tokens, arch.hidden as f64, arch.vocab as f64, 1.0)
}

/// FLOPs of one forward's attention over `tokens` tokens in sequences of `len`: the scores and
/// the weighted sum, `2 x 2 x q_dim` a key, over a causal half of the sequence.
pub(super) fn attention_flops(arch: &Arch, tokens: f64, len: f64) -> f64 {
    2.0 * arch.layers as f64 * arch.q_dim() as f64 * len * tokens
}

/// The backward of attention against its forward: FlashAttention's backward recomputes the
/// scores and takes five matmuls against the forward's two (flash-attention
/// `benchmarks/benchmark_flash_attention.py` `flops`: `bwd = 2.5 x fwd`).
pub(super) const ATTENTION_BACKWARD_FLOPS: f64 = 2.5;

/// Seconds for `flops` of FlashAttention / SDPA attention.
pub(super) fn attention(m: &Machine, flops: f64) -> f64 {
    m.compute(flops / ATTENTION_OF_GEMM, 1.0)
}

/// Which way a pass runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Side {
    Forward,
    Backward,
}

/// Bytes a token one pass moves through the operators that are not matmuls, per element of
/// each width: `layers x (hidden.h + intermediate.i + attention.(q_dim + 2 kv_dim) + layer)
/// + head_hidden.h + vocab.V + outside`. Counted by `tools/trace/traffic.py` (TRL 0.23's
/// `_get_per_token_logps_and_entropies` and its backward, transformers 4.56.1, torch 2.9.1, on
/// CPU: the same aten operators a GPU runs, the fused attention and the matmuls left out) and
/// recorded in `calibration/traffic/traffic.json`, which `tests::the_traffic_is_the_record` reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Traffic {
    pub hidden: f64,
    pub intermediate: f64,
    pub attention: f64,
    pub layer: f64,
    pub head_hidden: f64,
    pub vocab: f64,
    pub outside: f64,
}

/// (forward, backward) bytes a token for Llama, Mistral and Qwen2 (their traces are equal but
/// for Qwen2's q/k/v biases: 26 bytes an attention element in the backward against 24).
const LLAMA: (Traffic, Traffic) = (
    Traffic {
        hidden: 84.0,
        intermediate: 10.0,
        attention: 17.0,
        layer: 304.0,
        head_hidden: 38.0,
        vocab: 26.0,
        outside: 1742.0,
    },
    Traffic {
        hidden: 222.0,
        intermediate: 18.0,
        attention: 24.0,
        layer: 328.0,
        head_hidden: 98.0,
        vocab: 24.0,
        outside: 60.0,
    },
);

/// Qwen3: Llama's, and the RMSNorm on each query and key head (fp32, as the layer norms).
const QWEN3: (Traffic, Traffic) = (
    Traffic {
        attention: 44.5625,
        ..LLAMA.0
    },
    Traffic {
        attention: 96.84375,
        ..LLAMA.1
    },
);

/// Gemma 3: four norms a layer, the query/key norms, the scaled embedding.
const GEMMA3: (Traffic, Traffic) = (
    Traffic {
        hidden: 172.0,
        attention: 49.5625,
        layer: 934.0,
        head_hidden: 46.0,
        outside: 7684.0,
        ..LLAMA.0
    },
    Traffic {
        hidden: 462.0,
        attention: 109.84375,
        layer: 400.0,
        head_hidden: 114.0,
        ..LLAMA.1
    },
);

/// Phi-3: the fused `qkv_proj` and `gate_up_proj`, split by slices whose backward writes zeros.
const PHI3: (Traffic, Traffic) = (
    Traffic {
        attention: 22.0,
        ..LLAMA.0
    },
    Traffic {
        hidden: 204.0,
        intermediate: 26.0,
        attention: 50.0,
        ..LLAMA.1
    },
);

/// A family's traffic: the traced families their own; Qwen2 Llama's forward and its own
/// backward; Gemma 2 Gemma 3's (four norms a layer, untraced soft-capping); gpt-oss Llama's
/// (its expert loop's gathers are the eager operators', `ops::expert`).
pub(super) fn traffic(family: Family, side: Side) -> Traffic {
    let (forward, backward) = match family {
        Family::Qwen3 => QWEN3,
        Family::Gemma2 | Family::Gemma3 => GEMMA3,
        Family::Phi3 => PHI3,
        Family::Qwen2 => (
            LLAMA.0,
            Traffic {
                attention: 26.0,
                ..LLAMA.1
            },
        ),
        Family::Llama | Family::GptOss => LLAMA,
    };
    match side {
        Side::Forward => forward,
        Side::Backward => backward,
    }
}

/// Bytes a token PEFT's adapters add per `fan_in + fan_out` of each adapted projection (the
/// scaling and the add beside the rank-r matmuls; `lora_dropout` 0, PEFT's default, is an
/// identity, its dropout [`LORA_DROPOUT_PER_FAN_IN`]): `lora_per_fan` in the record, Llama's.
pub(super) const LORA_PER_FAN: (f64, f64) = (15.36986301369863, 6.282534246575342);

/// Bytes a token PEFT's adapter dropout (`RunConfig::lora_dropout`) moves per element of each
/// adapted projection's input, forward and backward: `lora_dropout_per_fan_in` in the record
/// (every family's). `native_dropout` reads the adapter's fp32 copy of the input (4) and writes
/// the dropped copy (4) and its bool mask (1); `native_dropout_backward` reads the gradient (4)
/// and the mask (1) and writes the input's gradient (4). Counted with CPU's dropout stood in by
/// `native_dropout`, the kernel CUDA runs (`tools/trace/kernels.py`).
pub(super) const LORA_DROPOUT_PER_FAN_IN: (f64, f64) = (9.0, 9.0);

/// Bytes one pass over `tokens` tokens moves through the memory-bound operators.
pub(super) fn memory_bound_bytes(run: &RunConfig, tokens: f64, side: Side) -> f64 {
    let arch = &run.arch;
    let t = traffic(arch.family, side);
    let (h, i) = (arch.hidden as f64, arch.intermediate as f64);
    let qkv = (arch.q_dim() + 2 * arch.kv_dim()) as f64;
    let layer = t.hidden * h + t.intermediate * i + t.attention * qkv + t.layer;
    let outside = t.head_hidden * h + t.vocab * arch.vocab as f64 + t.outside;
    let per_fan = match side {
        Side::Forward => LORA_PER_FAN.0,
        Side::Backward => LORA_PER_FAN.1,
    };
    tokens * (arch.layers as f64 * (layer + per_fan * adapted_fans(run)) + outside)
        + dropout_bytes(run, tokens, side)
}

/// What the adapters' dropout moves in one pass ([`LORA_DROPOUT_PER_FAN_IN`]): every adapted
/// input in every layer, but without checkpointing the first layer's q, k and v run no dropout
/// backward (their input needs no gradient: `memory::step::dropout::input_norm_readers`).
fn dropout_bytes(run: &RunConfig, tokens: f64, side: Side) -> f64 {
    if AdapterDropout::of(run) == AdapterDropout::Off {
        return 0.0;
    }
    let targets = target_mask(&run.arch, &run.lora_targets);
    let fan_in = adapted_fan_in(&run.arch, &targets);
    let (per, skipped) = match side {
        Side::Forward => (LORA_DROPOUT_PER_FAN_IN.0, 0),
        Side::Backward if run.checkpointing == Checkpointing::Off => (
            LORA_DROPOUT_PER_FAN_IN.1,
            input_norm_readers(&run.arch, &targets).1,
        ),
        Side::Backward => (LORA_DROPOUT_PER_FAN_IN.1, 0),
    };
    tokens * per * (run.arch.layers * fan_in - skipped) as f64
}

/// The part of [`memory_bound_bytes`] outside the decoder layers: the embedding, the final norm,
/// the LM head's logits through the log-softmax and entropy.
fn head_bytes(run: &RunConfig, tokens: f64) -> f64 {
    let arch = &run.arch;
    let t = traffic(arch.family, Side::Forward);
    tokens * (t.head_hidden * arch.hidden as f64 + t.vocab * arch.vocab as f64 + t.outside)
}

/// `fan_in + fan_out` summed over a layer's adapted projections; none when fully fine-tuned.
fn adapted_fans(run: &RunConfig) -> f64 {
    if run.full_finetuning {
        return 0.0;
    }
    run.arch
        .projections()
        .iter()
        .zip(target_mask(&run.arch, &run.lora_targets))
        .filter(|(_, t)| *t)
        .map(|(p, _)| (p.fan_in + p.fan_out) as f64)
        .sum()
}

/// Bytes eager attention's operators move beside SDPA's a score (scaled, masked, softmaxed in
/// fp32 and cast back; its backward through each), forward and backward: the record's
/// `eager_attention_per_score` (Llama's, at 64 and 128 tokens) taken to long sequences, `2 x
/// at 128 - at 64`, which drops what falls a token (the key/value heads' `repeat_kv` copies).
pub(super) const EAGER_PER_SCORE: (f64, f64) = (29.4476318359375, 27.96533203125);

/// Bytes the batched GEMMs themselves move a score, which the trace leaves with the matmuls:
/// the forward writes the scores and reads the probabilities back (2 + 2 bytes in bf16); the
/// backward writes the probabilities' gradient and reads it and the probabilities (2 + 2 + 2),
/// and reads the scores' gradient for the queries' and keys' (2).
pub(super) const EAGER_GEMM_PER_SCORE: (f64, f64) = (4.0, 8.0);

/// One pass's attention over `tokens` tokens in sequences of `len`. SDPA and FlashAttention:
/// the causal FLOPs at FlashAttention-2's rate, the backward's 2.5x. Eager attention
/// (`eager_attention_forward`): every score of the `len x len` square computed by two batched
/// GEMMs (the backward's four), and each head's scores moved through memory
/// ([`EAGER_PER_SCORE`]).
fn attention_pass(run: &RunConfig, m: &Machine, tokens: f64, len: f64, side: Side) -> f64 {
    let causal = attention_flops(&run.arch, tokens, len);
    if run.attention != crate::run::attention::Attention::Eager {
        return match side {
            Side::Forward => attention(m, causal),
            Side::Backward => attention(m, ATTENTION_BACKWARD_FLOPS * causal),
        };
    }
    let scores = (run.arch.layers * run.arch.heads) as f64 * len * tokens;
    let (gemms, per_score) = match side {
        Side::Forward => (1.0, EAGER_PER_SCORE.0 + EAGER_GEMM_PER_SCORE.0),
        Side::Backward => (2.0, EAGER_PER_SCORE.1 + EAGER_GEMM_PER_SCORE.1),
    };
    m.compute(gemms * 2.0 * causal, 1.0) + m.kernel_traffic(per_score * scores)
}

/// One forward over a micro-batch: its GEMMs, attention and memory-bound operators.
pub(super) fn forward(run: &RunConfig, m: &Machine, tokens: f64, len: f64, experts: f64) -> f64 {
    linear(&run.arch, m, tokens, experts)
        + attention_pass(run, m, tokens, len, Side::Forward)
        + m.kernel_traffic(memory_bound_bytes(run, tokens, Side::Forward))
}

/// Checkpointing's recompute: the decoder layers' forward again (transformers'
/// `GradientCheckpointingLayer` wraps each decoder layer; the embedding, the final norm and the
/// LM head with its log-softmax run once), so the forward less the head's GEMM and bytes.
pub(super) fn recompute(run: &RunConfig, m: &Machine, tokens: f64, len: f64, experts: f64) -> f64 {
    forward(run, m, tokens, len, experts)
        - head_gemm(&run.arch, m, tokens)
        - m.kernel_traffic(head_bytes(run, tokens))
}

/// One backward: the input gradients' GEMMs (the same shapes as the forward's), the weight
/// gradients' too when every weight trains, attention's backward, the memory-bound operators'.
pub(super) fn backward(run: &RunConfig, m: &Machine, tokens: f64, len: f64, experts: f64) -> f64 {
    let gemms = if run.full_finetuning { 2.0 } else { 1.0 };
    gemms * linear(&run.arch, m, tokens, experts)
        + attention_pass(run, m, tokens, len, Side::Backward)
        + m.kernel_traffic(memory_bound_bytes(run, tokens, Side::Backward))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::time::Efficiencies;
    use crate::time::efficiency::MATMUL_PEAK;

    fn qwen3(name: &str, full: bool) -> RunConfig {
        let mut run = RunConfig::example(catalog::find(name).unwrap().arch);
        run.full_finetuning = full;
        run
    }

    /// An H100 SXM at the declared efficiencies, the card these tests time on.
    struct TestCard {
        gpu: crate::hardware::GpuSpeed,
        eff: Efficiencies,
    }

    impl TestCard {
        fn h100() -> TestCard {
            TestCard {
                gpu: crate::hardware::lookup("H100 SXM").unwrap().speed(),
                eff: Efficiencies::default(),
            }
        }

        fn machine(&self) -> Machine<'_> {
            Machine {
                gpu: &self.gpu,
                eff: &self.eff,
            }
        }
    }

    /// The share of the sheet a forward's GEMMs reach over `tokens` tokens.
    fn gemm_mfu(arch: &Arch, tokens: f64) -> f64 {
        let card = TestCard::h100();
        let (gpu, m) = (&card.gpu, card.machine());
        let flops: f64 = tokens
            * 2.0
            * (arch.layers as f64
                * arch
                    .projections()
                    .iter()
                    .map(|p| (p.fan_in * p.fan_out) as f64)
                    .sum::<f64>()
                + (arch.vocab * arch.hidden) as f64);
        flops / (linear(arch, &m, tokens, 0.0) * gpu.bf16_tflops * 1e12)
    }

    /// The roofline: a micro-batch of a few tokens reads every weight for little arithmetic, so
    /// its GEMMs' MFU rises with the tokens (a single FLOPs efficiency would hold it flat) up to
    /// `MATMUL_PEAK`, and a wider model reaches it sooner.
    #[test]
    fn the_gemms_mfu_rises_with_the_tokens_and_the_width() {
        let small = catalog::find("Qwen/Qwen3-0.6B").unwrap().arch;
        let wide = catalog::find("Qwen/Qwen3-8B").unwrap().arch;
        let few = gemm_mfu(&small, 16.0);
        let many = gemm_mfu(&small, 16384.0);
        assert!(few < 0.1 * MATMUL_PEAK, "{few}");
        assert!((many - MATMUL_PEAK).abs() < 1e-9, "{many}");
        assert!(gemm_mfu(&wide, 256.0) > gemm_mfu(&small, 256.0));
    }

    /// Attention runs at FlashAttention-2's share of a GEMM, and its backward takes 2.5x the
    /// forward's FLOPs whether the weights train or not.
    #[test]
    fn attention_is_timed_at_flash_attentions_rate_and_its_backward_is_2_5x() {
        let card = TestCard::h100();
        let (gpu, m) = (&card.gpu, card.machine());
        let flops = 1e15;
        let rate = gpu.bf16_tflops * 1e12 * MATMUL_PEAK * ATTENTION_OF_GEMM;
        assert!((attention(&m, flops) - flops / rate).abs() < 1e-9);
        // LoRA at 64k tokens: the backward's attention is 2.5 forwards', its GEMMs one
        let run = qwen3("Qwen/Qwen3-0.6B", false);
        let (t, len) = (65536.0, 65536.0);
        let fwd_attention = attention(&m, attention_flops(&run.arch, t, len));
        let others = |side| {
            linear(&run.arch, &m, t, 0.0) + m.kernel_traffic(memory_bound_bytes(&run, t, side))
        };
        let f = forward(&run, &m, t, len, 0.0);
        let b = backward(&run, &m, t, len, 0.0);
        assert!((f - fwd_attention - others(Side::Forward)).abs() < 1e-9);
        assert!((b - 2.5 * fwd_attention - others(Side::Backward)).abs() < 1e-9);
    }

    /// Qwen3-0.6B's memory-bound bytes a token, summed by hand from the record's coefficients:
    /// 28 layers of 1024 hidden, 3072 intermediate, 2048 + 2 x 1024 attention, 151,936 vocab.
    #[test]
    fn the_memory_bound_bytes_follow_the_widths_and_the_adapters() {
        let full = qwen3("Qwen/Qwen3-0.6B", true);
        let layer = 84.0 * 1024.0 + 10.0 * 3072.0 + 44.5625 * 4096.0 + 304.0;
        let outside = 38.0 * 1024.0 + 26.0 * 151_936.0 + 1742.0;
        let want = 28.0 * layer + outside;
        let got = memory_bound_bytes(&full, 1.0, Side::Forward);
        assert!((got - want).abs() < 1e-6, "{got} {want}");
        assert!(memory_bound_bytes(&full, 1.0, Side::Backward) > got);
        // the adapters' scaling and add, on every targeted projection
        let lora = qwen3("Qwen/Qwen3-0.6B", false);
        assert!(adapted_fans(&lora) > 0.0);
        assert!(memory_bound_bytes(&lora, 1.0, Side::Forward) > got);
    }

    /// The coefficients above are `calibration/traffic/traffic.json`'s, as traced.
    #[test]
    fn the_traffic_is_the_record() {
        let record: serde_json::Value =
            serde_json::from_str(include_str!("../../../../calibration/traffic/traffic.json"))
                .unwrap();
        let families = [
            ("llama", Family::Llama),
            ("mistral", Family::Llama),
            ("qwen2", Family::Qwen2),
            ("qwen3", Family::Qwen3),
            ("gemma3", Family::Gemma3),
            ("phi3", Family::Phi3),
        ];
        for (name, family) in families {
            let traced = &record["families"][name]["bytes_per_token"];
            for (side, key) in [(Side::Forward, "forward"), (Side::Backward, "backward")] {
                let t = traffic(family, side);
                let c = &traced[key];
                let pairs = [
                    (t.hidden, "hidden"),
                    (t.intermediate, "intermediate"),
                    (t.attention, "attention"),
                    (t.layer, "layer_rest"),
                    (t.head_hidden, "head_hidden"),
                    (t.vocab, "vocab"),
                    (t.outside, "outside_rest"),
                ];
                for (ours, field) in pairs {
                    let theirs = c[field].as_f64().unwrap();
                    assert_eq!(ours, theirs, "{name} {key} {field}");
                }
            }
        }
        let eager = &record["families"]["llama"]["eager_attention_per_score"];
        for (side, ours) in [EAGER_PER_SCORE.0, EAGER_PER_SCORE.1]
            .into_iter()
            .enumerate()
        {
            let at = |k: usize| eager[k][side].as_f64().unwrap();
            assert_eq!(ours, 2.0 * at(1) - at(0), "eager side {side}");
        }
        let lora = &record["families"]["llama"]["lora_per_fan"];
        assert_eq!(LORA_PER_FAN.0, lora["forward"].as_f64().unwrap());
        assert_eq!(LORA_PER_FAN.1, lora["backward"].as_f64().unwrap());
        // the adapters' dropout: the same in every family
        for (name, f) in record["families"].as_object().unwrap() {
            let d = &f["lora_dropout_per_fan_in"];
            assert_eq!(
                LORA_DROPOUT_PER_FAN_IN.0,
                d["forward"].as_f64().unwrap(),
                "{name}"
            );
            assert_eq!(
                LORA_DROPOUT_PER_FAN_IN.1,
                d["backward"].as_f64().unwrap(),
                "{name}"
            );
        }
    }

    /// `lora_dropout` > 0: 9 bytes an adapted input element each way, over every layer; the
    /// first layer's q, k and v run no dropout backward without checkpointing.
    #[test]
    fn the_adapters_dropout_moves_its_input_and_mask() {
        let off = qwen3("Qwen/Qwen3-0.6B", false);
        let on = RunConfig {
            lora_dropout: 0.05,
            ..off.clone()
        };
        let a = &on.arch;
        let widths: u64 = a.projections().iter().map(|p| p.fan_in).sum();
        let more = |run: &RunConfig, side| {
            memory_bound_bytes(run, 1.0, side) - memory_bound_bytes(&off, 1.0, side)
        };
        let every = 9.0 * (a.layers * widths) as f64;
        assert_eq!(more(&on, Side::Forward), every);
        assert_eq!(more(&on, Side::Backward), every);
        let plain = RunConfig {
            checkpointing: Checkpointing::Off,
            ..on.clone()
        };
        let first_qkv = (3 * a.hidden) as f64;
        assert_eq!(more(&plain, Side::Backward), every - 9.0 * first_qkv);
        // no adapter, nothing dropped
        let full = RunConfig {
            full_finetuning: true,
            ..on.clone()
        };
        let full_off = qwen3("Qwen/Qwen3-0.6B", true);
        assert_eq!(
            memory_bound_bytes(&full, 1.0, Side::Forward),
            memory_bound_bytes(&full_off, 1.0, Side::Forward)
        );
    }

    /// `attn_implementation = "eager"`: the full square of scores by GEMMs and their traffic,
    /// which grows as the square of the sequence where SDPA's stays on chip.
    #[test]
    fn eager_attention_moves_its_scores_through_memory() {
        let card = TestCard::h100();
        let m = card.machine();
        let sdpa = qwen3("Qwen/Qwen3-0.6B", false);
        let mut eager = sdpa.clone();
        eager.attention = crate::run::attention::Attention::Eager;
        let at = |run: &RunConfig, len: f64| {
            attention_pass(run, &m, len, len, Side::Forward)
                + attention_pass(run, &m, len, len, Side::Backward)
        };
        let (short, long) = (1024.0, 8192.0);
        assert!(at(&eager, short) > at(&sdpa, short));
        assert!(
            at(&eager, long) > 1.5 * at(&sdpa, long),
            "{} {}",
            at(&eager, long),
            at(&sdpa, long)
        );
        let scores = (28 * 16) as f64 * long * long;
        let bytes = (EAGER_PER_SCORE.0 + 4.0) * scores;
        let fwd = attention_pass(&eager, &m, long, long, Side::Forward);
        let flops = 2.0 * attention_flops(&eager.arch, long, long);
        assert!((fwd - m.compute(flops, 1.0) - m.kernel_traffic(bytes)).abs() < 1e-9);
    }

    /// Checkpointing recomputes the decoder layers alone: the LM head's GEMM and its
    /// vocabulary-wide log-softmax run once a pass.
    #[test]
    fn the_recompute_leaves_the_head_out() {
        let card = TestCard::h100();
        let m = card.machine();
        let run = qwen3("Qwen/Qwen3-0.6B", true);
        let t = 4096.0;
        let head = head_gemm(&run.arch, &m, t) + m.kernel_traffic(head_bytes(&run, t));
        let f = forward(&run, &m, t, t, 0.0);
        let r = recompute(&run, &m, t, t, 0.0);
        assert!(head > 0.1 * f, "a 152k vocabulary: {head} of {f}");
        assert!((f - r - head).abs() < 1e-12, "{f} {r} {head}");
    }
}
