//! Writing a tuned run back into the file it was read from (`source::SourceFile`): the tuned
//! keys' values change, a header comment line is added, and every other byte stays.
//!
//! What changed is found by writing the run as loaded and the run as tuned the way `export`
//! writes a run file, and comparing the two key by key: a key whose written value is the same
//! in both is never touched, however the user spelled it.

use super::edit_toml;
use super::export::{ExportContext, to_toml};
use super::source::{Change, Format, HEADER, SourceFile};
pub use super::write_error::{EditError, WriteBackError};
use super::{verify, yaml_edit};
use crate::contract::Table;
use crate::run::RunConfig;
use std::path::Path;

/// The run as `export` writes it, as tables of values.
fn written(run: &RunConfig, ctx: &ExportContext) -> toml::Table {
    to_toml(run, ctx).parse().unwrap_or_default()
}

/// The keys `run` writes differently from the run the file was read as. The capacity is
/// written only where the file states one (else the header names it); a time key only where
/// `ctx` says otherwise than the file (the screen keeps the file's; `fit --fastest` names the
/// card it timed the step on).
pub fn changes(source: &SourceFile, run: &RunConfig, ctx: &ExportContext) -> Vec<Change> {
    // `model_config` as the file spells it: `ctx` names it as the written file must
    // (`relocate::model_config_at`)
    let before_config = source
        .model_config
        .as_deref()
        .map(|resolved| super::relocate::as_written(&source.path, resolved));
    let before = written(
        &source.run,
        &ExportContext {
            gpu: "",
            gpu_memory: source.gpu_memory,
            model_config: before_config.as_deref(),
            lock_effective_batch: source.lock_effective_batch,
            estimate: None,
            time: Some(&source.time),
        },
    );
    let after = written(
        run,
        &ExportContext {
            gpu_memory: source.gpu_memory.map(|own| ctx.gpu_memory.unwrap_or(own)),
            time: Some(ctx.time.unwrap_or(&source.time)),
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
fn header(changes: &[String], ctx: &ExportContext, eol: &str) -> String {
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
        "{HEADER}{} (UTC) for {}{fits}; {what}{eol}",
        crate::dates::today(),
        ctx.gpu
    )
}

/// `text` with `header` on top (after a byte order mark), in place of a header an earlier
/// write put there.
fn with_header(text: &str, header: &str) -> String {
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(body) => ("\u{feff}", body),
        None => ("", text),
    };
    let rest = match body.strip_prefix(HEADER) {
        Some(line) => match line.find(['\n', '\r']) {
            Some(i) if line[i..].starts_with("\r\n") => &line[i + 2..],
            Some(i) => &line[i + 1..],
            None => "",
        },
        None => body,
    };
    format!("{bom}{header}{rest}")
}

/// The text to write for `run`: the user's file edited in place when the run came from one
/// (in its own format), else a run file written whole (`export::to_toml`). `notes` receives
/// what the write could not carry (a tuned key the recipe has no place for).
pub fn write_back(
    source: Option<&SourceFile>,
    run: &RunConfig,
    ctx: &ExportContext,
    notes: &mut Vec<String>,
) -> Result<String, WriteBackError> {
    let Some(source) = source else {
        return Ok(to_toml(run, ctx));
    };
    let changes = changes(source, run, ctx);
    let eol = yaml_edit::line_end(&source.text);
    match source.format {
        Format::Toml => {
            let (text, edited, places) = edit_toml::edit(source, &changes)?;
            let text = with_header(&text, &header(&edited, ctx, eol));
            verify::toml(&source.path, &source.text, &text, &places, changes.len())?;
            Ok(text)
        }
        Format::Yaml => {
            let (text, edited, expected) = yaml_edit::edit(source, &changes, notes)?;
            let text = with_header(&text, &header(&edited, ctx, eol));
            verify::yaml(&source.path, &source.text, &text, &expected, expected.len())?;
            Ok(text)
        }
    }
}

/// `Err(WriteBackError::Stale)` when `source` changed on disk since it was read: what is
/// built from it would drop that change.
pub fn check_unchanged(source: Option<&SourceFile>) -> Result<(), WriteBackError> {
    match source.map(SourceFile::unchanged) {
        Some(Err(changed)) => Err(WriteBackError::Stale {
            path: source.map(|s| s.path.clone()).unwrap_or_default(),
            what: changed.what,
        }),
        _ => Ok(()),
    }
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
) -> Result<String, WriteBackError> {
    let wanted = match source {
        Some(s) if out == Path::new("-") => s.format,
        _ => Format::of(out),
    };
    match (wanted, source) {
        (Format::Toml, Some(s)) if s.format == Format::Yaml => {
            notes.push(format!(
                "{}: written as a grpofit run file, without {}'s own keys (dataset, rewards, hub...): write to a .yaml file to keep them",
                out.display(),
                s.path.display()
            ));
            Ok(to_toml(run, ctx))
        }
        (Format::Yaml, s) if s.is_none_or(|s| s.format != Format::Yaml) => {
            Err(WriteBackError::RecipeOnlyFromRecipe {
                out: out.to_path_buf(),
            })
        }
        (_, s) => write_back(s, run, ctx, notes),
    }
}
