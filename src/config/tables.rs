//! The tables of a run file, checked against the trainer contract: each trainer table may hold
//! only keyword arguments its call accepts; a key the targeted trainer retired is read from its
//! old place with a note; typed getters say the table, key and value when something is wrong.

use crate::contract::{self, Call, Table};
use crate::model::catalog::edit_distance;
use crate::model::knobs::Knob;
use crate::model::run::Stack;
use toml::Value;

/// What `[vramfit]` itself holds: the assumptions only vramfit reads (SPEC section 4).
pub const VRAMFIT_KEYS: &[&str] = &[
    "stack",
    "gpu_memory",
    "gpus",
    "model_config",
    "lock_effective_batch",
    "max_prompt_length",
    "vllm_version",
];

/// The run file's tables, with the stack that decides which call each one feeds.
pub struct Tables<'a> {
    root: &'a toml::Table,
    pub stack: Stack,
    /// retired keys met, in words, for the user
    pub notes: Vec<String>,
}

/// `(did you mean `x`?)` for the nearest of `known`, when one is near.
pub fn suggest<'k>(key: &str, known: impl IntoIterator<Item = &'k str>) -> String {
    let best = known
        .into_iter()
        .map(|k| (edit_distance(key, k), k))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((d, b)) if d <= 4 => format!(" (did you mean `{b}`?)"),
        _ => String::new(),
    }
}

impl<'a> Tables<'a> {
    /// Checks the table names and every key, and reads the stack.
    pub fn new(root: &'a toml::Table) -> Result<Tables<'a>, String> {
        let names = Table::ALL.map(Table::name);
        for key in root.keys() {
            if !names.contains(&key.as_str()) {
                return Err(format!(
                    "unknown table `[{key}]`{}",
                    suggest(key, names.iter().copied())
                ));
            }
            if !root[key].is_table() {
                return Err(format!("`{key}` must be a table ([{key}])"));
            }
        }
        let stack = match root
            .get("vramfit")
            .and_then(|t| t.get("stack"))
            .map(|v| text(Table::Vramfit, "stack", v))
            .transpose()?
        {
            None | Some("unsloth") => Stack::Unsloth,
            Some("trl") => Stack::Trl,
            Some(other) => {
                return Err(format!(
                    "`[vramfit] stack = \"{other}\"`: expected \"unsloth\" or \"trl\""
                ));
            }
        };
        let mut tables = Tables {
            root,
            stack,
            notes: Vec::new(),
        };
        for table in Table::ALL {
            tables.check_keys(table)?;
        }
        Ok(tables)
    }

    fn table(&self, table: Table) -> Option<&'a toml::Table> {
        self.root.get(table.name()).and_then(Value::as_table)
    }

    /// Every key of `table` is one its call accepts (or one `[vramfit]` reads), or a retired key
    /// that loads with a note.
    fn check_keys(&mut self, table: Table) -> Result<(), String> {
        let Some(t) = self.table(table) else {
            return Ok(());
        };
        let call = table.call(self.stack);
        for key in t.keys() {
            let known = match (table, call) {
                (Table::Vramfit, _) => VRAMFIT_KEYS.contains(&key.as_str()),
                (_, Some(call)) => accepts(call, key),
                (_, None) => true,
            };
            if known {
                continue;
            }
            if let Some(r) = contract::retired(table, key, self.stack) {
                self.notes.push(format!(
                    "`[{}] {key}` is read but not exported: {}",
                    table.name(),
                    r.now
                ));
                continue;
            }
            let (keys, whose): (Vec<&str>, String) = match call {
                Some(c) => (
                    c.keys().collect(),
                    format!(" ({} {} takes no such keyword)", c.name(), c.version()),
                ),
                None => (VRAMFIT_KEYS.to_vec(), String::new()),
            };
            return Err(format!(
                "unknown key `[{}] {key}`{}{whose}",
                table.name(),
                suggest(key, keys)
            ));
        }
        Ok(())
    }

    /// The value of `key` in `table`, or of a retired key that moved there. When both are
    /// written and disagree, that is an error naming both.
    pub fn get(&self, table: Table, key: &str) -> Result<Option<&'a Value>, String> {
        let here = self.table(table).and_then(|t| t.get(key));
        let old = contract::RETIRED
            .iter()
            .filter(|r| r.stack.is_none_or(|s| s == self.stack))
            .filter(|r| r.moved_to == Some((table, key)))
            .find_map(|r| Some((r, self.table(r.table)?.get(r.key)?)));
        match (here, old) {
            (Some(a), Some((r, b))) if a != b => Err(format!(
                "`[{}] {key} = {a}` and `[{}] {} = {b}` disagree",
                table.name(),
                r.table.name(),
                r.key
            )),
            (Some(a), _) => Ok(Some(a)),
            (None, Some((_, b))) => Ok(Some(b)),
            (None, None) => Ok(None),
        }
    }

    pub fn text(&self, table: Table, key: &str) -> Result<Option<&'a str>, String> {
        self.get(table, key)?
            .map(|v| text(table, key, v))
            .transpose()
    }

    pub fn boolean(&self, table: Table, key: &str) -> Result<Option<bool>, String> {
        self.get(table, key)?
            .map(|v| {
                v.as_bool().ok_or_else(|| {
                    format!("`[{}] {key} = {v}`: expected true or false", table.name())
                })
            })
            .transpose()
    }

    /// A whole-number knob's value, from the key and within the range its declaration gives
    /// (`Knob::key`, `Knob::range`).
    pub fn knob(&self, knob: Knob) -> Result<Option<u64>, String> {
        let (table, key) = knob.key(self.stack);
        let (lo, hi) = knob.range();
        self.int_within(table, key, lo, hi, knob.range_reason())
    }

    /// A vLLM share under `key` (a fraction), within the share knob's range.
    pub fn share(&self, table: Table, key: &str) -> Result<Option<f64>, String> {
        let (lo, hi) = Knob::VllmShare.range();
        self.float(table, key, lo as f64 / 100.0, hi as f64 / 100.0)
    }

    pub fn int(&self, table: Table, key: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
        self.int_within(table, key, min, max, "")
    }

    fn int_within(
        &self,
        table: Table,
        key: &str,
        min: u64,
        max: u64,
        reason: &str,
    ) -> Result<Option<u64>, String> {
        self.get(table, key)?
            .map(|v| {
                let n = v.as_integer().ok_or_else(|| {
                    format!("`[{}] {key} = {v}`: expected a whole number", table.name())
                })?;
                if n < min as i64 || n > max as i64 {
                    return Err(format!(
                        "`[{}] {key} = {n}`: out of range, expected {min} to {max}{reason}",
                        table.name()
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
    ) -> Result<Option<f64>, String> {
        self.get(table, key)?
            .map(|v| {
                let x = v
                    .as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .ok_or_else(|| {
                        format!("`[{}] {key} = {v}`: expected a number", table.name())
                    })?;
                // a bound written as a decimal (0.95) may come back a hair past it (0.9500000000000001)
                let slack = 1e-9 * max.abs().max(1.0);
                if !x.is_finite() || x < min - slack || x > max + slack {
                    return Err(format!(
                        "`[{}] {key} = {x}`: out of range, expected {min} to {max}",
                        table.name()
                    ));
                }
                Ok(x)
            })
            .transpose()
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

/// Where a call's `**kwargs` go: Unsloth's `get_peft_model` passes the keywords it does not
/// name on to PEFT's `LoraConfig` (unsloth/models/llama.py, `FastLlamaModel.get_peft_model`);
/// `from_pretrained` passes `load_vllm`'s own keywords to it (`FastLlamaModel.from_pretrained`).
fn forwarded_to(call: Call) -> Option<Call> {
    match call {
        Call::UnslothGetPeftModel => Some(Call::LoraConfig),
        Call::UnslothFromPretrained => Some(Call::UnslothLoadVllm),
        _ => None,
    }
}

pub fn text<'v>(table: Table, key: &str, v: &'v Value) -> Result<&'v str, String> {
    v.as_str()
        .ok_or_else(|| format!("`[{}] {key} = {v}`: expected a string", table.name()))
}
