//! Standard error shared by the command's passed-through output and grpofit's one-line live
//! status: the status is drawn only on a terminal, only at the start of a line, and cleared
//! before anything else is written.

use std::io::{self, Write};
use std::sync::Mutex;

/// Erases the line the cursor is on and returns to its start (ECMA-48 EL, "erase in line").
const CLEAR_LINE: &str = "\r\x1b[K";

pub(super) struct Console {
    /// whether a status line may be drawn (standard error is a terminal)
    live: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// a status line is on screen
    shown: bool,
    /// the command's last output ended a line (or there was none)
    at_line_start: bool,
}

impl Console {
    pub(super) fn new(live: bool) -> Console {
        Console {
            live,
            state: Mutex::new(State {
                shown: false,
                at_line_start: true,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // a thread that panicked while holding it left nothing half-done that matters here
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The command's standard error, as it came: the status line cleared first. Write errors
    /// are dropped: nobody is left to tell.
    pub(super) fn pass_through(&self, chunk: &[u8]) {
        let mut state = self.state();
        let mut err = io::stderr().lock();
        if state.shown {
            let _ = err.write_all(CLEAR_LINE.as_bytes());
            state.shown = false;
        }
        let _ = err.write_all(chunk);
        let _ = err.flush();
        if let Some(last) = chunk.last() {
            state.at_line_start = *last == b'\n';
        }
    }

    /// Draws `line` in place of the previous status, when live and at the start of a line.
    pub(super) fn status(&self, line: &str) {
        if !self.live {
            return;
        }
        let mut state = self.state();
        if !state.at_line_start {
            return;
        }
        let mut err = io::stderr().lock();
        let _ = write!(err, "{CLEAR_LINE}{line}");
        let _ = err.flush();
        state.shown = true;
    }

    /// A line of grpofit's own, the status line cleared first.
    pub(super) fn say(&self, line: &str) {
        let mut state = self.state();
        let mut err = io::stderr().lock();
        if state.shown {
            let _ = err.write_all(CLEAR_LINE.as_bytes());
            state.shown = false;
        }
        if !state.at_line_start {
            let _ = err.write_all(b"\n");
            state.at_line_start = true;
        }
        // grpofit's own lines (not the command's output): escaped as `output::say` escapes
        let line = grpofit::untrusted::for_terminal(line);
        let _ = writeln!(err, "{line}");
    }

    /// Clears the status line, at exit.
    pub(super) fn clear(&self) {
        let mut state = self.state();
        if state.shown {
            let _ = io::stderr().lock().write_all(CLEAR_LINE.as_bytes());
            state.shown = false;
        }
    }
}
