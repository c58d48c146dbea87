//! The command's standard error, passed through as it comes and its last 64 KiB kept: an
//! out-of-memory message is the last thing a crashed trainer prints (PyTorch raises
//! `torch.OutOfMemoryError` and Python prints the traceback, the message last).

use super::console::Console;
use std::io::Read;
use std::sync::{Arc, Mutex};

/// How much of the command's standard error is kept for the diagnosis: a traceback and its
/// message fit many times over (the longest message of
/// calibration/oom-messages-torch-2.11.txt is under 1 KiB).
pub(super) const KEPT: usize = 64 * 1024;

/// The end of what was read, shared with the thread that reads it.
#[derive(Clone, Default)]
pub(super) struct Tail(Arc<Mutex<Vec<u8>>>);

impl Tail {
    fn push(&self, chunk: &[u8]) {
        let mut kept = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.extend_from_slice(chunk);
        if kept.len() > KEPT {
            let cut = kept.len() - KEPT;
            kept.drain(..cut);
        }
    }

    pub(super) fn text(&self) -> String {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&kept).into_owned()
    }
}

/// Reads `from` to its end on a thread, passing each chunk to the console and keeping the tail.
pub(super) fn spawn(
    mut from: impl Read + Send + 'static,
    console: Arc<Console>,
    tail: Tail,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    console.pass_through(&buf[..n]);
                    tail.push(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_64_kib() {
        let tail = Tail::default();
        tail.push(&vec![b'a'; KEPT]);
        tail.push(b"CUDA out of memory.");
        let text = tail.text();
        assert_eq!(text.len(), KEPT);
        assert!(text.ends_with("CUDA out of memory."));
    }
}
