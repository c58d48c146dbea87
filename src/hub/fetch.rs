//! Brings what grpofit reads of a model from the Hub into the local Hugging Face cache, in the
//! cache's own layout (huggingface_hub `file_download.py`): `models--<org>--<name>/refs/main`
//! holds the commit, `models--<org>--<name>/snapshots/<commit>/` the files. huggingface_hub
//! itself writes plain files there where links are unavailable (Windows without developer
//! mode), so plain files keep the cache sound for it and for transformers.
//!
//! What is fetched: `config.json`, `model.safetensors.index.json` when there is one, and each
//! safetensors file's first bytes only (its length and JSON header), kept as
//! `<file>.grpofit-header` (`safetensors::HEADER_ONLY_SUFFIX`), never under the weights' own
//! name. Everything is fetched before anything is written, and `config.json` and `refs/main`
//! are written last, so an interrupted fetch leaves nothing the cache lookup would take for a
//! snapshot.

use super::online::Hub;
use super::remote::Failure;
use grpofit_core::arch::catalog;
use grpofit_core::resolve::safetensors::{self, HEADER_ONLY_SUFFIX, INDEX_FILE, SINGLE_FILE};
use std::path::{Path, PathBuf};

/// A model fetched into the cache.
pub struct Fetched {
    /// the repository as the Hub spells it
    pub repo: String,
    /// the commit `main` pointed at
    pub revision: String,
    pub snapshot: PathBuf,
}

/// Whether `name` can be a Hub repository id: `name` or `org/name`, of letters, digits, `-`,
/// `_` and `.`, without `--` or `..`, at most 96 characters (huggingface_hub
/// `validate_repo_id`). Anything else is never sent to the Hub nor made a folder.
pub fn is_repo_id(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    name.len() <= 96
        && parts.len() <= 2
        && !name.contains("--")
        && !name.contains("..")
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with(['-', '.'])
                && !p.ends_with(['-', '.'])
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// The repository's folder in the cache (huggingface_hub `repo_folder_name`).
pub fn repo_folder(cache: &Path, repo: &str) -> PathBuf {
    cache.join(format!("models--{}", repo.replace('/', "--")))
}

/// Fetches `repo`'s config.json and safetensors headers into `cache`, saying so through `hub`.
pub fn fetch(hub: &Hub, cache: &Path, repo: &str) -> Result<Fetched, String> {
    let mut clock = super::bounds::Headers::start(super::bounds::deadline()?);
    let remote = &hub.remote.until(clock.ends_at());
    (hub.say)(&format!(
        "grpofit: fetching config.json of {repo} from {} (HF_HUB_OFFLINE=1 or --offline to stop)",
        remote.endpoint()
    ));
    let asked = repo;
    let (repo, revision) = remote.model_info(repo).map_err(|e| match e.failure {
        Failure::NoSuchModel { .. } => format!(
            "{e}; nor is it in the catalog (closest: {})",
            catalog::closest(asked, 3).join(", ")
        ),
        _ => clock.explain(asked, 0, e.to_string()),
    })?;
    let config = remote
        .file(&repo, &revision, "config.json")
        .map_err(|e| clock.explain(&repo, 0, e.to_string()))?
        .ok_or_else(|| format!("{repo} on the Hub has no config.json at {revision}"))?;
    check_json(&config, &repo, "config.json")?;
    let mut files = vec![];
    let weights = match remote
        .file(&repo, &revision, INDEX_FILE)
        .map_err(|e| clock.explain(&repo, 0, e.to_string()))?
    {
        Some(index) => {
            let shards = safetensors::index_files(&index)
                .map_err(|p| format!("{repo}'s {INDEX_FILE} from the Hub: {p}"))?;
            files.push((INDEX_FILE.to_string(), index));
            shards
        }
        None => vec![SINGLE_FILE.to_string()],
    };
    super::bounds::check_shards(&repo, weights.len())?;
    (hub.say)(&format!(
        "grpofit: reading the safetensors headers of {repo} ({} file{}: the first bytes of each, not the weights)",
        weights.len(),
        if weights.len() == 1 { "" } else { "s" }
    ));
    clock.count(weights.len());
    for (done, shard) in weights.iter().enumerate() {
        if let Some(progress) = clock.next(&repo, done)? {
            (hub.say)(&progress);
        }
        match remote.safetensors_header(&repo, &revision, shard) {
            Ok(Some(header)) => files.push((format!("{shard}{HEADER_ONLY_SUFFIX}"), header)),
            // a checkpoint without safetensors (pytorch_model.bin): the formula sizes it
            Ok(None) if shard == SINGLE_FILE => {}
            Ok(None) => {
                return Err(format!(
                    "{repo}'s {INDEX_FILE} lists {shard}, which the Hub does not have at {revision}"
                ));
            }
            Err(e) => return Err(clock.explain(&repo, done, e.to_string())),
        }
    }
    files.push(("config.json".to_string(), config));
    let snapshot = write(cache, &repo, &revision, &files).map_err(|e| {
        format!(
            "cannot write {repo} into the Hugging Face cache {}: {e}",
            cache.display()
        )
    })?;
    Ok(Fetched {
        repo,
        revision,
        snapshot,
    })
}

/// A JSON object that grpofit can read as a model's architecture (`config_json::parse`, as the
/// cache lookup will read it), or an error naming the model and the file. Checked before
/// anything is written: an unusable config.json cached would fail every later offline run.
fn check_json(bytes: &[u8], repo: &str, file: &str) -> Result<(), String> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v @ serde_json::Value::Object(_)) => grpofit_core::arch::config_json::parse(&v, repo)
            .map(drop)
            .map_err(|e| format!("{repo}'s {file} from the Hub cannot be used (not cached): {e}")),
        Ok(_) => Err(format!("{repo}'s {file} from the Hub is not a JSON object")),
        Err(e) => Err(format!("{repo}'s {file} from the Hub is not JSON: {e}")),
    }
}

/// Writes `files` into the snapshot of `revision`, then `refs/main`. A file already there is
/// left as it is (the cache's own copy, or the real weights). Nothing is written through a
/// link out of the cache: a folder that leads out of it is refused, and a link planted as
/// `refs/main` is replaced by the file, never followed.
fn write(
    cache: &Path,
    repo: &str,
    revision: &str,
    files: &[(String, Vec<u8>)],
) -> std::io::Result<PathBuf> {
    let folder = repo_folder(cache, repo);
    let snapshot = folder.join("snapshots").join(revision);
    for (name, bytes) in files {
        let path = snapshot.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
            inside(cache, parent)?;
        }
        if path.symlink_metadata().is_err() {
            write_atomically(&path, bytes, false)?;
        }
    }
    let refs = folder.join("refs");
    std::fs::create_dir_all(&refs)?;
    inside(cache, &refs)?;
    grpofit_core::files::replace_entry(&refs.join("main"), revision.as_bytes())
        .map_err(std::io::Error::other)?;
    Ok(snapshot)
}

/// `Err` when the folder `dir` is, through a link, outside `cache` (both resolved).
fn inside(cache: &Path, dir: &Path) -> std::io::Result<()> {
    let root = std::fs::canonicalize(cache)?;
    let real = std::fs::canonicalize(dir)?;
    if real.starts_with(&root) {
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "{} leads out of the cache, to {}: nothing written through it",
        dir.display(),
        real.display()
    )))
}

/// Writes a file whole or not at all (`crate::files`: a random temporary name created
/// exclusively, then renamed over).
fn write_atomically(path: &Path, bytes: &[u8], overwrite: bool) -> std::io::Result<()> {
    grpofit_core::files::write_atomically(path, bytes, overwrite).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hub_repository_ids_are_looked_up() {
        for good in [
            "gpt2",
            "Qwen/Qwen3-4B-Instruct-2507",
            "openai/gpt-oss-20b",
            "a_b/c.d",
        ] {
            assert!(is_repo_id(good), "{good}");
        }
        for bad in [
            "",
            "a/b/c",
            "../etc",
            "a/..",
            "org--x/y",
            "my model",
            "/abs",
            "org/",
            "-x/y",
            &"a".repeat(97),
        ] {
            assert!(!is_repo_id(bad), "{bad}");
        }
    }

    #[test]
    fn the_folder_is_huggingface_hubs() {
        assert_eq!(
            repo_folder(Path::new("/c"), "Qwen/Qwen3-4B"),
            PathBuf::from("/c/models--Qwen--Qwen3-4B")
        );
    }
}
