//! Why vLLM refuses to start: the three start-up checks vLLM makes before it serves, shared by
//! the estimate (which predicts the refusal) and `diagnose` (which reads vLLM's message).

use serde::Serialize;
use std::fmt;

/// One of vLLM's start-up checks that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VllmRefusal {
    /// less memory is free when vLLM starts than its share asks for: vllm 0.11's
    /// `Worker.determine_available_memory` / `request_memory` ("Free memory on device ... is
    /// less than desired GPU memory utilization")
    FreeMemory,
    /// its share leaves no room for a single KV cache block once the weights, the profiled
    /// activations and the CUDA graphs are in ("No available memory for the cache blocks")
    NoCacheBlocks,
    /// the KV cache cannot hold one request of `max_model_len`: vLLM's
    /// `_check_enough_kv_cache_memory` (`kv_cache_utils.py`; before V1, "the maximum number of
    /// tokens that can be stored in KV cache")
    KvCacheTooSmall,
}

impl VllmRefusal {
    /// The check in the user's words.
    pub fn name(self) -> &'static str {
        match self {
            VllmRefusal::FreeMemory => "less memory free than its share asks for",
            VllmRefusal::NoCacheBlocks => "no room for a single KV cache block",
            VllmRefusal::KvCacheTooSmall => "its KV cache cannot hold one full-length sequence",
        }
    }
}

impl fmt::Display for VllmRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A predicted refusal: which check fails, and the numbers in vLLM's own words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub reason: VllmRefusal,
    pub detail: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}
