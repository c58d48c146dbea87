//! The `TrainingArguments` of each transformers release line grpofit models
//! (`transformers_ladder.json`, written by `tools/contract/ladder.py` from
//! transformers/training_args.py of each release's wheel): the keywords `GRPOConfig` inherits,
//! which move with the transformers installed beside TRL (`warmup_ratio` and `logging_dir` left
//! in 5.17, `overwrite_output_dir` in 5.0, `evaluation_strategy` in 4.51).

use crate::contract::release::Release;
use crate::contract::rungs;
use std::sync::OnceLock;

const LADDER_JSON: &str = include_str!("transformers_ladder.json");

#[derive(serde::Deserialize)]
struct Rung {
    keys: Vec<String>,
}

fn rungs() -> &'static [(Release, Rung)] {
    static RUNGS: OnceLock<Vec<(Release, Rung)>> = OnceLock::new();
    RUNGS.get_or_init(|| rungs::load(LADDER_JSON))
}

/// Whether transformers `release`'s `TrainingArguments` has the field `key`.
pub fn training_accepts(release: Release, key: &str) -> bool {
    rungs::find(rungs(), release).is_some_and(|(_, r)| r.keys.iter().any(|k| k == key))
}

/// The rungs' releases whose `TrainingArguments` has `key`, oldest first.
pub fn releases_taking(key: &str) -> Vec<Release> {
    rungs()
        .iter()
        .filter(|(_, r)| r.keys.iter().any(|k| k == key))
        .map(|(v, _)| *v)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_transformers_keep_the_keys_5_x_dropped() {
        let old = Release::new(4, 46, 3);
        let new = Release::new(5, 25, 0);
        for key in [
            "warmup_ratio",
            "overwrite_output_dir",
            "logging_dir",
            "evaluation_strategy",
        ] {
            assert!(training_accepts(old, key), "{key}");
            assert!(!training_accepts(new, key), "{key}");
        }
        assert!(training_accepts(Release::new(5, 10, 1), "warmup_ratio"));
        assert!(training_accepts(new, "learning_rate"));
        assert_eq!(
            releases_taking("evaluation_strategy").last(),
            Some(&Release::new(4, 50, 3))
        );
    }
}
