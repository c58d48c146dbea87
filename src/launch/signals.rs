//! While the command runs, grpofit outlives the signals that end it: it catches SIGINT, SIGTERM,
//! SIGHUP, SIGQUIT and SIGUSR1 (each of which ends a process by default, signal(7)), passes them
//! on to the command's process group (group.rs), waits for the command
//! and still writes its log.
//!
//! The handlers are caught, not ignored: an ignored signal would stay ignored in the command
//! after exec (signal(7)), and Python then leaves SIGINT alone (no KeyboardInterrupt).

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The last signal received (0: none).
pub(super) struct Signals(Arc<AtomicUsize>);

impl Signals {
    /// Catches SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 from now on.
    pub(super) fn catch() -> Result<Signals, String> {
        let last = Arc::new(AtomicUsize::new(0));
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1] {
            signal_hook::flag::register_usize(signal, Arc::clone(&last), signal as usize)
                .map_err(|e| format!("cannot catch signal {signal}: {e}"))?;
        }
        Ok(Signals(last))
    }

    /// The signal received since the last call, if any.
    pub(super) fn take(&self) -> Option<i32> {
        match self.0.swap(0, Ordering::SeqCst) {
            0 => None,
            s => i32::try_from(s).ok(),
        }
    }
}

/// The command's exit status as grpofit's own: its code, or 128 + the signal that ended it
/// (as a POSIX shell reports it, `$?`).
pub(super) fn exit_code(status: std::process::ExitStatus) -> u8 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return (128 + signal).clamp(0, 255) as u8;
        }
    }
    status.code().map_or(1, |c| (c & 0xff) as u8)
}
