//! The command runs in a process group of its own, so that a signal reaches every process it
//! started (a shell's `sleep`, DataLoader workers, a vLLM engine), not only the first one: a
//! SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGUSR1 grpofit receives is passed on to the whole group.
//! A command that has not ended `KILL_GRACE` after that is killed (SIGKILL, to the group). When
//! grpofit was signalled, or the command was ended by a signal, what is left of its group and
//! of grpofit's descendants is killed once it has ended (`sweep`): grpofit is a child subreaper
//! (PR_SET_CHILD_SUBREAPER), so a grandchild whose parent died is adopted by grpofit, not by
//! init, and is still found among its descendants, even one that left the group. On Linux the
//! command is also told to die with grpofit (PR_SET_PDEATHSIG), and a watchdog (watchdog.rs)
//! kills its group when grpofit is killed (SIGKILL).
//!
//! With a terminal on standard input the command's group is its foreground (terminal.rs):
//! Ctrl-C and Ctrl-\ reach the command's group directly. Every signal passed on is followed
//! by SIGCONT, so that a stopped command still hears it.

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

/// Makes grpofit the reaper of its orphaned descendants (Linux, PR_SET_CHILD_SUBREAPER,
/// prctl(2)); `Err` says why not.
pub(super) fn become_subreaper() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) with plain integers; it changes only this process's attribute
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// Kills (SIGKILL) what is left of the command's `group` and every descendant of grpofit but
/// `spare` (the watchdog): processes that outlived a run ended by a signal.
pub(super) fn sweep(group: u32, spare: Option<u32>) {
    #[cfg(unix)]
    send_group(group, libc::SIGKILL);
    let own = std::process::id();
    for pid in grpofit::gpu::proctree::process_tree(own) {
        if pid != own && Some(pid) != spare {
            kill_one(pid);
        }
    }
}

fn kill_one(pid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(pid)
        && pid > 0
    {
        // SAFETY: kill(2) takes plain integers and touches no memory of this process
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Sends `signal` to the process group `group` (the command's PID).
pub(super) fn send_group(group: u32, signal: i32) {
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
    /// to stop (a descendant that ignored the signal) or a signal ended the command (Ctrl-\
    /// on the terminal it was handed).
    pub(super) fn finish(&mut self, status: std::process::ExitStatus) {
        #[cfg(unix)]
        let by_signal = std::os::unix::process::ExitStatusExt::signal(&status).is_some();
        #[cfg(not(unix))]
        let by_signal = false;
        if (self.deadline.is_some() || by_signal) && !self.killed {
            self.killed = true;
            #[cfg(unix)]
            send_group(self.group, libc::SIGKILL);
        }
    }

    /// Whether the group was killed after the command ended (`finish`), so that grpofit's
    /// adopted descendants go with it.
    pub(super) fn swept(&self) -> bool {
        self.killed
    }
}
