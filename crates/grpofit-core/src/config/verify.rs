//! A write-back checked before it replaces anything: the edited text is read again with the
//! trainer's semantics (`pyyaml::safe_load` for a recipe, TOML for a run file) and must give
//! exactly the tuned values, every other key its old value, and the bytes outside the edited
//! values unchanged (the byte order mark, the line ends, every other line in order).

use super::pyyaml;
use super::pyyaml_resolve::Py;
use super::write_error::WriteBackError;
use super::yaml_edit::Expected;
use std::path::Path;

fn refuse(path: &Path, problem: String) -> WriteBackError {
    WriteBackError::Unverified {
        path: path.to_path_buf(),
        problem,
    }
}

fn show(v: Option<&Py>) -> String {
    match v {
        None => "absent".into(),
        Some(Py::Str(s)) => format!("the string {s:?}"),
        Some(v) => format!("{v:?}"),
    }
}

/// The recipe `new` (from `old`, with `expected` set) read as TRL reads it.
pub(super) fn yaml(
    path: &Path,
    old: &str,
    new: &str,
    expected: &[Expected],
    lines_edited: usize,
) -> Result<(), WriteBackError> {
    let unreadable = |e: pyyaml::YamlError| {
        let at = e.line.map(|l| format!(" (line {l})")).unwrap_or_default();
        refuse(
            path,
            format!("make a file PyYAML cannot read{at}: {}", e.message),
        )
    };
    let before = pyyaml::safe_load(old).map_err(unreadable)?;
    let after = pyyaml::safe_load(new).map_err(unreadable)?;
    let keys = |v: &Py| match v {
        Py::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        _ => Vec::new(),
    };
    for e in expected {
        let got = after.get(&e.key);
        let same = match (got, &e.value) {
            (None, None) => true,
            (Some(g), Some(want)) => g.same(want),
            _ => false,
        };
        if !same {
            return Err(refuse(
                path,
                format!(
                    "read `{}` back as {} instead of {} (a `<<` merge or an alias gives it)",
                    e.key,
                    show(got),
                    show(e.value.as_ref())
                ),
            ));
        }
    }
    for key in keys(&before).into_iter().chain(keys(&after)) {
        let Py::Str(name) = &key else { continue };
        if expected.iter().any(|e| e.key == *name) {
            continue;
        }
        let (b, a) = (before.get(name), after.get(name));
        if !matches!((b, a), (Some(b), Some(a)) if b.same(a)) {
            return Err(refuse(
                path,
                format!("change `{name}` from {} to {}", show(b), show(a)),
            ));
        }
    }
    bytes(old, new, lines_edited).map_err(|p| refuse(path, p))
}

/// The TOML run file `new` (from `old`): the keys at `places` hold their values, every other
/// key is as it was.
pub(super) fn toml(
    path: &Path,
    old: &str,
    new: &str,
    places: &[(String, String, Option<toml::Value>)],
    lines_edited: usize,
) -> Result<(), WriteBackError> {
    let parse = |t: &str| {
        t.parse::<toml::Table>()
            .map_err(|e| refuse(path, format!("make a file TOML cannot read: {e}")))
    };
    let (before, after) = (parse(old)?, parse(new)?);
    let flat = |t: &toml::Table| {
        let mut out: Vec<(String, String, toml::Value)> = Vec::new();
        for (k, v) in t {
            match v {
                toml::Value::Table(inner) => {
                    for (ik, iv) in inner {
                        out.push((k.clone(), ik.clone(), iv.clone()));
                    }
                }
                other => out.push((String::new(), k.clone(), other.clone())),
            }
        }
        out
    };
    let (b, a) = (flat(&before), flat(&after));
    let get = |set: &[(String, String, toml::Value)], t: &str, k: &str| {
        set.iter()
            .find(|(st, sk, _)| st == t && sk == k)
            .map(|(_, _, v)| v.clone())
    };
    for (t, k, want) in places {
        if get(&a, t, k) != *want {
            return Err(refuse(
                path,
                format!(
                    "read `[{t}] {k}` back as {:?} instead of {want:?}",
                    get(&a, t, k)
                ),
            ));
        }
    }
    for (t, k, _) in b.iter().chain(a.iter()) {
        if places.iter().any(|(pt, pk, _)| pt == t && pk == k) {
            continue;
        }
        if get(&b, t, k) != get(&a, t, k) {
            return Err(refuse(path, format!("change `[{t}] {k}`")));
        }
    }
    bytes(old, new, lines_edited).map_err(|p| refuse(path, p))
}

/// The line ends a text uses: (CRLF, CR alone, LF alone).
fn line_ends(text: &str) -> (usize, usize, usize) {
    let crlf = text.matches("\r\n").count();
    let cr = text.matches('\r').count() - crlf;
    let lf = text.matches('\n').count() - crlf;
    (crlf, cr, lf)
}

/// The text's lines without their ends (any of CRLF, CR, LF).
fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['\n', '\r']) {
        out.push(&rest[..i]);
        let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[i + skip..];
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The bytes outside the edit: the byte order mark as it was, line ends of the file's one
/// kind, and every line of `old` but `edited` of them (and a header comment) in `new`, in order.
fn bytes(old: &str, new: &str, edited: usize) -> Result<(), String> {
    if old.starts_with('\u{feff}') != new.starts_with('\u{feff}') {
        return Err("add or drop the byte order mark".into());
    }
    let (o, n) = (line_ends(old), line_ends(new));
    let kinds = |(a, b, c): (usize, usize, usize)| [a > 0, b > 0, c > 0];
    let (ko, kn) = (kinds(o), kinds(n));
    let one_kind = ko.iter().filter(|k| **k).count() == 1;
    if one_kind && kn != ko {
        return Err("mix line ends of another kind into the file's".into());
    }
    let header = |l: &&str| {
        l.trim_start_matches('\u{feff}')
            .starts_with(super::source::HEADER.trim_end())
    };
    let old_lines: Vec<&str> = lines(old).into_iter().filter(|l| !header(l)).collect();
    let new_lines: Vec<&str> = lines(new).into_iter().filter(|l| !header(l)).collect();
    let mut at = 0;
    let mut missing = 0;
    for line in &old_lines {
        let line = line.trim_start_matches('\u{feff}');
        match new_lines[at..]
            .iter()
            .position(|n| n.trim_start_matches('\u{feff}') == line)
        {
            Some(i) => at += i + 1,
            None => missing += 1,
        }
    }
    if missing > edited {
        return Err(format!(
            "change {missing} lines where {edited} values were edited"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ends_and_lines_are_checked() {
        assert!(bytes("a: 1\r\nb: 2\r\n", "a: 3\r\nb: 2\r\n", 1).is_ok());
        assert!(bytes("a: 1\r\nb: 2\r\n", "a: 3\r\nb: 2\r\nc: 1\n", 1).is_err());
        assert!(bytes("\u{feff}a: 1\n", "a: 1\n", 0).is_err());
        assert!(bytes("a: 1\nb: 2\n", "a: 3\nb: 4\n", 1).is_err());
        assert!(bytes("a: 1\rb: 2\r", "# tuned by grpofit on x\ra: 1\rb: 2\r", 0).is_ok());
    }

    fn expect(key: &str, value: Option<Py>) -> Vec<Expected> {
        vec![Expected {
            key: key.into(),
            value,
        }]
    }

    #[test]
    fn an_edit_is_read_back_as_the_trainer_reads_it() {
        let p = Path::new("r.yaml");
        let old = "d: &d {b: 2}\n<<: *d\nb: 3\nc: 1\n";
        // the value written
        assert!(
            yaml(
                p,
                old,
                "d: &d {b: 2}\n<<: *d\nb: 4\nc: 1\n",
                &expect("b", Some(Py::Int(4))),
                1
            )
            .is_ok()
        );
        // a removed line a merge still gives
        let err = yaml(
            p,
            old,
            "d: &d {b: 2}\n<<: *d\nc: 1\n",
            &expect("b", None),
            1,
        )
        .unwrap_err();
        assert!(err.to_string().contains("read `b` back as Int(2)"), "{err}");
        // another key changed
        let err = yaml(
            p,
            old,
            "d: &d {b: 2}\n<<: *d\nb: 4\nc: 2\n",
            &expect("b", Some(Py::Int(4))),
            2,
        )
        .unwrap_err();
        assert!(err.to_string().contains("change `c`"), "{err}");
        // PyYAML's string, not the float
        let err = yaml(
            p,
            "lr: 1.0e-5\n",
            "lr: 1e-5\n",
            &expect("lr", Some(Py::Float(1e-5))),
            1,
        )
        .unwrap_err();
        assert!(err.to_string().contains("the string \"1e-5\""), "{err}");
        // a TOML file: the place holds the value, the rest as it was
        let places = vec![(
            "grpo".to_string(),
            "n".to_string(),
            Some(toml::Value::Integer(4)),
        )];
        assert!(
            toml(
                p,
                "[grpo]\nn = 8\nm = 1\n",
                "[grpo]\nn = 4\nm = 1\n",
                &places,
                1
            )
            .is_ok()
        );
        assert!(
            toml(
                p,
                "[grpo]\nn = 8\nm = 1\n",
                "[grpo]\nn = 4\nm = 2\n",
                &places,
                1
            )
            .is_err()
        );
        assert!(toml(p, "[grpo]\r\nn = 8\r\n", "[grpo]\nn = 4\n", &places, 1).is_err());
    }
}
