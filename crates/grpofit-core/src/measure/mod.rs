//! What real runs measured: the run log's lines (`measured`), what is kept of a long log
//! (`kept`), following a log as it grows (`tail`, `follow`), the calibration learned from
//! finished runs (`calibration`), and the one comparison of a run with its log that `check`
//! and `--follow` share (`check`).

pub mod calibration;
pub mod check;
pub mod follow;
pub mod kept;
pub mod lines;
pub mod measured;
mod median;
pub mod predicted_time;
pub mod reward_seconds;
pub mod reward_time;
pub mod step_time;
pub mod tail;
