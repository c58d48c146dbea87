//! Why a run file cannot be used: the file, the line, the table, key and value, and what is
//! wrong, as fields, so nobody reads them back out of a sentence.

use std::fmt;

/// A run file that cannot be used. (The table, key and value are boxed `str`s, which keeps
/// the error under clippy's `result_large_err` size.)
///
/// Shown as `file:line: `[table] key = value`: message`, or `file:line: message` when the
/// message names what it is about itself (`unknown key `[model] x``).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// the file's path, or what stands for it (`preset 24gb`)
    pub file: String,
    /// the 1-based line the problem is on, when it is on one
    pub line: Option<usize>,
    /// the table concerned (`grpo`), as written in the file
    pub table: Option<Box<str>>,
    /// the key concerned (`per_device_train_batch_size`)
    pub key: Option<Box<str>>,
    /// the value as the file writes it (`0`, `"x"`)
    pub value: Option<Box<str>>,
    /// what is wrong, in words
    pub message: String,
    /// how `message` reads around the table and key
    pub wording: Wording,
}

/// How a [`LoadError`]'s message reads around its table, key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wording {
    /// the message follows `` `[table] key = value`: `` (or `` `[table] key`: `` without a value)
    AfterKey,
    /// the message is a whole sentence naming what it is about (`missing `[model] model_name``)
    Sentence,
}

impl LoadError {
    /// `` `[table] key = value`: message ``; `value` as the file writes it.
    pub fn at_key(
        table: &str,
        key: &str,
        value: Option<String>,
        message: impl Into<String>,
    ) -> LoadError {
        LoadError {
            file: String::new(),
            line: None,
            table: Some(table.into()),
            key: Some(key.into()),
            value: value.map(String::into_boxed_str),
            message: message.into(),
            wording: Wording::AfterKey,
        }
    }

    /// A whole sentence about `table` (and `key`, when there is one).
    pub fn sentence(table: &str, key: Option<&str>, message: impl Into<String>) -> LoadError {
        LoadError {
            table: Some(table.into()),
            key: key.map(Box::from),
            wording: Wording::Sentence,
            ..LoadError::whole_file(message)
        }
    }

    /// A problem with the whole file (cannot be read, not TOML).
    pub fn whole_file(message: impl Into<String>) -> LoadError {
        LoadError {
            file: String::new(),
            line: None,
            table: None,
            key: None,
            value: None,
            message: message.into(),
            wording: Wording::Sentence,
        }
    }

    /// The same error, with its value.
    pub fn with_value(self, value: impl fmt::Display) -> LoadError {
        LoadError {
            value: Some(value.to_string().into()),
            ..self
        }
    }

    /// The same error, on `line`.
    pub fn on_line(self, line: Option<usize>) -> LoadError {
        LoadError { line, ..self }
    }

    /// The same error, in `file`.
    pub fn in_file(self, file: &str) -> LoadError {
        LoadError {
            file: file.to_string(),
            ..self
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let (Wording::AfterKey, Some(table), Some(key)) = (self.wording, &self.table, &self.key)
        {
            write!(f, "`[{table}] {key}")?;
            if let Some(value) = &self.value {
                write!(f, " = {value}")?;
            }
            f.write_str("`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for LoadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_as_users_read_it() {
        let e = LoadError::at_key("grpo", "beta", Some("-1".into()), "out of range")
            .on_line(Some(5))
            .in_file("f.toml");
        assert_eq!(e.to_string(), "f.toml:5: `[grpo] beta = -1`: out of range");
        let e = LoadError::at_key("grpofit", "model_config", None, "x.json: cannot read")
            .in_file("preset 24gb");
        assert_eq!(
            e.to_string(),
            "preset 24gb: `[grpofit] model_config`: x.json: cannot read"
        );
        let e = LoadError::sentence("model", Some("model_name"), "missing `[model] model_name`")
            .in_file("f.toml");
        assert_eq!(e.to_string(), "f.toml: missing `[model] model_name`");
    }
}
