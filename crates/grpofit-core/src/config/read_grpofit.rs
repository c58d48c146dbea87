//! `[grpofit]`: what only grpofit reads: the card's memory, how many cards, where the model's
//! `config.json` is, how long the prompts are, and which vLLM the run uses.

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::run::VllmVersion;
use crate::run::implied::{self, Resolved};
use crate::run::knobs::Knob;
use crate::run::versions::{Installed, Origin, Package, Pinned, Refused};
use crate::units::parse_gpu_size;
use std::path::{Path, PathBuf};
use toml::Value;

/// grpofit's own assumption when a file does not say how long the dataset's prompts are: it is
/// no trainer key (TRL 1.x removed `max_prompt_length`), and 512 tokens covers GSM8K- and
/// NuminaMath-style prompts with a system prompt.
pub const ASSUMED_PROMPT_LENGTH: u64 = 512;

/// What `[grpofit]` says.
pub(super) struct Grpofit {
    /// the card's memory in bytes, when the file names it
    pub gpu_memory: Option<u64>,
    pub gpus: u64,
    pub lock_effective_batch: bool,
    /// the `config.json` to take the architecture from, beside the run file when relative
    pub model_config: Option<PathBuf>,
    pub prompt_len: u64,
    pub vllm_version: VllmVersion,
    /// each package's version and where it came from
    pub versions: Vec<Pinned>,
    /// said when the prompts' length was assumed
    pub note: Option<String>,
}

/// Reads `[grpofit]`; `dir` is the run file's folder, `pins` the versions [`versions`] resolved.
pub(super) fn read_grpofit(
    t: &Tables,
    dir: Option<&Path>,
    pins: Vec<Pinned>,
) -> Result<Grpofit, LoadError> {
    let prompt_len = t.knob(Knob::PromptLength)?;
    let vllm = pins
        .iter()
        .find(|p| p.package == Package::Vllm)
        .map_or_else(VllmVersion::default, |p| VllmVersion {
            major: p.version.major,
            minor: p.version.minor,
        });
    Ok(Grpofit {
        gpu_memory: gpu_memory(t)?,
        gpus: t.knob(Knob::Gpus)?.unwrap_or(1),
        lock_effective_batch: t
            .boolean(T::Grpofit, "lock_effective_batch")?
            .unwrap_or(true),
        model_config: t
            .text(T::Grpofit, "model_config")?
            .map(|path| beside(dir, path)),
        prompt_len: prompt_len.unwrap_or(ASSUMED_PROMPT_LENGTH),
        vllm_version: vllm,
        versions: pins,
        note: prompt_len.is_none().then(|| format!(
            "`[grpofit] max_prompt_length` not given: prompts of up to {ASSUMED_PROMPT_LENGTH} tokens assumed (set it to your dataset's longest prompt)"
        )),
    })
}

/// `gpu_memory`: a size in quotes with its unit.
fn gpu_memory(t: &Tables) -> Result<Option<u64>, LoadError> {
    let key = "gpu_memory";
    t.get(T::Grpofit, key)?
        .map(|v| match v {
            Value::String(s) => parse_gpu_size(s).map_err(|e| t.wrong(T::Grpofit, key, format!("\"{s}\""), e.to_string())),
            Value::Integer(_) | Value::Float(_) => Err(t.wrong(
                T::Grpofit,
                key,
                v,
                format!("write the size in quotes with its unit, e.g. \"{v}GiB\" (or \"{v}B\" for bytes)"),
            )),
            _ => Err(t.wrong(T::Grpofit, key, v, "expected a size in quotes, e.g. \"24GiB\"")),
        })
        .transpose()
}

/// `path`, taken from the run file's folder when relative.
fn beside(dir: Option<&Path>, path: &str) -> PathBuf {
    let path = PathBuf::from(path);
    match dir {
        Some(d) if path.is_relative() => d.join(path),
        _ => path,
    }
}

/// The command line's versions (`--trl-version` ...), else `trl_version`, `unsloth_version`,
/// `transformers_version`, `vllm_version` (e.g. "0.15.2"), each else the environment's, else
/// implied by those, else grpofit's default (`implied::resolve`).
pub(super) fn versions(
    t: &Tables,
    flags: &[(Package, String)],
    installed: &Installed,
) -> Result<Resolved, LoadError> {
    let mut given: Vec<(Package, String, Origin)> = flags
        .iter()
        .map(|(p, v)| (*p, v.clone(), Origin::CommandLine(p.flag())))
        .collect();
    for p in Package::ALL {
        if let Some(v) = t.text(T::Grpofit, p.key())? {
            given.push((p, v.to_string(), Origin::RunFile));
        }
    }
    implied::resolve(&given, installed, t.stack).map_err(|r| refused(t, r))
}

/// The `[grpo]` keys the TRL release in force does not take (its rung of the contract ladder):
/// that TRL would refuse them; grpofit reads them as the targeted release does.
pub(super) fn version_notes(t: &Tables) -> Vec<String> {
    let trl = t.versions.trl;
    let versions = super::read_version_keys::call_versions(&t.pins, t.stack);
    t.keys_of(T::Grpo)
        .into_iter()
        .filter(|key| !crate::contract::accepts::accepts(crate::contract::Call::GrpoConfig, key, &versions))
        // retired keys have their own note
        .filter(|key| crate::contract::retired(T::Grpo, key, t.stack).is_none())
        .map(|key| {
            format!(
                "`[grpo] {key}`: trl {trl}'s GRPOConfig does not take it (read from the {} wheel, with transformers {}'s TrainingArguments){}; trl {trl} with transformers {} refuses this file at launch",
                crate::contract::ladder::rung_of(trl).map_or_else(String::new, |r| format!("trl {r}")),
                versions.transformers,
                super::read_version_keys::taken_by(crate::contract::Call::GrpoConfig, key, t.stack),
                versions.transformers
            )
        })
        .collect()
}

/// A version refused: on its line when the file gave it, else naming the METADATA it was read from.
fn refused(t: &Tables, r: Refused) -> LoadError {
    let key = r.package.key();
    match r.origin {
        Origin::CommandLine(flag) => {
            LoadError::whole_file(format!("{flag} {}: {}", r.text, r.reason))
        }
        Origin::Environment(path) => LoadError::whole_file(format!(
            "{} {} installed in the Python environment ({path}) is {}; set `[grpofit] {key}` in the run file to the release to estimate for",
            r.package.name(),
            r.text,
            r.reason
        )),
        _ => t.wrong(
            T::Grpofit,
            key,
            format!("\"{}\"", r.text),
            if r.reason.starts_with("older") {
                format!("{}; pin a release in that range", r.reason)
            } else {
                r.reason
            },
        ),
    }
}
