//! The levers of a run pinned to an older trainer: only the ones whose key that release takes.

use super::*;
use crate::memory::estimate::GpuBudget;

/// Qwen2.5-7B LoRA with TRL, vLLM colocated with a 16384-token context, on 16 GiB: it does not
/// fit, and on TRL 1.15 shortening the context (`vllm_max_model_length`) is one of its levers.
const TRL_COLOCATED: &str = include_str!("../../tests/fixtures/trl_colocated_7b.toml");

/// The run of `TRL_COLOCATED` pinned to `trl`.
fn pinned(trl: &str) -> RunConfig {
    let text = TRL_COLOCATED.replace("1.15.0", trl);
    crate::config::parse(&text, "trl.toml", None, &crate::resolve::Offline::default())
        .unwrap()
        .run
}

fn levers_offered(run: &RunConfig) -> Vec<Lever> {
    let gpu = GpuBudget {
        capacity: 16 << 30,
        used_by_others: 0,
        context: None,
    };
    step_downs(run, gpu, &mut Estimator::new())
        .into_iter()
        .map(|s| s.change.lever)
        .collect()
}

/// The screen's deeper rungs: each further down its lever than the first (memory need not fall
/// with each: Unsloth sizes vLLM from the context too).
#[test]
fn deeper_rungs_go_further_down_each_lever() {
    let run = crate::config::parse(
        crate::presets::tests::RUN_24GB,
        "24gb",
        None,
        &crate::resolve::Offline::from_env(),
    )
    .unwrap()
    .run;
    let gpu = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 0,
        context: None,
    };
    let mut est = Estimator::new();
    let first = step_downs(&run, gpu, &mut est);
    let deeper = deeper_steps(&run, gpu, &mut est, 3);
    assert!(!deeper.is_empty());
    for s in &deeper {
        let one = first
            .iter()
            .find(|f| f.change.lever == s.change.lever)
            .expect("a deeper rung of a lever that steps");
        let value = |c: &Change| c.to.trim_matches('"').parse::<f64>().ok();
        if let (Some(from), Some(a), Some(b)) = (
            one.change.from.parse::<f64>().ok(),
            value(&one.change),
            value(&s.change),
        ) {
            assert!((from - b).abs() > (from - a).abs(), "{:?}", s.change);
            assert_eq!(a < from, b < from, "{:?}", s.change);
        }
    }
}

#[test]
fn a_lever_whose_key_the_pinned_trl_lacks_is_never_offered() {
    let now = levers_offered(&pinned("1.15.0"));
    assert!(now.contains(&Lever::SequenceLength), "{now:?}");
    // `vllm_max_model_length` is a GRPOConfig key from trl 0.26 (the TRL ladder)
    for old in ["0.14.0", "0.19.1", "0.23.0", "0.25.1"] {
        let run = pinned(old);
        let offered = levers_offered(&run);
        assert!(
            !offered.contains(&Lever::SequenceLength),
            "{old}: {offered:?}"
        );
        // the levers every release has are still offered
        assert!(offered.contains(&Lever::MicroBatch), "{old}: {offered:?}");
        assert!(!Lever::SequenceLength.exists_in(&run), "{old}");
        assert!(!Lever::SequenceLength.applies(&run), "{old}");
    }
    for new in ["0.26.2", "0.28.0", "0.29.1"] {
        assert!(Lever::SequenceLength.exists_in(&pinned(new)), "{new}");
    }
}

#[test]
fn moving_vllm_to_a_server_needs_the_pinned_trl_to_have_vllm_mode() {
    // `vllm_mode` is a GRPOConfig key from trl 0.18
    assert!(!Lever::VllmServerGpus.exists_in(&pinned("0.14.0")));
    assert!(Lever::VllmServerGpus.exists_in(&pinned("0.19.1")));
    assert!(Lever::VllmServerGpus.exists_in(&pinned("1.15.0")));
}
