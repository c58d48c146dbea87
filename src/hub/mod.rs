//! Which architecture a model name means, and where that answer came from: the run file's own
//! `config.json`, the local Hugging Face cache, the built-in catalog, or the Hugging Face Hub
//! (fetched into the cache, unless offline), in that order.

pub mod bounds;
pub mod fetch;
pub mod online;
pub mod remote;
mod url_path;

pub use grpofit_core::resolve::{ModelResolver, ModelSource, Resolved, cache, safetensors};
use grpofit_core::resolve::{ResolveError, resolve_offline};
use std::path::{Path, PathBuf};

/// The command line's resolver: the run file's `config.json`, the Hugging Face cache, the
/// catalog, then the Hub when `access` allows it (fetched into the cache).
pub struct HubResolver {
    pub cache: Option<PathBuf>,
    pub access: online::Access,
}

impl HubResolver {
    /// The environment's cache, and the Hub unless `offline` (`--offline`) or `HF_HUB_OFFLINE`
    /// says no; `say` tells the user what is being fetched.
    pub fn from_env(offline: bool, say: online::Say) -> HubResolver {
        HubResolver {
            cache: cache::cache_dir(),
            access: online::from_env(offline, say),
        }
    }
}

impl ModelResolver for HubResolver {
    fn resolve(
        &self,
        name: &str,
        model_config: Option<&Path>,
    ) -> Result<Option<Resolved>, ResolveError> {
        resolve_with(name, model_config, self.cache.as_deref(), &self.access)
    }
    fn cache(&self) -> Option<&Path> {
        self.cache.as_deref()
    }
    fn why_not_online(&self, name: &str) -> Option<String> {
        not_on_the_hub(name, &self.access)
    }
}

/// `resolve`, asking the Hub as `access` says.
pub fn resolve_with(
    name: &str,
    model_config: Option<&Path>,
    cache: Option<&Path>,
    access: &online::Access,
) -> Result<Option<Resolved>, ResolveError> {
    if let Some(found) = resolve_offline(name, model_config, cache)? {
        return Ok(Some(found));
    }
    match access {
        online::Access::Online(hub) if fetch::is_repo_id(name) => from_hub(hub, name, cache)
            .map(Some)
            .map_err(ResolveError::Hub),
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
                "did not look on the Hugging Face Hub ({why}): {allow} to let grpofit fetch its config.json"
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
    let found = resolve_offline(&fetched.repo, None, Some(cache))
        .map_err(|e| e.to_string())?
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
