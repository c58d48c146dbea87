//! The exported file as a Python trainer script reads it: `tomllib` loads it, and each trainer
//! table holds only keyword arguments its call accepts (TRL's `GRPOConfig`, PEFT's `LoraConfig`,
//! Unsloth's `from_pretrained` / `get_peft_model`, transformers' `from_pretrained`).

use assert_cmd::Command;
use predicates::prelude::*;

/// `trl.GRPOConfig` fields (with the `transformers.TrainingArguments` ones it inherits) that a
/// GRPO run file may carry.
const GRPO_CONFIG: &[&str] = &[
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "max_prompt_length",
    "max_completion_length",
    "beta",
    "optim",
    "use_vllm",
    "vllm_mode",
    "vllm_gpu_memory_utilization",
    "gradient_checkpointing",
    "bf16",
    "fp16",
    "learning_rate",
    "adam_beta1",
    "adam_beta2",
    "weight_decay",
    "warmup_ratio",
    "lr_scheduler_type",
    "logging_steps",
    "max_steps",
    "num_train_epochs",
    "save_steps",
    "max_grad_norm",
    "report_to",
    "output_dir",
    "temperature",
    "top_p",
    "loss_type",
    "epsilon",
    "seed",
    "scale_rewards",
    "generation_batch_size",
    "steps_per_generation",
    "num_iterations",
    "mask_truncated_completions",
    "use_liger_loss",
];
const UNSLOTH_FROM_PRETRAINED: &[&str] = &[
    "model_name",
    "max_seq_length",
    "load_in_4bit",
    "load_in_8bit",
    "fast_inference",
    "gpu_memory_utilization",
    "max_lora_rank",
    "dtype",
    "full_finetuning",
    "float8_kv_cache",
];
const UNSLOTH_GET_PEFT_MODEL: &[&str] = &[
    "r",
    "lora_alpha",
    "target_modules",
    "use_gradient_checkpointing",
    "lora_dropout",
    "bias",
    "random_state",
    "use_rslora",
    "loftq_config",
];
/// transformers' `AutoModelForCausalLM.from_pretrained` keywords (the model name is positional).
const HF_FROM_PRETRAINED: &[&str] = &[
    "model_name",
    "dtype",
    "torch_dtype",
    "load_in_4bit",
    "load_in_8bit",
];
const PEFT_LORA_CONFIG: &[&str] = &[
    "r",
    "lora_alpha",
    "target_modules",
    "task_type",
    "lora_dropout",
    "bias",
    "use_rslora",
];

fn check_with_python(path: &std::path::Path, model: &[&str], lora: &[&str]) {
    let list = |xs: &[&str]| {
        format!(
            "{{{}}}",
            xs.iter()
                .map(|x| format!("'{x}'"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let script = format!(
        "import tomllib,sys\ncfg=tomllib.load(open(sys.argv[1],'rb'))\n\
         for table,known in (('grpo',{}),('model',{}),('lora',{})):\n\
         \x20   extra=set(cfg[table])-known\n\
         \x20   assert not extra, (table, extra)\n\
         g=cfg['grpo']\n\
         assert isinstance(g['per_device_train_batch_size'],int) and isinstance(g['beta'],float)\n\
         print('ok', sorted(cfg))",
        list(GRPO_CONFIG),
        list(model),
        list(lora)
    );
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap()
    );
}

#[test]
fn exports_load_in_python_with_only_real_keyword_arguments() {
    let dir = tempfile::tempdir().unwrap();
    for preset in ["8gb", "16gb", "24gb", "141gb"] {
        let path = dir.path().join(format!("{preset}.toml"));
        Command::cargo_bin("vramfit")
            .unwrap()
            .args(["--no-gpu", "estimate", "--preset", preset, "--export"])
            .arg(&path)
            .assert()
            .code(0);
        check_with_python(&path, UNSLOTH_FROM_PRETRAINED, UNSLOTH_GET_PEFT_MODEL);
        // the same run for TRL
        let trl = dir.path().join(format!("{preset}-trl.toml"));
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("stack = \"unsloth\"", "stack = \"trl\"");
        let unsloth_only = [
            "fast_inference",
            "gpu_memory_utilization = ",
            "use_gradient_checkpointing",
            "max_lora_rank",
        ];
        let text: String = text
            .lines()
            .filter(|l| !unsloth_only.iter().any(|k| l.starts_with(k)))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.path().join("in.toml"), text).unwrap();
        Command::cargo_bin("vramfit")
            .unwrap()
            .args(["--no-gpu", "estimate", "--config"])
            .arg(dir.path().join("in.toml"))
            .arg("--export")
            .arg(&trl)
            .assert()
            // TRL holds two copies of the weights: the tier may be too small, the file is written anyway
            .code(predicates::ord::eq(0).or(predicates::ord::eq(3)));
        check_with_python(&trl, HF_FROM_PRETRAINED, PEFT_LORA_CONFIG);
    }
}
