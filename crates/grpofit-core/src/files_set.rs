//! A set of files written as one: into a new temporary folder beside the target, then renamed
//! into place, so that a half-written set never appears where the user looks (a failure
//! removes the temporary folder and leaves the target as it was). An existing folder is
//! refused without `force`; with it, it is replaced whole, and only when everything in it is a
//! file such a set writes (the user's other files are never dropped).
//!
//! Each file is created as `open(2)` with mode 0666 (0777 for an executable) would: the
//! process's umask applies, so a 077 umask gives `launch.sh` 0700.

use crate::files::{FileError, folder_of};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// One file of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetFile {
    pub name: String,
    pub text: String,
    /// created with the execute bits (less the umask): a script the user runs
    pub executable: bool,
}

/// Why a set was not written; the message names the folder and the file.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{}: already exists; nothing written (pass --force to replace the set)", .path.display())]
    Exists { path: PathBuf },
    #[error(
        "{}: holds {}, which no launch set writes: not replaced (export to a new folder, or move it)",
        .dir.display(), .found.display()
    )]
    Foreign { dir: PathBuf, found: PathBuf },
    #[error("{}: cannot write the set: {error}", .dir.display())]
    Io { dir: PathBuf, error: std::io::Error },
}

/// Writes `files` as the folder `dir` (see the module's comment). `known` names every file a
/// set may hold, which `force` may replace.
pub fn write_set(
    dir: &Path,
    files: &[SetFile],
    known: &[&str],
    force: bool,
) -> Result<(), SetError> {
    let io = |error| SetError::Io {
        dir: dir.to_path_buf(),
        error,
    };
    let existing = existing_entries(dir).map_err(io)?;
    if let Some(entries) = &existing {
        check_replaceable(dir, entries, known, force)?;
    }
    let (parent, name) = parent_and_name(dir).map_err(io)?;
    std::fs::create_dir_all(&parent).map_err(io)?;
    let tmp = fresh_folder(&parent, &name, "new").map_err(io)?;
    let written = fill(&tmp, files, dir).and_then(|()| {
        if let Some(old) = existing.as_ref().and_then(|_| std::fs::metadata(dir).ok()) {
            // the replaced folder's own permissions carry over
            std::fs::set_permissions(&tmp, old.permissions()).map_err(io)?;
        }
        swap_in(
            &tmp,
            dir,
            &parent,
            &name,
            existing.is_some_and(|e| !e.is_empty()),
        )
        .map_err(io)
    });
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    written
}

/// Checks before any work that `write_set` may write `dir`: it does not exist, is empty, or
/// (with `force`) holds only files named in `known`.
pub fn check_set_folder(dir: &Path, known: &[&str], force: bool) -> Result<(), SetError> {
    let entries = existing_entries(dir).map_err(|error| SetError::Io {
        dir: dir.to_path_buf(),
        error,
    })?;
    match entries {
        Some(entries) => check_replaceable(dir, &entries, known, force),
        None => Ok(()),
    }
}

/// What `dir` holds: None when it does not exist.
fn existing_entries(dir: &Path) -> std::io::Result<Option<Vec<std::fs::DirEntry>>> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
        Ok(m) if !m.is_dir() => Err(std::io::Error::other("exists and is not a folder")),
        Ok(_) => std::fs::read_dir(dir)?.collect::<Result<_, _>>().map(Some),
    }
}

/// An existing folder is replaced only with `force`, and only when all it holds is the set's.
fn check_replaceable(
    dir: &Path,
    entries: &[std::fs::DirEntry],
    known: &[&str],
    force: bool,
) -> Result<(), SetError> {
    let Some(first) = entries.first() else {
        return Ok(());
    };
    if !force {
        return Err(SetError::Exists { path: first.path() });
    }
    let foreign = entries.iter().find(|e| {
        let regular = e.file_type().is_ok_and(|t| t.is_file());
        !regular || !known.iter().any(|k| e.file_name() == **k)
    });
    match foreign {
        Some(e) => Err(SetError::Foreign {
            dir: dir.to_path_buf(),
            found: e.path(),
        }),
        None => Ok(()),
    }
}

/// The folder `dir` is made in, and its own name (`.` and `..` resolved first).
fn parent_and_name(dir: &Path) -> std::io::Result<(PathBuf, std::ffi::OsString)> {
    let full = match dir.file_name() {
        Some(_) => dir.to_path_buf(),
        None => std::fs::canonicalize(dir)?,
    };
    let name = full
        .file_name()
        .ok_or_else(|| std::io::Error::other("names no folder"))?
        .to_os_string();
    Ok((folder_of(&full), name))
}

/// A new folder in `parent`, of a random name beside `name`'s, created exclusively (0777 less
/// the umask, as `mkdir` makes it).
fn fresh_folder(parent: &Path, name: &std::ffi::OsStr, what: &str) -> std::io::Result<PathBuf> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for i in 0..100u32 {
        let path = parent.join(format!(
            ".{}.grpofit-{what}-{}-{:x}",
            name.to_string_lossy(),
            std::process::id(),
            seed.wrapping_add(i.wrapping_mul(7919))
        ));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary name"))
}

/// Writes each file into `tmp`, synced.
fn fill(tmp: &Path, files: &[SetFile], dir: &Path) -> Result<(), SetError> {
    for f in files {
        let path = tmp.join(&f.name);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // open(2) takes the umask off: 0777 & !umask for a script, 0666 & !umask otherwise
            opts.mode(if f.executable { 0o777 } else { 0o666 });
        }
        let wrote = opts.open(&path).and_then(|mut file| {
            file.write_all(f.text.as_bytes())?;
            file.sync_all()
        });
        wrote.map_err(|error| SetError::Io {
            dir: dir.join(&f.name),
            error,
        })?;
    }
    Ok(())
}

/// Renames `tmp` to `dir`; a folder there with files is moved aside first and removed once the
/// new one is in place (put back if the rename fails).
fn swap_in(
    tmp: &Path,
    dir: &Path,
    parent: &Path,
    name: &std::ffi::OsStr,
    occupied: bool,
) -> std::io::Result<()> {
    if !occupied {
        // rename(2) replaces an empty folder
        return std::fs::rename(tmp, dir);
    }
    let old = fresh_folder(parent, name, "old")?;
    std::fs::rename(dir, &old)?;
    if let Err(e) = std::fs::rename(tmp, dir) {
        let _ = std::fs::rename(&old, dir);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, executable: bool) -> SetFile {
        SetFile {
            name: name.into(),
            text: format!("{name}\n"),
            executable,
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn a_failed_write_leaves_no_folder_and_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("set");
        // the second name cannot be created: the write fails half-way
        let files = [file("a", false), file("no/such", false)];
        assert!(write_set(&dir, &files, &["a"], false).is_err());
        assert!(!dir.exists());
        assert!(names(root.path()).is_empty(), "{:?}", names(root.path()));
    }

    #[test]
    fn an_existing_set_is_refused_then_replaced_whole_with_force() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("set");
        write_set(
            &dir,
            &[file("a", false), file("b", false)],
            &["a", "b"],
            false,
        )
        .unwrap();
        let again = write_set(&dir, &[file("a", false)], &["a", "b"], false);
        assert!(matches!(again, Err(SetError::Exists { .. })));
        write_set(&dir, &[file("a", false)], &["a", "b"], true).unwrap();
        assert_eq!(names(&dir), ["a"]);
        assert_eq!(names(root.path()), ["set"]);
    }

    #[test]
    fn a_folder_with_the_users_files_is_never_replaced() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("set");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let r = write_set(&dir, &[file("a", false)], &["a"], true);
        assert!(matches!(r, Err(SetError::Foreign { .. })), "{r:?}");
        assert_eq!(names(&dir), ["notes.txt"]);
    }
}
