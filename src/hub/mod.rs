//! Which architecture a model name means, and where that answer came from: the run file's own
//! `config.json`, the local Hugging Face cache, or the built-in catalog, in that order.

pub mod cache;
pub mod safetensors;

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
        }
    }
}

/// A model name resolved to its architecture.
pub struct Resolved {
    pub arch: Arch,
    pub quant: ImpliedQuant,
    pub source: ModelSource,
}

/// Resolves `name`: `model_config` when the file names one, else the Hugging Face cache at
/// `cache` (see `cache::cache_dir`), else the catalog. `None` when none knows it.
pub fn resolve(
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
        }));
    }
    if let Some(found) = cache.and_then(|c| cache::find(c, name)) {
        let mut arch = config_json::load(&found.config).map_err(|e| e.to_string())?;
        arch.name = found.repo.clone();
        return Ok(Some(Resolved {
            arch,
            quant: implied_quant(name),
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
    }))
}

/// A 4-bit upload says so in its name (`-bnb-4bit`), as the catalog reads it.
fn implied_quant(name: &str) -> ImpliedQuant {
    if name.to_ascii_lowercase().contains("4bit") {
        ImpliedQuant::FourBit
    } else {
        ImpliedQuant::None
    }
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
    }
}
