//! Text from outside grpofit reaches the terminal through here: a Hub server's file names, a
//! run log's device name, a run file's keys. Control characters (escape sequences that would
//! move the cursor, retitle the window or hide text; NUL) are shown escaped as `\u001b`, the
//! form JSON and TOML strings read back as the same character (so `--json` stays valid), and a
//! line too long to read is cut with the count of what was left out. Line breaks and tabs
//! pass. `output::say` and `output::emit` apply it to everything they write.

use std::borrow::Cow;

/// The most characters of one line shown on standard error: a message names a key or a value,
/// and a 10 MB one helps nobody.
pub const LONGEST_LINE: usize = 2000;

fn unsafe_char(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `text` with every control character but line breaks and tabs escaped.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` escaped (`escape_controls`), each line cut at `LONGEST_LINE` characters.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    let escaped = escape_controls(text);
    if !escaped.lines().any(|l| l.len() > LONGEST_LINE) {
        return escaped;
    }
    let lines: Vec<String> = escaped
        .split('\n')
        .map(|line| match line.char_indices().nth(LONGEST_LINE) {
            Some((cut, _)) => format!(
                "{}… ({} more characters)",
                &line[..cut],
                line[cut..].chars().count()
            ),
            None => line.to_string(),
        })
        .collect();
    Cow::Owned(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_osc_sequences_are_shown_not_sent() {
        assert_eq!(
            escape_controls("GPU\u{1b}]0;owned\u{7}"),
            "GPU\\u001b]0;owned\\u0007"
        );
        assert_eq!(
            escape_controls("a\0b\u{9b}c\u{7f}"),
            "a\\u0000b\\u009bc\\u007f"
        );
        // inside a JSON string the escape reads back as the character
        let json = format!("\"{}\"", escape_controls("x\u{7f}"));
        assert_eq!(
            serde_json::from_str::<String>(&json).unwrap_or_default(),
            "x\u{7f}"
        );
        assert_eq!(escape_controls("line\n\tnext"), "line\n\tnext");
    }

    #[test]
    fn a_long_line_is_cut_with_the_count_left_out() {
        let text = format!("key `{}`\nnext", "k".repeat(3000));
        let shown = for_terminal(&text);
        assert!(shown.len() < 2100, "{}", shown.len());
        assert!(shown.contains("… (1006 more characters)"), "{shown}");
        assert!(shown.ends_with("\nnext"));
    }
}
