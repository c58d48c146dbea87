//! What each modelled trainer release requires of the others, and when its wheel was built
//! (`requires.json`, written by `tools/contract/requires.py` from the `Requires-Dist` lines of
//! each rung's METADATA: TRL's vLLM under its `vllm` extra, the others without an extra). The
//! rungs of each package here are the ladders' (TRL and transformers: `ladder.py`; Unsloth and
//! vLLM: `stack_ladders.py`), so this file also says which releases grpofit models.

use crate::contract::release::Release;
use crate::contract::rungs;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const REQUIRES_JSON: &str = include_str!("requires.json");

#[derive(Deserialize)]
pub(crate) struct Rung {
    /// the wheel's build date, `YYYY-MM-DD`
    built: String,
    /// other package -> its specifier (`"<=0.15.2,>=0.7.9"`; empty: any release)
    requires: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Table {
    releases: BTreeMap<String, BTreeMap<String, Rung>>,
}

/// Each package's rungs, oldest first.
fn table() -> &'static BTreeMap<String, Vec<(Release, Rung)>> {
    static TABLE: OnceLock<BTreeMap<String, Vec<(Release, Rung)>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let Ok(t) = serde_json::from_str::<Table>(REQUIRES_JSON) else {
            return BTreeMap::new();
        };
        t.releases
            .into_iter()
            .map(|(package, rs)| {
                let mut rs: Vec<(Release, Rung)> = rs
                    .into_iter()
                    .filter_map(|(v, r)| Some((Release::parse(&v)?, r)))
                    .collect();
                rs.sort_by_key(|(v, _)| *v);
                (package, rs)
            })
            .collect()
    })
}

fn rungs_of(package: &str) -> &'static [(Release, Rung)] {
    table().get(package).map_or(&[], Vec::as_slice)
}

/// The modelled releases of `package` (`trl`, `unsloth`, `transformers`, `vllm`), oldest first.
pub fn releases(package: &str) -> Vec<Release> {
    rungs_of(package).iter().map(|(v, _)| *v).collect()
}

/// The rung `release` of `package` reads (`rungs::find`: its line's, else the newest before).
pub fn rung_of(package: &str, release: Release) -> Option<Release> {
    rungs::find(rungs_of(package), release).map(|(v, _)| *v)
}

/// When the wheel of the rung `release` reads was built (`YYYY-MM-DD`).
pub fn built(package: &str, release: Release) -> Option<&'static str> {
    rungs::find(rungs_of(package), release).map(|(_, r)| r.built.as_str())
}

/// The rung whose METADATA `release` of `package` is read by (`trl 9.0.0`: the newest
/// modelled, `1.16.0`): what [`requirement`] answers for it.
pub fn read_as(package: &str, release: Release) -> Option<Release> {
    rungs::find(rungs_of(package), release).map(|(v, _)| *v)
}

/// What the rung `release` of `package` reads requires of `other`: its specifier, when its
/// METADATA names `other` (`Some("")`: any release).
pub fn requirement(package: &str, release: Release, other: &str) -> Option<&'static str> {
    rungs::find(rungs_of(package), release)?
        .1
        .requires
        .get(other)
        .map(String::as_str)
}

/// Whether `v` satisfies the specifier `spec` (PEP 440's `==`, `!=`, `<`, `<=`, `>`, `>=`,
/// `~=`, and `==X.*` / `!=X.*`, on the release number; an empty specifier takes anything).
pub fn allows(spec: &str, v: Release) -> bool {
    spec.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .all(|c| clause(c, v))
}

/// The release lines a specifier names in its bounds (`<=0.15.2,>=0.7.9`: 0.15 and 0.7;
/// exclusions `!=` name none).
pub fn lines_named(spec: &str) -> Vec<(u32, u32)> {
    spec.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.starts_with("!="))
        .filter_map(|c| {
            let text = c
                .trim_start_matches(['~', '=', '<', '>'])
                .trim_end_matches(".*");
            let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
        })
        .collect()
}

fn clause(c: &str, v: Release) -> bool {
    let ops = ["~=", "==", "!=", "<=", ">=", "<", ">"];
    let Some(op) = ops.iter().find(|op| c.starts_with(**op)) else {
        return true;
    };
    let text = c[op.len()..].trim();
    let (text, wildcard) = match text.strip_suffix(".*") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let parts: Vec<u32> = text
        .split('.')
        .map(|p| {
            p.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap_or(0)
        })
        .collect();
    let at = |i: usize| parts.get(i).copied().unwrap_or(0);
    let r = Release::new(at(0), at(1), at(2));
    let prefix = |v: Release| {
        let vs = [v.major, v.minor, v.patch];
        parts.iter().zip(vs).all(|(a, b)| *a == b)
    };
    match *op {
        "==" if wildcard => prefix(v),
        "!=" if wildcard => !prefix(v),
        "==" => v == r,
        "!=" => v != r,
        "<=" => v <= r,
        ">=" => v >= r,
        "<" => v < r,
        ">" => v > r,
        // `~=X.Y.Z`: >= X.Y.Z and the same X.Y; `~=X.Y`: >= X.Y and the same X
        _ => {
            v >= r
                && (if parts.len() >= 3 {
                    v.line() == r.line()
                } else {
                    v.major == r.major
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specifiers_read_as_pip_reads_them() {
        let v = |t: &str| Release::parse(t).unwrap_or(Release::new(0, 0, 0));
        let unsloth_2025_3 = "!=0.15.0,!=0.9.0,!=0.9.1,<=0.15.2,>=0.7.9";
        assert!(allows(unsloth_2025_3, v("0.15.2")));
        assert!(!allows(unsloth_2025_3, v("0.15.0")));
        assert!(!allows(unsloth_2025_3, v("0.16.1")));
        assert!(allows("<5,>=4.56.0", v("4.57.6")) && !allows("<5,>=4.56.0", v("5.0.0")));
        assert!(!allows("!=5.0.*,>=4.56.0", v("5.0.2")));
        assert!(allows("==0.7.2", v("0.7.2")) && !allows("==0.7.2", v("0.8.5")));
        assert!(allows("", v("9.9.9")));
        assert!(allows("~=0.10.1", v("0.10.5")) && !allows("~=0.10.1", v("0.11.0")));
    }

    #[test]
    fn the_table_holds_each_rungs_metadata() {
        // unsloth 2025.3.19's METADATA: `trl!=0.15.0,...,<=0.15.2,>=0.7.9`
        let u = Release::new(2025, 3, 19);
        let trl = requirement("unsloth", u, "trl").unwrap_or_default();
        assert!(trl.contains("<=0.15.2"), "{trl}");
        // trl 0.15.2's `vllm` extra: `vllm==0.7.2`
        assert_eq!(
            requirement("trl", Release::new(0, 15, 2), "vllm"),
            Some("==0.7.2")
        );
        assert_eq!(built("trl", Release::new(0, 15, 2)), Some("2025-02-25"));
        for p in ["trl", "unsloth", "transformers", "vllm"] {
            assert!(releases(p).len() >= 5, "{p}");
        }
    }
}
