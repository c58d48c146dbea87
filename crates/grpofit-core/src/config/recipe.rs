//! A TRL CLI recipe: the flat YAML `trl grpo --config recipe.yaml` reads (trl 1.15.0,
//! `trl/scripts/grpo.py`: `TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))` hands each
//! dataclass the keys it declares) and huggingface/open-r1's recipes are written in.
//!
//! Each key is sorted by the contract: `GRPOConfig`'s keys become `[grpo]`, `ModelConfig`'s
//! `[model]` (its `lora_*` keys `[lora]`, as `trl.get_peft_config` passes them to PEFT's
//! `LoraConfig`), and keys of no call grpofit knows (the dataset, the rewards, the Hub, the
//! script's own) are carried through untouched: they stay in the text a write edits. The run
//! file built so is then read by the same loader as a TOML one.

use super::error::LoadError;
use super::pyyaml;
use super::pyyaml_resolve::{self, Py};
use super::read::{Reading, RunFile, parse_with};
use super::read_grpofit::ASSUMED_PROMPT_LENGTH;
use super::source::{Format, MODEL_LORA_KEYS, Placed, SourceFile};
use crate::arch::catalog::edit_distance;
use crate::contract::accepts::releases_taking;
use crate::contract::field_types::{self, Scalar};
use crate::contract::{Call, Table, retired};
use crate::run::Stack;
use std::path::Path;

/// What a recipe says beside its keys' values, as the sorting found it.
struct Sorted {
    root: toml::Table,
    placed: Vec<Placed>,
    carried: Vec<String>,
    notes: Vec<String>,
}

impl Sorted {
    fn put(&mut self, recipe_key: &str, table: Table, key: &str, value: toml::Value) {
        let t = self
            .root
            .entry(table.name())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(t) = t {
            t.insert(key.to_string(), value);
        }
        self.placed.push(Placed {
            recipe_key: recipe_key.to_string(),
            table,
            key: key.to_string(),
        });
    }

    fn has(&self, table: Table, key: &str) -> bool {
        self.root
            .get(table.name())
            .and_then(toml::Value::as_table)
            .is_some_and(|t| t.contains_key(key))
    }
}

/// Reads a recipe's text; `file` names it in errors, `path` is where it is.
pub fn load(text: &str, file: &str, path: &Path, reading: &Reading) -> Result<RunFile, LoadError> {
    // each value as TRL gets it: PyYAML's, then argparse's conversion of a string
    let keys = top_level(text)
        .and_then(|keys| {
            keys.into_iter()
                .map(|(k, v)| match typed_as_argparse(&k, v) {
                    Ok(v) => Ok((k, v)),
                    Err(e) => Err(e.on_line(line_of(text, &k))),
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| e.in_file(file))?;
    let sorted = sort(&keys).map_err(|e| e.in_file(file))?;
    let toml_text = toml::to_string(&sorted.root)
        .map_err(|e| LoadError::whole_file(format!("cannot read: {e}")).in_file(file))?;
    let mut run = parse_with(&toml_text, file, path.parent(), reading).map_err(|e| {
        let line = e
            .key
            .as_deref()
            .zip(e.table.as_deref())
            .and_then(|(k, t)| {
                sorted
                    .placed
                    .iter()
                    .find(|p| p.key == k && p.table.name() == t)
            })
            .and_then(|p| line_of(text, &p.recipe_key));
        // a recipe has no `[grpofit]` table to set `model_config` in
        let message = e
            .message
            .replace(super::read_model::MODEL_CONFIG_ADVICE, "");
        LoadError { message, ..e }.on_line(line)
    })?;
    if !sorted.carried.is_empty() {
        run.notes.push(format!(
            "carried through untouched (no call grpofit models takes them): {}",
            sorted.carried.join(", ")
        ));
    }
    run.notes.extend(sorted.notes);
    run.source = Some(SourceFile {
        path: path.to_path_buf(),
        text: text.to_string(),
        format: Format::Yaml,
        run: run.run.clone(),
        gpu_memory: run.gpu_memory,
        lock_effective_batch: run.lock_effective_batch,
        model_config: run.model_config.clone(),
        time: run.time.clone(),
        placed: sorted.placed,
        stamp: super::source::Stamp::of(path, text.as_bytes()),
    });
    Ok(run)
}

/// The 1-based line a top-level `key:` is written on.
pub fn line_of(text: &str, key: &str) -> Option<usize> {
    let doc = pyyaml::compose(text).ok()?;
    let Some(pyyaml::Kind::Map { entries, .. }) = doc.root.map(|r| &doc.nodes[r].kind) else {
        return None;
    };
    entries.iter().find_map(|(k, _)| match &doc.nodes[*k].kind {
        pyyaml::Kind::Scalar(s, _) if s == key => Some(doc.nodes[*k].line),
        _ => None,
    })
}

/// The recipe's top-level keys and values, in order, as `yaml.safe_load` reads them (`pyyaml`:
/// anchors, aliases and `<<` merges resolved, YAML 1.1's scalars).
fn top_level(text: &str) -> Result<Vec<(String, Py)>, LoadError> {
    let doc = pyyaml::safe_load(text)
        .map_err(|e| LoadError::whole_file(e.message.clone()).on_line(e.line))?;
    let entries = match doc {
        Py::None => return Ok(Vec::new()),
        Py::Map(entries) => entries,
        _ => {
            return Err(LoadError::whole_file(
                "a TRL recipe is a map of `key: value` lines",
            ));
        }
    };
    entries
        .into_iter()
        .map(|(k, v)| match k {
            Py::Str(k) => Ok((k, v)),
            other => Err(LoadError::whole_file(format!(
                "a key must be a name, not {other:?} (PyYAML reads it so: quote it)"
            ))),
        })
        .collect()
}

/// A recipe value as TOML; `None` for null (the trainer's default then).
fn value(v: &Py) -> Result<Option<toml::Value>, LoadError> {
    Ok(Some(match v {
        Py::None => return Ok(None),
        Py::Int(i) => toml::Value::Integer(*i),
        Py::Float(x) => toml::Value::Float(*x),
        Py::Bool(b) => toml::Value::Boolean(*b),
        Py::Str(s) | Py::Timestamp(s) => toml::Value::String(s.clone()),
        Py::Seq(items) => toml::Value::Array(
            items
                .iter()
                .map(|i| value(i).map(|v| v.unwrap_or(toml::Value::String(String::new()))))
                .collect::<Result<_, _>>()?,
        ),
        Py::Map(entries) => {
            let mut t = toml::Table::new();
            for (k, v) in entries {
                let (Py::Str(k), Some(v)) = (k, value(v)?) else {
                    continue;
                };
                t.insert(k.clone(), v);
            }
            toml::Value::Table(t)
        }
    }))
}

/// A string where the trainer's dataclass field is a number or a bool, converted as TRL
/// converts it: `set_defaults_with_config` makes the value the argparse default, and argparse
/// passes a string default through the field's `type` (so `learning_rate: 1e-5`, a string to
/// PyYAML, is the float 1e-05 to TRL). The field's type is its annotation's
/// (`contract::field_types`: `Optional[float]` is a float to `HfArgumentParser`).
fn typed_as_argparse(key: &str, v: Py) -> Result<Py, LoadError> {
    let Py::Str(s) = &v else { return Ok(v) };
    let scalar = [Call::GrpoConfig, Call::TrlModelConfig]
        .iter()
        .find_map(|c| field_types::argparse_scalar(*c, key));
    let bad = |ty: &str| {
        LoadError::whole_file(format!(
            "`{key}`: `{s}` is a string that TRL's argparse cannot read as {ty} (invalid {ty} value)"
        ))
    };
    Ok(match scalar {
        Some(Scalar::Int) => Py::Int(s.trim().replace('_', "").parse().map_err(|_| bad("int"))?),
        // transformers 5.17.0 hf_argparser.py, string_to_bool: a bool field's `type`
        Some(Scalar::Bool) => match s.to_ascii_lowercase().as_str() {
            "yes" | "true" | "t" | "y" | "1" => Py::Bool(true),
            "no" | "false" | "f" | "n" | "0" => Py::Bool(false),
            _ => return Err(bad("bool (yes/no, true/false, t/f, y/n, 1/0)")),
        },
        Some(Scalar::Float) => Py::Float(
            pyyaml_resolve::python_float(&s.replace('_', "")).ok_or_else(|| bad("float"))?,
        ),
        None => v,
    })
}

/// The keys sorted into run-file tables (see the module's comment), with the rules of the TRL
/// versions a recipe's keys come from.
fn sort(keys: &[(String, Py)]) -> Result<Sorted, LoadError> {
    let mut s = Sorted {
        root: toml::Table::new(),
        placed: Vec::new(),
        carried: Vec::new(),
        notes: Vec::new(),
    };
    // keys put without a recipe key of their own are named "" (a write finds them by default)
    s.put(
        "",
        Table::Grpofit,
        "stack",
        toml::Value::String("trl".into()),
    );
    let get = |name: &str| keys.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let peft = matches!(get("use_peft"), Some(Py::Bool(true)));
    let vllm_device = matches!(get("use_vllm"), Some(Py::Bool(true)))
        && get("vllm_device").is_some_and(|v| !matches!(v, Py::None));
    for (key, v) in keys {
        let Some(v) = value(v)? else { continue };
        if !place(&mut s, key, v, peft, vllm_device) {
            if let Some(near) = near_miss(key) {
                s.notes.push(format!("`{key}` is no key of GRPOConfig or ModelConfig (did you mean `{near}`?): carried through, not read"));
            }
            s.carried.push(key.clone());
        }
    }
    versions(&mut s, keys, peft, vllm_device);
    Ok(s)
}

/// The GRPOConfig or ModelConfig key a carried key is one or two letters away from: a typo
/// TRL's CLI would pass over too (trl/scripts/grpo.py: `fail_with_unknown_args=False`).
fn near_miss(key: &str) -> Option<&'static str> {
    Call::GrpoConfig
        .keys()
        .chain(Call::TrlModelConfig.keys())
        .map(|k| (edit_distance(key, k), k))
        .filter(|(d, _)| *d <= 2 && key.len() > 6)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Puts one recipe key in its table; false when no call grpofit knows takes it.
fn place(s: &mut Sorted, key: &str, v: toml::Value, peft: bool, vllm_device: bool) -> bool {
    if let Some((_, lora)) = MODEL_LORA_KEYS.iter().find(|(k, _)| *k == key) {
        // without use_peft, get_peft_config returns None and TRL ignores them too
        if peft {
            s.put(key, Table::Lora, lora, v);
        }
        return peft;
    }
    match key {
        // TRL before 0.29 (GRPOConfig.max_prompt_length); grpofit's own assumption since
        "max_prompt_length" => s.put(key, Table::Grpofit, "max_prompt_length", v),
        // the recipe's own process count (accelerate's `--num_processes`)
        "num_processes" => s.put(key, Table::Grpofit, "gpus", v),
        // TRL 0.14-0.16: vLLM on a GPU of its own, at this utilization (GRPOTrainer.__init__)
        "vllm_gpu_memory_utilization" if vllm_device => {
            s.put(key, Table::VllmServer, "gpu_memory_utilization", v)
        }
        "vllm_device" => return vllm_device,
        _ => {
            let mut placed = false;
            for (table, call) in [
                (Table::Model, Call::TrlModelConfig),
                (Table::Grpo, Call::GrpoConfig),
            ] {
                // an older TRL's key is read where its value goes now (torch_dtype as dtype)
                let (table, to) = match retired(table, key, Stack::Trl) {
                    Some(r) => r.moved_to.unwrap_or((table, r.key)),
                    // a key an older TRL's GRPOConfig takes (trl 0.15's `vllm_dtype`) is
                    // read as the pinned release reads it, with a note when it lacks it
                    None if call.accepts(key)
                        || !releases_taking(call, key, Stack::Trl).is_empty() =>
                    {
                        (table, key)
                    }
                    None => continue,
                };
                s.put(key, table, to, v.clone());
                placed = true;
            }
            return placed;
        }
    }
    true
}

/// What a recipe leaves to its TRL version's defaults, said outright for the loader.
fn versions(s: &mut Sorted, keys: &[(String, Py)], peft: bool, vllm_device: bool) {
    let model = Call::TrlModelConfig;
    if peft {
        // ModelConfig's own defaults, which get_peft_config passes on (not LoraConfig's)
        for (mkey, lkey) in [("lora_r", "r"), ("lora_alpha", "lora_alpha")] {
            if let (false, Some(d)) = (s.has(Table::Lora, lkey), model.default_u64(mkey)) {
                s.put("", Table::Lora, lkey, toml::Value::Integer(d as i64));
            }
        }
        // ModelConfig.lora_dropout 0.05 (trl 0.14.0 to 1.16.0 `trainer/model_config.py`), not
        // LoraConfig's 0.0: a recipe without the line trains with dropout
        let dropout = "lora_dropout";
        if let (false, Some(d)) = (s.has(Table::Lora, dropout), model.default_f64(dropout)) {
            s.put("", Table::Lora, dropout, toml::Value::Float(d));
            s.notes.push(format!("`use_peft` without `lora_dropout`: TRL's default {d} (ModelConfig) applies, so each adapter keeps a dropout mask of its input for the backward and runs its dropout kernels (write `lora_dropout: 0` to train without)"));
        }
    } else if !s.has(Table::Model, "use_peft") {
        // ModelConfig.use_peft defaults to False: every weight is trained
        s.put("", Table::Model, "use_peft", toml::Value::Boolean(false));
    }
    let written = |k: &str| keys.iter().any(|(key, _)| key == k);
    if !written("max_prompt_length") {
        // grpofit's assumption, said as such: TRL 1.x reads no prompt length, and its
        // trl/scripts/grpo.py parses with fail_with_unknown_args=False, so the line is harmless
        let assumed = ASSUMED_PROMPT_LENGTH as i64;
        s.put(
            "",
            Table::Grpofit,
            "max_prompt_length",
            toml::Value::Integer(assumed),
        );
        s.notes.push(format!("the recipe does not state its prompts' length: prompts of up to {assumed} tokens assumed (add `max_prompt_length: N`, your dataset's longest prompt; TRL 1.x ignores the line)"));
    }
    let use_vllm = keys
        .iter()
        .any(|(k, v)| k == "use_vllm" && matches!(v, Py::Bool(true)));
    if !use_vllm || written("vllm_mode") {
        return;
    }
    let server = toml::Value::String("server".into());
    if vllm_device {
        s.put("", Table::Grpo, "vllm_mode", server);
        if !s.has(Table::VllmServer, "gpu_memory_utilization") {
            // TRL 0.14.0 GRPOConfig.vllm_gpu_memory_utilization's default
            let share = toml::Value::Float(0.9);
            s.put(
                "vllm_gpu_memory_utilization",
                Table::VllmServer,
                "gpu_memory_utilization",
                share,
            );
        }
        s.notes.push("`vllm_device` (TRL 0.14-0.16): vLLM on one GPU of its own after the training processes (GRPOTrainer takes cuda:{num_processes} for \"auto\"), as `trl vllm-serve` on one GPU does today".into());
    } else if written("max_prompt_length") {
        // TRL 0.17-0.28 default vllm_mode to "server" (GRPOConfig); 1.0 made it "colocate"
        s.put("", Table::Grpo, "vllm_mode", server);
        s.notes.push("`use_vllm: true` without `vllm_mode` in a recipe of TRL before 1.0 (it writes `max_prompt_length`): `trl vllm-serve` on one GPU of its own, that TRL's default".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Generation;

    fn read(text: &str) -> Result<RunFile, LoadError> {
        let models = crate::resolve::Offline::from_env();
        load(text, "r.yaml", Path::new("r.yaml"), &Reading::new(&models))
    }

    /// YAML 1.1 as PyYAML reads it, then argparse's conversion of a string default
    /// (`TrlParser.set_defaults_with_config`): `yes` is true, a quoted "8" is the int 8 for an
    /// int field, `1e-5` (a string to PyYAML) the float TRL makes of it.
    /// ModelConfig.lora_dropout's 0.05 where a recipe with `use_peft` leaves it out (TRL's CLI
    /// passes it to LoraConfig: `get_peft_config`), the recipe's own value where it gives one.
    #[test]
    fn a_peft_recipe_takes_model_config_s_dropout() {
        let peft = "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nuse_peft: true\nlora_r: 16\n";
        let default = read(peft).unwrap();
        assert_eq!(default.run.lora_dropout, 0.05);
        let said = |f: &RunFile| f.notes.iter().any(|n| n.contains("without `lora_dropout`"));
        assert!(said(&default), "{:?}", default.notes);
        let zero = format!("{peft}lora_dropout: 0\n");
        let zero = read(&zero).unwrap();
        assert_eq!(zero.run.lora_dropout, 0.0);
        assert!(!said(&zero), "{:?}", zero.notes);
        let tenth = format!("{peft}lora_dropout: 0.1\n");
        assert_eq!(read(&tenth).unwrap().run.lora_dropout, 0.1);
        // no adapter: nothing drops
        let full = "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nlora_dropout: 0.1\n";
        assert_eq!(read(full).unwrap().run.lora_dropout, 0.0);
    }

    #[test]
    fn values_are_what_trl_gets() {
        let run = read("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nuse_vllm: yes\nvllm_mode: colocate\nper_device_train_batch_size: \"8\"\nnum_generations: 8\nlearning_rate: 1e-5\n").unwrap();
        assert_eq!(run.run.micro_batch, 8);
        assert!(matches!(
            run.run.generation,
            Generation::ColocatedVllm { .. }
        ));
        let err = read(
            "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nper_device_train_batch_size: eight\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid int value"), "{err}");
        assert!(err.to_string().contains("r.yaml:2"), "{err}");
        let err = read("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\n---\nnum_generations: 4\n")
            .unwrap_err();
        assert!(err.to_string().contains("one document"), "{err}");
        assert_eq!(line_of("  a: 1\n  b : 2\n", "b"), Some(2));
        // a quoted boolean is a string to PyYAML, string_to_bool's to TRL
        let run = read("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nuse_vllm: \"y\"\nvllm_mode: colocate\nnum_generations: 8\n").unwrap();
        assert!(matches!(
            run.run.generation,
            Generation::ColocatedVllm { .. }
        ));
    }
}
