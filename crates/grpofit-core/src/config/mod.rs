//! The TOML run file shared by presets and exports (docs/run-file.md): strict loading with
//! errors that name the file, the line, the table, the key and the value.
//!
//! One reader per part of the file (`read_grpofit`, `read_model`, `read_lora`, `read_grpo`,
//! `read_generation`, `read_env`); `run_file` puts their parts together into the run and checks
//! it against `rules::validate`.

pub mod accelerate;
mod edit_toml;
mod error;
pub mod export;
mod export_keys;
pub mod export_set;
pub mod launch;
pub mod launch_set;
mod lines;
pub mod pyyaml;
pub mod pyyaml_resolve;
mod read;
mod read_env;
mod read_frozen;
mod read_generation;
mod read_grpo;
mod read_grpofit;
mod read_lora;
mod read_model;
mod read_spread;
mod read_time;
mod read_version_keys;
mod read_vllm_device;
pub mod recipe;
pub mod relocate;
mod serve_command;
pub mod source;
pub mod tables;
#[cfg(test)]
mod tests;
mod verify;
pub mod write_back;
mod write_error;
mod yaml_edit;

pub use error::{LoadError, Wording};
pub use read_grpofit::ASSUMED_PROMPT_LENGTH;
pub use read_model::{model_name_key, stored_weights_of};

pub use read::{Reading, RunFile, locate, parse, parse_with};

use crate::resolve::ModelResolver;
use std::path::Path;

/// Reads and parses the run file at `path`; `models` looks its model name up.
pub fn load(path: &Path, models: &dyn ModelResolver) -> Result<RunFile, LoadError> {
    load_with(path, &Reading::new(models))
}

/// Reads a run file (TOML) or a TRL recipe (`.yaml`) as `reading` says (its resolver, launch
/// config and installed versions).
pub fn load_with(path: &Path, reading: &Reading) -> Result<RunFile, LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|e| LoadError::whole_file(format!("cannot read: {e}")).in_file(&file))?;
    let text = String::from_utf8(text)
        .map_err(|_| LoadError::whole_file("not a text file (invalid UTF-8)").in_file(&file))?;
    if source::Format::of(path) == source::Format::Yaml {
        return recipe::load(&text, &file, path, reading);
    }
    let mut run = parse_with(&text, &file, path.parent(), reading)?;
    let stamp = source::Stamp::of(path, text.as_bytes());
    run.source = Some(source::SourceFile {
        path: path.to_path_buf(),
        text,
        format: source::Format::Toml,
        run: run.run.clone(),
        gpu_memory: run.gpu_memory,
        lock_effective_batch: run.lock_effective_batch,
        model_config: run.model_config.clone(),
        time: run.time.clone(),
        placed: Vec::new(),
        stamp,
    });
    Ok(run)
}
