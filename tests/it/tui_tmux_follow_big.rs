//! `--follow` on a large log in a real pseudo-terminal (tmux; issue 23, audit "High"): the
//! screen opens, answers `q` at once while it is still reading, and holds a few megabytes, not
//! the log. CI installs tmux (`.ci/run`); where tmux is missing outside CI the test says so and
//! passes.
#![allow(clippy::unwrap_used)]

use crate::tmux_server::{Server, tmux_missing};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a wait polls before the test fails, on a loaded machine too.
const PATIENCE: Duration = Duration::from_secs(90);

/// The test's pane: grpofit itself, with no shell to type into; the pane stays when it exits
/// so that its status can be read.
struct Pane {
    server: Server,
}

impl Pane {
    fn start(dir: &Path, command: &str) -> Pane {
        let server = Server::new("follow-big");
        let conf = dir.join("tmux.conf");
        std::fs::write(&conf, "set -g remain-on-exit on\n").unwrap();
        let started = server
            .command()
            .args(["-f", conf.to_str().unwrap()])
            .args(["new-session", "-d", "-s", "follow", "-x", "120", "-y", "40"])
            .args(["-c", dir.to_str().unwrap(), command])
            .env("NO_COLOR", "1")
            .status()
            .unwrap();
        assert!(started.success(), "tmux new-session");
        Pane { server }
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.server.tmux(args)
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "follow"])
    }

    /// The command's exit status once it has ended: tmux's, or, while tmux has not yet reaped
    /// it (a zombie whose pane tmux 3.3 still shows alive, seen with several servers at
    /// once), the kernel's (`/proc/PID/stat`'s last field, `exit_code` in waitpid's form). A
    /// death by a signal is `128 + N`, as a shell says it.
    fn exit_status(&self, pid: &str) -> Option<i32> {
        let s = self.tmux(&[
            "display-message",
            "-p",
            "-t",
            "follow",
            "#{pane_dead} #{pane_dead_status}",
        ]);
        let mut words = s.split_whitespace();
        if words.next() == Some("1") {
            if let Some(code) = words.next().and_then(|w| w.parse().ok()) {
                return Some(code);
            }
            // tmux marks the pane dead when its terminal closes, before it has reaped the
            // process and filled the status (tmux 3.3a `format_cb_pane_dead_status` needs
            // PANE_STATUSREADY); tmux 3.3 also leaves it empty after a signal. The kernel
            // says which: a process still there is read from /proc (a zombie) or waited
            // for; one reaped has its status in tmux now, else it died by a signal (-1).
            if Path::new(&format!("/proc/{pid}")).exists() {
                return zombie_status(pid);
            }
            let again = self.tmux(&[
                "display-message",
                "-p",
                "-t",
                "follow",
                "#{pane_dead_status}",
            ]);
            return Some(again.trim().parse().unwrap_or(-1));
        }
        zombie_status(pid)
    }

    /// Polls until `done` gives an answer; fails after `PATIENCE` naming `what` and saying what
    /// `why` finds then.
    fn wait_or<T>(
        &self,
        what: &str,
        why: &dyn Fn() -> String,
        done: impl Fn(&Pane) -> Option<T>,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(answer) = done(self) {
                return answer;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "waited {PATIENCE:?} for {what}; the pane:\n{}\n{}",
                self.screen(),
                why()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A log of `size` bytes or a little more: the 8gb preset's prediction line, a start line, then
/// step lines as the callback writes them.
fn write_log(path: &Path, size: usize) {
    let total = 24u64 << 30;
    let mut block = String::new();
    for step in 1..=8_000u64 {
        let allocated = (9u64 << 30) + (step * 7919) % (1 << 28);
        block.push_str(&format!(
            "{{\"kind\": \"step\", \"step\": {step}, \"max_allocated\": {allocated}, \"max_reserved\": {}, \"free\": {}, \"total\": {total}, \"seconds\": 1.25}}\n",
            allocated + (1 << 29),
            total - allocated - (1 << 30)
        ));
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        f,
        "{{\"kind\": \"prediction\", \"preset\": \"8gb\", \"total\": {total}}}\n{{\"kind\": \"start\", \"device\": \"Test GPU\", \"total\": {total}, \"torch\": \"2.9.0\", \"trl\": \"1.15.0\"}}\n"
    )
    .unwrap();
    let mut written = 0;
    while written < size {
        f.write_all(block.as_bytes()).unwrap();
        written += block.len();
    }
    f.flush().unwrap();
}

/// What the grpofit started in `dir` is doing, for a failure's message: each thread's state and
/// the kernel function it waits in, and what it has read (Linux's `/proc`).
fn what_grpofit_does(dir: &Path) -> impl Fn() -> String {
    let pid_file = dir.join("pid");
    move || {
        let Ok(pid) = std::fs::read_to_string(&pid_file) else {
            return "no pid file: the shell did not start grpofit".to_string();
        };
        let pid = pid.trim();
        let mut said = format!("grpofit {pid}: read {:?} bytes\n", bytes_read(pid));
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            let at = task.path();
            let stat = std::fs::read_to_string(at.join("stat")).unwrap_or_default();
            let wchan = std::fs::read_to_string(at.join("wchan")).unwrap_or_default();
            let state = stat.rsplit(") ").next().unwrap_or("").chars().next();
            said.push_str(&format!(
                "  thread {:?}: state {state:?}, waiting in {wchan:?}\n",
                task.file_name()
            ));
        }
        said
    }
}

/// The bytes process `pid` has read so far (Linux's `rchar`), when it can be read.
fn bytes_read(pid: &str) -> Option<usize> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let line = io.lines().find(|l| l.starts_with("rchar:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The exit status of process `pid` once it has ended and is not yet reaped (state `Z`), from
/// its `/proc/PID/stat` (`exit_code`, Linux 3.5 on).
fn zombie_status(pid: &str) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit(") ").next()?;
    if !after_name.starts_with('Z') {
        return None;
    }
    let code: i32 = after_name.split_whitespace().last()?.parse().ok()?;
    let signal = code & 0x7f;
    Some(if signal == 0 {
        (code >> 8) & 0xff
    } else {
        128 + signal
    })
}

/// The peak resident memory of process `pid` in bytes (Linux's `VmHWM`), when it can be read.
fn peak_memory(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

#[test]
fn a_large_log_is_followed_and_q_answered_at_once() {
    if tmux_missing("the large-log follow test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 128 MB: a debug build reads a few MB a second, so the screen is far from its end (and a
    // machine running every test at once is not pressed for memory by this one)
    let size = 128 << 20;
    write_log(&dir.path().join("big.jsonl"), size);
    let bin = env!("CARGO_BIN_EXE_grpofit");
    // the shell's own process becomes grpofit (`exec`), so its id is grpofit's
    let pane = Pane::start(
        dir.path(),
        &format!("sh -c 'echo $$ > pid; exec {bin} --no-gpu --no-mouse --follow big.jsonl'"),
    );
    let first = pane.wait_or("the first frame", &what_grpofit_does(dir.path()), |p| {
        let s = p.screen();
        s.contains("following big.jsonl").then_some(s)
    });
    assert!(first.contains("following big.jsonl · step"), "{first}");
    assert!(first.contains("measured peak"), "{first}");
    // reading on: the log's first megabytes are in, most of it is still to come
    std::thread::sleep(Duration::from_secs(2));
    let pid = std::fs::read_to_string(dir.path().join("pid")).unwrap();
    let pid = pid.trim();
    let peak = peak_memory(pid);
    let read = bytes_read(pid);
    let asked = Instant::now();
    pane.tmux(&["send-keys", "-t", "follow", "q"]);
    let status = pane.wait_or("the exit after q", &what_grpofit_does(dir.path()), |p| {
        p.exit_status(pid)
    });
    let took = asked.elapsed();
    assert_eq!(status, 0, "{}", pane.screen());
    // `q` is answered while the log is still being read: the screen never reads it to its end
    // first (a debug build reads a few MB a second, so most of the 256 MB is left)
    if let Some(read) = read {
        assert!(read < size / 2, "{} MiB read before q", read >> 20);
    }
    // reading the whole log first would take a minute and more (a debug build reads a few MB a
    // second); a loaded machine may take a few seconds to answer
    assert!(
        took < Duration::from_secs(30),
        "q took {took:?} to end the screen"
    );
    if let Some(peak) = peak {
        assert!(peak < 100 << 20, "{} MiB resident", peak >> 20);
    }
}
