//! The releases a run's trainer calls are made against, as the contract's ladders read them
//! (`contract::accepts::accepts(call, key, &run.call_versions())`), and whether a run-file key
//! exists in those releases (what the levers ask before moving a knob).

use crate::contract::Table;
use crate::contract::accepts::{CallVersions, accepts, engine_accepts};
use crate::contract::release::Release;
use crate::run::RunConfig;

impl RunConfig {
    /// The run's pinned TRL, Unsloth, transformers and vLLM (the vLLM by its release line, as
    /// the run file's `vllm_version` gives it), on its stack.
    pub fn call_versions(&self) -> CallVersions {
        CallVersions {
            trl: self.versions.trl,
            unsloth: self.versions.unsloth,
            transformers: self.versions.transformers,
            vllm: Release::new(self.vllm_version.major, self.vllm_version.minor, 0),
            stack: self.stack,
        }
    }

    /// Whether the key `key` of `table` exists in the pinned releases: the call the table feeds
    /// on this stack takes it (`[vllm_server]`'s flags also need the pinned vLLM's
    /// `EngineArgs`, which `trl vllm-serve` passes them to). Keys of tables that feed no
    /// trainer call (`[grpofit]`, `[env]`, `[distributed]`) and `[vllm_server] gpus` are
    /// grpofit's own: always. The export leaves out exactly the keys this refuses
    /// (`config::export_keys`). For a knob: `run.pinned_release_takes(knob.key_for(run))`.
    pub fn pinned_release_takes(&self, (table, key): (Table, &str)) -> bool {
        let Some(call) = table.call(self.stack) else {
            return true;
        };
        if table == Table::VllmServer && key == "gpus" {
            return true;
        }
        let v = self.call_versions();
        accepts(call, key, &v) && (table != Table::VllmServer || engine_accepts(key, &v))
    }
}
