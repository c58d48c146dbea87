//! The `[grpofit] model_config` a written run file holds. The reader resolves a relative
//! `model_config` against the folder of the file that names it (`read_grpofit::beside`), so a
//! file written into another folder than the one it was read from must name the config.json
//! relative to its own folder, or the written file no longer finds it (`fit -o out/run.toml`
//! of `proj/run.toml` with `model_config = "cfg/config.json"` would look in `out/cfg/`).
//!
//! The paths are worked out lexically from the working folder the caller hands in (no file is
//! read: the screen calls this while drawing nothing but state), `..` taken as the parent
//! folder of what precedes it.

use super::source::{Format, SourceFile};
use std::path::{Component, Path, PathBuf};

/// The `model_config` a run file written to `out` must hold to find `resolved`, the
/// config.json the run was read with (as the reader resolved it: absolute, or from the working
/// folder `here`): the path from `out`'s folder, which is the file's own spelling when `out` is
/// in the folder it was read from; an absolute path the file wrote stays absolute. `-` (standard output, no
/// folder) keeps the source's spelling ([`as_written`]).
pub fn model_config_at(
    out: &Path,
    here: &Path,
    source: Option<&SourceFile>,
    resolved: &Path,
) -> PathBuf {
    // a run file read from a relative path that names an absolute one wrote it so: it stays
    let spelled_absolute = resolved.is_absolute() && source.is_none_or(|s| s.path.is_relative());
    if spelled_absolute {
        return resolved.to_path_buf();
    }
    if out == Path::new("-") {
        return match source {
            Some(s) if s.format == Format::Toml => as_written(&s.path, resolved),
            _ => resolved.to_path_buf(),
        };
    }
    let out_dir = normal(&here.join(out.parent().unwrap_or(Path::new(""))));
    relative(&out_dir, &normal(&here.join(resolved)))
}

/// The `model_config` the run file at `file` names `resolved` with: the path from its folder
/// (the reader joined the two, both from the same working folder or both absolute).
pub fn as_written(file: &Path, resolved: &Path) -> PathBuf {
    if resolved.is_absolute() != file.is_absolute() {
        return resolved.to_path_buf();
    }
    let dir = normal(file.parent().unwrap_or(Path::new("")));
    relative(&dir, &normal(resolved))
}

/// `path` with its `.` dropped and each `..` taking away the component before it.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The path from the folder `from` to `to`, both normal and from the same place.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (a, b): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(out: &str, resolved: &str) -> String {
        model_config_at(
            Path::new(out),
            Path::new("/home/me/work"),
            None,
            Path::new(resolved),
        )
        .display()
        .to_string()
    }

    #[test]
    fn a_written_file_names_the_config_from_its_own_folder() {
        // read from proj/run.toml: the reader resolved `cfg/config.json` to proj/cfg/config.json
        assert_eq!(
            at("out/fitted.toml", "proj/cfg/config.json"),
            "../proj/cfg/config.json"
        );
        assert_eq!(
            at("proj/other.toml", "proj/cfg/config.json"),
            "cfg/config.json"
        );
        assert_eq!(
            at("fitted.toml", "proj/cfg/config.json"),
            "proj/cfg/config.json"
        );
        assert_eq!(
            at("/tmp/x/run.toml", "proj/cfg/config.json"),
            "../../home/me/work/proj/cfg/config.json"
        );
        assert_eq!(
            at("a/./b/../run.toml", "../shared/config.json"),
            "../../shared/config.json"
        );
        // absolute, and standard output: as read
        assert_eq!(
            at("out/run.toml", "/models/config.json"),
            "/models/config.json"
        );
        assert_eq!(at("-", "proj/cfg/config.json"), "proj/cfg/config.json");
    }

    #[test]
    fn the_source_spelling_is_the_path_from_its_folder() {
        let w = |file: &str, resolved: &str| {
            as_written(Path::new(file), Path::new(resolved))
                .display()
                .to_string()
        };
        assert_eq!(
            w("proj/run.toml", "proj/cfg/config.json"),
            "cfg/config.json"
        );
        assert_eq!(w("run.toml", "cfg/config.json"), "cfg/config.json");
        assert_eq!(
            w("../x/run.toml", "../x/../shared/c.json"),
            "../shared/c.json"
        );
        assert_eq!(w("/a/run.toml", "/a/cfg/config.json"), "cfg/config.json");
    }
}
