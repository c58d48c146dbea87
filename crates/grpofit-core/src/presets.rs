//! The presets shipped inside the binary (one per VRAM tier), so `--preset 24gb` works anywhere.

use crate::config::{LoadError, RunFile};
use crate::fit::{DEFAULT_HEADROOM, fits_with_headroom};
use crate::memory::estimate::{GpuBudget, estimate};
use crate::resolve::ModelResolver;

pub const BUILT_IN: &[(&str, &str)] = &[
    ("8gb", include_str!("../presets/8gb.toml")),
    ("12gb", include_str!("../presets/12gb.toml")),
    ("16gb", include_str!("../presets/16gb.toml")),
    ("22gib", include_str!("../presets/22gib.toml")),
    ("24gb", include_str!("../presets/24gb.toml")),
    ("48gb", include_str!("../presets/48gb.toml")),
    ("80gb", include_str!("../presets/80gb.toml")),
    ("141gb", include_str!("../presets/141gb.toml")),
];

pub fn built_in(name: &str) -> Option<&'static str> {
    let wanted = name.to_ascii_lowercase();
    BUILT_IN
        .iter()
        .find(|(n, _)| *n == wanted)
        .map(|(_, text)| *text)
}

/// Whether `name` is a built-in preset's exact name.
fn built_in_name(name: &str) -> bool {
    BUILT_IN.iter().any(|(n, _)| *n == name)
}

pub fn names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(n, _)| *n).collect()
}

/// The environment variable that moves grpofit's config folder (tests, a shared machine).
pub const CONFIG_DIR_VARIABLE: &str = "GRPOFIT_CONFIG_DIR";

/// grpofit's config folder: `$GRPOFIT_CONFIG_DIR` when set, else `<config dir>/grpofit`
/// (e.g. `~/.config/grpofit`).
pub fn config_dir() -> Option<std::path::PathBuf> {
    match std::env::var_os(CONFIG_DIR_VARIABLE) {
        Some(dir) if !dir.is_empty() => Some(dir.into()),
        _ => directories::ProjectDirs::from("", "", "grpofit").map(|d| d.config_dir().into()),
    }
}

/// The user's own presets folder: `<config dir>/grpofit/presets` (e.g. `~/.config/grpofit/presets`).
pub fn user_dir() -> Option<std::path::PathBuf> {
    config_dir().map(|d| d.join("presets"))
}

/// The user's presets, by file stem, sorted.
pub fn user_presets() -> Vec<(String, std::path::PathBuf)> {
    let Some(dir) = user_dir() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, std::path::PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p)))
        .collect();
    found.sort();
    found
}

/// The preset used when neither a GPU nor a capacity chooses one.
pub const DEFAULT: &str = "24gb";

/// The built-in tier to start from on a GPU of `capacity` bytes (CUDA's total): the largest
/// tier whose run fits it with the fit's default headroom and a vLLM that starts, and whether
/// one does (when none does, the smallest tier). Chosen by estimate rather than by the tier's
/// nominal size, which a card's CUDA total falls short of (a "24 GB" RTX 4090 has 23.64 GiB).
pub fn tier_for(capacity: u64, models: &dyn ModelResolver) -> (&'static str, bool) {
    let gpu = GpuBudget {
        capacity,
        used_by_others: 0,
        context: None,
    };
    let mut tiers: Vec<(u64, &'static str, RunFile)> = BUILT_IN
        .iter()
        .filter_map(|(name, text)| {
            let file = crate::config::parse(text, name, None, models).ok()?;
            Some((file.gpu_memory?, *name, file))
        })
        .collect();
    tiers.sort_by_key(|(bytes, _, _)| *bytes);
    let fitting = tiers
        .iter()
        .rev()
        .find(|(_, _, file)| fits_with_headroom(&estimate(&file.run, gpu), DEFAULT_HEADROOM));
    match (fitting, tiers.first()) {
        (Some((_, name, _)), _) => (name, true),
        (None, Some((_, name, _))) => (name, false),
        (None, None) => (DEFAULT, false),
    }
}

/// Where a preset's text lives.
#[derive(Debug, Clone, PartialEq)]
pub enum PresetSource {
    BuiltIn(&'static str),
    User(std::path::PathBuf),
}

impl PresetSource {
    /// The preset's run; `models` looks its model name up.
    pub fn load(&self, name: &str, models: &dyn ModelResolver) -> Result<RunFile, LoadError> {
        match self {
            PresetSource::BuiltIn(text) => crate::config::parse(text, name, None, models),
            PresetSource::User(path) => crate::config::load(path, models),
        }
    }
}

/// Every preset by name, built-in first then the user's ("name (yours)"), without reading them.
/// A user's preset named as a built-in one replaces it (`--preset NAME` loads the user's), and
/// its name says so.
pub fn list() -> Vec<(String, PresetSource)> {
    let user = user_presets();
    let shadowed = |name: &str| user.iter().any(|(n, _)| n == name);
    let built_in = BUILT_IN
        .iter()
        .filter(|(name, _)| !shadowed(name))
        .map(|(name, text)| (name.to_string(), PresetSource::BuiltIn(text)));
    let user = user.iter().map(|(name, path)| {
        let mark = if built_in_name(name) {
            "yours, replaces the built-in"
        } else {
            "yours"
        };
        (format!("{name} ({mark})"), PresetSource::User(path.clone()))
    });
    built_in.chain(user).collect()
}

/// Every preset by name, loaded.
pub fn all(models: &dyn ModelResolver) -> Vec<(String, Result<RunFile, LoadError>)> {
    list()
        .into_iter()
        .map(|(name, source)| {
            let loaded = source.load(&name, models);
            (name, loaded)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::GIB;

    #[test]
    fn the_largest_tier_that_fits_the_gpu_is_chosen() {
        // CUDA's totals as torch reports them: H200, A100 80 GB, RTX 4090
        assert_eq!(
            tier_for(150_109_880_320, &crate::resolve::Offline::default()),
            ("141gb", true)
        );
        assert_eq!(
            tier_for(85_024_112_640, &crate::resolve::Offline::default()),
            ("80gb", true)
        );
        assert_eq!(
            tier_for(25_377_898_496, &crate::resolve::Offline::default()),
            ("24gb", true)
        );
        // an L4 runs the 24 GB tier's 3B bf16 run; a T4 the Llama 3.1 8B 4-bit notebook run
        assert_eq!(
            tier_for(23_795_073_024, &crate::resolve::Offline::default()),
            ("24gb", true)
        );
        assert_eq!(
            tier_for(15_828_320_256, &crate::resolve::Offline::default()),
            ("22gib", true)
        );
        assert_eq!(
            tier_for(8 * GIB, &crate::resolve::Offline::default()),
            ("16gb", true)
        );
        assert_eq!(
            tier_for(GIB, &crate::resolve::Offline::default()),
            ("8gb", false)
        );
    }

    #[test]
    fn every_built_in_preset_loads_and_fits_its_tier() {
        for (name, text) in BUILT_IN {
            let file = crate::config::parse(text, name, None, &crate::resolve::Offline::from_env())
                .unwrap();
            let capacity = file.gpu_memory.unwrap();
            let gpu = crate::memory::estimate::GpuBudget {
                capacity,
                used_by_others: 0,
                context: None,
            };
            let est = crate::memory::estimate::estimate(&file.run, gpu);
            assert!(
                est.total_bytes as f64 <= 0.95 * capacity as f64,
                "{name}: {} of {capacity}",
                est.total_bytes
            );
            assert!(est.warnings.is_empty(), "{name}: {:?}", est.warnings);
        }
    }
}
