//! `[env]`: the environment variables that change memory: PyTorch's allocator settings and
//! Unsloth's vLLM standby.

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table;
use crate::run::Stack;

/// What `[env]` sets.
pub(super) struct Env {
    pub expandable_segments: bool,
    pub unsloth_standby: bool,
    pub standby_keeps_share: bool,
    /// said when standby drops the expandable segments asked for
    pub note: Option<String>,
}

/// Every variable of `[env]`, as `grpofit run` sets it for the command: a string as written,
/// a number or a boolean as TOML writes it (`1`, `0.5`, `true`); an array, a table or a date
/// is refused, naming the key and the value.
pub(super) fn env_vars(t: &Tables) -> Result<Vec<(String, String)>, LoadError> {
    let Some(table) = t.env_table() else {
        return Ok(Vec::new());
    };
    table
        .iter()
        .map(|(key, value)| {
            // what the environment cannot hold: execve(2) splits `NAME=value` at the first `=`
            if key.is_empty() || key.contains(['=', '\0']) {
                return Err(t.wrong_key(
                    Table::Env,
                    key,
                    "not an environment variable's name (empty, or with `=` or NUL in it)",
                ));
            }
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                    value.to_string()
                }
                _ => {
                    return Err(t.wrong(
                        Table::Env,
                        key,
                        value,
                        "expected a string, a number or a boolean (an environment variable's value)",
                    ));
                }
            };
            if text.contains('\0') {
                return Err(t.wrong_key(
                    Table::Env,
                    key,
                    "the value holds a NUL character, which no environment variable can",
                ));
            }
            Ok((key.clone(), text))
        })
        .collect()
}

/// Reads `[env]` (any variable may be there; only these are read).
pub(super) fn read_env(t: &Tables) -> Env {
    let asked_expandable = t
        .env("PYTORCH_CUDA_ALLOC_CONF")
        .unwrap_or("")
        .contains("expandable_segments:True");
    let standby = t.env_flag("UNSLOTH_VLLM_STANDBY") && t.stack == Stack::Unsloth;
    Env {
        // Unsloth strips expandable_segments when standby is on (unsloth_zoo/__init__.py), and
        // its patched vLLM allocator refuses to start with them
        expandable_segments: asked_expandable && !standby,
        unsloth_standby: standby,
        standby_keeps_share: t.env_flag("UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE"),
        note: (standby && asked_expandable).then(|| {
            "`[env] PYTORCH_CUDA_ALLOC_CONF`: Unsloth removes expandable_segments when UNSLOTH_VLLM_STANDBY=1 (its standby allocator refuses them); estimated without".to_string()
        }),
    }
}
