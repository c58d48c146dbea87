//! The TOML run file shared by presets and exports (SPEC section 4): strict loading with
//! errors that name the file, the key and the value.

mod error;
pub mod export;
mod lines;
pub mod tables;

pub use error::{LoadError, Wording};

use crate::contract::{Call, Table as T};
use crate::model::arch::Arch;
use crate::model::catalog::{self, ImpliedQuant};
use crate::model::config_json;
use crate::model::knobs::Knob;
use crate::model::rules;
use crate::model::run::{
    Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack, VllmVersion,
};
use crate::model::units::parse_size;
use lines::{Lines, line_of_offset};
use std::path::{Path, PathBuf};
use tables::{Tables, suggest};
use toml::{Table, Value};

/// A loaded file: the run, and the capacity it names (if any).
#[derive(Debug, Clone)]
pub struct RunFile {
    pub run: RunConfig,
    pub gpu_memory: Option<u64>,
    pub lock_effective_batch: bool,
    /// the `config.json` the architecture came from, when not the catalog
    pub model_config: Option<PathBuf>,
    /// what the reader wants the user to know (retired keys, assumptions), in words
    pub notes: Vec<String>,
}

pub fn load(path: &Path) -> Result<RunFile, LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|e| LoadError::whole_file(format!("cannot read: {e}")).in_file(&file))?;
    let text = String::from_utf8(text)
        .map_err(|_| LoadError::whole_file("not a text file (invalid UTF-8)").in_file(&file))?;
    parse(&text, &file, path.parent())
}

/// Parses a run file's text; `dir` resolves a relative `model_config` path. `file` names the
/// text in errors (its path, or `preset 24gb`).
pub fn parse(text: &str, file: &str, dir: Option<&Path>) -> Result<RunFile, LoadError> {
    let root: Table = text.parse().map_err(|e: toml::de::Error| {
        LoadError::whole_file(format!("not valid TOML: {}", e.message().trim()))
            .on_line(e.span().map(|span| line_of_offset(text, span.start)))
            .in_file(file)
    })?;
    let lines = Lines::new(text);
    Reader {
        root: &root,
        lines: &lines,
        dir,
    }
    .run_file()
    .map_err(|e| e.in_file(file))
}

/// The 1-based line of `[table]`'s `key = ...`, or of the `[table]` header itself.
pub fn locate(text: &str, table: &str, key: Option<&str>) -> Option<usize> {
    Lines::new(text).of(table, key)
}

struct Reader<'a> {
    root: &'a Table,
    lines: &'a Lines<'a>,
    dir: Option<&'a Path>,
}

/// vramfit's own assumption when a file does not say how long the dataset's prompts are: it is
/// no trainer key (TRL 1.x removed `max_prompt_length`), and 512 tokens covers GSM8K- and
/// NuminaMath-style prompts with a system prompt.
pub const ASSUMED_PROMPT_LENGTH: u64 = 512;

impl<'a> Reader<'a> {
    fn run_file(&self) -> Result<RunFile, LoadError> {
        let t = Tables::new(self.root, self.lines)?;
        let stack = t.stack;
        let model = stack_model_call(stack);
        let lora_call = T::Lora.call(stack).unwrap_or(Call::LoraConfig);
        let gpu_memory = t
            .get(T::Vramfit, "gpu_memory")?
            .map(|v| match v {
                toml::Value::String(s) => parse_size(s)
                    .map_err(|e| t.wrong(T::Vramfit, "gpu_memory", format!("\"{s}\""), e)),
                toml::Value::Integer(_) | toml::Value::Float(_) => Err(t.wrong(
                    T::Vramfit,
                    "gpu_memory",
                    v,
                    format!("write the size in quotes with its unit, e.g. \"{v}GiB\" (or \"{v}B\" for bytes)"),
                )),
                _ => Err(t.wrong(
                    T::Vramfit,
                    "gpu_memory",
                    v,
                    "expected a size in quotes, e.g. \"24GiB\"",
                )),
            })
            .transpose()?;
        let gpus = t.int(T::Vramfit, "gpus", 1, 1024)?.unwrap_or(1);
        let lock = t
            .boolean(T::Vramfit, "lock_effective_batch")?
            .unwrap_or(true);

        let name_key = model_name_key(stack);
        let model_name = t
            .text(T::Model, name_key)?
            .ok_or_else(|| t.sentence(T::Model, name_key, format!("missing `[model] {name_key}`")))?
            .to_string();
        let mut model_config = None;
        let (arch, implied) = match t.text(T::Vramfit, "model_config")? {
            Some(text) => {
                let p = PathBuf::from(text);
                let p = match self.dir {
                    Some(d) if p.is_relative() => d.join(p),
                    _ => p,
                };
                let arch = config_json::load(&p)
                    .map_err(|e| t.wrong_key(T::Vramfit, "model_config", e.to_string()))?;
                model_config = Some(p);
                (arch, ImpliedQuant::None)
            }
            None => {
                let found = catalog::find(&model_name)
                    .ok_or_else(|| unknown_model(&t, name_key, &model_name))?;
                (found.arch, found.quant)
            }
        };
        let quant = self.quant(&t, implied)?;

        let grpo = Call::GrpoConfig;
        let micro = t
            .knob(Knob::MicroBatch)?
            .or(grpo.default_u64("per_device_train_batch_size"))
            .unwrap_or(8);
        let accum = t
            .knob(Knob::GradAccum)?
            .or(grpo.default_u64("gradient_accumulation_steps"))
            .unwrap_or(1);
        let generations = t
            .knob(Knob::Generations)?
            .or(grpo.default_u64("num_generations"))
            .unwrap_or(8);
        let prompt = t
            .int(T::Vramfit, "max_prompt_length", 1, 1 << 21)?
            .unwrap_or(ASSUMED_PROMPT_LENGTH);
        let completion = t
            .int(T::Grpo, "max_completion_length", 1, 1 << 21)?
            .or(grpo.default_u64("max_completion_length"))
            .unwrap_or(512);
        let max_seq = match stack {
            // Unsloth: from_pretrained's max_seq_length is vLLM's max_model_len too
            Stack::Unsloth => t
                .knob(Knob::SequenceLength)?
                .or(model.default_u64("max_seq_length"))
                .unwrap_or(2048),
            // TRL colocate: vllm_max_model_length, else vLLM takes the model's own context
            // (GRPOTrainer.__init__ passes max_model_len=self.vllm_max_model_length, None when unset)
            Stack::Trl => t.knob(Knob::SequenceLength)?.unwrap_or(arch.max_position),
        };
        let rank = t
            .knob(Knob::LoraRank)?
            .or(lora_call.default_u64("r"))
            .unwrap_or(8);
        let alpha = t
            .int(T::Lora, "lora_alpha", 1, 1 << 16)?
            .or(lora_call.default_u64("lora_alpha"))
            .unwrap_or(rank);
        let max_lora_rank = match stack {
            Stack::Unsloth => Some(
                t.int(T::Model, "max_lora_rank", 1, 4096)?
                    .or(model.default_u64("max_lora_rank"))
                    .unwrap_or(64),
            ),
            Stack::Trl => None,
        };
        let targets = self.targets(&t, lora_call, &arch)?;
        let beta = t
            .float(T::Grpo, "beta", 0.0, 100.0)?
            .or(grpo.default_f64("beta"))
            .unwrap_or(0.0);
        let optim_name = t
            .text(T::Grpo, "optim")?
            .or(grpo.default_str("optim"))
            .unwrap_or("adamw_torch");
        let optimizer = Optimizer::from_trainer_name(optim_name).ok_or_else(|| {
            let names: Vec<&str> = Optimizer::ALL.iter().map(|(n, _)| *n).collect();
            let message = format!(
                "unknown optimizer{}; known: {}",
                suggest(optim_name, names.iter().copied()),
                names.join(", ")
            );
            t.wrong(T::Grpo, "optim", format!("\"{optim_name}\""), message)
        })?;
        let checkpointing = checkpointing(&t, lora_call)?;
        let generation = generation(&t, model)?;
        let expandable = t
            .env("PYTORCH_CUDA_ALLOC_CONF")
            .unwrap_or("")
            .contains("expandable_segments:True");
        let standby = t.env_flag("UNSLOTH_VLLM_STANDBY") && stack == Stack::Unsloth;
        // Unsloth strips expandable_segments when standby is on (unsloth_zoo/__init__.py), and
        // its patched vLLM allocator refuses to start with them
        let expandable = expandable && !standby;
        // TRL 1.x always projects through its fused LM head (GRPOTrainer.__init__ calls
        // add_fused_lm_head); use_liger_kernel no longer touches the logits, since TRL forces
        // Liger's fused cross-entropy off and applies only its layer kernels.
        let fused_logits = stack == Stack::Trl;
        let liger_asked = t.boolean(T::Grpo, "use_liger_kernel")? == Some(true);
        let vllm_kv_fp8 = match stack {
            Stack::Unsloth => t
                .boolean(T::Model, "float8_kv_cache")?
                .or(model.default_bool("float8_kv_cache"))
                .unwrap_or(false),
            Stack::Trl => false,
        };
        let vllm_sleep = match stack {
            Stack::Trl => t
                .boolean(T::Grpo, "vllm_enable_sleep_mode")?
                .or(grpo.default_bool("vllm_enable_sleep_mode"))
                .unwrap_or(false),
            Stack::Unsloth => standby,
        };
        let steps_per_generation = t.int(T::Grpo, "steps_per_generation", 1, 1 << 16)?;
        let generation_batch_size = t.int(T::Grpo, "generation_batch_size", 1, 1 << 24)?;
        let vllm_version = t
            .text(T::Vramfit, "vllm_version")?
            .map(|v| {
                VllmVersion::parse(v).ok_or_else(|| {
                    t.wrong(
                        T::Vramfit,
                        "vllm_version",
                        format!("\"{v}\""),
                        "expected a version such as \"0.11.0\"",
                    )
                })
            })
            .transpose()?
            .unwrap_or_default();
        let prompt_given = t.get(T::Vramfit, "max_prompt_length")?.is_some();
        let asked_expandable = t
            .env("PYTORCH_CUDA_ALLOC_CONF")
            .unwrap_or("")
            .contains("expandable_segments:True");
        let mut notes = t.notes.clone();
        if standby && asked_expandable {
            notes.push("`[env] PYTORCH_CUDA_ALLOC_CONF`: Unsloth removes expandable_segments when UNSLOTH_VLLM_STANDBY=1 (its standby allocator refuses them); estimated without".into());
        }
        if liger_asked {
            notes.push("`[grpo] use_liger_kernel`: TRL 1.x applies only Liger's layer kernels (its fused LM head already keeps logits small); not exported, since it is deprecated".into());
        }
        if !prompt_given {
            notes.push(format!(
                "`[vramfit] max_prompt_length` not given: prompts of up to {ASSUMED_PROMPT_LENGTH} tokens assumed (set it to your dataset's longest prompt)"
            ));
        }
        let run = RunConfig {
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
            expandable_segments: expandable,
            unsloth_standby: standby,
            fused_logits,
            vllm_kv_fp8,
            vllm_sleep,
            steps_per_generation,
            generation_batch_size,
            vllm_version,
            vllm_max_num_seqs: match stack {
                Stack::Unsloth => t.int(T::Model, "max_num_seqs", 1, 1 << 16)?,
                Stack::Trl => None,
            },
            vllm_max_num_batched_tokens: match stack {
                Stack::Unsloth => t.int(T::Model, "max_num_batched_tokens", 1, 1 << 24)?,
                Stack::Trl => None,
            },
            standby_keeps_share: t.env_flag("UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE"),
        };
        rules::validate(&run).map_err(|broken| broken_rule(&t, &run, broken))?;
        Ok(RunFile {
            run,
            gpu_memory,
            lock_effective_batch: lock,
            model_config,
            notes,
        })
    }

    /// The base weights' format: 4-bit, 8-bit, fp8 or 16/32-bit, from the stack's own keys and defaults.
    fn quant(&self, t: &Tables, implied: ImpliedQuant) -> Result<Quant, LoadError> {
        let model = stack_model_call(t.stack);
        let four = t.boolean(T::Model, "load_in_4bit")?;
        let eight = t.boolean(T::Model, "load_in_8bit")?.unwrap_or(false);
        let fp8 = match t.stack {
            // load_in_fp8 = true or "block": fp8 weights, one byte each (Unsloth's FP8 GRPO)
            Stack::Unsloth => match t.get(T::Model, "load_in_fp8")? {
                None | Some(Value::Boolean(false)) => false,
                Some(Value::Boolean(true)) => true,
                Some(Value::String(s)) if s == "block" => true,
                Some(v) => {
                    return Err(t.wrong(
                        T::Model,
                        "load_in_fp8",
                        v,
                        "expected true, false or \"block\"",
                    ));
                }
            },
            Stack::Trl => false,
        };
        let asked = [
            ("load_in_4bit", four == Some(true)),
            ("load_in_8bit", eight),
            ("load_in_fp8", fp8),
        ];
        let mut on = asked.iter().filter(|(_, b)| *b).map(|(key, _)| *key);
        if let (Some(first), Some(_)) = (on.next(), on.next()) {
            return Err(t.sentence(
                T::Model,
                first,
                "`[model] load_in_4bit`, `load_in_8bit` and `load_in_fp8`: more than one is true",
            ));
        }
        let four = four.unwrap_or_else(|| {
            implied == ImpliedQuant::FourBit || model.default_bool("load_in_4bit") == Some(true)
        });
        Ok(if fp8 {
            Quant::Fp8
        } else if eight {
            Quant::Int8
        } else if four {
            Quant::Nf4
        } else {
            match t.text(T::Model, "dtype")?.or(model.default_str("dtype")) {
                // TRL's ModelConfig defaults dtype to "float32", and its scripts load with it
                Some("float32") => Quant::Fp32,
                Some("bfloat16" | "float16" | "auto") | None => Quant::Bf16,
                Some(other) => {
                    return Err(t.wrong(
                        T::Model,
                        "dtype",
                        format!("\"{other}\""),
                        "expected \"bfloat16\", \"float16\", \"float32\" or \"auto\"",
                    ));
                }
            }
        })
    }

    fn targets(&self, t: &Tables, call: Call, arch: &Arch) -> Result<Vec<String>, LoadError> {
        Ok(match t.get(T::Lora, "target_modules")? {
            None => match call.default("target_modules").and_then(|v| v.as_array()) {
                // Unsloth's get_peft_model: the seven projections
                Some(list) => list
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                // PEFT's LoraConfig(target_modules=None) takes the model type's entry of
                // TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: q and v, Phi-3's fused qkv
                None if arch.family.fused_projections() => vec!["qkv_proj".to_string()],
                None => vec!["q_proj".to_string(), "v_proj".to_string()],
            },
            Some(Value::String(s)) if s == "all-linear" => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| t.as_text(T::Lora, "target_modules", v).map(str::to_string))
                .collect::<Result<Vec<_>, _>>()?,
            Some(v) => {
                return Err(t.wrong(
                    T::Lora,
                    "target_modules",
                    v,
                    "expected a list of module names",
                ));
            }
        })
    }
}

/// The call `[model]` feeds on `stack`.
fn stack_model_call(stack: Stack) -> Call {
    T::Model.call(stack).unwrap_or(Call::UnslothFromPretrained)
}

/// The key that names the model: Unsloth's `model_name`, TRL ModelConfig's `model_name_or_path`.
pub fn model_name_key(stack: Stack) -> &'static str {
    match stack {
        Stack::Unsloth => "model_name",
        Stack::Trl => "model_name_or_path",
    }
}

fn checkpointing(t: &Tables, lora_call: Call) -> Result<Checkpointing, LoadError> {
    let from_lora = match t.get(T::Lora, "use_gradient_checkpointing")? {
        None => None,
        Some(Value::Boolean(b)) => Some(if *b {
            Checkpointing::On
        } else {
            Checkpointing::Off
        }),
        Some(Value::String(s)) if s == "unsloth" => Some(Checkpointing::UnslothOffload),
        Some(v) => {
            return Err(t.wrong(
                T::Lora,
                "use_gradient_checkpointing",
                v,
                "expected true, false or \"unsloth\"",
            ));
        }
    };
    let from_grpo = t.boolean(T::Grpo, "gradient_checkpointing")?;
    match (from_lora, from_grpo) {
        (Some(Checkpointing::Off), Some(true))
        | (Some(Checkpointing::On | Checkpointing::UnslothOffload), Some(false)) => Err(t
            .sentence(
                T::Lora,
                "use_gradient_checkpointing",
                "`[lora] use_gradient_checkpointing` and `[grpo] gradient_checkpointing` disagree",
            )),
        (Some(c), _) => Ok(c),
        (None, Some(false)) => Ok(Checkpointing::Off),
        (None, Some(true)) => Ok(Checkpointing::On),
        (None, None) => Ok(
            // Unsloth's get_peft_model defaults to "unsloth"; TRL 1.x's _BaseConfig to true
            match lora_call
                .default("use_gradient_checkpointing")
                .or(Call::GrpoConfig.default("gradient_checkpointing"))
            {
                Some(serde_json::Value::String(s)) if s == "unsloth" => {
                    Checkpointing::UnslothOffload
                }
                Some(serde_json::Value::Bool(false)) => Checkpointing::Off,
                _ => Checkpointing::On,
            },
        ),
    }
}

fn generation(t: &Tables, model: Call) -> Result<Generation, LoadError> {
    let grpo = Call::GrpoConfig;
    let share_model = match t.stack {
        Stack::Unsloth => t.share(T::Model, "gpu_memory_utilization")?,
        Stack::Trl => None,
    };
    let share_grpo = t.share(T::Grpo, "vllm_gpu_memory_utilization")?;
    if let (Some(a), Some(b)) = (share_model, share_grpo) {
        if (a - b).abs() > 1e-9 {
            let message = format!(
                "`[model] gpu_memory_utilization = {a}` and `[grpo] vllm_gpu_memory_utilization = {b}` disagree: they are the same vLLM share"
            );
            return Err(t
                .sentence(T::Model, "gpu_memory_utilization", message)
                .with_value(a));
        }
    }
    let use_vllm = t.boolean(T::Grpo, "use_vllm")?;
    let mode = t.text(T::Grpo, "vllm_mode")?;
    if let Some(m) = mode {
        if m != "colocate" && m != "server" {
            return Err(t.wrong(
                T::Grpo,
                "vllm_mode",
                format!("\"{m}\""),
                "expected \"colocate\" or \"server\"",
            ));
        }
    }
    let on = match t.stack {
        // Unsloth starts vLLM when from_pretrained has fast_inference = True, and its GRPO
        // patch then sets use_vllm itself
        Stack::Unsloth => t
            .boolean(T::Model, "fast_inference")?
            .or(use_vllm)
            .or(model.default_bool("fast_inference"))
            .unwrap_or(false),
        Stack::Trl => {
            use_vllm.or(grpo.default_bool("use_vllm")).unwrap_or(false)
                && mode.or(grpo.default_str("vllm_mode")) != Some("server")
        }
    };
    let share = match t.stack {
        Stack::Unsloth => share_model
            .or(share_grpo)
            .or(model.default_f64("gpu_memory_utilization")),
        Stack::Trl => share_grpo.or(grpo.default_f64("vllm_gpu_memory_utilization")),
    };
    let server = t.stack == Stack::Trl
        && use_vllm.or(grpo.default_bool("use_vllm")).unwrap_or(false)
        && mode == Some("server");
    Ok(if on {
        Generation::ColocatedVllm {
            share: share.unwrap_or(0.5),
        }
    } else if server {
        Generation::VllmServer
    } else {
        Generation::Transformers
    })
}

fn unknown_model(t: &Tables, key: &str, name: &str) -> LoadError {
    let message = format!(
        "unknown model; closest in the catalog: {}. For any other model set `[vramfit] model_config = \"path/to/config.json\"` (run `vramfit models` for the list)",
        catalog::closest(name, 3).join(", ")
    );
    t.wrong(T::Model, key, format!("\"{name}\""), message)
}

/// A rule of `rules::validate` the run breaks, on the line of the knob it concerns.
fn broken_rule(t: &Tables, run: &RunConfig, broken: rules::Broken) -> LoadError {
    let Some(knob) = broken.knob else {
        return LoadError::whole_file(broken.message);
    };
    let (table, key) = knob.key(run.stack);
    let message = format!("[{}] {}", table.name(), broken.message);
    let value = knob.get(run).map(|v| knob.show(v));
    LoadError {
        value,
        ..t.sentence(table, key, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_generation_runs_is_read_and_written_back() {
        let file = |grpo: &str| {
            format!(
                "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\n{grpo}\n"
            )
        };
        for (grpo, generation, written) in [
            (
                "use_vllm = true\nvllm_mode = \"server\"",
                Generation::VllmServer,
                "vllm_mode = \"server\"",
            ),
            (
                "use_vllm = false",
                Generation::Transformers,
                "use_vllm = false",
            ),
            (
                "use_vllm = true",
                Generation::ColocatedVllm { share: 0.3 },
                "vllm_mode = \"colocate\"",
            ),
        ] {
            let run = parse(&file(grpo), "t", None).unwrap().run;
            assert_eq!(run.generation, generation, "{grpo}");
            let ctx = export::ExportContext {
                gpu: "test",
                gpu_memory: None,
                model_config: None,
                lock_effective_batch: false,
                estimate: None,
            };
            let text = export::to_toml(&run, &ctx);
            assert!(text.contains(written), "{grpo}:\n{text}");
            assert_eq!(
                parse(&text, "back", None).unwrap().run.generation,
                generation
            );
        }
    }

    #[test]
    fn missing_keys_take_each_trainers_defaults() {
        let trl = parse(
            "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nuse_vllm = true\n",
            "t",
            None,
        )
        .unwrap();
        let run = &trl.run;
        // peft 0.21.2 LoraConfig; trl 1.15.0 GRPOConfig / _BaseConfig / ModelConfig
        assert_eq!((run.lora_rank, run.lora_alpha), (8, 8));
        assert_eq!(run.lora_targets, ["q_proj", "v_proj"]);
        assert_eq!(run.optimizer, Optimizer::AdamW);
        assert_eq!(run.checkpointing, Checkpointing::On);
        assert_eq!(run.quant, Quant::Fp32);
        assert_eq!(run.generation, Generation::ColocatedVllm { share: 0.3 });
        assert_eq!((run.micro_batch, run.num_generations), (8, 8));
        assert_eq!((run.prompt_len, run.completion_len), (512, 512));
        // vLLM's context: the model's max_position_embeddings when vllm_max_model_length is unset
        assert_eq!(run.max_seq_len, run.arch.max_position);
        assert!(run.fused_logits);
        assert_eq!(trl.notes.len(), 1, "{:?}", trl.notes);

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
        assert_eq!(unsloth.max_lora_rank, Some(64));
        assert_eq!(unsloth.max_seq_len, 2048);
    }

    #[test]
    fn retired_keys_load_from_their_old_place_with_a_note() {
        let old = parse(
            "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name = \"Qwen/Qwen2.5-1.5B\"\n[grpo]\nmax_prompt_length = 300\nuse_liger_loss = true\n",
            "old.toml",
            None,
        )
        .unwrap();
        assert_eq!(old.run.prompt_len, 300);
        assert_eq!(old.run.model_name, "Qwen/Qwen2.5-1.5B");
        assert!(
            old.notes.iter().any(|n| n.contains("max_prompt_length")),
            "{:?}",
            old.notes
        );
        assert!(
            old.notes.iter().any(|n| n.contains("use_liger_kernel")),
            "{:?}",
            old.notes
        );
        let both = parse(
            "[vramfit]\nmax_prompt_length = 200\n[model]\nmodel_name = \"unsloth/Qwen2.5-1.5B-Instruct\"\n[grpo]\nmax_prompt_length = 300\n",
            "both.toml",
            None,
        )
        .unwrap_err();
        assert!(both.message.contains("disagree"), "{}", both.message);
    }

    #[test]
    fn keys_outside_the_contract_are_refused_with_the_call_named() {
        let err = parse(
            "[vramfit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B\"\n[lora]\nuse_gradient_checkpointing = \"unsloth\"\n",
            "trl.toml",
            None,
        )
        .unwrap_err();
        assert!(err.message.contains("peft.LoraConfig"), "{}", err.message);
        assert_eq!((err.file.as_str(), err.line), ("trl.toml", Some(6)));
    }

    #[test]
    fn errors_point_at_the_line() {
        let err = parse(
            "[model]\nmodel_name = \"x/Qwen2.5-1.5B\"\n\n[grpo]\nbeta = -1\n",
            "f.toml",
            None,
        )
        .unwrap_err();
        assert_eq!((err.file.as_str(), err.line), ("f.toml", Some(5)));
        assert!(err.to_string().contains("beta = -1"), "{err}");
        assert_eq!(locate("[a]\nx = 1\n[b]\nx = 2\n", "b", Some("x")), Some(4));
        assert_eq!(locate("[a]\nx = 1\n[b]\n", "b", None), Some(3));
    }
}
