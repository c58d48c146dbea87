//! What grpofit takes from a Hub server before it stops: the answers are read whole into
//! memory and parsed, so a server (or a mirror) that lists thousands of shards, packs a header
//! with a million tensors or trickles its bytes would hold the command for minutes and take
//! gigabytes. These bounds are far past any real checkpoint's and cut such answers short, each
//! with a message that names the model, the file and the bound.

use std::time::{Duration, Instant};

/// The most safetensors files one model's index may list. The largest open checkpoints ship
/// under two hundred (Llama 3.1 405B: 191; DeepSeek-V3: 163); 1024 is five times that.
pub const MAX_SHARDS: usize = 1024;

/// The most tensors one safetensors header may describe: the core's bound, which a header
/// read from the cache keeps too.
pub use grpofit_core::resolve::safetensors::MAX_TENSORS_PER_FILE;

/// How long one model's fetch may take whole (its info, config.json, index and every
/// header), unless `DEADLINE_VAR` says otherwise. The Hub answers each request in well under a
/// second; ten minutes for one model is a server that trickles.
pub const DEADLINE: Duration = Duration::from_secs(600);

/// The environment variable that sets the deadline, in whole seconds.
pub const DEADLINE_VAR: &str = "GRPOFIT_HUB_DEADLINE_SECS";

/// How often the fetch of many headers says how far it is.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// `Err` naming the bound when an index lists more than `MAX_SHARDS` files.
pub fn check_shards(repo: &str, count: usize) -> Result<(), String> {
    if count > MAX_SHARDS {
        return Err(format!(
            "{repo}'s model.safetensors.index.json from the Hub lists {count} files, more than the {MAX_SHARDS} grpofit reads: nothing fetched"
        ));
    }
    Ok(())
}

/// `Err` when the header's JSON (`json`, without its 8-byte length) has more tensor entries
/// than `MAX_TENSORS_PER_FILE`, counted by their `data_offsets` keys.
pub fn check_tensors(json: &[u8]) -> Result<(), String> {
    let count = grpofit_core::resolve::safetensors::count_tensors(json);
    if count > MAX_TENSORS_PER_FILE {
        return Err(
            grpofit_core::resolve::safetensors::Problem::TooManyTensors { count }.to_string(),
        );
    }
    Ok(())
}

/// The deadline `DEADLINE_VAR` sets (whole seconds above 0), else `DEADLINE`.
pub fn deadline() -> Result<Duration, String> {
    deadline_from(std::env::var_os(DEADLINE_VAR))
}

fn deadline_from(value: Option<std::ffi::OsString>) -> Result<Duration, String> {
    let Some(value) = value else {
        return Ok(DEADLINE);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(secs) if secs > 0 => Ok(Duration::from_secs(secs)),
        _ => Err(format!(
            "{DEADLINE_VAR} = {:?}: not a whole number of seconds above 0 (e.g. 600)",
            text.chars().take(40).collect::<String>()
        )),
    }
}

/// The clock of one model's fetch: its deadline, and when progress was last said.
pub struct Headers {
    started: Instant,
    said: Instant,
    deadline: Duration,
    total: usize,
}

impl Headers {
    /// Starts the clock of a fetch that may take `deadline`; its headers are counted once
    /// known ([`Headers::count`]).
    pub fn start(deadline: Duration) -> Headers {
        let now = Instant::now();
        Headers {
            started: now,
            said: now,
            deadline,
            total: 0,
        }
    }

    /// The number of safetensors headers to read.
    pub fn count(&mut self, total: usize) {
        self.total = total;
    }

    /// When the fetch must be done: each request is cut there.
    pub fn ends_at(&self) -> Instant {
        self.started + self.deadline
    }

    /// `error`, or the deadline's own message when the deadline has passed (a request cut by
    /// it fails as a timeout); `done` headers were read.
    pub fn explain(&self, repo: &str, done: usize, error: String) -> String {
        if Instant::now() >= self.ends_at() {
            self.late(repo, done)
        } else {
            error
        }
    }

    fn late(&self, repo: &str, done: usize) -> String {
        let what = if self.total == 0 {
            "its config.json and index".to_string()
        } else {
            format!("{done} of {} safetensors headers", self.total)
        };
        format!(
            "{repo}: the Hub took over {} s for {what}: stopped ({DEADLINE_VAR} sets how long; HF_HUB_OFFLINE=1 or --offline stays offline, HF_ENDPOINT picks a mirror)",
            self.deadline.as_secs()
        )
    }

    /// Before header `done + 1`: an error past the deadline, else a progress line to say when
    /// `PROGRESS_EVERY` has passed since the last.
    pub fn next(&mut self, repo: &str, done: usize) -> Result<Option<String>, String> {
        if Instant::now() >= self.ends_at() {
            return Err(self.late(repo, done));
        }
        if self.said.elapsed() < PROGRESS_EVERY {
            return Ok(None);
        }
        self.said = Instant::now();
        Ok(Some(format!(
            "grpofit: {repo}: {done} of {} safetensors headers read ({} s)",
            self.total,
            self.started.elapsed().as_secs()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_are_counted_by_their_offsets() {
        let one = br#"{"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}"#;
        assert!(check_tensors(one).is_ok());
        let many: String = (0..=MAX_TENSORS_PER_FILE)
            .map(|i| format!("\"t{i}\":{{\"data_offsets\":[0,0]}},"))
            .collect();
        let e = check_tensors(many.as_bytes()).unwrap_err();
        assert!(e.contains("65537 tensors"), "{e}");
    }

    #[test]
    fn the_deadline_is_whole_seconds_above_zero() {
        assert_eq!(deadline_from(None), Ok(DEADLINE));
        assert_eq!(deadline_from(Some("3".into())), Ok(Duration::from_secs(3)));
        for bad in ["0", "-1", "1.5", "soon", ""] {
            let e = deadline_from(Some(bad.into())).unwrap_err();
            assert!(e.starts_with(DEADLINE_VAR) && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn past_the_deadline_the_error_says_how_far_the_fetch_got() {
        let mut clock = Headers::start(Duration::ZERO);
        clock.count(20);
        let e = clock.next("a/b", 3).unwrap_err();
        assert!(e.contains("3 of 20 safetensors headers"), "{e}");
        assert!(e.contains(DEADLINE_VAR), "{e}");
        let e = clock.explain("a/b", 3, "timeout".into());
        assert!(e.contains("took over 0 s"), "{e}");
        let running = Headers::start(DEADLINE);
        assert_eq!(running.explain("a/b", 0, "timeout".into()), "timeout");
    }

    #[test]
    fn an_index_of_too_many_files_is_refused() {
        assert!(check_shards("a/b", MAX_SHARDS).is_ok());
        assert!(check_shards("a/b", MAX_SHARDS + 1).is_err());
    }
}
