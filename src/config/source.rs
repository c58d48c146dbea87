//! The file a run was read from, kept so that a write starting from it edits it in place: the
//! tuned keys' values change, a header comment line is added, and every other byte the user
//! wrote (keys vramfit does not model, comments, order) stays as it was.
//!
//! What changed is found by writing the run as loaded and the run as tuned the way `export`
//! writes a run file, and comparing the two key by key: a key whose written value is the same
//! in both is never touched, however the user spelled it.

use super::edit_toml;
use super::export::{ExportContext, to_toml};
use super::yaml_edit;
use crate::contract::Table;
use crate::model::run::RunConfig;
use std::path::{Path, PathBuf};

/// The format a run was read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// vramfit's run file
    Toml,
    /// a flat TRL CLI recipe (`trl grpo --config recipe.yaml`)
    Yaml,
}

impl Format {
    /// The format a path's extension names: `.yaml` / `.yml`, else TOML.
    pub fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml") => {
                Format::Yaml
            }
            _ => Format::Toml,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Toml => "toml",
            Format::Yaml => "yaml",
        }
    }
}

/// A recipe key and the run-file key it was read as (`lora_r` as `[lora] r`).
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub recipe_key: String,
    pub table: Table,
    pub key: String,
}

/// The user's file, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
    pub format: Format,
    /// the run as read from the file (and its launch config): what a tuned run is compared with
    pub run: RunConfig,
    pub gpu_memory: Option<u64>,
    pub lock_effective_batch: bool,
    pub model_config: Option<PathBuf>,
    /// YAML: the recipe keys vramfit read, and where each went in the run file
    pub placed: Vec<Placed>,
}

/// One key whose written value differs between the run as read and the run as tuned; `None`
/// when the tuned run no longer writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub table: Table,
    pub key: String,
    pub value: Option<toml::Value>,
}

/// The run as `export` writes it, as tables of values.
fn written(run: &RunConfig, ctx: &ExportContext) -> toml::Table {
    to_toml(run, ctx).parse().unwrap_or_default()
}

/// The keys `run` writes differently from the run the file was read as. The capacity is
/// written only where the file states one (else the header names it).
pub fn changes(source: &SourceFile, run: &RunConfig, ctx: &ExportContext) -> Vec<Change> {
    let before = written(
        &source.run,
        &ExportContext {
            gpu: "",
            gpu_memory: source.gpu_memory,
            model_config: source.model_config.as_deref(),
            lock_effective_batch: source.lock_effective_batch,
            estimate: None,
        },
    );
    let after = written(
        run,
        &ExportContext {
            gpu_memory: source.gpu_memory.map(|own| ctx.gpu_memory.unwrap_or(own)),
            ..*ctx
        },
    );
    let mut out = Vec::new();
    for table in Table::ALL {
        let empty = toml::Table::new();
        let get = |t: &toml::Table| {
            t.get(table.name())
                .and_then(toml::Value::as_table)
                .cloned()
                .unwrap_or_else(|| empty.clone())
        };
        let (b, a) = (get(&before), get(&after));
        for (key, value) in &a {
            if b.get(key) != Some(value) {
                out.push(Change {
                    table,
                    key: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for key in b.keys().filter(|k| !a.contains_key(*k)) {
            out.push(Change {
                table,
                key: key.clone(),
                value: None,
            });
        }
    }
    out
}

/// The comment line a write adds on top: what was tuned, for which GPU, when.
fn header(changes: &[String], ctx: &ExportContext) -> String {
    let what = if changes.is_empty() {
        "nothing changed".to_string()
    } else {
        format!("changed {}", changes.join(", "))
    };
    let fits = match ctx.estimate {
        Some(e) if e.fits => "; fits",
        Some(_) => "; DOES NOT FIT",
        None => "",
    };
    format!(
        "{HEADER}{} (UTC) for {}{fits}; {what}\n",
        crate::dates::today(),
        ctx.gpu
    )
}

/// How the header line starts: an earlier write's header (and only that) is replaced.
const HEADER: &str = "# tuned by vramfit on ";

/// `text` with `header` on top, in place of a header an earlier write put there.
fn with_header(text: &str, header: &str) -> String {
    let rest = match text.strip_prefix(HEADER) {
        Some(_) => text.split_once('\n').map_or("", |(_, rest)| rest),
        None => text,
    };
    format!("{header}{rest}")
}

/// The text to write for `run`: the user's file edited in place when the run came from one
/// (in its own format), else a run file written whole (`export::to_toml`). `notes` receives
/// what the write could not carry (a tuned key the recipe has no place for).
pub fn write_back(
    source: Option<&SourceFile>,
    run: &RunConfig,
    ctx: &ExportContext,
    notes: &mut Vec<String>,
) -> Result<String, String> {
    let Some(source) = source else {
        return Ok(to_toml(run, ctx));
    };
    let changes = changes(source, run, ctx);
    let (text, edited) = match source.format {
        Format::Toml => edit_toml::edit(source, &changes)?,
        Format::Yaml => yaml_edit::edit(source, &changes, notes)?,
    };
    Ok(with_header(&text, &header(&edited, ctx)))
}

/// The text to write to `out` (`-`: standard output, in the source's format): the source
/// edited in place when `out` is in its format, a run file written whole when `out` is TOML and
/// the run came from a recipe or a preset; a YAML recipe only from a recipe.
pub fn text_for(
    out: &Path,
    source: Option<&SourceFile>,
    run: &RunConfig,
    ctx: &ExportContext,
    notes: &mut Vec<String>,
) -> Result<String, String> {
    let wanted = match source {
        Some(s) if out == Path::new("-") => s.format,
        _ => Format::of(out),
    };
    match (wanted, source) {
        (Format::Toml, Some(s)) if s.format == Format::Yaml => {
            notes.push(format!(
                "{}: written as a vramfit run file, without {}'s own keys (dataset, rewards, hub...): write to a .yaml file to keep them",
                out.display(),
                s.path.display()
            ));
            Ok(to_toml(run, ctx))
        }
        (Format::Yaml, s) if s.is_none_or(|s| s.format != Format::Yaml) => Err(format!(
            "{}: a TRL recipe is written only into one read with --config recipe.yaml; write a .toml run file",
            out.display()
        )),
        (_, s) => write_back(s, run, ctx, notes),
    }
}
