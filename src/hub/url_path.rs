//! A file name or revision as it goes into a Hub URL: percent-encoded as huggingface_hub's
//! `hf_hub_url` does (`quote(filename)` keeps `/`, `quote(revision, safe="")`; Python's
//! `urllib.parse.quote` leaves letters, digits and `_.-~`). A shard named with a space or a `#`
//! is then asked for by its name, not refused as an invalid URI.

/// `text` percent-encoded, `/` kept when `keep_slash`.
pub(super) fn quote(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'_' | b'.' | b'-' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_huggingface_hub_does() {
        assert_eq!(
            quote("model-00001-of-00002.safetensors", true),
            "model-00001-of-00002.safetensors"
        );
        assert_eq!(
            quote("sub dir/a#b?.safetensors", true),
            "sub%20dir/a%23b%3F.safetensors"
        );
        assert_eq!(quote("refs/pr/1", false), "refs%2Fpr%2F1");
        assert_eq!(quote("é", true), "%C3%A9");
    }
}
