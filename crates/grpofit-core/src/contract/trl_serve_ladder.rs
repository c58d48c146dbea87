//! The flags of `trl vllm-serve` in each TRL release of the ladder (`trl_serve_ladder.json`,
//! written by `tools/contract/stack_ladders.py` from trl/scripts/vllm_serve.py,
//! `ScriptArguments`, of each release's wheel). TRL before 0.16 has no `vllm-serve`.

use crate::contract::release::Release;
use crate::contract::rungs::{self, Signature};
use std::sync::OnceLock;

const LADDER_JSON: &str = include_str!("trl_serve_ladder.json");

fn rungs() -> &'static [(Release, Option<Signature>)] {
    static RUNGS: OnceLock<Vec<(Release, Option<Signature>)>> = OnceLock::new();
    RUNGS.get_or_init(|| rungs::load(LADDER_JSON))
}

/// Whether TRL `trl` has `trl vllm-serve` at all.
pub fn has_serve(trl: Release) -> bool {
    rungs::find(rungs(), trl).is_some_and(|(_, s)| s.is_some())
}

/// Whether TRL `trl`'s `trl vllm-serve` takes the flag `--key`.
pub fn serve_accepts(trl: Release, key: &str) -> bool {
    rungs::find(rungs(), trl).is_some_and(|(_, s)| s.as_ref().is_some_and(|s| s.names(key)))
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
    fn vllm_serve_came_in_0_16_and_grew_its_flags() {
        assert!(!has_serve(Release::new(0, 15, 2)));
        assert!(has_serve(Release::new(0, 16, 1)));
        // trl 0.16.1's ScriptArguments has no data_parallel_size; 0.17.0's has
        assert!(!serve_accepts(Release::new(0, 16, 1), "data_parallel_size"));
        assert!(serve_accepts(Release::new(0, 17, 0), "data_parallel_size"));
        let target = Release::new(1, 15, 0);
        for key in Call::VllmServe.keys() {
            assert!(serve_accepts(target, key), "{key}");
        }
        assert!(releases().contains(&target));
        assert_eq!(releases().last(), Some(&Release::new(1, 16, 0)));
    }
}
