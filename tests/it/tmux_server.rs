//! A tmux server of one test's own (its socket named after the test and the process, no user
//! config), killed when dropped: what the terminal tests that start grpofit in a pane share.
// test helpers: a failed tmux call is the test's failure
#![allow(clippy::unwrap_used)]

use std::process::Command;

pub(crate) struct Server {
    name: String,
}

impl Server {
    /// The server `grpofit-TAG-PID`, started by the first command that needs it.
    pub(crate) fn new(tag: &str) -> Server {
        Server {
            name: format!("grpofit-{tag}-{}", std::process::id()),
        }
    }

    /// A tmux command on this server, to add arguments and an environment to.
    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.name]);
        c
    }

    /// Runs a tmux command on this server; its standard output.
    pub(crate) fn tmux(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// True, having said so, where tmux is not installed (outside CI: CI installs it).
pub(crate) fn tmux_missing(what: &str) -> bool {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI must install tmux");
        eprintln!("tmux is not installed: {what} did not run");
        return true;
    }
    false
}
