//! The terminal handed over to the command. When standard input is a terminal and grpofit's
//! process group is its foreground, the command's process group is made the foreground
//! (tcsetpgrp(3)), so that what it reads from the terminal reaches it: a login prompt,
//! `input()`, a breakpoint. The terminal's Ctrl-C, Ctrl-\ and Ctrl-Z then reach the command's
//! group directly, as they would without grpofit. When the command ends the foreground is taken
//! back. Ctrl-Z stops the command's group; grpofit sees it stop (waitpid's WUNTRACED), takes the
//! terminal back and stops itself, so the shell sees a stopped job; `fg` continues grpofit,
//! which gives the terminal to the command's group again and continues it.
//!
//! Without a terminal on standard input, or when grpofit runs in the background (`&`), nothing
//! is handed over: the command runs in its own group, as before.

#[cfg(unix)]
use libc::pid_t;

/// Standard input, the terminal handed over.
#[cfg(unix)]
const TTY: libc::c_int = libc::STDIN_FILENO;

/// A terminal whose foreground grpofit's process group held when the run began.
#[derive(Clone, Copy, Debug)]
pub(super) struct Terminal {
    #[cfg(unix)]
    own: pid_t,
}

impl Terminal {
    /// The terminal on standard input, when grpofit's process group is its foreground.
    pub(super) fn foreground() -> Option<Terminal> {
        #[cfg(unix)]
        {
            // SAFETY: isatty(3), getpgrp(2) and tcgetpgrp(3) take and return plain integers
            let (tty, own, front) =
                unsafe { (libc::isatty(TTY), libc::getpgrp(), libc::tcgetpgrp(TTY)) };
            (tty == 1 && own > 0 && front == own).then_some(Terminal { own })
        }
        #[cfg(not(unix))]
        None
    }

    /// Makes `group` the terminal's foreground.
    pub(super) fn give(self, group: u32) {
        #[cfg(unix)]
        if let Ok(group) = pid_t::try_from(group) {
            set_foreground(group);
        }
    }

    /// Makes grpofit's own group the foreground again.
    pub(super) fn take_back(self) {
        #[cfg(unix)]
        set_foreground(self.own);
    }

    /// Whether grpofit's group is the foreground (after `fg`, not after `bg`).
    pub(super) fn ours(self) -> bool {
        #[cfg(unix)]
        {
            // SAFETY: tcgetpgrp(3) takes and returns plain integers
            unsafe { libc::tcgetpgrp(TTY) == self.own }
        }
        #[cfg(not(unix))]
        false
    }

    /// Makes the command take the terminal itself, in the forked child before exec, once it
    /// is in its own group: the command may read the terminal before grpofit's own `give`
    /// runs, and would then be stopped (SIGTTIN). Shells do both for the same reason.
    #[cfg(unix)]
    pub(super) fn hand_over_in_child(command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the forked child before exec and calls only getpgrp(2),
        // sigemptyset/sigaddset(3), pthread_sigmask(3) and tcsetpgrp(3), which are
        // async-signal-safe; it allocates nothing.
        unsafe {
            command.pre_exec(|| {
                set_foreground(libc::getpgrp());
                Ok(())
            });
        }
    }
}

/// tcsetpgrp(3) on standard input with SIGTTOU blocked in the calling thread: a process of a
/// background group may change the foreground only when it blocks or ignores SIGTTOU
/// (tcsetpgrp(3), POSIX "General Terminal Interface"), else it is stopped. Returns whether it
/// was changed.
#[cfg(unix)]
fn set_foreground(group: pid_t) -> bool {
    // SAFETY: sigset_t is plain data the sig* calls fill; pthread_sigmask(3) changes only this
    // thread's mask and restores it; tcsetpgrp(3) takes plain integers.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut before);
        let changed = libc::tcsetpgrp(TTY, group) == 0;
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        changed
    }
}
