//! A run file's text read into a run: strict TOML, every table by its reader, the rules checked.

use super::accelerate::Overlay;
use super::error::LoadError;
use super::lines::{Lines, line_of_offset};
use super::tables::Tables;
use super::{read_env, read_frozen, read_generation, read_grpo, read_lora, read_model};
use super::{read_grpofit, read_spread, read_time, source};
use crate::resolve::{ModelResolver, ModelSource};
use crate::run::RunConfig;
use crate::run::rules;
use crate::run::versions::{Installed, Package, Pinned, stack_versions};
use std::path::{Path, PathBuf};

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
    /// `[env]`, as `grpofit run` sets it for the training command
    pub env: Vec<(String, String)>,
    /// the user's file it was read from, which a write edits in place (`None` for a preset)
    pub source: Option<source::SourceFile>,
    /// the trainer versions the run is estimated for, and where each came from
    pub versions: Vec<Pinned>,
    /// what the user must know about those versions: a release newer than the newest
    /// modelled, a combination its requirements forbid (`run::implied`)
    pub warnings: Vec<String>,
    /// what the file says about time: the card, the completions' mean length, the steps
    pub time: crate::time::TimeKeys,
    /// `[grpo] bf16` as the file writes it (None: the trainer's default), which
    /// `hardware::precision` sets against the card
    pub bf16: Option<bool>,
}

/// What a read takes beside the text: where model names are looked up (`models`: the cache,
/// the catalog, the Hub, whatever the caller allows), the launch config's spread (`overlay`:
/// `--launch`, `--num-processes`) and the trainer versions of the user's Python environment
/// for those the file does not pin (`installed`).
pub struct Reading<'a> {
    pub models: &'a dyn ModelResolver,
    pub overlay: Overlay,
    pub installed: Installed,
    /// versions the command line pins (`--trl-version` ...), before the file's
    pub pins: Vec<(Package, String)>,
}

impl<'a> Reading<'a> {
    /// Only a resolver: no launch config, and grpofit's target versions for what is not pinned.
    pub fn new(models: &'a dyn ModelResolver) -> Reading<'a> {
        Reading {
            models,
            overlay: Overlay::default(),
            installed: Installed::default(),
            pins: Vec::new(),
        }
    }
}

/// Parses a run file's text; `dir` resolves a relative `model_config` path. `file` names the
/// text in errors (its path, or `preset 24gb`); `models` looks its model name up.
pub fn parse(
    text: &str,
    file: &str,
    dir: Option<&Path>,
    models: &dyn ModelResolver,
) -> Result<RunFile, LoadError> {
    parse_with(text, file, dir, &Reading::new(models))
}

/// [`parse`], read as `reading` says (resolver, launch config, installed versions).
pub fn parse_with(
    text: &str,
    file: &str,
    dir: Option<&Path>,
    reading: &Reading,
) -> Result<RunFile, LoadError> {
    let root: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        LoadError::whole_file(format!("not valid TOML: {}", e.message().trim()))
            .on_line(e.span().map(|span| line_of_offset(text, span.start)))
            .in_file(file)
    })?;
    let lines = Lines::new(text);
    Tables::new(&root, &lines)
        .and_then(|mut tables| {
            let resolved = read_grpofit::versions(&tables, &reading.pins, &reading.installed)?;
            let pins = resolved.pins;
            tables.versions = stack_versions(&pins);
            tables.pins = pins.clone();
            tables.check_keys_at(&super::read_version_keys::call_versions(
                &pins,
                tables.stack,
            ))?;
            let notes = read_grpofit::version_notes(&tables);
            tables.notes.extend(notes);
            let notes = super::read_version_keys::pinned_key_notes(&tables, &pins);
            tables.notes.extend(notes);
            let notes = super::read_version_keys::retired_notes(&tables, &pins);
            tables.notes.extend(notes);
            let mut file = run_file(&tables, dir, pins, reading)?;
            file.warnings = resolved.warnings;
            Ok(file)
        })
        .map_err(|e| e.in_file(file))
}

/// The 1-based line of `[table]`'s `key = ...`, or of the `[table]` header itself.
pub fn locate(text: &str, table: &str, key: Option<&str>) -> Option<usize> {
    Lines::new(text).of(table, key)
}

/// The run the tables describe, checked against the rules every run keeps.
fn run_file(
    t: &Tables,
    dir: Option<&Path>,
    pins: Vec<Pinned>,
    reading: &Reading,
) -> Result<RunFile, LoadError> {
    let grpofit = read_grpofit::read_grpofit(t, dir, pins)?;
    let model = read_model::read_model(t, grpofit.model_config.as_deref(), reading.models)?;
    let grpo = read_grpo::read_grpo(t)?;
    let lora = read_lora::read_lora(t, &model.arch, model.quant)?;
    let env = read_env::read_env(t);
    let env_vars = read_env::env_vars(t)?;
    let generating = read_generation::read_generation(t, env.unsloth_standby)?;
    let spread = read_spread::read_spread(t)?;
    let vllm_server = read_spread::read_vllm_server(t)?;
    let frozen = read_frozen::read_frozen(t, reading.models)?;
    let time = read_time::read_time(t)?;
    let notes: Vec<String> = t
        .notes
        .iter()
        .cloned()
        .chain([env.note, grpo.note, grpofit.note].into_iter().flatten())
        .collect();
    let mut run = RunConfig {
        stack: t.stack,
        arch: model.arch,
        model_name: model.name,
        quant: model.quant,
        gpus: grpofit.gpus,
        micro_batch: grpo.micro_batch,
        grad_accum: grpo.grad_accum,
        num_generations: grpo.num_generations,
        prompt_len: grpofit.prompt_len,
        completion_len: grpo.completion_len,
        max_seq_len: model.max_seq_len,
        lora_rank: lora.rank,
        lora_alpha: lora.alpha,
        max_lora_rank: model.max_lora_rank,
        lora_targets: lora.targets,
        modules_to_save: lora.modules_to_save,
        lora_dropout: lora.dropout,
        checkpointing: lora.checkpointing,
        optimizer: grpo.optimizer,
        beta: grpo.beta,
        generation: generating.generation,
        expandable_segments: env.expandable_segments,
        unsloth_standby: env.unsloth_standby,
        fused_logits: grpo.fused_logits,
        liger_loss: grpo.liger_loss,
        vllm_kv_fp8: generating.vllm_kv_fp8,
        vllm_sleep: generating.vllm_sleep,
        steps_per_generation: grpo.steps_per_generation,
        generation_batch_size: grpo.generation_batch_size,
        num_iterations: grpo.num_iterations,
        vllm_version: grpofit.vllm_version,
        versions: t.versions,
        vllm_max_num_seqs: generating.vllm_max_num_seqs,
        vllm_max_num_batched_tokens: generating.vllm_max_num_batched_tokens,
        standby_keeps_share: env.standby_keeps_share,
        stored_weights: model.stored_weights,
        vllm_tensor_parallel: generating.vllm_tensor_parallel,
        full_finetuning: lora.full,
        spread,
        vllm_server,
        cast_lm_head_to_fp32: grpo.cast_lm_head_to_fp32,
        fp16: grpo.fp16,
        reward_models: frozen.reward_models,
        other_gpu_memory: frozen.other_gpu_memory,
        pad_to_multiple_of: grpo.pad_to_multiple_of,
        attention: read_model::attention(t)?,
    };
    reading
        .overlay
        .apply(&mut run)
        .map_err(|e| LoadError::whole_file(e.to_string()))?;
    rules::validate(&run).map_err(|broken| broken_rule(t, &run, broken))?;
    Ok(RunFile {
        run,
        gpu_memory: grpofit.gpu_memory,
        lock_effective_batch: grpofit.lock_effective_batch,
        model_config: grpofit.model_config,
        model_source: model.source,
        notes,
        env: env_vars,
        source: None,
        versions: grpofit.versions,
        warnings: Vec::new(),
        time,
        bf16: grpo.bf16,
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
