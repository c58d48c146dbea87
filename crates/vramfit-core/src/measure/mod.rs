//! What real runs measured: the run log's lines (`measured`), following a log as it grows
//! (`tail`, `follow`) and the calibration learned from finished runs (`calibration`).

pub mod calibration;
pub mod follow;
pub mod measured;
pub mod tail;
