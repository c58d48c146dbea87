//! `--svg FILE`: an estimate's memory bar drawn into a file (`grpofit::svg`), for `estimate`,
//! `fit` and `check`.

use crate::output::{Failure, say};
use grpofit_core::config::export::write_atomically;
use grpofit_core::memory::estimate::Estimate;
use grpofit_core::run::RunConfig;
use std::path::Path;

/// `--svg FILE`, and whether `--force` lets it replace a file that is there (issue 28: `--svg`
/// replaced any file, the run file included).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Svg<'a> {
    pub path: &'a Path,
    pub force: bool,
}

impl<'a> Svg<'a> {
    pub(crate) fn new(path: Option<&'a Path>, force: bool) -> Option<Svg<'a>> {
        path.map(|path| Svg { path, force })
    }

    /// Checks the file before any work (`files::check_output`): one that is there is refused
    /// without `--force`, a folder always.
    pub(crate) fn check(self) -> Result<(), Failure> {
        grpofit_core::files::check_output(self.path, self.force)
            .map(drop)
            .map_err(|e| Failure::Input(format!("--svg {e}")))
    }
}

/// Writes the picture of `est`, the estimate of `run` on `gpu_line`'s GPU, to `svg`'s file (a
/// file there only with `--force`), with `measured`'s peak marked when given.
pub(crate) fn write_svg(
    svg: Svg,
    run: &RunConfig,
    est: &Estimate,
    gpu_line: &str,
    measured: Option<(u64, &str)>,
) -> Result<(), Failure> {
    write_svg_timed(svg, run, est, gpu_line, measured, None)
}

/// `write_svg`, with the step's time under the verdict when known.
pub(crate) fn write_svg_timed(
    svg: Svg,
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
    write_atomically(svg.path, &grpofit::svg::render(est, &picture), svg.force)
        .map_err(|e| Failure::Input(format!("--svg {e}")))?;
    say(&format!("wrote {}", svg.path.display()));
    Ok(())
}
