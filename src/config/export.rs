//! Writing a run file: each trainer table holds exactly the keyword arguments of one call for
//! the chosen stack, `[env]` the environment, and a comment header the estimate it was made with.

use crate::model::estimate::Estimate;
use crate::model::run::{Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack};
use crate::model::units::{exact_size, format_size};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

pub use crate::model::run::vllm_max_lora_rank;

pub fn optimizer_name(o: Optimizer) -> &'static str {
    match o {
        Optimizer::AdamW => "adamw_torch",
        Optimizer::AdamW8bit => "adamw_8bit",
        Optimizer::PagedAdamW => "paged_adamw_32bit",
        Optimizer::PagedAdamW8bit => "paged_adamw_8bit",
        Optimizer::Sgd => "sgd",
    }
}

/// What the header records beside the run.
pub struct ExportContext<'a> {
    pub gpu: &'a str,
    pub gpu_memory: Option<u64>,
    pub model_config: Option<&'a Path>,
    pub lock_effective_batch: bool,
    pub estimate: Option<&'a Estimate>,
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

pub fn to_toml(run: &RunConfig, ctx: &ExportContext) -> String {
    let mut out = String::new();
    header(&mut out, run, ctx);
    let colocated = match run.generation {
        Generation::ColocatedVllm { share } => Some(share),
        Generation::Elsewhere => None,
    };
    let mut w = |line: String| {
        out.push_str(&line);
        out.push('\n');
    };
    w("[vramfit]".into());
    w(format!(
        "stack = {}",
        quoted(if run.stack == Stack::Trl {
            "trl"
        } else {
            "unsloth"
        })
    ));
    if let Some(bytes) = ctx.gpu_memory {
        w(format!("gpu_memory = {}", quoted(&exact_size(bytes))));
    }
    w(format!("gpus = {}", run.gpus));
    if let Some(p) = ctx.model_config {
        w(format!(
            "model_config = {}",
            quoted(&p.display().to_string())
        ));
    }
    w(format!(
        "lock_effective_batch = {}",
        ctx.lock_effective_batch
    ));
    if run.stack == Stack::Trl {
        w(format!("max_seq_length = {}", run.max_seq_len));
    }
    w(String::new());
    w("[model]".into());
    w(format!("model_name = {}", quoted(&run.model_name)));
    match run.stack {
        Stack::Unsloth => {
            w(format!("max_seq_length = {}", run.max_seq_len));
            w(format!("load_in_4bit = {}", run.quant == Quant::Nf4));
            if run.quant == Quant::Int8 {
                w("load_in_8bit = true".into());
            }
            w(format!("fast_inference = {}", colocated.is_some()));
            if let Some(share) = colocated {
                w(format!("gpu_memory_utilization = {share}"));
            }
        }
        Stack::Trl => {
            w(format!("dtype = {}", quoted("bfloat16")));
            w(format!("load_in_4bit = {}", run.quant == Quant::Nf4));
            if run.quant == Quant::Int8 {
                w("load_in_8bit = true".into());
            }
        }
    }
    if let Some(m) = run.max_lora_rank {
        w(format!("max_lora_rank = {m}"));
    }
    w(String::new());
    w("[lora]".into());
    w(format!("r = {}", run.lora_rank));
    w(format!("lora_alpha = {}", run.lora_alpha));
    let targets: Vec<String> = run.lora_targets.iter().map(|t| quoted(t)).collect();
    w(format!("target_modules = [{}]", targets.join(", ")));
    match run.stack {
        Stack::Unsloth => w(format!(
            "use_gradient_checkpointing = {}",
            match run.checkpointing {
                Checkpointing::Off => "false".to_string(),
                Checkpointing::On => "true".to_string(),
                Checkpointing::UnslothOffload => quoted("unsloth"),
            }
        )),
        Stack::Trl => w(format!("task_type = {}", quoted("CAUSAL_LM"))),
    }
    w(String::new());
    w("[grpo]".into());
    w(format!("per_device_train_batch_size = {}", run.micro_batch));
    w(format!("gradient_accumulation_steps = {}", run.grad_accum));
    w(format!("num_generations = {}", run.num_generations));
    w(format!("max_prompt_length = {}", run.prompt_len));
    w(format!("max_completion_length = {}", run.completion_len));
    w(format!("beta = {:?}", run.beta));
    w(format!("optim = {}", quoted(optimizer_name(run.optimizer))));
    w(format!("use_vllm = {}", colocated.is_some()));
    if let Some(share) = colocated {
        w(format!("vllm_mode = {}", quoted("colocate")));
        w(format!("vllm_gpu_memory_utilization = {share}"));
    }
    w(format!(
        "gradient_checkpointing = {}",
        run.checkpointing != Checkpointing::Off
    ));
    w("bf16 = true".into());
    if run.fused_logits {
        w("use_liger_loss = true".into());
    }
    w(String::new());
    w("[env]".into());
    if run.expandable_segments {
        w(format!(
            "PYTORCH_CUDA_ALLOC_CONF = {}",
            quoted("expandable_segments:True")
        ));
    }
    if run.unsloth_standby {
        w(format!("UNSLOTH_VLLM_STANDBY = {}", quoted("1")));
    }
    out
}

fn header(out: &mut String, run: &RunConfig, ctx: &ExportContext) {
    let _ = writeln!(out, "# vramfit run file, written {} (UTC)", today());
    let _ = writeln!(out, "# model: {}; GPU: {}", run.model_name, ctx.gpu);
    if let Some(est) = ctx.estimate {
        let verdict = if est.fits { "fits" } else { "DOES NOT FIT" };
        let _ = writeln!(
            out,
            "# estimate: {} of {} ({verdict}); effective batch {}",
            format_size(est.total_bytes),
            format_size(est.capacity_bytes),
            est.effective_batch
        );
        for c in &est.components {
            let _ = writeln!(out, "#   {:<18} {:>11}", c.name, format_size(c.bytes));
        }
    }
    out.push('\n');
}

/// Today's date from the system clock, as YYYY-MM-DD.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Writes `text` to `path` atomically: a temporary file beside it, flushed, then renamed over.
/// An existing file is kept unless `overwrite`.
pub fn write_atomically(path: &Path, text: &str, overwrite: bool) -> Result<(), String> {
    let shown = path.display();
    if path.exists() && !overwrite {
        return Err(format!("{shown} exists: not overwritten (use --force)"));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| format!("{shown}: not a file path"))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {shown}: {e}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn max_lora_rank_rounds_up_to_a_vllm_rank() {
        assert_eq!(vllm_max_lora_rank(16), 16);
        assert_eq!(vllm_max_lora_rank(17), 32);
        assert_eq!(vllm_max_lora_rank(300), 320);
        assert_eq!(vllm_max_lora_rank(1), 8);
    }
}
