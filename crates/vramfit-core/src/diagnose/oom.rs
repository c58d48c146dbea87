//! Reading an out-of-memory message: PyTorch's in all its formats since 1.x, and vLLM's
//! start-up refusals. The first step of debugging an out-of-memory error: read the message before changing anything.

use crate::fit::Lever;
use crate::memory::refusal::VllmRefusal;
use crate::run::knobs::Knob;
use crate::run::{Generation, Quant, RunConfig, Stack};
use crate::units::format_size;
use regex::Regex;
use serde::Serialize;
use std::fmt;
use std::sync::OnceLock;

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
    /// the cause whose removal frees the most: `causes[0]`'s
    pub verdict: Verdict,
    /// every cause found, the one that frees the most first
    pub causes: Vec<Cause>,
    /// the message as found in the log, trimmed
    pub message: String,
}

const SIZE: &str = r"([0-9][0-9.,]*)\s*(bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB)";

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(&pattern.replace("SIZE", SIZE)).expect("valid pattern"))
}

/// `2,72` and `2.72` both read as 2.72 (translated logs use decimal commas).
fn bytes(number: &str, unit: &str) -> Option<u64> {
    let n: f64 = number
        .trim_end_matches(['.', ','])
        .replace(',', ".")
        .parse()
        .ok()?;
    let scale = match unit {
        "bytes" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024f64.powi(4),
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    };
    // a size past any GPU's (units::ABSURD) is no measurement: it is not read, so that the
    // sums below stay far from u64's end
    let b = n * scale;
    (b.is_finite() && b >= 0.0 && b <= crate::units::ABSURD as f64).then(|| b.round() as u64)
}

fn size_of(caps: &regex::Captures, at: usize) -> Option<u64> {
    bytes(caps.get(at)?.as_str(), caps.get(at + 1)?.as_str())
}

fn find(text: &str, cell: &'static OnceLock<Regex>, pattern: &str) -> Option<u64> {
    re(cell, pattern)
        .captures(text)
        .and_then(|c| size_of(&c, 1))
}

/// Finds the last out-of-memory message in `log` and reads it; `None` when there is none.
pub fn diagnose(log: &str) -> Option<OomReport> {
    let start = last_message_start(log)?;
    let message = message_at(&log[start..]);
    Some(
        if message.contains("out of memory") || message.contains("OutOfMemory") {
            read_torch(message)
        } else {
            read_vllm(message)
        },
    )
}

/// Where the last OOM or vLLM memory refusal begins.
fn last_message_start(log: &str) -> Option<usize> {
    static START: OnceLock<Regex> = OnceLock::new();
    let r = re(
        &START,
        r"(?i)(CUDA out of memory|OutOfMemoryError|Free memory on device|No available memory for the cache blocks|KV cache is needed, which is larger than the available KV cache memory|To serve at least one request|is larger than the maximum number of tokens that can be stored in KV cache)",
    );
    let m = r.find_iter(log).last()?;
    // back up to the start of the line for vLLM's "To serve ..." sentence
    Some(log[..m.start()].rfind('\n').map_or(0, |i| i + 1))
}

/// The message: up to its end of paragraph, at most a few lines.
fn message_at(rest: &str) -> &str {
    let end = rest
        .find("\n\n")
        .or_else(|| rest.match_indices('\n').nth(3).map(|(i, _)| i))
        .unwrap_or(rest.len());
    rest[..end].trim()
}

fn read_torch(m: &str) -> OomReport {
    static REQ: OnceLock<Regex> = OnceLock::new();
    static TOTAL_NEW: OnceLock<Regex> = OnceLock::new();
    static FREE_NEW: OnceLock<Regex> = OnceLock::new();
    static IN_USE: OnceLock<Regex> = OnceLock::new();
    static ALLOWED: OnceLock<Regex> = OnceLock::new();
    static ALLOCATED_NEW: OnceLock<Regex> = OnceLock::new();
    static UNALLOCATED: OnceLock<Regex> = OnceLock::new();
    static POOLS: OnceLock<Regex> = OnceLock::new();
    static PROCESS: OnceLock<Regex> = OnceLock::new();
    static TOTAL_OLD: OnceLock<Regex> = OnceLock::new();
    static ALLOCATED_OLD: OnceLock<Regex> = OnceLock::new();
    static FREE_OLD: OnceLock<Regex> = OnceLock::new();
    static RESERVED_OLD: OnceLock<Regex> = OnceLock::new();

    let requested = find(m, &REQ, r"Tried to allocate SIZE");
    // 2.1 and later: "GPU 0 has a total capacity of X of which Y is free" (2.1 spells it "capacty")
    let new_total = find(m, &TOTAL_NEW, r"total capaci?ty of SIZE");
    let (format, total, free, allocated, reserved_unallocated) = if new_total.is_some() {
        (
            if m.contains("capacty") {
                MessageFormat::Pytorch2_1
            } else {
                MessageFormat::Pytorch2_2
            },
            new_total,
            find(m, &FREE_NEW, r"of which SIZE is free"),
            find(m, &ALLOCATED_NEW, r"SIZE is allocated by PyTorch"),
            find(
                m,
                &UNALLOCATED,
                r"SIZE is reserved by PyTorch but unallocated",
            ),
        )
    } else {
        // 1.x-2.0: "(GPU 0; X total capacity; Y already allocated; Z free; W reserved in total by PyTorch)"
        let allocated = find(m, &ALLOCATED_OLD, r"SIZE already allocated");
        let reserved = find(
            m,
            &RESERVED_OLD,
            r"SIZE (?:reserved in total by PyTorch|cached)",
        );
        (
            MessageFormat::Pytorch1To2_0,
            find(m, &TOTAL_OLD, r"SIZE total capacity"),
            find(m, &FREE_OLD, r"SIZE free"),
            allocated,
            reserved.zip(allocated).map(|(r, a)| r.saturating_sub(a)),
        )
    };
    let mut process_in_use = find(m, &IN_USE, r"this process has SIZE memory in use");
    let allowed = find(m, &ALLOWED, r"SIZE allowed");
    let private_pools = find(m, &POOLS, r"with SIZE allocated in private pools");
    let other_processes: Vec<OtherProcess> = re(&PROCESS, r"Process (\d+) has SIZE memory in use")
        .captures_iter(m)
        .filter_map(|c| {
            Some(OtherProcess {
                pid: c.get(1)?.as_str().parse().ok()?,
                bytes: size_of(&c, 2)?,
            })
        })
        .collect();
    let mut other_processes = other_processes;
    // PyTorch 2.1 lists the failing process among the others ("Process N has ..."): the one
    // holding at least what PyTorch allocated and reserved is this process.
    if process_in_use.is_none() {
        let own = allocated
            .unwrap_or(0)
            .saturating_add(reserved_unallocated.unwrap_or(0));
        if let Some(i) = other_processes
            .iter()
            .position(|p| own > 0 && p.bytes >= own)
        {
            process_in_use = Some(other_processes.remove(i).bytes);
        }
    }
    // With a per-process cap ("N allowed"), the room is what the cap leaves, not the device's free.
    let room = match (allowed, process_in_use) {
        (Some(cap), Some(used)) => Some(cap.saturating_sub(used)),
        _ => free,
    };
    let shortfall = requested.zip(room).map(|(r, f)| r.saturating_sub(f));
    let mut report = OomReport {
        format,
        requested_bytes: requested,
        total_bytes: total,
        free_bytes: free,
        process_in_use_bytes: process_in_use,
        allocated_bytes: allocated,
        reserved_unallocated_bytes: reserved_unallocated,
        allowed_bytes: allowed,
        private_pools_bytes: private_pools,
        other_processes,
        vllm_utilization: None,
        kv_cache_needed_bytes: None,
        kv_cache_available_bytes: None,
        max_model_len: None,
        estimated_max_model_len: None,
        shortfall_bytes: shortfall,
        assumed_total_bytes: None,
        assumed_total_from: None,
        vllm_kv_cache_bytes: None,
        verdict: Verdict::DoesNotFit,
        causes: Vec::new(),
        message: m.to_string(),
    };
    report.conclude();
    report
}

fn read_vllm(m: &str) -> OomReport {
    static FREE: OnceLock<Regex> = OnceLock::new();
    static WANT: OnceLock<Regex> = OnceLock::new();
    static KV_NEED: OnceLock<Regex> = OnceLock::new();
    static MAX_LEN: OnceLock<Regex> = OnceLock::new();
    static ESTIMATE: OnceLock<Regex> = OnceLock::new();
    static TOKENS: OnceLock<Regex> = OnceLock::new();
    // vllm/v1/worker/utils.py request_memory: "Free memory on device cuda:0 (10.52/23.55 GiB) on
    // startup is less than desired GPU memory utilization (0.9, 21.2 GiB)"; older releases
    // name no device
    let free_total = re(
        &FREE,
        r"Free memory on device(?: [^\s(]+)? \(([0-9.]+)/([0-9.]+) (GiB|MiB)\)",
    )
    .captures(m);
    let free = free_total
        .as_ref()
        .and_then(|c| bytes(c.get(1)?.as_str(), c.get(3)?.as_str()));
    let total = free_total
        .as_ref()
        .and_then(|c| bytes(c.get(2)?.as_str(), c.get(3)?.as_str()));
    let want = re(&WANT, r"utilization \(([0-9.]+), SIZE\)").captures(m);
    let utilization = want
        .as_ref()
        .and_then(|c| c.get(1)?.as_str().parse::<f64>().ok())
        .filter(|u| u.is_finite() && *u > 0.0);
    let wanted = want.as_ref().and_then(|c| size_of(c, 2));
    // vllm/v1/core/kv_cache_utils.py: "To serve at least one request with the models's max seq
    // len (8192), (1.00 GiB KV cache is needed, which is larger than the available KV cache
    // memory (0.50 GiB). Based on the available memory, the estimated maximum model length is
    // 4096. ..."
    let kv = re(
        &KV_NEED,
        r"SIZE KV cache is needed, which is larger than the available KV cache memory \(SIZE\)",
    )
    .captures(m);
    let tokens = |cell: &'static OnceLock<Regex>, pattern: &str| {
        re(cell, pattern)
            .captures(m)
            .and_then(|c| c.get(1)?.as_str().parse::<u64>().ok())
    };
    let max_model_len = tokens(&MAX_LEN, r"max seq len \((\d+)\)");
    let mut estimated = tokens(&ESTIMATE, r"estimated maximum model length is (\d+)");
    // vLLM before V1: "The model's max seq len (N) is larger than the maximum number of tokens
    // that can be stored in KV cache (M)"
    let stored = tokens(
        &TOKENS,
        r"maximum number of tokens that can be stored in KV cache \((\d+)\)",
    );
    let (needed, available) = (
        kv.as_ref().and_then(|c| size_of(c, 1)),
        kv.as_ref().and_then(|c| size_of(c, 3)),
    );
    let format = if want.is_some() || free_total.is_some() {
        MessageFormat::VllmStartupFreeMemory
    } else if kv.is_some() {
        MessageFormat::VllmKvCache
    } else if stored.is_some() {
        estimated = estimated.or(stored);
        MessageFormat::VllmKvCacheTokens
    } else {
        MessageFormat::VllmNoCacheBlocks
    };
    let shortfall = match format {
        MessageFormat::VllmStartupFreeMemory => wanted.zip(free).map(|(w, f)| w.saturating_sub(f)),
        _ => needed.zip(available).map(|(n, a)| n.saturating_sub(a)),
    };
    let mut report = OomReport {
        format,
        requested_bytes: wanted,
        total_bytes: total,
        free_bytes: free,
        process_in_use_bytes: None,
        allocated_bytes: None,
        reserved_unallocated_bytes: None,
        allowed_bytes: None,
        private_pools_bytes: None,
        other_processes: Vec::new(),
        vllm_utilization: utilization,
        kv_cache_needed_bytes: needed,
        kv_cache_available_bytes: available,
        max_model_len,
        estimated_max_model_len: estimated,
        shortfall_bytes: shortfall,
        assumed_total_bytes: None,
        assumed_total_from: None,
        vllm_kv_cache_bytes: None,
        verdict: Verdict::VllmCannotStart,
        causes: Vec::new(),
        message: m.to_string(),
    };
    report.conclude();
    report
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
    fn conclude(&mut self) {
        let mut causes = if self.from_vllm() {
            vec![self.vllm_cause()]
        } else {
            self.torch_causes()
        };
        // largest first; a request larger than the GPU (or the cap) comes first whatever the
        // rest frees, since no freeing makes it fit
        let exceeds = self
            .requested_bytes
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
        let freeable = causes
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.bytes));
        let request = self.requested_bytes.map(format_size);
        let does_not_fit = match (self.requested_bytes, self.limit_bytes()) {
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
            _ => match (self.shortfall_bytes, causes.is_empty()) {
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
                        None => {
                            "the message gives neither the request nor the free memory".to_string()
                        }
                    },
                    reason: None,
                }),
                _ => None,
            },
        };
        causes.extend(does_not_fit);
        causes
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

/// With the failed run's estimate, vLLM's KV cache becomes one of the causes of a PyTorch OOM
/// (as in tests/fixtures/seed-gemma-22gib.toml, a Gemma 3 1B Unsloth run on a 22 GB card whose vLLM held 13.2 GiB before training started), when vLLM keeps it
/// while training runs (not asleep).
pub fn refine(report: &mut OomReport, estimate: &crate::memory::estimate::Estimate) {
    if report.from_vllm() {
        return;
    }
    report.vllm_kv_cache_bytes = estimate
        .vllm
        .as_ref()
        // asleep, vLLM keeps no more than its weights and non-torch memory
        .filter(|v| v.kept_while_training_bytes > v.weights_bytes + v.non_torch_bytes)
        .map(|v| v.kv_cache_bytes);
    report.conclude();
}

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
    let context_key = key_of(run, |s| Knob::SequenceLength.trainer_key(s));
    let share = run.and_then(|r| match r.generation {
        Generation::ColocatedVllm { share } => Some(share),
        Generation::VllmServer | Generation::Transformers => None,
    });
    for cause in &report.causes {
        match cause.verdict {
            Verdict::DoesNotFit => out.push(format!(
                "the run needs {} less at its peak: pull the strongest lever ({})",
                format_size(cause.bytes),
                if run.is_some() {
                    "the nearest configuration that fits is below"
                } else {
                    "`vramfit fit --config RUN.toml` finds the nearest configuration that fits"
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
