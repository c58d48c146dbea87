#![allow(clippy::unwrap_used)]
//! Issue 21's terms from the binary: full fine-tuning at TRL's default fp32, the reference
//! model, reward models and memory the user knows is taken. The figures are derived by hand in
//! the comments (Qwen2.5-7B-Instruct: P = 7,615,616,512 parameters; Qwen2.5-1.5B-Instruct:
//! 1,543,714,304, tied, hidden 1,536).

use crate::common::component;
use assert_cmd::Command;
use predicates::prelude::*;

const P: u64 = 7_615_616_512;
const OPEN_R1: &str = "examples/multi-gpu/open-r1-7plus1-h100.toml";

/// A 7B full fine-tune on one 80 GB GPU, `trl vllm-serve` on another, `dtype` unset.
const FULL_FP32: &str = r#"[grpofit]
stack = "trl"
gpu_memory = "79.19GiB"
gpus = 1
max_prompt_length = 512

[model]
model_name_or_path = "Qwen/Qwen2.5-7B-Instruct"
use_peft = false

[grpo]
per_device_train_batch_size = 4
gradient_accumulation_steps = 4
num_generations = 4
max_completion_length = 1024
gradient_checkpointing = true
use_vllm = true
vllm_mode = "server"
beta = 0.0
"#;

fn grpofit() -> Command {
    Command::cargo_bin("grpofit").unwrap()
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

fn estimate(f: &tempfile::NamedTempFile) -> (serde_json::Value, i32) {
    let out = grpofit()
        .args(["estimate", "--no-gpu", "--json", "--config"])
        .arg(f.path())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (v, out.status.code().unwrap())
}

#[test]
fn full_fine_tuning_at_trls_default_dtype_holds_16_bytes_a_parameter() {
    // create_model_from_path loads float32 when `dtype` is unset; one process, so no DDP
    // wrapper and no buckets: weights 4P = 30,462,466,048, gradients 4P, AdamW's fp32 moments
    // 8P = 60,924,932,096. 16P = 113.48 GiB of states alone: it does not fit 79.19 GiB.
    let f = file(FULL_FP32);
    let (v, code) = estimate(&f);
    assert_eq!(code, 3, "{v}");
    let training = &v["roles"][0];
    assert_eq!(component(training, "weights"), 30_462_466_048);
    assert_eq!(component(training, "gradients"), 30_462_466_048);
    assert_eq!(component(training, "optimizer_states"), 60_924_932_096);
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(f.path())
        .assert()
        .code(3)
        .stdout(
            predicate::str::contains("model weights        28.37 GiB")
                .and(predicate::str::contains("optimizer states     56.74 GiB"))
                .and(predicate::str::contains("DOES NOT FIT"))
                .and(predicate::str::contains(
                    "full fine-tuning in fp32 (TRL's default dtype; DDP casts nothing)",
                )),
        );
    // in bf16 on one GPU: 2P + 2P + 4P, no DDP buckets: 8P = 60,924,932,096 B
    let bf16 =
        file(&FULL_FP32.replace("use_peft = false", "use_peft = false\ndtype = \"bfloat16\""));
    let (v, _) = estimate(&bf16);
    let t = &v["roles"][0];
    let states = ["weights", "gradients", "optimizer_states"]
        .iter()
        .map(|p| component(t, p))
        .sum::<u64>();
    assert_eq!(states, 60_924_932_096);
}

#[test]
fn the_reference_model_is_counted_with_beta_above_zero() {
    // one GPU, bf16: GRPOTrainer loads a second whole model, 2P = 15,231,233,024 B
    let bf16 = FULL_FP32
        .replace("use_peft = false", "use_peft = false\ndtype = \"bfloat16\"")
        .replace("beta = 0.0", "beta = 0.04");
    let (v, _) = estimate(&file(&bf16));
    assert_eq!(component(&v["roles"][0], "reference_model"), 15_231_233_024);
    // open-r1's ZeRO-3 on 7 GPUs: prepare_deepspeed keeps ZeRO-3, a 1/7 bf16 shard:
    // 15,231,233,024 / 7 = 2,175,890,432 B; the run still fits
    let text = std::fs::read_to_string(OPEN_R1).unwrap();
    let (v, code) = estimate(&file(&text.replace("beta = 0.0", "beta = 0.04")));
    assert_eq!(code, 0, "{v}");
    assert_eq!(component(&v["roles"][0], "reference_model"), 2 * P / 7);
    // ZeRO-2: prepare_deepspeed drops it to stage 0, whole on every rank
    let z2 = text
        .replace("beta = 0.0", "beta = 0.04")
        .replace("zero_stage = 3", "zero_stage = 2");
    let (v, _) = estimate(&file(&z2));
    assert_eq!(component(&v["roles"][0], "reference_model"), 2 * P);
    // beta = 0: none
    let (v, _) = estimate(&file(&text));
    assert_eq!(component(&v["roles"][0], "reference_model"), 0);
}

#[test]
fn reward_models_and_other_memory_are_parts_of_each_training_gpu() {
    // Qwen2.5-1.5B-Instruct as AutoModelForSequenceClassification(num_labels=1): its
    // 1,543,714,304 parameters (tied: the embedding stays) + a 1,536 x 1 score head, in the
    // run's bf16: 2 x 1,543,715,840 = 3,087,431,680 B on each of the 7 ZeRO-3 ranks, twice
    // listed = 6,174,863,360 B (prepare_deepspeed shards each at ZeRO-3: 3,087,431,680 / 7 =
    // 441,061,668, twice 882,123,336)
    let text = std::fs::read_to_string(OPEN_R1).unwrap().replace(
        "max_prompt_length = 512\n",
        "max_prompt_length = 512\nreward_models = [\"Qwen/Qwen2.5-1.5B-Instruct\", \"Qwen/Qwen2.5-1.5B-Instruct\"]\nother_gpu_memory = \"2GiB\"\n",
    );
    let (v, code) = estimate(&file(&text));
    assert_eq!(code, 0, "{v}");
    let training = &v["roles"][0];
    assert_eq!(component(training, "reward_model"), 2 * (3_087_431_680 / 7));
    assert_eq!(component(training, "other_memory"), 2 << 30);
    // under DDP each rank holds them whole
    let ddp = text.replace(
        "engine = \"deepspeed\"\nzero_stage = 3",
        "engine = \"ddp\"\nzero_stage = 0",
    );
    let (v, _) = estimate(&file(&ddp));
    assert_eq!(component(&v["roles"][0], "reward_model"), 6_174_863_360);
    // the screen's words
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(file(&ddp).path())
        .assert()
        .stdout(
            predicate::str::contains("reward models         5.75 GiB")
                .and(predicate::str::contains("other GPU memory      2.00 GiB")),
        );
}

#[test]
fn a_reward_model_grpofit_cannot_resolve_names_the_key_and_value() {
    let text = std::fs::read_to_string(OPEN_R1).unwrap().replace(
        "max_prompt_length = 512\n",
        "max_prompt_length = 512\nreward_models = [\"./no/such-model\"]\n",
    );
    let f = file(&text);
    grpofit()
        .args(["estimate", "--no-gpu", "--offline", "--config"])
        .arg(f.path())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("reward_models")
                .and(predicate::str::contains("no/such-model")),
        );
    let bad = std::fs::read_to_string(OPEN_R1).unwrap().replace(
        "max_prompt_length = 512\n",
        "max_prompt_length = 512\nother_gpu_memory = 2\n",
    );
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(file(&bad).path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("[grpofit] other_gpu_memory = 2"));
}

/// Qwen3-30B-A3B on Unsloth in 4-bit with the seven projections targeted, generation by
/// transformers.
const QWEN3_MOE_UNSLOTH: &str = r#"[grpofit]
stack = "unsloth"
gpu_memory = "79.19GiB"
gpus = 1
max_prompt_length = 256

[model]
model_name = "Qwen/Qwen3-30B-A3B"
max_seq_length = 1024
load_in_4bit = true
fast_inference = false

[lora]
r = 16
lora_alpha = 32
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

[grpo]
per_device_train_batch_size = 4
gradient_accumulation_steps = 1
num_generations = 4
max_completion_length = 768
"#;

#[test]
fn unsloth_packs_the_experts_in_4_bit_and_puts_lora_on_them() {
    // NF4 of a tensor of n weights: n/2 + n/64 absmax bytes + n/16,384 x 4 (tensor_bytes).
    // gate_up_proj 402,653,184: 201,326,592 + 6,291,456 + 98,304 = 207,716,352; down_proj
    // 201,326,592: 100,663,296 + 3,145,728 + 49,152 = 103,858,176; x 48 layers =
    // 14,955,577,344 B = 13.93 GiB (16-bit: 603,979,776 x 2 x 48 = 57,982,058,496 B = 54.00 GiB)
    let f = file(QWEN3_MOE_UNSLOTH);
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(f.path())
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains(
                "13.93 GiB of expert weights, 4-bit NF4: Unsloth packs the 3-D experts",
            )
            .and(predicate::str::contains(
                "expert LoRA: Unsloth adds the experts to PEFT's target_parameters, 0.63B fp32 parameters",
            )),
        );
    let (v, _) = estimate(&f);
    let t = &v["roles"][0];
    // the experts apart, as the allocator places them (estimate.rs `block_bytes`: a tensor over
    // 10 MiB takes a whole 2 MiB segment when that wastes at most 1 MiB): gate_up_proj's
    // 207,716,352 would waste 1,998,848 and stays; down_proj's 103,858,176 rounds to 50 x 2 MiB
    // = 104,857,600. (207,716,352 + 104,857,600) x 48 = 15,003,549,696 B; with the 16-bit rest
    // under 16 GiB (was 55.6 GiB)
    let experts = component(t, "expert_weights");
    assert_eq!(experts, 15_003_549_696);
    let base = component(t, "base_weights") + experts;
    assert!(base < 16 << 30, "{base}");
    // expert LoRA: 629,145,600 fp32 parameters (moe.rs' example) = 2,516,582,400 B, each
    // tensor a whole number of MiB (16 + 12 + 6 + 16 a layer), beside the attention's
    assert_eq!(component(t, "expert_lora"), 2_516_582_400);
    assert!(component(t, "lora_adapters") > 0);
    // TRL with bitsandbytes leaves the 3-D experts in 16-bit
    let trl = QWEN3_MOE_UNSLOTH
        .replace("stack = \"unsloth\"", "stack = \"trl\"")
        .replace("model_name = ", "model_name_or_path = ")
        .replace(
            "max_seq_length = 1024\nload_in_4bit = true\nfast_inference = false",
            "load_in_4bit = true\ndtype = \"bfloat16\"",
        )
        .replace("r = 16\nlora_alpha = 32", "r = 16")
        .replace(
            "max_completion_length = 768",
            "max_completion_length = 768\nuse_vllm = false",
        );
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(file(&trl).path())
        .assert()
        .stdout(predicate::str::contains(
            "54.00 GiB of expert weights, 16-bit: on the TRL stack bitsandbytes quantises nn.Linear only",
        ));
}

#[test]
fn gpt_oss_20b_s_vllm_server_holds_its_mxfp4_weights_in_about_13_gib() {
    // moe.rs' worked example: 13,761,264,768 B (12.82 GiB), where 2 bytes a parameter said
    // 41,829,514,368 B (38.96 GiB); vllm serve's defaults on a 79 GiB card: 1024 sequences,
    // 8192 batched tokens (EngineArgs.get_batch_defaults, OPENAI_API_SERVER)
    let text = std::fs::read_to_string(OPEN_R1)
        .unwrap()
        .replace("Qwen/Qwen2.5-7B-Instruct", "openai/gpt-oss-20b");
    let (v, _) = estimate(&file(&text));
    let plan = &v["roles"][1]["vllm"];
    assert_eq!(plan["weights_bytes"], 13_761_264_768u64);
    assert_eq!(plan["max_num_seqs"], 1024);
    assert_eq!(plan["max_num_batched_tokens"], 8192);
}

#[test]
fn cast_lm_head_to_fp32_adds_two_bytes_a_head_weight() {
    // Qwen2.5-7B with LoRA: lm_head.float() takes its 152,064 x 3,584 = 544,997,376 weights
    // from 2 to 4 bytes: +1,089,994,752 B of base weights
    let lora = FULL_FP32
        .replace("use_peft = false", "use_peft = true\ndtype = \"bfloat16\"")
        .replace("[grpo]\n", "[lora]\nr = 16\n\n[grpo]\n");
    let (plain, _) = estimate(&file(&lora));
    let (cast, _) = estimate(&file(
        &lora.replace("beta = 0.0", "beta = 0.0\ncast_lm_head_to_fp32 = true"),
    ));
    let base = |v: &serde_json::Value| component(&v["roles"][0], "base_weights");
    assert_eq!(base(&cast) - base(&plain), 1_089_994_752);
}

#[test]
fn an_export_keeps_reward_models_and_other_memory() {
    let text = std::fs::read_to_string(OPEN_R1).unwrap().replace(
        "max_prompt_length = 512\n",
        "max_prompt_length = 512\nreward_models = [\"Qwen/Qwen2.5-1.5B-Instruct\"]\nother_gpu_memory = \"1.5GiB\"\n",
    );
    let f = file(&text);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launch");
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(f.path())
        .arg("--export-dir")
        .arg(&out)
        .assert()
        .code(0);
    let run = std::fs::read_to_string(out.join("run.toml")).unwrap();
    assert!(
        run.contains("reward_models = [\"Qwen/Qwen2.5-1.5B-Instruct\"]"),
        "{run}"
    );
    assert!(run.contains("other_gpu_memory = "), "{run}");
    let again = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(again.path(), &run).unwrap();
    let (a, _) = estimate(&f);
    let (b, _) = estimate(&again);
    assert_eq!(a["roles"], b["roles"]);
}
