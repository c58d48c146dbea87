//! A run log read while the run still writes it: the bytes appended since the last read are
//! fed in, whole lines are added to a [`RunLog`], and a last line still being written (no
//! newline yet) waits for the next feed. A line that does not read is skipped and said in a
//! notice; it never stops the reading.

use crate::measure::measured::{RunLog, read_line};
use crate::units::format_size;

/// A line longer than this without a newline is no log line: it is dropped, with a notice.
pub const LONGEST_LINE: usize = 1 << 20;

#[derive(Debug, Clone, Default)]
pub struct Follower {
    /// what errors are prefixed with: the log's name
    name: String,
    log: RunLog,
    /// the bytes after the last newline: a line still being written
    pending: Vec<u8>,
    /// whole lines read so far, for `name:line` in notices
    lines: usize,
    /// the last line that did not read, and how many did not
    notice: Option<String>,
    skipped: usize,
}

impl Follower {
    pub fn new(name: &str) -> Follower {
        Follower {
            name: name.to_string(),
            ..Follower::default()
        }
    }

    /// Reads `bytes` appended to the log: each whole line is added to the log; what follows
    /// the last newline is kept for the next feed.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        // each line read in place, the bytes read dropped once: linear in the chunk (draining
        // line by line moved the rest of a 16 MiB chunk for every line)
        let pending = std::mem::take(&mut self.pending);
        let mut start = 0;
        while let Some(len) = pending[start..].iter().position(|&b| b == b'\n') {
            self.read(&pending[start..start + len]);
            start += len + 1;
        }
        self.pending = pending;
        self.pending.drain(..start);
        self.log.fold();
        if self.pending.len() > LONGEST_LINE {
            self.pending.clear();
            self.lines += 1;
            self.skip(format!(
                "{}:{}: a line longer than {} with no end: skipped",
                self.name,
                self.lines,
                format_size(LONGEST_LINE as u64)
            ));
        }
    }

    /// The log was cut or replaced: everything read so far is forgotten, to be read again.
    pub fn restart(&mut self) {
        *self = Follower::new(&self.name);
    }

    fn read(&mut self, line: &[u8]) {
        self.lines += 1;
        let at = format!("{}:{}", self.name, self.lines);
        let result = std::str::from_utf8(line)
            .map_err(|_| format!("{at}: not UTF-8 text"))
            .and_then(|text| read_line(&mut self.log, text, &at).map_err(|e| e.to_string()));
        if let Err(e) = result {
            self.skip(e);
        }
    }

    fn skip(&mut self, why: String) {
        self.skipped += 1;
        self.notice = Some(why);
    }

    /// The log as read so far (whole lines only). Its peaks, its last step and its GPU are the
    /// log's; past `kept::MOST_KEPT` steps or samples, the others are dropped (`steps.len()` is
    /// no count of the steps: `all_steps.count` is).
    pub fn log(&self) -> &RunLog {
        &self.log
    }

    /// Whether a line is still being written (bytes after the last newline).
    pub fn mid_line(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The lines that did not read: the last one's error, with how many there were in all.
    pub fn notice(&self) -> Option<String> {
        let last = self.notice.as_ref()?;
        Some(match self.skipped {
            1 => format!("{last} (line skipped)"),
            n => format!("{last} ({n} lines skipped)"),
        })
    }

    /// The last step the callback reported.
    pub fn step(&self) -> Option<u64> {
        self.log.steps.last().map(|s| s.step)
    }
}

/// A notice when the log's GPU is not the one the estimate is made for: its memory differs
/// from `capacity`, or its name from `name` (NVML's, when the screen has a reading).
pub fn other_gpu(log: &RunLog, capacity: u64, name: Option<&str>) -> Option<String> {
    let device = log.device();
    let called = device.map_or(String::new(), |d| format!("{d}, "));
    if let Some(total) = log.total().filter(|t| *t != capacity) {
        return Some(format!(
            "the log's GPU ({called}{}) is not the one estimated for ({})",
            format_size(total),
            format_size(capacity)
        ));
    }
    match (device, name) {
        (Some(d), Some(n)) if d != n => {
            Some(format!("the log's GPU is a {d}, the estimate's a {n}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::kept::MOST_KEPT;

    const PREDICTION: &str = r#"{"kind": "prediction", "device": "NVIDIA L4", "total": 1000, "used_before": 0, "stack": "trl", "peak": 800}"#;
    const SAMPLE: &str = r#"{"kind": "nvml", "gpus": [{"name": "NVIDIA L4", "used": 400, "total": 1000}], "tree": 380}"#;
    const STEP: &str = r#"{"kind": "step", "step": 3, "max_allocated": 500, "max_reserved": 600, "free": 300, "total": 1000}"#;

    #[test]
    fn a_line_split_across_feeds_is_read_once_whole() {
        let mut f = Follower::new("run.jsonl");
        f.feed(format!("{PREDICTION}\n{SAMPLE}\n").as_bytes());
        let (head, tail) = STEP.split_at(30);
        f.feed(head.as_bytes());
        assert!(f.mid_line());
        assert_eq!(f.step(), None);
        assert_eq!(f.notice(), None, "half a line is no error");
        f.feed(tail.as_bytes());
        assert_eq!(f.step(), None, "no newline yet");
        f.feed(b"\n");
        assert_eq!(f.step(), Some(3));
        assert!(!f.mid_line());
        assert_eq!(f.log().samples.len(), 1);
        assert_eq!(f.log().whole_process_peak(0), Some(600));
        assert_eq!(f.notice(), None);
    }

    #[test]
    fn a_character_split_across_feeds_is_no_error() {
        let line = r#"{"kind": "start", "device": "GPU é"}"#;
        let at = line.find('é').expect("there") + 1; // inside the two bytes of é
        let mut f = Follower::new("run.jsonl");
        f.feed(&line.as_bytes()[..at]);
        f.feed(&line.as_bytes()[at..]);
        f.feed(b"\n");
        assert_eq!(f.notice(), None);
        assert_eq!(f.log().device(), Some("GPU é"));
    }

    #[test]
    fn junk_lines_are_skipped_and_named_and_the_rest_is_read() {
        let mut f = Follower::new("run.jsonl");
        f.feed(format!("{PREDICTION}\nnot json\n[1]\n").as_bytes());
        f.feed(b"\xff\n");
        f.feed(format!("{STEP}\n").as_bytes());
        assert_eq!(f.step(), Some(3), "the lines after the junk are read");
        assert!(f.log().prediction.is_some());
        let notice = f.notice().expect("a notice");
        assert!(
            notice.starts_with("run.jsonl:4: not UTF-8"),
            "the last bad line is named: {notice}"
        );
        assert!(notice.contains("3 lines skipped"), "{notice}");
    }

    #[test]
    fn an_endless_line_is_dropped_with_a_notice() {
        let mut f = Follower::new("run.jsonl");
        f.feed(&vec![b'x'; LONGEST_LINE + 1]);
        assert!(!f.mid_line());
        assert!(f.notice().expect("notice").contains("no end"));
        f.feed(format!("{STEP}\n").as_bytes());
        assert_eq!(f.step(), Some(3));
    }

    #[test]
    fn restart_forgets_what_was_read() {
        let mut f = Follower::new("run.jsonl");
        f.feed(format!("junk\n{STEP}\n{SAMPLE}").as_bytes());
        f.restart();
        assert_eq!(f.step(), None);
        assert_eq!(f.notice(), None);
        assert!(!f.mid_line());
        f.feed(format!("{STEP}\n").as_bytes());
        assert_eq!(f.step(), Some(3));
    }

    #[test]
    fn a_long_log_keeps_its_peaks_and_last_step_in_bounded_memory() {
        let mut f = Follower::new("run.jsonl");
        let mut all = Follower::new("run.jsonl");
        let mut text = String::from(PREDICTION);
        text.push('\n');
        for i in 0..3_000u64 {
            let (a, r, free) = ((i * 7919) % 10_007, (i * 104_729) % 10_009, (i * 31) % 997);
            text.push_str(&format!(
                "{{\"kind\": \"step\", \"step\": {i}, \"max_allocated\": {a}, \"max_reserved\": {r}, \"free\": {free}, \"total\": 20000}}\n"
            ));
            text.push_str(&format!(
                "{{\"kind\": \"nvml\", \"gpus\": [{{\"used\": {r}}}], \"tree\": {}}}\n",
                (i * 13) % 9_973
            ));
        }
        // read in chunks, as the screen reads a growing log, and whole
        for chunk in text.as_bytes().chunks(4096) {
            f.feed(chunk);
        }
        all.feed(text.as_bytes());
        for g in [&f, &all] {
            assert!(g.log().steps.len() <= MOST_KEPT, "{}", g.log().steps.len());
            assert!(g.log().samples.len() <= MOST_KEPT);
            assert_eq!(g.step(), Some(2_999));
        }
        let full = crate::measure::measured::parse_log(&text, "run.jsonl").expect("reads");
        let m = full.measured().expect("steps");
        for g in [&f, &all] {
            let kept = g.log().measured().expect("steps");
            assert_eq!(
                (
                    kept.max_allocated,
                    kept.max_reserved,
                    kept.max_used,
                    kept.total
                ),
                (m.max_allocated, m.max_reserved, m.max_used, m.total)
            );
            assert_eq!(g.log().nvml_peak(), full.nvml_peak());
            assert_eq!(g.log().whole_process_peak(7), full.whole_process_peak(7));
            assert_eq!(g.log().device(), full.device());
            assert_eq!(g.log().total(), full.total());
        }
    }

    #[test]
    fn a_log_from_another_gpu_is_said() {
        let mut f = Follower::new("run.jsonl");
        f.feed(format!("{PREDICTION}\n").as_bytes());
        assert_eq!(other_gpu(f.log(), 1000, Some("NVIDIA L4")), None);
        assert_eq!(other_gpu(f.log(), 1000, None), None);
        let other = other_gpu(f.log(), 2000, None).expect("memory differs");
        assert!(other.contains("NVIDIA L4"), "{other}");
        let named = other_gpu(f.log(), 1000, Some("NVIDIA H200")).expect("name differs");
        assert!(
            named.contains("NVIDIA L4") && named.contains("NVIDIA H200"),
            "{named}"
        );
        assert_eq!(other_gpu(&RunLog::default(), 1000, Some("x")), None);
    }
}
