//! The built-in presets, one per VRAM tier: the top-level `presets/*.toml`, embedded in the
//! binary and handed to the core (`grpofit_core::presets::Presets`), so `--preset 24gb` works
//! anywhere. The user's folder (`~/.config/grpofit/presets`, `$GRPOFIT_CONFIG_DIR/presets`)
//! overrides a tier of the same name.

use grpofit_core::presets::{Presets, Table, user_dir};

/// The tiers, smallest first: the only place the built-in presets are named.
pub const BUILT_IN: Table = &[
    ("8gb", include_str!("../presets/8gb.toml")),
    ("12gb", include_str!("../presets/12gb.toml")),
    ("16gb", include_str!("../presets/16gb.toml")),
    ("22gib", include_str!("../presets/22gib.toml")),
    ("24gb", include_str!("../presets/24gb.toml")),
    ("48gb", include_str!("../presets/48gb.toml")),
    ("80gb", include_str!("../presets/80gb.toml")),
    ("141gb", include_str!("../presets/141gb.toml")),
];

/// The built-in tiers and the user's folder, as every command sees them.
pub fn shipped() -> Presets {
    Presets::new(BUILT_IN, user_dir())
}

/// A built-in tier's text by name (any case); the user's folder is not looked at.
pub fn built_in(name: &str) -> Option<&'static str> {
    Presets::new(BUILT_IN, None).built_in(name)
}

/// The built-in tiers' names, smallest first.
pub fn names() -> Vec<&'static str> {
    Presets::new(BUILT_IN, None).names()
}

#[cfg(test)]
mod tests {
    use super::*;
    use grpofit_core::memory::estimate::{GpuBudget, estimate};
    use grpofit_core::resolve::Offline;
    use grpofit_core::units::GIB;

    #[test]
    fn the_largest_tier_that_fits_the_gpu_is_chosen() {
        let presets = Presets::new(BUILT_IN, None);
        let tier = |bytes| presets.tier_for(bytes, &Offline::default());
        // CUDA's totals as torch reports them: H200, A100 80 GB, RTX 4090
        assert_eq!(tier(150_109_880_320), ("141gb", true));
        assert_eq!(tier(85_024_112_640), ("80gb", true));
        assert_eq!(tier(25_377_898_496), ("24gb", true));
        // an L4 runs the 24 GB tier's 3B bf16 run; a T4 the Llama 3.1 8B 4-bit notebook run
        assert_eq!(tier(23_795_073_024), ("24gb", true));
        assert_eq!(tier(15_828_320_256), ("22gib", true));
        assert_eq!(tier(8 * GIB), ("16gb", true));
        assert_eq!(tier(GIB), ("8gb", false));
    }

    #[test]
    fn every_built_in_preset_loads_and_fits_its_tier() {
        for (name, text) in BUILT_IN {
            let file = grpofit_core::config::parse(text, name, None, &Offline::from_env())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let capacity = file
                .gpu_memory
                .unwrap_or_else(|| panic!("{name}: no gpu_memory"));
            let gpu = GpuBudget {
                capacity,
                used_by_others: 0,
                context: None,
            };
            let est = estimate(&file.run, gpu);
            assert!(
                est.total_bytes as f64 <= 0.95 * capacity as f64,
                "{name}: {} of {capacity}",
                est.total_bytes
            );
            assert!(est.warnings.is_empty(), "{name}: {:?}", est.warnings);
        }
    }

    #[test]
    fn every_file_in_the_presets_folder_is_built_in() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("presets");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        files.sort();
        let mut named: Vec<String> = names().iter().map(|n| format!("{n}.toml")).collect();
        named.sort();
        assert_eq!(files, named);
    }
}
