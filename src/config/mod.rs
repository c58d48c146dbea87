//! The TOML run file shared by presets and exports.
