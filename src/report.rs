//! Plain-text rendering of an estimate (for `vramfit estimate`).

use crate::model::estimate::Estimate;
use crate::model::run::RunConfig;
use crate::model::units::format_size;
use std::fmt::Write;

pub fn table(run: &RunConfig, est: &Estimate, gpu_line: &str) -> String {
    let mut out = String::new();
    let cap = est.capacity_bytes.max(1) as f64;
    let _ = writeln!(
        out,
        "{} ({:?} stack, {} parameters, {:?})",
        run.model_name,
        run.stack,
        billions(run.arch.parameters()),
        run.quant
    );
    let _ = writeln!(out, "GPU: {gpu_line}");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<18} {:>11} {:>6}  what it is",
        "component", "size", "share"
    );
    for c in &est.components {
        let _ = writeln!(
            out,
            "{:<18} {:>11} {:>5.1}%  {}",
            c.name,
            format_size(c.bytes),
            100.0 * c.bytes as f64 / cap,
            c.part.explanation()
        );
    }
    let _ = writeln!(
        out,
        "{:<18} {:>11} {:>5.1}%",
        "total",
        format_size(est.total_bytes),
        100.0 * est.total_bytes as f64 / cap
    );
    let _ = writeln!(
        out,
        "{:<18} {:>11}",
        "capacity",
        format_size(est.capacity_bytes)
    );
    let margin = est.headroom_bytes.unsigned_abs();
    if est.fits {
        let _ = writeln!(
            out,
            "fits, headroom {} ({:.1}%)",
            format_size(margin),
            100.0 * margin as f64 / cap
        );
    } else {
        let _ = writeln!(
            out,
            "DOES NOT FIT: short by {} ({:.1}%)",
            format_size(margin),
            100.0 * margin as f64 / cap
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "effective batch {} completions ({} per device x {} accumulation x {} GPUs), {} prompts x {} generations",
        est.effective_batch,
        run.micro_batch,
        run.grad_accum,
        run.gpus,
        est.prompts_per_step,
        run.num_generations
    );
    let _ = writeln!(
        out,
        "training step: {} allocated, {} reserved by PyTorch at the peak (micro-batch {} of {} + {} tokens)",
        format_size(est.training_peak_allocated_bytes),
        format_size(est.training_peak_reserved_bytes),
        est.running_micro_batch,
        run.prompt_len,
        run.completion_len
    );
    if let Some(v) = &est.vllm {
        let _ = writeln!(
            out,
            "vLLM: {} reserved, KV cache {} = {:.1} sequences of {} tokens",
            format_size(v.reservation_bytes),
            format_size(v.kv_cache_bytes),
            v.full_length_sequences,
            run.max_seq_len
        );
    }
    for w in &est.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

fn billions(n: u64) -> String {
    format!("{:.2}B", n as f64 / 1e9)
}
