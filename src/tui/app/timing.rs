//! The screen's step time with what `grpofit calibrate` learned: the efficiencies for the card
//! the screen times the step on and the run's stack, else the declared ones.

use super::App;
use grpofit_core::measure::calibration::{Calibration, LearnedTime};
use grpofit_core::time::Efficiencies;

impl App {
    /// Times the step with `calibration` (the file as the command read it), on whichever card
    /// the screen shows.
    pub fn calibrated_with(&mut self, calibration: Option<Calibration>) {
        self.calibration = calibration;
        self.recompute();
    }

    /// The step time learned for the screen's card and the run's stack.
    pub(super) fn learned_time(&self) -> Option<LearnedTime> {
        let card = self.speed.as_ref().ok()?;
        (self.calibration.as_ref()?).time_for(&card.name, self.run.stack.name())
    }

    /// The efficiencies the screen times the step and the fastest search with.
    pub(crate) fn efficiencies(&self) -> Efficiencies {
        self.learned
            .as_ref()
            .map_or_else(Efficiencies::default, |t| t.efficiencies)
    }
}
