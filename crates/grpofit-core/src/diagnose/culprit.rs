//! Which tensor of a run most likely made an out-of-memory request, by its size.

use crate::memory::by_version::unsloth_logits_of;
use crate::memory::step::allocator::{round_request, segment_size};
use crate::memory::step::unsloth_step;
use crate::run::versions::UnslothLogits;
use crate::run::{RunConfig, Stack};
use crate::units::format_size;

/// How far a request may be from what PyTorch's allocator asks for a tensor of the run's own
/// shapes and still be that tensor: the message prints two decimals (0.5 % at 1.00 GiB or MiB),
/// and a tensor's rows may be one position more or fewer than the run's lengths (`K` or `K + 1`,
/// 1.6 % at 64 tokens). 3 % keeps both and leaves no room to solve for a length: a request the run's
/// shapes do not give is no tensor of the run's.
pub const MATCH_TOLERANCE: f64 = 0.03;

/// The tensor of a run whose size is closest to an out-of-memory request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub requested: u64,
    /// the tensor, in words, with its shape
    pub tensor: String,
    pub bytes: u64,
    /// the request is what PyTorch's allocator asks for this tensor, within [`MATCH_TOLERANCE`]
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
                "no tensor of this run's shapes is {} (closest: {} = {})",
                format_size(self.requested),
                self.tensor,
                format_size(self.bytes)
            )
        }
    }
}

/// `candidates`' index of transformers' generation KV cache.
const GENERATION_KV: usize = 4;

/// The tensors of `run`, each named with its shape at the run's own lengths (prompt +
/// completion, micro-batch, vocabulary, hidden sizes), and whether only the trainers of 2025
/// build it (the first two).
fn candidates(run: &RunConfig) -> [(String, u64); 13] {
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
    // Unsloth 2025's loss multiplies K + 1 hidden rows by the LM head and upcasts them to fp32
    // (unsloth_zoo 2025.5.2 `grpo_compute_loss`, memory/step/unsloth_step.rs `logits_pair`)
    let positions = k + 1;
    [
        // the trainers of 2025 (Unsloth before its fused log-probs) held these
        (
            format!(
                "the micro-batch's fp32 logits ({b} x {positions} x {v} x 4 bytes; Unsloth 2025.3 to 2025.7 made it)"
            ),
            b * positions * v * 4,
        ),
        (
            format!(
                "one sequence's fp32 logits ({positions} x {v} x 4 bytes; Unsloth 2025's loss makes it a sequence at a time)"
            ),
            positions * v * 4,
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

/// Which of the 2025 trainers' tensors (`candidates`' first two) the run's release builds: the
/// micro-batch's fp32 logits, one sequence's, or neither.
fn built_2025(run: &RunConfig) -> Option<usize> {
    match (run.stack, unsloth_logits_of(run)) {
        (Stack::Unsloth, UnslothLogits::MicroBatchFp32) => Some(0),
        (Stack::Unsloth, UnslothLogits::PerSequenceFp32) => Some(1),
        _ => None,
    }
}

/// The tensor of `run` whose allocation is closest to `requested` bytes. `in_force`: the run's
/// trainer releases are known (pinned, read from the environment, or implied by those): then a
/// tensor only the trainers of 2025 build is a candidate only when the run's release builds it,
/// and none is attributed to a release the run does not run. Those two are Unsloth's own loss
/// (unsloth_zoo's `grpo_compute_loss`): a run on the trl stack never builds them.
pub fn likely_request(run: &RunConfig, requested: u64, in_force: bool) -> Request {
    let candidates = candidates(run);
    let built = built_2025(run);
    // what PyTorch's caching allocator asks the driver for a tensor of `bytes` (the "Tried to
    // allocate" figure: c10 CUDACachingAllocator `get_allocation_size` of `round_size`)
    let asked = |bytes: u64| segment_size(round_request(bytes));
    let distance = |size: u64| (asked(size) as f64 / requested.max(1) as f64).ln().abs();
    let (index, (tensor, bytes)) = candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| match *i {
            0 | 1 => run.stack == Stack::Unsloth && (!in_force || built == Some(*i)),
            // transformers' generation KV cache: only where the trained model generates itself
            GENERATION_KV => !run.generation.uses_vllm(),
            _ => true,
        })
        .min_by(|x, y| distance(x.1.1).total_cmp(&distance(y.1.1)))
        .expect("candidates");
    let built_by = (built == Some(index)).then(|| format!("unsloth {}", run.versions.unsloth));
    Request {
        requested,
        tensor: tensor.clone(),
        bytes: *bytes,
        matches: distance(*bytes) <= MATCH_TOLERANCE.ln_1p(),
        older_trainers_only: index <= 1,
        built_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn seed_run(completion: u64) -> RunConfig {
        let mut run = RunConfig::example(catalog::find("google/gemma-3-1b-it").unwrap().arch);
        // the seed article's run: Unsloth's Gemma 3 GRPO notebook
        run.stack = Stack::Unsloth;
        run.micro_batch = 8;
        run.num_generations = 8;
        run.completion_len = completion;
        run
    }

    #[test]
    fn the_seed_articles_request_is_the_2025_fp32_logits() {
        let request = likely_request(&seed_run(768), (6.01 * (1u64 << 30) as f64) as u64, false);
        let text = request.sentence();
        assert!(text.contains("fp32 logits (8 x 769 x 262144"), "{text}");
        assert!(request.matches && request.older_trainers_only);
    }

    /// No length is solved for: at 1024 tokens of completion the micro-batch's fp32 logits are
    /// 8.0 GiB, and a 6.01 GiB request is no tensor of the run's.
    #[test]
    fn a_request_matches_only_the_runs_own_lengths() {
        let request = likely_request(&seed_run(1024), (6.01 * (1u64 << 30) as f64) as u64, false);
        assert!(!request.matches, "{}", request.sentence());
        assert!(
            request
                .sentence()
                .contains("no tensor of this run's shapes is 6.01 GiB")
        );
        for mib in [64u64, 300, 1000, 1740] {
            let r = likely_request(&seed_run(768), mib << 20, false);
            assert!(
                !r.matches || !r.older_trainers_only,
                "{mib} MiB: {}",
                r.sentence()
            );
        }
    }

    /// A TRL run is never told Unsloth's loss made its request: 4.06 GiB against a TRL 7B run
    /// (micro-batch 8, 1024 tokens of completion) was "closest: the micro-batch's fp32 logits
    /// (...; Unsloth 2025.3 to 2025.7 made it)", with the versions not pinned.
    #[test]
    fn a_trl_run_is_never_blamed_on_unsloths_loss() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch);
        run.stack = Stack::Trl;
        run.micro_batch = 8;
        run.completion_len = 1024;
        for gib in [1.0, 4.06, 4.65, 6.0] {
            let request = likely_request(&run, (gib * (1u64 << 30) as f64) as u64, false);
            assert!(!request.older_trainers_only, "{}", request.sentence());
            assert!(
                !request.sentence().contains("Unsloth"),
                "{}",
                request.sentence()
            );
        }
    }

    /// Where vLLM generates, transformers' generation KV cache is no tensor of the run: vLLM's
    /// cache is allocated once at start-up, at its own size.
    #[test]
    fn a_vllm_run_is_never_blamed_on_transformers_generation_cache() {
        let mut run = seed_run(768);
        let kv = run.generation_rows() * run.arch.kv_bytes_for(run.sequence_len());
        run.generation = crate::run::Generation::Transformers;
        assert!(
            likely_request(&run, kv, false)
                .sentence()
                .contains("generation KV cache")
        );
        run.generation = crate::run::Generation::VllmServer;
        let text = likely_request(&run, kv, false).sentence();
        assert!(!text.contains("generation KV cache"), "{text}");
    }

    /// Today's releases in force: the 2025 tensors are no candidates, whatever their size.
    #[test]
    fn a_release_in_force_that_never_builds_a_tensor_is_not_blamed_for_it() {
        let run = seed_run(768);
        let request = likely_request(&run, (6.01 * (1u64 << 30) as f64) as u64, true);
        assert!(!request.older_trainers_only, "{}", request.sentence());
        assert!(request.built_by.is_none());
    }
}
