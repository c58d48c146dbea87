//! The TOML run file shared by presets and exports (SPEC section 4): strict loading with
//! errors that name the file, the line, the table, the key and the value.
//!
//! One reader per part of the file (`read_vramfit`, `read_model`, `read_lora`, `read_grpo`,
//! `read_generation`, `read_env`); `run_file` puts their parts together into the run and checks
//! it against `rules::validate`.

mod error;
pub mod export;
pub mod launch;
mod lines;
mod read_env;
mod read_generation;
mod read_grpo;
mod read_lora;
mod read_model;
mod read_spread;
mod read_vramfit;
pub mod tables;
#[cfg(test)]
mod tests;

pub use error::{LoadError, Wording};
pub use read_model::{model_name_key, stored_weights_of};
pub use read_vramfit::ASSUMED_PROMPT_LENGTH;

use crate::hub::ModelSource;
use crate::model::rules;
use crate::model::run::RunConfig;
use crate::model::versions::{Installed, Pinned, stack_versions};
use lines::{Lines, line_of_offset};
use std::path::{Path, PathBuf};
use tables::Tables;

/// A loaded file: the run, and the capacity it names (if any).
#[derive(Debug, Clone)]
pub struct RunFile {
    pub run: RunConfig,
    pub gpu_memory: Option<u64>,
    pub lock_effective_batch: bool,
    /// the `config.json` the architecture came from, when not the catalog
    pub model_config: Option<PathBuf>,
    /// where the architecture was read: that config.json, the Hugging Face cache or the catalog
    pub model_source: ModelSource,
    /// what the reader wants the user to know (retired keys, assumptions), in words
    pub notes: Vec<String>,
    /// `[env]`, as `vramfit run` sets it for the training command
    pub env: Vec<(String, String)>,
    /// the trainer versions the run is estimated for, and where each came from
    pub versions: Vec<Pinned>,
}

/// Loads a run file with vramfit's default versions for what it does not pin.
pub fn load(path: &Path) -> Result<RunFile, LoadError> {
    load_in(path, &Installed::default())
}

/// Loads a run file; versions it does not pin are `installed`'s, else vramfit's defaults.
pub fn load_in(path: &Path, installed: &Installed) -> Result<RunFile, LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|e| LoadError::whole_file(format!("cannot read: {e}")).in_file(&file))?;
    let text = String::from_utf8(text)
        .map_err(|_| LoadError::whole_file("not a text file (invalid UTF-8)").in_file(&file))?;
    parse_in(&text, &file, path.parent(), installed)
}

/// Parses a run file's text; `dir` resolves a relative `model_config` path. `file` names the
/// text in errors (its path, or `preset 24gb`).
pub fn parse(text: &str, file: &str, dir: Option<&Path>) -> Result<RunFile, LoadError> {
    parse_in(text, file, dir, &Installed::default())
}

/// [`parse`], with the versions of the user's environment for what the file does not pin.
pub fn parse_in(
    text: &str,
    file: &str,
    dir: Option<&Path>,
    installed: &Installed,
) -> Result<RunFile, LoadError> {
    let root: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        LoadError::whole_file(format!("not valid TOML: {}", e.message().trim()))
            .on_line(e.span().map(|span| line_of_offset(text, span.start)))
            .in_file(file)
    })?;
    let lines = Lines::new(text);
    Tables::new(&root, &lines)
        .and_then(|mut tables| {
            let pins = read_vramfit::versions(&tables, installed)?;
            tables.versions = stack_versions(&pins);
            let notes = read_vramfit::version_notes(&tables);
            tables.notes.extend(notes);
            run_file(&tables, dir, pins)
        })
        .map_err(|e| e.in_file(file))
}

/// The 1-based line of `[table]`'s `key = ...`, or of the `[table]` header itself.
pub fn locate(text: &str, table: &str, key: Option<&str>) -> Option<usize> {
    Lines::new(text).of(table, key)
}

/// The run the tables describe, checked against the rules every run keeps.
fn run_file(t: &Tables, dir: Option<&Path>, pins: Vec<Pinned>) -> Result<RunFile, LoadError> {
    let vramfit = read_vramfit::read_vramfit(t, dir, pins)?;
    let model = read_model::read_model(t, vramfit.model_config.as_deref())?;
    let grpo = read_grpo::read_grpo(t)?;
    let lora = read_lora::read_lora(t, &model.arch)?;
    let env = read_env::read_env(t);
    let env_vars = read_env::env_vars(t)?;
    let generating = read_generation::read_generation(t, env.unsloth_standby)?;
    let spread = read_spread::read_spread(t)?;
    let vllm_server = read_spread::read_vllm_server(t)?;
    let notes = t
        .notes
        .iter()
        .cloned()
        .chain([env.note, grpo.note, vramfit.note].into_iter().flatten())
        .collect();
    let run = RunConfig {
        stack: t.stack,
        arch: model.arch,
        model_name: model.name,
        quant: model.quant,
        gpus: vramfit.gpus,
        micro_batch: grpo.micro_batch,
        grad_accum: grpo.grad_accum,
        num_generations: grpo.num_generations,
        prompt_len: vramfit.prompt_len,
        completion_len: grpo.completion_len,
        max_seq_len: model.max_seq_len,
        lora_rank: lora.rank,
        lora_alpha: lora.alpha,
        max_lora_rank: model.max_lora_rank,
        lora_targets: lora.targets,
        checkpointing: lora.checkpointing,
        optimizer: grpo.optimizer,
        beta: grpo.beta,
        generation: generating.generation,
        expandable_segments: env.expandable_segments,
        unsloth_standby: env.unsloth_standby,
        fused_logits: grpo.fused_logits,
        vllm_kv_fp8: generating.vllm_kv_fp8,
        vllm_sleep: generating.vllm_sleep,
        steps_per_generation: grpo.steps_per_generation,
        generation_batch_size: grpo.generation_batch_size,
        vllm_version: vramfit.vllm_version,
        versions: t.versions,
        vllm_max_num_seqs: generating.vllm_max_num_seqs,
        vllm_max_num_batched_tokens: generating.vllm_max_num_batched_tokens,
        standby_keeps_share: env.standby_keeps_share,
        stored_weights: model.stored_weights,
        vllm_tensor_parallel: generating.vllm_tensor_parallel,
        full_finetuning: lora.full,
        spread,
        vllm_server,
    };
    rules::validate(&run).map_err(|broken| broken_rule(t, &run, broken))?;
    Ok(RunFile {
        run,
        gpu_memory: vramfit.gpu_memory,
        lock_effective_batch: vramfit.lock_effective_batch,
        model_config: vramfit.model_config,
        model_source: model.source,
        notes,
        env: env_vars,
        versions: vramfit.versions,
    })
}

/// A rule of `rules::validate` the run breaks, on the line of the knob it concerns.
fn broken_rule(t: &Tables, run: &RunConfig, broken: rules::Broken) -> LoadError {
    let Some(knob) = broken.knob else {
        return LoadError::whole_file(broken.message);
    };
    let (table, key) = knob.key(run.stack);
    let message = format!("[{}] {}", table.name(), broken.message);
    let error = t.sentence(table, key, message);
    match knob.get(run) {
        Some(v) => error.with_value(knob.show(v)),
        None => error,
    }
}
