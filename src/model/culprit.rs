//! Which tensor of a run most likely made an out-of-memory request, by its size.

use super::run::RunConfig;
use super::units::format_size;

/// A sentence naming the tensor of `run` whose size is closest to `requested` bytes.
pub fn likely_request(run: &RunConfig, requested: u64) -> String {
    let a = &run.arch;
    let b = run.running_micro_batch();
    let (k, v, h, i) = (run.completion_len, a.vocab, a.hidden, a.intermediate);
    let t = b * run.sequence_len();
    let candidates: [(String, u64); 9] = [
        (
            format!(
                "the micro-batch's fp32 logits ({b} x {} x {v} x 4 bytes)",
                k + 1
            ),
            b * (k + 1) * v * 4,
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
    ];
    let distance = |size: u64| (size.max(1) as f64 / requested.max(1) as f64).ln().abs();
    let (name, size) = candidates
        .iter()
        .min_by(|x, y| distance(x.1).total_cmp(&distance(y.1)))
        .expect("candidates");
    if distance(*size) <= 0.25_f64.ln_1p() {
        format!(
            "{} matches {name} = {}",
            format_size(requested),
            format_size(*size)
        )
    } else {
        format!(
            "no single tensor of this run is {} (closest: {name} = {})",
            format_size(requested),
            format_size(*size)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalog;

    #[test]
    fn the_seed_articles_request_is_the_fp32_logits() {
        let mut run = RunConfig::example(catalog::find("google/gemma-3-1b-it").unwrap().arch);
        run.micro_batch = 8;
        run.num_generations = 8;
        run.completion_len = 768;
        let text = likely_request(&run, (6.01 * (1u64 << 30) as f64) as u64);
        assert!(text.contains("fp32 logits (8 x 769 x 262144"), "{text}");
    }
}
