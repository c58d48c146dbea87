//! The one question grpofit asks a Python interpreter (`sysconfig`'s `purelib`, for a shim
//! such as pyenv's that has no site-packages beside it), asked with a deadline and remembered
//! per interpreter: the answer is kept in grpofit's config folder (`python-probe.json`), keyed
//! by the interpreter's path, modification time and size, so that every later command reads
//! it instead of starting Python again.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the interpreter has to answer: `python3 -S -c "import sysconfig; ..."` through
/// pyenv's shim took 0.37 s on the 2-core build machine under load (measured 2026-12-04), a
/// bare CPython 3.12 about 20 ms; 2 s is five times the slowest seen. Past it the probe is
/// abandoned (the process group killed) and the estimate goes on without that folder.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

const PROBE: &str = "import sysconfig; print(sysconfig.get_paths()['purelib'])";
const CACHE_FILE: &str = "python-probe.json";

/// One remembered answer.
#[derive(serde::Serialize, serde::Deserialize, Clone, PartialEq, Debug)]
struct Entry {
    modified_ns: u128,
    size: u64,
    purelib: PathBuf,
}

/// `purelib` of the interpreter at `python`: the remembered answer while the interpreter is
/// unchanged, else asked (within [`PROBE_TIMEOUT`]) and remembered.
pub(crate) fn purelib(python: &Path) -> Option<PathBuf> {
    let stamp = stamp(python);
    let cache = grpofit_core::presets::config_dir().map(|d| d.join(CACHE_FILE));
    let key = python.display().to_string();
    let mut known = cache.as_deref().map(read_cache).unwrap_or_default();
    if let (Some((modified_ns, size)), Some(e)) = (stamp, known.get(&key))
        && e.modified_ns == modified_ns
        && e.size == size
        && e.purelib.is_dir()
    {
        return Some(e.purelib.clone());
    }
    let path = ask(python, PROBE_TIMEOUT)?;
    if let (Some((modified_ns, size)), Some(cache)) = (stamp, cache) {
        known.insert(
            key,
            Entry {
                modified_ns,
                size,
                purelib: path.clone(),
            },
        );
        write_cache(&cache, &known);
    }
    Some(path)
}

/// The interpreter file's modification time (ns since the epoch) and size.
fn stamp(python: &Path) -> Option<(u128, u64)> {
    let meta = std::fs::metadata(python).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some((modified.as_nanos(), meta.len()))
}

fn read_cache(path: &Path) -> BTreeMap<String, Entry> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Writes the cache whole through a temporary file renamed over it; a failure leaves the old
/// one (the cache only saves time).
fn write_cache(path: &Path, entries: &BTreeMap<String, Entry>) {
    let Some(dir) = path.parent() else { return };
    let Ok(text) = serde_json::to_string_pretty(entries) else {
        return;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let Ok(tmp) = tempfile::NamedTempFile::new_in(dir) else {
        return;
    };
    if std::fs::write(tmp.path(), text).is_ok() {
        let _ = tmp.persist(path);
    }
}

/// Runs the probe in a process group of its own, so that a shim's children die with it when
/// the deadline passes. None on a failure, a non-folder answer or the deadline.
fn ask(python: &Path, timeout: Duration) -> Option<PathBuf> {
    let mut command = Command::new(python);
    command
        .args(["-S", "-c", PROBE])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command.spawn().ok()?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if Instant::now() >= deadline => {
                kill_group(child.id());
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let path = PathBuf::from(out.trim());
    path.is_dir().then_some(path)
}

/// SIGKILL to the process group `group` (the probe's PID).
fn kill_group(group: u32) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(group)
        && pid > 0
    {
        // SAFETY: kill(2) takes plain integers and touches no memory of this process; a
        // negative pid names the process group the probe was started in.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}
