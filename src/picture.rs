//! `--svg FILE`: an estimate's memory bar drawn into a file (`grpofit::svg`), for `estimate`,
//! `fit` and `check`.

use crate::output::{Failure, say};
use grpofit_core::config::export::write_atomically;
use grpofit_core::memory::estimate::Estimate;
use grpofit_core::run::RunConfig;
use std::path::Path;

/// Writes the picture of `est`, the estimate of `run` on `gpu_line`'s GPU, to `path` (replaced
/// if there: it is drawn again from the same inputs), with `measured`'s peak marked when given.
pub(crate) fn write_svg(
    path: &Path,
    run: &RunConfig,
    est: &Estimate,
    gpu_line: &str,
    measured: Option<(u64, &str)>,
) -> Result<(), Failure> {
    write_svg_timed(path, run, est, gpu_line, measured, None)
}

/// `write_svg`, with the step's time under the verdict when known.
pub(crate) fn write_svg_timed(
    path: &Path,
    run: &RunConfig,
    est: &Estimate,
    gpu_line: &str,
    measured: Option<(u64, &str)>,
    step: Option<&grpofit_core::time::StepTime>,
) -> Result<(), Failure> {
    let title = format!("{} ({} stack)", run.model_name, run.stack);
    let line = step.map(grpofit_core::time::summary);
    let picture = grpofit::svg::Picture {
        title: &title,
        gpu: gpu_line,
        measured,
        step: line.as_deref().zip(step.map(|t| t.seconds)),
    };
    write_atomically(path, &grpofit::svg::render(est, &picture), true)
        .map_err(|e| Failure::Input(format!("--svg {e}")))?;
    say(&format!("wrote {}", path.display()));
    Ok(())
}
