//! Which tensor of a run most likely made an out-of-memory request, by its size.

use crate::memory::by_version::unsloth_logits_of;
use crate::memory::step::unsloth_step;
use crate::run::versions::UnslothLogits;
use crate::run::{RunConfig, Stack};
use crate::units::format_size;

/// The tensor of a run whose size is closest to an out-of-memory request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub requested: u64,
    /// the tensor, in words, with its shape
    pub tensor: String,
    pub bytes: u64,
    /// within 25 % of the request
    pub matches: bool,
    /// a tensor only the trainers of 2025 held (the micro-batch's whole logits): today's TRL
    /// and Unsloth never build it
    pub older_trainers_only: bool,
    /// the trainer release of the run that builds this tensor in its step, when the run is
    /// pinned to one that does (`unsloth 2025.5.2`)
    pub built_by: Option<String>,
}

impl Request {
    pub fn sentence(&self) -> String {
        if self.matches {
            format!(
                "{} matches {} = {}",
                format_size(self.requested),
                self.tensor,
                format_size(self.bytes)
            )
        } else {
            format!(
                "no single tensor of this run is {} (closest: {} = {})",
                format_size(self.requested),
                self.tensor,
                format_size(self.bytes)
            )
        }
    }
}

/// The tensors of `run` a request of `requested` bytes may be, each named with its shape: the
/// first two only the trainers of 2025 build.
fn candidates(run: &RunConfig, requested: u64) -> [(String, u64); 13] {
    let a = &run.arch;
    let b = run.running_micro_batch();
    let (k, v, h, i) = (run.completion_len, a.vocab, a.hidden, a.intermediate);
    let t = b * run.sequence_len();
    let rows = b * k;
    let block = unsloth_step::logprob_block(
        a,
        rows,
        unsloth_step::GpuAtStep {
            free: u64::MAX / 4,
            small_card: false,
        },
        false,
    );
    let generation_rows = run.generation_rows();
    // fp32 logits are v x 4 bytes a position: the positions the request holds, a micro-batch's
    // rows at the length the completions had reached when it was made (at most the full length)
    let positions = |rows: u64, longest: u64| -> u64 {
        let per_row = (requested as f64 / (rows.max(1) * v.max(1) * 4) as f64).round() as u64;
        if (1..=longest).contains(&per_row) {
            per_row
        } else {
            longest
        }
    };
    let (lb, ls) = (positions(b, k + 1), positions(1, run.sequence_len()));
    [
        // the trainers of 2025 (TRL 0.x, Unsloth before its fused log-probs) held these
        (
            format!(
                "the micro-batch's fp32 logits ({b} x {lb} x {v} x 4 bytes; TRL 0.x and Unsloth before 2026 made it)"
            ),
            b * lb * v * 4,
        ),
        (
            format!(
                "one sequence's fp32 logits ({ls} x {v} x 4 bytes; Unsloth 2025's loss makes it a sequence at a time)"
            ),
            ls * v * 4,
        ),
        // today's: Unsloth 2026.10's log-prob block, TRL 1.x's fused-head tile, and transformers'
        // KV cache when the trained model generates itself
        (
            format!(
                "Unsloth's fp32 log-prob block ({} rows x {v} x 4 bytes)",
                block / (v.div_ceil(8) * 8 * 4).max(1)
            ),
            block,
        ),
        (
            format!(
                "TRL's fused LM-head tile ({} tokens x 32768, bf16)",
                rows.min(4096)
            ),
            rows.min(4096) * 32768 * 2,
        ),
        (
            format!(
                "the generation KV cache ({generation_rows} completions x {} tokens)",
                run.sequence_len()
            ),
            generation_rows * a.kv_bytes_for(run.sequence_len()),
        ),
        (
            format!("the micro-batch's logits ({b} x {} x {v}, bf16)", k + 1),
            b * (k + 1) * v * 2,
        ),
        (
            format!("the temperature-scaled logits copy ({b} x {k} x {v}, bf16)"),
            b * k * v * 2,
        ),
        (
            format!("one completion's log-softmax ({k} x {v}, bf16)"),
            k * v * 2,
        ),
        (format!("an entropy chunk (128 x {v}, fp32)"), 128 * v * 4),
        (
            format!("an MLP activation in fp32 ({t} tokens x {i} x 4 bytes)"),
            t * i * 4,
        ),
        (
            format!("an MLP activation ({t} tokens x {i}, bf16)"),
            t * i * 2,
        ),
        (
            format!("a hidden-state tensor in fp32 ({t} tokens x {h} x 4 bytes)"),
            t * h * 4,
        ),
        (
            format!("the embedding or output head ({v} x {h}, bf16)"),
            v * h * 2,
        ),
    ]
}

/// The tensor of `run` whose size is closest to `requested` bytes.
pub fn likely_request(run: &RunConfig, requested: u64) -> Request {
    let candidates = candidates(run, requested);
    let distance = |size: u64| (size.max(1) as f64 / requested.max(1) as f64).ln().abs();
    let (index, (tensor, bytes)) = candidates
        .iter()
        .enumerate()
        .min_by(|x, y| distance(x.1.1).total_cmp(&distance(y.1.1)))
        .expect("candidates");
    let built_by = match (index, run.stack, unsloth_logits_of(run)) {
        (0, Stack::Unsloth, UnslothLogits::MicroBatchFp32)
        | (1, Stack::Unsloth, UnslothLogits::PerSequenceFp32) => {
            Some(format!("unsloth {}", run.versions.unsloth))
        }
        _ => None,
    };
    Request {
        requested,
        tensor: tensor.clone(),
        bytes: *bytes,
        matches: distance(*bytes) <= 0.25_f64.ln_1p(),
        older_trainers_only: index <= 1,
        built_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    #[test]
    fn the_seed_articles_request_is_the_2025_fp32_logits() {
        let mut run = RunConfig::example(catalog::find("google/gemma-3-1b-it").unwrap().arch);
        run.micro_batch = 8;
        run.num_generations = 8;
        run.completion_len = 768;
        let request = likely_request(&run, (6.01 * (1u64 << 30) as f64) as u64);
        let text = request.sentence();
        assert!(text.contains("fp32 logits (8 x 769 x 262144"), "{text}");
        assert!(request.matches && request.older_trainers_only);
    }
}
