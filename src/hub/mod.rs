//! Which architecture a model name means, and where that answer came from: the run file's own
//! `config.json`, the local Hugging Face cache, the built-in catalog, or the Hugging Face Hub
//! (fetched into the cache, unless offline), in that order.

pub mod bounds;
pub mod cache;
pub mod fetch;
pub mod online;
pub mod remote;
pub mod safetensors;
mod url_path;

use crate::model::arch::Arch;
use crate::model::catalog::{self, ImpliedQuant};
use crate::model::config_json;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where a model's architecture was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelSource {
    /// `[vramfit] model_config`
    Config { path: PathBuf },
    /// a snapshot in the local Hugging Face cache
    Cache {
        repo: String,
        revision: String,
        path: PathBuf,
    },
    /// vramfit's built-in catalog
    Catalog { id: String },
    /// fetched from the Hugging Face Hub into the local cache just now (`path`: its config.json
    /// there); the next run finds it in the cache
    Hub {
        repo: String,
        revision: String,
        path: PathBuf,
    },
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Config { path } => write!(f, "config.json {}", path.display()),
            ModelSource::Cache { repo, revision, .. } => {
                let short = revision.get(..12).unwrap_or(revision);
                write!(f, "Hugging Face cache, {repo} @ {short}")
            }
            ModelSource::Catalog { id } => write!(f, "built-in catalog, {id}"),
            ModelSource::Hub { repo, revision, .. } => {
                let short = revision.get(..12).unwrap_or(revision);
                write!(
                    f,
                    "Hugging Face Hub, {repo} @ {short} (fetched into the Hugging Face cache)"
                )
            }
        }
    }
}

/// A model name resolved to its architecture.
pub struct Resolved {
    pub arch: Arch,
    pub quant: ImpliedQuant,
    pub source: ModelSource,
    /// what the snapshot's safetensors headers say: for a cache hit on the repository named
    /// (not a base model standing in for a re-upload) whose snapshot has them
    pub weights: Option<safetensors::WeightsOnDisk>,
}

/// Resolves `name`: `model_config` when the file names one, else the Hugging Face cache at
/// `cache` (see `cache::cache_dir`), else the catalog, else the Hub when the program allows it
/// (`online::current`). `None` when none knows it. A cache hit also reads its snapshot's
/// safetensors headers (`safetensors::read_snapshot`).
pub fn resolve(
    name: &str,
    model_config: Option<&Path>,
    cache: Option<&Path>,
) -> Result<Option<Resolved>, String> {
    resolve_with(name, model_config, cache, &online::current())
}

/// `resolve`, asking the Hub as `access` says.
pub fn resolve_with(
    name: &str,
    model_config: Option<&Path>,
    cache: Option<&Path>,
    access: &online::Access,
) -> Result<Option<Resolved>, String> {
    if let Some(found) = resolve_offline(name, model_config, cache)? {
        return Ok(Some(found));
    }
    match access {
        online::Access::Online(hub) if fetch::is_repo_id(name) => {
            from_hub(hub, name, cache).map(Some)
        }
        _ => Ok(None),
    }
}

/// Why `name` would not be looked up on the Hub under `access`; `None` when it would be.
pub fn not_on_the_hub(name: &str, access: &online::Access) -> Option<String> {
    match access {
        online::Access::Offline(why) => {
            let allow = if why.starts_with("HF_HUB_OFFLINE") {
                "unset it"
            } else {
                "drop it"
            };
            Some(format!(
                "did not look on the Hugging Face Hub ({why}): {allow} to let vramfit fetch its config.json"
            ))
        }
        online::Access::Online(_) if !fetch::is_repo_id(name) => {
            Some("not a Hugging Face Hub repository name (org/name)".into())
        }
        online::Access::Online(_) => None,
    }
}

/// Fetches `name` into the cache, then reads it there as the next run will.
fn from_hub(hub: &online::Hub, name: &str, cache: Option<&Path>) -> Result<Resolved, String> {
    let cache = cache.ok_or_else(|| {
        format!("no Hugging Face cache folder to fetch {name} into: set HF_HUB_CACHE or HF_HOME")
    })?;
    let fetched = fetch::fetch(hub, cache, name)?;
    let found = resolve_offline(&fetched.repo, None, Some(cache))?
        .filter(|r| matches!(r.source, ModelSource::Cache { .. }))
        .ok_or_else(|| {
            format!(
                "{} was fetched into {}, but is not found there",
                fetched.repo,
                fetched.snapshot.display()
            )
        })?;
    Ok(Resolved {
        source: ModelSource::Hub {
            repo: fetched.repo,
            revision: fetched.revision,
            path: fetched.snapshot.join("config.json"),
        },
        ..found
    })
}

/// Steps 1 to 3: `model_config`, the cache, the catalog.
fn resolve_offline(
    name: &str,
    model_config: Option<&Path>,
    cache: Option<&Path>,
) -> Result<Option<Resolved>, String> {
    if let Some(path) = model_config {
        let arch = config_json::load(path).map_err(|e| e.to_string())?;
        return Ok(Some(Resolved {
            arch,
            quant: ImpliedQuant::None,
            source: ModelSource::Config {
                path: path.to_path_buf(),
            },
            weights: None,
        }));
    }
    if let Some(found) = cache.and_then(|c| cache::find(c, name)) {
        let mut arch = config_json::load(&found.config).map_err(|e| e.to_string())?;
        arch.name = found.repo.clone();
        // a base model's weights are not its re-upload's (`-bnb-4bit` packs them)
        let weights = match found.config.parent() {
            Some(snapshot) if found.repo.eq_ignore_ascii_case(name) => {
                safetensors::read_snapshot(snapshot).map_err(|e| {
                    format!(
                        "the weights of {} in the Hugging Face cache: {e}",
                        found.repo
                    )
                })?
            }
            _ => None,
        };
        return Ok(Some(Resolved {
            arch,
            quant: catalog::implied_quant(name),
            weights,
            source: ModelSource::Cache {
                repo: found.repo,
                revision: found.revision,
                path: found.config,
            },
        }));
    }
    Ok(catalog::find(name).map(|found| Resolved {
        arch: found.arch,
        quant: found.quant,
        source: ModelSource::Catalog {
            id: found.id.to_string(),
        },
        weights: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes Qwen3-4B-Instruct-2507's config.json (its shape: 36 layers, hidden 2560, 262144
    /// positions) into a cache laid out as huggingface_hub lays it out.
    fn cache_with_qwen3_2507() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let snap = dir
            .path()
            .join("models--Qwen--Qwen3-4B-Instruct-2507/snapshots/cdbee75f17c01a7cc42f958dc650907174af0554");
        std::fs::create_dir_all(&snap).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/configs/qwen3-4b-instruct-2507.json");
        std::fs::copy(fixture, snap.join("config.json")).unwrap();
        dir
    }

    #[test]
    fn the_cache_answers_before_the_catalog() {
        let cache = cache_with_qwen3_2507();
        let r = resolve("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
            .unwrap()
            .unwrap();
        assert!(
            matches!(r.source, ModelSource::Cache { ref repo, .. } if repo == "Qwen/Qwen3-4B-Instruct-2507")
        );
        assert_eq!(
            (r.arch.layers, r.arch.hidden, r.arch.max_position),
            (36, 2560, 262_144)
        );
        // without the cache the catalog does not know it (its Qwen3-4B has 40960 positions)
        assert!(
            resolve("Qwen/Qwen3-4B-Instruct-2507", None, None)
                .unwrap()
                .is_none()
        );
        let catalog = resolve("Qwen/Qwen3-4B", None, Some(cache.path()))
            .unwrap()
            .unwrap();
        assert_eq!(
            catalog.source,
            ModelSource::Catalog {
                id: "Qwen/Qwen3-4B".into()
            }
        );
        // a snapshot with config.json alone has no weights to read
        assert_eq!(r.weights, None);
        assert_eq!(catalog.weights, None);
    }

    fn snapshot() -> &'static str {
        "models--Qwen--Qwen3-4B-Instruct-2507/snapshots/cdbee75f17c01a7cc42f958dc650907174af0554"
    }

    #[test]
    fn a_cache_hit_reads_its_safetensors_headers() {
        let cache = cache_with_qwen3_2507();
        let snap = cache.path().join(snapshot());
        let (a, b) = (
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        );
        let index = serde_json::json!({"weight_map": {"embed.weight": a, "norm.weight": b}});
        safetensors::tests::write_linked(
            &snap,
            &[
                (
                    a,
                    &safetensors::tests::file(&[("embed.weight", "BF16", &[10, 4])]),
                ),
                (
                    b,
                    &safetensors::tests::file(&[("norm.weight", "F32", &[4])]),
                ),
                (safetensors::INDEX_FILE, index.to_string().as_bytes()),
            ],
        );
        let r = resolve("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
            .unwrap()
            .unwrap();
        let w = r.weights.unwrap();
        assert_eq!((w.files, w.tensors, w.bytes, w.parameters), (2, 2, 96, 44));
        // a re-upload's name finds the base model's architecture, not its weights
        let r = resolve(
            "unsloth/Qwen3-4B-Instruct-2507-bnb-4bit",
            None,
            Some(cache.path()),
        )
        .unwrap()
        .unwrap();
        assert!(matches!(r.source, ModelSource::Cache { .. }));
        assert_eq!(r.weights, None);
    }

    #[test]
    fn a_broken_safetensors_file_names_the_model_and_the_file() {
        let cache = cache_with_qwen3_2507();
        let snap = cache.path().join(snapshot());
        std::fs::write(snap.join("model.safetensors"), 1u64.to_le_bytes()).unwrap();
        let err = resolve("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
            .err()
            .unwrap();
        assert!(err.contains("Qwen/Qwen3-4B-Instruct-2507"), "{err}");
        assert!(err.contains("model.safetensors: header length 1"), "{err}");
    }
}
