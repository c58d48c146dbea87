#![allow(clippy::unwrap_used)]
//! Multi-GPU runs from the binary: roles, sharding, the fit's sharding step and the launch set.

use crate::common::component;
use assert_cmd::Command;
use predicates::prelude::*;

const OPEN_R1: &str = "examples/multi-gpu/open-r1-7plus1-h100.toml";

fn grpofit() -> Command {
    Command::cargo_bin("grpofit").unwrap()
}

fn json(args: &[&str]) -> (serde_json::Value, i32) {
    let out = grpofit().args(args).arg("--no-gpu").output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap();
    (v, out.status.code().unwrap())
}

/// `file` with `from` replaced by `to`, in a temporary file.
fn variant(from: &str, to: &str) -> tempfile::NamedTempFile {
    let text = std::fs::read_to_string(OPEN_R1).unwrap();
    assert!(text.contains(from), "{from}");
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text.replace(from, to)).unwrap();
    f
}

#[test]
fn a_single_gpu_run_has_one_training_role() {
    let (v, code) = json(&["estimate", "--preset", "24gb", "--json"]);
    assert_eq!(code, 0);
    let roles = v["roles"].as_array().unwrap();
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0]["role"], "training");
    assert_eq!(roles[0]["gpus"], 1);
    assert_eq!(roles[0]["total_bytes"], v["total_bytes"]);
    assert_eq!(roles[0]["fits"], v["fits"]);
}

#[test]
fn open_r1_full_fine_tune_on_7_plus_1_h100s_fits_per_role() {
    let (v, code) = json(&["estimate", "--config", OPEN_R1, "--json"]);
    assert_eq!(code, 0, "{v}");
    let roles = v["roles"].as_array().unwrap();
    assert_eq!(
        roles
            .iter()
            .map(|r| (r["role"].as_str().unwrap(), r["gpus"].as_u64().unwrap()))
            .collect::<Vec<_>>(),
        vec![("training", 7), ("vllm_server", 1)]
    );
    assert!(roles.iter().all(|r| r["fits"] == true));
    // the training rank holds a 1/7 shard of the 16-bit weights: 2 x 7.62B / 7
    let p = v["parameters"].as_u64().unwrap();
    assert_eq!(component(&roles[0], "weights"), 2 * p / 7);
    // the vLLM server holds the whole 16-bit model and a KV cache
    assert!(component(&roles[1], "vllm_weights") >= 2 * p);
    assert!(component(&roles[1], "vllm_kv_cache") > 0);
    // and the text names the sharding
    grpofit()
        .args(["estimate", "--config", OPEN_R1, "--no-gpu"])
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains(
                "DeepSpeed ZeRO-3: weights, gradients and optimizer states sharded 1/7",
            )
            .and(predicate::str::contains("vLLM server (1 GPU), each GPU:")),
        );
}

#[test]
fn the_same_model_full_fine_tuned_on_one_h100_does_not_fit() {
    let one = variant("gpus = 7\n", "gpus = 1\n");
    let (v, code) = json(&[
        "estimate",
        "--config",
        one.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["roles"][0]["fits"], false);
}

#[test]
fn on_ddp_it_does_not_fit_and_fit_shards_it() {
    let ddp = variant(
        "engine = \"deepspeed\"\nzero_stage = 3",
        "engine = \"ddp\"\nzero_stage = 0",
    );
    let path = ddp.path().to_str().unwrap();
    let (v, code) = json(&["estimate", "--config", path, "--json"]);
    assert_eq!(code, 3, "{v}");
    // every rank holds weights (2P), gradients and DDP's buckets (2P + 2P), AdamW's bf16 moments (4P)
    let p = v["parameters"].as_u64().unwrap();
    assert_eq!(component(&v["roles"][0], "weights"), 2 * p);
    let (fitted, code) = json(&["fit", "--config", path, "--json"]);
    assert_eq!(code, 0, "{fitted}");
    let change = &fitted["changes"][0];
    assert_eq!(change["lever"], "sharding", "{fitted}");
    assert!(
        change["to"]
            .as_str()
            .unwrap()
            .starts_with("DeepSpeed ZeRO-"),
        "{change}"
    );
    // nothing else moves: sharding changes no training number
    assert_eq!(fitted["changes"].as_array().unwrap().len(), 1);
}

#[test]
fn the_launch_set_parses_and_names_the_right_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launch");
    grpofit()
        .args(["estimate", "--config", OPEN_R1, "--no-gpu", "--export-dir"])
        .arg(&out)
        .assert()
        .code(0);
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
    let ds: serde_json::Value = serde_json::from_str(&read("ds_config.json")).unwrap();
    assert_eq!(ds["zero_optimization"]["stage"], 3);
    assert_eq!(
        ds["zero_optimization"]["offload_optimizer"]["device"],
        "none"
    );
    let yaml = read("accelerate.yaml");
    for line in [
        "distributed_type: DEEPSPEED",
        "num_processes: 7",
        "num_machines: 1",
        "  deepspeed_config_file: ds_config.json",
    ] {
        assert!(yaml.lines().any(|l| l == line), "{line} in\n{yaml}");
    }
    let sh = read("launch.sh");
    assert!(
        sh.contains("CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct"),
        "{sh}"
    );
    assert!(sh.contains("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch --config_file accelerate.yaml train_trl.py run.toml"), "{sh}");
    // the run file reloads to the same estimate
    let again = out.join("run.toml");
    let (a, _) = json(&["estimate", "--config", OPEN_R1, "--json"]);
    let (b, _) = json(&["estimate", "--config", again.to_str().unwrap(), "--json"]);
    assert_eq!(a["roles"], b["roles"]);
    // a second export without --force writes nothing and says which file is in the way
    let before = read("run.toml");
    grpofit()
        .args(["estimate", "--config", OPEN_R1, "--no-gpu", "--export-dir"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists; nothing written"));
    assert_eq!(read("run.toml"), before);
}

#[test]
fn bad_spread_keys_name_the_key_and_value() {
    for (from, to, says) in [
        (
            "engine = \"deepspeed\"",
            "engine = \"horovod\"",
            "[distributed] engine = \"horovod\"",
        ),
        ("zero_stage = 3", "zero_stage = 4", "zero_stage = 4"),
        (
            "offload_param = \"none\"",
            "offload_param = \"nvme\"",
            "offload_param = \"nvme\"",
        ),
        (
            "gpus = 1\ntensor",
            "gpus = 3\ntensor",
            "[vllm_server] gpus = 3",
        ),
        (
            "engine = \"deepspeed\"",
            "engine = \"deepspeed\"\nstage = 3",
            "unknown key `[distributed] stage`",
        ),
    ] {
        let f = variant(from, to);
        grpofit()
            .args(["estimate", "--no-gpu", "--config"])
            .arg(f.path())
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
    }
}

/// open-r1's GRPO recipes that ran on a node of 8 x H100 (tests/recipes/README.md): each is
/// predicted to fit, every role of it.
#[test]
fn open_r1_recipes_that_ran_are_predicted_to_fit() {
    let mut seen = 0;
    for entry in std::fs::read_dir("tests/recipes").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let (v, code) = json(&["estimate", "--config", path.to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{}: {v}", path.display());
        assert_eq!(
            v["roles"].as_array().unwrap().len(),
            2,
            "{}",
            path.display()
        );
        seen += 1;
    }
    assert_eq!(seen, 3);
}

/// The 7B recipe's model, fully fine-tuned on one H100 with nothing to shard over: 2P weights +
/// 18P of ZeRO's states (deepspeed's own estimate on one GPU) is 150 GB alone.
#[test]
fn the_7b_recipe_on_a_single_h100_does_not_fit() {
    let text = std::fs::read_to_string("tests/recipes/r1-distill-qwen-7b-zero3.toml").unwrap();
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text.replace("gpus = 7\n", "gpus = 1\n")).unwrap();
    let (v, code) = json(&["estimate", "--config", f.path().to_str().unwrap(), "--json"]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["roles"][0]["fits"], false);
    assert_eq!(v["roles"][1]["fits"], true);
}

/// accelerate.yaml's keys, two levels: `key` and `section.key` for indented lines.
fn yaml_keys(text: &str) -> Vec<(Option<String>, String)> {
    let mut section = None;
    let mut keys = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(':'))
    {
        let key = line.trim().split(':').next().unwrap().to_string();
        if line.starts_with("  ") {
            keys.push((section.clone(), key));
        } else {
            if line.trim_end().ends_with(':') {
                section = Some(key.clone());
            }
            keys.push((None, key));
        }
    }
    keys
}

/// Every key of the exported accelerate.yaml and ds_config.json is one accelerate's and
/// DeepSpeed's own config classes read (the contract, extracted from their pinned packages).
#[test]
fn launch_files_hold_only_keys_accelerate_and_deepspeed_read() {
    use grpofit_core::contract::launch_keys;
    for (engine, stage) in [("deepspeed", 3), ("deepspeed", 2), ("fsdp", 3), ("ddp", 0)] {
        let f = variant(
            "engine = \"deepspeed\"\nzero_stage = 3\noffload_optimizer = \"none\"",
            &format!("engine = \"{engine}\"\nzero_stage = {stage}\noffload_optimizer = \"cpu\""),
        );
        let dir = tempfile::tempdir().unwrap();
        grpofit()
            .args(["estimate", "--no-gpu", "--config"])
            .arg(f.path())
            .arg("--export-dir")
            .arg(dir.path())
            .assert()
            .stderr(predicate::str::contains("wrote run.toml"));
        let yaml = std::fs::read_to_string(dir.path().join("accelerate.yaml")).unwrap();
        for (section, key) in yaml_keys(&yaml) {
            let known = match section.as_deref() {
                None => launch_keys("accelerate.ClusterConfig"),
                Some(s) => launch_keys(&format!("accelerate.{s}")),
            };
            assert!(known.contains(&key.as_str()), "{engine}: {section:?} {key}");
        }
        let ds = dir.path().join("ds_config.json");
        assert_eq!(ds.exists(), engine == "deepspeed");
        if !ds.exists() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(ds).unwrap()).unwrap();
        let top = launch_keys("deepspeed.config");
        let zero = launch_keys("deepspeed.DeepSpeedZeroConfig");
        let offload = launch_keys("deepspeed.DeepSpeedZeroOffloadConfig");
        for (k, inner) in v.as_object().unwrap() {
            assert!(top.contains(&k.as_str()), "ds_config.json {k}");
            if k == "zero_optimization" {
                for (z, sub) in inner.as_object().unwrap() {
                    assert!(zero.contains(&z.as_str()), "zero_optimization.{z}");
                    if let Some(o) = sub.as_object() {
                        for key in o.keys() {
                            assert!(offload.contains(&key.as_str()), "{z}.{key}");
                        }
                    }
                }
            }
        }
    }
}

/// TRL colocate with `vllm_tensor_parallel_size`: vLLM spans that many training GPUs, each
/// holding its part of the weights; the group must divide the training processes.
#[test]
fn colocated_tensor_parallel_splits_vllm_weights() {
    let file = |tp: u64, gpus: u64| {
        let text = format!(
            "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\ngpus = {gpus}\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-7B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.4\nvllm_tensor_parallel_size = {tp}\nvllm_max_model_length = 2048\n"
        );
        let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    };
    let weights = |tp| {
        let f = file(tp, 4);
        let (v, code) = json(&["estimate", "--config", f.path().to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{v}");
        v["vllm"]["weights_bytes"].as_u64().unwrap()
    };
    let (one, two) = (weights(1), weights(2));
    assert_eq!(two, one / 2);
    let bad = file(3, 4);
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(bad.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "vllm_tensor_parallel_size = 3 must divide the 4 training processes",
        ));
}

/// A full fine-tune that no knob fits on one card: `fit` names the fewest cards of that kind,
/// the model sharded with ZeRO-3 over them.
#[test]
fn fit_names_the_fewest_gpus_that_fit() {
    let one = variant("gpus = 7\n", "gpus = 1\n");
    let (v, code) = json(&["fit", "--config", one.path().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    let change = &v["changes"][0];
    assert_eq!(
        (change["key"].as_str(), change["from"].as_str()),
        (Some("gpus"), Some("1"))
    );
    let gpus: u64 = change["to"].as_str().unwrap().parse().unwrap();
    assert!((2..=7).contains(&gpus), "{change}");
    // one fewer does not fit with fit's 5 % to spare: the count is the smallest
    let fewer = variant("gpus = 7\n", &format!("gpus = {}\n", gpus - 1));
    let path = fewer.path().to_str().unwrap();
    let (v, _) = json(&["estimate", "--config", path, "--json"]);
    let role = &v["roles"][0];
    let total = role["total_bytes"].as_f64().unwrap();
    let capacity = role["capacity_bytes"].as_f64().unwrap();
    assert!(total > 0.95 * capacity, "{role}");
}

/// Unsloth refuses its vLLM under FSDP2 (`raise_if_fast_inference_under_fsdp2`): so does the
/// loader, naming it.
#[test]
fn unsloth_vllm_under_fsdp_is_refused_as_unsloth_does() {
    let text = grpofit::presets::built_in("24gb").unwrap().to_string()
        + "\n[distributed]\nengine = \"fsdp\"\n";
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    grpofit()
        .args(["estimate", "--no-gpu", "--config"])
        .arg(f.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not supported with FSDP2"));
}

/// On cards too small for one vLLM server GPU to hold the 7B model's weights and its profile
/// run, `fit` widens the server by tensor parallelism before adding training GPUs.
#[test]
fn fit_gives_the_vllm_server_the_gpus_it_needs_to_start() {
    let path = "tests/recipes/r1-distill-qwen-7b-zero3.toml";
    let args = ["estimate", "--config", path, "--gpu-mem", "20GiB", "--json"];
    let (v, code) = json(&args);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["roles"][1]["fits"], false);
    let (v, code) = json(&["fit", "--config", path, "--gpu-mem", "20GiB", "--json"]);
    assert_eq!(code, 0, "{v}");
    let first = &v["changes"][0];
    assert_eq!(first["lever"], "vllm_server_gpus", "{first}");
    assert!(first["to"].as_str().unwrap().ends_with("TP 2"), "{first}");
    let roles = v["estimate"]["roles"].as_array().unwrap();
    assert!(roles.iter().all(|r| r["fits"] == true), "{roles:?}");
    assert_eq!(roles[1]["gpus"], 2);
}

#[test]
fn cpu_offload_is_described_by_its_real_cost() {
    // open-r1 on DDP, on GPUs small enough that only the optimizer offloaded to CPU fits
    let ddp = variant(
        "engine = \"deepspeed\"\nzero_stage = 3",
        "engine = \"ddp\"\nzero_stage = 0",
    );
    let file = grpofit_core::config::load(ddp.path(), &grpofit_core::resolve::Offline::from_env())
        .unwrap();
    let mut est = grpofit_core::memory::estimate::Estimator::new();
    let mut seen = None;
    for gib in (8..80u64).rev() {
        let gpu = grpofit_core::memory::estimate::GpuBudget {
            capacity: gib << 30,
            used_by_others: 0,
            context: None,
        };
        if let grpofit_core::fit::FitOutcome::Fitted { changes, .. } =
            grpofit_core::fit::fit(&file.run, gpu, 0.05, &mut est)
            && let Some(c) = changes.iter().find(|c| c.to.contains("offloaded to CPU"))
        {
            seen = Some(c.clone());
            break;
        }
    }
    let change = seen.expect("some GPU size fits only with the optimizer offloaded");
    assert!(
        change.trade_off.contains("host memory")
            && change.trade_off.contains("PCIe")
            && !change.trade_off.contains("more communication"),
        "{}",
        change.trade_off
    );
}

/// Issue 29 N5 / issue 30 item 2: TRL's colocated vLLM loads the whole checkpoint on every rank
/// (trl 1.15.0 `trl/generation/vllm_generation.py` `VLLMGeneration._init_vllm`:
/// `LLM(model=model.name_or_path, tensor_parallel_size=...)`; the same call in trl 0.19.1 and
/// 0.23.0 `GRPOTrainer.__init__`), whatever ZeRO-3 or FSDP does to the trainer's copy: vLLM's
/// weights are not divided by the training GPUs. A 14B LoRA run under ZeRO-3 on four cards
/// with a 0.3 share cannot start vLLM (its 27.7 GiB of weights exceed the 23.8 GiB share).
#[test]
fn zero3_colocated_vllm_holds_the_whole_model_per_rank() {
    let file = |engine: &str| {
        let text = format!(
            "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\ngpus = 4\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-14B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\ngradient_checkpointing = true\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\nvllm_max_model_length = 2048\n\n[distributed]\n{engine}\n"
        );
        let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    };
    let run = |engine: &str| {
        let f = file(engine);
        json(&["estimate", "--config", f.path().to_str().unwrap(), "--json"]).0
    };
    let ddp = run("engine = \"ddp\"");
    let whole = ddp["vllm"]["weights_bytes"].as_u64().unwrap();
    // the 16-bit checkpoint: 14.8e9 parameters x 2 bytes
    assert!(whole > 29_000_000_000, "{whole}");
    for engine in [
        "engine = \"deepspeed\"\nzero_stage = 3",
        "engine = \"fsdp\"",
    ] {
        let v = run(engine);
        assert_eq!(
            v["vllm"]["weights_bytes"].as_u64().unwrap(),
            whole,
            "{engine}"
        );
        assert_eq!(v["vllm"]["starts"], false, "{engine}: {v}");
        assert_eq!(v["fits"], false, "{engine}");
    }
}

fn phase<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap_or_else(|| panic!("no {name} phase in {v}"))
}

/// Issue 29 N6: with PEFT under ZeRO-3, pushing the weights to `trl vllm-serve` gathers every
/// parameter at once (trl 1.15.0 `trl/generation/vllm_generation.py`
/// `VLLMGeneration._iter_named_params`: "we must gather the full model at once before merging",
/// `self._dist.gather_params(list(model.parameters()))`, called by `sync_weights` in server
/// mode): each rank holds the whole 16-bit model for the sync. open-r1's 7B shape with LoRA
/// and a micro-batch of 4 on 7 ranks peaks there (16.0 GiB, where the step alone is 9.3 GiB);
/// a 32B run gathers 61 GiB per rank.
#[test]
fn lora_zero3_server_sync_gathers_the_whole_model() {
    let text = std::fs::read_to_string(OPEN_R1)
        .unwrap()
        .replace("use_peft = false", "use_peft = true")
        .replace(
            "per_device_train_batch_size = 16",
            "per_device_train_batch_size = 4",
        )
        + "\n[lora]\nr = 16\n";
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    let (v, code) = json(&["estimate", "--config", f.path().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["peak_phase"], "generation", "{v}");
    let sync = phase(&v, "generation");
    let whole = 2 * v["parameters"].as_u64().unwrap();
    let held = component(sync, "base_weights") + component(sync, "gathered_weights");
    assert!(held.abs_diff(whole) < whole / 100, "{held} vs {whole}");
    assert!(component(phase(&v, "training"), "gathered_weights") < whole / 5);
}

/// Issue 29 N7: under FSDP, PEFT's sync to the colocated vLLM is one module at a time:
/// `gather_params` is a no-op there (trl 1.15.0 `trl/distributed.py`) and
/// `VLLMGeneration._iter_fsdp2_params` materialises one parameter (`full_tensor()`) per step
/// (`_sync_fsdp_params_to_vllm` with `summon_full_params(recurse=False)` from trl 0.18.2). The
/// generation phase holds FSDP's own live layers, not the whole model: 7B LoRA on two GPUs,
/// 2.9 GiB gathered where 7.1 GiB (half the model) was counted.
#[test]
fn lora_fsdp_colocated_sync_is_one_module_at_a_time() {
    let text = "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\ngpus = 2\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-7B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 4\nnum_generations = 8\nmax_completion_length = 1024\ngradient_checkpointing = true\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\nvllm_max_model_length = 2048\n\n[distributed]\nengine = \"fsdp\"\n";
    let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    let (v, code) = json(&["estimate", "--config", f.path().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    let generating = component(phase(&v, "generation"), "gathered_weights");
    let training = component(phase(&v, "training"), "gathered_weights");
    assert_eq!(generating, training);
    let whole = 2 * v["parameters"].as_u64().unwrap();
    assert!(generating < whole / 4, "{generating}");
}

/// The server's queue warning counts the requests its KV cache holds at the run's own length
/// (prompt + completion), as vLLM's paged cache gives each request blocks for the tokens it
/// holds: open-r1's 1.5B demo recipe on 7 + 1 H100s (448 completions, `max_model_len` the
/// model's 32768) has room for over 1500 of its 1536-token sequences, and no warning; the 7B
/// run's 896 completions against about 618 are queued, and the warning says so in those terms.
#[test]
fn the_server_queue_warning_counts_sequences_at_the_runs_length() {
    let small = variant("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct");
    let text = std::fs::read_to_string(small.path()).unwrap();
    let text = text.replace("max_model_len = 4096\n", "").replace(
        "gradient_accumulation_steps = 8",
        "gradient_accumulation_steps = 4",
    );
    std::fs::write(small.path(), text).unwrap();
    let (v, code) = json(&[
        "estimate",
        "--config",
        small.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{v}");
    let server = &v["roles"][1];
    assert_eq!(server["vllm"]["max_model_len"], 32768, "{server}");
    let warned = |v: &serde_json::Value| {
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w.as_str())
            .find(|w| w.contains("queues the rest"))
            .map(str::to_string)
    };
    assert_eq!(warned(&v), None, "{}", v["warnings"]);
    let (v, code) = json(&["estimate", "--config", OPEN_R1, "--json"]);
    assert_eq!(code, 0, "{v}");
    let said = warned(&v).expect("the 7B run's 896 completions are queued");
    assert!(
        said.contains("sequences of the run's 1536 tokens") && said.contains("send 896"),
        "{said}"
    );
}
