//! Gradient accumulation, end to end from the binary: transformers' `Trainer._inner_training_loop`
//! zeroes the gradients only after the optimizer step, so with `gradient_accumulation_steps > 1`
//! the first micro-batch's gradients stay through every later one's forward and backward
//! (`memory::by_version::gradients_live_through_step`; traced: trl 1.16.0 qwen2
//! `steps_per_generation2` and `full_steps_per_generation2`, calibration/cpu-trace).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{component, estimate_80gib};

/// Qwen2.5-1.5B fully fine-tuned with TRL 1.15, generating on a vLLM server (one phase here).
const FULL: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 512
trl_version = "1.15.0"

[model]
model_name_or_path = "Qwen/Qwen2.5-1.5B-Instruct"
dtype = "bfloat16"
use_peft = false

[grpo]
per_device_train_batch_size = 8
gradient_accumulation_steps = ACCUM
steps_per_generation = 1
num_generations = 8
max_completion_length = 1024
gradient_checkpointing = true
use_vllm = true
vllm_mode = "server"
"#;

fn estimate(accum: u64) -> serde_json::Value {
    estimate_80gib(
        &FULL.replace("ACCUM", &accum.to_string()),
        &[],
        "accumulation",
    )
}

#[test]
fn accumulated_full_fine_tuning_keeps_its_gradients_beside_the_step() {
    let (one, four) = (estimate(1), estimate(4));
    let peak = |j: &serde_json::Value| j["training_peak_allocated_bytes"].as_u64().unwrap();
    let gradients = component(&four, "gradients");
    let step = component(&four, "activations") + component(&four, "logits");
    println!(
        "accumulation 1: {} B, 4: {} B; gradients {gradients}, step {step}",
        peak(&one),
        peak(&four)
    );
    // bf16 gradients of every weight (1.5B parameters)
    assert!(gradients > 3_000_000_000, "{gradients}");
    assert!(step > 0);
    // four: the step comes on top of the first micro-batch's gradients, beside the weights and
    // their optimizer states
    let held = component(&four, "weights") + component(&four, "optimizer_states") + gradients;
    assert_eq!(peak(&four), held + step);
    // one micro-batch: the step's activations are gone before every gradient exists; the
    // gradients meet only the first layer's backward (`trl::gradients_before_first_layer`)
    assert!(
        (held..held + step).contains(&peak(&one)),
        "{} against {held} + {step}",
        peak(&one)
    );
}

#[test]
fn the_breakdown_adds_up_to_the_reserved_peak_with_or_without_accumulation() {
    // without accumulation the breakdown shows the step and every gradient, which the allocated
    // peak never holds at once: the slack must not count their overlap again (it made one
    // micro-batch a step show 2.9 GB more than four)
    for accum in [1, 4] {
        let json = estimate(accum);
        let total = json["total_bytes"].as_u64().unwrap();
        let reserved = json["training_peak_reserved_bytes"].as_u64().unwrap();
        assert_eq!(
            total - component(&json, "cuda_context"),
            reserved,
            "gradient_accumulation_steps = {accum}"
        );
    }
}
