//! The presets (one per VRAM tier): the built-in ones the binary embeds and hands in, so
//! `--preset 24gb` works anywhere, and the user's own folder, which overrides them.

use std::path::{Path, PathBuf};

use crate::config::{LoadError, RunFile};
use crate::fit::{DEFAULT_HEADROOM, fits_with_headroom};
use crate::memory::estimate::{GpuBudget, estimate};
use crate::resolve::ModelResolver;

/// Built-in presets, each a tier's name and its run file's TOML text. The core ships none:
/// whoever embeds them hands them in (the binary embeds the top-level `presets/*.toml`).
pub type Table = &'static [(&'static str, &'static str)];

/// The presets a command chooses from: the built-in tiers it was handed and the user's folder,
/// whose files replace a built-in tier of the same name.
#[derive(Debug, Clone)]
pub struct Presets {
    built_in: Table,
    user_dir: Option<PathBuf>,
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

/// The user's `*.toml` files in `dir`, by file stem, sorted; none when it cannot be read.
fn presets_in(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p)))
        .collect();
    found.sort();
    found
}

/// The preset used when neither a GPU nor a capacity chooses one.
pub const DEFAULT: &str = "24gb";

/// Where a preset's text lives.
#[derive(Debug, Clone, PartialEq)]
pub enum PresetSource {
    BuiltIn(&'static str),
    User(PathBuf),
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

impl Presets {
    /// The built-in tiers `built_in` and the user's folder `user_dir` (none: no user presets).
    pub fn new(built_in: Table, user_dir: Option<PathBuf>) -> Self {
        Presets { built_in, user_dir }
    }

    /// The built-in tiers, as handed in.
    pub fn table(&self) -> Table {
        self.built_in
    }

    /// A built-in preset's text by name (any case).
    pub fn built_in(&self, name: &str) -> Option<&'static str> {
        let wanted = name.to_ascii_lowercase();
        self.built_in
            .iter()
            .find(|(n, _)| *n == wanted)
            .map(|(_, text)| *text)
    }

    /// Whether `name` is a built-in preset's exact name.
    fn built_in_name(&self, name: &str) -> bool {
        self.built_in.iter().any(|(n, _)| *n == name)
    }

    /// The built-in presets' names, in the table's order.
    pub fn names(&self) -> Vec<&'static str> {
        self.built_in.iter().map(|(n, _)| *n).collect()
    }

    /// The user's own presets folder, if there is one.
    pub fn user_dir(&self) -> Option<&Path> {
        self.user_dir.as_deref()
    }

    /// The user's presets, by file stem, sorted.
    pub fn user_presets(&self) -> Vec<(String, PathBuf)> {
        self.user_dir.as_deref().map(presets_in).unwrap_or_default()
    }

    /// The built-in tier to start from on a GPU of `capacity` bytes (CUDA's total): the largest
    /// tier whose run fits it with the fit's default headroom and a vLLM that starts, and
    /// whether one does (when none does, the smallest tier). Chosen by estimate rather than by
    /// the tier's nominal size, which a card's CUDA total falls short of (a "24 GB" RTX 4090 has
    /// 23.64 GiB).
    pub fn tier_for(&self, capacity: u64, models: &dyn ModelResolver) -> (&'static str, bool) {
        let gpu = GpuBudget {
            capacity,
            used_by_others: 0,
            context: None,
        };
        let mut tiers: Vec<(u64, &'static str, RunFile)> = self
            .built_in
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

    /// Every preset by name, built-in first then the user's ("name (yours)"), without reading
    /// them. A user's preset named as a built-in one replaces it (`--preset NAME` loads the
    /// user's), and its name says so.
    pub fn list(&self) -> Vec<(String, PresetSource)> {
        let user = self.user_presets();
        let shadowed = |name: &str| user.iter().any(|(n, _)| n == name);
        let built_in = self
            .built_in
            .iter()
            .filter(|(name, _)| !shadowed(name))
            .map(|(name, text)| (name.to_string(), PresetSource::BuiltIn(text)));
        let user = user.iter().map(|(name, path)| {
            let mark = if self.built_in_name(name) {
                "yours, replaces the built-in"
            } else {
                "yours"
            };
            (format!("{name} ({mark})"), PresetSource::User(path.clone()))
        });
        built_in.chain(user).collect()
    }

    /// Every preset by name, loaded.
    pub fn all(&self, models: &dyn ModelResolver) -> Vec<(String, Result<RunFile, LoadError>)> {
        self.list()
            .into_iter()
            .map(|(name, source)| {
                let loaded = source.load(&name, models);
                (name, loaded)
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::units::GIB;

    /// A run file for the core's own tests: a 24 GB card's Unsloth run (the fixture is the
    /// core's; the shipped tiers are the binary's, in the top-level `presets/`).
    pub(crate) const RUN_24GB: &str = include_str!("../tests/fixtures/run_24gb.toml");

    /// A second tier: the fixture's run on a 14B model (29.5 GB of bf16 weights, more than a
    /// 24 GB card holds) at 80 GiB of capacity.
    fn larger_tier() -> &'static str {
        let text = RUN_24GB
            .replace(
                "gpu_memory = \"25377898496B\"",
                &format!("gpu_memory = \"{}B\"", 80 * GIB),
            )
            .replace("Qwen2.5-3B-Instruct", "Qwen2.5-14B-Instruct");
        assert!(text.contains("Qwen2.5-14B") && text.contains(&format!("{}B", 80 * GIB)));
        Box::leak(text.into_boxed_str())
    }

    fn table() -> Table {
        let big = larger_tier();
        Box::leak(Box::new([("24gb", RUN_24GB), ("80gb", big)]))
    }

    #[test]
    fn the_largest_tier_that_fits_the_gpu_is_chosen() {
        let presets = Presets::new(table(), None);
        let offline = crate::resolve::Offline::default();
        // an RTX 4090's CUDA total, as torch reports it, runs the 24 GB run
        assert_eq!(presets.tier_for(25_377_898_496, &offline), ("24gb", true));
        assert_eq!(presets.tier_for(85_024_112_640, &offline), ("80gb", true));
        // when none fits, the smallest tier, and it says so
        assert_eq!(presets.tier_for(GIB, &offline), ("24gb", false));
        // with no tier at all, the default name
        assert_eq!(
            Presets::new(&[], None).tier_for(GIB, &offline),
            (DEFAULT, false)
        );
    }

    #[test]
    fn a_user_preset_replaces_the_built_in_one_of_its_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("24gb.toml"), RUN_24GB).unwrap();
        std::fs::write(dir.path().join("mine.toml"), RUN_24GB).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a preset").unwrap();
        let presets = Presets::new(table(), Some(dir.path().into()));
        let names: Vec<String> = presets.list().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "80gb",
                "24gb (yours, replaces the built-in)",
                "mine (yours)"
            ]
        );
        assert_eq!(presets.built_in("24GB"), Some(RUN_24GB));
        assert_eq!(presets.names(), ["24gb", "80gb"]);
        let loaded = presets.all(&crate::resolve::Offline::default());
        assert!(loaded.iter().all(|(_, f)| f.is_ok()), "{loaded:?}");
        // no folder, or one that cannot be read: the built-in ones only
        let missing = Presets::new(table(), Some(dir.path().join("absent")));
        assert_eq!(missing.list().len(), 2);
    }
}
