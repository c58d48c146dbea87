//! NVML twice a second while the command runs: every GPU's used memory and the memory of the
//! command's process tree, each sample a line of the run log, the peaks kept, the live status
//! drawn.

use super::console::Console;
use super::log::RunLog;
use grpofit::gpu::NvmlSession;
use grpofit::gpu::proctree::process_tree;
use grpofit::gpu::sample::Sample;
use grpofit_core::units::format_size;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Twice a second, as the issue asks (and as the interactive screen polls NVML).
pub(super) const EVERY: Duration = Duration::from_millis(500);

/// The largest figures seen.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Peaks {
    pub samples: u64,
    /// GPU 0's used memory
    pub used: u64,
    /// the command's processes, all GPUs
    pub tree: Option<u64>,
}

impl Peaks {
    fn add(&mut self, s: &Sample) {
        self.samples += 1;
        self.used = self.used.max(s.gpus.first().map_or(0, |g| g.used));
        self.tree = match (self.tree, s.tree) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// What the sampler is given.
pub(super) struct Watch {
    pub session: NvmlSession,
    pub root: u32,
    pub log: Arc<RunLog>,
    pub console: Arc<Console>,
    /// the estimate's peak, for the status line
    pub predicted: u64,
}

/// Samples until `stop` is sent to or dropped; returns the peaks.
pub(super) fn spawn(watch: Watch, stop: Receiver<()>) -> std::thread::JoinHandle<Peaks> {
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut peaks = Peaks::default();
        let mut unwritten = false;
        loop {
            match stop.recv_timeout(EVERY) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return peaks,
            }
            let tree = process_tree(watch.root);
            let Ok(sample) = watch.session.sample(&tree) else {
                continue;
            };
            peaks.add(&sample);
            let record = serde_json::json!({
                "kind": "nvml",
                "t": started.elapsed().as_secs_f64(),
                "gpus": sample.gpus,
                "tree": sample.tree,
                "processes": tree.len(),
            });
            if watch.log.write(&record).is_err() && !unwritten {
                unwritten = true;
                watch.console.say(&format!(
                    "grpofit: cannot append to {}: samples are no longer logged",
                    watch.log.path.display()
                ));
            }
            if let Some(line) = status_line(&sample, peaks, watch.predicted) {
                watch.console.status(&line);
            }
        }
    })
}

/// `grpofit: 17.2 GiB used of 23.6 GiB · predicted peak 18.4 GiB`, GPU 0's figures.
pub(super) fn status_line(sample: &Sample, peaks: Peaks, predicted: u64) -> Option<String> {
    let gpu = sample.gpus.first()?;
    let tree = peaks.tree.map_or(String::new(), |t| {
        format!(" · command's peak {}", format_size(t))
    });
    Some(format!(
        "grpofit: {} used of {}{tree} · predicted peak {}",
        format_size(gpu.used),
        format_size(gpu.total),
        format_size(predicted)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpofit::gpu::sample::GpuUse;

    #[test]
    fn the_status_names_used_total_and_the_prediction_and_the_peaks_only_grow() {
        let gib = 1u64 << 30;
        let sample = |used: u64, tree: Option<u64>| Sample {
            gpus: vec![GpuUse {
                index: 0,
                name: "NVIDIA L4".into(),
                used,
                total: 24 * gib,
            }],
            tree,
        };
        let mut peaks = Peaks::default();
        peaks.add(&sample(10 * gib, None));
        peaks.add(&sample(12 * gib, Some(11 * gib)));
        peaks.add(&sample(9 * gib, Some(8 * gib)));
        assert_eq!(
            (peaks.samples, peaks.used, peaks.tree),
            (3, 12 * gib, Some(11 * gib))
        );
        let line = status_line(&sample(9 * gib, None), peaks, 18 * gib).expect("a GPU");
        assert_eq!(
            line,
            "grpofit: 9.00 GiB used of 24.00 GiB · command's peak 11.00 GiB · predicted peak 18.00 GiB"
        );
        let none = Sample {
            gpus: vec![],
            tree: None,
        };
        assert!(status_line(&none, peaks, 1).is_none());
    }
}
