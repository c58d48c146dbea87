//! Checkpoint saves inside the step's timing. transformers' `Trainer` saves every `save_steps`
//! optimizer steps under `save_strategy = "steps"` (TrainingArguments' defaults: 500, "steps";
//! `Trainer._save_checkpoint`, transformers 4.56): the model (`save_model`: the adapters alone
//! for a PEFT model, every weight for full fine-tuning) and, unless `save_only_model`, the
//! optimizer's state (`torch.save(self.optimizer.state_dict(), ...)`). The save blocks the loop;
//! the Hub push that `push_to_hub` adds does not (`_push_from_checkpoint` uploads with
//! `run_as_future=True`). The save's seconds are charged to every step, amortised over
//! `save_steps`; `"epoch"`, `"best"` and `"no"` charge none.

use super::TimeKeys;
use crate::contract::Call;
use crate::run::{Optimizer, RunConfig};

/// Bytes a second a checkpoint is written at: Compute Engine's persistent-disk write ceiling for
/// a VM of 2 to 7 vCPUs at full network use, 647 MB/s (Google Cloud "Optimize Persistent Disk
/// performance", the network egress caps on write throughput table: the cloud notebooks' and
/// small GPU VMs' disk is such a network disk).
pub const DISK_WRITE_BYTES_PER_SECOND: f64 = 647e6;

/// Optimizer steps between two saves, when the run saves by steps: `save_steps` (a ratio of
/// the run's steps when under 1, as TrainingArguments reads it), else its default.
fn save_every(keys: &TimeKeys) -> Option<f64> {
    let strategy = keys
        .save_strategy
        .as_deref()
        .or(Call::GrpoConfig.default_str("save_strategy"))?;
    if strategy != "steps" {
        return None;
    }
    let steps = keys
        .save_steps
        .or(Call::GrpoConfig.default_f64("save_steps"))?;
    let every = if steps < 1.0 {
        steps * keys.max_steps? as f64
    } else {
        steps
    };
    (every >= 1.0).then_some(every.floor())
}

/// Bytes one save writes: the trainable weights (PEFT keeps its adapters in fp32, its
/// `autocast_adapter_dtype`; full fine-tuning the model's 16-bit weights), and the optimizer's
/// state for them (AdamW's two fp32 moments, bitsandbytes' 8-bit pair, none for plain SGD).
fn save_bytes(run: &RunConfig, trainable: f64, keys: &TimeKeys) -> f64 {
    let weights = if run.full_finetuning {
        trainable * 2.0
    } else {
        trainable * 4.0
    };
    let state = match run.optimizer {
        Optimizer::AdamW | Optimizer::PagedAdamW => 8.0,
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => 2.0,
        Optimizer::Sgd => 0.0,
    };
    let optimizer = if keys.save_only_model == Some(true) {
        0.0
    } else {
        trainable * state
    };
    weights + optimizer
}

/// Seconds the checkpoint saves add to each optimizer step, for `trainable` parameters.
pub(super) fn seconds(run: &RunConfig, trainable: f64, keys: &TimeKeys) -> f64 {
    save_every(keys).map_or(0.0, |every| {
        save_bytes(run, trainable, keys) / DISK_WRITE_BYTES_PER_SECOND / every
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn run() -> RunConfig {
        RunConfig::example(catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch)
    }

    #[test]
    fn the_trainer_saves_every_500_steps_unless_told_otherwise() {
        let keys = TimeKeys::default();
        assert_eq!(save_every(&keys), Some(500.0));
        let no = TimeKeys {
            save_strategy: Some("no".into()),
            ..TimeKeys::default()
        };
        assert_eq!(seconds(&run(), 1e9, &no), 0.0);
        let ratio = TimeKeys {
            save_steps: Some(0.1),
            max_steps: Some(640),
            ..TimeKeys::default()
        };
        assert_eq!(save_every(&ratio), Some(64.0));
    }

    #[test]
    fn a_full_fine_tune_writes_its_weights_and_adams_two_moments() {
        let mut full = run();
        full.full_finetuning = true;
        let every_10 = TimeKeys {
            save_steps: Some(10.0),
            ..TimeKeys::default()
        };
        // 7.6e9 parameters: 2 bytes of weights and 8 of moments each, 76 GB at 647 MB/s over 10
        let p = 7.6e9;
        let want = p * 10.0 / 647e6 / 10.0;
        assert!((seconds(&full, p, &every_10) - want).abs() < 1e-9);
        let model_only = TimeKeys {
            save_only_model: Some(true),
            ..every_10.clone()
        };
        assert!((seconds(&full, p, &model_only) - p * 2.0 / 647e6 / 10.0).abs() < 1e-9);
        // LoRA: fp32 adapters and their moments
        let lora = run();
        assert!((seconds(&lora, 1e8, &every_10) - 1e8 * 12.0 / 647e6 / 10.0).abs() < 1e-9);
    }
}
