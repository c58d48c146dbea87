//! What to do about each cause of an out-of-memory message, in the run's own keys.

use super::report::*;
use crate::fit::Lever;
use crate::run::knobs::Knob;
use crate::run::{Generation, Quant, RunConfig, Stack};
use crate::units::format_size;

/// A trainer key in backquotes: the run's own stack's, else both stacks'.
fn key_of(run: Option<&RunConfig>, key: impl Fn(Stack) -> &'static str) -> String {
    match run {
        Some(r) => format!("`{}`", key(r.stack)),
        None => format!(
            "Unsloth `{}`, TRL `{}`",
            key(Stack::Unsloth),
            key(Stack::Trl)
        ),
    }
}

/// A share, rounded down (`down`) or up to the hundredth, as the trainers' files write it.
fn hundredths(x: f64, down: bool) -> f64 {
    let h = x * 100.0;
    // 0.44999999 is 0.45: round away float noise before flooring or ceiling
    let h = (h * 1e6).round() / 1e6;
    (if down { h.floor() } else { h.ceil() }) / 100.0
}

/// What to do about each of `report`'s causes, in their order (the one that frees the most
/// first), each in the direction that helps. With the failed run, its own stack's keys and
/// values are named; without, both stacks' keys.
pub fn advice(report: &OomReport, run: Option<&RunConfig>) -> Vec<String> {
    let mut out = Vec::new();
    let share_key = key_of(run, |s| Knob::VllmShare.trainer_key(s));
    let context_key = super::vllm_context::trl_context_key(run)
        .unwrap_or_else(|| key_of(run, |s| Knob::SequenceLength.trainer_key(s)));
    let share = run.and_then(|r| match r.generation {
        Generation::ColocatedVllm { share } => Some(share),
        Generation::VllmServer | Generation::Transformers => None,
    });
    for cause in &report.causes {
        match cause.verdict {
            Verdict::DoesNotFit => out.push(format!(
                "the run needs {} at its peak: pull the strongest lever ({})",
                // a message that gives no shortfall (no free memory, or none readable) says
                // no amount: "0 B less" would read as nothing to do
                if cause.bytes > 0 {
                    format!("{} less", format_size(cause.bytes))
                } else {
                    "less (the message says not how much)".to_string()
                },
                if run.is_some() {
                    "the nearest configuration that fits is below"
                } else {
                    "`grpofit fit --config RUN.toml` finds the nearest configuration that fits"
                }
            )),
            Verdict::Fragmentation => out.push(
                if run.is_some_and(|r| r.expandable_segments) {
                    format!(
                        "the run file sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: check that it reaches the trainer (set before torch starts), or call torch.cuda.empty_cache() between generation and training to return the {}",
                        format_size(cause.bytes)
                    )
                } else {
                    format!(
                        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before torch starts, so the {} PyTorch holds unused can serve the request",
                        format_size(cause.bytes)
                    )
                },
            ),
            Verdict::OtherProcesses => {
                let each: Vec<String> = report
                    .other_processes
                    .iter()
                    .map(|p| format!("process {} ({})", p.pid, format_size(p.bytes)))
                    .collect();
                out.push(format!(
                    "stop {}, or move it to another GPU (`nvidia-smi` lists what each process holds)",
                    each.join(", ")
                ));
            }
            Verdict::VllmReservation => {
                let sleep = match run.map(|r| r.stack) {
                    Some(Stack::Trl) => "`vllm_enable_sleep_mode = true`".to_string(),
                    Some(Stack::Unsloth) => "`UNSLOTH_VLLM_STANDBY=1`".to_string(),
                    None => "TRL `vllm_enable_sleep_mode = true`, Unsloth `UNSLOTH_VLLM_STANDBY=1`"
                        .to_string(),
                };
                out.push(format!(
                    "lower the vLLM share ({share_key}{}) or its context ({context_key}): its KV cache holds {} while training runs",
                    share.map_or(String::new(), |s| format!(", now {s}")),
                    format_size(cause.bytes)
                ));
                out.push(format!(
                    "or let vLLM sleep while training runs ({sleep})"
                ));
            }
            Verdict::VllmCannotStart => vllm_advice(report, run, share, &share_key, &context_key, &mut out),
        }
    }
    out
}

/// vLLM refused to start: lower the share when it asks for more than is free, else make room
/// for its KV cache (a larger share, a shorter context, fp8 KV, 4-bit weights).
fn vllm_advice(
    r: &OomReport,
    run: Option<&RunConfig>,
    share: Option<f64>,
    share_key: &str,
    context_key: &str,
    out: &mut Vec<String>,
) {
    if r.format == MessageFormat::VllmStartupFreeMemory {
        match (r.free_bytes, r.total_bytes) {
            (Some(free), Some(total)) if total > 0 => {
                let at_most = hundredths(free as f64 / total as f64, true);
                if at_most > 0.0 {
                    out.push(format!(
                        "lower the vLLM share ({share_key}) to at most {at_most:.2}: {} of {} is free when vLLM starts",
                        format_size(free),
                        format_size(total)
                    ));
                }
                out.push(format!(
                    "or free memory: other processes or the trainer (TRL loads its model before vLLM) hold {}{}",
                    format_size(total.saturating_sub(free)),
                    r.shortfall_bytes.map_or(String::new(), |s| format!(
                        ", and {} of it must go for this share",
                        format_size(s)
                    ))
                ));
            }
            _ => out.push(format!(
                "lower the vLLM share ({share_key}) below the free fraction of the GPU, or free the memory other processes or the trainer hold"
            )),
        }
        return;
    }
    let no_blocks = r.format == MessageFormat::VllmNoCacheBlocks;
    let capacity = r.capacity_bytes();
    let now = share.map_or(String::new(), |s| format!(", now {s}"));
    out.push(match (r.shortfall_bytes, capacity) {
        (Some(short), Some(cap)) if cap > 0 => {
            let by = hundredths(short as f64 / cap as f64, false);
            let room = format!(
                "{} more KV cache on {}",
                format_size(short),
                format_size(cap)
            );
            match share {
                Some(s) => format!(
                    "raise the vLLM share ({share_key}) from {s} to at least {:.2}: {room}",
                    s + by
                ),
                None => format!("raise the vLLM share ({share_key}) by at least {by:.2}: {room}"),
            }
        }
        (Some(short), _) => format!(
            "raise the vLLM share ({share_key}{now}): {} more KV cache is needed",
            format_size(short)
        ),
        _ if no_blocks => format!(
            "raise the vLLM share ({share_key}{now}): weights, profiled activations and CUDA graphs leave none of it to the KV cache"
        ),
        _ => format!("raise the vLLM share ({share_key}{now})"),
    });
    if !no_blocks {
        out.push(match r.estimated_max_model_len {
            Some(t) => format!(
                "or shorten its context ({context_key}) to at most {t} tokens (what its KV cache holds)"
            ),
            None => format!("or shorten its context ({context_key})"),
        });
    }
    // Unsloth passes kv_cache_dtype="fp8" to vLLM; TRL's colocate call has no such key
    let fp8 = !no_blocks && run.is_none_or(|r| r.stack == Stack::Unsloth && !r.vllm_kv_fp8);
    let four_bit = run.is_none_or(|r| r.quant != Quant::Nf4);
    let fp8_text = format!(
        "store its KV cache in fp8 ({}`{} = true`: half the bytes a token)",
        if run.is_some() { "" } else { "Unsloth " },
        Lever::KvCacheFp8.trainer_key(Stack::Unsloth)
    );
    let four_text = format!(
        "load the weights in 4-bit (`{} = true`), leaving more of the share to the KV cache",
        Lever::FourBitWeights.trainer_key(run.map_or(Stack::Unsloth, |r| r.stack))
    );
    match (fp8, four_bit) {
        (true, true) => out.push(format!("or {fp8_text}, or {four_text}")),
        (true, false) => out.push(format!("or {fp8_text}")),
        (false, true) => out.push(format!("or {four_text}")),
        (false, false) => {}
    }
}
