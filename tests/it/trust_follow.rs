//! `--follow` on a large log (issue 23, audit "High"): a chunk of the log is read in time
//! linear in its size.
#![allow(clippy::unwrap_used)]

use grpofit_core::measure::follow::Follower;
use std::time::{Duration, Instant};

#[test]
fn a_large_chunk_is_read_in_linear_time() {
    // 4 Mi lines in one chunk: line by line draining moved ~8 TB here
    let mut chunk = vec![b'\n'; 4 << 20];
    let step = br#"{"kind": "step", "step": 1, "max_allocated": 1, "max_reserved": 2, "free": 3, "total": 10}"#;
    chunk.extend_from_slice(step);
    chunk.extend_from_slice(b"\n{\"kind\": \"st");
    let mut f = Follower::new("big.jsonl");
    let started = Instant::now();
    f.feed(&chunk);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(f.step(), Some(1));
    // the line still being written waits for the next chunk
    assert!(f.mid_line());
    f.feed(b"ep\", \"step\": 2, \"max_allocated\": 1, \"max_reserved\": 2, \"free\": 3, \"total\": 10}\n");
    assert_eq!(f.step(), Some(2));
    assert!(!f.mid_line());
}
