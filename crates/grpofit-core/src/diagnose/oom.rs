//! Reading an out-of-memory message: PyTorch's in all its formats since 1.x, and vLLM's
//! start-up refusals. The first step of debugging an out-of-memory error: read the message before changing anything.

use regex::Regex;
use std::sync::OnceLock;

pub use super::advice::advice;
pub use super::report::*;

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

/// The message's wording and the device's figures in it: total, free, allocated by PyTorch,
/// reserved but unallocated.
fn device_figures(
    m: &str,
) -> (
    MessageFormat,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
) {
    static TOTAL_NEW: OnceLock<Regex> = OnceLock::new();
    static FREE_NEW: OnceLock<Regex> = OnceLock::new();
    static ALLOCATED_NEW: OnceLock<Regex> = OnceLock::new();
    static UNALLOCATED: OnceLock<Regex> = OnceLock::new();
    static TOTAL_OLD: OnceLock<Regex> = OnceLock::new();
    static ALLOCATED_OLD: OnceLock<Regex> = OnceLock::new();
    static FREE_OLD: OnceLock<Regex> = OnceLock::new();
    static RESERVED_OLD: OnceLock<Regex> = OnceLock::new();
    // 2.1 and later: "GPU 0 has a total capacity of X of which Y is free" (2.1 spells it "capacty")
    let new_total = find(m, &TOTAL_NEW, r"total capaci?ty of SIZE");
    if new_total.is_some() {
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
    }
}

/// This process's memory in use and the other processes', as the message lists them. PyTorch
/// 2.1 lists the failing process among the others ("Process N has ..."): the one holding at
/// least what PyTorch allocated and reserved is this process.
fn processes(
    m: &str,
    allocated: Option<u64>,
    reserved_unallocated: Option<u64>,
) -> (Option<u64>, Vec<OtherProcess>) {
    static IN_USE: OnceLock<Regex> = OnceLock::new();
    static PROCESS: OnceLock<Regex> = OnceLock::new();
    let mut process_in_use = find(m, &IN_USE, r"this process has SIZE memory in use");
    let mut other_processes: Vec<OtherProcess> =
        re(&PROCESS, r"Process (\d+) has SIZE memory in use")
            .captures_iter(m)
            .filter_map(|c| {
                Some(OtherProcess {
                    pid: c.get(1)?.as_str().parse().ok()?,
                    bytes: size_of(&c, 2)?,
                })
            })
            .collect();
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
    (process_in_use, other_processes)
}

fn read_torch(m: &str) -> OomReport {
    static REQ: OnceLock<Regex> = OnceLock::new();
    static ALLOWED: OnceLock<Regex> = OnceLock::new();
    static POOLS: OnceLock<Regex> = OnceLock::new();

    let requested = find(m, &REQ, r"Tried to allocate SIZE");
    let (format, total, free, allocated, reserved_unallocated) = device_figures(m);
    let (process_in_use, other_processes) = processes(m, allocated, reserved_unallocated);
    let allowed = find(m, &ALLOWED, r"SIZE allowed");
    let private_pools = find(m, &POOLS, r"with SIZE allocated in private pools");
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
        estimated_peak_bytes: None,
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
        estimated_peak_bytes: None,
        verdict: Verdict::VllmCannotStart,
        causes: Vec::new(),
        message: m.to_string(),
    };
    report.conclude();
    report
}
