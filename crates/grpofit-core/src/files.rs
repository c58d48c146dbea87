//! Writing the user's files: every output path is checked before any work (an existing file
//! without `--force`, a folder, a folder that cannot be written), and every write is atomic
//! without trusting the folder: the temporary file has a random name and is created
//! exclusively (`tempfile`, O_CREAT|O_EXCL, so a link planted under any name is never
//! followed), flushed, given the replaced file's permissions, then renamed over the target.
//! A symbolic link named as the output is kept: the file it points at is replaced, as the user
//! who made the link meant; a link to nothing is refused. A failed write leaves no temporary
//! file behind (the temporary file is removed when dropped), and on Linux neither does a kill
//! while the file is written (files_linux.rs: the file has no name until it is whole).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Why an output cannot be written: the path and what is wrong with it (the I/O error, when
/// there is one, is shown in the message as it always was, and so is not also a `source`).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("an empty output path: name a file")]
    EmptyPath,
    #[error("{}: cannot check: {error}", .path.display())]
    CannotCheck {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is a folder: name a file in it", .path.display())]
    IsFolder { path: PathBuf },
    #[error(
        "{} is a symbolic link to nothing that can be written ({error}): not followed; remove the link or name another file",
        .path.display()
    )]
    DanglingLink {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is a link to the folder {}: name a file", .path.display(), .target.display())]
    LinkToFolder { path: PathBuf, target: PathBuf },
    #[error("{} exists: not overwritten (use --force)", .path.display())]
    Exists { path: PathBuf },
    #[error("{} is not a regular file: not replaced", .path.display())]
    NotRegular { path: PathBuf },
    #[error("{} exists and is not a folder", .path.display())]
    NotAFolder { path: PathBuf },
    #[error("{}: cannot create it: {} is not a folder", .path.display(), .blocker.display())]
    CannotCreate { path: PathBuf, blocker: PathBuf },
    #[error("{}: the folder {} does not exist", .asked.display(), .folder.display())]
    NoFolder { asked: PathBuf, folder: PathBuf },
    #[error("{}: cannot write in the folder {}: {error}", .asked.display(), .folder.display())]
    FolderNotWritable {
        asked: PathBuf,
        folder: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot write {}: {error}", .path.display())]
    CannotWrite {
        path: PathBuf,
        error: std::io::Error,
    },
    /// one of a set of files is there already
    #[error("{}: already exists; nothing written (pass --force to replace the set)", .path.display())]
    AlreadyThere { path: PathBuf },
    #[error("{}: cannot open the lock file: {error}", .lock.display())]
    CannotOpenLock {
        lock: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: cannot lock: {error}", .lock.display())]
    CannotLock {
        lock: PathBuf,
        error: std::io::Error,
    },
}

/// Where an output goes: the file to replace (the link's target when the path is a link) and
/// the permissions it has now.
#[derive(Debug)]
pub struct Target {
    pub file: PathBuf,
    pub(crate) permissions: Option<std::fs::Permissions>,
}

/// Checks `path` as an output before any work is done: it must not be a folder, nor an
/// existing file (or link) unless `overwrite`, nor a link to nothing, and its folder must
/// exist and take a new file. `Ok` gives the file a write would replace.
pub fn check_output(path: &Path, overwrite: bool) -> Result<Target, FileError> {
    let shown = || path.to_path_buf();
    if path.as_os_str().is_empty() {
        return Err(FileError::EmptyPath);
    }
    let own = match std::fs::symlink_metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            return Err(FileError::CannotCheck {
                path: shown(),
                error,
            });
        }
    };
    let file = match &own {
        Some(m) if m.is_dir() => {
            return Err(FileError::IsFolder { path: shown() });
        }
        Some(m) if m.file_type().is_symlink() => {
            let target = std::fs::canonicalize(path).map_err(|error| FileError::DanglingLink {
                path: shown(),
                error,
            })?;
            if target.is_dir() {
                return Err(FileError::LinkToFolder {
                    path: shown(),
                    target,
                });
            }
            target
        }
        _ => path.to_path_buf(),
    };
    if own.is_some() && !overwrite {
        return Err(FileError::Exists { path: shown() });
    }
    let existing = std::fs::metadata(&file).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        return Err(FileError::NotRegular { path: shown() });
    }
    let permissions = existing.map(|m| m.permissions());
    check_folder_takes_files(&folder_of(&file), path)?;
    Ok(Target { file, permissions })
}

/// Checks `dir` as an output folder before any work: it is a folder (or does not exist yet,
/// under a folder that can take it) and takes new files.
pub fn check_output_dir(dir: &Path) -> Result<(), FileError> {
    let shown = || dir.to_path_buf();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => check_folder_takes_files(dir, dir),
        Ok(_) => Err(FileError::NotAFolder { path: shown() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // the nearest folder that exists must take the new one
            let mut up = dir.to_path_buf();
            while !up.exists() {
                match up.parent() {
                    Some(p) if !p.as_os_str().is_empty() => up = p.to_path_buf(),
                    _ => return Ok(()),
                }
            }
            if !up.is_dir() {
                return Err(FileError::CannotCreate {
                    path: shown(),
                    blocker: up,
                });
            }
            check_folder_takes_files(&up, dir)
        }
        Err(error) => Err(FileError::CannotCheck {
            path: shown(),
            error,
        }),
    }
}

/// The folder a file lives in (`.` for a bare name).
pub(crate) fn folder_of(file: &Path) -> PathBuf {
    file.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Whether a new file can be made in `dir`, tried for real (a temporary file, removed at
/// once): permission bits alone do not tell (root, ACLs, read-only mounts).
fn check_folder_takes_files(dir: &Path, asked: &Path) -> Result<(), FileError> {
    if !dir.is_dir() {
        return Err(FileError::NoFolder {
            asked: asked.to_path_buf(),
            folder: dir.to_path_buf(),
        });
    }
    #[cfg(target_os = "linux")]
    let tried = crate::files_linux::try_unnamed_in(dir);
    #[cfg(not(target_os = "linux"))]
    let tried = None;
    tried
        .unwrap_or_else(|| temp_in(dir, "check").map(drop))
        .map_err(|error| FileError::FolderNotWritable {
            asked: asked.to_path_buf(),
            folder: dir.to_path_buf(),
            error,
        })
}

/// A new temporary file in `dir`, of a random name, created exclusively.
pub(crate) fn temp_in(dir: &Path, name: &str) -> std::io::Result<tempfile::NamedTempFile> {
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        // a new file gets what `File::create` would give it (0666 less the umask), not 0600
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    builder.tempfile_in(dir)
}

/// Writes `bytes` to `path` atomically (see the module's comment); an existing file only when
/// `overwrite`. The error names the path.
pub fn write_atomically(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), FileError> {
    let target = check_output(path, overwrite)?;
    write_to(&target, bytes).map_err(|error| FileError::CannotWrite {
        path: path.to_path_buf(),
        error,
    })
}

/// Writes `bytes` over `target` (checked by `check_output`) through a temporary file.
pub fn write_to(target: &Target, bytes: &[u8]) -> std::io::Result<()> {
    let name = target
        .file
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    #[cfg(target_os = "linux")]
    if let Some(written) = crate::files_linux::write_unnamed(
        &folder_of(&target.file),
        &target.file,
        target.permissions.as_ref(),
        &name,
        bytes,
    ) {
        return written;
    }
    let mut tmp = temp_in(&folder_of(&target.file), &name)?;
    tmp.write_all(bytes)?;
    if let Some(p) = &target.permissions {
        tmp.as_file().set_permissions(p.clone())?;
    }
    tmp.as_file().sync_all()?;
    // on failure the temporary file is dropped, which removes it
    tmp.persist(&target.file).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` as a regular file named `path` in a folder grpofit keeps (the Hugging Face
/// cache's `refs/`), through a temporary file renamed over whatever entry has the name: a
/// symbolic link planted there is itself replaced, never followed, so the write cannot land
/// anywhere else on disk (issue 28: a linked `refs/main` replaced the file it pointed at).
pub fn replace_entry(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let target = Target {
        file: path.to_path_buf(),
        permissions: None,
    };
    write_to(&target, bytes).map_err(|error| FileError::CannotWrite {
        path: path.to_path_buf(),
        error,
    })
}

/// Checks, before any work, that none of `names` is in `dir` already (unless `overwrite`), so
/// that a set of files is never half replaced.
pub fn check_none_there(dir: &Path, names: &[&str], overwrite: bool) -> Result<(), FileError> {
    if overwrite {
        return Ok(());
    }
    match names
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.symlink_metadata().is_ok())
    {
        Some(path) => Err(FileError::AlreadyThere { path }),
        None => Ok(()),
    }
}

/// An exclusive lock on a file beside `path` (`.NAME.lock`), held until dropped: writers that
/// read, merge and replace `path` take it so that none loses another's update. The lock file
/// is left in place (removing it would let two writers lock two different files).
pub struct Lock {
    _file: std::fs::File,
}

/// Waits for and takes the lock of `path` (see `Lock`).
pub fn lock_beside(path: &Path) -> Result<Lock, FileError> {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let lock = folder_of(path).join(format!(".{name}.lock"));
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // a link planted under the lock's name is not followed
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = options
        .open(&lock)
        .map_err(|error| FileError::CannotOpenLock {
            lock: lock.clone(),
            error,
        })?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock(2) on a descriptor this function owns; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let error = std::io::Error::last_os_error();
            return Err(FileError::CannotLock { lock, error });
        }
    }
    Ok(Lock { _file: file })
}
