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
pub fn role_fits_with_headroom(role: &Role, headroom: f64) -> bool {
    let limit = role.capacity_bytes as f64 * (1.0 - headroom);
    (role.total_bytes as f64) <= limit && role.vllm.as_ref().is_none_or(|v| v.starts)
}

/// Whether `role` fits its GPUs yet keeps less than [`DEFAULT_HEADROOM`] free: `estimate` says
/// "fits, but under the 5% headroom fit keeps", since `fit` would change it.
pub fn under_headroom(role: &Role) -> bool {
    role.fits && !role_fits_with_headroom(role, DEFAULT_HEADROOM)
}

/// Whether the run fits every GPU yet some role keeps less than [`DEFAULT_HEADROOM`] free.
pub fn estimate_under_headroom(est: &Estimate) -> bool {
    est.fits && est.roles.iter().any(under_headroom)
}

/// [`DEFAULT_HEADROOM`] in percent, as the commands and the screen write it (`5%`, as `fit`'s
/// "keeping 5% free").
pub fn headroom_percent() -> String {
    let p = DEFAULT_HEADROOM * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}%", p.round() as i64)
    } else {
        format!("{p:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::roles::RoleKind;

    fn role(total: u64, capacity: u64) -> Role {
        Role {
            role: RoleKind::Training,
            gpus: 1,
            capacity_bytes: capacity,
            total_bytes: total,
            fits: total <= capacity,
            headroom_bytes: capacity as i64 - total as i64,
            components: Vec::new(),
            phases: Vec::new(),
            vllm: None,
        }
    }

    #[test]
    fn a_run_with_less_free_than_fits_headroom_is_under_it() {
        assert!(under_headroom(&role(955, 1000)) && !under_headroom(&role(950, 1000)));
        assert!(!under_headroom(&role(1001, 1000)));
        assert_eq!(headroom_percent(), "5%");
    }
}
