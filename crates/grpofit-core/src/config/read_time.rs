//! What the run file says about time: the card (`[grpofit] gpu`, or its figures `gpu_tflops`
//! and `gpu_bandwidth`), the completions' mean length (`mean_completion_length`), the seconds a
//! completion's rewards take (`reward_seconds`), and how many
//! steps the run takes (`[grpo] max_steps`, or `[grpofit] dataset_size` over
//! `[grpo] num_train_epochs`).

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::time::{GPU_BANDWIDTH_RANGE, GPU_TFLOPS_RANGE, TimeKeys};

pub(super) fn read_time(t: &Tables) -> Result<TimeKeys, LoadError> {
    let gpu = t.text(T::Grpofit, "gpu")?.map(str::to_string);
    if let Some(name) = gpu.as_deref()
        && name.trim().is_empty()
    {
        return Err(t.wrong(
            T::Grpofit,
            "gpu",
            format!("{name:?}"),
            "blank: name a card, e.g. \"H100\"",
        ));
    }
    let (tf, bw) = (GPU_TFLOPS_RANGE, GPU_BANDWIDTH_RANGE);
    let rs = crate::time::rewards::REWARD_SECONDS_RANGE;
    Ok(TimeKeys {
        gpu,
        gpu_tflops: t.float(T::Grpofit, "gpu_tflops", tf.0, tf.1)?,
        gpu_bandwidth: t.float(T::Grpofit, "gpu_bandwidth", bw.0, bw.1)?,
        // a decimal as the trainer logs `completion_length`; above the cap it is timed at the cap
        mean_completion_length: t.float(T::Grpofit, "mean_completion_length", 1.0, 16_777_216.0)?,
        reward_seconds: t.float(T::Grpofit, "reward_seconds", rs.0, rs.1)?,
        // `max_steps = -1` (the trainer's default) means "from the epochs"
        max_steps: match t.get(T::Grpo, "max_steps")?.and_then(|v| v.as_integer()) {
            Some(n) if n > 0 => Some(n as u64),
            _ => None,
        },
        dataset_size: t.int(T::Grpofit, "dataset_size", 1, u64::MAX >> 1)?,
        save_steps: t.float(T::Grpo, "save_steps", 0.0, 1e12)?,
        save_strategy: t.text(T::Grpo, "save_strategy")?.map(str::to_string),
        save_only_model: t.boolean(T::Grpo, "save_only_model")?,
        num_train_epochs: t.float(T::Grpo, "num_train_epochs", 0.0, 1e6)?,
    })
}
