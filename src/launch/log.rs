//! The run log `vramfit run` writes: JSON lines appended to one file, which the callback in the
//! training process appends to as well (`VRAMFIT_RUN_LOG`). Each line is written whole in one
//! `write` to a file opened for appending, so lines from both never interleave mid-line
//! (O_APPEND, open(2)).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

pub struct RunLog {
    pub path: PathBuf,
    file: Mutex<File>,
}

impl RunLog {
    /// Opens `path` for appending (created when absent).
    pub fn open(path: &Path) -> Result<RunLog, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: cannot write the run log: {e}", path.display()))?;
        Ok(RunLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Removes the file when nothing was written to it (the command could not start).
    pub fn remove_if_empty(&self) {
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Appends one record; an error is returned for the caller to say once.
    pub fn write(&self, record: &serde_json::Value) -> std::io::Result<()> {
        let line = format!("{record}\n");
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(line.as_bytes())
    }
}

/// `vramfit-run-YYYYMMDD-HHMMSS.jsonl` for the moment `now` (UTC).
pub fn dated_name(now: SystemTime) -> String {
    let secs = vramfit_core::dates::unix_seconds(now);
    let (y, m, d) = vramfit_core::dates::civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "vramfit-run-{y:04}{m:02}{d:02}-{:02}{:02}{:02}.jsonl",
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
    fn names_the_file_by_the_utc_date_and_time() {
        assert_eq!(dated_name(UNIX_EPOCH), "vramfit-run-19700101-000000.jsonl");
        // 2024-02-29 13:05:09 UTC: a leap day
        let t = UNIX_EPOCH + Duration::from_secs(1_709_211_909);
        assert_eq!(dated_name(t), "vramfit-run-20240229-130509.jsonl");
    }
}
