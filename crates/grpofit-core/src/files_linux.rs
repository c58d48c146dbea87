//! On Linux the file is written with no name at all (open(2) O_TMPFILE): a kill while it is
//! written leaves nothing in the folder. It gets a random name (linkat(2), exclusive: a link
//! planted under that name makes it fail with EEXIST and another name is drawn) only once it is
//! whole and flushed, and is renamed over the target at once. A folder whose file system has no
//! O_TMPFILE (some network ones) takes the named temporary file of `files::write_to`.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;

/// Whether a file can be made in `dir`, tried with an unnamed one (nothing left in the folder
/// even by a kill); `None` when its file system makes none.
pub(crate) fn try_unnamed_in(dir: &std::path::Path) -> Option<std::io::Result<()>> {
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
    {
        Ok(_) => Some(Ok(())),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => None,
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Writes `bytes` over `file` (in the folder `dir`, with `permissions` when it had some)
/// through an unnamed file; `None` when the folder's file system cannot make one (the caller
/// falls back).
pub(crate) fn write_unnamed(
    dir: &std::path::Path,
    file_path: &std::path::Path,
    permissions: Option<&std::fs::Permissions>,
    name: &str,
    bytes: &[u8],
) -> Option<std::io::Result<()>> {
    // the unnamed file is linked through its /proc/self/fd entry
    if !std::path::Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o666)
        .open(dir)
        .ok()?;
    Some((|| {
        file.write_all(bytes)?;
        if let Some(p) = permissions {
            file.set_permissions(p.clone())?;
        }
        file.sync_all()?;
        let unnamed = std::ffi::CString::new(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&file)
        ))?;
        let named = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .make_in(dir, |path| {
                let path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
                // SAFETY: linkat(2) reads two NUL-terminated paths that live across the call
                let linked = unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        unnamed.as_ptr(),
                        libc::AT_FDCWD,
                        path.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                };
                if linked == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })?;
        // a failed rename drops `named`, which removes the name
        named.persist(file_path).map_err(|e| e.error)?;
        Ok(())
    })())
}
