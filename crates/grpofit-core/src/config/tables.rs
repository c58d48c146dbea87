//! The tables of a run file, checked against the trainer contract: each trainer table may hold
//! only keyword arguments its call accepts; a key the targeted trainer retired is read from its
//! old place with a note; typed getters say the table, key, value and line when something is
//! wrong.

use super::error::LoadError;
use super::lines::Lines;
use crate::arch::catalog::edit_distance;
use crate::contract::accepts::{CallVersions, releases_taking};
use crate::contract::{self, Call, Retired, Table, field_types};
use crate::run::Stack;
use crate::run::knobs::Knob;
use crate::run::versions::{Pinned, StackVersions};
use std::fmt::Display;
use toml::Value;

/// What `[grpofit]` itself holds: the assumptions only grpofit reads (docs/run-file.md, "[grpofit]").
pub const GRPOFIT_KEYS: &[&str] = &[
    "stack",
    "gpu_memory",
    "gpus",
    "model_config",
    "lock_effective_batch",
    "max_prompt_length",
    "vllm_version",
    "trl_version",
    "unsloth_version",
    "transformers_version",
    "nodes",
    "reward_models",
    "other_gpu_memory",
    "gpu",
    "gpu_tflops",
    "gpu_bandwidth",
    "mean_completion_length",
    "reward_seconds",
    "dataset_size",
];

/// What `[distributed]` holds: how the training processes share the model, in accelerate's
/// and DeepSpeed's terms (docs/run-file.md, "[distributed]"; written out as accelerate.yaml / ds_config.json).
pub const DISTRIBUTED_KEYS: &[&str] =
    &["engine", "zero_stage", "offload_optimizer", "offload_param"];

/// The keys grpofit itself reads in `table`, beside those of the table's trainer call:
/// `[grpofit]` and `[distributed]` whole, and how many GPUs `[vllm_server]` runs on.
pub fn own_keys(table: Table) -> &'static [&'static str] {
    match table {
        Table::Grpofit => GRPOFIT_KEYS,
        Table::Distributed => DISTRIBUTED_KEYS,
        Table::VllmServer => &["gpus"],
        Table::Model | Table::Lora | Table::Grpo | Table::Env => &[],
    }
}

/// The run file's tables, with the stack that decides which call each one feeds.
pub struct Tables<'a> {
    root: &'a toml::Table,
    lines: &'a Lines<'a>,
    pub stack: Stack,
    /// the trainer versions in force (their defaults differ by release)
    pub versions: StackVersions,
    /// each package's resolved version and where it came from
    pub pins: Vec<Pinned>,
    /// retired keys met, in words, for the user
    pub notes: Vec<String>,
}

/// `(did you mean `x`?)` for the nearest of `known`, when one is near.
pub fn suggest<'k>(key: &str, known: impl IntoIterator<Item = &'k str>) -> String {
    // the edit distance is at least the difference in length: only keys within 4 characters'
    // length are measured, so a very long key costs nothing
    let len = key.chars().count();
    let best = known
        .into_iter()
        .filter(|k| k.chars().count().abs_diff(len) <= 4)
        .map(|k| (edit_distance(key, k), k))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((d, b)) if d <= 4 => format!(" (did you mean `{b}`?)"),
        _ => String::new(),
    }
}

impl<'a> Tables<'a> {
    /// Checks the table names and reads the stack. `lines` is the same text's. The keys are
    /// checked once the versions are resolved ([`Tables::check_keys_at`]).
    pub fn new(root: &'a toml::Table, lines: &'a Lines<'a>) -> Result<Tables<'a>, LoadError> {
        let names = Table::ALL.map(Table::name);
        for key in root.keys() {
            let line = lines.of(key, None);
            if !names.contains(&key.as_str()) {
                let message = format!(
                    "unknown table `[{key}]`{}",
                    suggest(key, names.iter().copied())
                );
                return Err(LoadError::sentence(key, None, message).on_line(line));
            }
            if !root[key].is_table() {
                let message = format!("`{key}` must be a table ([{key}])");
                return Err(LoadError::sentence(key, None, message).on_line(line));
            }
        }
        let mut tables = Tables {
            root,
            lines,
            stack: Stack::Unsloth,
            versions: StackVersions::default(),
            pins: Vec::new(),
            notes: Vec::new(),
        };
        tables.stack = tables.read_stack()?;
        Ok(tables)
    }

    /// Every key of every table is one some modelled release's call takes (or a retired key,
    /// or one grpofit reads); an unknown key's error names the releases `versions` pins.
    pub fn check_keys_at(&self, versions: &CallVersions) -> Result<(), LoadError> {
        for table in Table::ALL {
            self.check_keys(table, versions)?;
            self.check_types(table)?;
        }
        Ok(())
    }

    /// Every key of `table` whose call's dataclass declares its type holds a value of that
    /// type (`contract::field_types`): the call takes the table unconverted, so a string where
    /// a number is declared would load here and fail at launch.
    fn check_types(&self, table: Table) -> Result<(), LoadError> {
        let (Some(t), Some(call)) = (self.table(table), table.call(self.stack)) else {
            return Ok(());
        };
        for (key, value) in t {
            if field_types::fits_field(call, key, value) {
                continue;
            }
            let declared = field_types::described(call, key);
            // Python reads any non-empty string as true: `bf16 = "no"` turns bf16 on
            let truthy = if declared.split(" | ").any(|a| a == "bool") && value.is_str() {
                " (any non-empty string is true to it)"
            } else {
                ""
            };
            let message = format!(
                "expected {declared}, as {} declares it: the call takes the value unconverted, \
                 so the trainer would misread it{truthy} or fail on it at launch",
                call.name(),
            );
            return Err(self.wrong(table, key, value, message));
        }
        Ok(())
    }

    /// `[grpofit] stack`: Unsloth unless it says TRL.
    fn read_stack(&self) -> Result<Stack, LoadError> {
        let Some(v) = self.table(Table::Grpofit).and_then(|t| t.get("stack")) else {
            return Ok(Stack::Unsloth);
        };
        match self.as_text(Table::Grpofit, "stack", v)? {
            "unsloth" => Ok(Stack::Unsloth),
            "trl" => Ok(Stack::Trl),
            other => Err(self.wrong(
                Table::Grpofit,
                "stack",
                format!("\"{other}\""),
                "expected \"unsloth\" or \"trl\"",
            )),
        }
    }

    /// Whether the file writes `[table]`.
    /// The keys the file writes in `table`.
    pub fn keys_of(&self, table: Table) -> Vec<&'a str> {
        self.table(table)
            .map(|t| t.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    pub fn has(&self, table: Table) -> bool {
        self.table(table).is_some()
    }

    fn table(&self, table: Table) -> Option<&'a toml::Table> {
        self.root.get(table.name()).and_then(Value::as_table)
    }

    /// The line `[table] key` is written on: its own place, else the old place of a retired
    /// key that moved there (where `get` read it from).
    pub fn line(&self, table: Table, key: &str) -> Option<usize> {
        self.lines.of(table.name(), Some(key)).or_else(|| {
            let (r, _) = self.moved_here(table, key)?;
            self.lines.of(r.table.name(), Some(r.key))
        })
    }

    /// `` `[table] key = value`: message ``, on the line the key is written on.
    pub fn wrong(
        &self,
        table: Table,
        key: &str,
        value: impl Display,
        message: impl Into<String>,
    ) -> LoadError {
        LoadError::at_key(table.name(), key, Some(value.to_string()), message)
            .on_line(self.line(table, key))
    }

    /// `` `[table] key`: message `` (no value shown), on the line the key is written on.
    pub fn wrong_key(&self, table: Table, key: &str, message: impl Into<String>) -> LoadError {
        LoadError::at_key(table.name(), key, None, message).on_line(self.line(table, key))
    }

    /// A sentence about `[table] key` that names it itself, on the line the key is written on.
    pub fn sentence(&self, table: Table, key: &str, message: impl Into<String>) -> LoadError {
        LoadError::sentence(table.name(), Some(key), message).on_line(self.line(table, key))
    }

    /// Every key of `table` is one its call accepts in some modelled release (or one
    /// `[grpofit]` reads), or a retired key that loads with a note.
    fn check_keys(&self, table: Table, versions: &CallVersions) -> Result<(), LoadError> {
        let Some(t) = self.table(table) else {
            return Ok(());
        };
        let call = table.call(self.stack);
        for key in t.keys() {
            let own = own_keys(table);
            let known = own.contains(&key.as_str())
                || match call {
                    // a key an older (or newer) modelled release takes loads; the note
                    // for a pinned release that lacks it comes once the versions are read
                    Some(call) => accepts(call, key) || some_release_takes(call, key, self.stack),
                    // `[env]` takes any variable
                    None => own.is_empty(),
                };
            if known {
                continue;
            }
            // a retired key is noted once the versions are read (`read_version_keys`)
            if contract::retired(table, key, self.stack).is_some() {
                continue;
            }
            let (keys, whose): (Vec<&str>, String) = match call {
                Some(c) => (
                    c.keys().chain(own.iter().copied()).collect(),
                    format!(
                        " ({} takes no such keyword, nor does any release grpofit models)",
                        pinned_call(c, versions)
                    ),
                ),
                None => (own.to_vec(), String::new()),
            };
            let message = format!(
                "unknown key `[{}] {key}`{}{whose}",
                table.name(),
                suggest(key, keys)
            );
            return Err(self.sentence(table, key, message));
        }
        Ok(())
    }

    /// The retired key that moved to `[table] key`, with its value, when the file writes it.
    fn moved_here(&self, table: Table, key: &str) -> Option<(&'static Retired, &'a Value)> {
        contract::RETIRED
            .iter()
            .filter(|r| r.stack.is_none_or(|s| s == self.stack))
            .filter(|r| r.moved_to == Some((table, key)))
            .find_map(|r| Some((r, self.table(r.table)?.get(r.key)?)))
    }

    /// The value of `key` in `table`, or of a retired key that moved there. When both are
    /// written and disagree, that is an error naming both.
    pub fn get(&self, table: Table, key: &str) -> Result<Option<&'a Value>, LoadError> {
        let here = self.table(table).and_then(|t| t.get(key));
        match (here, self.moved_here(table, key)) {
            (Some(a), Some((r, b))) if a != b => {
                let message = format!(
                    "`[{}] {key} = {a}` and `[{}] {} = {b}` disagree",
                    table.name(),
                    r.table.name(),
                    r.key
                );
                Err(self.sentence(table, key, message).with_value(a))
            }
            (Some(a), _) => Ok(Some(a)),
            (None, Some((_, b))) => Ok(Some(b)),
            (None, None) => Ok(None),
        }
    }

    /// `v`, the value of `[table] key`, as a string.
    pub fn as_text<'v>(&self, table: Table, key: &str, v: &'v Value) -> Result<&'v str, LoadError> {
        v.as_str()
            .ok_or_else(|| self.wrong(table, key, v, "expected a string"))
    }

    pub fn text(&self, table: Table, key: &str) -> Result<Option<&'a str>, LoadError> {
        self.get(table, key)?
            .map(|v| self.as_text(table, key, v))
            .transpose()
    }

    pub fn boolean(&self, table: Table, key: &str) -> Result<Option<bool>, LoadError> {
        self.get(table, key)?
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| self.wrong(table, key, v, "expected true or false"))
            })
            .transpose()
    }

    /// A whole-number knob's value, from the key and within the range its declaration gives
    /// (`Knob::key`, `Knob::range`).
    pub fn knob(&self, knob: Knob) -> Result<Option<u64>, LoadError> {
        let (table, key) = knob.key(self.stack);
        let (lo, hi) = knob.range();
        self.int_within(table, key, lo, hi, knob.range_reason())
    }

    /// A vLLM share under `key` (a fraction), within the share knob's range.
    pub fn share(&self, table: Table, key: &str) -> Result<Option<f64>, LoadError> {
        let (lo, hi) = Knob::VllmShare.range();
        self.float(table, key, lo as f64 / 100.0, hi as f64 / 100.0)
    }

    pub fn int(
        &self,
        table: Table,
        key: &str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>, LoadError> {
        self.int_within(table, key, min, max, "")
    }

    fn int_within(
        &self,
        table: Table,
        key: &str,
        min: u64,
        max: u64,
        reason: &str,
    ) -> Result<Option<u64>, LoadError> {
        self.get(table, key)?
            .map(|v| {
                let n = v
                    .as_integer()
                    .ok_or_else(|| self.wrong(table, key, v, "expected a whole number"))?;
                if n < min as i64 || n > max as i64 {
                    return Err(self.wrong(
                        table,
                        key,
                        n,
                        format!("out of range, expected {min} to {max}{reason}"),
                    ));
                }
                Ok(n as u64)
            })
            .transpose()
    }

    pub fn float(
        &self,
        table: Table,
        key: &str,
        min: f64,
        max: f64,
    ) -> Result<Option<f64>, LoadError> {
        self.get(table, key)?
            .map(|v| {
                let x = v
                    .as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .ok_or_else(|| self.wrong(table, key, v, "expected a number"))?;
                // a bound written as a decimal (0.95) may come back a hair past it (0.9500000000000001)
                let slack = 1e-9 * max.abs().max(1.0);
                if !x.is_finite() || x < min - slack || x > max + slack {
                    return Err(self.wrong(
                        table,
                        key,
                        x,
                        format!("out of range, expected {min} to {max}"),
                    ));
                }
                Ok(x)
            })
            .transpose()
    }

    /// `[env]` as written, when the file has one.
    pub fn env_table(&self) -> Option<&'a toml::Table> {
        self.table(Table::Env)
    }

    /// The string-valued environment variable `name` of `[env]`.
    pub fn env(&self, name: &str) -> Option<&'a str> {
        self.table(Table::Env)?.get(name)?.as_str()
    }

    /// `[env] name` set to 1 (as a string or a number).
    pub fn env_flag(&self, name: &str) -> bool {
        self.table(Table::Env)
            .and_then(|t| t.get(name))
            .is_some_and(|v| v.as_str() == Some("1") || v.as_integer() == Some(1))
    }
}

/// Whether `call` takes `key`: by name, or through `**kwargs` it forwards to another call.
pub fn accepts(call: Call, key: &str) -> bool {
    call.accepts(key) || forwarded_to(call).is_some_and(|c| c.accepts(key))
}

/// Whether some release of `call`'s ladder takes `key` on `stack`, by name or through
/// `**kwargs`.
fn some_release_takes(call: Call, key: &str, stack: Stack) -> bool {
    let takes = |c| !releases_taking(c, key, stack).is_empty();
    takes(call) || forwarded_to(call).is_some_and(takes)
}

/// The call as the pinned releases make it: `trl 0.15.2's trl.GRPOConfig (with transformers
/// 4.48.3's TrainingArguments)`, `unsloth 2025.3.19's unsloth.FastLanguageModel.from_pretrained`;
/// `ModelConfig` and `LoraConfig`, modelled at the targeted release only, as that release's.
fn pinned_call(call: Call, v: &CallVersions) -> String {
    match call {
        Call::GrpoConfig => format!(
            "trl {}'s {} (with transformers {}'s TrainingArguments{})",
            v.trl,
            call.name(),
            v.transformers,
            if v.stack == Stack::Unsloth {
                format!(", and unsloth {}'s additions", v.unsloth)
            } else {
                String::new()
            }
        ),
        Call::UnslothFromPretrained | Call::UnslothGetPeftModel | Call::UnslothLoadVllm => {
            format!("unsloth {}'s {}", v.unsloth, call.name())
        }
        Call::VllmServe => format!("trl {}'s {}", v.trl, call.name()),
        Call::TrlModelConfig | Call::LoraConfig => format!("{} {}", call.name(), call.version()),
    }
}

/// Where a call's `**kwargs` go: Unsloth's `get_peft_model` passes the keywords it does not
/// name on to PEFT's `LoraConfig` (unsloth/models/llama.py, `FastLlamaModel.get_peft_model`);
/// `from_pretrained` passes `load_vllm`'s own keywords to it (`FastLlamaModel.from_pretrained`).
pub(super) fn forwarded_to(call: Call) -> Option<Call> {
    match call {
        Call::UnslothGetPeftModel => Some(Call::LoraConfig),
        Call::UnslothFromPretrained => Some(Call::UnslothLoadVllm),
        _ => None,
    }
}
