//! What vramfit takes from a Hub server before it stops: the answers are read whole into
//! memory and parsed, so a server (or a mirror) that lists thousands of shards, packs a header
//! with a million tensors or trickles its bytes would hold the command for minutes and take
//! gigabytes. These bounds are far past any real checkpoint's and cut such answers short, each
//! with a message that names the model, the file and the bound.

use std::time::{Duration, Instant};

/// The most safetensors files one model's index may list. The largest open checkpoints ship
/// under two hundred (Llama 3.1 405B: 191; DeepSeek-V3: 163); 1024 is five times that.
pub const MAX_SHARDS: usize = 1024;

/// The most tensors one safetensors header may describe, counted before its JSON is parsed.
/// A shard holds hundreds to a few thousand tensors; 65,536 refuses a header of 10^6 entries,
/// which took 1.5 GB and 18 s to read.
pub const MAX_TENSORS_PER_FILE: usize = 1 << 16;

/// How long all the headers of one model may take. The Hub answers a header's two range
/// requests in well under a second each; ten minutes for every shard is a server that trickles.
pub const HEADERS_DEADLINE: Duration = Duration::from_secs(600);

/// How often the fetch of many headers says how far it is.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// `Err` naming the bound when an index lists more than `MAX_SHARDS` files.
pub fn check_shards(repo: &str, count: usize) -> Result<(), String> {
    if count > MAX_SHARDS {
        return Err(format!(
            "{repo}'s model.safetensors.index.json from the Hub lists {count} files, more than the {MAX_SHARDS} vramfit reads: nothing fetched"
        ));
    }
    Ok(())
}

/// `Err` when the header's JSON (`json`, without its 8-byte length) has more tensor entries
/// than `MAX_TENSORS_PER_FILE`, counted by their `data_offsets` keys.
pub fn check_tensors(json: &[u8]) -> Result<(), String> {
    const KEY: &[u8] = b"\"data_offsets\"";
    let count = json.windows(KEY.len()).filter(|w| *w == KEY).count();
    if count > MAX_TENSORS_PER_FILE {
        return Err(format!(
            "the header describes {count} tensors, more than the {MAX_TENSORS_PER_FILE} vramfit reads in one file"
        ));
    }
    Ok(())
}

/// The clock of one model's header fetches: its deadline, and when progress was last said.
pub struct Headers {
    started: Instant,
    said: Instant,
    total: usize,
}

impl Headers {
    pub fn start(total: usize) -> Headers {
        let now = Instant::now();
        Headers {
            started: now,
            said: now,
            total,
        }
    }

    /// Before header `done + 1`: an error past the deadline, else a progress line to say when
    /// `PROGRESS_EVERY` has passed since the last.
    pub fn next(&mut self, repo: &str, done: usize) -> Result<Option<String>, String> {
        let took = self.started.elapsed();
        if took > HEADERS_DEADLINE {
            return Err(format!(
                "{repo}: the Hub took over {} s for {done} of {} safetensors headers: stopped (HF_HUB_OFFLINE=1 or --offline stays offline, HF_ENDPOINT picks a mirror)",
                HEADERS_DEADLINE.as_secs(),
                self.total
            ));
        }
        if self.said.elapsed() < PROGRESS_EVERY {
            return Ok(None);
        }
        self.said = Instant::now();
        Ok(Some(format!(
            "vramfit: {repo}: {done} of {} safetensors headers read ({} s)",
            self.total,
            took.as_secs()
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
    fn an_index_of_too_many_files_is_refused() {
        assert!(check_shards("a/b", MAX_SHARDS).is_ok());
        assert!(check_shards("a/b", MAX_SHARDS + 1).is_err());
    }
}
