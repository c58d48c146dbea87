//! Numbers and counts as a person writes them, for every message, report and screen:
//! `2.67` rather than `2.6666666666666665`, `4` rather than `4.0`, `1 GPU` but `2 GPUs`.

/// `x` with at most `places` decimals, trailing zeros dropped: `2.67`, `4`, `0.5`.
/// Whatever is not a finite number is written as Rust writes it (`NaN`, `inf`).
pub fn decimal_places(x: f64, places: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let text = format!("{x:.places$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    // `-0.001` rounds to `-0`
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// `x` with at most two decimals: `2.67`, `4`, `0.5`.
pub fn decimal(x: f64) -> String {
    decimal_places(x, 2)
}

/// `1 GPU`, `2 GPUs`, `0 GPUs`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A count that may be fractional, with at most `places` decimals: `2.67 prompts`,
/// `1 prompt`, `0.5 prompts`. Only a count that reads exactly `1` takes the singular.
pub fn count_f(x: f64, places: usize, one: &str, many: &str) -> String {
    let n = decimal_places(x, places);
    let word = if n == "1" { one } else { many };
    format!("{n} {word}")
}

/// A signed change in a count: `+1 completion`, `-3 completions`.
pub fn signed_count(n: i64, one: &str, many: &str) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", count(n.unsigned_abs(), one, many))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_have_at_most_two_decimals_and_no_trailing_zeros() {
        assert_eq!(decimal(8.0 / 3.0), "2.67");
        assert_eq!(decimal(4.0), "4");
        assert_eq!(decimal(0.5), "0.5");
        assert_eq!(decimal(2.5), "2.5");
        assert_eq!(decimal(100.0), "100");
        assert_eq!(decimal(0.004), "0");
        assert_eq!(decimal(-0.001), "0");
        assert_eq!(decimal(-1.25), "-1.25");
        assert_eq!(decimal(f64::NAN), "NaN");
        assert_eq!(decimal_places(101.82, 1), "101.8");
        assert_eq!(decimal_places(0.96, 1), "1");
        assert_eq!(decimal_places(2.6, 0), "3");
    }

    #[test]
    fn plurals_agree_with_the_count() {
        assert_eq!(count(1, "GPU", "GPUs"), "1 GPU");
        assert_eq!(count(2, "GPU", "GPUs"), "2 GPUs");
        assert_eq!(count(0, "GPU", "GPUs"), "0 GPUs");
        assert_eq!(count_f(8.0 / 3.0, 2, "prompt", "prompts"), "2.67 prompts");
        assert_eq!(count_f(1.0, 2, "prompt", "prompts"), "1 prompt");
        assert_eq!(count_f(1.001, 2, "prompt", "prompts"), "1 prompt");
        assert_eq!(count_f(0.5, 2, "prompt", "prompts"), "0.5 prompts");
        assert_eq!(count_f(4.0, 2, "prompt", "prompts"), "4 prompts");
        assert_eq!(
            signed_count(1, "completion", "completions"),
            "+1 completion"
        );
        assert_eq!(
            signed_count(-3, "completion", "completions"),
            "-3 completions"
        );
    }
}
