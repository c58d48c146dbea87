//! The presets shipped inside the binary (one per VRAM tier), so `--preset 24gb` works anywhere.

use crate::config::{LoadError, RunFile};

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

pub fn names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(n, _)| *n).collect()
}

/// The user's own presets folder: `<config dir>/vramfit/presets` (e.g. `~/.config/vramfit/presets`).
pub fn user_dir() -> Option<std::path::PathBuf> {
    directories::ProjectDirs::from("", "", "vramfit").map(|d| d.config_dir().join("presets"))
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

/// The largest built-in tier whose capacity fits in `capacity` bytes (the smallest tier when
/// none does).
pub fn largest_tier_within(capacity: u64) -> Option<&'static str> {
    let mut tiers: Vec<(u64, &'static str)> = BUILT_IN
        .iter()
        .filter_map(|(name, text)| {
            let file = crate::config::parse(text, name, None).ok()?;
            Some((file.gpu_memory?, *name))
        })
        .collect();
    tiers.sort();
    let within = tiers.iter().rev().find(|(bytes, _)| *bytes <= capacity);
    within.or(tiers.first()).map(|(_, name)| *name)
}

/// Where a preset's text lives.
#[derive(Debug, Clone, PartialEq)]
pub enum PresetSource {
    BuiltIn(&'static str),
    User(std::path::PathBuf),
}

impl PresetSource {
    pub fn load(&self, name: &str) -> Result<RunFile, LoadError> {
        match self {
            PresetSource::BuiltIn(text) => crate::config::parse(text, name, None),
            PresetSource::User(path) => crate::config::load(path),
        }
    }
}

/// Every preset by name, built-in first then the user's ("name (yours)"), without reading them.
pub fn list() -> Vec<(String, PresetSource)> {
    let built_in = BUILT_IN
        .iter()
        .map(|(name, text)| (name.to_string(), PresetSource::BuiltIn(text)));
    let user = user_presets()
        .into_iter()
        .map(|(name, path)| (format!("{name} (yours)"), PresetSource::User(path)));
    built_in.chain(user).collect()
}

/// Every preset by name, loaded.
pub fn all() -> Vec<(String, Result<RunFile, LoadError>)> {
    list()
        .into_iter()
        .map(|(name, source)| {
            let loaded = source.load(&name);
            (name, loaded)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::units::GIB;

    #[test]
    fn the_largest_tier_the_gpu_holds_is_chosen() {
        assert_eq!(largest_tier_within(150_754_820_096), Some("141gb"));
        assert_eq!(largest_tier_within(24 * GIB), Some("24gb"));
        assert_eq!(largest_tier_within(23 * GIB), Some("22gib"));
        assert_eq!(largest_tier_within(20 * GIB), Some("16gb"));
        assert_eq!(largest_tier_within(6 * GIB), Some("8gb"));
    }

    #[test]
    fn every_built_in_preset_loads_and_fits_its_tier() {
        for (name, text) in BUILT_IN {
            let file = crate::config::parse(text, name, None).unwrap();
            let capacity = file.gpu_memory.unwrap();
            let gpu = crate::model::estimate::GpuBudget {
                capacity,
                used_by_others: 0,
            };
            let est = crate::model::estimate::estimate(&file.run, gpu);
            assert!(
                est.total_bytes as f64 <= 0.95 * capacity as f64,
                "{name}: {} of {capacity}",
                est.total_bytes
            );
            assert!(est.warnings.is_empty(), "{name}: {:?}", est.warnings);
        }
    }
}
