//! Issue 29 N4: trl 0.19.1 computes the reference log-probs over the whole generation batch at
//! once (`_generate_and_score_completions` passes no `batch_size` to the reference model's
//! `_get_per_token_logps`), in the fp32 logits the trainer returns; 0.20.0 chunks them by
//! `per_device_train_batch_size`.

use grpofit_core::arch::catalog;
use grpofit_core::contract::release::Release;
use grpofit_core::memory::estimate::{GpuBudget, estimate};
use grpofit_core::run::{Generation, RunConfig};

fn peak(trl: &str, beta: f64) -> (u64, bool) {
    let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
        .expect("in the catalog")
        .arch;
    let mut run = RunConfig::example(arch);
    run.versions.trl = Release::parse(trl).expect("release");
    run.fused_logits = run.versions.trl_fused_head();
    run.generation = Generation::VllmServer;
    run.micro_batch = 8;
    run.grad_accum = 8;
    run.num_generations = 8;
    run.completion_len = 1024;
    run.max_seq_len = run.prompt_len + run.completion_len;
    run.beta = beta;
    let est = estimate(
        &run,
        GpuBudget {
            capacity: 80_000_000_000,
            used_by_others: 0,
            context: None,
        },
    );
    (est.training_peak_allocated_bytes, est.fits)
}

#[test]
fn trl_0_19_with_beta_scores_the_reference_over_the_whole_generation_batch() {
    // 64 rows x 1025 positions x 152,064 vocabulary in fp32 beside its bf16 source: 59.8 GB alone
    let (with_beta, fits) = peak("0.19.1", 0.04);
    let (without, _) = peak("0.19.1", 0.0);
    let (chunked, chunked_fits) = peak("0.20.0", 0.04);
    println!("0.19.1 beta {with_beta}, no beta {without}, 0.20.0 beta {chunked}");
    assert!(
        !fits,
        "trl 0.19.1 with beta: {with_beta} B said to fit 80 GB"
    );
    assert!(chunked_fits, "trl 0.20.0 with beta: {chunked} B");
    let whole_batch_logits = 64 * 1025 * 152_064 * 6;
    assert!(with_beta >= whole_batch_logits, "{with_beta}");
    assert!(
        with_beta > without + whole_batch_logits / 2,
        "{with_beta} vs {without}"
    );
}
