//! What was appended to a file since the last look (`tail -f`, one look at a time): the screen
//! follows a run log with it. The file is opened again at each look, so a log that vanishes,
//! is cut, or is written anew is noticed rather than read from a stale handle.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The most one look reads; the rest waits for the next look. A screen reads a look whole
/// between two frames: 1 MiB keeps that short, and a log of gigabytes is read in as many looks.
pub const MOST_PER_LOOK: u64 = 1 << 20;

/// What one look found.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// the bytes written since the last look (none when nothing was)
    Appended(Vec<u8>),
    /// the file is shorter than what was read, or came back after it could not be read: it was
    /// cut or written anew, and these bytes are its start
    Restarted(Vec<u8>),
    /// the file cannot be read now: why
    Gone(String),
}

/// Why a run log cannot be followed.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    #[error("{}: cannot read: {error}", .path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: a folder, not a run log", .path.display())]
    Folder { path: PathBuf },
}

#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    /// bytes read so far
    offset: u64,
    /// the last look found no file: the next one that finds it starts over
    lost: bool,
    /// the file last read (device and inode): another one under the name (a rotation by
    /// rename) is read from its start, even when longer than what was read
    identity: Option<(u64, u64)>,
}

impl Tail {
    /// Follows `path` from its start; an error names it when it cannot be read now.
    pub fn open(path: &Path) -> Result<Tail, TailError> {
        let file = std::fs::File::open(path).map_err(|error| TailError::Unreadable {
            path: path.to_path_buf(),
            error,
        })?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(TailError::Folder {
                path: path.to_path_buf(),
            });
        }
        Ok(Tail {
            path: path.to_path_buf(),
            offset: 0,
            lost: false,
            identity: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One look: what was appended since the last.
    pub fn look(&mut self) -> Change {
        match self.read_on() {
            Ok((bytes, restarted)) => {
                // taken first: `||` would leave it set when the file was also replaced, and
                // the next look would start over again
                let lost = std::mem::take(&mut self.lost);
                let restarted = restarted || lost;
                if restarted {
                    Change::Restarted(bytes)
                } else {
                    Change::Appended(bytes)
                }
            }
            Err(e) => {
                self.offset = 0;
                self.lost = true;
                Change::Gone(format!("{}: cannot read: {e}", self.path.display()))
            }
        }
    }

    /// The bytes after `offset` (from the start when the file got shorter), and whether it did.
    fn read_on(&mut self) -> std::io::Result<(Vec<u8>, bool)> {
        let mut file = std::fs::File::open(&self.path)?;
        let meta = file.metadata()?;
        let len = meta.len();
        let identity = identity_of(&meta);
        let replaced = self.identity.is_some() && identity != self.identity;
        self.identity = identity;
        let shorter = len < self.offset || replaced;
        if shorter {
            self.offset = 0;
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.take(MOST_PER_LOOK).read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        Ok((bytes, shorter))
    }
}

/// A file's device and inode, where the platform has them.
fn identity_of(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .expect("opens");
        f.write_all(text.as_bytes()).expect("writes");
    }

    #[test]
    fn each_look_reads_what_was_appended_since_the_last() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("run.jsonl");
        assert!(
            Tail::open(&path)
                .expect_err("missing")
                .to_string()
                .contains("run.jsonl")
        );
        append(&path, "one\ntw");
        let mut tail = Tail::open(&path).expect("there");
        assert_eq!(tail.look(), Change::Appended(b"one\ntw".to_vec()));
        assert_eq!(tail.look(), Change::Appended(Vec::new()));
        append(&path, "o\n");
        assert_eq!(tail.look(), Change::Appended(b"o\n".to_vec()));
    }

    #[test]
    fn a_cut_vanished_or_rewritten_file_starts_over() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("run.jsonl");
        append(&path, "one\ntwo\n");
        let mut tail = Tail::open(&path).expect("there");
        tail.look();
        std::fs::write(&path, "x\n").expect("cut");
        assert_eq!(tail.look(), Change::Restarted(b"x\n".to_vec()));
        std::fs::remove_file(&path).expect("removed");
        assert!(matches!(tail.look(), Change::Gone(why) if why.contains("run.jsonl")));
        append(&path, "new run\n");
        assert_eq!(tail.look(), Change::Restarted(b"new run\n".to_vec()));
        assert_eq!(tail.look(), Change::Appended(Vec::new()));
    }

    #[test]
    fn a_file_renamed_over_the_followed_one_starts_over_even_when_longer() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("run.jsonl");
        append(
            &path, "one
",
        );
        let mut tail = Tail::open(&path).expect("there");
        assert_eq!(tail.look(), Change::Appended(b"one\n".to_vec()));
        let next = dir.path().join("next.jsonl");
        append(&next, "another run, longer\n");
        std::fs::rename(&next, &path).expect("renamed");
        assert_eq!(
            tail.look(),
            Change::Restarted(b"another run, longer\n".to_vec())
        );
        assert_eq!(tail.look(), Change::Appended(Vec::new()));
    }

    #[test]
    fn a_large_file_is_read_in_looks_of_at_most_the_cap() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("run.jsonl");
        // 3.5 MiB: a screen parses each look between two frames, so none is over 1 MiB
        let size = (7 << 19) + 12_345;
        std::fs::write(&path, vec![b'x'; size]).expect("written");
        let mut tail = Tail::open(&path).expect("there");
        let mut looks = Vec::new();
        loop {
            match tail.look() {
                Change::Appended(bytes) if bytes.is_empty() => break,
                Change::Appended(bytes) => looks.push(bytes.len()),
                other => panic!("{other:?}"),
            }
        }
        assert!(looks.iter().all(|n| *n <= 1 << 20), "{looks:?}");
        assert_eq!(looks.iter().sum::<usize>(), size);
        assert_eq!(looks.len(), 4, "{looks:?}");
    }
}
