//! A watchdog that outlives a SIGKILL of grpofit. grpofit catches every other signal that ends
//! it, passes it on to the command's process group and writes the log's `exit` line itself
//! (signals.rs, group.rs); a SIGKILL cannot be caught. So a small process forked from grpofit
//! once the command has started holds the read end of a pipe whose only write end is
//! grpofit's. When grpofit ends its run it writes one byte and the watchdog exits; when grpofit
//! dies instead, the kernel closes the write end, the watchdog reads end-of-file, kills the
//! command's process group (SIGKILL) and appends an `exit` line to the run log.
//!
//! The watchdog is forked without exec from a process that has threads, so it calls only
//! async-signal-safe functions (read, kill, write, setpgid, _exit; signal-safety(7)): the exit
//! line is formatted before the fork. It runs in a process group of its own, so a signal sent
//! to grpofit's group (a terminal's, or `kill -- -PGID`) does not end it with grpofit. Limits:
//! a SIGKILL sent to the watchdog as well (`kill -9` of both) leaves the command to its parent
//! death signal (group.rs: the command itself dies, its own children do not), and processes
//! that left the command's group (setsid, setpgid) are not in the group it kills.

#[cfg(target_os = "linux")]
use std::os::fd::RawFd;

/// The byte grpofit writes when it has ended the run itself.
#[cfg(target_os = "linux")]
const STAND_DOWN: u8 = b'x';

/// The watchdog started for one run.
pub(super) struct Watchdog {
    #[cfg(target_os = "linux")]
    pid: libc::pid_t,
    /// the pipe's write end: grpofit's alone (close-on-exec)
    #[cfg(target_os = "linux")]
    done: RawFd,
}

impl Watchdog {
    /// Starts the watchdog of the command's process `group`, appending to the run log `log`
    /// (open for appending) should grpofit die; `None` where it cannot be started (it is then
    /// said, and the run goes on as before).
    #[cfg(target_os = "linux")]
    pub(super) fn start(group: u32, log: RawFd) -> Result<Watchdog, String> {
        let group = libc::pid_t::try_from(group).map_err(|e| e.to_string())?;
        let line = serde_json::json!({
            "kind": "exit",
            "code": 128 + libc::SIGKILL,
            "signal": libc::SIGKILL,
            "seconds": null,
            "samples": 0,
            "peak_used": null,
            "peak_tree": null,
            "by": "watchdog: grpofit was killed (SIGKILL) before it wrote this line; its watchdog killed the command's process group",
        });
        let line = format!("{line}\n").into_bytes();
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2(2) fills the two descriptors of `fds`
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let [read_end, write_end] = fds;
        // SAFETY: fork(2); the child runs `watch`, which is async-signal-safe and never returns
        match unsafe { libc::fork() } {
            -1 => {
                let e = std::io::Error::last_os_error();
                // SAFETY: closing the two descriptors pipe2 made
                unsafe {
                    libc::close(read_end);
                    libc::close(write_end);
                }
                Err(e.to_string())
            }
            0 => watch(read_end, write_end, group, log, &line),
            pid => {
                // SAFETY: the read end is the watchdog's now
                unsafe { libc::close(read_end) };
                Ok(Watchdog {
                    pid,
                    done: write_end,
                })
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn start(_group: u32, _log: i32) -> Result<Watchdog, String> {
        Err("the watchdog is Linux's alone".into())
    }

    /// grpofit has ended the run itself (its exit line written): the watchdog exits, unused.
    pub(super) fn stand_down(self) {
        #[cfg(target_os = "linux")]
        // SAFETY: write(2), close(2) and waitpid(2) on the descriptor and child this owns
        unsafe {
            libc::write(self.done, [STAND_DOWN].as_ptr().cast(), 1);
            libc::close(self.done);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }

    /// The watchdog's PID (not a descendant of the command: never swept with it).
    pub(super) fn pid(&self) -> u32 {
        #[cfg(target_os = "linux")]
        {
            u32::try_from(self.pid).unwrap_or(0)
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }
}

/// The watchdog's whole life, in the forked child: async-signal-safe calls only.
#[cfg(target_os = "linux")]
fn watch(read_end: RawFd, write_end: RawFd, group: libc::pid_t, log: RawFd, line: &[u8]) -> ! {
    // SAFETY: each call is async-signal-safe (signal-safety(7)) and touches only the
    // descriptors and the buffer this process owns; `_exit` skips Rust's and libc's exit
    // handlers, which belong to grpofit.
    unsafe {
        libc::close(write_end);
        libc::setpgid(0, 0);
        let mut byte = 0u8;
        let got = loop {
            let n = libc::read(read_end, (&raw mut byte).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break n;
            }
        };
        if got == 1 && byte == STAND_DOWN {
            libc::_exit(0);
        }
        libc::kill(-group, libc::SIGKILL);
        libc::write(log, line.as_ptr().cast(), line.len());
        libc::_exit(0)
    }
}
