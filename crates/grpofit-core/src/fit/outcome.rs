//! What a fit answers: the changes it made, or why nothing fits; and when a run fits with the
//! headroom a fit keeps.

use super::lever::Lever;
use crate::memory::estimate::Estimate;
use crate::memory::roles::Role;
use crate::run::RunConfig;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub lever: Lever,
    pub key: &'static str,
    pub from: String,
    pub to: String,
    /// total bytes this change saves, applied after the changes listed before it
    pub bytes_saved: i64,
    pub trade_off: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum FitOutcome {
    AlreadyFits {
        estimate: Estimate,
    },
    Fitted {
        changes: Vec<Change>,
        cost: f64,
        estimate: Estimate,
        #[serde(skip)]
        run: Box<RunConfig>,
    },
    /// nothing on the grid fits: every lever at its floor still needs `smallest_gpu_bytes`
    Impossible {
        floors: Vec<String>,
        smallest_gpu_bytes: u64,
        estimate: Estimate,
    },
}

/// The memory `fit` leaves free unless told otherwise: 5 % of the capacity, above the
/// calibration's p90 error on PyTorch's reserved memory (4.35 %, over the measurements in calibration/).
pub const DEFAULT_HEADROOM: f64 = 0.05;

/// Whether `est` fits with `headroom` (a fraction of the capacity) to spare and vLLM starts
/// (free memory for its share, and a KV cache that holds one sequence of its context).
pub fn fits_with_headroom(est: &Estimate, headroom: f64) -> bool {
    est.roles
        .iter()
        .all(|r| role_fits_with_headroom(r, headroom))
}

/// Whether one role's GPUs keep `headroom` free and its vLLM, if any, starts.
pub(super) fn role_fits_with_headroom(role: &Role, headroom: f64) -> bool {
    let limit = role.capacity_bytes as f64 * (1.0 - headroom);
    (role.total_bytes as f64) <= limit && role.vllm.as_ref().is_none_or(|v| v.starts)
}
