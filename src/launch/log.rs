//! The run log `grpofit run` writes: JSON lines appended to one file, which the callback in the
//! training process appends to as well (`GRPOFIT_RUN_LOG`). Each line is written whole in one
//! `write` to a file opened for appending, so lines from both never interleave mid-line
//! (O_APPEND, open(2)).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// How many runs started in one second get a dated log of their own before one is asked to
/// name it (`--log`): a launcher starting one run per GPU of an 8-GPU node, many times over.
const MAX_SAME_SECOND: u32 = 1000;

pub(super) struct RunLog {
    pub path: PathBuf,
    file: Mutex<File>,
    /// whether this run made the file (only then is an empty one removed)
    created: bool,
    /// the file's length when opened: where this run's lines begin (`--append` keeps others)
    pub begins: u64,
}

impl RunLog {
    /// Opens `path` for appending. A log already there is refused unless `append`: one run per
    /// log, so that `check` never mixes two runs' steps.
    pub(super) fn open(path: &Path, append: bool) -> Result<RunLog, String> {
        let shown = path.display();
        let created = std::fs::symlink_metadata(path).is_err();
        if !created && !append {
            return Err(format!(
                "{shown}: a run log is there already: name another --log, or pass --append to add this run after it (`check` reads a log's last run)"
            ));
        }
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(format!("--log {shown} is a folder: name a file"));
        }
        let file = OpenOptions::new()
            .create_new(created)
            .append(true)
            .open(path)
            .map_err(|e| format!("{shown}: cannot write the run log: {e}"))?;
        let begins = file.metadata().map_or(0, |m| m.len());
        Ok(RunLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            created,
            begins,
        })
    }

    /// A new log in `dir` named for `now`: `grpofit-run-YYYYMMDD-HHMMSS.jsonl`, else, when runs
    /// started in the same second took that name, `grpofit-run-YYYYMMDD-HHMMSS-2.jsonl`, `-3`...
    /// Each name is created exclusively (O_CREAT|O_EXCL), so two runs never share a log and the
    /// glob `grpofit-run-YYYYMMDD-HHMMSS*.jsonl` still finds them all.
    pub(super) fn open_dated(dir: &Path, now: SystemTime) -> Result<RunLog, String> {
        let first = dated_name(now);
        let stem = first.trim_end_matches(".jsonl");
        let mut last = None;
        for n in 1..=MAX_SAME_SECOND {
            let name = if n == 1 {
                first.clone()
            } else {
                format!("{stem}-{n}.jsonl")
            };
            let path = dir.join(name);
            match OpenOptions::new().create_new(true).append(true).open(&path) {
                Ok(file) => {
                    return Ok(RunLog {
                        path,
                        file: Mutex::new(file),
                        created: true,
                        begins: 0,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(path),
                Err(e) => {
                    return Err(format!("{}: cannot write the run log: {e}", path.display()));
                }
            }
        }
        Err(format!(
            "{}: {MAX_SAME_SECOND} run logs of this second are there already: name one with --log",
            last.map_or_else(|| dir.display().to_string(), |p| p.display().to_string())
        ))
    }

    /// The log's descriptor, open for appending, for the watchdog (watchdog.rs) to write its
    /// exit line through should grpofit be killed.
    #[cfg(unix)]
    pub(super) fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_raw_fd()
    }

    /// Takes this run's lines back (the command could not start): the file as it was when
    /// opened, removed when this run made it.
    pub(super) fn undo(&self) {
        let file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = file.set_len(self.begins);
        drop(file);
        self.remove_if_empty();
    }

    /// Removes the file when this run made it and nothing was written to it (the command
    /// could not start).
    pub(super) fn remove_if_empty(&self) {
        if self.created && std::fs::metadata(&self.path).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Appends one record; an error is returned for the caller to say once. A record that
    /// could be written only in part (a full disk) is cut off again, so that the log never ends
    /// in half a line that the next one would run into.
    pub(super) fn write(&self, record: &serde_json::Value) -> std::io::Result<()> {
        let line = format!("{record}\n");
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = file.metadata().map(|m| m.len());
        file.write_all(line.as_bytes()).inspect_err(|_| {
            if let Ok(before) = before {
                let _ = file.set_len(before);
            }
        })
    }
}

/// How many of the lines written to the log at `path` from byte `from` on are the callback's
/// (`start` and `step`: examples/grpofit_callback.py); 0 also when the file cannot be read.
pub(super) fn callback_lines(path: &Path, from: u64) -> usize {
    let Ok(text) = std::fs::read(path) else {
        return 0;
    };
    let ours = text
        .get(usize::try_from(from).unwrap_or(0)..)
        .unwrap_or_default();
    String::from_utf8_lossy(ours)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| matches!(v["kind"].as_str(), Some("start" | "step")))
        .count()
}

/// `grpofit-run-YYYYMMDD-HHMMSS.jsonl` for the moment `now` (UTC).
pub(super) fn dated_name(now: SystemTime) -> String {
    let secs = grpofit_core::dates::unix_seconds(now);
    let (y, m, d) = grpofit_core::dates::civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "grpofit-run-{y:04}{m:02}{d:02}-{:02}{:02}{:02}.jsonl",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn runs_in_the_same_second_get_logs_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let t = UNIX_EPOCH + Duration::from_secs(1_709_211_909);
        let names: Vec<String> = (0..4)
            .map(|_| {
                let log = RunLog::open_dated(dir.path(), t).unwrap();
                log.path.file_name().unwrap().to_string_lossy().into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "grpofit-run-20240229-130509.jsonl",
                "grpofit-run-20240229-130509-2.jsonl",
                "grpofit-run-20240229-130509-3.jsonl",
                "grpofit-run-20240229-130509-4.jsonl"
            ]
        );
    }

    #[test]
    fn names_the_file_by_the_utc_date_and_time() {
        assert_eq!(dated_name(UNIX_EPOCH), "grpofit-run-19700101-000000.jsonl");
        // 2024-02-29 13:05:09 UTC: a leap day
        let t = UNIX_EPOCH + Duration::from_secs(1_709_211_909);
        assert_eq!(dated_name(t), "grpofit-run-20240229-130509.jsonl");
    }
}
