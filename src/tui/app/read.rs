//! What the screen holds, read from outside it (the tests, the command that opens it) in the
//! words of what it shows; and the few things a caller sets before it opens.

use super::*;
use crate::hub::online::Access;

impl App {
    /// The run the sliders and the header show.
    pub fn run(&self) -> &RunConfig {
        &self.run
    }

    /// The run's estimate: the bar, the legend, the verdict.
    pub fn estimate(&self) -> &Estimate {
        &self.estimate
    }

    /// The levers the panel offers: each step down the run can take, and what it saves.
    pub fn step_downs(&self) -> &[StepDown] {
        &self.step_downs
    }

    /// What is open on top of the main view.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The status line's message, if any.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Whether the screen is done: the loop closes it.
    pub fn quits(&self) -> bool {
        self.quit
    }

    /// The baseline pinned with `x`, if any.
    pub fn pinned(&self) -> Option<&Estimate> {
        self.pinned.as_ref()
    }

    /// Whether the effective batch is locked (`b`).
    pub fn batch_locked(&self) -> bool {
        self.lock
    }

    /// The GPU in the header: its capacity, its name, its last reading.
    pub fn gpu(&self) -> &GpuState {
        &self.gpu
    }

    /// The step's seconds by phase for the run as it stands, or why it is not timed (the time
    /// bar's figures).
    pub fn step_time(&self) -> Result<&grpofit_core::time::StepTime, &str> {
        self.step_time.as_ref().map_err(String::as_str)
    }

    /// The size of the last frame drawn; `None` before the first.
    pub fn drawn_size(&self) -> Option<(u16, u16)> {
        self.drawn.as_ref().map(|d| d.size)
    }

    /// What the Hub client said during lookups, for standard error once the screen is closed.
    pub fn hub_notices(&self) -> &[String] {
        &self.notices
    }

    /// The Hub client's latest words, on the status line while a lookup runs.
    pub fn lookup_notice(&self) -> Option<&str> {
        self.lookup_notice.as_deref()
    }

    /// Follows a live run (`--follow LOG`): its log's looks come as `Msg::Log`.
    pub fn follow(&mut self, following: Following) {
        self.follow = Some(following);
        self.recheck();
    }

    /// Where the model picker looks a name the catalog lacks up: the Hugging Face `cache`, then
    /// the Hub as `access` allows (taken from the command line when the screen opens).
    pub fn look_up_in(&mut self, cache: Option<PathBuf>, access: Access) {
        self.hub_cache = cache;
        self.hub = access;
    }
}
