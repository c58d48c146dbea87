//! The local Hugging Face cache, in its own layout (huggingface_hub `file_download.py`):
//! `<cache>/models--<org>--<name>/refs/main` holds the revision, and
//! `<cache>/models--<org>--<name>/snapshots/<revision>/config.json` the file.

use crate::bounded::{self, BoundedError};
use std::path::{Path, PathBuf};

/// The most bytes read from `refs/main`: a commit id is 40 hexadecimal characters
/// (huggingface_hub `REGEX_COMMIT_HASH`), which huggingface_hub writes alone; 256 leaves room
/// for a line end and spaces and refuses a file that never ends.
pub const MAX_REF_BYTES: u64 = 256;

/// Where the cache lives: `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`
/// (huggingface_hub `constants.py`).
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
}

fn cache_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(dir) = var("HF_HUB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = var("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    let home = var("HOME").or_else(|| var("USERPROFILE"))?;
    Some(PathBuf::from(home).join(".cache/huggingface/hub"))
}

/// A model's `config.json` found in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    /// the repository that held it (`Qwen/Qwen3-4B-Instruct-2507`)
    pub repo: String,
    pub revision: String,
    pub config: PathBuf,
}

/// Suffixes Unsloth's re-uploads add to a base model's name (`-unsloth-bnb-4bit`, `-bnb-4bit`):
/// packaging, not another architecture.
const PACKAGING: [&str; 2] = ["-unsloth-bnb-4bit", "-bnb-4bit"];

/// The base model a name packages: `unsloth/Qwen3-4B-bnb-4bit` -> `Qwen3-4B`.
pub fn base_name(name: &str) -> &str {
    let bare = name.rsplit('/').next().unwrap_or(name);
    PACKAGING
        .iter()
        .find_map(|s| {
            bare.len()
                .checked_sub(s.len())
                .filter(|&at| bare.is_char_boundary(at) && bare[at..].eq_ignore_ascii_case(s))
                .map(|at| &bare[..at])
        })
        .unwrap_or(bare)
}

/// Finds `name`'s config in `cache`: the repository itself first, then, for an Unsloth
/// re-upload, the base model's repository under any organisation. A `refs/main` that is not a
/// regular file of at most `MAX_REF_BYTES` (a FIFO, `/dev/zero`, a link loop) is an error that
/// names it.
pub fn find(cache: &Path, name: &str) -> Result<Option<Cached>, BoundedError> {
    let repos = repositories(cache);
    let exact = repos
        .iter()
        .find(|(repo, _)| repo.eq_ignore_ascii_case(name));
    let base = base_name(name);
    let packaged = || {
        repos.iter().find(|(repo, _)| {
            let bare = repo.rsplit('/').next().unwrap_or(repo);
            bare.eq_ignore_ascii_case(base) || base_name(repo).eq_ignore_ascii_case(base)
        })
    };
    for (repo, dir) in exact.into_iter().chain(packaged()) {
        if let Some((revision, config)) = snapshot_config(dir)? {
            return Ok(Some(Cached {
                repo: repo.clone(),
                revision,
                config,
            }));
        }
    }
    Ok(None)
}

/// Every model repository in the cache: (`org/name`, its folder).
fn repositories(cache: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return Vec::new();
    };
    let mut repos: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let folder = e.file_name().into_string().ok()?;
            let repo = folder.strip_prefix("models--")?.replacen("--", "/", 1);
            Some((repo, e.path()))
        })
        .collect();
    repos.sort();
    repos
}

/// The `config.json` of the revision `refs/main` names, else of any snapshot that has one.
fn snapshot_config(repo: &Path) -> Result<Option<(String, PathBuf)>, BoundedError> {
    let snapshots = repo.join("snapshots");
    let main = match bounded::read_capped(&repo.join("refs/main"), MAX_REF_BYTES) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).trim().to_string())
            .filter(|r| !r.is_empty() && !r.contains(['/', '\\', '.'])),
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => None,
        Err(e) => return Err(e),
    };
    if let Some(revision) = main {
        let config = snapshots.join(&revision).join("config.json");
        if config.is_file() {
            return Ok(Some((revision, config)));
        }
    }
    let Ok(entries) = std::fs::read_dir(&snapshots) else {
        return Ok(None);
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let config = e.path().join("config.json");
            let revision = e.file_name().into_string().ok()?;
            config.is_file().then_some((revision, config))
        })
        .collect();
    found.sort();
    Ok(found.pop())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, repo: &str, revision: &str, with_ref: bool) -> PathBuf {
        let dir = root.join(format!("models--{}", repo.replacen('/', "--", 1)));
        let snap = dir.join("snapshots").join(revision);
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        if with_ref {
            std::fs::create_dir_all(dir.join("refs")).unwrap();
            std::fs::write(dir.join("refs/main"), format!("{revision}\n")).unwrap();
        }
        snap.join("config.json")
    }

    #[test]
    fn the_cache_folder_follows_huggingface_hub() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            cache_dir_from(env(&[("HF_HUB_CACHE", "/c"), ("HF_HOME", "/h")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            cache_dir_from(env(&[("HF_HOME", "/h"), ("HOME", "/u")])),
            Some(PathBuf::from("/h/hub"))
        );
        assert_eq!(
            cache_dir_from(env(&[("HOME", "/u")])),
            Some(PathBuf::from("/u/.cache/huggingface/hub"))
        );
    }

    #[test]
    fn a_repository_is_found_by_its_name_and_refs_main() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Qwen/Qwen3-4B-Instruct-2507", "aaa", false);
        let main = write(dir.path(), "Qwen/Qwen3-4B-Instruct-2507", "bbb", true);
        let found = find(dir.path(), "qwen/qwen3-4b-instruct-2507")
            .unwrap()
            .unwrap();
        assert_eq!(found.repo, "Qwen/Qwen3-4B-Instruct-2507");
        assert_eq!((found.revision.as_str(), found.config), ("bbb", main));
        assert_eq!(find(dir.path(), "Qwen/Qwen3-8B").unwrap(), None);
    }

    #[test]
    fn an_unsloth_upload_finds_its_base_model() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Qwen/Qwen3-4B", "ccc", false);
        let found = find(dir.path(), "unsloth/Qwen3-4B-unsloth-bnb-4bit")
            .unwrap()
            .unwrap();
        assert_eq!(
            (found.repo.as_str(), found.revision.as_str()),
            ("Qwen/Qwen3-4B", "ccc")
        );
        assert_eq!(base_name("unsloth/Qwen3-4B-bnb-4bit"), "Qwen3-4B");
        assert_eq!(base_name("Qwen3-4B"), "Qwen3-4B");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_dev_zero_or_a_link_loop_as_refs_main_is_an_error_at_once() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Qwen/Qwen3-4B", "ccc", true);
        let main = dir.path().join("models--Qwen--Qwen3-4B/refs/main");
        let loop_b = dir.path().join("loop_b");
        for make in [0, 1, 2, 3] {
            let _ = std::fs::remove_file(&main);
            match make {
                0 => {
                    let name = std::ffi::CString::new(main.to_str().unwrap()).unwrap();
                    // SAFETY: mkfifo(3) reads a NUL-terminated path that lives across the call
                    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
                }
                1 => std::os::unix::fs::symlink("/dev/zero", &main).unwrap(),
                2 => {
                    std::os::unix::fs::symlink(&loop_b, &main).unwrap();
                    std::os::unix::fs::symlink(&main, &loop_b).unwrap();
                }
                _ => std::fs::write(&main, "c".repeat(1 << 20)).unwrap(),
            }
            let started = std::time::Instant::now();
            let said = find(dir.path(), "Qwen/Qwen3-4B").unwrap_err().to_string();
            assert!(said.contains("refs/main"), "{said}");
            assert!(started.elapsed() < std::time::Duration::from_secs(1));
        }
    }
}
