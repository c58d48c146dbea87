//! One comparison of a run with its run log, for `grpofit check` and the screen's `--follow`
//! alike: the GPU the log ran on (its total unless another is given, the CUDA context
//! `grpofit calibrate` learned for its device and the run's stack), and the figures set side by
//! side. Both read this, so the screen shows the predicted figure and the verdict `check` prints.

use crate::measure::calibration::Calibration;
use crate::measure::measured::{self, Predicted, Row, RunLog};
use crate::memory::estimate::{Estimate, GpuBudget};
use crate::run::RunConfig;

/// The CUDA context learned for the log's device (NVML's name, exactly) on `stack`, when
/// `calibration` has one.
pub fn calibrated_context(
    calibration: Option<&Calibration>,
    log: &RunLog,
    stack: &str,
) -> Option<u64> {
    let entry = calibration?.find(log.device()?, stack)?;
    entry.context().map(|learned| learned.median)
}

/// The GPU a log is checked on: `given` (`--gpu-mem`), else the log's total, else `fallback`;
/// the context calibrated for the log's device, else the built-in one.
pub fn budget(
    log: &RunLog,
    given: Option<u64>,
    fallback: u64,
    calibration: Option<&Calibration>,
    stack: &str,
) -> GpuBudget {
    GpuBudget {
        capacity: given.or_else(|| log.total()).unwrap_or(fallback),
        used_by_others: 0,
        context: calibrated_context(calibration, log, stack),
    }
}

/// What the estimate predicts against what the log measured: torch's peaks and the device's
/// use from the step lines, the whole process from NVML's samples.
pub fn rows(run: &RunConfig, estimate: &Estimate, log: &RunLog) -> (Predicted, Vec<Row>) {
    let predicted = measured::predicted(run, estimate);
    let mut rows = log
        .measured()
        .map_or_else(Vec::new, |m| measured::compare(&predicted, &m));
    rows.extend(log.nvml_peak().map(|p| measured::nvml_row(&predicted, p)));
    (predicted, rows)
}
