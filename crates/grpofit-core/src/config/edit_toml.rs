//! The tuned keys written into the user's TOML run file in place (`toml_edit`): a key keeps its
//! place, its spelling, its comments and the whitespace around it; only its value changes.
//! A key the file does not write yet goes at the end of its table.

use super::source::{Change, SourceFile};
use super::write_error::{EditError, WriteBackError};
use crate::contract::{RETIRED, Table};
use toml_edit::{DocumentMut, Item, Value};

/// Where each change went: the table, the key and the value it must read back as.
pub(super) type Places = Vec<(String, String, Option<toml::Value>)>;

/// `source`'s text with `changes` made, with the file's line ends (toml_edit writes LF); also
/// the changed keys, as the header names them, and where each went.
pub(super) fn edit(
    source: &SourceFile,
    changes: &[Change],
) -> Result<(String, Vec<String>, Places), WriteBackError> {
    // toml_edit drops a byte order mark: it is put back in front
    let (bom, body) = match source.text.strip_prefix('\u{feff}') {
        Some(body) => ("\u{feff}", body),
        None => ("", source.text.as_str()),
    };
    let mut doc: DocumentMut = body.parse().map_err(|error| WriteBackError::CannotEdit {
        path: source.path.clone(),
        error: Box::new(error),
    })?;
    let mut edited = Vec::new();
    let mut places = Vec::new();
    for change in changes {
        let (table, key) = place(&doc, source, change.table, &change.key);
        places.push((table.clone(), key.clone(), change.value.clone()));
        // the header names only what the edit changes: a value already in place (written
        // there by an earlier change, or already the file's) is no change of the file's
        if current(&doc, &table, &key) == change.value {
            continue;
        }
        match &change.value {
            Some(value) => {
                set(&mut doc, &table, &key, value).map_err(|problem| WriteBackError::TomlKey {
                    path: source.path.clone(),
                    table: table.clone(),
                    key: key.clone(),
                    problem,
                })?
            }
            None => remove(&mut doc, &table, &key),
        }
        let now = change
            .value
            .as_ref()
            .map_or("(removed)".into(), ToString::to_string);
        edited.push(format!("{key} = {now}"));
    }
    let text = format!("{bom}{}", with_line_ends(&doc.to_string(), &source.text));
    Ok((text, edited, places))
}

/// `text` (toml_edit's output, LF) with CRLF line ends when `original` uses CRLF only.
fn with_line_ends(text: &str, original: &str) -> String {
    let crlf = original.matches("\r\n").count();
    if crlf == 0 || crlf != original.matches('\n').count() {
        return text.to_string();
    }
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Where the file writes `[table] key`: there, or under a retired name that is read as it
/// (`[grpo] max_prompt_length` for `[grpofit] max_prompt_length`); there when it writes neither.
fn place(doc: &DocumentMut, source: &SourceFile, table: Table, key: &str) -> (String, String) {
    let written = |t: &str, k: &str| {
        doc.get(t)
            .and_then(Item::as_table_like)
            .is_some_and(|t| t.contains_key(k))
    };
    if !written(table.name(), key) {
        let stack = source.run.stack;
        let old = RETIRED
            .iter()
            .filter(|r| r.stack.is_none_or(|s| s == stack))
            .find(|r| r.moved_to == Some((table, key)) && written(r.table.name(), r.key));
        if let Some(r) = old {
            return (r.table.name().to_string(), r.key.to_string());
        }
    }
    (table.name().to_string(), key.to_string())
}

/// The value `[table] key` holds in `doc`, read as TOML.
fn current(doc: &DocumentMut, table: &str, key: &str) -> Option<toml::Value> {
    let value = doc
        .get(table)
        .and_then(Item::as_table_like)
        .and_then(|t| t.get(key))
        .and_then(Item::as_value)?;
    let line = format!("v = {}", value.clone().decorated("", ""));
    line.parse::<toml::Table>().ok()?.remove("v")
}

/// `[table] key = value`, keeping the comment and spacing around a value already there.
fn set(
    doc: &mut DocumentMut,
    table: &str,
    key: &str,
    value: &toml::Value,
) -> Result<(), EditError> {
    let new: Value = value
        .to_string()
        .parse()
        .map_err(|error| EditError::NotTomlValue {
            value: value.to_string(),
            error: Box::new(error),
        })?;
    if doc.get(table).is_none() {
        doc.insert(table, Item::Table(toml_edit::Table::new()));
    }
    let t = doc
        .get_mut(table)
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| EditError::NotATable {
            table: table.to_string(),
        })?;
    match t.get_mut(key).and_then(Item::as_value_mut) {
        Some(old) => {
            let decor = old.decor().clone();
            *old = new;
            *old.decor_mut() = decor;
        }
        None => {
            t.insert(key, Item::Value(new));
        }
    }
    Ok(())
}

fn remove(doc: &mut DocumentMut, table: &str, key: &str) {
    if let Some(t) = doc.get_mut(table).and_then(Item::as_table_like_mut) {
        t.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::Offline;

    #[test]
    fn a_value_already_in_place_is_not_named_as_changed() {
        // the shipped 48 GB Unsloth preset writes its vLLM share as 0.55 in both its places
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/48gb.toml");
        let file = crate::config::load(&path, &Offline { cache: None }).unwrap();
        let source = file.source.unwrap();
        let share = |table, key: &str, v: f64| Change {
            table,
            key: key.to_string(),
            value: Some(toml::Value::Float(v)),
        };
        let same = [
            share(Table::Model, "gpu_memory_utilization", 0.55),
            share(Table::Grpo, "vllm_gpu_memory_utilization", 0.55),
        ];
        let (text, edited, _) = edit(&source, &same).unwrap();
        assert_eq!(edited, Vec::<String>::new());
        assert_eq!(text, source.text);
        // a value that differs is named, once
        let moved = [share(Table::Grpo, "vllm_gpu_memory_utilization", 0.6)];
        let (_, edited, _) = edit(&source, &moved).unwrap();
        assert_eq!(
            edited,
            vec!["vllm_gpu_memory_utilization = 0.6".to_string()]
        );
    }
}
