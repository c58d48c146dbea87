//! The command runs in a process group of its own, so that a signal reaches every process it
//! started (a shell's `sleep`, DataLoader workers, a vLLM engine), not only the first one: a
//! SIGINT, SIGTERM or SIGHUP grpofit receives is passed on to the whole group. A command that
//! has not ended `KILL_GRACE` after that is killed (SIGKILL, to the group). On Linux the command
//! is also told to die with grpofit (PR_SET_PDEATHSIG), so a SIGKILL of grpofit does not leave
//! it running unwatched.
//!
//! In its own group the command is not the terminal's foreground: Ctrl-C reaches grpofit alone,
//! which passes it on (Python's KeyboardInterrupt, as before). A command that reads the
//! terminal is stopped by it (SIGTTIN); every signal passed on is followed by SIGCONT, so that
//! a stopped command still hears it.

use std::process::Command;
use std::time::{Duration, Instant};

/// How long the command has to end after a signal is passed on before it is killed: the
/// default of `docker stop --time` (10 s, Docker CLI reference), the stop grace period most
/// training jobs already live under.
pub(super) const KILL_GRACE: Duration = Duration::from_secs(10);

/// Makes `command` start in a new process group (its PID is the group's id) and, on Linux, die
/// when grpofit does.
pub(super) fn own_group(command: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        #[cfg(target_os = "linux")]
        {
            let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
            // SAFETY: the closure runs in the forked child before exec and calls only prctl(2)
            // and getppid(2), which are async-signal-safe; it allocates nothing. The death
            // signal fires when the thread that forked ends: run_command spawns from the main
            // thread, which lives as long as grpofit.
            unsafe {
                command.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // grpofit died between fork and prctl: do not run orphaned
                    if libc::getppid() != parent {
                        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                    }
                    Ok(())
                });
            }
        }
    }
}

/// Sends `signal` to the process group `group` (the command's PID).
fn send_group(group: u32, signal: i32) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(group)
        && pid > 0
    {
        // SAFETY: kill(2) takes plain integers and touches no memory of this process; a
        // negative pid names the process group.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// The signals passed on to the command's group, and the kill that follows when it does not end.
pub(super) struct Escalation {
    group: u32,
    deadline: Option<Instant>,
    killed: bool,
}

impl Escalation {
    pub(super) fn new(group: u32) -> Escalation {
        Escalation {
            group,
            deadline: None,
            killed: false,
        }
    }

    /// Passes `signal` on to the group (then SIGCONT, for a stopped member) and returns what
    /// to tell the user.
    pub(super) fn forward(&mut self, signal: i32) -> String {
        send_group(self.group, signal);
        #[cfg(unix)]
        send_group(self.group, libc::SIGCONT);
        let deadline = *self.deadline.get_or_insert(Instant::now() + KILL_GRACE);
        // whole seconds left, rounded up: the first signal says the full grace period
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .div_ceil(1000);
        format!(
            "grpofit: signal {signal}: passed on to the command's process group; it is killed (SIGKILL) if it has not ended in {left} s, then the log is written"
        )
    }

    /// Kills the group once the grace period after a signal has run out; returns what to tell
    /// the user when it does.
    pub(super) fn poll(&mut self) -> Option<String> {
        let due = self.deadline.is_some_and(|d| Instant::now() >= d);
        if !due || self.killed {
            return None;
        }
        self.killed = true;
        #[cfg(unix)]
        send_group(self.group, libc::SIGKILL);
        Some(format!(
            "grpofit: the command did not end {} s after the signal: killed (SIGKILL)",
            KILL_GRACE.as_secs()
        ))
    }

    /// After the command has ended: what is left of its group is killed when grpofit was told
    /// to stop (a descendant that ignored the signal).
    pub(super) fn finish(&mut self) {
        if self.deadline.is_some() && !self.killed {
            self.killed = true;
            #[cfg(unix)]
            send_group(self.group, libc::SIGKILL);
        }
    }
}
