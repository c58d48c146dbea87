//! The rungs of a release ladder (`unsloth_ladder.json`, `vllm_ladder.json`, written by
//! `tools/contract/stack_ladders.py` from each release's wheel) and which rung a release reads.

use crate::contract::release::Release;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// One call's keyword parameters in one release, as the ladder files spell it (whether it also
/// takes `**kwargs`, `accepts_other_kwargs` in the file, is not read: the export writes only
/// keywords a call names).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Signature {
    /// the defaults the source spells as constants
    pub(crate) defaults: BTreeMap<String, serde_json::Value>,
    /// every keyword it names, sorted
    pub(crate) keys: Vec<String>,
}

impl Signature {
    /// Whether the call names `key` among its parameters.
    pub(crate) fn names(&self, key: &str) -> bool {
        self.keys.binary_search_by(|k| k.as_str().cmp(key)).is_ok()
    }
}

#[derive(serde::Deserialize)]
struct Ladder<T> {
    releases: BTreeMap<String, T>,
}

/// The rungs of a generated ladder file, oldest first (the file is compiled in and checked by
/// the tests: a malformed one reads as no rungs, never a panic).
pub(crate) fn load<T: DeserializeOwned>(json: &str) -> Vec<(Release, T)> {
    let Ok(ladder) = serde_json::from_str::<Ladder<T>>(json) else {
        return Vec::new();
    };
    let mut rungs: Vec<(Release, T)> = ladder
        .releases
        .into_iter()
        .filter_map(|(v, r)| Some((Release::parse(&v)?, r)))
        .collect();
    rungs.sort_by_key(|(v, _)| *v);
    rungs
}

/// The rung `release` reads: on its own release line, the newest rung at or before it (else
/// the line's oldest: `vllm 0.8.3` reads `0.8.5`); off the rungs' lines, the newest rung
/// before it. None before the first rung's line.
pub(crate) fn find<T>(rungs: &[(Release, T)], release: Release) -> Option<&(Release, T)> {
    let same_line = || rungs.iter().filter(|(v, _)| v.line() == release.line());
    same_line()
        .rev()
        .find(|(v, _)| *v <= release)
        .or_else(|| same_line().next())
        .or_else(|| rungs.iter().rev().find(|(v, _)| *v <= release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_reads_the_nearest_rung_of_its_line_else_the_one_before() {
        let rungs: Vec<(Release, ())> = ["2025.2.4", "2025.2.15", "2025.3.19"]
            .iter()
            .map(|v| (Release::parse(v).unwrap_or(Release::new(0, 0, 0)), ()))
            .collect();
        let at = |v: &str| find(&rungs, Release::parse(v)?).map(|(r, _)| r.to_string());
        assert_eq!(at("2025.2.10").as_deref(), Some("2025.2.4"));
        assert_eq!(at("2025.2.1").as_deref(), Some("2025.2.4"));
        assert_eq!(at("2025.2.15").as_deref(), Some("2025.2.15"));
        assert_eq!(at("2025.4.1").as_deref(), Some("2025.3.19"));
        assert_eq!(at("2024.12.1"), None);
    }
}
