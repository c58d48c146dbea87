//! This machine's memory, for what a run offloads to the host (ZeRO-Offload, FSDP CPU offload).

/// `MemTotal` of `/proc/meminfo`, in bytes; `None` where there is no such file.
pub(crate) fn memory_bytes() -> Option<u64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A note when the offloaded states need more host memory than this machine has (the run
/// would be killed by the kernel, or swap, long before the GPU is the limit).
pub(crate) fn offload_note(needed: u64) -> Option<String> {
    let have = memory_bytes()?;
    (needed > have).then(|| {
        format!(
            "grpofit: note: the offloaded states need {} of host memory per node; this machine has {}",
            grpofit_core::units::format_size(needed),
            grpofit_core::units::format_size(have)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_total_is_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:  100 kB\n";
        assert_eq!(parse_meminfo(text), Some(24_576_000 * 1024));
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: lots kB\n"), None);
    }
}
