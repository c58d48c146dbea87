//! One NVML sample for `grpofit run`: every GPU's used memory, and the memory NVML lists for a
//! given set of processes (the command's tree).

use super::NvmlSession;
use nvml_wrapper::enums::device::UsedGpuMemory;
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuUse {
    pub index: u32,
    pub name: String,
    /// NVML's used memory (v2: the driver's reservation left out, as `NvmlSession::read`)
    pub used: u64,
    /// NVML's total
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub gpus: Vec<GpuUse>,
    /// what NVML lists for the processes asked about, on every GPU; None when it lists none
    /// of them (not started on the GPU yet, or a driver that does not say)
    pub tree: Option<u64>,
}

impl NvmlSession {
    /// Every GPU, and the memory of `pids` on them. A GPU NVML refuses is left out.
    pub fn sample(&self, pids: &BTreeSet<u32>) -> Result<Sample, String> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| format!("cannot count the GPUs ({e})"))?;
        let mut gpus = Vec::new();
        let mut tree: Option<u64> = None;
        for index in 0..count {
            let Ok(device) = self.nvml.device_by_index(index) else {
                continue;
            };
            let Ok(memory) = device.memory_info() else {
                continue;
            };
            gpus.push(GpuUse {
                index,
                name: device.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
                used: memory.used,
                total: memory.total,
            });
            let listed = [
                device.running_compute_processes(),
                device.running_graphics_processes(),
            ];
            let mut seen = BTreeSet::new();
            for p in listed.into_iter().flatten().flatten() {
                if !pids.contains(&p.pid) || !seen.insert(p.pid) {
                    continue;
                }
                if let UsedGpuMemory::Used(bytes) = p.used_gpu_memory {
                    tree = Some(tree.unwrap_or(0) + bytes);
                }
            }
        }
        Ok(Sample { gpus, tree })
    }
}
