//! vLLM's own `max_num_seqs` and `max_num_batched_tokens` when the caller passes neither, as
//! `trl vllm-serve` does (no TRL release passes them) and TRL 0.18's colocated `LLM(...)` does
//! for the tokens, by the vLLM release in force and by how TRL starts vLLM. `EngineArgs` leaves both `None` in every release of the ladder
//! (`contract/vllm_ladder.json`); vLLM fills them at start-up, by usage context and card size:
//! - vLLM 0.7 runs its V0 engine: `EngineArgs.__post_init__` sets `max_num_seqs = 256` (vllm
//!   0.7.2 engine/arg_utils.py), and `SchedulerConfig.__post_init__` (config.py)
//!   `max_num_batched_tokens = max(max_model_len, 2048)`, or 2048 when `create_engine_config`
//!   turns chunked prefill on for a context over 32768 tokens; the usage context is not read.
//! - vLLM 0.8 to 0.23 (V1): `_set_default_args_v1` (0.8.5), `_set_default_args` (0.10.2, 0.11.0),
//!   `get_batch_defaults` (0.12.0 to 0.23.0): on a card of 70 GiB or more 1024 sequences and
//!   16384 tokens for `LLM(...)` (`UsageContext.LLM_CLASS`), 8192 for `vllm serve`
//!   (`OPENAI_API_SERVER`); else 256 sequences, 8192 / 2048 tokens. From 0.10 an A100 takes the
//!   smaller pair whatever its size; the plan has no card name, so an A100 80 GB is sized the
//!   larger way (over, not under).
//! - vLLM 0.28 on (`get_batch_defaults`, 0.28.0 and 0.31.0): a card of 160 GiB or more takes 1024
//!   and 16384 in both contexts. vLLM lines between two releases read take the older's rule, as
//!   the ladder's rungs do.

use crate::contract::release::Release;
use crate::units::GIB;

/// How `trl vllm-serve` starts vLLM: TRL before 1.11 builds `LLM(...)` in its own process
/// (trl 0.16.1 to 1.10.0 scripts/vllm_serve.py `llm_worker`, usage context `LLM_CLASS`); from
/// 1.11 it runs `vllm serve` (trl 1.11.0 to 1.15.0 `build_command`, `OPENAI_API_SERVER`).
fn serve_builds_llm(trl: Release) -> bool {
    trl.line() < (1, 11)
}

/// `(max_num_seqs, max_num_batched_tokens)` of the vLLM `trl vllm-serve` starts on a
/// `capacity`-byte card, for a `max_model_len`-token context.
pub(crate) fn server_batch_defaults(
    trl: Release,
    vllm: Release,
    capacity: u64,
    max_model_len: u64,
) -> (u64, u64) {
    engine_batch_defaults(vllm, serve_builds_llm(trl), capacity, max_model_len)
}

/// `max_num_batched_tokens` of TRL's colocated `LLM(...)`: 4096 from trl 0.19 ("Latest vLLM
/// v1 memory profiler is misled by the high default value", trl 0.19.1 to 1.15.0); trl 0.18.2's
/// `GRPOTrainer.__init__` passes `max_num_seqs` only, so vLLM's `LLM(...)` default applies.
pub(crate) fn colocated_batched_tokens(
    trl: Release,
    vllm: Release,
    capacity: u64,
    max_model_len: u64,
) -> u64 {
    if trl.line() >= (0, 19) {
        4096
    } else {
        engine_batch_defaults(vllm, true, capacity, max_model_len).1
    }
}

/// vLLM's defaults for a caller that passes neither; `offline`: started as `LLM(...)`.
fn engine_batch_defaults(
    vllm: Release,
    offline: bool,
    capacity: u64,
    max_model_len: u64,
) -> (u64, u64) {
    if vllm.line() < (0, 8) {
        let tokens = if max_model_len > 32768 {
            2048
        } else {
            max_model_len.max(2048)
        };
        return (256, tokens);
    }
    if vllm.line() >= (0, 28) && capacity >= 160 * GIB {
        (1024, 16384)
    } else if capacity >= 70 * GIB {
        (1024, if offline { 16384 } else { 8192 })
    } else {
        (256, if offline { 8192 } else { 2048 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_follow_trl_and_vllm() {
        let (trl_new, trl_old) = (Release::new(1, 15, 0), Release::new(1, 10, 0));
        let (vllm_new, vllm_mid) = (Release::new(0, 31, 0), Release::new(0, 23, 0));
        let h100 = 80 * GIB;
        let b200 = 180 * GIB;
        let t4 = 15 * GIB;
        assert_eq!(
            server_batch_defaults(trl_new, vllm_new, h100, 4096),
            (1024, 8192)
        );
        assert_eq!(
            server_batch_defaults(trl_old, vllm_mid, h100, 4096),
            (1024, 16384)
        );
        assert_eq!(
            server_batch_defaults(trl_new, vllm_new, t4, 4096),
            (256, 2048)
        );
        assert_eq!(
            server_batch_defaults(trl_old, vllm_mid, t4, 4096),
            (256, 8192)
        );
        assert_eq!(
            server_batch_defaults(trl_new, vllm_new, b200, 4096),
            (1024, 16384)
        );
        assert_eq!(
            server_batch_defaults(trl_new, vllm_mid, b200, 4096),
            (1024, 8192)
        );
        // vLLM 0.7's V0 engine: the context, at least 2048; chunked prefill over 32768
        let v07 = Release::new(0, 7, 2);
        let trl_016 = Release::new(0, 16, 1);
        assert_eq!(server_batch_defaults(trl_016, v07, h100, 4096), (256, 4096));
        assert_eq!(server_batch_defaults(trl_016, v07, h100, 1024), (256, 2048));
        assert_eq!(
            server_batch_defaults(trl_016, v07, h100, 131072),
            (256, 2048)
        );
        // TRL's colocated LLM(...): 4096 from trl 0.19; trl 0.18 leaves vLLM's offline default
        let trl_018 = Release::new(0, 18, 2);
        assert_eq!(colocated_batched_tokens(trl_new, vllm_new, t4, 4096), 4096);
        let v085 = Release::new(0, 8, 5);
        assert_eq!(colocated_batched_tokens(trl_018, v085, h100, 4096), 16384);
        assert_eq!(colocated_batched_tokens(trl_018, v085, t4, 4096), 8192);
        // EngineArgs itself leaves both to these rules in every release read
        for v in crate::contract::vllm_ladder::releases() {
            for key in ["max_num_seqs", "max_num_batched_tokens"] {
                assert_eq!(
                    crate::contract::vllm_ladder::engine_default(v, key),
                    Some(&serde_json::Value::Null),
                    "{v} {key}"
                );
            }
        }
    }
}
