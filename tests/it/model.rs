//! Properties of the estimate over the knob space.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::arch::catalog;
use grpofit_core::memory::estimate::{GpuBudget, estimate};
use grpofit_core::run::{Checkpointing, Generation, RunConfig, Stack};
use proptest::prelude::*;

const GPU: GpuBudget = GpuBudget {
    capacity: 80 << 30,
    used_by_others: 0,
    context: None,
};

fn run(model: &str, seqs: u64, completion: u64, rank: u64, gc: bool, stack: Stack) -> RunConfig {
    let mut r = RunConfig::example(catalog::find(model).unwrap().arch);
    r.stack = stack;
    r.micro_batch = seqs;
    r.num_generations = seqs;
    r.grad_accum = 1;
    r.completion_len = completion;
    r.max_seq_len = r.prompt_len + completion;
    r.lora_rank = rank;
    r.checkpointing = if gc {
        Checkpointing::On
    } else {
        Checkpointing::Off
    };
    r
}

const MODELS: [&str; 4] = [
    "Qwen/Qwen2.5-1.5B",
    "meta-llama/Llama-3.2-1B",
    "google/gemma-3-1b-it",
    "microsoft/Phi-3-mini-4k-instruct",
];

proptest! {
    #[test]
    /// The training step only: Unsloth's scoring pass sizes its mini-batches from the free memory
    /// with a rounding that is not monotone (`autotune_batch_and_chunks`: 16 rows go in one
    /// forward of 16, 18 rows in two of 9), and above 24.5 GiB its log-prob kernel switches to
    /// smaller tiles at 4096 rows; so Unsloth runs here generate without vLLM (no scoring pass)
    /// on a 24 GiB card (tiled kernel throughout).
    fn more_of_any_knob_never_needs_less(m in 0usize..4, seqs in 1u64..16, completion in 64u64..2048,
                                         rank in 1u64..128, gc: bool, unsloth: bool) {
        let stack = if unsloth { Stack::Unsloth } else { Stack::Trl };
        let gpu = if unsloth { GpuBudget { capacity: 24 << 30, used_by_others: 0, context: None } } else { GPU };
        let make = |seqs, completion, rank| {
            let mut r = run(MODELS[m], seqs, completion, rank, gc, stack);
            if unsloth {
                r.generation = Generation::Transformers;
            }
            r
        };
        let base = estimate(&make(seqs, completion, rank), gpu);
        for bigger in [
            make(seqs + 1, completion, rank),
            make(seqs, completion + 64, rank),
            make(seqs, completion, rank * 2),
        ] {
            let e = estimate(&bigger, gpu);
            prop_assert!(e.training_peak_allocated_bytes >= base.training_peak_allocated_bytes);
        }
        let components: u64 = base.components.iter().map(|c| c.bytes).sum();
        prop_assert_eq!(components, base.total_bytes);
        prop_assert!(base.training_peak_reserved_bytes >= base.training_peak_allocated_bytes);
    }
}

#[test]
fn checkpointing_saves_memory() {
    let on = estimate(&run(MODELS[0], 8, 1024, 16, true, Stack::Trl), GPU);
    let off = estimate(&run(MODELS[0], 8, 1024, 16, false, Stack::Trl), GPU);
    assert!(off.training_peak_allocated_bytes > 2 * on.training_peak_allocated_bytes);
}

#[test]
fn unsloth_replaces_an_indivisible_micro_batch_by_num_generations() {
    let mut r = run(MODELS[0], 1, 512, 16, true, Stack::Unsloth);
    r.num_generations = 4;
    assert_eq!(r.running_micro_batch(), 4);
    r.num_generations = 32;
    assert_eq!(r.running_micro_batch(), 32);
    let e = estimate(&r, GPU);
    assert_eq!(e.batch.running_micro_batch, 32);
    assert!(
        e.warnings.iter().any(|w| w.contains("micro-batch 32")),
        "{:?}",
        e.warnings
    );
}

#[test]
fn effective_batch_counts_gpus() {
    let mut r = run(MODELS[0], 4, 512, 16, true, Stack::Trl);
    r.grad_accum = 8;
    r.gpus = 2;
    assert_eq!(estimate(&r, GPU).batch.effective_batch, 64);
}

#[test]
fn the_remembering_estimator_gives_the_same_estimates() {
    let mut estimator = grpofit_core::memory::estimate::Estimator::new();
    for (m, seqs) in [(0, 4), (1, 2), (0, 4), (2, 8), (1, 2)] {
        let r = run(MODELS[m], seqs, 512, 16, true, Stack::Trl);
        let fresh = estimate(&r, GPU);
        let remembered = estimator.estimate(&r, GPU);
        assert_eq!(fresh.total_bytes, remembered.total_bytes);
        assert_eq!(
            fresh.training_peak_reserved_bytes,
            remembered.training_peak_reserved_bytes
        );
    }
}

#[test]
fn unsloth_max_lora_rank_rules() {
    let mut r = run(MODELS[0], 4, 512, 16, true, Stack::Unsloth);
    r.generation = grpofit_core::run::Generation::ColocatedVllm { share: 0.5 };
    r.max_lora_rank = Some(24);
    let w = estimate(&r, GPU).warnings;
    assert!(
        w.iter()
            .any(|w| w.contains("rounds max_lora_rank 24 up to 32")),
        "{w:?}"
    );
    r.lora_rank = 64;
    let w = estimate(&r, GPU).warnings;
    assert!(
        w.iter()
            .any(|w| w.contains("r = 64 exceeds max_lora_rank = 24")),
        "{w:?}"
    );
    r.max_lora_rank = Some(64);
    assert!(estimate(&r, GPU).warnings.is_empty());
}

#[test]
fn trl_vllm_refuses_a_share_larger_than_what_is_free() {
    let mut r = run("meta-llama/Llama-3.2-1B", 4, 512, 16, true, Stack::Trl);
    r.generation = grpofit_core::run::Generation::ColocatedVllm { share: 0.9 };
    let small = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 0,
        context: None,
    };
    let e = estimate(&r, small);
    assert!(!e.fits, "a vLLM that cannot start is not a fit");
    assert!(
        e.warnings
            .iter()
            .any(|w| w.contains("vLLM refuses to start: free memory on device")),
        "{:?}",
        e.warnings
    );
    r.generation = grpofit_core::run::Generation::ColocatedVllm { share: 0.5 };
    assert!(
        !estimate(&r, small)
            .warnings
            .iter()
            .any(|w| w.contains("refuse"))
    );
    let crowded = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 10 << 30,
        context: None,
    };
    assert!(
        estimate(&r, crowded)
            .warnings
            .iter()
            .any(|w| w.contains("refuse"))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn every_catalog_model_and_setting_estimates_consistently(
        m in 0usize..29, seqs in 1u64..64, prompt in 16u64..4096, completion in 16u64..8192,
        rank in 1u64..512, gc in 0usize..3, unsloth: bool, quant in 0usize..3, beta: bool,
        fused: bool, expandable: bool, share in proptest::option::of(1u64..19),
    ) {
        use grpofit_core::run::{Generation, Quant};
        let ids: Vec<&str> = catalog::ids().collect();
        let mut r = run(ids[m % ids.len()], seqs, completion, rank, gc > 0, if unsloth { Stack::Unsloth } else { Stack::Trl });
        r.prompt_len = prompt;
        r.max_seq_len = prompt + completion;
        if gc == 2 && unsloth {
            r.checkpointing = Checkpointing::UnslothOffload;
        }
        r.quant = [Quant::Bf16, Quant::Nf4, Quant::Int8][quant];
        r.beta = if beta { 0.04 } else { 0.0 };
        r.fused_logits = fused;
        r.expandable_segments = expandable;
        r.generation = share.map_or(Generation::Transformers, |s| Generation::ColocatedVllm { share: s as f64 * 0.05 });
        let e = estimate(&r, GPU);
        let sum: u64 = e.components.iter().map(|c| c.bytes).sum();
        prop_assert_eq!(sum, e.total_bytes);
        prop_assert!(e.training_peak_reserved_bytes >= e.training_peak_allocated_bytes);
        prop_assert!(e.training_peak_allocated_bytes > 0);
        let starts = e.vllm.as_ref().is_none_or(|v| v.starts);
        prop_assert_eq!(e.fits, e.total_bytes <= GPU.capacity && starts);
        for p in &e.phases {
            prop_assert!(p.total_bytes <= e.total_bytes);
            prop_assert_eq!(p.components.iter().map(|c| c.bytes).sum::<u64>(), p.total_bytes);
        }
    }
}

/// A 2025 Unsloth GRPO run of Gemma 3 1B on a 22 GB card (tests/oom/seed-article.txt) asked for 6.01 GiB of fp32 logits (8 x 769 x 262144 x 4 bytes) in
/// Unsloth's 2025 scoring pass. Unsloth 2026.10 scores hidden states one fp32 block at a time
/// (`fused_linear_logprobs`): no logits tensor of the step exceeds the 2 GiB block budget.
#[test]
fn unsloth_never_holds_a_micro_batch_of_logits() {
    let mut r = run("google/gemma-3-1b-it", 8, 1024, 16, true, Stack::Unsloth);
    r.checkpointing = Checkpointing::UnslothOffload;
    r.generation = Generation::ColocatedVllm { share: 0.6 };
    for capacity in [22u64 << 30, 80 << 30] {
        let e = estimate(
            &r,
            GpuBudget {
                capacity,
                used_by_others: 0,
                context: None,
            },
        );
        let logits = e
            .phases
            .iter()
            .flat_map(|p| &p.components)
            .filter(|c| c.name == "logits");
        for c in logits {
            assert!(
                c.bytes <= 2 << 30,
                "{} GiB of logits",
                c.bytes as f64 / (1u64 << 30) as f64
            );
        }
        let whole_batch = 8 * 1025 * r.arch.vocab * 4;
        assert!(e.training_peak_allocated_bytes < whole_batch);
    }
}

/// `use_vllm = false`: transformers' generate holds a KV cache for the whole generation batch
/// (micro-batch x steps_per_generation rows at full length) on the training GPU.
#[test]
fn generating_without_vllm_holds_the_generation_batch_cache() {
    let mut r = run("Qwen/Qwen2.5-1.5B", 8, 1024, 16, true, Stack::Trl);
    r.fused_logits = true;
    r.generation = Generation::Transformers;
    let kv = |r: &RunConfig| {
        let e = estimate(r, GPU);
        e.phases
            .iter()
            .flat_map(|p| &p.components)
            .find(|c| c.name == "generation KV cache")
            .map(|c| c.bytes)
    };
    let one = kv(&r).expect("a generation phase with its KV cache");
    assert_eq!(one, 8 * r.arch.kv_bytes_for(r.sequence_len()));
    r.grad_accum = 4;
    assert_eq!(kv(&r), Some(4 * one));
    r.generation = Generation::VllmServer;
    assert_eq!(kv(&r), None, "vLLM on its own GPUs leaves nothing here");
}

/// TRL 1.x scores the generation batch without gradients before training when vLLM generated
/// (importance-sampling correction), when `beta > 0`, or when one generation serves parts of
/// several optimizer steps (`_generate_and_score_completions`).
#[test]
fn trl_scores_before_training_when_its_trainer_does() {
    let mut r = run("Qwen/Qwen2.5-1.5B", 16, 1024, 16, true, Stack::Trl);
    r.fused_logits = true;
    r.generation = Generation::Transformers;
    assert!(!r.scores_before_training());
    r.beta = 0.04;
    assert!(r.scores_before_training());
    r.beta = 0.0;
    r.generation = Generation::VllmServer;
    assert!(r.scores_before_training());
    r.generation = Generation::Transformers;
    assert!(!r.scores_before_training());
    r.steps_per_generation = Some(2);
    r.grad_accum = 3;
    assert!(
        r.scores_before_training(),
        "one generation serving parts of two steps"
    );
}
