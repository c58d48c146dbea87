//! Waiting for the command: its exit, its stops (Ctrl-Z, when it has the terminal), grpofit's
//! signals passed on, and the orphans grpofit adopts as a subreaper (group.rs) reaped.

use super::console::Console;
use super::group::Escalation;
use super::signals::Signals;
use super::terminal::Terminal;
use crate::output::Failure;
use std::process::ExitStatus;
use std::time::Duration;

/// How often the command is polled for its exit, and grpofit's signals checked.
const POLL: Duration = Duration::from_millis(50);

/// What one look at grpofit's children found of the command.
enum Seen {
    Running,
    Stopped,
    Ended(ExitStatus),
}

/// Waits for the command `pid` (the leader of its process group): a signal grpofit receives is
/// passed on to the group, which is killed if it has not ended after `group::KILL_GRACE`; with
/// the terminal handed over, a stop of the command stops grpofit too (`suspend`).
pub(super) fn wait(
    pid: u32,
    signals: &Signals,
    console: &Console,
    terminal: Option<Terminal>,
) -> Result<(ExitStatus, bool), Failure> {
    let mut escalation = Escalation::new(pid);
    loop {
        match look(pid, terminal.is_some())? {
            Seen::Ended(status) => {
                escalation.finish(status);
                return Ok((status, escalation.swept()));
            }
            Seen::Stopped => {
                if let Some(terminal) = terminal {
                    suspend(terminal, pid);
                }
            }
            Seen::Running => {}
        }
        if let Some(signal) = signals.take() {
            console.say(&escalation.forward(signal));
        }
        if let Some(said) = escalation.poll() {
            console.say(&said);
        }
        std::thread::sleep(POLL);
    }
}

/// Reaps whatever of grpofit's children has changed: the command (its exit, or its stop when
/// `stops`), and orphaned descendants adopted as a subreaper, which are only reaped.
#[cfg(unix)]
fn look(pid: u32, stops: bool) -> Result<Seen, Failure> {
    use std::os::unix::process::ExitStatusExt;
    let flags = libc::WNOHANG | if stops { libc::WUNTRACED } else { 0 };
    let command = libc::pid_t::try_from(pid).map_err(|e| e.to_string())?;
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) fills `status`; -1 names any child of grpofit
        let got = unsafe { libc::waitpid(-1, &mut status, flags) };
        if got == command {
            if libc::WIFSTOPPED(status) {
                return Ok(Seen::Stopped);
            }
            return Ok(Seen::Ended(ExitStatus::from_raw(status)));
        }
        if got > 0 {
            // an adopted orphan (reaped), or one stopped: not the command
            continue;
        }
        if got == 0 {
            return Ok(Seen::Running);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Failure::Input(format!("cannot wait for the command: {e}")));
        }
    }
}

#[cfg(not(unix))]
fn look(_pid: u32, _stops: bool) -> Result<Seen, Failure> {
    Err(Failure::Input("grpofit run needs a Unix system".into()))
}

/// The command stopped (Ctrl-Z reached its group, the terminal's foreground): grpofit takes
/// the terminal back and stops itself, so that its shell sees a stopped job. When the shell
/// continues grpofit (`fg` gives it the terminal; `bg` does not), grpofit hands the terminal
/// on to the command's group when it has it, and continues the group.
#[cfg(unix)]
fn suspend(terminal: Terminal, group: u32) {
    terminal.take_back();
    // SAFETY: raise(3) stops this process until a SIGCONT; kill(2) takes plain integers
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
    if terminal.ours() {
        terminal.give(group);
    }
    super::group::send_group(group, libc::SIGCONT);
}

#[cfg(not(unix))]
fn suspend(_terminal: Terminal, _group: u32) {}
