//! The fit solver: a run that does not fit, a case where a greedy walk pays more, and the CLI.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit_core::config;
use grpofit_core::fit::step_downs;
use grpofit_core::fit::{FitOutcome, cost_of, fit};
use grpofit_core::memory::estimate::{Estimator, GpuBudget, estimate};
use predicates::prelude::*;

/// Qwen2.5-7B in 16-bit with Unsloth on a 22 GiB card, vLLM on 90 % of free memory.
fn too_big() -> config::RunFile {
    config::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/qwen7b-unsloth-22gib.toml"),
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap()
}

fn gpu(file: &config::RunFile) -> GpuBudget {
    GpuBudget {
        capacity: file.gpu_memory.unwrap(),
        used_by_others: 0,
        context: None,
    }
}

#[test]
fn a_run_that_does_not_fit_is_brought_under_with_the_effective_batch_kept() {
    let file = too_big();
    let before = estimate(&file.run, gpu(&file));
    assert!(!before.fits, "the 7B run must not fit on 22.03 GiB");
    match fit(&file.run, gpu(&file), 0.05, &mut Estimator::new()) {
        FitOutcome::Fitted {
            run,
            estimate,
            changes,
            ..
        } => {
            assert!(estimate.total_bytes as f64 <= 0.95 * estimate.capacity_bytes as f64);
            assert_eq!(run.effective_batch(), file.run.effective_batch());
            assert_eq!(run.num_generations, file.run.num_generations);
            assert_eq!(run.sequence_len(), file.run.sequence_len());
            assert!(
                !changes.is_empty() && changes.iter().all(|c| c.bytes_saved > 0),
                "{changes:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Repeatedly pulls the lever that saves the most bytes, as a person guessing would.
fn greedy(file: &config::RunFile) -> grpofit_core::run::RunConfig {
    let mut run = file.run.clone();
    let mut est = Estimator::new();
    for _ in 0..40 {
        let e = est.estimate(&run, gpu(file));
        if e.total_bytes as f64 <= 0.95 * e.capacity_bytes as f64 {
            break;
        }
        run = step_downs(&run, gpu(file), &mut est)
            .into_iter()
            .next()
            .unwrap()
            .run;
    }
    run
}

#[test]
fn the_exact_search_beats_a_greedy_walk() {
    let file = too_big();
    let greedy_run = greedy(&file);
    let FitOutcome::Fitted { cost, run, .. } =
        fit(&file.run, gpu(&file), 0.05, &mut Estimator::new())
    else {
        panic!("the 7B run can be fitted");
    };
    let greedy_cost = cost_of(&file.run, &greedy_run);
    assert!(
        cost < greedy_cost,
        "exact {cost} ({run:?}) vs greedy {greedy_cost} ({greedy_run:?})"
    );
    // the greedy walk pulls the biggest saver (the micro-batch), the search the cheapest (vLLM's share)
    assert!(
        greedy_run.micro_batch < file.run.micro_batch,
        "{greedy_run:?}"
    );
    assert_eq!(run.micro_batch, file.run.micro_batch);
    assert_eq!(run.sequence_len(), file.run.sequence_len());
}

#[test]
fn fit_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fitted.toml");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/qwen7b-unsloth-22gib.toml");
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["--no-gpu", "fit", "--config"])
        .arg(&fixture)
        .arg("-o")
        .arg(&out)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("effective batch 16 kept"));
    let fitted = config::load(&out, &grpofit_core::resolve::Offline::from_env()).unwrap();
    assert!(estimate(&fitted.run, gpu(&fitted)).fits);
    let json = Command::cargo_bin("grpofit")
        .unwrap()
        .args(["--no-gpu", "fit", "--json", "--config"])
        .arg(&fixture)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["outcome"], "fitted");
    for c in v["changes"].as_array().unwrap() {
        assert!(
            c["key"].is_string()
                && c["from"].is_string()
                && c["to"].is_string()
                && c["bytes_saved"].is_i64()
        );
    }
    assert!(v["estimate"]["total_bytes"].is_u64());
    // nothing fits a 32B model on 8 GiB: the floors and the smallest GPU are named, exit 3
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["--no-gpu", "fit", "--preset", "141gb", "--gpu-mem", "8GiB"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("smallest GPU that would do"));
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["--no-gpu", "fit", "--headroom", "NaN"])
        .assert()
        .code(2);
}

#[test]
fn diagnose_from_the_command_line() {
    let oom = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oom");
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["diagnose", "--json"])
        .arg(oom.join("seed-article.txt"))
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("\"verdict\": \"does_not_fit\"")
                .and(predicate::str::contains("\"shortfall_bytes\"")),
        );
    // with the run file, that message's shortfall is vLLM's share's doing; the process held
    // 19.29 GiB, more than the estimate on Unsloth 2026.10 (whose log-probs never hold the
    // micro-batch's logits): the estimate falls short, and the fit keeps that room free rather
    // than call the run that crashed one that fits
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed-gemma-22gib.toml");
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["diagnose", "--json", "--config"])
        .arg(&fixture)
        .arg(oom.join("seed-article.txt"))
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("\"verdict\": \"vllm_reservation\"")
                .and(predicate::str::contains("\"estimate_short_bytes\": null").not())
                .and(predicate::str::contains("\"outcome\": \"already_fits\"").not()),
        );
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["diagnose"])
        .arg(oom.join("no-oom.txt"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no out-of-memory message"));
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["diagnose", "-"])
        .write_stdin(std::fs::read(oom.join("vllm-free-memory.txt")).unwrap())
        .assert()
        .code(0)
        .stdout(predicate::str::contains("verdict: vLLM cannot start"));
}

/// A TRL colocate run that leaves `vllm_max_model_length` unset: vLLM takes Llama 3.1's
/// 131072-token context, whose one sequence its 0.3 share cannot hold.
const TRL_LONG_CONTEXT: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256

[model]
model_name_or_path = "meta-llama/Llama-3.1-8B-Instruct"
dtype = "bfloat16"

[lora]
r = 16
lora_alpha = 32
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 1024
use_vllm = true
vllm_mode = "colocate"
"#;

/// The run uses 256 + 1024 tokens of the 131072 vLLM is given: `fit` cuts the context it
/// never uses (`vllm_max_model_length`), which costs the run nothing, rather than grow the share.
#[test]
fn a_vllm_that_cannot_start_does_not_fit_and_fit_cuts_the_context_it_never_uses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trl.toml");
    std::fs::write(&path, TRL_LONG_CONTEXT).unwrap();
    Command::cargo_bin("grpofit")
        .unwrap()
        .args(["estimate", "--gpu-mem", "80GiB", "--config"])
        .arg(&path)
        .assert()
        .code(3)
        .stdout(predicate::str::contains(
            "DOES NOT FIT: vLLM refuses to start",
        ))
        .stdout(predicate::str::contains("max_model_len 131072"));
    let file = config::load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    let h200 = GpuBudget {
        capacity: 80 << 30,
        used_by_others: 0,
        context: None,
    };
    let FitOutcome::Fitted { run, estimate, .. } =
        fit(&file.run, h200, 0.05, &mut Estimator::new())
    else {
        panic!("a shorter context lets vLLM start");
    };
    assert!(estimate.vllm.as_ref().unwrap().starts);
    let share = |r: &grpofit_core::run::RunConfig| grpofit_core::run::knobs::Knob::VllmShare.get(r);
    assert_eq!(share(&run), share(&file.run));
    let context =
        |r: &grpofit_core::run::RunConfig| grpofit_core::run::knobs::Knob::SequenceLength.get(r);
    assert_eq!(context(&run), Some(256 + 1024), "{:?}", context(&file.run));
    assert_eq!(run.sequence_len(), file.run.sequence_len());
}

#[test]
fn fit_reaches_for_4bit_weights_before_shortening_anything() {
    let text = grpofit::presets::built_in("24gb").unwrap();
    let file = config::parse(
        text,
        "24gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    // on 10 GiB a larger vLLM share is still enough (vLLM then holds the 16-bit weights); on 9
    // GiB no share leaves room for both the 16-bit weights' KV cache and the training step
    let small = GpuBudget {
        capacity: 9 << 30,
        used_by_others: 0,
        context: None,
    };
    let FitOutcome::Fitted { run, changes, .. } =
        fit(&file.run, small, 0.05, &mut Estimator::new())
    else {
        panic!("the 24 GB preset fits a 9 GiB card in 4-bit");
    };
    assert_eq!(run.quant, grpofit_core::run::Quant::Nf4, "{changes:?}");
    assert_eq!(run.sequence_len(), file.run.sequence_len());
    assert_eq!(run.num_generations, file.run.num_generations);
    assert_eq!(run.lora_rank, file.run.lora_rank);
}

/// The prompt is the dataset's, not a choice: no step down and no fit shortens it. The sequence
/// lever takes the completion down with the context, keeping the whole prompt.
#[test]
fn the_fit_never_shortens_the_prompt() {
    use grpofit_core::fit::Lever;
    let mut est = Estimator::new();
    for name in grpofit::presets::names() {
        let file = config::parse(
            grpofit::presets::built_in(name).unwrap(),
            name,
            None,
            &grpofit_core::resolve::Offline::from_env(),
        )
        .unwrap();
        for gib in [4u64, 6, 8, 12, 16] {
            let gpu = GpuBudget {
                capacity: gib << 30,
                used_by_others: 0,
                context: None,
            };
            for step in step_downs(&file.run, gpu, &mut est) {
                assert_eq!(step.run.prompt_len, file.run.prompt_len, "{name}: {step:?}");
            }
            if let FitOutcome::Fitted { run, .. } = fit(&file.run, gpu, 0.05, &mut est) {
                assert_eq!(run.prompt_len, file.run.prompt_len, "{name} on {gib} GiB");
            }
        }
    }
    // prompt 512 + completion 512 in a 1024 context: one step down the sequence is 768, and the
    // completion gives up the 256 tokens, not the prompt
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("max_prompt_length = 256", "max_prompt_length = 512")
        .replace("max_completion_length = 768", "max_completion_length = 512");
    let file = config::parse(
        &text,
        "24gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let step = step_downs(&file.run, gpu(&file), &mut est)
        .into_iter()
        .find(|s| s.change.lever == Lever::SequenceLength)
        .unwrap();
    assert_eq!(
        (
            step.run.max_seq_len,
            step.run.prompt_len,
            step.run.completion_len
        ),
        (768, 512, 256)
    );
}

#[test]
fn the_floor_lists_only_the_levers_that_apply() {
    // a full fine-tune of a 32B model without vLLM on 8 GiB: no adapter rank, no vLLM share
    let file = config::parse(
        grpofit::presets::built_in("141gb").unwrap(),
        "141gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let mut run = file.run.clone();
    run.full_finetuning = true;
    run.generation = grpofit_core::run::Generation::Transformers;
    let gpu = GpuBudget {
        capacity: 8 << 30,
        used_by_others: 0,
        context: None,
    };
    let FitOutcome::Impossible { floors, .. } = fit(&run, gpu, 0.05, &mut Estimator::new()) else {
        panic!("a 32B full fine-tune fits 8 GiB?")
    };
    assert!(!floors.is_empty());
    for f in &floors {
        assert!(
            !f.starts_with("r =")
                && !f.contains("gpu_memory_utilization")
                && !f.contains("load_in_4bit")
                && !f.contains("kv"),
            "{floors:?}"
        );
    }
}
