//! What a YAML scalar means to PyYAML's `yaml.safe_load` (TRL's recipe reader: trl 1.15.0,
//! `trl/scripts/utils.py`, `TrlParser.parse_args_and_config`): PyYAML 6.0's implicit resolvers
//! (`yaml/resolver.py`, the `Resolver.add_implicit_resolver` calls, YAML 1.1: `yes`/`on` are
//! booleans, `1e-5` is a string and `1.0e-5` a float, `017` is octal, `1:30` is 90) and its
//! safe constructors (`yaml/constructor.py`, `SafeConstructor.construct_yaml_*`).

use regex::Regex;
use std::sync::LazyLock;

/// A value as `yaml.safe_load` builds it (the Python types it returns).
#[derive(Debug, Clone)]
pub enum Py {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// a `datetime.date` / `datetime.datetime` (`tag:yaml.org,2002:timestamp`), as written
    Timestamp(String),
    Seq(Vec<Py>),
    /// a dict: keys in first-insertion order, a repeated key's later value winning
    Map(Vec<(Py, Py)>),
}

impl Py {
    /// Python's `==` on the values, NaN equal to itself (a value kept as it was).
    pub fn same(&self, other: &Py) -> bool {
        match (self, other) {
            (Py::Float(a), Py::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Py::Seq(a), Py::Seq(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Py::Map(a), Py::Map(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, v)| {
                        b.iter()
                            .find(|(k2, _)| k2.same(k))
                            .is_some_and(|(_, v2)| v2.same(v))
                    })
            }
            (Py::None, Py::None) => true,
            (Py::Bool(a), Py::Bool(b)) => a == b,
            (Py::Int(a), Py::Int(b)) => a == b,
            (Py::Str(a), Py::Str(b)) | (Py::Timestamp(a), Py::Timestamp(b)) => a == b,
            _ => false,
        }
    }

    /// A dict's value for the string key `key`.
    pub fn get(&self, key: &str) -> Option<&Py> {
        match self {
            Py::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Py::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// `dict[key] = value`: a key already there keeps its place (Python's dict).
    pub fn insert(entries: &mut Vec<(Py, Py)>, key: Py, value: Py) {
        match entries.iter_mut().find(|(k, _)| k.same(&key)) {
            Some(slot) => slot.1 = value,
            None => entries.push((key, value)),
        }
    }
}

/// The tag PyYAML gives a plain (unquoted, untagged) scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implicit {
    Bool,
    Float,
    Int,
    Merge,
    Null,
    Timestamp,
    /// `=`: `tag:yaml.org,2002:value`, which the safe loader has no constructor for
    Value,
    Str,
}

// PyYAML 6.0 yaml/resolver.py, written without re.X's ignored whitespace.
static BOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .expect("a valid pattern")
});
static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?",
        r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?",
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
        r"|[-+]?\.(?:inf|Inf|INF)",
        r"|\.(?:nan|NaN|NAN))$"
    ))
    .expect("a valid pattern")
});
static INT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?0b[0-1_]+",
        r"|[-+]?0[0-7_]+",
        r"|[-+]?(?:0|[1-9][0-9_]*)",
        r"|[-+]?0x[0-9a-fA-F_]+",
        r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
    ))
    .expect("a valid pattern")
});
static NULL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL|)$").expect("a valid pattern"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]",
        r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?",
        r"(?:[Tt]|[ \t]+)[0-9][0-9]?",
        r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?",
        r"(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"
    ))
    .expect("a valid pattern")
});

/// `Resolver.resolve` for a plain scalar: the resolvers registered for its first character, in
/// their order of registration (bool, float, int, merge, null, timestamp, value).
pub fn implicit(value: &str) -> Implicit {
    let first = value.chars().next();
    let candidates: &[(Implicit, &LazyLock<Regex>)] = match first {
        None => &[(Implicit::Null, &NULL)],
        Some('y' | 'Y' | 't' | 'T' | 'f' | 'F' | 'o' | 'O') => &[(Implicit::Bool, &BOOL)],
        Some('n' | 'N') => &[(Implicit::Bool, &BOOL), (Implicit::Null, &NULL)],
        Some('-' | '+') => &[(Implicit::Float, &FLOAT), (Implicit::Int, &INT)],
        Some('.') => &[(Implicit::Float, &FLOAT)],
        Some('0'..='9') => &[
            (Implicit::Float, &FLOAT),
            (Implicit::Int, &INT),
            (Implicit::Timestamp, &TIMESTAMP),
        ],
        Some('<') if value == "<<" => return Implicit::Merge,
        Some('~') if value == "~" => return Implicit::Null,
        Some('=') if value == "=" => return Implicit::Value,
        _ => &[],
    };
    // Python's `$` also matches before one final newline, which a plain scalar never ends with
    candidates
        .iter()
        .find(|(_, re)| re.is_match(value))
        .map_or(Implicit::Str, |(tag, _)| *tag)
}

/// `construct_yaml_bool`: `None` for a value that is not one of its spellings.
pub fn to_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" => Some(true),
        "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// `construct_yaml_int`: `_` dropped, a sign, `0b` binary, `0x` hex, a leading `0` octal,
/// `a:b:c` in base 60, else decimal. `None` when Python's `int()` would raise (or the value
/// needs more than 64 bits).
pub fn to_int(value: &str) -> Option<i64> {
    let v = value.replace('_', "");
    let (sign, v) = match v.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, v.strip_prefix('+').unwrap_or(&v)),
    };
    let magnitude = if v == "0" {
        0
    } else if let Some(bin) = v.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()?
    } else if let Some(hex) = v.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if v.starts_with('0') {
        i64::from_str_radix(v, 8).ok()?
    } else if v.contains(':') {
        let mut total: i64 = 0;
        for part in v.split(':') {
            total = total
                .checked_mul(60)?
                .checked_add(part.parse::<i64>().ok()?)?;
        }
        total
    } else {
        v.parse::<i64>().ok()?
    };
    magnitude.checked_mul(sign)
}

/// `construct_yaml_float`: `_` dropped, lower case, a sign, `.inf`, `.nan`, base 60, else
/// Python's `float()`.
pub fn to_float(value: &str) -> Option<f64> {
    let v = value.replace('_', "").to_ascii_lowercase();
    let (sign, v) = match v.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, v.strip_prefix('+').unwrap_or(&v)),
    };
    let magnitude = match v {
        ".inf" => f64::INFINITY,
        ".nan" => return Some(f64::NAN),
        v if v.contains(':') => {
            let mut total = 0.0;
            for part in v.split(':') {
                total = total * 60.0 + python_float(part)?;
            }
            total
        }
        v => python_float(v)?,
    };
    Some(sign * magnitude)
}

/// Python's `float(s)` on what a YAML float or a recipe's string holds: decimal digits, a
/// point, an exponent (Rust's parser takes the same forms, `1.`, `.5` and `1e5` included).
pub fn python_float(s: &str) -> Option<f64> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if matches!(body, "inf" | "infinity" | "nan") {
        return s.parse().ok();
    }
    let digits_only = body
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'));
    if !digits_only || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    s.parse().ok()
}

/// The tuned value's YAML spelling that PyYAML reads back as this same float: Rust's shortest
/// round trip, with a point before any exponent and the exponent signed (PyYAML's float
/// resolver takes `1.0e-05` and `1.0e+20`, not `1e-5` nor `1.0e20`, which it reads as strings).
pub fn float_text(x: f64) -> String {
    if x.is_nan() {
        return ".nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let text = format!("{x:?}");
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return text;
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    let exponent = if exponent.starts_with('-') {
        exponent.to_string()
    } else {
        format!("+{exponent}")
    };
    format!("{mantissa}e{exponent}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_as_pyyaml_6_does() {
        // each checked against python3 -c 'import yaml; print(yaml.safe_load("a: X"))'
        for (text, tag) in [
            ("1e-5", Implicit::Str),
            ("1.0e-5", Implicit::Float),
            ("1.0e5", Implicit::Str),
            ("yes", Implicit::Bool),
            ("Off", Implicit::Bool),
            ("y", Implicit::Str),
            ("017", Implicit::Int),
            ("08", Implicit::Str),
            ("0o17", Implicit::Str),
            ("1_000", Implicit::Int),
            ("1:30", Implicit::Int),
            (".5", Implicit::Float),
            ("5.", Implicit::Float),
            ("+.inf", Implicit::Float),
            ("2024-01-01", Implicit::Timestamp),
            ("0x1F", Implicit::Int),
            ("~", Implicit::Null),
            ("", Implicit::Null),
            ("Null", Implicit::Null),
            ("nULL", Implicit::Str),
            ("<<", Implicit::Merge),
            ("=", Implicit::Value),
            ("all-linear", Implicit::Str),
        ] {
            assert_eq!(implicit(text), tag, "{text}");
        }
        assert_eq!(to_int("017"), Some(15));
        assert_eq!(to_int("1:30"), Some(90));
        assert_eq!(to_int("-0b101"), Some(-5));
        assert_eq!(to_int("0x1F"), Some(31));
        assert_eq!(to_float("1__0.0_1"), Some(10.01));
        assert_eq!(to_float("190:20:30.15"), Some(685230.15));
        assert_eq!(to_bool("NO"), Some(false));
    }

    #[test]
    fn floats_are_written_so_pyyaml_reads_floats() {
        for x in [1e-5, 2e-6, 1e20, 0.7, 1.0, -3.5e-7, 123456.0] {
            let text = float_text(x);
            assert_eq!(implicit(&text), Implicit::Float, "{text}");
            assert_eq!(to_float(&text), Some(x), "{text}");
        }
        assert_eq!(float_text(1e-5), "1.0e-05".replace("-05", "-5"));
    }
}
