//! Issue 29: what TRL 0.14 and 0.15 do that 0.16 does not, end to end from the binary. Each
//! behaviour is read from the wheel and traced on CPU (`calibration/cpu-trace/trl-0.14.0.jsonl`,
//! `trl-0.15.2.jsonl`).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{component, estimate_80gib};

/// Qwen2.5-0.5B with TRL, generation through transformers, beta 0.
const RUN: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256
trl_version = "TRL"

[model]
model_name_or_path = "Qwen/Qwen2.5-0.5B-Instruct"
dtype = "bfloat16"
USE_PEFT

[grpo]
per_device_train_batch_size = 8
num_generations = 8
beta = 0.0
max_completion_length = 1024
gradient_checkpointing = true
use_vllm = false
"#;

/// `estimate --json` of RUN pinned to `trl`, full fine-tuning or LoRA on every projection.
fn estimate(trl: &str, full: bool) -> serde_json::Value {
    let peft = if full {
        "use_peft = false"
    } else {
        "\n[lora]\nr = 16\nlora_alpha = 32\ntarget_modules = \"all-linear\""
    };
    let text = RUN.replace("TRL", trl).replace("USE_PEFT", peft);
    estimate_80gib(&text, &["--offline"], trl)
}

#[test]
fn trl_before_0_16_holds_a_reference_model_at_beta_0() {
    // trl 0.14.0 / 0.15.2 GRPOTrainer.__init__: `create_reference_model(model)` for every
    // non-PEFT model, whatever beta; trl 0.16.1: `if self.beta == 0.0: self.ref_model = None`
    let weights = component(&estimate("0.15.2", true), "weights");
    for old in ["0.14.0", "0.15.2"] {
        assert_eq!(
            component(&estimate(old, true), "reference_model"),
            weights,
            "{old}"
        );
    }
    assert_eq!(component(&estimate("0.16.1", true), "reference_model"), 0);
}

#[test]
fn lora_with_checkpointing_before_trl_0_16_is_warned_of() {
    // trl 0.15.2 wraps the model in PEFT before the Trainer turns checkpointing on: reentrant
    // checkpointing leaves the loss without a grad_fn (traced: every LoRA mix with
    // checkpointing fails on 0.14.0 and 0.15.2 until use_reentrant=False)
    let said = |json: &serde_json::Value| {
        json["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("use_reentrant"))
    };
    assert!(said(&estimate("0.14.0", false)));
    assert!(said(&estimate("0.15.2", false)));
    assert!(!said(&estimate("0.15.2", true)));
    assert!(!said(&estimate("0.16.1", false)));
}

#[test]
fn trl_0_14_holds_its_rows_and_the_reference_head_not_five_copies() {
    // trl 0.14.0 `get_per_token_logps`: per-row log_softmax (saved), the reference pass inside
    // the step: 64 completions (8 prompts x 8) of 1024 tokens, vocabulary 151,936; rows
    // B K V x 4, the reference head's output B (K+1) V x 2 and its fp32 cast B (K+1) V x 4
    let json = estimate("0.14.0", false);
    let (b, k, v) = (64u64, 1024u64, 151_936u64);
    let want = b * k * v * 4 + b * (k + 1) * v * 6;
    assert_eq!(component(&json, "micro_batch_logits"), want);
}
