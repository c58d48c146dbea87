#![allow(clippy::unwrap_used)]
//! Issue 21's terms from the binary: full fine-tuning at TRL's default fp32, the reference
//! model, reward models and memory the user knows is taken. The figures are derived by hand in
//! the comments (Qwen2.5-7B-Instruct: P = 7,615,616,512 parameters; Qwen2.5-1.5B-Instruct:
//! 1,543,714,304, tied, hidden 1,536).

use assert_cmd::Command;
use predicates::prelude::*;

const P: u64 = 7_615_616_512;
const OPEN_R1: &str = "examples/multi-gpu/open-r1-7plus1-h100.toml";

/// A 7B full fine-tune on one 80 GB GPU, `trl vllm-serve` on another, `dtype` unset.
const FULL_FP32: &str = r#"[vramfit]
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

fn vramfit() -> Command {
    Command::cargo_bin("vramfit").unwrap()
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

fn estimate(f: &tempfile::NamedTempFile) -> (serde_json::Value, i32) {
    let out = vramfit()
        .args(["estimate", "--no-gpu", "--json", "--config"])
        .arg(f.path())
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (v, out.status.code().unwrap())
}

fn component(role: &serde_json::Value, part: &str) -> u64 {
    role["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["part"] == part)
        .map_or(0, |c| c["bytes"].as_u64().unwrap())
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
    vramfit()
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
    vramfit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(file(&ddp).path())
        .assert()
        .stdout(
            predicate::str::contains("reward models         5.75 GiB")
                .and(predicate::str::contains("other GPU memory      2.00 GiB")),
        );
}

#[test]
fn a_reward_model_vramfit_cannot_resolve_names_the_key_and_value() {
    let text = std::fs::read_to_string(OPEN_R1).unwrap().replace(
        "max_prompt_length = 512\n",
        "max_prompt_length = 512\nreward_models = [\"./no/such-model\"]\n",
    );
    let f = file(&text);
    vramfit()
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
    vramfit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(file(&bad).path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("[vramfit] other_gpu_memory = 2"));
}
