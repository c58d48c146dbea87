//! The followed run log read on its own thread (`--follow`): a slow disk never delays a frame,
//! and a log of gigabytes never floods the screen. Each look reads at most
//! [`tail::MOST_PER_LOOK`] bytes; at most [`QUEUED`] looks wait for the screen, and the reader
//! waits while they do, so what is held is a few looks whatever the log's size. The screen
//! takes the looks a frame at a time ([`LogPoller::take_for`]), so keys are read between them.
//! The thread ends when the screen closes.

use grpofit_core::measure::tail::{self, Change, Tail};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most looks waiting for the screen.
pub const QUEUED: usize = 2;

/// How long the reader waits after a look that found the end of the log.
const PAUSE: Duration = Duration::from_millis(500);

/// The reader thread and the looks it queued. Dropped, it stops the thread.
pub struct LogPoller {
    looks: Receiver<Change>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LogPoller {
    /// Starts reading `tail` on a new thread.
    pub fn spawn(tail: Tail) -> LogPoller {
        let (tx, looks) = mpsc::sync_channel(QUEUED);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || read(tail, &tx, &stopped));
        LogPoller {
            looks,
            stop,
            thread: Some(thread),
        }
    }

    /// The looks queued now, handed to `take` one by one until `budget` is spent (one at
    /// least, when there is one). True when looks may be left for the next frame.
    pub fn take_for(&self, budget: Duration, mut take: impl FnMut(Change)) -> bool {
        let started = Instant::now();
        while let Ok(change) = self.looks.try_recv() {
            take(change);
            if started.elapsed() >= budget {
                return true;
            }
        }
        false
    }

    /// Stops the thread and waits for it to end: it ends within a look and a pause.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take();
        drop(self);
        if let Some(t) = thread {
            _ = t.join();
        }
    }
}

impl Drop for LogPoller {
    fn drop(&mut self) {
        // a reader waiting on the full queue is woken when the receiver goes with `self`
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Looks at the log until `stop` or until nobody listens: again at once after a full look,
/// after a pause otherwise. A look that found nothing is not sent.
fn read(mut tail: Tail, tx: &SyncSender<Change>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let change = tail.look();
        let read = match &change {
            Change::Appended(b) | Change::Restarted(b) => b.len() as u64,
            Change::Gone(_) => 0,
        };
        let nothing = change == Change::Appended(Vec::new());
        if !nothing && tx.send(change).is_err() {
            return;
        }
        if read < tail::MOST_PER_LOOK {
            pause(stop);
        }
    }
}

/// Waits `PAUSE`, or less when `stop` is set meanwhile.
fn pause(stop: &AtomicBool) {
    let slice = Duration::from_millis(50);
    let mut waited = Duration::ZERO;
    while waited < PAUSE && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(slice);
        waited += slice;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big_log(dir: &std::path::Path, bytes: usize) -> Tail {
        let path = dir.join("run.jsonl");
        std::fs::write(&path, vec![b'\n'; bytes]).expect("written");
        Tail::open(&path).expect("there")
    }

    #[test]
    fn the_reader_holds_a_few_looks_and_hands_them_out_within_the_budget() {
        let dir = tempfile::tempdir().expect("dir");
        let size = 8 * tail::MOST_PER_LOOK as usize;
        let poller = LogPoller::spawn(big_log(dir.path(), size));
        // the reader fills the queue and waits on it
        std::thread::sleep(Duration::from_millis(300));
        let mut sizes = Vec::new();
        let more = poller.take_for(Duration::ZERO, |c| match c {
            Change::Appended(b) => sizes.push(b.len()),
            other => panic!("{other:?}"),
        });
        assert!(more, "a spent budget leaves the rest for the next frame");
        assert_eq!(
            sizes.len(),
            1,
            "one look at least, and no more past the budget"
        );
        let started = Instant::now();
        while sizes.iter().sum::<usize>() < size && started.elapsed() < Duration::from_secs(20) {
            poller.take_for(Duration::from_secs(1), |c| {
                if let Change::Appended(b) = c {
                    sizes.push(b.len())
                }
            });
        }
        assert!(
            sizes.iter().all(|n| *n as u64 <= tail::MOST_PER_LOOK),
            "{sizes:?}"
        );
        assert_eq!(sizes.iter().sum::<usize>(), size);
    }

    #[test]
    fn the_queue_is_bounded_and_the_reader_ends_with_the_screen() {
        let dir = tempfile::tempdir().expect("dir");
        let poller = LogPoller::spawn(big_log(dir.path(), 8 * tail::MOST_PER_LOOK as usize));
        std::thread::sleep(Duration::from_millis(300));
        // told to stop while it waits on the full queue: what it read is what waits there and
        // the look it holds, and it reads no more
        poller.stop.store(true, Ordering::Relaxed);
        let queued = poller.looks.iter().count();
        assert_eq!(queued, QUEUED + 1, "of 8 looks");
        let started = Instant::now();
        poller.stop();
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn an_idle_reader_ends_with_the_screen() {
        let dir = tempfile::tempdir().expect("dir");
        let poller = LogPoller::spawn(big_log(dir.path(), 10));
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        poller.stop();
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
