//! Plain-text rendering of an estimate (for `grpofit estimate`).

use grpofit_core::memory::breakdown::Part;
use grpofit_core::memory::estimate::Estimate;
use grpofit_core::memory::roles::Role;
use grpofit_core::run::RunConfig;
use grpofit_core::text::{count, count_f, decimal};
use grpofit_core::units::format_size;
use std::fmt::Write;

/// The completions and prompts a step holds where Unsloth raises the micro-batch to
/// `num_generations` (unsloth#3572, `RunConfig::unsloth_raises_batch`): what the estimate's
/// step runs (`StepBatch`), where the file's own batch would be a fraction of one prompt.
pub fn unsloth_runs(run: &RunConfig) -> Option<(u64, f64)> {
    let b = run.step_batch();
    run.unsloth_raises_batch()
        .then_some((b.effective_batch, b.prompts_per_step))
}

/// `calibrated`: the CUDA context is the one `grpofit calibrate` measured on this card (the line
/// under the table says which), not the built-in H200 figure.
pub fn table(run: &RunConfig, est: &Estimate, gpu_line: &str, calibrated: bool) -> String {
    let mut out = String::new();
    let attention = run
        .modelled_attention()
        .map_or(String::new(), |a| format!(", {a} attention"));
    let _ = writeln!(
        out,
        "{} ({} stack, {} parameters, {} weights{attention})",
        run.model_name,
        run.stack,
        grpofit_core::units::format_count(run.arch.parameters()),
        run.quant
    );
    let _ = writeln!(out, "GPU: {gpu_line}");
    if let Some(line) = spread_line(run) {
        let _ = writeln!(out, "{line}");
    }
    for role in &est.roles {
        let _ = writeln!(out);
        if est.roles.len() > 1 {
            let _ = writeln!(
                out,
                "{} ({}), each GPU:",
                role.role.label(),
                count(role.gpus, "GPU", "GPUs")
            );
        }
        role_table(&mut out, role, calibrated);
    }
    if est.host_memory_bytes > 0 {
        let _ = writeln!(
            out,
            "host memory: {} per node for the offloaded states (DeepSpeed's estimate, x1.5 buffers)",
            format_size(est.host_memory_bytes)
        );
    }
    let _ = writeln!(out);
    let batch = format!(
        "effective batch {} ({} per device x {} accumulation x {})",
        count(run.effective_batch(), "completion", "completions"),
        run.micro_batch,
        run.grad_accum,
        count(run.processes(), "GPU", "GPUs"),
    );
    let _ = match unsloth_runs(run) {
        Some((batch_run, prompts)) => writeln!(
            out,
            "{batch} as written; Unsloth runs {} (micro-batch {}): {} x {}",
            count(batch_run, "completion", "completions"),
            est.batch.running_micro_batch,
            count_f(prompts, 2, "prompt", "prompts"),
            count(run.num_generations, "generation", "generations")
        ),
        None => writeln!(
            out,
            "{batch}, {} x {}",
            count_f(est.batch.prompts_per_step, 2, "prompt", "prompts"),
            count(run.num_generations, "generation", "generations")
        ),
    };
    let _ = writeln!(
        out,
        "training step: {} allocated, {} reserved by PyTorch at the peak (micro-batch {} of {} + {} tokens)",
        format_size(est.training_peak_allocated_bytes),
        format_size(est.training_peak_reserved_bytes),
        est.batch.running_micro_batch,
        run.prompt_len,
        run.completion_len
    );
    for v in est.roles.iter().filter_map(|r| r.vllm.as_ref()) {
        let _ = writeln!(
            out,
            "vLLM: {} reserved, KV cache {} = {} of {} tokens at once (vLLM's \"maximum concurrency\" {:.2}x)",
            format_size(v.reservation_bytes),
            format_size(v.kv_cache_bytes),
            // whole sequences: vLLM holds no part of one; its own log prints the ratio
            count(
                v.full_length_sequences.max(0.0).floor() as u64,
                "sequence",
                "sequences"
            ),
            v.max_model_len,
            v.full_length_sequences
        );
    }
    for w in &est.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The fit solver's answer as text.
pub fn fit_text(
    run: &RunConfig,
    outcome: &grpofit_core::fit::FitOutcome,
    gpu_line: &str,
    headroom: f64,
) -> String {
    use grpofit_core::fit::FitOutcome;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {gpu_line}, keeping {}% free",
        run.model_name,
        decimal(headroom)
    );
    match outcome {
        FitOutcome::AlreadyFits { estimate } => {
            let _ = writeln!(
                out,
                "already fits: {} of {}",
                format_size(estimate.total_bytes),
                format_size(estimate.capacity_bytes)
            );
        }
        FitOutcome::Fitted {
            changes, estimate, ..
        } => {
            out.push_str(&change_table(changes));
            // both as the trainer runs them (Unsloth's raise counted)
            let (now, was) = (
                estimate.batch.effective_batch,
                run.running_effective_batch(),
            );
            let batch = if now == was {
                format!("effective batch {now} kept")
            } else {
                format!("effective batch {now} (was {was})")
            };
            let _ = writeln!(
                out,
                "now {} of {} (headroom {}); {batch}",
                format_size(estimate.total_bytes),
                format_size(estimate.capacity_bytes),
                format_size(estimate.headroom_bytes.max(0) as u64),
            );
        }
        FitOutcome::Impossible {
            floors,
            smallest_gpu_bytes,
            estimate,
        } => {
            let _ = writeln!(
                out,
                "no configuration on the grid fits: with every lever at its floor ({}) the run still needs {}",
                floors.join(", "),
                format_size(estimate.total_bytes)
            );
            let _ = writeln!(
                out,
                "smallest GPU that would do: {}",
                format_size(*smallest_gpu_bytes)
            );
        }
    }
    out
}

/// An OOM report as text: the figures the message gives, the verdict by name, the advice
/// (`grpofit_core::diagnose::oom::advice`).
pub fn diagnosis_text(
    r: &grpofit_core::diagnose::oom::OomReport,
    advice: &[String],
    culprit: Option<&str>,
) -> String {
    let mut out = String::new();
    let size = |b: Option<u64>| b.map(format_size);
    let tokens = |t: Option<u64>| t.map(|t| format!("{t} tokens"));
    let total = size(r.total_bytes).or_else(|| {
        r.assumed_total_bytes.map(|b| {
            format!(
                "{} ({}; the message gives none)",
                format_size(b),
                r.assumed_total_from.unwrap_or("assumed")
            )
        })
    });
    let rows: Vec<(&str, Option<String>)> = if r.from_vllm() {
        let _ = writeln!(out, "vLLM start-up refusal ({})", r.format);
        vec![
            (
                "vLLM share",
                match (r.vllm_utilization, r.requested_bytes) {
                    (Some(u), Some(b)) => Some(format!("{u} of the GPU = {}", format_size(b))),
                    (Some(u), None) => Some(format!("{u} of the GPU")),
                    (None, b) => size(b),
                },
            ),
            ("free at start-up", size(r.free_bytes)),
            ("GPU total", total),
            ("KV cache needed", size(r.kv_cache_needed_bytes)),
            ("KV cache available", size(r.kv_cache_available_bytes)),
            ("max_model_len", tokens(r.max_model_len)),
            ("longest that fits", tokens(r.estimated_max_model_len)),
            ("shortfall", size(r.shortfall_bytes)),
        ]
    } else {
        let _ = writeln!(out, "out-of-memory message ({})", r.format);
        vec![
            ("requested", size(r.requested_bytes)),
            ("GPU total", total),
            ("free", size(r.free_bytes)),
            ("this process", size(r.process_in_use_bytes)),
            ("allocated by PyTorch", size(r.allocated_bytes)),
            ("reserved, unused", size(r.reserved_unallocated_bytes)),
            ("allowed (cap)", size(r.allowed_bytes)),
            ("private pools", size(r.private_pools_bytes)),
            ("shortfall", size(r.shortfall_bytes)),
        ]
    };
    for (label, value) in rows {
        if let Some(value) = value {
            let _ = writeln!(out, "  {label:<22} {value}");
        }
    }
    for p in &r.other_processes {
        let _ = writeln!(
            out,
            "  {:<22} {}",
            format!("process {}", p.pid),
            format_size(p.bytes)
        );
    }
    // the cause whose removal frees the most, then the others
    for (i, cause) in r.causes.iter().enumerate() {
        let head = if i == 0 { "verdict" } else { "also" };
        let _ = writeln!(out, "{head}: {}: {}", cause.verdict, cause.detail);
    }
    if !advice.is_empty() {
        let _ = writeln!(out, "what to do:");
    }
    for line in advice {
        let _ = writeln!(out, "  - {line}");
    }
    if let Some(c) = culprit {
        let _ = writeln!(out, "likely request: {c}");
    }
    out
}

/// `; weights 7.50 GiB as stored (safetensors headers)`, when the checkpoint's headers were read:
/// whether those exact bytes are the estimate's weights, or why not.
pub fn stored_weights_note(run: &RunConfig) -> String {
    let Some(s) = run.stored_weights else {
        return String::new();
    };
    if s.stored_as == run.quant {
        format!(
            "; weights {} as stored (safetensors headers, used)",
            format_size(s.bytes)
        )
    } else {
        format!(
            "; weights {} stored as {} (safetensors headers), loaded as {}: estimated by formula",
            format_size(s.bytes),
            s.stored_as,
            run.quant
        )
    }
}

/// How the training processes share the model, when they do: `7 GPUs x 1 node, DeepSpeed
/// ZeRO-3: weights, gradients and optimizer states sharded 1/7`.
fn spread_line(run: &RunConfig) -> Option<String> {
    let n = run.processes();
    if n <= 1 && run.spread.nodes <= 1 {
        return None;
    }
    let sharded = match run.spread.stage() {
        0 => "every GPU holds the whole model and its states".to_string(),
        1 => format!("optimizer states sharded 1/{n}"),
        2 => format!("gradients and optimizer states sharded 1/{n}"),
        _ => format!("weights, gradients and optimizer states sharded 1/{n}"),
    };
    Some(format!(
        "training: {} x {}, {}: {sharded}",
        count(run.gpus, "GPU", "GPUs"),
        count(run.spread.nodes, "node", "nodes"),
        run.spread.describe()
    ))
}

/// One role's components, total, capacity and verdict.
fn role_table(out: &mut String, role: &Role, calibrated: bool) {
    let cap = role.capacity_bytes.max(1) as f64;
    let _ = writeln!(
        out,
        "{:<18} {:>11} {:>6}  what it is",
        "component", "size", "share"
    );
    for c in &role.components {
        let _ = writeln!(
            out,
            "{:<18} {:>11} {:>5.1}%  {}",
            c.name,
            format_size(c.bytes),
            100.0 * c.bytes as f64 / cap,
            match c.part {
                Part::CudaContext if calibrated => {
                    "CUDA context and kernels as measured on your card (below), and cuBLAS workspaces"
                }
                part => part.explanation(),
            }
        );
    }
    let _ = writeln!(
        out,
        "{:<18} {:>11} {:>5.1}%",
        "total",
        format_size(role.total_bytes),
        100.0 * role.total_bytes as f64 / cap
    );
    let _ = writeln!(
        out,
        "{:<18} {:>11}",
        "capacity",
        format_size(role.capacity_bytes)
    );
    let margin = role.headroom_bytes.unsigned_abs();
    if grpofit_core::fit::under_headroom(role) {
        // fit keeps DEFAULT_HEADROOM free and would change this run: not a plain "fits"
        let _ = writeln!(
            out,
            "fits, but under the {} headroom fit keeps: headroom {} ({:.1}%)",
            grpofit_core::fit::headroom_percent(),
            format_size(margin),
            100.0 * margin as f64 / cap
        );
    } else if role.fits {
        let _ = writeln!(
            out,
            "fits, headroom {} ({:.1}%)",
            format_size(margin),
            100.0 * margin as f64 / cap
        );
    } else if let Some(reason) = role.vllm.as_ref().and_then(|v| v.refusal.as_ref()) {
        let _ = writeln!(out, "DOES NOT FIT: {reason}");
    } else {
        let _ = writeln!(
            out,
            "DOES NOT FIT: short by {} ({:.1}%)",
            format_size(margin),
            100.0 * margin as f64 / cap
        );
    }
}

/// The versions the estimate used and where each came from, on one line:
/// `trl 0.15.2 (run file), unsloth 2025.8.9 (implied: ...), ...`.
pub fn versions_line(pins: &[grpofit_core::run::versions::Pinned]) -> String {
    pins.iter()
        .map(|p| format!("{} {} ({})", p.package.name(), p.version, p.origin))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `fit`'s changes as its table prints them: key, from, to, memory, trade-off (`fit --fastest`
/// prints the nearest fit's the same way).
pub fn change_table(changes: &[grpofit_core::fit::Change]) -> String {
    let mut out = format!(
        "{:<30} {:>9} {:>9} {:>11}  trade-off\n",
        "change", "from", "to", "memory"
    );
    for c in changes {
        let memory = if c.bytes_saved == 0 {
            format_size(0)
        } else if c.bytes_saved > 0 {
            format!("-{}", format_size(c.bytes_saved as u64))
        } else {
            format!("+{}", format_size(c.bytes_saved.unsigned_abs()))
        };
        let _ = writeln!(
            out,
            "{:<30} {:>9} {:>9} {:>11}  {}",
            c.key, c.from, c.to, memory, c.trade_off
        );
    }
    out
}

/// `check`'s rewards figure, as `check` and the followed screen say it: TRL's own timings of the
/// reward functions (the callback's `reward_funcs`, each generation cycle's average a step)
/// against the prediction's `rewards` phase.
pub fn rewards_check(r: &grpofit_core::measure::step_time::PhaseCheck) -> String {
    format!(
        "rewards: predicted {}, measured {} (TRL's own timings)",
        grpofit_core::time::seconds(r.predicted_seconds),
        grpofit_core::time::seconds(r.measured_seconds)
    )
}
