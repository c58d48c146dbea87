//! Which architecture a model name means, and where that answer came from: the run file's own
//! `config.json`, the local Hugging Face cache, or the built-in catalog (`Offline`). The binary
//! adds the Hugging Face Hub behind the same `ModelResolver` trait; this crate reaches no network.

pub mod cache;
pub mod safetensors;

use crate::arch::Arch;
use crate::arch::catalog::{self, ImpliedQuant};
use crate::arch::config_json::{self, ConfigJsonError};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Why a model name could not be resolved (as opposed to not being known: `Ok(None)`).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// the `config.json` named, or the cache's, cannot be used
    #[error(transparent)]
    ConfigJson(#[from] ConfigJsonError),
    /// a file of the Hugging Face cache that is not one to read (`refs/main` a FIFO, a
    /// device, a link loop, or longer than a commit id)
    #[error("the Hugging Face cache: {0}")]
    CacheFile(#[from] crate::bounded::BoundedError),
    /// the snapshot's safetensors files cannot be read (boxed, which keeps the error under
    /// clippy's `result_large_err` size)
    #[error("the weights of {repo} in the Hugging Face cache: {error}")]
    Weights {
        repo: String,
        error: Box<safetensors::SafetensorsError>,
    },
    /// the Hugging Face Hub (the binary's resolver; this crate reaches no network): what went
    /// wrong, in words
    #[error("{0}")]
    Hub(String),
}

/// Where a run file's model names are looked up. `config::parse` takes one, so that whoever
/// parses decides whether that reads the Hugging Face cache or reaches the Hub.
pub trait ModelResolver {
    /// `name`'s architecture: from `model_config` when the file names one, else wherever this
    /// resolver looks. `None` when none of its places knows the name.
    fn resolve(
        &self,
        name: &str,
        model_config: Option<&Path>,
    ) -> Result<Option<Resolved>, ResolveError>;
    /// The Hugging Face cache folder it reads, if any (named when a model is not found).
    fn cache(&self) -> Option<&Path>;
    /// Why `name` was not looked up on the Hugging Face Hub; `None` when it was.
    fn why_not_online(&self, name: &str) -> Option<String>;
}

/// Steps 1 to 3 of the resolution order: `model_config`, the Hugging Face cache, the catalog.
#[derive(Debug, Clone, Default)]
pub struct Offline {
    /// the cache folder; `None` reads the catalog alone
    pub cache: Option<PathBuf>,
}

impl Offline {
    /// The cache the environment names (`cache::cache_dir`).
    pub fn from_env() -> Offline {
        Offline {
            cache: cache::cache_dir(),
        }
    }
}

impl ModelResolver for Offline {
    fn resolve(
        &self,
        name: &str,
        model_config: Option<&Path>,
    ) -> Result<Option<Resolved>, ResolveError> {
        resolve_offline(name, model_config, self.cache.as_deref())
    }
    fn cache(&self) -> Option<&Path> {
        self.cache.as_deref()
    }
    fn why_not_online(&self, _name: &str) -> Option<String> {
        Some("did not look on the Hugging Face Hub (only the command line looks on the Hub)".into())
    }
}

/// Where a model's architecture was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelSource {
    /// `[grpofit] model_config`
    Config { path: PathBuf },
    /// a snapshot in the local Hugging Face cache
    Cache {
        repo: String,
        revision: String,
        path: PathBuf,
    },
    /// grpofit's built-in catalog
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

/// Steps 1 to 3: `model_config`, the cache, the catalog.
pub fn resolve_offline(
    name: &str,
    model_config: Option<&Path>,
    cache: Option<&Path>,
) -> Result<Option<Resolved>, ResolveError> {
    if let Some(path) = model_config {
        let arch = config_json::load(path)?;
        return Ok(Some(Resolved {
            arch,
            quant: ImpliedQuant::None,
            source: ModelSource::Config {
                path: path.to_path_buf(),
            },
            weights: None,
        }));
    }
    let found = match cache {
        Some(c) => cache::find(c, name)?,
        None => None,
    };
    if let Some(found) = found {
        let mut arch = config_json::load(&found.config)?;
        arch.name = found.repo.clone();
        // a base model's weights are not its re-upload's (`-bnb-4bit` packs them)
        let weights = match found.config.parent() {
            Some(snapshot) if found.repo.eq_ignore_ascii_case(name) => {
                safetensors::read_snapshot(snapshot).map_err(|error| ResolveError::Weights {
                    repo: found.repo.clone(),
                    error: Box::new(error),
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
            .join("../../tests/fixtures/configs/qwen3-4b-instruct-2507.json");
        std::fs::copy(fixture, snap.join("config.json")).unwrap();
        dir
    }

    #[test]
    fn the_cache_answers_before_the_catalog() {
        let cache = cache_with_qwen3_2507();
        let r = resolve_offline("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
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
            resolve_offline("Qwen/Qwen3-4B-Instruct-2507", None, None)
                .unwrap()
                .is_none()
        );
        let catalog = resolve_offline("Qwen/Qwen3-4B", None, Some(cache.path()))
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
        let r = resolve_offline("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
            .unwrap()
            .unwrap();
        let w = r.weights.unwrap();
        assert_eq!((w.files, w.tensors, w.bytes, w.parameters), (2, 2, 96, 44));
        // a re-upload's name finds the base model's architecture, not its weights
        let r = resolve_offline(
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
        let err = resolve_offline("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("Qwen/Qwen3-4B-Instruct-2507"), "{err}");
        assert!(err.contains("model.safetensors: header length 1"), "{err}");
    }
}
