//! A reward model a run loads beside the trained one (`[grpofit] reward_models`).

use crate::arch::Arch;
use serde::Serialize;

/// A reward model the run loads on each training GPU (`[grpofit] reward_models`), resolved like
/// the policy model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardModel {
    pub name: String,
    pub arch: Arch,
}

impl RewardModel {
    /// Parameters of `AutoModelForSequenceClassification` with `num_labels = 1` (what trl 1.15.0
    /// `GRPOTrainer.__init__` loads for a `reward_funcs` entry that is a string): the base model
    /// without its untied LM head, and a `score` head of hidden x 1 (no bias).
    pub fn parameters(&self) -> u64 {
        let a = &self.arch;
        let head = if a.tied_embeddings {
            0
        } else {
            a.vocab * a.hidden
        };
        a.parameters() - head + a.hidden
    }
}
