//! vramfit's integration tests, one binary (one link): a module per area.

mod calibrate_cli;
mod calibration;
mod cli;
mod common;
mod diagnose;
mod fit;
mod hub;
mod hub_remote;
mod keep_keys;
mod launch_set;
mod loop_cli;
mod model;
mod multi_gpu;
mod no_debug_output;
mod oom;
mod realworld;
mod recipes_cli;
mod roundtrip;
mod safetensors;
mod scale;
mod svg;
mod trainer_keys;
mod tui;
mod tui_hub;
mod tui_tmux;
