//! The TOML run file shared by presets and exports (SPEC section 4): strict loading with
//! errors that name the file, the key and the value.

pub mod export;

use crate::model::catalog::{self, ImpliedQuant, edit_distance};
use crate::model::config_json;
use crate::model::run::{
    ALL_LINEAR, Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack,
};
use crate::model::units::parse_size;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// A run file that cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct FileError {
    pub file: String,
    pub message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for FileError {}

/// A loaded file: the run, and the capacity it names (if any).
#[derive(Debug, Clone)]
pub struct RunFile {
    pub run: RunConfig,
    pub gpu_memory: Option<u64>,
    pub lock_effective_batch: bool,
    /// the `config.json` the architecture came from, when not the catalog
    pub model_config: Option<PathBuf>,
}

const VRAMFIT_KEYS: &[&str] = &[
    "stack",
    "gpu_memory",
    "gpus",
    "model_config",
    "lock_effective_batch",
    "max_seq_length",
];
const MODEL_KEYS: &[&str] = &[
    "model_name",
    "max_seq_length",
    "load_in_4bit",
    "load_in_8bit",
    "fast_inference",
    "gpu_memory_utilization",
    "max_lora_rank",
    "dtype",
    "torch_dtype",
    "full_finetuning",
    "float8_kv_cache",
];
const LORA_KEYS: &[&str] = &[
    "r",
    "lora_alpha",
    "target_modules",
    "use_gradient_checkpointing",
    "lora_dropout",
    "bias",
    "task_type",
    "random_state",
    "use_rslora",
    "loftq_config",
];
/// `trl.GRPOConfig` fields vramfit reads or passes through untouched.
const GRPO_KEYS: &[&str] = &[
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

pub fn load(path: &Path) -> Result<RunFile, FileError> {
    let file = path.display().to_string();
    let text = std::fs::read(path).map_err(|e| FileError {
        file: file.clone(),
        message: format!("cannot read: {e}"),
    })?;
    let text = String::from_utf8(text).map_err(|_| FileError {
        file: file.clone(),
        message: "not a text file (invalid UTF-8)".into(),
    })?;
    parse(&text, &file, path.parent())
}

/// Parses a run file's text; `dir` resolves a relative `model_config` path.
pub fn parse(text: &str, file: &str, dir: Option<&Path>) -> Result<RunFile, FileError> {
    let root: Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map(|span| line_of_offset(text, span.start));
        FileError {
            file: at_line(file, line),
            message: format!("not valid TOML: {}", e.message().trim()),
        }
    })?;
    Reader { root: &root, dir }
        .run_file()
        .map_err(|message| FileError {
            file: at_line(file, locate_in_message(text, &message)),
            message,
        })
}

fn at_line(file: &str, line: Option<usize>) -> String {
    match line {
        Some(n) => format!("{file}:{n}"),
        None => file.to_string(),
    }
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line an error is about: the first `` `[table] key`` or `` `[table]`` it names.
fn locate_in_message(text: &str, message: &str) -> Option<usize> {
    let start = message.find("`[")? + 2;
    let rest = &message[start..];
    let close = rest.find(']')?;
    let table = &rest[..close];
    let key: String = rest[close + 1..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    locate(text, table, (!key.is_empty()).then_some(key.as_str()))
}

/// The 1-based line of `[table]`'s `key = ...`, or of the `[table]` header itself.
pub fn locate(text: &str, table: &str, key: Option<&str>) -> Option<usize> {
    let mut current = "";
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
            current = name.trim();
            if key.is_none() && current == table {
                return Some(i + 1);
            }
            continue;
        }
        if let Some(k) = key {
            let lhs = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            if current == table && lhs == k && l.contains('=') {
                return Some(i + 1);
            }
        }
    }
    None
}

struct Reader<'a> {
    root: &'a Table,
    dir: Option<&'a Path>,
}

fn suggest(key: &str, known: &[&str]) -> String {
    let best = known.iter().min_by_key(|k| edit_distance(key, k));
    match best {
        Some(b) if edit_distance(key, b) <= 4 => format!(" (did you mean `{b}`?)"),
        _ => String::new(),
    }
}

impl<'a> Reader<'a> {
    fn table(&self, name: &str, known: Option<&[&str]>) -> Result<Option<&'a Table>, String> {
        let Some(v) = self.root.get(name) else {
            return Ok(None);
        };
        let t = v
            .as_table()
            .ok_or_else(|| format!("`{name}` must be a table ([{name}])"))?;
        if let Some(known) = known {
            for key in t.keys() {
                if !known.contains(&key.as_str()) {
                    return Err(format!(
                        "unknown key `[{name}] {key}`{}",
                        suggest(key, known)
                    ));
                }
            }
        }
        Ok(Some(t))
    }

    fn run_file(&self) -> Result<RunFile, String> {
        for key in self.root.keys() {
            let known = ["vramfit", "model", "lora", "grpo", "env"];
            if !known.contains(&key.as_str()) {
                return Err(format!("unknown table `[{key}]`{}", suggest(key, &known)));
            }
        }
        let vf = self.table("vramfit", Some(VRAMFIT_KEYS))?;
        let model = self.table("model", Some(MODEL_KEYS))?;
        let lora = self.table("lora", Some(LORA_KEYS))?;
        let grpo = self.table("grpo", Some(GRPO_KEYS))?;
        let env = self.table("env", None)?;
        let get = |t: Option<&'a Table>, k: &str| t.and_then(|t| t.get(k));

        let stack = match get(vf, "stack")
            .map(|v| text("vramfit", "stack", v))
            .transpose()?
        {
            None | Some("unsloth") => Stack::Unsloth,
            Some("trl") => Stack::Trl,
            Some(other) => {
                return Err(format!(
                    "`[vramfit] stack = \"{other}\"`: expected \"unsloth\" or \"trl\""
                ));
            }
        };
        let gpu_memory = get(vf, "gpu_memory")
            .map(|v| {
                let s = text("vramfit", "gpu_memory", v)?;
                parse_size(s).map_err(|e| format!("`[vramfit] gpu_memory`: {e}"))
            })
            .transpose()?;
        let gpus = int(get(vf, "gpus"), "vramfit", "gpus", 1, 1024)?.unwrap_or(1);
        let lock = boolean(
            get(vf, "lock_effective_batch"),
            "vramfit",
            "lock_effective_batch",
        )?
        .unwrap_or(true);

        let model_name = match get(model, "model_name") {
            Some(v) => text("model", "model_name", v)?.to_string(),
            None => return Err("missing `[model] model_name`".into()),
        };
        let mut model_config = None;
        let (arch, implied) = match get(vf, "model_config") {
            Some(v) => {
                let p = PathBuf::from(text("vramfit", "model_config", v)?);
                let p = match self.dir {
                    Some(d) if p.is_relative() => d.join(p),
                    _ => p,
                };
                let arch =
                    config_json::load(&p).map_err(|e| format!("`[vramfit] model_config`: {e}"))?;
                model_config = Some(p);
                (arch, ImpliedQuant::None)
            }
            None => {
                let found = catalog::find(&model_name).ok_or_else(|| unknown_model(&model_name))?;
                (found.arch, found.quant)
            }
        };
        let four = boolean(get(model, "load_in_4bit"), "model", "load_in_4bit")?;
        let eight = boolean(get(model, "load_in_8bit"), "model", "load_in_8bit")?.unwrap_or(false);
        let quant = match (four, eight, implied) {
            (Some(true), true, _) => {
                return Err("`[model] load_in_4bit` and `load_in_8bit` are both true".into());
            }
            (Some(true), _, _) | (None, false, ImpliedQuant::FourBit) => Quant::Nf4,
            (_, true, _) => Quant::Int8,
            // Unsloth's from_pretrained loads in 4-bit unless told otherwise
            (None, false, _) if stack == Stack::Unsloth => Quant::Nf4,
            _ => Quant::Bf16,
        };

        let micro = int(
            get(grpo, "per_device_train_batch_size"),
            "grpo",
            "per_device_train_batch_size",
            1,
            4096,
        )?
        .unwrap_or(8);
        let accum = int(
            get(grpo, "gradient_accumulation_steps"),
            "grpo",
            "gradient_accumulation_steps",
            1,
            65536,
        )?
        .unwrap_or(1);
        let generations = int(
            get(grpo, "num_generations"),
            "grpo",
            "num_generations",
            1,
            1024,
        )?
        .unwrap_or(8);
        let prompt = int(
            get(grpo, "max_prompt_length"),
            "grpo",
            "max_prompt_length",
            1,
            1 << 21,
        )?
        .unwrap_or(512);
        let completion = int(
            get(grpo, "max_completion_length"),
            "grpo",
            "max_completion_length",
            1,
            1 << 21,
        )?
        .unwrap_or(256);
        // Unsloth's from_pretrained takes max_seq_length; for TRL only vramfit reads it, under [vramfit]
        let in_model = int(
            get(model, "max_seq_length"),
            "model",
            "max_seq_length",
            16,
            1 << 22,
        )?;
        let in_vramfit = int(
            get(vf, "max_seq_length"),
            "vramfit",
            "max_seq_length",
            16,
            1 << 22,
        )?;
        if let (Some(a), Some(b)) = (in_model, in_vramfit) {
            if a != b {
                return Err(format!(
                    "`[model] max_seq_length = {a}` and `[vramfit] max_seq_length = {b}` disagree"
                ));
            }
        }
        let max_seq = in_model.or(in_vramfit).unwrap_or(prompt + completion);
        // 16 M tokens in one micro-batch is far past any GPU; beyond it byte counts lose meaning
        let tokens = micro.saturating_mul(prompt + completion);
        if tokens > 1 << 24 {
            return Err(format!(
                "`[grpo] per_device_train_batch_size = {micro}` x (max_prompt_length + max_completion_length = {}) = {tokens} tokens in one micro-batch: absurd (at most 16777216)",
                prompt + completion
            ));
        }
        // Missing keys take the trainer's own defaults: PEFT's LoraConfig r = lora_alpha = 8,
        // Unsloth's get_peft_model r = lora_alpha = 16.
        let default_rank = if stack == Stack::Unsloth { 16 } else { 8 };
        let rank = int(get(lora, "r"), "lora", "r", 1, 4096)?.unwrap_or(default_rank);
        let alpha =
            int(get(lora, "lora_alpha"), "lora", "lora_alpha", 1, 1 << 16)?.unwrap_or(default_rank);
        let max_lora_rank = int(
            get(model, "max_lora_rank"),
            "model",
            "max_lora_rank",
            1,
            4096,
        )?
        .or((stack == Stack::Unsloth).then(|| crate::model::run::vllm_max_lora_rank(rank)));
        let targets = match get(lora, "target_modules") {
            // Unsloth targets all seven projections; PEFT's default for these models is q and v
            None if stack == Stack::Unsloth => ALL_LINEAR.iter().map(|s| s.to_string()).collect(),
            None if arch.family.fused_projections() => vec!["qkv_proj".to_string()],
            None => vec!["q_proj".to_string(), "v_proj".to_string()],
            Some(Value::String(s)) if s == "all-linear" => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| text("lora", "target_modules", v).map(str::to_string))
                .collect::<Result<Vec<_>, _>>()?,
            Some(v) => {
                return Err(format!(
                    "`[lora] target_modules = {v}`: expected a list of module names"
                ));
            }
        };
        let beta = float(get(grpo, "beta"), "grpo", "beta", 0.0, 100.0)?.unwrap_or(0.0);
        let optimizer = match get(grpo, "optim") {
            // transformers' TrainingArguments default
            None => Optimizer::AdamW,
            Some(v) => {
                let name = text("grpo", "optim", v)?;
                Optimizer::from_trainer_name(name).ok_or_else(|| {
                    let names: Vec<&str> = Optimizer::ALL.iter().map(|(n, _)| *n).collect();
                    format!(
                        "`[grpo] optim = \"{name}\"`: unknown optimizer{}; known: {}",
                        suggest(name, &names),
                        names.join(", ")
                    )
                })?
            }
        };
        let checkpointing = self.checkpointing(lora, grpo, stack)?;
        let generation = self.generation(model, grpo, stack)?;
        let alloc_conf = get(env, "PYTORCH_CUDA_ALLOC_CONF")
            .and_then(Value::as_str)
            .unwrap_or("");
        let standby = get(env, "UNSLOTH_VLLM_STANDBY")
            .is_some_and(|v| v.as_str() == Some("1") || v.as_integer() == Some(1));
        Ok(RunFile {
            run: RunConfig {
                stack,
                arch,
                model_name,
                quant,
                gpus,
                micro_batch: micro,
                grad_accum: accum,
                num_generations: generations,
                prompt_len: prompt,
                completion_len: completion,
                max_seq_len: max_seq,
                lora_rank: rank,
                lora_alpha: alpha,
                max_lora_rank,
                lora_targets: targets,
                checkpointing,
                optimizer,
                beta,
                generation,
                expandable_segments: alloc_conf.contains("expandable_segments:True"),
                unsloth_standby: standby,
                fused_logits: boolean(get(grpo, "use_liger_loss"), "grpo", "use_liger_loss")?
                    .unwrap_or(false),
            },
            gpu_memory,
            lock_effective_batch: lock,
            model_config,
        })
    }

    fn checkpointing(
        &self,
        lora: Option<&Table>,
        grpo: Option<&Table>,
        stack: Stack,
    ) -> Result<Checkpointing, String> {
        let from_lora = match lora.and_then(|t| t.get("use_gradient_checkpointing")) {
            None => None,
            Some(Value::Boolean(b)) => Some(if *b {
                Checkpointing::On
            } else {
                Checkpointing::Off
            }),
            Some(Value::String(s)) if s == "unsloth" => Some(Checkpointing::UnslothOffload),
            Some(v) => {
                return Err(format!(
                    "`[lora] use_gradient_checkpointing = {v}`: expected true, false or \"unsloth\""
                ));
            }
        };
        let from_grpo = boolean(
            grpo.and_then(|t| t.get("gradient_checkpointing")),
            "grpo",
            "gradient_checkpointing",
        )?;
        match (from_lora, from_grpo) {
            (Some(Checkpointing::Off), Some(true))
            | (Some(Checkpointing::On | Checkpointing::UnslothOffload), Some(false)) => Err(
                "`[lora] use_gradient_checkpointing` and `[grpo] gradient_checkpointing` disagree"
                    .into(),
            ),
            (Some(c), _) => Ok(c),
            (None, Some(false)) => Ok(Checkpointing::Off),
            (None, Some(true)) => Ok(Checkpointing::On),
            // the trainers' defaults: Unsloth's get_peft_model "unsloth", TrainingArguments off
            (None, None) if stack == Stack::Unsloth => Ok(Checkpointing::UnslothOffload),
            (None, None) => Ok(Checkpointing::Off),
        }
    }

    fn generation(
        &self,
        model: Option<&Table>,
        grpo: Option<&Table>,
        stack: Stack,
    ) -> Result<Generation, String> {
        let share_model = float(
            model.and_then(|t| t.get("gpu_memory_utilization")),
            "model",
            "gpu_memory_utilization",
            0.01,
            1.0,
        )?;
        let share_grpo = float(
            grpo.and_then(|t| t.get("vllm_gpu_memory_utilization")),
            "grpo",
            "vllm_gpu_memory_utilization",
            0.01,
            1.0,
        )?;
        if let (Some(a), Some(b)) = (share_model, share_grpo) {
            if (a - b).abs() > 1e-9 {
                return Err(format!(
                    "`[model] gpu_memory_utilization = {a}` and `[grpo] vllm_gpu_memory_utilization = {b}` disagree: they are the same vLLM share"
                ));
            }
        }
        let use_vllm = boolean(grpo.and_then(|t| t.get("use_vllm")), "grpo", "use_vllm")?;
        let fast = boolean(
            model.and_then(|t| t.get("fast_inference")),
            "model",
            "fast_inference",
        )?;
        let mode = grpo
            .and_then(|t| t.get("vllm_mode"))
            .map(|v| text("grpo", "vllm_mode", v))
            .transpose()?;
        if let Some(m) = mode {
            if m != "colocate" && m != "server" {
                return Err(format!(
                    "`[grpo] vllm_mode = \"{m}\"`: expected \"colocate\" or \"server\""
                ));
            }
        }
        let on = match stack {
            Stack::Unsloth => fast.or(use_vllm).unwrap_or(false),
            Stack::Trl => use_vllm.unwrap_or(false) && mode != Some("server"),
        };
        Ok(if on {
            Generation::ColocatedVllm {
                // TRL's vllm_gpu_memory_utilization defaults to 0.3, Unsloth's to 0.5
                share: share_grpo
                    .or(share_model)
                    .unwrap_or(if stack == Stack::Trl { 0.3 } else { 0.5 }),
            }
        } else {
            Generation::Elsewhere
        })
    }
}

fn unknown_model(name: &str) -> String {
    format!(
        "`[model] model_name = \"{name}\"`: unknown model; closest in the catalog: {}. For any other model set `[vramfit] model_config = \"path/to/config.json\"` (run `vramfit models` for the list)",
        catalog::closest(name, 3).join(", ")
    )
}

fn text<'v>(table: &str, key: &str, v: &'v Value) -> Result<&'v str, String> {
    v.as_str()
        .ok_or_else(|| format!("`[{table}] {key} = {v}`: expected a string"))
}

fn boolean(v: Option<&Value>, table: &str, key: &str) -> Result<Option<bool>, String> {
    v.map(|v| {
        v.as_bool()
            .ok_or_else(|| format!("`[{table}] {key} = {v}`: expected true or false"))
    })
    .transpose()
}

fn int(
    v: Option<&Value>,
    table: &str,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, String> {
    v.map(|v| {
        let n = v
            .as_integer()
            .ok_or_else(|| format!("`[{table}] {key} = {v}`: expected a whole number"))?;
        if n < min as i64 || n > max as i64 {
            return Err(format!(
                "`[{table}] {key} = {n}`: out of range, expected {min}..={max}"
            ));
        }
        Ok(n as u64)
    })
    .transpose()
}

fn float(
    v: Option<&Value>,
    table: &str,
    key: &str,
    min: f64,
    max: f64,
) -> Result<Option<f64>, String> {
    v.map(|v| {
        let x = v
            .as_float()
            .or_else(|| v.as_integer().map(|i| i as f64))
            .ok_or_else(|| format!("`[{table}] {key} = {v}`: expected a number"))?;
        if !x.is_finite() || x < min || x > max {
            return Err(format!(
                "`[{table}] {key} = {x}`: out of range, expected {min}..={max}"
            ));
        }
        Ok(x)
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_keys_take_each_trainers_defaults() {
        let trl = parse(
            "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nuse_vllm = true\n",
            "t",
            None,
        )
        .unwrap()
        .run;
        assert_eq!((trl.lora_rank, trl.lora_alpha), (8, 8));
        assert_eq!(trl.lora_targets, ["q_proj", "v_proj"]);
        assert_eq!(trl.optimizer, Optimizer::AdamW);
        assert_eq!(trl.checkpointing, Checkpointing::Off);
        assert_eq!(trl.quant, Quant::Bf16);
        assert_eq!(trl.generation, Generation::ColocatedVllm { share: 0.3 });
        assert_eq!((trl.micro_batch, trl.num_generations), (8, 8));
        assert_eq!((trl.prompt_len, trl.completion_len), (512, 256));

        let unsloth = parse(
            "[model]\nmodel_name = \"unsloth/Qwen2.5-1.5B-Instruct\"\nfast_inference = true\n",
            "u",
            None,
        )
        .unwrap()
        .run;
        assert_eq!(unsloth.stack, Stack::Unsloth);
        assert_eq!(unsloth.quant, Quant::Nf4);
        assert_eq!(unsloth.checkpointing, Checkpointing::UnslothOffload);
        assert_eq!(unsloth.lora_rank, 16);
        assert_eq!(unsloth.lora_targets.len(), 7);
        assert_eq!(unsloth.generation, Generation::ColocatedVllm { share: 0.5 });
        assert_eq!(unsloth.max_lora_rank, Some(16));
    }

    #[test]
    fn errors_point_at_the_line() {
        let err = parse(
            "[model]\nmodel_name = \"x/Qwen2.5-1.5B\"\n\n[grpo]\nbeta = -1\n",
            "f.toml",
            None,
        )
        .unwrap_err();
        assert_eq!(err.file, "f.toml:5");
        assert!(err.message.contains("beta = -1"), "{}", err.message);
        assert_eq!(locate("[a]\nx = 1\n[b]\nx = 2\n", "b", Some("x")), Some(4));
        assert_eq!(locate("[a]\nx = 1\n[b]\n", "b", None), Some(3));
    }
}
