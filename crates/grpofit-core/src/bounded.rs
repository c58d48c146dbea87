//! Reading a file that may not be one: a Hugging Face cache (or a `config.json`) is anybody's
//! folder, and a FIFO there never answers a read, `/dev/zero` never ends one, and a symbolic
//! link loop never resolves. So a file is checked to be a regular file before it is opened
//! (`metadata`, which follows links and fails on a loop with ELOOP), opened with O_NONBLOCK
//! (a FIFO swapped in between the check and the open does not block the open) and checked
//! again on the descriptor, and at most a stated number of bytes is read from it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    #[error("{}: cannot read it: {error}", .path.display())]
    Io {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a regular file ({kind}): not read", .path.display())]
    NotRegular {
        path: std::path::PathBuf,
        kind: &'static str,
    },
    #[error("{}: over the {max} bytes grpofit reads of it: not read", .path.display())]
    TooLarge { path: std::path::PathBuf, max: u64 },
}

impl BoundedError {
    /// What is wrong, without the path (for errors that name the file themselves).
    pub fn reason(&self) -> String {
        match self {
            BoundedError::Io { error, .. } => error.to_string(),
            BoundedError::NotRegular { kind, .. } => format!("not a regular file ({kind})"),
            BoundedError::TooLarge { max, .. } => format!("over the {max} bytes grpofit reads"),
        }
    }

    /// The I/O error behind it, when there is one (a missing file).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            BoundedError::Io { error, .. } => Some(error.kind()),
            _ => None,
        }
    }
}

/// What kind of entry `file_type` is, in words.
fn kind(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "not a file"
    }
}

/// Opens `path` (following links) only if it is a regular file, without blocking.
pub fn open_regular(path: &Path) -> Result<File, BoundedError> {
    let io = |error| BoundedError::Io {
        path: path.to_path_buf(),
        error,
    };
    let not_regular = |m: std::fs::Metadata| BoundedError::NotRegular {
        path: path.to_path_buf(),
        kind: kind(m.file_type()),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta));
    }
    Ok(file)
}

/// The bytes of the regular file `path`, refused when there are more than `max`.
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, BoundedError> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| BoundedError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(BoundedError::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_regular_file_is_read_up_to_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refs_main");
        std::fs::write(&path, "abc").unwrap();
        assert_eq!(read_capped(&path, 3).unwrap(), b"abc");
        assert!(matches!(
            read_capped(&path, 2),
            Err(BoundedError::TooLarge { max: 2, .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_a_device_a_folder_and_a_link_loop_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) reads a NUL-terminated path that lives across the call
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let a = dir.path().join("a");
        std::os::unix::fs::symlink(dir.path().join("b"), &a).unwrap();
        std::os::unix::fs::symlink(&a, dir.path().join("b")).unwrap();
        let started = Instant::now();
        let said = |p: &Path| read_capped(p, 1 << 20).unwrap_err().to_string();
        assert!(said(&fifo).contains("a FIFO"), "{}", said(&fifo));
        assert!(said(&zero).contains("a character device"));
        assert!(said(dir.path()).contains("a folder"));
        assert!(said(&a).contains("symbolic links"), "{}", said(&a));
        assert!(said(&a).starts_with(&a.display().to_string()));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
