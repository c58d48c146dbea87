//! GPU detection behind a trait: NVML on a machine with an NVIDIA driver, a fixed probe for
//! `--gpu-mem` and tests. NVML is loaded at run time, so the binary runs without it.

pub mod proctree;
pub mod sample;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuInfo {
    pub name: String,
    /// What CUDA can hand out: `cudaMemGetInfo`'s total, which torch reports as
    /// `get_device_properties(0).total_memory`, Unsloth prints as "Max memory" and an OOM message
    /// calls "total capacity". NVML's total less the memory the driver reserves for itself.
    pub total_bytes: u64,
    /// The memory installed on the card (NVML's total, the driver's reservation included); it
    /// names the card's tier ("24gb" for a 4090 whose CUDA total is 23.6 GiB).
    pub installed_bytes: u64,
    pub used_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// processes holding memory on the GPU, when NVML may list them
    pub processes: Vec<GpuProcess>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// `None` where the driver does not report it (Windows WDDM)
    pub bytes: Option<u64>,
}

pub trait GpuProbe: Send {
    /// The first GPU, or why none could be read.
    fn probe(&self) -> Result<GpuInfo, String>;

    /// Every GPU, in NVML's order (the first one is `probe`'s).
    fn probe_all(&self) -> Result<Vec<GpuInfo>, String> {
        self.probe().map(|g| vec![g])
    }
}

/// The kinds of card among `gpus` when they differ (`2 x NVIDIA H100 80GB HBM3, 1 x NVIDIA
/// A100-SXM4-40GB`), `None` when all are alike: a role's capacity is that of its cards, and
/// grpofit sizes every role on the first card's.
pub fn mixed_cards(gpus: &[GpuInfo]) -> Option<String> {
    let mut kinds: Vec<(String, u64, usize)> = Vec::new();
    for g in gpus {
        match kinds
            .iter_mut()
            .find(|(n, t, _)| *n == g.name && *t == g.total_bytes)
        {
            Some(k) => k.2 += 1,
            None => kinds.push((g.name.clone(), g.total_bytes, 1)),
        }
    }
    (kinds.len() > 1).then(|| {
        kinds
            .iter()
            .map(|(n, _, c)| format!("{c} x {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// A GPU given by its capacity (`--gpu-mem`, a file's `gpu_memory`, tests).
pub struct FixedProbe(pub GpuInfo);

impl GpuProbe for FixedProbe {
    fn probe(&self) -> Result<GpuInfo, String> {
        Ok(self.0.clone())
    }
}

/// NVML through nvml-wrapper; every failure becomes a reason for the user.
pub struct NvmlProbe;

impl GpuProbe for NvmlProbe {
    fn probe(&self) -> Result<GpuInfo, String> {
        NvmlSession::open()?.read()
    }

    fn probe_all(&self) -> Result<Vec<GpuInfo>, String> {
        NvmlSession::open()?.read_all()
    }
}

/// NVML opened once, read many times (the interactive screen polls it about twice a second).
pub struct NvmlSession {
    nvml: nvml_wrapper::Nvml,
}

impl NvmlSession {
    pub fn open() -> Result<NvmlSession, String> {
        nvml_wrapper::Nvml::init()
            .map(|nvml| NvmlSession { nvml })
            .map_err(|e| format!("NVML unavailable ({e}): no NVIDIA driver or libnvidia-ml.so.1"))
    }

    /// GPU 0's name and memory; a field NVML refuses is left unknown rather than failing all.
    pub fn read(&self) -> Result<GpuInfo, String> {
        self.read_index(0)
    }

    /// Every GPU NVML lists.
    pub fn read_all(&self) -> Result<Vec<GpuInfo>, String> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| format!("cannot count the GPUs ({e})"))?;
        if count == 0 {
            return Err("NVML lists no GPU".into());
        }
        (0..count).map(|i| self.read_index(i)).collect()
    }

    fn read_index(&self, index: u32) -> Result<GpuInfo, String> {
        let device = self
            .nvml
            .device_by_index(index)
            .map_err(|e| format!("no GPU {index} ({e})"))?;
        let memory = device
            .memory_info()
            .map_err(|e| format!("cannot read GPU memory ({e})"))?;
        let mut processes: Vec<GpuProcess> = Vec::new();
        let lists = [
            device.running_compute_processes(),
            device.running_graphics_processes(),
        ];
        for p in lists.into_iter().flatten().flatten() {
            if !processes.iter().any(|q| q.pid == p.pid) {
                let bytes = match p.used_gpu_memory {
                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                };
                processes.push(GpuProcess { pid: p.pid, bytes });
            }
        }
        // nvml-wrapper 0.13 reads nvmlDeviceGetMemoryInfo_v2, whose `used` and `free` leave out
        // the driver's `reserved` memory (v1 counted it as used). On the shared H200:
        // NVML total 150,754,820,096 bytes, torch's total_memory 150,109,880,320, v1's used with
        // no process 648,347,648 (calibration/h200-hf-peft.jsonl, its env record).
        Ok(GpuInfo {
            name: device.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            total_bytes: memory.total.saturating_sub(memory.reserved),
            installed_bytes: memory.total,
            used_bytes: Some(memory.used),
            free_bytes: Some(memory.free),
            processes,
        })
    }
}

impl GpuProbe for NvmlSession {
    fn probe(&self) -> Result<GpuInfo, String> {
        self.read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(name: &str, gib: u64) -> GpuInfo {
        GpuInfo {
            name: name.into(),
            total_bytes: gib << 30,
            installed_bytes: gib << 30,
            used_bytes: None,
            free_bytes: None,
            processes: vec![],
        }
    }

    #[test]
    fn mixed_cards_are_named_with_their_counts() {
        let h100 = card("NVIDIA H100", 79);
        assert_eq!(mixed_cards(&[h100.clone(), h100.clone()]), None);
        let a100 = card("NVIDIA A100-SXM4-40GB", 39);
        assert_eq!(
            mixed_cards(&[h100.clone(), h100, a100]).as_deref(),
            Some("2 x NVIDIA H100, 1 x NVIDIA A100-SXM4-40GB")
        );
    }
}
