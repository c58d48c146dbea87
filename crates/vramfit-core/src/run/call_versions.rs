//! The releases a run's trainer calls are made against, as the contract's ladders read them
//! (`contract::accepts::accepts(call, key, &run.call_versions())`).

use crate::contract::accepts::CallVersions;
use crate::contract::release::Release;
use crate::run::RunConfig;

impl RunConfig {
    /// The run's pinned TRL, Unsloth and vLLM (the vLLM by its release line, as the run
    /// file's `vllm_version` gives it).
    pub fn call_versions(&self) -> CallVersions {
        CallVersions {
            trl: self.versions.trl,
            unsloth: self.versions.unsloth,
            vllm: Release::new(self.vllm_version.major, self.vllm_version.minor, 0),
        }
    }
}
