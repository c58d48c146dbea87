//! What an out-of-memory message says, read: its figures (`OomReport`), the causes found in
//! them, the one that frees the most first (`Verdict`), and the run's estimate as one more cause.

use crate::memory::refusal::VllmRefusal;
use crate::units::format_size;
use serde::Serialize;
use std::fmt;

/// What made the memory run out. Shown by its [`Verdict::name`] (`Display`), serialised by its
/// snake_case name (`does_not_fit`, `fragmentation`, `other_processes`, `vllm_reservation`,
/// `vllm_cannot_start`, whose cause names vLLM's failed check in `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// the request exceeds what could ever be freed: the run needs less memory
    DoesNotFit,
    /// memory PyTorch reserved but does not use would have covered the request
    Fragmentation,
    /// another process holds the difference
    OtherProcesses,
    /// vLLM's share, held while training runs, starves the training step
    VllmReservation,
    /// vLLM refused to start: its KV cache cannot hold one sequence of its context, it has no
    /// room for a single cache block, or its share asks for more than is free at start-up
    VllmCannotStart,
}

impl Verdict {
    /// The verdict in the user's words.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::DoesNotFit => "does not fit",
            Verdict::Fragmentation => "fragmentation",
            Verdict::OtherProcesses => "other processes",
            Verdict::VllmReservation => "vLLM's share starves training",
            Verdict::VllmCannotStart => "vLLM cannot start",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One cause of the shortfall and the bytes its removal frees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    #[serde(rename = "cause")]
    pub verdict: Verdict,
    /// What removing the cause frees; for `does_not_fit`, what no named cause can free (the
    /// run must shrink by that much), or the request's excess over the GPU or the cap.
    pub bytes: u64,
    /// the cause in words, with its numbers
    pub detail: String,
    /// for `vllm_cannot_start`: which of vLLM's start-up checks failed
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<VllmRefusal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OtherProcess {
    pub pid: u64,
    pub bytes: u64,
}

/// Which kind of message was read: PyTorch's out-of-memory error in the wording of its release,
/// or one of vLLM's start-up refusals. Serialised as its name (`pytorch-2.2+`,
/// `vllm-startup-free-memory`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MessageFormat {
    /// "(GPU 0; X total capacity; Y already allocated; Z free; W reserved in total by PyTorch)"
    #[serde(rename = "pytorch-1.x-2.0")]
    Pytorch1To2_0,
    /// "GPU 0 has a total capacty of ..." (2.1 spells it so)
    #[serde(rename = "pytorch-2.1")]
    Pytorch2_1,
    /// "GPU 0 has a total capacity of X of which Y is free"
    #[serde(rename = "pytorch-2.2+")]
    Pytorch2_2,
    #[serde(rename = "vllm-startup-free-memory")]
    VllmStartupFreeMemory,
    #[serde(rename = "vllm-kv-cache")]
    VllmKvCache,
    /// vLLM before V1: the KV cache's capacity in tokens
    #[serde(rename = "vllm-kv-cache-tokens")]
    VllmKvCacheTokens,
    #[serde(rename = "vllm-no-cache-blocks")]
    VllmNoCacheBlocks,
}

impl MessageFormat {
    /// The format's name, as `--json` writes it.
    pub fn name(self) -> &'static str {
        match self {
            MessageFormat::Pytorch1To2_0 => "pytorch-1.x-2.0",
            MessageFormat::Pytorch2_1 => "pytorch-2.1",
            MessageFormat::Pytorch2_2 => "pytorch-2.2+",
            MessageFormat::VllmStartupFreeMemory => "vllm-startup-free-memory",
            MessageFormat::VllmKvCache => "vllm-kv-cache",
            MessageFormat::VllmKvCacheTokens => "vllm-kv-cache-tokens",
            MessageFormat::VllmNoCacheBlocks => "vllm-no-cache-blocks",
        }
    }

    /// The start-up check vLLM's message reports; `None` for PyTorch's messages.
    pub fn vllm_refusal(self) -> Option<VllmRefusal> {
        match self {
            MessageFormat::VllmStartupFreeMemory => Some(VllmRefusal::FreeMemory),
            MessageFormat::VllmKvCache | MessageFormat::VllmKvCacheTokens => {
                Some(VllmRefusal::KvCacheTooSmall)
            }
            MessageFormat::VllmNoCacheBlocks => Some(VllmRefusal::NoCacheBlocks),
            _ => None,
        }
    }
}

impl fmt::Display for MessageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomReport {
    /// which kind of message it was
    pub format: MessageFormat,
    pub requested_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub process_in_use_bytes: Option<u64>,
    pub allocated_bytes: Option<u64>,
    pub reserved_unallocated_bytes: Option<u64>,
    pub allowed_bytes: Option<u64>,
    pub private_pools_bytes: Option<u64>,
    pub other_processes: Vec<OtherProcess>,
    /// vLLM's start-up refusal: the share asked for (`gpu_memory_utilization`)
    pub vllm_utilization: Option<f64>,
    /// vLLM's KV refusal: the KV cache one sequence of `max_model_len` needs, and what there is
    pub kv_cache_needed_bytes: Option<u64>,
    pub kv_cache_available_bytes: Option<u64>,
    /// vLLM's context (`max_model_len`), and the longest its KV cache could hold
    pub max_model_len: Option<u64>,
    pub estimated_max_model_len: Option<u64>,
    pub shortfall_bytes: Option<u64>,
    /// the GPU's memory when the message gives none: `--gpu-mem`, or the run file's
    /// `gpu_memory` ([`OomReport::assume_total`]); `assumed_total_from` says which
    pub assumed_total_bytes: Option<u64>,
    pub assumed_total_from: Option<&'static str>,
    /// what vLLM's KV cache holds while training runs, from the failed run's estimate
    /// ([`refine`]); `None` without a run
    pub vllm_kv_cache_bytes: Option<u64>,
    /// the failed run's estimated peak ([`refine`]): above the GPU, the run does not fit
    /// whatever else the message shows held memory; `None` without a run (the binary's JSON
    /// says it as `estimate_bytes`)
    #[serde(skip)]
    pub estimated_peak_bytes: Option<u64>,
    /// the cause whose removal frees the most: `causes[0]`'s
    pub verdict: Verdict,
    /// every cause found, the one that frees the most first
    pub causes: Vec<Cause>,
    /// the message as found in the log, trimmed
    pub message: String,
}

impl OomReport {
    /// Whether the message is one of vLLM's start-up refusals rather than PyTorch's OOM.
    pub fn from_vllm(&self) -> bool {
        self.format.vllm_refusal().is_some()
    }

    /// The most the failing process could ever hold: the per-process cap, else the GPU.
    pub fn limit_bytes(&self) -> Option<u64> {
        self.allowed_bytes.or(self.capacity_bytes())
    }

    /// The GPU's memory: the message's, else the one assumed.
    pub fn capacity_bytes(&self) -> Option<u64> {
        self.total_bytes.or(self.assumed_total_bytes)
    }

    /// Takes `bytes` as the GPU's memory (`from`: where the figure comes from, e.g.
    /// `--gpu-mem`) when the message gives none; `false`, and nothing changed, when it does.
    pub fn assume_total(&mut self, bytes: u64, from: &'static str) -> bool {
        if self.total_bytes.is_some() {
            return false;
        }
        self.assumed_total_bytes = Some(bytes);
        self.assumed_total_from = Some(from);
        self.conclude();
        true
    }

    /// Sets `causes` from the figures, the one that frees the most first, and the verdict
    /// from it.
    pub(super) fn conclude(&mut self) {
        let mut causes = if self.from_vllm() {
            vec![self.vllm_cause()]
        } else {
            self.torch_causes()
        };
        // largest first; a request larger than the GPU (or the cap) comes first whatever the
        // rest frees, since no freeing makes it fit
        let exceeds = self
            .requested_bytes
            .max(self.estimated_peak_bytes)
            .zip(self.limit_bytes())
            .is_some_and(|(r, l)| r > l);
        causes.sort_by_key(|c| {
            (
                !(exceeds && c.verdict == Verdict::DoesNotFit),
                std::cmp::Reverse(c.bytes),
            )
        });
        self.verdict = causes.first().map_or(Verdict::DoesNotFit, |c| c.verdict);
        self.causes = causes;
    }

    fn torch_causes(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        let others = self
            .other_processes
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.bytes));
        // under a per-process cap ("N allowed"), what other processes hold is not this
        // process's room
        if others > 0 && self.allowed_bytes.is_none() {
            let pids: Vec<String> = self
                .other_processes
                .iter()
                .map(|p| p.pid.to_string())
                .collect();
            let who = match pids.as_slice() {
                [one] => format!("process {one} holds"),
                many => format!("processes {} hold", many.join(", ")),
            };
            causes.push(Cause {
                verdict: Verdict::OtherProcesses,
                bytes: others,
                detail: format!("{who} {} of the GPU", format_size(others)),
                reason: None,
            });
        }
        if let Some(unused) = self.reserved_unallocated_bytes.filter(|&b| b > 0) {
            causes.push(Cause {
                verdict: Verdict::Fragmentation,
                bytes: unused,
                detail: format!(
                    "{} reserved by PyTorch but unallocated (free pieces of partly used segments)",
                    format_size(unused)
                ),
                reason: None,
            });
        }
        if let Some(kv) = self.vllm_kv_cache_bytes.filter(|&b| b > 0) {
            causes.push(Cause {
                verdict: Verdict::VllmReservation,
                bytes: kv,
                detail: format!(
                    "vLLM's KV cache holds {} while training runs (the run's estimate)",
                    format_size(kv)
                ),
                reason: None,
            });
        }
        let does_not_fit = self.does_not_fit(&causes);
        causes.extend(does_not_fit);
        causes
    }

    /// What no other cause can free: the request over the GPU or the cap, the run's estimated
    /// peak over it, or the shortfall left once every cause in `causes` is freed; `None` when
    /// those causes cover it.
    fn does_not_fit(&self, causes: &[Cause]) -> Option<Cause> {
        let freeable = causes
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.bytes));
        match (self.requested_bytes, self.limit_bytes()) {
            (Some(r), Some(limit)) if r > limit => Some(Cause {
                verdict: Verdict::DoesNotFit,
                bytes: r - limit,
                detail: format!(
                    "the request alone, {}, is more than the {} {}",
                    format_size(r),
                    format_size(limit),
                    if self.allowed_bytes.is_some() {
                        "the process is allowed"
                    } else {
                        "the GPU has"
                    }
                ),
                reason: None,
            }),
            _ => match self.estimate_over_the_gpu() {
                Some(cause) => Some(cause),
                None => self.shortfall_cause(causes.is_empty(), freeable),
            },
        }
    }

    /// The run's estimated peak above the GPU (or the cap): no other cause, freed, makes it fit.
    fn estimate_over_the_gpu(&self) -> Option<Cause> {
        let (peak, limit) = self.estimated_peak_bytes.zip(self.limit_bytes())?;
        (peak > limit).then(|| Cause {
            verdict: Verdict::DoesNotFit,
            bytes: peak - limit,
            detail: format!(
                "the run's estimate, {} at its peak, is more than the {} {}: it does not fit whatever else held memory",
                format_size(peak),
                format_size(limit),
                if self.allowed_bytes.is_some() {
                    "the process is allowed"
                } else {
                    "the GPU has"
                }
            ),
            reason: None,
        })
    }

    /// The shortfall the message gives, beyond what the other causes free.
    fn shortfall_cause(&self, no_other_cause: bool, freeable: u64) -> Option<Cause> {
        let request = self.requested_bytes.map(format_size);
        match (self.shortfall_bytes, no_other_cause) {
            (Some(short), true) => Some(Cause {
                verdict: Verdict::DoesNotFit,
                bytes: short,
                detail: format!(
                    "{} short, and the message names nothing else that holds memory: the run itself needs less",
                    format_size(short)
                ),
                reason: None,
            }),
            (Some(short), false) if short > freeable => Some(Cause {
                verdict: Verdict::DoesNotFit,
                bytes: short - freeable,
                detail: format!(
                    "{} short even if everything else named here were freed ({} short in all): the run itself needs less",
                    format_size(short - freeable),
                    format_size(short)
                ),
                reason: None,
            }),
            (None, true) => Some(Cause {
                verdict: Verdict::DoesNotFit,
                bytes: 0,
                detail: match request {
                    Some(r) => format!(
                        "{r} requested; the message gives no free memory to weigh it against"
                    ),
                    None => "the message gives neither the request nor the free memory".to_string(),
                },
                reason: None,
            }),
            _ => None,
        }
    }

    fn vllm_cause(&self) -> Cause {
        let size = |b: Option<u64>| b.map_or("?".to_string(), format_size);
        let detail = match self.format {
            MessageFormat::VllmStartupFreeMemory => format!(
                "its share{} asks for {}, {} more than the {} free{}",
                self.vllm_utilization
                    .map_or(String::new(), |u| format!(" {u}")),
                size(self.requested_bytes),
                size(self.shortfall_bytes),
                size(self.free_bytes),
                self.total_bytes
                    .map_or(String::new(), |t| format!(" of {}", format_size(t)))
            ),
            MessageFormat::VllmKvCache => format!(
                "one sequence of {} needs {} of KV cache, {} more than the {} available",
                self.max_model_len
                    .map_or("max_model_len".to_string(), |t| format!("{t} tokens")),
                size(self.kv_cache_needed_bytes),
                size(self.shortfall_bytes),
                size(self.kv_cache_available_bytes)
            ),
            MessageFormat::VllmKvCacheTokens => format!(
                "one sequence of {} tokens does not fit its KV cache of {} tokens",
                self.max_model_len.map_or("?".to_string(), |t| t.to_string()),
                self.estimated_max_model_len
                    .map_or("?".to_string(), |t| t.to_string())
            ),
            _ => "its share leaves no memory for a single KV cache block once the weights, profiled activations and CUDA graphs are in".to_string(),
        };
        Cause {
            verdict: Verdict::VllmCannotStart,
            bytes: self.shortfall_bytes.unwrap_or(0),
            detail,
            reason: self.format.vllm_refusal(),
        }
    }
}

/// With the failed run's estimate, its peak is weighed against the GPU (above it, the run does
/// not fit whatever else held memory), and vLLM's KV cache becomes one of the causes of a PyTorch OOM
/// (as in tests/fixtures/seed-gemma-22gib.toml, a Gemma 3 1B Unsloth run on a 22 GB card whose vLLM held 13.2 GiB before training started), when vLLM keeps it
/// while training runs (not asleep).
pub fn refine(report: &mut OomReport, estimate: &crate::memory::estimate::Estimate) {
    if report.from_vllm() {
        return;
    }
    report.estimated_peak_bytes = Some(estimate.total_bytes);
    report.vllm_kv_cache_bytes = estimate
        .vllm
        .as_ref()
        // asleep, vLLM keeps no more than its weights and non-torch memory
        .filter(|v| v.kept_while_training_bytes > v.weights_bytes + v.non_torch_bytes)
        .map(|v| v.kv_cache_bytes);
    report.conclude();
}
