//! How much of a card's datasheet figures a GRPO step gets: each efficiency declared once, with
//! the measurement it comes from. `grpofit calibrate` may replace them per card
//! ([`Efficiencies`]).

use serde::Serialize;

/// The fraction of the sheet's memory bandwidth a vLLM decode step reaches, and the seconds of
/// each decode step that do not depend on the bytes it reads ([`VLLM_STEP_SECONDS`]). ML.ENERGY
/// leaderboard v3.0, Qwen3-8B on one H100 80GB HBM3 (ml-energy/leaderboard
/// `public/data/models/Qwen__Qwen3-8B__gpqa.json`): at 8, 16, 32, 63.3 and 82 running sequences
/// of ~8k-token outputs the median inter-token latency is 9.7, 11.9, 16.9, 26.6 and 27.9 ms
/// while a step reads the 15.1 GB of bf16 weights and the live KV (147 KB a token, half the
/// output a sequence on average): 19.8, 24.4, 34.4, 54.2 and 63.8 GB. The least-squares line
/// through the five is 0.434 ms a GB (2.30 TB/s, 0.69 of the sheet's 3.35 TB/s) plus 1.5 ms a
/// step (`phases::tests::the_decode_constants_are_the_ml_energy_line`).
pub const DECODE_BANDWIDTH: f64 = 0.69;

/// Seconds a vLLM decode step takes beside reading its bytes: the engine's host work between
/// two forward passes (vLLM V1 `EngineCore.step`: the scheduler, `GPUModelRunner.execute_model`'s
/// input preparation, the sampler and the sampled tokens' copy back, the detokenizer) and the
/// CUDA graph's launch, which a small model or a short batch no longer hides. The intercept of
/// the ML.ENERGY line above. vLLM PR #17866 (2025-05) measures a whole decode step of
/// Llama-3.2-1B at one request at 2.64 ms (median TPOT), as much as this 1.5 ms and its 2.5 GB
/// of weights at 0.69 of an H100's bandwidth (1.1 ms).
pub const VLLM_STEP_SECONDS: f64 = 1.5e-3;

/// The fraction of the sheet's dense tensor throughput a large bf16 GEMM reaches: Stas Bekman's
/// "Maximum Achievable Matmul FLOPS" table (ml-engineering, `compute/accelerator/README.md`,
/// `mamf-finder.py` over shapes up to 20480, torch 2.7.0+cu126): an H100 SXM reaches 794.5 of
/// its 989 TFLOPS, 0.80 (an A100 SXM 0.87, a GH200 0.84). Each projection's GEMM takes the
/// larger of its FLOPs at this and its bytes at the bandwidth fraction (`kernels`), so a small
/// micro-batch is weight-bound; attention and the memory-bound operators are timed beside it.
/// prime-rl's Qwen3-0.6B points (tests/speed/figures.jsonl) test the whole pass, they set
/// nothing.
pub const MATMUL_PEAK: f64 = 0.80;

/// FlashAttention-2's share of a GEMM's rate, the kernel PyTorch's SDPA and transformers'
/// `flash_attention_2` run: the FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608,
/// abstract) measures FlashAttention-2 at 35 % of an H100's sheet against FlashAttention-3's 75 %;
/// over [`MATMUL_PEAK`] of the same sheet that is 0.4375 of a GEMM. Declared fixed, as a share of
/// `matmul_peak`, so that a card's calibrated `matmul_peak` carries its attention too.
pub const ATTENTION_OF_GEMM: f64 = FLASH_ATTENTION_2_OF_SHEET / MATMUL_PEAK;

/// FlashAttention-2's share of an H100's dense bf16 sheet: the FlashAttention-3 paper's 35 %.
const FLASH_ATTENTION_2_OF_SHEET: f64 = 0.35;

/// The fraction of the sheet's bandwidth a training or scoring pass's kernels stream at (the
/// memory-bound operators, a weight-bound GEMM's reads): the same measured fraction as
/// [`DECODE_BANDWIDTH`], declared fixed. `calibrate` learns `decode_bandwidth` from vLLM's
/// generation alone where TRL times it; a pass's kernels are not vLLM's decode, and tying them
/// to it would move the training with every generation measured. Being fixed, the bytes of
/// these kernels are among the terms no efficiency scales (`measure::step_time::learn_time`).
pub const KERNEL_BANDWIDTH: f64 = DECODE_BANDWIDTH;

/// PyTorch eager: seconds the host spends dispatching and launching one operator, which a small
/// micro-batch or a decode step without CUDA graphs waits for. The PyTorch blog "Accelerating
/// PyTorch with CUDA Graphs" (2021): each kernel launch costs the CPU on the order of 10 µs
/// through the eager dispatcher, which CUDA graphs remove.
pub const EAGER_OP_SECONDS: f64 = 10e-6;

/// Bytes a bitsandbytes NF4 weight moves each time it is used by more than one token:
/// `bitsandbytes.matmul_4bit` takes the `gemv_4bit` kernel only for a single row; otherwise
/// `MatMul4Bit.forward` dequantizes the whole weight (`F.dequantize_4bit`: reads half a byte,
/// writes two) and the matmul reads the two bytes again. vLLM's `BitsAndBytesLinearMethod`
/// calls the same `matmul_4bit`.
pub const NF4_BYTES_MOVED: f64 = 0.5 + 2.0 + 2.0;

/// The same for LLM.int8 (`MatMul8bitLt`: int8 weights read, the outliers' 16-bit product).
pub const INT8_BYTES_MOVED: f64 = 1.0 + 2.0 + 2.0;

/// The efficiencies in use: the declared ones above, or a card's calibrated values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Efficiencies {
    pub decode_bandwidth: f64,
    pub matmul_peak: f64,
    pub eager_op_seconds: f64,
}

impl Default for Efficiencies {
    fn default() -> Efficiencies {
        Efficiencies {
            decode_bandwidth: DECODE_BANDWIDTH,
            matmul_peak: MATMUL_PEAK,
            eager_op_seconds: EAGER_OP_SECONDS,
        }
    }
}

/// Most an eager operator's dispatch can take: 1 ms, a hundred times the PyTorch blog's 10 µs
/// (`EAGER_OP_SECONDS`); a larger value is no measurement of dispatch.
const EAGER_OP_LIMIT: f64 = 1e-3;

impl Efficiencies {
    /// Each efficiency with the range it can take: a fraction of the sheet's figure is above 0
    /// and at most 1 (no kernel beats the datasheet), an operator's dispatch above 0 and at
    /// most `EAGER_OP_LIMIT`. The first value out of range, with its key and range in words.
    pub fn out_of_range(&self) -> Option<(&'static str, f64, &'static str)> {
        let fraction = |x: f64| x.is_finite() && x > 0.0 && x <= 1.0;
        [
            (
                "decode_bandwidth",
                self.decode_bandwidth,
                fraction(self.decode_bandwidth),
                "a fraction of the sheet's bandwidth above 0 and at most 1",
            ),
            (
                "matmul_peak",
                self.matmul_peak,
                fraction(self.matmul_peak),
                "a fraction of the sheet's tensor rate above 0 and at most 1",
            ),
            (
                "eager_op_seconds",
                self.eager_op_seconds,
                self.eager_op_seconds.is_finite()
                    && self.eager_op_seconds > 0.0
                    && self.eager_op_seconds <= EAGER_OP_LIMIT,
                "seconds above 0 and at most 0.001",
            ),
        ]
        .into_iter()
        .find(|(_, _, ok, _)| !ok)
        .map(|(key, value, _, expected)| (key, value, expected))
    }

    /// These efficiencies scaled so that every step term they set takes `ratio` times as long:
    /// the fractions divided by it, the dispatch multiplied. The link's terms (NCCL's broadcast,
    /// the all-reduce) take none of them and stay as they are.
    pub fn slower_by(&self, ratio: f64) -> Efficiencies {
        Efficiencies {
            decode_bandwidth: self.decode_bandwidth / ratio,
            matmul_peak: self.matmul_peak / ratio,
            eager_op_seconds: self.eager_op_seconds * ratio,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_efficiencies_are_in_range_and_scale_back() {
        let d = Efficiencies::default();
        assert_eq!(d.out_of_range(), None);
        let slow = d.slower_by(1.5);
        assert!((slow.matmul_peak - MATMUL_PEAK / 1.5).abs() < 1e-12);
        assert!((slow.eager_op_seconds - EAGER_OP_SECONDS * 1.5).abs() < 1e-18);
        assert_eq!(
            d.slower_by(0.5).out_of_range().map(|o| o.0),
            Some("decode_bandwidth")
        );
        // MATMUL_PEAK is the MAMF table's H100 SXM row, 794.5 of 989 TFLOPS
        assert!((MATMUL_PEAK - 794.5 / 989.0).abs() < 0.005);
        let mut nan = d;
        nan.eager_op_seconds = f64::NAN;
        assert_eq!(nan.out_of_range().map(|o| o.0), Some("eager_op_seconds"));
    }
}
