//! The declared type of each field a run's keys reach: `GRPOConfig` (with the
//! `TrainingArguments` it inherits) and TRL's `ModelConfig`, as annotated in every rung of the
//! TRL and transformers ladders (`field_types.json`, written by `tools/contract/field_types.py`
//! from the wheels). A run file's `[grpo]` reaches `GRPOConfig(**cfg["grpo"])` unconverted
//! (docs/run-file.md), so a value of another type loads nowhere but fails at launch: argparse's
//! `invalid float value` for a recipe, the optimizer's `0.0 <= lr` for `learning_rate = "fast"`.
//! A value fits when it fits one annotation some modelled release declares.

use crate::contract::Call;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const FIELD_TYPES_JSON: &str = include_str!("field_types.json");

#[derive(Deserialize)]
struct FieldTypes {
    classes: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

fn table() -> &'static FieldTypes {
    static TABLE: OnceLock<FieldTypes> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str(FIELD_TYPES_JSON).expect("field_types.json is generated valid")
    })
}

/// The dataclass `call` builds, as `field_types.json` names it; the calls whose fields are
/// typed there (the others' keywords are checked by name only).
fn class(call: Call) -> Option<&'static str> {
    match call {
        Call::GrpoConfig => Some("GRPOConfig"),
        Call::TrlModelConfig => Some("ModelConfig"),
        _ => None,
    }
}

/// Every annotation some modelled release declares `call`'s field `key` with (None: not a
/// typed field of a typed call).
pub fn declared(call: Call, key: &str) -> Option<&'static [String]> {
    let fields = table().classes.get(class(call)?)?;
    fields.get(key).map(Vec::as_slice)
}

/// The scalar type argparse converts a string to for `call`'s field `key`
/// (transformers `HfArgumentParser._parse_dataclass_field`: `Optional[X]` is read as `X`, a
/// `bool` field through `string_to_bool`), when every release declares one and the same.
pub fn argparse_scalar(call: Call, key: &str) -> Option<Scalar> {
    let mut found = None;
    for ann in declared(call, key)? {
        let alts: Vec<&str> = alternatives(ann)
            .into_iter()
            .filter(|a| *a != "None")
            .collect();
        let [one] = alts.as_slice() else { return None };
        let s = match *one {
            "int" => Scalar::Int,
            "float" => Scalar::Float,
            "bool" => Scalar::Bool,
            _ => return None,
        };
        if found.is_some_and(|f| f != s) {
            // a field whose type changed between releases (`warmup_steps`: int, then float)
            // converts as the float
            if [found, Some(s)].contains(&Some(Scalar::Float))
                && [found, Some(s)].contains(&Some(Scalar::Int))
            {
                found = Some(Scalar::Float);
                continue;
            }
            return None;
        }
        found = Some(s);
    }
    found
}

/// A field's scalar type, as argparse converts a string to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Int,
    Float,
    Bool,
}

/// Fields whose value the call hands on to one that declares more: TRL's `get_peft_config`
/// (trl 1.15.0 trainer/utils.py) passes ModelConfig's `lora_target_modules` as PEFT's
/// `LoraConfig(target_modules=...)`, `Optional[Union[list[str], str]]` (peft 0.21.2
/// tuners/lora/config.py: "all-linear", a regex), and `ModelConfig.__post_init__` only unwraps
/// a one-item list.
const HANDED_ON: &[(Call, &str, &str)] = &[(Call::TrlModelConfig, "lora_target_modules", "str")];

/// Whether `value` is of one of the types `call`'s field `key` is declared with (true for a
/// key with no declared type).
pub fn fits_field(call: Call, key: &str, value: &toml::Value) -> bool {
    let handed_on = HANDED_ON
        .iter()
        .any(|(c, k, ann)| *c == call && *k == key && fits(value, ann));
    handed_on || declared(call, key).is_none_or(|anns| anns.iter().any(|a| fits(value, a)))
}

/// The declared types of `call`'s field `key` in words, each alternative once over the
/// releases: `float`, `int | None`, `bool | str`.
pub fn described(call: Call, key: &str) -> String {
    let mut seen: Vec<String> = Vec::new();
    for ann in declared(call, key).unwrap_or_default() {
        for alt in alternatives(ann) {
            let alt = alt.replace("List[", "list[").replace("Dict[", "dict[");
            if !seen.contains(&alt) {
                seen.push(alt);
            }
        }
    }
    seen.join(" | ")
}

/// `ann` split at its top-level `|` (and `Optional[X]` / `Union[A, B]` unwrapped).
fn alternatives(ann: &str) -> Vec<&str> {
    let ann = ann.trim();
    let pipes = split_top(ann, '|');
    if pipes.len() > 1 {
        return pipes.into_iter().flat_map(alternatives).collect();
    }
    if let Some(inner) = unwrap(ann, "Optional") {
        let mut alts = alternatives(inner);
        alts.push("None");
        return alts;
    }
    if let Some(inner) = unwrap(ann, "Union") {
        return split_top(inner, ',')
            .into_iter()
            .flat_map(alternatives)
            .collect();
    }
    vec![ann.trim_matches(|c| c == '\'' || c == '"')]
}

/// `X` of `Name[X]`.
fn unwrap<'a>(ann: &'a str, name: &str) -> Option<&'a str> {
    ann.strip_prefix(name)?.strip_prefix('[')?.strip_suffix(']')
}

/// `text` split at `sep` outside brackets and quotes.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let (mut depth, mut quote, mut start, mut parts) = (0i32, None, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => depth -= 1,
            (None, c) if c == sep && depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

/// Whether `value`, as TOML (or a recipe as PyYAML) gives it, is of the annotated type `ann`.
pub fn fits(value: &toml::Value, ann: &str) -> bool {
    use toml::Value as V;
    let alts = alternatives(ann);
    if alts.len() > 1 {
        return alts.into_iter().any(|a| fits(value, a));
    }
    let ann = alts[0];
    let list_of = |inner: &str| match value {
        V::Array(items) => items.iter().all(|v| fits(v, inner)),
        _ => false,
    };
    if let Some(inner) = unwrap(ann, "list").or_else(|| unwrap(ann, "List")) {
        return list_of(inner);
    }
    if let Some(items) = unwrap(ann, "Literal") {
        return split_top(items, ',').iter().any(|l| literal_is(value, l));
    }
    let head = ann.split('[').next().unwrap_or(ann);
    match head {
        // TOML has no null; a recipe's null never reaches the run (the default then)
        "None" => false,
        "bool" => value.is_bool(),
        "int" => value.is_integer(),
        "float" => value.is_float() || value.is_integer(),
        "str" => value.is_str(),
        "list" | "List" | "tuple" | "Tuple" => value.is_array(),
        "dict" | "Dict" => value.is_table(),
        "Any" => true,
        // a string enum (`SchedulerType`, `IntervalStrategy`: its value is a string), or a
        // dataclass given as its fields (`ParallelismConfig`, `DatasetConfig`)
        _ if head.starts_with(char::is_uppercase) => value.is_str() || value.is_table(),
        _ => true,
    }
}

/// Whether `value` is the Python literal `text` (`'group'`, `False`, `3`).
fn literal_is(value: &toml::Value, text: &str) -> bool {
    let text = text.trim();
    match value {
        toml::Value::String(s) => {
            text.trim_matches(|c| c == '\'' || c == '"') == s
                && text.len() >= 2
                && text.starts_with(['\'', '"'])
        }
        toml::Value::Boolean(b) => text == if *b { "True" } else { "False" },
        toml::Value::Integer(i) => text.parse::<i64>() == Ok(*i),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toml::Value as V;

    #[test]
    fn the_types_trainingarguments_and_grpoconfig_declare() {
        let s = |x: &str| V::String(x.into());
        // TrainingArguments.learning_rate: float (an int is a float to Python)
        assert!(fits_field(
            Call::GrpoConfig,
            "learning_rate",
            &V::Float(5e-6)
        ));
        assert!(fits_field(
            Call::GrpoConfig,
            "learning_rate",
            &V::Integer(1)
        ));
        assert!(!fits_field(Call::GrpoConfig, "learning_rate", &s("fast")));
        assert!(!fits_field(Call::GrpoConfig, "bf16", &s("yes")));
        assert!(fits_field(Call::GrpoConfig, "bf16", &V::Boolean(true)));
        assert!(!fits_field(Call::GrpoConfig, "seed", &V::Float(1.5)));
        // `None | str | list[str]`
        assert!(fits_field(Call::GrpoConfig, "report_to", &s("none")));
        assert!(fits_field(
            Call::GrpoConfig,
            "report_to",
            &V::Array(vec![s("wandb")])
        ));
        assert!(!fits_field(Call::GrpoConfig, "report_to", &V::Integer(3)));
        assert!(!fits_field(
            Call::GrpoConfig,
            "report_to",
            &V::Array(vec![V::Integer(3)])
        ));
        // `SchedulerType | str`: the enum's value
        assert!(fits_field(
            Call::GrpoConfig,
            "lr_scheduler_type",
            &s("cosine")
        ));
        assert!(!fits_field(
            Call::GrpoConfig,
            "lr_scheduler_type",
            &V::Integer(5)
        ));
        // `dict[str, Any] | str | None`
        let mut t = toml::Table::new();
        t.insert("use_reentrant".into(), V::Boolean(false));
        assert!(fits_field(
            Call::GrpoConfig,
            "gradient_checkpointing_kwargs",
            &V::Table(t)
        ));
        // scale_rewards: bool up to trl 0.21, str ("group", "batch", "none") after
        assert!(fits_field(
            Call::GrpoConfig,
            "scale_rewards",
            &V::Boolean(false)
        ));
        assert!(fits_field(Call::GrpoConfig, "scale_rewards", &s("batch")));
        // a key with no declared type (Unsloth's additions) is not judged
        assert!(fits_field(Call::GrpoConfig, "unsloth_num_chunks", &s("x")));
        assert!(fits_field(Call::LoraConfig, "r", &s("x")));
        // ModelConfig's list, which PEFT's target_modules also takes as a string
        let linear = s("all-linear");
        assert!(fits_field(
            Call::TrlModelConfig,
            "lora_target_modules",
            &linear
        ));
        assert!(!fits_field(
            Call::TrlModelConfig,
            "lora_modules_to_save",
            &linear
        ));
        assert_eq!(described(Call::GrpoConfig, "learning_rate"), "float");
        assert_eq!(described(Call::GrpoConfig, "bf16"), "bool | None");
    }

    #[test]
    fn annotations_as_written() {
        assert!(fits(&V::String("x".into()), "str | None | Literal[False]"));
        assert!(fits(&V::Boolean(false), "str | None | Literal[False]"));
        assert!(!fits(&V::Boolean(true), "str | None | Literal[False]"));
        assert!(fits(&V::Integer(2), "Optional[Union[int, str]]"));
        assert!(!fits(&V::Float(2.5), "Optional[Union[int, str]]"));
        assert!(fits(&V::String("a".into()), "Literal['a', 'b']"));
        assert!(!fits(&V::String("c".into()), "Literal['a', 'b']"));
        assert!(fits(
            &V::String("ParallelismConfig".into()),
            "Optional['ParallelismConfig']"
        ));
    }

    #[test]
    fn what_argparse_converts_a_string_to() {
        assert_eq!(
            argparse_scalar(Call::GrpoConfig, "learning_rate"),
            Some(Scalar::Float)
        );
        // Optional[float] (None by default): argparse's type is float
        assert_eq!(
            argparse_scalar(Call::GrpoConfig, "epsilon_high"),
            Some(Scalar::Float)
        );
        assert_eq!(
            argparse_scalar(Call::GrpoConfig, "bf16"),
            Some(Scalar::Bool)
        );
        assert_eq!(
            argparse_scalar(Call::GrpoConfig, "num_generations"),
            Some(Scalar::Int)
        );
        assert_eq!(
            argparse_scalar(Call::GrpoConfig, "warmup_steps"),
            Some(Scalar::Float)
        );
        assert_eq!(argparse_scalar(Call::GrpoConfig, "scale_rewards"), None);
        assert_eq!(argparse_scalar(Call::GrpoConfig, "report_to"), None);
    }
}
