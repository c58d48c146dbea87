//! Keys an older TRL takes and TRL 1.15 retired (`vllm_device`, `vllm_dtype`,
//! `vllm_max_model_len`, ...): a file pinned to that release loads them, reads what grpofit
//! models of them, and its export writes them; on a release that lacks them they load with a
//! note naming the releases that take them; a key no modelled release takes stays unknown.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{Out, grpofit_in, run};
use grpofit_core::config::export;
use grpofit_core::run::Generation;

/// Qwen2.5-1.5B LoRA with TRL's own vLLM, written for trl 0.15.2 (its GRPOConfig's vLLM keys).
const TRL_0_15: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256
trl_version = "0.15.2"

[model]
model_name_or_path = "Qwen/Qwen2.5-1.5B-Instruct"
dtype = "bfloat16"

[lora]
r = 16

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 512
use_vllm = true
vllm_device = "auto"
vllm_dtype = "bfloat16"
vllm_gpu_memory_utilization = 0.5
vllm_max_model_len = 2048
"#;

/// `grpofit ARGS --config run.toml` on `text`.
fn on(text: &str, args: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    run(grpofit_in(dir.path()).args(args).args([
        "--config",
        "run.toml",
        "--gpu-mem",
        "80GiB",
        "--offline",
    ]))
}

fn estimate(text: &str) -> (Out, serde_json::Value) {
    let out = on(text, &["estimate", "--json"]);
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let json = serde_json::from_str(&out.stdout).unwrap();
    (out, json)
}

#[test]
fn a_file_pinned_to_trl_0_15_loads_its_own_vllm_keys() {
    let (out, json) = estimate(TRL_0_15);
    // trl 0.15.2 GRPOTrainer.__init__: LLM(max_model_len=self.args.vllm_max_model_len)
    assert_eq!(json["vllm"]["max_model_len"], 2048, "{}", out.stdout);
    assert!(!out.stderr.contains("vllm_dtype"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("read but not exported"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_same_file_on_trl_1_15_loads_with_a_note_naming_the_releases_that_take_the_key() {
    let (out, _) = estimate(&TRL_0_15.replace("0.15.2", "1.15.0"));
    assert!(
        out.stderr
            .contains("`[grpo] vllm_dtype`: trl 1.15.0's GRPOConfig does not take it")
            && out.stderr.contains("trl 0.15.2, 0.16.1, 0.17.0 take it"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("trl 0.14.0, 0.15.2, 0.16.1, 0.17.0 take it"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("`[grpo] vllm_max_model_len` is read but not exported"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_key_no_modelled_release_takes_is_still_unknown() {
    let out = on(
        &TRL_0_15.replace("vllm_dtype", "vllm_dtyp"),
        &["estimate", "--json"],
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown key `[grpo] vllm_dtyp`")
            && out.stderr.contains("did you mean"),
        "{}",
        out.stderr
    );
}

#[test]
fn vllm_device_past_the_training_gpus_is_a_gpu_of_vllms_own() {
    // trl 0.15.2 GRPOTrainer.__init__: LLM(device=vllm_device); cuda:1 with one training
    // process is another GPU, at vllm_gpu_memory_utilization of it
    let own = TRL_0_15.replace("\"auto\"", "\"cuda:1\"");
    let (_, json) = estimate(&own);
    let roles: Vec<&str> = json["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["training", "vllm_server"], "{json}");
    assert!(json["vllm"].is_null(), "{json}");
    // the training GPU's own index shares it, as colocate does
    let (_, shared) = estimate(&TRL_0_15.replace("\"auto\"", "\"cuda:0\""));
    assert!(shared["vllm"]["max_model_len"].is_u64(), "{shared}");
    let out = on(
        &TRL_0_15.replace("\"auto\"", "\"gpu1\""),
        &["estimate", "--json"],
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("vllm_device") && out.stderr.contains("\"gpu1\""),
        "{}",
        out.stderr
    );
}

/// The run file read from `text` (offline).
fn read(text: &str) -> grpofit_core::config::RunFile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, text).unwrap();
    grpofit_core::config::load(&path, &grpofit_core::resolve::Offline::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn exported(file: &grpofit_core::config::RunFile) -> String {
    export::to_toml(
        &file.run,
        &export::ExportContext {
            gpu: "test",
            gpu_memory: None,
            model_config: None,
            lock_effective_batch: false,
            estimate: None,
            time: None,
        },
    )
}

#[test]
fn an_export_pinned_to_trl_0_15_writes_the_keys_that_release_takes() {
    let file = read(TRL_0_15);
    let text = exported(&file);
    assert!(text.contains("vllm_max_model_len = 2048"), "{text}");
    // trl 0.15.2 GRPOConfig.max_prompt_length (512 by default) truncates the prompts
    assert!(text.contains("\n[grpo]\n") && text.contains("max_prompt_length = 256\n"));
    let grpo = &text[text.find("[grpo]").unwrap()..];
    assert!(grpo.contains("max_prompt_length = 256"), "{text}");
    assert!(!grpo.contains("vllm_max_model_length"), "{text}");
    // and reads back as the same run
    assert_eq!(read(&text).run, file.run);
    // a vLLM on a GPU of its own is written as trl 0.15 places it
    let own = read(&TRL_0_15.replace("\"auto\"", "\"cuda:1\""));
    assert_eq!(own.run.generation, Generation::VllmServer);
    let text = exported(&own);
    assert!(text.contains("vllm_device = \"cuda:1\""), "{text}");
    assert_eq!(read(&text).run, own.run);
}

/// The screen's sequence row on `TRL_0_15` pinned to `trl`, vLLM colocated.
fn sequence_row(trl: &str) -> String {
    let text: String = TRL_0_15
        .replace("0.15.2", trl)
        .lines()
        .filter(|l| !l.starts_with("vllm_d") && !l.starts_with("vllm_max_model_len"))
        .map(|l| match l {
            "use_vllm = true" => "use_vllm = true\nvllm_mode = \"colocate\"\n".to_string(),
            _ => format!("{l}\n"),
        })
        .collect();
    let app = crate::tui::app_of(
        &text,
        std::path::Path::new("."),
        grpofit::tui::theme::Theme::mono(),
    );
    let screen = crate::tui::screen(&app, 120, 40);
    screen
        .lines()
        .find(|l| l.contains("sequence"))
        .unwrap_or_else(|| panic!("{screen}"))
        .to_string()
}

#[test]
fn the_screen_shows_the_context_trl_0_18_to_0_25_give_the_colocated_vllm() {
    // trl 0.19.1 GRPOTrainer.__init__: LLM(max_model_len=max_prompt_length +
    // max_completion_length): 256 + 512, not the model's 32768
    let old = sequence_row("0.19.1");
    assert!(
        old.contains(" 768") && old.contains("prompt + completion"),
        "{old}"
    );
    let new = sequence_row("1.15.0");
    assert!(
        new.contains("vllm_max_model_length") && !new.contains(" 768"),
        "{new}"
    );
}

#[test]
fn a_write_back_pinned_to_trl_0_15_edits_that_releases_keys_and_drops_none() {
    let file = read(TRL_0_15);
    let source = file.source.clone().unwrap();
    let mut tuned = file.run.clone();
    tuned.max_seq_len = 1536;
    tuned.prompt_len = 200;
    let mut notes = Vec::new();
    let text = grpofit_core::config::write_back::write_back(
        Some(&source),
        &tuned,
        &export::ExportContext {
            gpu: "test",
            gpu_memory: None,
            model_config: None,
            lock_effective_batch: false,
            estimate: None,
            time: None,
        },
        &mut notes,
    )
    .unwrap();
    // the release's own key is edited in place; every key the user wrote stays
    assert!(text.contains("vllm_max_model_len = 1536"), "{text}");
    assert!(!text.contains("vllm_max_model_length"), "{text}");
    for line in TRL_0_15.lines().filter(|l| l.contains(" = ")) {
        let key = line.split(" = ").next().unwrap();
        assert!(text.contains(&format!("{key} = ")), "{key}: {text}");
    }
    let back = read(&text);
    assert_eq!((back.run.max_seq_len, back.run.prompt_len), (1536, 200));
}

#[test]
fn a_recipes_older_trl_key_is_read_as_grpoconfig_with_the_releases_named() {
    let dir = tempfile::tempdir().unwrap();
    let venv = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("recipe.yaml"),
        "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nmax_prompt_length: 256\nuse_vllm: false\nvllm_dtype: bfloat16\n",
    )
    .unwrap();
    let out = run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--config", "recipe.yaml"])
        .args(["--gpu-mem", "80GiB", "--offline"]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`[grpo] vllm_dtype`: trl 1.15.0's GRPOConfig does not take it")
            && out.stderr.contains("trl 0.15.2, 0.16.1, 0.17.0 take it"),
        "{}",
        out.stderr
    );
}

/// The roles `estimate --json` names for `text`.
fn roles(text: &str) -> (Vec<String>, serde_json::Value) {
    let (_, json) = estimate(text);
    let roles = json["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap().to_string())
        .collect();
    (roles, json)
}

/// Issue 29 N13: `vllm_device = "auto"` (GRPOConfig's default in 0.14 and 0.15) is the GPU
/// after the training processes', `cuda:{num_processes}`, on the main process only: always in
/// trl 0.14.0, and in 0.15.2 unless the machine has one GPU (`torch.cuda.device_count() == 1`:
/// `cuda:0`, shared) (`GRPOTrainer.__init__` of each). On two training GPUs the trainer's
/// GPUs hold no vLLM (37.3 GiB each was counted on an 80 GiB card at a 0.5 share).
#[test]
fn vllm_device_auto_is_the_gpu_after_the_training_processes() {
    let two = TRL_0_15.replace("trl_version", "gpus = 2\ntrl_version");
    let (r, json) = roles(&two);
    assert_eq!(r, ["training", "vllm_server"], "{json}");
    assert!(json["vllm"].is_null(), "{json}");
    // the key left out is "auto" too
    let (r, _) = roles(&two.replace("vllm_device = \"auto\"\n", ""));
    assert_eq!(r, ["training", "vllm_server"]);
    // one GPU on trl 0.15.2: cuda:0, shared with training
    let (r, json) = roles(TRL_0_15);
    assert_eq!(r, ["training"]);
    assert!(json["vllm"]["max_model_len"].is_u64(), "{json}");
    // trl 0.14.0: always the next GPU
    let old = TRL_0_15
        .replace("0.15.2", "0.14.0")
        .replace("vllm_dtype = \"bfloat16\"\n", "")
        .replace("vllm_max_model_len = 2048\n", "");
    let (r, json) = roles(&old);
    assert_eq!(r, ["training", "vllm_server"], "{json}");
}
