//! The key that sets vLLM's context in the TRL release a run is pinned to, for the advice to
//! shorten it: the colocate key moved between releases, and some releases have none.

use crate::contract::ladder;
use crate::run::{Generation, RunConfig, Stack};

/// How the TRL run `run` sets vLLM's context, in its release's own keys (None off TRL):
/// - a vLLM server (`vllm_mode = "server"`, and every vLLM of trl 0.16 and 0.17, whose
///   `GRPOTrainer.__init__` only builds a `VLLMClient`): `trl vllm-serve --max_model_len`
///   (trl `scripts/vllm_serve.py` ScriptArguments);
/// - `vllm_max_model_length` where the release's GRPOConfig takes it (the ladder: 0.26 on);
/// - trl 0.18 to 0.25 colocated: `max_prompt_length + max_completion_length`, which
///   `GRPOTrainer.__init__` passes as `LLM(max_model_len=...)` (trl 0.19.1);
/// - `vllm_max_model_len` (trl 0.15.2 `GRPOTrainer.__init__`: `LLM(max_model_len=self.args.vllm_max_model_len)`);
/// - none in trl 0.14: its `LLM(...)` call passes no `max_model_len`, so vLLM takes the
///   model's `max_position_embeddings` (trl 0.14.0 `GRPOTrainer.__init__`).
pub(super) fn trl_context_key(run: Option<&RunConfig>) -> Option<String> {
    let run = run.filter(|r| r.stack == Stack::Trl)?;
    let trl = run.versions.trl;
    let server_only = ((0, 16)..(0, 18)).contains(&trl.line());
    // trl 0.14 and 0.15 start vLLM on a GPU of its own themselves (`vllm_device`), with the
    // trainer's keys below
    let serve = run.generation == Generation::VllmServer
        && crate::contract::trl_serve_ladder::has_serve(trl);
    Some(if serve || server_only {
        "`trl vllm-serve --max_model_len`".to_string()
    } else if ladder::grpo_accepts(trl, "vllm_max_model_length") {
        "`vllm_max_model_length`".to_string()
    } else if run.versions.trl_context_is_prompt_and_completion() {
        format!(
            "`max_prompt_length` + `max_completion_length`, now {} + {}, which trl {trl} passes to vLLM as its max_model_len",
            run.prompt_len, run.completion_len
        )
    } else if ladder::grpo_accepts(trl, "vllm_max_model_len") {
        "`vllm_max_model_len`".to_string()
    } else {
        format!(
            "no key in trl {trl}, whose vLLM takes the model's `max_position_embeddings`; `vllm_max_model_len` from trl 0.15"
        )
    })
}
