//! Export then import gives back the same run, over the whole knob space.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::arch::catalog;
use grpofit_core::config::export::{ExportContext, to_toml};
use grpofit_core::config::parse;
use grpofit_core::run::knobs::Knob;
use grpofit_core::run::rules;
use grpofit_core::run::{
    ALL_LINEAR, Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack,
};
use proptest::prelude::*;

fn run_strategy() -> impl Strategy<Value = RunConfig> {
    let ids: Vec<&'static str> = catalog::ids().collect();
    (
        (
            0..ids.len(),
            any::<bool>(),
            0usize..3,
            1u64..64,
            1u64..64,
            // num_generations from its declared floor (GRPO needs two completions to compare)
            Knob::Generations.range().0..64,
            1u64..4,
        ),
        (
            1u64..4096,
            1u64..4096,
            0u64..4096,
            1u64..512,
            1u64..512,
            1u64..128,
        ),
        (
            0usize..3,
            0usize..5,
            prop_oneof![Just(0.0), Just(0.04), Just(0.1)],
            proptest::option::of(1u64..20),
        ),
        (
            any::<bool>(),
            any::<bool>(),
            proptest::collection::vec(any::<bool>(), 7),
        ),
    )
        .prop_map(move |(a, b, c, d)| {
            let (model, unsloth, quant, micro, accum, generations, gpus) = a;
            let (prompt, completion, extra, rank, alpha, _) = b;
            let (ckpt, opt, beta, share) = c;
            let (expandable, standby, targets) = d;
            let stack = if unsloth { Stack::Unsloth } else { Stack::Trl };
            let mut run = RunConfig::example(catalog::find(ids[model]).unwrap().arch);
            run.model_name = ids[model].to_string();
            run.stack = stack;
            run.quant = [Quant::Bf16, Quant::Nf4, Quant::Int8][quant];
            run.micro_batch = micro;
            run.grad_accum = accum;
            run.num_generations = generations;
            run.gpus = gpus;
            if stack == Stack::Trl {
                // TRL refuses a generation batch that splits a prompt's group: take the
                // largest group size up to the drawn one that divides it
                run.micro_batch = run.micro_batch.max(2);
                let batch = run.micro_batch * gpus * accum;
                run.num_generations = (2..=generations)
                    .rev()
                    .find(|g| batch.is_multiple_of(*g))
                    .unwrap_or(run.micro_batch);
            }
            run.prompt_len = prompt;
            run.completion_len = completion;
            // at times shorter than prompt + completion: the estimate warns, the file keeps it
            run.max_seq_len = if extra % 5 == 0 {
                (prompt + completion) / 2
            } else {
                prompt + completion + extra
            }
            .max(16);
            run.lora_rank = rank;
            run.lora_alpha = alpha;
            // Unsloth files always say max_lora_rank (the loader fills in vLLM's rank for r)
            run.max_lora_rank = (stack == Stack::Unsloth)
                .then(|| grpofit_core::run::vllm_max_lora_rank(rank.max(alpha % 300)));
            run.checkpointing = match (stack, ckpt) {
                (_, 0) => Checkpointing::Off,
                (Stack::Unsloth, 2) => Checkpointing::UnslothOffload,
                _ => Checkpointing::On,
            };
            run.optimizer = [
                Optimizer::AdamW,
                Optimizer::AdamW8bit,
                Optimizer::PagedAdamW,
                Optimizer::PagedAdamW8bit,
                Optimizer::Sgd,
            ][opt];
            run.beta = beta;
            run.generation = match share {
                Some(s) => Generation::ColocatedVllm {
                    share: s as f64 * 0.05,
                },
                None => Generation::Transformers,
            };
            let chosen: Vec<String> = ALL_LINEAR
                .iter()
                .zip(&targets)
                .filter(|(_, on)| **on)
                .map(|(t, _)| t.to_string())
                .collect();
            run.lora_targets = if chosen.is_empty() {
                vec!["q_proj".into()]
            } else {
                chosen
            };
            // as the loader reads them: standby is Unsloth's and drops expandable segments; TRL
            // 1.x always fuses its LM head
            run.unsloth_standby = standby && stack == Stack::Unsloth;
            run.vllm_sleep = run.unsloth_standby;
            run.expandable_segments = expandable && !run.unsloth_standby;
            run.fused_logits = stack == Stack::Trl;
            run
        })
}

/// Exports `run`, loads it back, and checks it is the same run, every trainer key one its call
/// takes.
fn round_trip(run: &RunConfig, capacity: Option<u64>) -> Result<(), TestCaseError> {
    let ctx = ExportContext {
        gpu: "test",
        gpu_memory: capacity,
        model_config: None,
        lock_effective_batch: true,
        estimate: None,
        time: None,
    };
    let text = to_toml(run, &ctx);
    let back = parse(
        &text,
        "export.toml",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    prop_assert_eq!(&back.run, run, "{}", text);
    prop_assert_eq!(back.gpu_memory, capacity);
    prop_assert!(
        back.notes.iter().all(|n| !n.contains("not exported")),
        "{:?}",
        back.notes
    );
    // every trainer key is a keyword its call takes, by name (trl 1.15, peft 0.21, unsloth 2026.10)
    let root: toml::Table = text.parse().unwrap();
    for table in grpofit_core::contract::Table::ALL {
        let (Some(call), Some(t)) = (
            table.call(run.stack),
            root.get(table.name()).and_then(|v| v.as_table()),
        ) else {
            continue;
        };
        for key in t.keys() {
            prop_assert!(
                call.accepts(key),
                "[{}] {} is no keyword of {}",
                table.name(),
                key,
                call.name()
            );
        }
    }
    // each knob is written under its own key, with its value
    for knob in Knob::ALL {
        let Some(value) = knob.get(run) else { continue };
        let (table, key) = knob.key(run.stack);
        let written = root
            .get(table.name())
            .and_then(|t| t.get(key))
            .and_then(|v| match knob {
                // the share in whole hundredths, as the knob holds it
                Knob::VllmShare => v.as_float().map(|x| (x * 100.0).round() as i64),
                _ => v.as_integer(),
            });
        prop_assert_eq!(written, Some(value as i64), "{} {}", knob, text);
    }
    Ok(())
}

proptest! {
    #[test]
    fn load_of_export_is_the_same_run(run in run_strategy(), capacity in proptest::option::of(grpofit_core::units::MIN_GPU_MEMORY..(200u64 << 30))) {
        round_trip(&run, capacity)?;
    }

    /// Each knob at any value of its declared range (log-uniform, both ends included), the
    /// others as drawn: exported under its key and loaded back the same. A sequence shorter
    /// than prompt + completion is a warning, not a change, so it loads back as written too.
    #[test]
    fn every_knob_anywhere_in_its_range_loads_back(
        run in run_strategy(),
        knob in prop::sample::select(Knob::ALL.to_vec()),
        at in prop_oneof![Just(0.0), Just(1.0), 0.0f64..1.0],
    ) {
        let (lo, hi) = knob.range();
        let value = ((lo as f64) * (hi as f64 / lo as f64).powf(at)).round() as u64;
        let mut run = run;
        knob.set(&mut run, value.clamp(lo, hi));
        prop_assume!(rules::validate(&run).is_ok());
        if knob.get(&run).is_some() {
            prop_assert_eq!(knob.get(&run), Some(value.clamp(lo, hi)));
        }
        round_trip(&run, None)?;
    }
}
