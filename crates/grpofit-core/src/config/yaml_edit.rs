//! The tuned keys written back into a TRL recipe in place: only the value of a top-level
//! `key: value` entry changes (its comment, spacing, quotes style aside, and every other byte
//! stay); a key the recipe does not write yet is added at the end of its document, at the
//! map's indentation, with the file's own line ends.
//!
//! Where each value is comes from the composed document (`pyyaml`), so an indented map, `key :`,
//! CRLF or CR line ends, a byte order mark and a `...` end marker are handled. What cannot be
//! edited safely is refused, naming the construct: a flow map (`{...}`) as the document, a
//! `? key` complex key, an anchored or aliased tuned key, a tagged value, a value written over
//! more than its line. `write_back` then checks the result (`verify`) before anything is
//! written.

use super::pyyaml::{Doc, Kind, compose};
use super::pyyaml_resolve::{self, Implicit, Py};
use super::source::recipe_key;
use super::source::{Change, SourceFile};
use super::write_error::{EditError, WriteBackError};
use crate::contract::Table;
use std::ops::Range;
use yaml_rust2::scanner::TScalarStyle;

/// One recipe key's new value as the trainer will read it (`None`: the line is removed).
#[derive(Debug, Clone)]
pub(super) struct Expected {
    pub key: String,
    pub value: Option<Py>,
}

/// `source`'s text with `changes` made; also the recipe keys changed, as the header names
/// them, and what PyYAML must read for each.
pub(super) fn edit(
    source: &SourceFile,
    changes: &[Change],
    notes: &mut Vec<String>,
) -> Result<(String, Vec<String>, Vec<Expected>), WriteBackError> {
    let doc = compose(&source.text).map_err(|e| WriteBackError::Unreadable {
        path: source.path.clone(),
        line: e.line,
        problem: e.message,
    })?;
    let mut splices: Vec<(Range<usize>, String)> = Vec::new();
    let mut appended = String::new();
    let mut edited = Vec::new();
    let mut expected = Vec::new();
    let eol = line_end(&source.text);
    for change in changes {
        let Some(key) = recipe_key(source, change.table, &change.key) else {
            notes.push(not_a_recipe_key(change));
            let value = change.value.as_ref().map_or("unset".into(), scalar);
            edited.push(format!("{} = {value} (not a recipe key)", change.key));
            continue;
        };
        let value = change.value.as_ref().map(scalar);
        let fail = |problem| WriteBackError::RecipeKey {
            path: source.path.clone(),
            key: key.clone(),
            problem,
        };
        let place = find(&doc, &source.text, &key).map_err(fail)?;
        match (&value, place) {
            (Some(v), Place::Value(span)) => splices.push((span, v.clone())),
            (Some(v), Place::Absent) => {
                let indent = " ".repeat(indent(&doc, &source.text));
                appended.push_str(&format!("{indent}{key}: {v}{eol}"));
            }
            (None, Place::Value(span)) => {
                splices.push((whole_line(&source.text, span).map_err(fail)?, String::new()));
            }
            (None, Place::Absent) => {}
        }
        expected.push(Expected {
            key: key.clone(),
            value: change.value.as_ref().map(as_py),
        });
        edited.push(format!(
            "{key} = {}",
            value.as_deref().unwrap_or("(removed)")
        ));
    }
    let mut text = source.text.clone();
    splices.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    for (range, with) in &splices {
        text.replace_range(range.clone(), with);
    }
    if !appended.is_empty() {
        let at = insertion_point(&doc, &text, &splices);
        let before = &text[..at];
        let sep = if before.is_empty() || before.ends_with(['\n', '\r']) {
            ""
        } else {
            eol
        };
        text.insert_str(at, &format!("{sep}{appended}"));
    }
    Ok((text, edited, expected))
}

/// What the trainer reads for a tuned TOML value written by `scalar`.
pub(super) fn as_py(value: &toml::Value) -> Py {
    match value {
        toml::Value::String(s) => Py::Str(s.clone()),
        toml::Value::Integer(i) => Py::Int(*i),
        toml::Value::Float(x) => Py::Float(*x),
        toml::Value::Boolean(b) => Py::Bool(*b),
        toml::Value::Array(items) => Py::Seq(items.iter().map(as_py).collect()),
        toml::Value::Table(t) => Py::Map(
            t.iter()
                .map(|(k, v)| (Py::Str(k.clone()), as_py(v)))
                .collect(),
        ),
        toml::Value::Datetime(d) => Py::Str(d.to_string()),
    }
}

/// The file's line end: its first one (LF when it has none).
pub(super) fn line_end(text: &str) -> &'static str {
    match text.find(['\n', '\r']) {
        Some(i) if text[i..].starts_with("\r\n") => "\r\n",
        Some(i) if text[i..].starts_with('\r') => "\r",
        _ => "\n",
    }
}

/// Where the tuned key's value is written.
enum Place {
    Value(Range<usize>),
    Absent,
}

/// The top-level `key`'s one-line value, or why it cannot be edited in place.
fn find(doc: &Doc, text: &str, key: &str) -> Result<Place, EditError> {
    let Some(root) = doc.root else {
        return Ok(Place::Absent);
    };
    let entries = match &doc.nodes[root].kind {
        Kind::Map { flow: true, .. } => return Err(EditError::FlowMap),
        Kind::Map { entries, .. } => entries,
        Kind::Scalar(v, TScalarStyle::Plain) if pyyaml_resolve::implicit(v) == Implicit::Null => {
            return Ok(Place::Absent);
        }
        _ => return Err(EditError::NotAMap),
    };
    let mine: Vec<&(usize, usize)> = entries
        .iter()
        .filter(|(k, _)| matches!(&doc.nodes[doc.target(*k)].kind, Kind::Scalar(s, _) if s == key))
        .collect();
    let &(k, v) = match mine.as_slice() {
        [] => return Ok(Place::Absent),
        [one] => *one,
        [_, second, ..] => {
            return Err(EditError::Twice {
                line: doc.nodes[second.0].line,
            });
        }
    };
    let (key_node, value) = (&doc.nodes[k], &doc.nodes[v]);
    if let Some(anchor) = anchor_of(doc, k) {
        return Err(EditError::AnchoredKey { anchor });
    }
    if matches!(key_node.kind, Kind::Alias(_)) {
        return Err(EditError::AliasKey);
    }
    if text[..key_node.start]
        .trim_end_matches([' ', '\t'])
        .ends_with('?')
    {
        return Err(EditError::ComplexKey);
    }
    if let Kind::Alias(target) = value.kind {
        let anchor = anchor_of(doc, target).unwrap_or_default();
        return Err(EditError::Alias { anchor });
    }
    if let Some(anchor) = anchor_of(doc, v) {
        let users = users_of(doc, text, v);
        return Err(EditError::Anchored { anchor, users });
    }
    if let Some(tag) = &value.tag {
        return Err(EditError::Tagged {
            tag: format!("{}{}", tag.handle, tag.suffix),
        });
    }
    if value.line != key_node.line {
        return Err(EditError::NotOneLine);
    }
    span(text, value).map(Place::Value)
}

/// The anchor written on node `id`, as `&name`.
fn anchor_of(doc: &Doc, id: usize) -> Option<String> {
    let a = doc.nodes[id].anchor;
    (a > 0).then(|| {
        let name = doc.anchors.get(a - 1).map_or("?", |(n, _)| n.as_str());
        format!("&{name}")
    })
}

/// The top-level keys whose values reuse node `id` through an alias (a `<<` merge included).
fn users_of(doc: &Doc, text: &str, id: usize) -> Vec<String> {
    let Some(Kind::Map { entries, .. }) = doc.root.map(|r| &doc.nodes[r].kind) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|(_, v)| reaches(doc, *v, id, 0))
        .map(|(k, _)| match &doc.nodes[*k].kind {
            Kind::Scalar(s, _) => s.clone(),
            _ => text[doc.nodes[*k].start..].chars().take(20).collect(),
        })
        .collect()
}

/// Whether node `from` holds an alias to `id`.
fn reaches(doc: &Doc, from: usize, id: usize, depth: usize) -> bool {
    if depth > 50 {
        return false;
    }
    match &doc.nodes[from].kind {
        Kind::Alias(t) => *t == id || reaches(doc, *t, id, depth + 1),
        Kind::Seq(items) => items.iter().any(|i| reaches(doc, *i, id, depth + 1)),
        Kind::Map { entries, .. } => entries
            .iter()
            .any(|(k, v)| reaches(doc, *k, id, depth + 1) || reaches(doc, *v, id, depth + 1)),
        Kind::Scalar(..) => false,
    }
}

/// The bytes of a one-line value: a plain scalar up to its comment, a quoted one to its closing
/// quote, a flow list to its closing bracket.
fn span(text: &str, node: &super::pyyaml::Node) -> Result<Range<usize>, EditError> {
    let start = node.start;
    let line = &text[start..];
    let line = &line[..line.find(['\n', '\r']).unwrap_or(line.len())];
    let len = match &node.kind {
        Kind::Scalar(value, TScalarStyle::Plain) => {
            if value.is_empty() {
                return Err(EditError::NoValue);
            }
            let end = comment_start(line).unwrap_or(line.len());
            let written = line[..end].trim_end_matches([' ', '\t']);
            // a plain scalar continued on the lines below reads as more than its line holds
            if written != value {
                return Err(EditError::NotOneLine);
            }
            written.len()
        }
        Kind::Scalar(_, TScalarStyle::SingleQuoted) => {
            closing(line, '\'').ok_or(EditError::UnclosedQuote)?
        }
        Kind::Scalar(_, TScalarStyle::DoubleQuoted) => {
            closing(line, '"').ok_or(EditError::UnclosedQuote)?
        }
        Kind::Seq(_) if line.starts_with('[') => bracket(line).ok_or(EditError::UnclosedList)?,
        _ => return Err(EditError::NotOneLine),
    };
    Ok(start..start + len)
}

/// Where a plain scalar's comment starts: a `#` after a space or a tab.
fn comment_start(line: &str) -> Option<usize> {
    line.char_indices()
        .find(|&(i, c)| c == '#' && i > 0 && line[..i].ends_with([' ', '\t']))
        .map(|(i, _)| i)
}

/// The byte after the quote that closes the string `s` opens with `q` (`''` is a quote inside
/// a single-quoted string, `\"` inside a double-quoted one).
fn closing(s: &str, q: char) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if q == '"' => i += 2,
            b'\'' if q == '\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
            b if b == q as u8 => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The byte after the `]` that closes the flow list `s` opens, quotes respected.
fn bracket(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        let c = s.as_bytes()[i];
        match c {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'"' | b'\'' => i += closing(&s[i..], c as char)? - 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The whole line of a one-line entry, its line end included; refused when the line holds
/// anything before its key but indentation.
fn whole_line(text: &str, value: Range<usize>) -> Result<Range<usize>, EditError> {
    let start = text[..value.start].rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let rest = &text[value.end..];
    let end = match rest.find(['\n', '\r']) {
        Some(i) if rest[i..].starts_with("\r\n") => value.end + i + 2,
        Some(i) => value.end + i + 1,
        None => text.len(),
    };
    let before = &text[start..value.start];
    let lead = before.trim_start_matches(['\u{feff}']);
    if lead
        .trim_start()
        .starts_with(['-', '{', '[', '?', '&', '!'])
    {
        return Err(EditError::NotOneLine);
    }
    Ok(start..end)
}

/// The top-level map's indentation (its first key's column).
fn indent(doc: &Doc, text: &str) -> usize {
    let Some(Kind::Map { entries, .. }) = doc.root.map(|r| &doc.nodes[r].kind) else {
        return 0;
    };
    entries.first().map_or(0, |(k, _)| {
        let start = doc.nodes[*k].start;
        let line = text[..start].rfind(['\n', '\r']).map_or(doc.bom, |i| i + 1);
        text[line..start].chars().count()
    })
}

/// Where added keys go in the edited text: before the document's `...` end marker, else at
/// the end of the file.
fn insertion_point(doc: &Doc, edited: &str, splices: &[(Range<usize>, String)]) -> usize {
    let Some(marker) = doc.end_marker else {
        return edited.len();
    };
    let shift: isize = splices
        .iter()
        .filter(|(r, _)| r.end <= marker)
        .map(|(r, with)| with.len() as isize - r.len() as isize)
        .sum();
    marker.saturating_add_signed(shift)
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
        // the card the step is timed on: grpofit's own flag, which a recipe has no key for
        Table::Grpofit if matches!(key.as_str(), "gpu" | "gpu_tflops" | "gpu_bandwidth") => {
            format!(
                "grpofit's own: pass --{} {value} to grpofit with this recipe",
                key.replace('_', "-")
            )
        }
        Table::Distributed | Table::Grpofit => "the accelerate config's to set".to_string(),
        Table::Env => "an environment variable to set".to_string(),
        Table::Model | Table::Lora | Table::Grpo => "no key of the recipe's format".to_string(),
    };
    format!("`[{table}] {key} = {value}` is not written to the recipe: {where_}")
}

/// A TOML value as a YAML scalar (or a flow list) PyYAML reads back as the same value.
pub(super) fn scalar(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) if plain(s) => s.clone(),
        toml::Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        toml::Value::Float(x) => pyyaml_resolve::float_text(*x),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(scalar).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// Whether PyYAML reads `s` unquoted as this same string (no resolver takes it, no character
/// YAML gives a meaning).
fn plain(s: &str) -> bool {
    let safe = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let first = s.chars().next();
    safe && first.is_some_and(|c| c.is_ascii_alphabetic())
        && pyyaml_resolve::implicit(s) == Implicit::Str
        && !matches!(s.to_ascii_lowercase().as_str(), "y" | "n")
}

#[cfg(test)]
#[path = "yaml_edit_tests.rs"]
mod tests;
