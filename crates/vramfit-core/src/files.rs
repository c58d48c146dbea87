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
pub fn check_output(path: &Path, overwrite: bool) -> Result<Target, String> {
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err("an empty output path: name a file".into());
    }
    let own = match std::fs::symlink_metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{shown}: cannot check: {e}")),
    };
    let file = match &own {
        Some(m) if m.is_dir() => {
            return Err(format!("{shown} is a folder: name a file in it"));
        }
        Some(m) if m.file_type().is_symlink() => {
            let target = std::fs::canonicalize(path).map_err(|e| {
                format!("{shown} is a symbolic link to nothing that can be written ({e}): not followed; remove the link or name another file")
            })?;
            if target.is_dir() {
                return Err(format!(
                    "{shown} is a link to the folder {}: name a file",
                    target.display()
                ));
            }
            target
        }
        _ => path.to_path_buf(),
    };
    if own.is_some() && !overwrite {
        return Err(format!("{shown} exists: not overwritten (use --force)"));
    }
    let existing = std::fs::metadata(&file).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        return Err(format!("{shown} is not a regular file: not replaced"));
    }
    let permissions = existing.map(|m| m.permissions());
    check_folder_takes_files(&folder_of(&file), path)?;
    Ok(Target { file, permissions })
}

/// Checks `dir` as an output folder before any work: it is a folder (or does not exist yet,
/// under a folder that can take it) and takes new files.
pub fn check_output_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => check_folder_takes_files(dir, dir),
        Ok(_) => Err(format!("{shown} exists and is not a folder")),
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
                return Err(format!(
                    "{shown}: cannot create it: {} is not a folder",
                    up.display()
                ));
            }
            check_folder_takes_files(&up, dir)
        }
        Err(e) => Err(format!("{shown}: cannot check: {e}")),
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
fn check_folder_takes_files(dir: &Path, asked: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!(
            "{}: the folder {} does not exist",
            asked.display(),
            dir.display()
        ));
    }
    #[cfg(target_os = "linux")]
    let tried = crate::files_linux::try_unnamed_in(dir);
    #[cfg(not(target_os = "linux"))]
    let tried = None;
    tried
        .unwrap_or_else(|| temp_in(dir, "check").map(drop))
        .map_err(|e| {
            format!(
                "{}: cannot write in the folder {}: {e}",
                asked.display(),
                dir.display()
            )
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
pub fn write_atomically(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), String> {
    let target = check_output(path, overwrite)?;
    write_to(&target, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
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

/// Checks, before any work, that none of `names` is in `dir` already (unless `overwrite`), so
/// that a set of files is never half replaced.
pub fn check_none_there(dir: &Path, names: &[&str], overwrite: bool) -> Result<(), String> {
    if overwrite {
        return Ok(());
    }
    match names
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.symlink_metadata().is_ok())
    {
        Some(p) => Err(format!(
            "{}: already exists; nothing written (pass --force to replace the set)",
            p.display()
        )),
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
pub fn lock_beside(path: &Path) -> Result<Lock, String> {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let lock = folder_of(path).join(format!(".{name}.lock"));
    let shown = lock.display();
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
        .map_err(|e| format!("{shown}: cannot open the lock file: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock(2) on a descriptor this function owns; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("{shown}: cannot lock: {e}"));
        }
    }
    Ok(Lock { _file: file })
}
