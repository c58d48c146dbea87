//! What a quantised base adds to the training step's saved tensors, end to end: bitsandbytes'
//! 8-bit matmul keeps each quantised projection's input under TRL, and Unsloth's LoRA kernels
//! save the same tensors over NF4 weights as over 16-bit ones.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{component, grpofit_in, run};

/// Qwen2.5-7B (hidden 3584, intermediate 18944, 28 layers) LoRA with TRL 0.19.1, vLLM
/// colocated, no checkpointing: 8 sequences of 256 + 1024 tokens; `{quant}` a `[model]` line.
const TRL_RUN: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256
trl_version = "0.19.1"

[model]
model_name_or_path = "Qwen/Qwen2.5-7B-Instruct"
dtype = "bfloat16"
{quant}

[lora]
r = 16
lora_alpha = 32
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 1024
gradient_checkpointing = false
use_vllm = true
vllm_mode = "colocate"
vllm_gpu_memory_utilization = 0.3
"#;

/// Qwen2.5-1.5B LoRA with Unsloth 2026.10.9 on every projection (its fused kernels), vLLM
/// colocated; `{quant}` the `load_in_4bit` value.
const UNSLOTH_RUN: &str = r#"
[grpofit]
stack = "unsloth"
gpu_memory = "79.19GiB"
max_prompt_length = 256
unsloth_version = "2026.10.9"
trl_version = "0.24.0"
vllm_version = "0.11.0"

[model]
model_name = "Qwen/Qwen2.5-1.5B-Instruct"
load_in_4bit = {quant}
fast_inference = true
gpu_memory_utilization = 0.5

[lora]
r = 16
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 512
"#;

/// `estimate --json` of a run file, in an empty Python environment.
fn estimate(text: &str, args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let venv = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--offline", "--config", "run.toml"])
        .args(args));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// A component's bytes in `estimate --json` (0 when absent).
#[test]
fn trl_eight_bit_keeps_the_inputs_of_both_norms_and_of_down_proj() {
    // MatMul8bitLt.forward, ctx.tensors = (CAt, subA, A) (bitsandbytes 0.46.0 and 0.50.2):
    // per layer and token, the attention norm's and the MLP norm's bf16 outputs (2 x 2 H) and
    // the product feeding down_proj (2 I); o_proj's input is SDPA's saved output
    let trl = |quant: &str| estimate(&TRL_RUN.replace("{quant}", quant), &["--gpu-mem", "141GiB"]);
    let (bf16, int8) = (trl(""), trl("load_in_8bit = true"));
    let (layers, tokens, h, i) = (28, 8 * (256 + 1024), 3584, 18944);
    assert_eq!(
        component(&int8, "activations") - component(&bf16, "activations"),
        layers * tokens * (2 * 2 * h + 2 * i)
    );
}

#[test]
fn unsloth_four_bit_saves_what_its_sixteen_bit_step_saves() {
    // unsloth 2026.10.9 kernels/fast_lora.py: LoRA_MLP, LoRA_QKV and LoRA_W save X (and e, g)
    // whatever the weights' format, dequantising inside matmul_lora
    let unsloth =
        |four_bit: bool| estimate(&UNSLOTH_RUN.replace("{quant}", &four_bit.to_string()), &[]);
    let (bf16, nf4) = (unsloth(false), unsloth(true));
    assert!(component(&nf4, "shared_weights") < component(&bf16, "shared_weights"));
    assert_eq!(
        nf4["training_peak_allocated_bytes"],
        bf16["training_peak_allocated_bytes"]
    );
}

#[test]
fn trl_0_22_to_0_25_upcast_a_quantised_bases_16_bit_tensors() {
    // trl 0.23.0 prepare_peft_model -> peft's prepare_model_for_kbit_training casts every
    // 16-bit parameter that is no Params4bit to fp32; for 4-bit under bf16,
    // peft_module_casting_to_bf16 casts the embedding and head back. trl 0.21.0 calls
    // get_peft_model alone. Qwen2.5-7B: embedding and untied head 152,064 x 3,584 each; per
    // layer q/k/v biases and two norms, 28 layers, and the final norm
    let weights = |trl: &str, quant: &str| {
        let text = TRL_RUN.replace("0.19.1", trl).replace("{quant}", quant);
        component(&estimate(&text, &["--gpu-mem", "141GiB"]), "base_weights")
    };
    let vectors = 28 * (3584 + 512 + 512 + 2 * 3584) + 3584;
    let head = 152_064 * 3584;
    let int8 = "load_in_8bit = true";
    assert_eq!(
        weights("0.23.0", int8) - weights("0.21.0", int8),
        2 * (vectors + 2 * head)
    );
    let nf4 = "load_in_4bit = true";
    assert_eq!(weights("0.23.0", nf4) - weights("0.21.0", nf4), 2 * vectors);
    assert_eq!(weights("0.26.2", int8), weights("0.21.0", int8));
}

#[test]
fn trl_0_26_on_trains_a_quantised_models_adapters_in_bf16() {
    // trl 0.26.2 to 1.15.0 GRPOTrainer.__init__: a quantised model's trainable parameters
    // `param.data.to(torch.bfloat16)` after get_peft_model; torch AdamW's moments follow them
    let parts = |trl: &str| {
        let text = TRL_RUN
            .replace("0.19.1", trl)
            .replace("{quant}", "load_in_4bit = true");
        let json = estimate(&text, &["--gpu-mem", "141GiB"]);
        (
            component(&json, "lora_adapters"),
            component(&json, "optimizer_states"),
        )
    };
    let (fp32, bf16) = (parts("0.25.1"), parts("0.26.2"));
    assert!(fp32.0 > 0 && fp32.1 > 0, "{fp32:?}");
    // q, k, v, o at r = 16 over 28 layers, each A and B its own block (sizes of 512 B multiples)
    assert_eq!(bf16.0 * 2, fp32.0);
    assert!(bf16.1 < fp32.1 * 51 / 100, "{bf16:?} {fp32:?}");
}
