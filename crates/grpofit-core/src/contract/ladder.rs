//! The GRPOConfig of each TRL release line grpofit models (`trl_ladder.json`, written by
//! `tools/contract/ladder.py` from the pinned TRL wheels): which keywords it takes and what it
//! defaults them to. A release that is not a rung takes the newest rung of its line or before.

use crate::contract::release::Release;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const LADDER_JSON: &str = include_str!("trl_ladder.json");

#[derive(Deserialize)]
struct Ladder {
    releases: BTreeMap<String, Rung>,
}

#[derive(Deserialize)]
pub struct Rung {
    defaults: BTreeMap<String, serde_json::Value>,
    keys: Vec<String>,
}

/// The rungs, oldest first.
fn rungs() -> &'static [(Release, Rung)] {
    static RUNGS: OnceLock<Vec<(Release, Rung)>> = OnceLock::new();
    RUNGS.get_or_init(|| {
        let ladder: Ladder =
            serde_json::from_str(LADDER_JSON).expect("trl_ladder.json is generated valid");
        let mut rungs: Vec<(Release, Rung)> = ladder
            .releases
            .into_iter()
            .filter_map(|(v, r)| Some((Release::parse(&v)?, r)))
            .collect();
        rungs.sort_by_key(|(v, _)| *v);
        rungs
    })
}

/// The rung `trl` reads: the newest whose release line is at or before `trl`'s.
pub fn rung_of(trl: Release) -> Option<Release> {
    rung(trl).map(|(v, _)| *v)
}

fn rung(trl: Release) -> Option<&'static (Release, Rung)> {
    rungs()
        .iter()
        .rev()
        .find(|(v, _)| (v.major, v.minor) <= (trl.major, trl.minor))
}

/// `GRPOConfig`'s default for `key` in the TRL release `trl` (None: no default, or not a key).
pub fn grpo_default(trl: Release, key: &str) -> Option<&'static serde_json::Value> {
    rung(trl)?.1.defaults.get(key)
}

/// Whether the TRL release `trl`'s `GRPOConfig` takes `key`.
pub fn grpo_accepts(trl: Release, key: &str) -> bool {
    rung(trl).is_some_and(|(_, r)| r.keys.iter().any(|k| k == key))
}

/// The rungs' releases, oldest first.
pub fn releases() -> Vec<Release> {
    rungs().iter().map(|(v, _)| *v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Call;

    #[test]
    fn the_targeted_rung_agrees_with_the_contract() {
        let target = crate::run::versions::Package::Trl.targeted();
        assert_eq!(rung_of(target), Some(target));
        for key in Call::GrpoConfig.keys() {
            assert!(grpo_accepts(target, key), "{key}");
            // the contract reads a `None` default as no default
            assert_eq!(
                grpo_default(target, key).filter(|v| !v.is_null()),
                Call::GrpoConfig.default(key).filter(|v| !v.is_null()),
                "{key}"
            );
        }
    }

    #[test]
    fn a_release_between_rungs_reads_its_lines_rung() {
        assert_eq!(
            rung_of(Release::new(0, 15, 0)),
            Some(Release::new(0, 15, 2))
        );
        assert_eq!(
            rung_of(Release::new(1, 11, 0)),
            Some(Release::new(1, 10, 0))
        );
        assert_eq!(rung_of(Release::new(0, 13, 0)), None);
        // each of 0.24 to 0.28 has its own rung: vllm_max_model_length from 0.26.2
        assert_eq!(
            rung_of(Release::new(0, 26, 0)),
            Some(Release::new(0, 26, 2))
        );
        assert!(grpo_accepts(
            Release::new(0, 26, 0),
            "vllm_max_model_length"
        ));
        assert!(!grpo_accepts(
            Release::new(0, 25, 1),
            "vllm_max_model_length"
        ));
        assert!(!grpo_accepts(Release::new(0, 14, 0), "vllm_mode"));
        assert!(grpo_accepts(Release::new(1, 15, 0), "vllm_mode"));
    }
}
