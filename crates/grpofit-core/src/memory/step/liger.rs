//! TRL's Liger loss (N8): the policy's log-probabilities computed from the last hidden states
//! and the head's weight in chunks, so the loss's forward builds no micro-batch logits. Which
//! implementation runs depends on the TRL release (`run::versions::LigerLoss`). Liger's Triton
//! kernels cannot run on CPU: modelled from the code, not traced. Each term counts the tensors the
//! code allocates eagerly; liger-kernel compiles its chunk step (`compiled=True`), which can only
//! fuse some of them away.

use super::shape::StepShape;
use crate::arch::Arch;
use crate::run::versions::LigerLoss;

/// 1.13's `_SELECTIVE_LOGPROB_SEQ_CHUNK_SIZE` / `_VOCAB_CHUNK_SIZE` (trl/losses/fused_linear_ppo.py)
const TRL_LOSSES_TOKENS: u64 = 2048;
const TRL_LOSSES_VOCAB: u64 = 4096;
/// 1.14.2's `_CHUNKED_LOGPROB_TOKEN_CHUNK_SIZE` and `_CHUNKED_LOGPROB_CHUNK_SIZE`
/// (trl/trainer/utils.py, trl/trainer/grpo_trainer.py)
const CHUNKED_TOKENS: u64 = 2048;
const CHUNKED_VOCAB: u64 = 8192;

/// The loss's peak above what is live before it (the final norm's output included elsewhere),
/// for the release's Liger loss; 0 when it is off. `head_trained`: full fine-tuning (or PEFT's
/// head copy), whose head weight gradient 1.14's chunked function fills (6 V H, as 1.15's).
pub(super) fn liger_peak(arch: &Arch, s: &StepShape, head_trained: bool) -> u64 {
    let (b, t, v, h) = (s.seqs, s.completion, arch.vocab, arch.hidden);
    // every sequence's gradient of its hidden states, bf16, kept in `grad_inputs` and then
    // joined by `torch.cat` (`LigerFusedLinearPPOBase.forward`): 2 x 2 B T H at the join
    let inputs = 2 * b * t * h * 2;
    match s.liger {
        LigerLoss::Off => 0,
        LigerLoss::LigerKernel => {
            // `grad_weight = torch.zeros_like(weight)` (V x H in the head's bf16, allocated for a
            // frozen head too: `grad_and_value` always takes argnums 0 and 1) and the chunk's own
            // weight gradient it is added from
            let weight = 2 * 2 * v * h;
            // one sequence a chunk (`chunk_size=1`): `chunk_forward`'s bf16 logits (1, T, V), the
            // fp32 `logits.float()` and `log_softmax` of it, then the backward's fp32 gradient of
            // the log-probs and the bf16 gradient of the logits: (2 + 4 + 4 + 4 + 2) T V
            let chunk = 16 * t * v;
            (weight + inputs / 2 + chunk).max(weight + inputs)
        }
        LigerLoss::TrlLosses => {
            // the outer bf16 `grad_weight` accumulator, `_selective_logprob_backward`'s fp32
            // `grad_weight` (allocated whatever the head trains) and its bf16 return
            let weight = (2 + 4 + 2) * v * h;
            // a tile's bf16 product, its fp32 logits, `probs` and `grad_logits`, and the
            // sequence's fp32 `grad_hidden` (T x H)
            let tile = t.min(TRL_LOSSES_TOKENS) * v.min(TRL_LOSSES_VOCAB);
            let chunk = (2 + 4 + 4 + 4) * tile + 4 * t * h;
            (weight + inputs / 2 + chunk).max(weight + inputs)
        }
        LigerLoss::Chunked => {
            // `_chunked_logps`: the completion's gathered hidden states (N x H, bf16); forward:
            // the `mm_buf` (compute dtype) and fp32 `logits_buf` tile and seven fp32 per-token
            // statistics; backward: the fp32 `grad_hidden` and its bf16 cast beside the gathered
            // states, the tile and the backward's fp32 `probs` / `grad_logits` of it
            let n = b * t;
            let gathered = n * h * 2;
            let tile = n.min(CHUNKED_TOKENS) * v.min(CHUNKED_VOCAB);
            let forward = gathered + 6 * tile + n * 7 * 4;
            let backward = gathered + 2 * gathered + gathered + (6 + 8) * tile;
            let head = if head_trained { 6 * v * h } else { 0 };
            forward.max(backward) + head
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::memory::step::shape::Logits;

    fn shape(liger: LigerLoss) -> StepShape {
        StepShape {
            seqs: 8,
            prompt: 256,
            completion: 1024,
            rank: 16,
            liger,
            logits_in_place: true,
            ..super::super::shape::test_shape()
        }
    }

    /// Qwen2.5-7B, 8 completions of 1,024 tokens: liger-kernel's chunk is one sequence,
    /// 16 x 1,024 x 152,064 = 2,491,416,576 B, beside 4 V H = 2,179,989,504 B of weight
    /// gradients and 2 B T H = 58,720,256 B of kept input gradients: 4,730,126,336 B, against
    /// 8 x 1,024 x 152,064 x 4 = 4.98 GB for each fp32 copy of the materialised logits.
    #[test]
    fn liger_kernel_holds_one_sequence_s_logits() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let s = shape(LigerLoss::LigerKernel);
        assert_eq!(liger_peak(arch, &s, false), 4_730_126_336);
        assert_eq!(liger_peak(arch, &shape(LigerLoss::Off), false), 0);
        let materialised = Logits::unfused_peak(arch, &shape(LigerLoss::Off));
        for liger in [
            LigerLoss::LigerKernel,
            LigerLoss::TrlLosses,
            LigerLoss::Chunked,
        ] {
            let peak = liger_peak(arch, &shape(liger), false);
            assert!(
                peak < materialised / 3,
                "{liger:?}: {peak} vs {materialised}"
            );
        }
    }
}
