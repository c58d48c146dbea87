//! A run log's lines, read with a cap on what one line may hold: `check` and `calibrate` read
//! a log a line at a time, and a line of hundreds of megabytes (a process that wrote into the
//! log by mistake, a file that is not a log) would otherwise be held whole, twice over while it
//! is parsed (a 300 MB line took 592 MB, issue 28). A longer line is read past, not held, and
//! reported as skipped.

use std::io::BufRead;

/// The longest line held. The longest lines the callback and `grpofit run` write are the
/// `nvml` samples, under 200 bytes a GPU (examples/grpofit_callback.py, launch/sampler.rs), and
/// the `start` line with its library versions, under 1 KiB; 1 MiB is a thousand times those.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The skipped lines named in the notice; the rest are counted.
const NAMED: usize = 5;

/// What one read found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// the end of the file: nothing was read
    End,
    /// a line of at most the cap, in the buffer (its `\n` included when it had one)
    Held,
    /// a line of this many bytes, over the cap: the buffer is left empty
    TooLong(u64),
}

/// Reads the next line of `reader` into `buf` (cleared first), holding at most `max` bytes
/// of it.
pub fn next(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    buf.clear();
    let (mut len, mut over) = (0u64, false);
    loop {
        let available = match reader.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (chunk, ends) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let taken = chunk.len();
        len = len.saturating_add(u64::try_from(taken).unwrap_or(u64::MAX));
        if !over && buf.len() + taken <= max {
            buf.extend_from_slice(chunk);
        } else if !over {
            over = true;
            buf.clear();
            buf.shrink_to(max);
        }
        reader.consume(taken);
        if ends {
            break;
        }
    }
    Ok(match (len, over) {
        (0, _) => Line::End,
        (_, false) => Line::Held,
        (len, true) => Line::TooLong(len),
    })
}

/// The lines skipped for their length: the first few by number, all of them counted.
#[derive(Debug, Default)]
pub struct Skipped {
    named: Vec<(usize, u64)>,
    count: usize,
}

impl Skipped {
    pub fn add(&mut self, line: usize, len: u64) {
        self.count += 1;
        if self.named.len() < NAMED {
            self.named.push((line, len));
        }
    }

    /// The notice for the log `name`, when a line was skipped.
    pub fn notice(&self, name: &str) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let lines: Vec<String> = self
            .named
            .iter()
            .map(|(line, len)| format!("line {line} ({len} bytes)"))
            .collect();
        let more = self.count - self.named.len();
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "{name}: skipped {}{more}: longer than the {} MiB a log line may hold",
            lines.join(", "),
            MAX_LINE_BYTES >> 20
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_cap_is_read_past_and_not_held() {
        let mut text = b"short\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 100));
        text.extend(b"\nlast");
        // a small buffer, so the long line arrives in many pieces
        let mut reader = std::io::BufReader::with_capacity(7, &text[..]);
        let mut buf = Vec::new();
        assert_eq!(next(&mut reader, &mut buf, 10).unwrap(), Line::Held);
        assert_eq!(buf, b"short\n");
        assert_eq!(next(&mut reader, &mut buf, 10).unwrap(), Line::TooLong(101));
        assert!(buf.is_empty() && buf.capacity() <= 16);
        assert_eq!(next(&mut reader, &mut buf, 10).unwrap(), Line::Held);
        assert_eq!(buf, b"last");
        assert_eq!(next(&mut reader, &mut buf, 10).unwrap(), Line::End);
    }

    #[test]
    fn the_notice_names_the_first_lines_and_counts_the_rest() {
        let mut skipped = Skipped::default();
        assert_eq!(skipped.notice("run.jsonl"), None);
        for line in 1..=7 {
            skipped.add(line * 2, 3 << 20);
        }
        let notice = skipped.notice("run.jsonl").unwrap();
        assert!(notice.starts_with("run.jsonl: skipped line 2 (3145728 bytes), line 4"));
        assert!(notice.contains("line 10 (3145728 bytes) and 2 more: longer than the 1 MiB"));
    }
}
