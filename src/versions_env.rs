//! The trainer versions installed in the user's Python environment, read the way NVML gives the
//! GPU: the `*.dist-info/METADATA` files of the active interpreter's site-packages. No trainer
//! package is imported: the folder is found from `$VIRTUAL_ENV`, else
//! `$CONDA_PREFIX`, else the prefix of the `python3` on `PATH` (its `lib/pythonX.Y/site-packages`,
//! Debian's `dist-packages` too; for a shim such as pyenv's, the interpreter is asked for
//! `sysconfig`'s `purelib`, importing nothing else, within a deadline and once per interpreter:
//! `python_probe`).

use grpofit_core::run::versions::{Installed, Package};
use std::path::{Path, PathBuf};

/// Where the packages were looked for, and what was found there.
pub(crate) struct Environment {
    /// `$VIRTUAL_ENV`, `$CONDA_PREFIX` or `python3 on PATH`
    pub from: &'static str,
    /// the environment's prefix
    pub prefix: Option<PathBuf>,
    /// the folders searched, in order
    pub site_packages: Vec<PathBuf>,
    pub installed: Installed,
}

/// The active Python environment's trainer packages.
pub(crate) fn detect() -> Environment {
    let (from, prefix, python) = active_prefix();
    let mut site_packages = prefix.as_deref().map(site_folders).unwrap_or_default();
    if let (true, Some(python)) = (site_packages.is_empty(), python) {
        // a shim (pyenv, asdf) has no site-packages beside it: ask the interpreter
        site_packages.extend(crate::python_probe::purelib(&python));
    }
    let mut found = Vec::new();
    for p in Package::ALL {
        if let Some((version, path)) = site_packages.iter().find_map(|d| read_package(d, p)) {
            found.push((p, version, path.display().to_string()));
        }
    }
    Environment {
        from,
        prefix,
        site_packages,
        installed: Installed { found },
    }
}

/// The interpreter's prefix: `$VIRTUAL_ENV`, `$CONDA_PREFIX`, else the folder above the `bin/`
/// that holds the `python3` on `PATH` (and then that `python3`).
fn active_prefix() -> (&'static str, Option<PathBuf>, Option<PathBuf>) {
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return (
                if var == "VIRTUAL_ENV" {
                    "$VIRTUAL_ENV"
                } else {
                    "$CONDA_PREFIX"
                },
                Some(PathBuf::from(v)),
                None,
            );
        }
    }
    let python = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
    });
    // a symlinked interpreter (/usr/bin/python3 -> python3.12) keeps its own folder's prefix
    let prefix = python
        .as_ref()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf));
    (PATH_PYTHON, prefix.clone(), prefix.and(python))
}

const PATH_PYTHON: &str = "python3 on PATH";

/// `lib/pythonX.Y/site-packages` (and `dist-packages`) under `prefix`, newest Python first, then
/// Debian's shared `lib/python3/dist-packages` and Windows' `Lib/site-packages`.
fn site_folders(prefix: &Path) -> Vec<PathBuf> {
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("python3"))
                })
                .collect()
        })
        .unwrap_or_default();
    pythons.sort_by_key(|p| std::cmp::Reverse(minor_of(p)));
    let mut out = Vec::new();
    for p in pythons {
        out.push(p.join("site-packages"));
        out.push(p.join("dist-packages"));
    }
    out.push(prefix.join("Lib").join("site-packages"));
    out.retain(|d| d.is_dir());
    out
}

/// 12 for `python3.12`; 0 for `python3`.
fn minor_of(p: &Path) -> u32 {
    p.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("python3."))
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// The version of `package` installed in `dir`, and the METADATA it was read from: the
/// `<name>-<version>.dist-info` folder whose METADATA names the package.
fn read_package(dir: &Path, package: Package) -> Option<(String, PathBuf)> {
    let entries = std::fs::read_dir(dir).ok()?;
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".dist-info") else {
            continue;
        };
        let dist = stem.split('-').next().unwrap_or(stem);
        if normalise(dist) != normalise(package.name()) {
            continue;
        }
        let metadata = e.path().join("METADATA");
        if let Some(version) = metadata_version(&metadata, package) {
            return Some((version, metadata));
        }
    }
    None
}

/// The `Version:` of a METADATA file whose `Name:` is the package (its header comes first).
fn metadata_version(path: &Path, package: Package) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let header = text.split("\n\n").next().unwrap_or(&text);
    let field = |key: &str| {
        header
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    let name = field("Name:")?;
    (normalise(&name) == normalise(package.name())).then_some(())?;
    field("Version:")
}

/// PEP 503's normalised name: lower case, runs of `-`, `_` and `.` as one `_`.
fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '.'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_normalised() {
        assert_eq!(normalise("Unsloth-Zoo"), normalise("unsloth_zoo"));
        assert_ne!(normalise("unsloth_zoo"), normalise("unsloth"));
    }

    #[test]
    fn python_folders_sort_newest_first() {
        assert_eq!(minor_of(Path::new("/x/lib/python3.12")), 12);
        assert_eq!(minor_of(Path::new("/x/lib/python3")), 0);
    }
}
