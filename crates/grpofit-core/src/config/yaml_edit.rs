//! The tuned keys written back into a flat TRL recipe, line by line: only the value of a
//! top-level `key: value` line changes (its comment, spacing and the lines around it stay as
//! written); a key the recipe does not write yet is added at its end. Lists, nested maps and
//! block scalars are never rewritten: a tuned key written so is refused, naming it.

use super::source::recipe_key;
use super::source::{Change, SourceFile};
use super::write_error::{EditError, WriteBackError};
use crate::contract::Table;

/// `source`'s text with `changes` made; also the recipe keys changed, as the header names them.
/// A change the recipe has no key for (the GPUs, vLLM server flags, the launch) goes to `notes`.
pub(super) fn edit(
    source: &SourceFile,
    changes: &[Change],
    notes: &mut Vec<String>,
) -> Result<(String, Vec<String>), WriteBackError> {
    let mut text = source.text.clone();
    let mut edited = Vec::new();
    for change in changes {
        let Some(key) = recipe_key(source, change.table, &change.key) else {
            notes.push(not_a_recipe_key(change));
            let value = change.value.as_ref().map_or("unset".into(), scalar);
            edited.push(format!("{} = {value} (not a recipe key)", change.key));
            continue;
        };
        let value = change.value.as_ref().map(scalar);
        text = match &value {
            Some(value) => set(&text, &key, value),
            None => remove(&text, &key),
        }
        .map_err(|problem| WriteBackError::RecipeKey {
            path: source.path.clone(),
            key: key.clone(),
            problem,
        })?;
        edited.push(format!(
            "{key} = {}",
            value.as_deref().unwrap_or("(removed)")
        ));
    }
    Ok((text, edited))
}

/// What the user has to carry over by hand, for a tuned key no recipe line holds.
fn not_a_recipe_key(change: &Change) -> String {
    let value = change
        .value
        .as_ref()
        .map_or("(not set)".to_string(), ToString::to_string);
    let (table, key) = (change.table.name(), &change.key);
    let where_ = match change.table {
        Table::VllmServer => format!("a `trl vllm-serve` flag: pass --{key} {value} to it"),
        Table::Grpofit if key == "gpus" => {
            format!("the training processes: pass --num_processes {value} to accelerate launch")
        }
        Table::Distributed | Table::Grpofit => "the accelerate config's to set".to_string(),
        Table::Env => "an environment variable to set".to_string(),
        Table::Model | Table::Lora | Table::Grpo => "no key of the recipe's format".to_string(),
    };
    format!("`[{table}] {key} = {value}` is not written to the recipe: {where_}")
}

/// A TOML value as a YAML scalar (or a flow list) the recipe's reader takes back the same.
pub(super) fn scalar(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) if plain(s) => s.clone(),
        toml::Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        // Debug keeps the decimal point, so YAML reads a float back
        toml::Value::Float(x) => format!("{x:?}"),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(scalar).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// Whether YAML reads `s` unquoted as this same string (not a number, boolean or null).
fn plain(s: &str) -> bool {
    let safe = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let first = s.chars().next();
    safe && first.is_some_and(|c| c.is_ascii_alphabetic())
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "nan" | "inf"
        )
}

/// Where a top-level `key:` line's value is: the line's start, and the value's byte range in
/// the whole text. `Err` when the key's value is not written on its line (a list or map below
/// it, a block scalar).
fn value_span(text: &str, key: &str) -> Result<Option<(usize, std::ops::Range<usize>)>, EditError> {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = top_level_key(body, key) {
            let value_start = body.len() - rest.len();
            let trimmed = rest.trim_start();
            let from = value_start + (rest.len() - trimmed.len());
            let len = scalar_len(trimmed)?;
            if len == 0 {
                return Err(EditError::NotOneLine);
            }
            return Ok(Some((start, start + from..start + from + len)));
        }
        start += line.len();
    }
    Ok(None)
}

/// The rest of `line` after `key:` when `line` writes the top-level `key`.
pub(super) fn top_level_key<'l>(line: &'l str, key: &str) -> Option<&'l str> {
    let rest = [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ]
    .iter()
    .find_map(|k| line.strip_prefix(k.as_str()))?;
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
}

/// The length of the one-line value `s` starts with, up to its comment.
fn scalar_len(s: &str) -> Result<usize, EditError> {
    let end = match s.chars().next() {
        None | Some('#') => return Ok(0),
        Some('|' | '>') => return Ok(0),
        Some(q @ ('"' | '\'')) => closing(s, q).ok_or(EditError::UnclosedQuote)?,
        Some(open @ ('[' | '{')) => {
            let close = if open == '[' { ']' } else { '}' };
            s.rfind(close)
                .map(|i| i + 1)
                .ok_or(EditError::UnclosedList)?
        }
        Some(_) => s.find(" #").unwrap_or(s.len()),
    };
    Ok(s[..end].trim_end().len())
}

/// The byte after the quote that closes the string `s` opens with `q`.
fn closing(s: &str, q: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            '\\' if q == '"' && !escaped => escaped = true,
            c if c == q && !escaped => return Some(i + 1),
            _ => escaped = false,
        }
    }
    None
}

/// `text` with top-level `key`'s value set to `value` (the line added at the end when absent).
pub(super) fn set(text: &str, key: &str, value: &str) -> Result<String, EditError> {
    match value_span(text, key)? {
        Some((_, span)) => Ok(format!(
            "{}{value}{}",
            &text[..span.start],
            &text[span.end..]
        )),
        None => {
            let sep = if text.is_empty() || text.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            Ok(format!("{text}{sep}{key}: {value}\n"))
        }
    }
}

/// `text` without top-level `key`'s line.
pub(super) fn remove(text: &str, key: &str) -> Result<String, EditError> {
    match value_span(text, key)? {
        Some((line, _)) => {
            let end = text[line..].find('\n').map_or(text.len(), |i| line + i + 1);
            Ok(format!("{}{}", &text[..line], &text[end..]))
        }
        None => Ok(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_value_changes() {
        let text = "# model\nlr: 2.0e-05 # keep\nn: 16  # gens\nname: \"a # b\"  # c\nl:\n- x\n";
        let out = set(text, "n", "8").unwrap();
        assert_eq!(out, text.replace("n: 16  # gens", "n: 8  # gens"));
        let out = set(text, "name", "z").unwrap();
        assert!(out.contains("name: z  # c\n"), "{out}");
        assert!(set(text, "l", "[y]").is_err());
        let out = set(text, "new", "1").unwrap();
        assert_eq!(out, format!("{text}new: 1\n"));
        assert_eq!(set("a: 1", "b", "2").unwrap(), "a: 1\nb: 2\n");
        assert_eq!(
            remove(text, "lr").unwrap(),
            text.replace("lr: 2.0e-05 # keep\n", "")
        );
        // a key nested under another is not top-level
        assert_eq!(set("m:\n  n: 1\n", "n", "2").unwrap(), "m:\n  n: 1\nn: 2\n");
    }

    #[test]
    fn scalars_read_back_as_written() {
        assert_eq!(scalar(&toml::Value::Float(0.7)), "0.7");
        assert_eq!(scalar(&toml::Value::Float(1.0)), "1.0");
        assert_eq!(scalar(&toml::Value::Integer(16)), "16");
        assert_eq!(scalar(&toml::Value::String("server".into())), "server");
        assert_eq!(scalar(&toml::Value::String("true".into())), "\"true\"");
        assert_eq!(scalar(&toml::Value::String("a b".into())), "\"a b\"");
    }
}
