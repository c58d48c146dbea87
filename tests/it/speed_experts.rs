//! The experts' path in transformers' `generate` as each trainer calls it (issue 31), from the
//! binary end to end: gpt-oss-20b generating without vLLM, 8 completions of 512 tokens on an
//! A100. TRL generates with the model in training mode, where transformers 4.56's
//! `GptOssExperts.forward` loops over the experts the rows hit (each hit's 22 operators in every
//! layer, and a host sync at each); Unsloth's `for_inference` generates in eval, every expert
//! in one compiled block; transformers 5 groups the hit experts in `grouped_mm` in either mode
//! (`crates/grpofit-core/src/time/experts.rs`). And the KV cache TRL's training-mode `generate`
//! loses to gradient checkpointing before trl 0.22 (`time/generate_mode.rs`).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::estimate_80gib;

/// The two runs' `[lora]` and `[grpo]` tables, the same for TRL and Unsloth.
macro_rules! adapters_and_grpo {
    () => {
        r#"[lora]
r = 4
lora_alpha = 8
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]

[grpo]
use_vllm = false
per_device_train_batch_size = 8
num_generations = 8
max_prompt_length = 64
max_completion_length = 512
"#
    };
}

const TRL: &str = concat!(
    r#"[grpofit]
stack = "trl"
gpu = "A100 80GB SXM"
trl_version = "TRL"
transformers_version = "TRANSFORMERS"

[model]
model_name_or_path = "openai/gpt-oss-20b"
dtype = "bfloat16"

"#,
    adapters_and_grpo!()
);

const UNSLOTH: &str = concat!(
    r#"[grpofit]
stack = "unsloth"
gpu = "A100 80GB SXM"
trl_version = "0.22.2"
unsloth_version = "2025.10.4"
transformers_version = "4.56.2"

[model]
model_name = "openai/gpt-oss-20b"
max_seq_length = 576
load_in_4bit = false

"#,
    adapters_and_grpo!()
);

fn phase(text: &str, what: &str, phase: &str) -> f64 {
    let v = estimate_80gib(text, &[], what);
    v["step_time"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == phase)
        .unwrap()["seconds"]
        .as_f64()
        .unwrap()
}

fn generation(text: &str, what: &str) -> f64 {
    phase(text, what, "generation")
}

fn trl(trl: &str, transformers: &str) -> String {
    TRL.replace("\"TRL\"", &format!("\"{trl}\""))
        .replace("TRANSFORMERS", transformers)
}

#[test]
fn trl_generates_gpt_oss_through_the_expert_loop_and_unsloth_through_every_expert() {
    let looped = generation(&trl("0.22.2", "4.56.2"), "trl 0.22.2, transformers 4.56.2");
    let dense = generation(UNSLOTH, "unsloth 2025.10.4");
    let grouped = generation(&trl("1.15.0", "5.17.0"), "trl 1.15.0, transformers 5.17.0");
    // 8 rows hit about 21 of the 32 experts a layer: the loop reads two thirds of the experts'
    // 38 GB a step but dispatches 24 x 21 x 22 more operators, 11,000 a step (0.11 s) against
    // the 19 ms the unread experts would take on an A100
    assert!(looped > 2.0 * dense, "loop {looped} s, dense {dense} s");
    // grouped_mm reads what the loop reads with a fixed count of operators; every expert's
    // weights, read by the dense path, take longer
    assert!(grouped < dense, "grouped {grouped} s, dense {dense} s");
    assert!(
        grouped < looped / 2.0,
        "grouped {grouped} s, loop {looped} s"
    );
}

/// TRL before 0.22 leaves gradient checkpointing on around `generate`, in training mode, and
/// transformers 4.53's `GradientCheckpointingLayer` then drops every layer's KV cache: each
/// decode step reads no KV (`time/generate_mode.rs`). trl 0.22.2 turns checkpointing off there.
#[test]
fn trl_before_0_22_with_checkpointing_generates_without_its_kv_cache() {
    let run = |trl_version: &str, checkpointing: bool| {
        let text = trl(trl_version, "4.54.1")
            .replace("openai/gpt-oss-20b", "Qwen/Qwen3-8B")
            .replace(
                "max_completion_length = 512",
                "max_completion_length = 4096",
            )
            .replace(
                "[grpo]\n",
                &format!("[grpo]\ngradient_checkpointing = {checkpointing}\n"),
            );
        generation(
            &text,
            &format!("trl {trl_version}, checkpointing {checkpointing}"),
        )
    };
    let (on, off) = (run("0.21.0", true), run("0.21.0", false));
    assert!(on < off, "checkpointed {on} s, not {off} s");
    let (on, off) = (run("0.22.2", true), run("0.22.2", false));
    assert!(
        (on - off).abs() < 1e-9 * off,
        "0.22: {on} s against {off} s"
    );
}

/// The training and scoring passes take the same release's path, in training mode: on
/// transformers 5.17 a Qwen3-30B-A3B layer's experts run `grouped_mm`, 26 kernels forward and
/// 29 backward whatever the hits, where 4.56's loop dispatches 12 and 20 for each of the 128
/// experts a micro-batch's tokens hit (`time/experts.rs` `pass_ops`). The compute and the bytes
/// are the same: the passes lose the loop's operators only.
#[test]
fn a_moe_runs_passes_take_their_transformers_experts_path() {
    let run = |transformers: &str| {
        let text = trl("1.15.0", transformers)
            .replace("openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B")
            .replace(
                "[grpo]\n",
                "[grpo]\nbeta = 0.04\ngradient_checkpointing = true\n",
            )
            .replace("A100 80GB SXM", "H100 SXM");
        let what = format!("Qwen3-30B-A3B, transformers {transformers}");
        (
            phase(&text, &what, "training"),
            phase(&text, &what, "scoring"),
        )
    };
    let (looped, grouped) = (run("4.56.2"), run("5.17.0"));
    // the loop's 128 x (12 x 2 + 20) operators a layer and micro-batch, 270,000 over 48 layers,
    // 2.7 s of host dispatch at 10 us each, against grouped_mm's 81 a layer (training 3.29 s
    // against 0.61 s, scoring 0.91 against 0.18 when this was written)
    assert!(
        grouped.0 < looped.0 / 2.0,
        "training: grouped {} s, loop {} s",
        grouped.0,
        looped.0
    );
    assert!(
        grouped.1 < looped.1 / 2.0,
        "scoring: grouped {} s, loop {} s",
        grouped.1,
        looped.1
    );
}
