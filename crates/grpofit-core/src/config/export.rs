//! Writing a run file: each trainer table holds exactly the keyword arguments of one call for
//! the chosen stack, `[env]` the environment, and a comment header the estimate it was made with.

use super::export_keys;
use super::read_model::model_name_key;
use super::tables::own_keys;
use crate::contract::Table;
use crate::contract::accepts::CallVersions;
use crate::contract::trl_serve_ladder::has_serve;
use crate::memory::estimate::Estimate;
use crate::run::knobs::Knob;
use crate::run::spread::Spread;
use crate::run::versions::Package;
use crate::run::{Checkpointing, Generation, Quant, RunConfig, Stack, VllmVersion};
use crate::time::TimeKeys;
use crate::units::{exact_size, format_size};
use std::fmt::Write as _;
use std::path::Path;

pub use crate::run::vllm_max_lora_rank;

/// What the header records beside the run.
#[derive(Clone, Copy)]
pub struct ExportContext<'a> {
    pub gpu: &'a str,
    pub gpu_memory: Option<u64>,
    pub model_config: Option<&'a Path>,
    pub lock_effective_batch: bool,
    pub estimate: Option<&'a Estimate>,
    /// what the run file says about time (`[grpofit] gpu`, `gpu_tflops`, `gpu_bandwidth`,
    /// `mean_completion_length`, `dataset_size`; `[grpo] max_steps`, `num_train_epochs`): the
    /// run alone does not hold them, and an export must not drop them
    pub time: Option<&'a TimeKeys>,
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The file being written, one table at a time; every trainer key it writes is one the
/// stack's call takes (the contract test checks the same from outside).
struct Writer {
    out: String,
    stack: Stack,
    table: Table,
    /// the releases whose calls the tables feed (`train_trl.py` / `train_unsloth.py` pass each
    /// table to its call as keyword arguments, and Unsloth's trainer is TRL's)
    versions: CallVersions,
    /// keys the pinned release's call does not take, left out with the reason (said in the
    /// header, `export_keys::header_lines`)
    left_out: Vec<(String, &'static str)>,
}

impl Writer {
    fn table(&mut self, table: Table) {
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
        self.table = table;
        let _ = writeln!(self.out, "[{}]", table.name());
    }

    fn key(&mut self, key: &'static str, value: impl std::fmt::Display) {
        // a key the pinned release's call does not take would stop it at start-up: the
        // ladders (read from each release's wheel) say which it takes
        if let Some(why) = export_keys::left_out_by(self.table, self.stack, key, &self.versions) {
            // the pinned release's own name for the value (trl 0.15's `vllm_max_model_len`)
            match export_keys::older_name(self.table, self.stack, key, &self.versions) {
                Some(older) => self.key(older, value),
                None => self.left_out.push((why, key)),
            }
            return;
        }
        debug_assert!(
            own_keys(self.table).contains(&key)
                || self
                    .table
                    .call(self.stack)
                    .is_some_and(|c| export_keys::takes(c, key, &self.versions))
                || self.table == Table::Env,
            "export writes `[{}] {key}`, which its call does not take",
            self.table.name()
        );
        let _ = writeln!(self.out, "{key} = {value}");
    }

    /// Whether the pinned release's call of the table being written takes `key`.
    fn takes(&self, key: &str) -> bool {
        export_keys::left_out_by(self.table, self.stack, key, &self.versions).is_none()
    }

    /// A knob's value under its own key (`Knob::key`), which is in the table being written.
    fn knob(&mut self, knob: Knob, value: impl std::fmt::Display) {
        let (table, key) = knob.key(self.stack);
        debug_assert_eq!(table, self.table, "{knob} is written in [{}]", table.name());
        self.key(key, value);
    }
}

pub fn to_toml(run: &RunConfig, ctx: &ExportContext) -> String {
    let mut head = String::new();
    header(&mut head, run, ctx);
    let mut w = Writer {
        out: String::new(),
        stack: run.stack,
        table: Table::Grpofit,
        versions: run.call_versions(),
        left_out: Vec::new(),
    };
    grpofit_table(&mut w, run, ctx);
    model_table(&mut w, run);
    if !run.full_finetuning {
        lora_table(&mut w, run);
    }
    grpo_table(&mut w, run);
    if let Some(keys) = ctx.time {
        grpo_time_keys(&mut w, keys);
    }
    distributed_table(&mut w, run);
    vllm_server_table(&mut w, run);
    w.table(Table::Env);
    if run.expandable_segments {
        w.key(
            "PYTORCH_CUDA_ALLOC_CONF",
            quoted("expandable_segments:True"),
        );
    }
    if run.unsloth_standby {
        w.key("UNSLOTH_VLLM_STANDBY", quoted("1"));
    }
    for line in export_keys::header_lines(&w.left_out) {
        let _ = writeln!(head, "{line}");
    }
    head + &w.out
}

fn colocated_share(run: &RunConfig) -> Option<f64> {
    match run.generation {
        Generation::ColocatedVllm { share } => Some(share),
        Generation::VllmServer | Generation::Transformers => None,
    }
}

fn grpofit_table(w: &mut Writer, run: &RunConfig, ctx: &ExportContext) {
    w.table(Table::Grpofit);
    w.key("stack", quoted(run.stack.name()));
    if let Some(bytes) = ctx.gpu_memory {
        w.key("gpu_memory", quoted(&exact_size(bytes)));
    }
    w.key("gpus", run.gpus);
    if run.spread.nodes > 1 {
        w.key("nodes", run.spread.nodes);
    }
    if let Some(p) = ctx.model_config {
        w.key("model_config", quoted(&p.display().to_string()));
    }
    w.key("lock_effective_batch", ctx.lock_effective_batch);
    w.knob(Knob::PromptLength, run.prompt_len);
    if run.vllm_version != VllmVersion::default() {
        w.key("vllm_version", quoted(&run.vllm_version.to_string()));
    }
    if !run.reward_models.is_empty() {
        let names: Vec<String> = run.reward_models.iter().map(|m| quoted(&m.name)).collect();
        w.key("reward_models", format!("[{}]", names.join(", ")));
    }
    if run.other_gpu_memory > 0 {
        w.key(
            "other_gpu_memory",
            quoted(&exact_size(run.other_gpu_memory)),
        );
    }
    // the trainer versions the run was estimated for, when not grpofit's targets
    let v = run.versions;
    for (key, version, target) in [
        ("trl_version", v.trl, Package::Trl),
        ("unsloth_version", v.unsloth, Package::Unsloth),
        (
            "transformers_version",
            v.transformers,
            Package::Transformers,
        ),
    ] {
        if version != target.targeted()
            && (target != Package::Unsloth || run.stack == Stack::Unsloth)
        {
            w.key(key, quoted(&version.to_string()));
        }
    }
    if let Some(keys) = ctx.time {
        grpofit_time_keys(w, keys);
    }
}

/// `[grpofit]`'s time keys, as `config::read_time` reads them back.
fn grpofit_time_keys(w: &mut Writer, keys: &TimeKeys) {
    if let Some(gpu) = &keys.gpu {
        w.key("gpu", quoted(gpu));
    }
    if let Some(t) = keys.gpu_tflops {
        w.key("gpu_tflops", format!("{t:?}"));
    }
    if let Some(b) = keys.gpu_bandwidth {
        w.key("gpu_bandwidth", format!("{b:?}"));
    }
    if let Some(n) = keys.mean_completion_length {
        // a whole number as the file wrote it, a decimal as a float
        if n.fract() == 0.0 {
            w.key("mean_completion_length", n as u64);
        } else {
            w.key("mean_completion_length", format!("{n:?}"));
        }
    }
    if let Some(r) = keys.reward_seconds {
        w.key("reward_seconds", format!("{r:?}"));
    }
    if let Some(n) = keys.dataset_size {
        w.key("dataset_size", n);
    }
}

/// `GRPOConfig`'s (TrainingArguments') `max_steps`, `num_train_epochs` and checkpointing's
/// `save_steps`, `save_strategy`, `save_only_model`, when the file set them: they are the
/// trainer's, and `step_time` counts the run's steps and saves from them.
fn grpo_time_keys(w: &mut Writer, keys: &TimeKeys) {
    if let Some(n) = keys.max_steps {
        w.key("max_steps", n);
    }
    if let Some(e) = keys.num_train_epochs {
        w.key("num_train_epochs", format!("{e:?}"));
    }
    if let Some(s) = keys.save_steps {
        // an integer as the file wrote it, a ratio as a float
        if s.fract() == 0.0 && s >= 1.0 {
            w.key("save_steps", s as u64);
        } else {
            w.key("save_steps", format!("{s:?}"));
        }
    }
    if let Some(s) = &keys.save_strategy {
        w.key("save_strategy", quoted(s));
    }
    if let Some(b) = keys.save_only_model {
        w.key("save_only_model", b);
    }
}

/// `FastLanguageModel.from_pretrained` (Unsloth) or TRL's `ModelConfig`.
fn model_table(w: &mut Writer, run: &RunConfig) {
    w.table(Table::Model);
    w.key(model_name_key(run.stack), quoted(&run.model_name));
    let share = colocated_share(run);
    match run.stack {
        Stack::Unsloth => {
            w.knob(Knob::SequenceLength, run.max_seq_len);
            w.key("load_in_4bit", run.quant == Quant::Nf4);
            if run.quant == Quant::Int8 {
                w.key("load_in_8bit", true);
            }
            if run.quant == Quant::Fp8 {
                w.key("load_in_fp8", true);
            }
            w.key("fast_inference", share.is_some());
            if let Some(share) = share {
                w.knob(Knob::VllmShare, share);
                if run.vllm_kv_fp8 {
                    w.key("float8_kv_cache", true);
                }
            }
            // passed on to `load_vllm` (fit --fastest moves them)
            if let Some(n) = run.vllm_max_num_seqs {
                w.key("max_num_seqs", n);
            }
            if let Some(n) = run.vllm_max_num_batched_tokens {
                w.key("max_num_batched_tokens", n);
            }
            if let Some(m) = run.max_lora_rank {
                w.key("max_lora_rank", m);
            }
        }
        Stack::Trl => {
            let dtype = if run.quant == Quant::Fp32 {
                "float32"
            } else {
                "bfloat16"
            };
            w.key("dtype", quoted(dtype));
            if run.full_finetuning {
                w.key("use_peft", false);
            }
            w.key("load_in_4bit", run.quant == Quant::Nf4);
            if run.quant == Quant::Int8 {
                w.key("load_in_8bit", true);
            }
        }
    }
}

/// `[distributed]`, when the training processes share the model in any way but DDP's.
fn distributed_table(w: &mut Writer, run: &RunConfig) {
    let spread = &run.spread;
    if *spread
        == (Spread {
            nodes: spread.nodes,
            ..Spread::default()
        })
    {
        return;
    }
    w.table(Table::Distributed);
    w.key("engine", quoted(spread.engine.name()));
    w.key("zero_stage", spread.zero_stage);
    let device = |on: bool| quoted(if on { "cpu" } else { "none" });
    w.key("offload_optimizer", device(spread.offload_optimizer));
    w.key("offload_param", device(spread.offload_param));
}

/// `[vllm_server]`, the `trl vllm-serve` flags, when generation runs there.
fn vllm_server_table(w: &mut Writer, run: &RunConfig) {
    if run.generation != Generation::VllmServer {
        return;
    }
    let server = &run.vllm_server;
    w.table(Table::VllmServer);
    w.key("gpus", server.gpus);
    w.key("tensor_parallel_size", server.tensor_parallel_size);
    w.key("data_parallel_size", server.data_parallel_size);
    w.key("gpu_memory_utilization", server.gpu_memory_utilization);
    if let Some(len) = server.max_model_len {
        w.key("max_model_len", len);
    }
}

/// `get_peft_model` (Unsloth) or PEFT's `LoraConfig`.
fn lora_table(w: &mut Writer, run: &RunConfig) {
    w.table(Table::Lora);
    w.knob(Knob::LoraRank, run.lora_rank);
    w.key("lora_alpha", run.lora_alpha);
    w.key("target_modules", target_modules(run));
    if run.lora_dropout != 0.0 {
        w.key("lora_dropout", run.lora_dropout);
    }
    if !run.modules_to_save.is_empty() {
        let quoted: Vec<String> = run.modules_to_save.iter().map(|m| quoted(m)).collect();
        w.key("modules_to_save", format!("[{}]", quoted.join(", ")));
    }
    match run.stack {
        Stack::Unsloth => w.key(
            "use_gradient_checkpointing",
            match run.checkpointing {
                Checkpointing::Off => "false".to_string(),
                Checkpointing::On => "true".to_string(),
                Checkpointing::UnslothOffload => quoted("unsloth"),
            },
        ),
        Stack::Trl => w.key("task_type", quoted("CAUSAL_LM")),
    }
}

/// The shorthand PEFT expands to every linear layer, and only as a string: peft 0.21.2
/// `tuners/tuners_utils.py` `_maybe_include_all_linear_layers` checks
/// `isinstance(target_modules, str)` against `INCLUDE_LINEAR_LAYERS_SHORTHAND`; a list holding
/// it names a module called "all-linear", which no model has.
pub const ALL_LINEAR: &str = "all-linear";

/// `[lora] target_modules` as the call takes it: PEFT's `LoraConfig` (the trl stack) gets the
/// string `"all-linear"` for the shorthand; a list of module names stays a list. Unsloth's
/// `get_peft_model` (2026.10 `models/llama.py`) iterates `target_modules` as names, so its
/// targets are always a list.
fn target_modules(run: &RunConfig) -> String {
    match run.lora_targets.as_slice() {
        [one] if one == ALL_LINEAR && run.stack == Stack::Trl => quoted(ALL_LINEAR),
        targets => {
            let quoted: Vec<String> = targets.iter().map(|t| quoted(t)).collect();
            format!("[{}]", quoted.join(", "))
        }
    }
}

/// `trl.GRPOConfig`, both stacks.
fn grpo_table(w: &mut Writer, run: &RunConfig) {
    w.table(Table::Grpo);
    let stack = run.stack;
    w.knob(Knob::MicroBatch, run.micro_batch);
    w.knob(Knob::GradAccum, run.grad_accum);
    w.knob(Knob::Generations, run.num_generations);
    w.knob(Knob::CompletionLength, run.completion_len);
    // Debug keeps the decimal point (0.0): TOML reads a float, as GRPOConfig's beta is
    w.key("beta", format!("{:?}", run.beta));
    w.key("optim", quoted(run.optimizer.name()));
    // TRL before 0.29 truncates prompts at its GRPOConfig.max_prompt_length (512 by default
    // in trl 0.15.2 to 0.28): the pinned release gets the prompts' length the run assumes
    if w.takes("max_prompt_length") {
        w.key("max_prompt_length", run.prompt_len);
    }
    if run.liger_loss && stack == Stack::Trl {
        // N8: the release's own name for the Liger loss flag (`use_liger_loss` before 0.26)
        w.key(run.versions.trl_liger_key(), true);
    }
    if let Some(n) = run.steps_per_generation {
        w.key("steps_per_generation", n);
    }
    if let Some(n) = run.generation_batch_size {
        w.key("generation_batch_size", n);
    }
    if run.num_iterations != 1 {
        w.key("num_iterations", run.num_iterations);
    }
    let share = colocated_share(run);
    w.key("use_vllm", run.generation.uses_vllm());
    if run.generation == Generation::VllmServer {
        w.key("vllm_mode", quoted("server"));
        // trl 0.14 and 0.15 have no `trl vllm-serve`: their trainer starts vLLM on the GPU
        // `vllm_device` names, the one after the training processes' (`read_vllm_device`)
        if stack == Stack::Trl && !has_serve(w.versions.trl) && w.takes("vllm_device") {
            w.key("vllm_device", quoted(&format!("cuda:{}", run.gpus)));
            let share = run.vllm_server.gpu_memory_utilization;
            w.key("vllm_gpu_memory_utilization", share);
        }
    }
    if let Some(share) = share {
        w.key("vllm_mode", quoted("colocate"));
        w.key("vllm_gpu_memory_utilization", share);
        if stack == Stack::Trl && run.vllm_sleep {
            w.key("vllm_enable_sleep_mode", true);
        }
        if run.vllm_tensor_parallel > 1 {
            w.key("vllm_tensor_parallel_size", run.vllm_tensor_parallel);
        }
    }
    if stack == Stack::Trl {
        w.knob(Knob::SequenceLength, run.max_seq_len);
    }
    w.key(
        "gradient_checkpointing",
        run.checkpointing != Checkpointing::Off,
    );
    // the run's half precision: fp16 where the GPU has no bf16 (the 16gb preset's T4)
    if run.fp16 {
        w.key("fp16", true);
        w.key("bf16", false);
    } else {
        w.key("bf16", true);
    }
    if run.cast_lm_head_to_fp32 {
        w.key("cast_lm_head_to_fp32", true);
    }
}

fn header(out: &mut String, run: &RunConfig, ctx: &ExportContext) {
    let _ = writeln!(
        out,
        "# grpofit run file, written {} (UTC)",
        crate::dates::today()
    );
    let _ = writeln!(out, "# model: {}; GPU: {}", run.model_name, ctx.gpu);
    if let Some(est) = ctx.estimate {
        let verdict = if est.fits { "fits" } else { "DOES NOT FIT" };
        let _ = writeln!(
            out,
            "# estimate: {} of {} ({verdict}); effective batch {}",
            format_size(est.total_bytes),
            format_size(est.capacity_bytes),
            est.batch.effective_batch
        );
        for c in &est.components {
            let _ = writeln!(out, "#   {:<18} {:>11}", c.name, format_size(c.bytes));
        }
    }
    out.push('\n');
}

/// Writes `text` to `path` atomically (`crate::files::write_atomically`: a random temporary
/// name created exclusively, the target's permissions and links kept). An existing file is
/// kept unless `overwrite`.
pub fn write_atomically(
    path: &Path,
    text: &str,
    overwrite: bool,
) -> Result<(), crate::files::FileError> {
    crate::files::write_atomically(path, text.as_bytes(), overwrite)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_linear_is_written_as_the_string_peft_expands() {
        let arch = crate::arch::catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .unwrap()
            .arch;
        let mut run = RunConfig::example(arch);
        run.stack = Stack::Trl;
        run.full_finetuning = false;
        run.lora_targets = vec![ALL_LINEAR.to_string()];
        let ctx = ExportContext {
            gpu: "",
            gpu_memory: None,
            model_config: None,
            lock_effective_batch: false,
            estimate: None,
            time: None,
        };
        let table: toml::Table = to_toml(&run, &ctx).parse().unwrap();
        assert_eq!(
            table["lora"]["target_modules"],
            toml::Value::String(ALL_LINEAR.into())
        );
        run.lora_targets = vec!["q_proj".into(), "v_proj".into()];
        let table: toml::Table = to_toml(&run, &ctx).parse().unwrap();
        assert!(table["lora"]["target_modules"].is_array());
        // PEFT's modules_to_save: written only when set, as LoraConfig's list
        assert!(table["lora"].get("modules_to_save").is_none());
        run.modules_to_save = vec!["lm_head".into(), "embed_tokens".into()];
        let table: toml::Table = to_toml(&run, &ctx).parse().unwrap();
        assert_eq!(
            table["lora"]["modules_to_save"],
            toml::Value::Array(vec!["lm_head".into(), "embed_tokens".into()])
        );
    }

    #[test]
    fn max_lora_rank_rounds_up_to_a_vllm_rank() {
        assert_eq!(vllm_max_lora_rank(16), 16);
        assert_eq!(vllm_max_lora_rank(17), 32);
        assert_eq!(vllm_max_lora_rank(300), 320);
        assert_eq!(vllm_max_lora_rank(1), 8);
    }
}
