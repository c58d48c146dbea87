//! Where a table or key is written in a run file: its line, from the TOML parser's spans.

use toml::Spanned;
use toml::de::DeTable;

/// A run file's text with the spans of its tables and keys.
pub struct Lines<'t> {
    text: &'t str,
    /// `None` when the text is not TOML (its own error has the line then)
    doc: Option<Spanned<DeTable<'t>>>,
}

impl<'t> Lines<'t> {
    pub fn new(text: &'t str) -> Lines<'t> {
        Lines {
            text,
            doc: DeTable::parse(text).ok(),
        }
    }

    /// The 1-based line where `[table]`'s `key` is written, or where `[table]` is named when
    /// `key` is `None`.
    pub fn of(&self, table: &str, key: Option<&str>) -> Option<usize> {
        let (name, value) = self.doc.as_ref()?.get_ref().get_key_value(table)?;
        let span = match key {
            None => name.span(),
            Some(key) => value.get_ref().as_table()?.get_key_value(key)?.0.span(),
        };
        Some(line_of_offset(self.text, span.start))
    }
}

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_keys_are_found_where_written() {
        let text = "# c\n[a]\nx = 1\n\n[b]\n  \"x\"  =  2\ny.z = 3\n[c]\nw = { v = 1 }\n";
        let lines = Lines::new(text);
        assert_eq!(lines.of("a", Some("x")), Some(3));
        assert_eq!(lines.of("b", None), Some(5));
        assert_eq!(lines.of("b", Some("x")), Some(6));
        assert_eq!(lines.of("b", Some("y")), Some(7));
        assert_eq!(lines.of("c", Some("w")), Some(9));
        assert_eq!(lines.of("b", Some("w")), None);
        assert_eq!(lines.of("d", None), None);
        let root = Lines::new("top = 1\n[a]\n");
        assert_eq!(root.of("top", None), Some(1));
        assert_eq!(Lines::new("[a\n").of("a", None), None);
    }
}
