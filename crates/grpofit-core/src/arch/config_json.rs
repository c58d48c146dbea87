//! Any model, from the path of its Hugging Face `config.json`.

use crate::arch::{Arch, Family, Moe, Vision, siglip_parameters};
use serde_json::Value;
use std::path::Path;

/// A config.json that cannot be used, with the path and what is at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigJsonError {
    #[error("{path}: cannot read: {error}")]
    Unreadable { path: String, error: std::io::Error },
    #[error("{path}: not valid JSON: {error}")]
    NotJson {
        path: String,
        error: serde_json::Error,
    },
    /// valid JSON whose fields are not an architecture grpofit reads
    #[error("{path}: {error}")]
    Fields { path: String, error: ArchError },
}

/// Why a config.json's fields are not an architecture grpofit reads: the field at fault and
/// its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchError {
    #[error("expected a JSON object at the top")]
    NotAnObject,
    #[error("missing field `model_type` (e.g. \"llama\", \"qwen2\", \"gemma3_text\")")]
    MissingModelType,
    #[error("unsupported `model_type` \"{model_type}\"")]
    UnsupportedModelType { model_type: String },
    #[error("missing field `{key}`")]
    Missing { key: String },
    /// `found` as the JSON writes it
    #[error("field `{key}` must be a non-negative integer, found {found}")]
    NotACount { key: String, found: String },
    #[error("`hidden_size` and `num_attention_heads` must be positive")]
    ZeroWidth,
    #[error("field `{key}` = {value}: expected 1..={max}")]
    OutOfRange { key: String, value: u64, max: u64 },
    #[error("field `num_experts` = {experts}: expected 2..={max}")]
    TooManyExperts { experts: u64, max: u64 },
    #[error("field `num_experts_per_tok` = {active}: expected 1..={experts} (the experts)")]
    ActiveExperts { active: u64, experts: u64 },
    #[error("missing field `num_experts_per_tok` for a mixture of experts")]
    MissingActiveExperts,
    #[error(
        "dense MLP layers between the expert layers (`mlp_only_layers`, `decoder_sparse_step`) are not modelled yet"
    )]
    DenseLayersBetweenExperts,
    #[error(
        "`layer_types` names {sliding} sliding-window layers of {layers} (`num_hidden_layers`)"
    )]
    SlidingLayers { sliding: u64, layers: u64 },
    #[error("{parameters} parameters: expected at most {max} (2^42)")]
    TooManyParameters { parameters: u64, max: u64 },
    #[error(
        "`num_attention_heads` = {heads} is not a multiple of `num_key_value_heads` = {kv_heads}"
    )]
    HeadsNotMultiple { heads: u64, kv_heads: u64 },
    /// a field of the SigLIP tower's `vision_config`
    #[error("`vision_config`: {0}")]
    Vision(Box<ArchError>),
}

/// The largest config.json read: a model's is a few KiB (the catalog's models' are under
/// 10 KiB), so 16 MiB is far past any, and a file that never ends (`/dev/zero` linked in) is
/// refused instead of read until memory runs out.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads the architecture from the config.json at `path`: a regular file only, at most
/// `MAX_CONFIG_BYTES` (`bounded`: a FIFO or a device is refused, not waited on).
pub fn load(path: &Path) -> Result<Arch, ConfigJsonError> {
    let shown = || path.display().to_string();
    let text = crate::bounded::read_capped(path, MAX_CONFIG_BYTES).map_err(|e| {
        ConfigJsonError::Unreadable {
            path: shown(),
            error: std::io::Error::new(
                e.io_kind().unwrap_or(std::io::ErrorKind::InvalidData),
                e.reason(),
            ),
        }
    })?;
    let root: Value = serde_json::from_slice(&text).map_err(|error| ConfigJsonError::NotJson {
        path: shown(),
        error,
    })?;
    parse(&root, &name_from(path)).map_err(|error| ConfigJsonError::Fields {
        path: shown(),
        error,
    })
}

fn name_from(path: &Path) -> String {
    let dir = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str());
    dir.unwrap_or("config.json").to_string()
}

/// Reads the architecture numbers, descending into `text_config` for multimodal models.
pub fn parse(root: &Value, name: &str) -> Result<Arch, ArchError> {
    if !root.is_object() {
        return Err(ArchError::NotAnObject);
    }
    let tied_top = root.get("tie_word_embeddings").and_then(Value::as_bool);
    let cfg = root
        .get("text_config")
        .filter(|v| v.is_object())
        .unwrap_or(root);
    let model_type = str_field(cfg, "model_type")
        .or_else(|| str_field(root, "model_type"))
        .unwrap_or_default();
    let family = family_of(&model_type, cfg)?;
    let hidden = num(cfg, "hidden_size")?;
    let heads = num(cfg, "num_attention_heads")?;
    if heads == 0 || hidden == 0 {
        return Err(ArchError::ZeroWidth);
    }
    // capped before the vision tower is counted from it
    capped(cfg, "hidden_size", MAX_HIDDEN)?;
    let kv_heads = opt_num(cfg, "num_key_value_heads")?.unwrap_or(heads);
    let head_dim = opt_num(cfg, "head_dim")?.unwrap_or(hidden / heads);
    let layers = num(cfg, "num_hidden_layers")?;
    let window = opt_num(cfg, "sliding_window")?.filter(|_| uses_sliding_window(family, cfg));
    let moe = experts(cfg)?;
    let arch = Arch {
        name: str_field(root, "_name_or_path").unwrap_or_else(|| name.to_string()),
        family,
        hidden,
        intermediate: match moe {
            Some(m) => m.active * m.expert_intermediate + m.shared_intermediate,
            None => num(cfg, "intermediate_size")?,
        },
        layers,
        heads,
        kv_heads,
        head_dim,
        vocab: num(cfg, "vocab_size")?,
        tied_embeddings: cfg
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .or(tied_top)
            .unwrap_or(matches!(family, Family::Gemma2 | Family::Gemma3)),
        final_logit_softcapping: cfg
            .get("final_logit_softcapping")
            .is_some_and(|v| v.as_f64().is_some_and(|c| c > 0.0)),
        sliding_window: window,
        sliding_layers: window.map_or(0, |_| sliding_layers(family, cfg, layers)),
        max_position: opt_num(cfg, "max_position_embeddings")?.unwrap_or(4096),
        moe,
        vision: vision(root, hidden)?,
    };
    check_sizes(&arch)?;
    Ok(arch)
}

/// A multimodal config's vision tower: a SigLIP one (Gemma 3) is counted from its
/// `vision_config`; another kind is named as not counted.
fn vision(root: &Value, text_hidden: u64) -> Result<Vision, ArchError> {
    let Some(v) = root.get("vision_config").filter(|v| v.is_object()) else {
        return Ok(Vision::None);
    };
    let kind = str_field(v, "model_type").unwrap_or_default();
    if kind != "siglip_vision_model" {
        return Ok(Vision::Uncounted(if kind.is_empty() {
            "unnamed".into()
        } else {
            kind
        }));
    }
    let at = |key: &str, max: u64| capped(v, key, max).map_err(|e| ArchError::Vision(Box::new(e)));
    Ok(Vision::Counted(siglip_parameters(
        at("hidden_size", MAX_HIDDEN)?,
        at("intermediate_size", MAX_INTERMEDIATE)?,
        at("num_hidden_layers", MAX_LAYERS)?,
        at("patch_size", 4096)?,
        at("image_size", 1 << 16)?,
        text_hidden,
    )))
}

/// The mixture-of-experts fields, under each family's names: `num_experts` (Qwen-MoE) or
/// `num_local_experts` (Mixtral, gpt-oss); `num_experts_per_tok` or `experts_per_token`
/// (gpt-oss); one expert's width in `moe_intermediate_size` (Qwen-MoE) or `intermediate_size`.
fn experts(cfg: &Value) -> Result<Option<Moe>, ArchError> {
    let Some(experts) = opt_num(cfg, "num_experts")?
        .or(opt_num(cfg, "num_local_experts")?)
        .filter(|&e| e > 1)
    else {
        return Ok(None);
    };
    if experts > MAX_EXPERTS {
        return Err(ArchError::TooManyExperts {
            experts,
            max: MAX_EXPERTS,
        });
    }
    let dense_layers = cfg
        .get("mlp_only_layers")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty())
        || opt_num(cfg, "decoder_sparse_step")?.is_some_and(|s| s > 1);
    if dense_layers {
        return Err(ArchError::DenseLayersBetweenExperts);
    }
    let active = opt_num(cfg, "num_experts_per_tok")?
        .or(opt_num(cfg, "experts_per_token")?)
        .ok_or(ArchError::MissingActiveExperts)?;
    if active == 0 || active > experts {
        return Err(ArchError::ActiveExperts { active, experts });
    }
    let expert_intermediate = match opt_num(cfg, "moe_intermediate_size")? {
        Some(_) => capped(cfg, "moe_intermediate_size", MAX_INTERMEDIATE)?,
        None => capped(cfg, "intermediate_size", MAX_INTERMEDIATE)?,
    };
    let shared_intermediate = match opt_num(cfg, "shared_expert_intermediate_size")? {
        Some(0) | None => 0,
        Some(_) => capped(cfg, "shared_expert_intermediate_size", MAX_INTERMEDIATE)?,
    };
    Ok(Some(Moe {
        experts,
        active,
        expert_intermediate,
        shared_intermediate,
        mxfp4_experts: cfg
            .get("quantization_config")
            .and_then(|q| q.get("quant_method"))
            .and_then(Value::as_str)
            == Some("mxfp4"),
    }))
}

/// The largest sizes read, each far past any published model's (the largest hidden size is
/// 16,384, Llama 3.1 405B; the most experts 512, Qwen3-Next), and small enough together that no
/// count or byte size computed from them overflows 64 bits.
const MAX_HIDDEN: u64 = 1 << 17;
const MAX_INTERMEDIATE: u64 = 1 << 20;
const MAX_LAYERS: u64 = 4096;
const MAX_EXPERTS: u64 = 1024;
/// 2^42 parameters (4.4 trillion): past the largest open models (about 1 trillion) fourfold.
const MAX_PARAMETERS: u64 = 1 << 42;

/// `key`, present, from 1 to `max`.
fn capped(v: &Value, key: &str, max: u64) -> Result<u64, ArchError> {
    match num(v, key)? {
        n if (1..=max).contains(&n) => Ok(n),
        value => Err(ArchError::OutOfRange {
            key: key.to_string(),
            value,
            max,
        }),
    }
}

/// Zero or absurd sizes (beyond any published model by far) are refused with the field named.
fn check_sizes(a: &Arch) -> Result<(), ArchError> {
    let limits = [
        ("hidden_size", a.hidden, MAX_HIDDEN),
        ("intermediate_size", a.intermediate, MAX_INTERMEDIATE),
        ("num_hidden_layers", a.layers, MAX_LAYERS),
        ("max_position_embeddings", a.max_position, 1 << 26),
        ("num_attention_heads", a.heads, 4096),
        ("num_key_value_heads", a.kv_heads, 4096),
        ("head_dim", a.head_dim, 4096),
        ("vocab_size", a.vocab, 1 << 23),
    ];
    for (field, value, max) in limits {
        if value == 0 || value > max {
            return Err(ArchError::OutOfRange {
                key: field.to_string(),
                value,
                max,
            });
        }
    }
    if a.sliding_layers > a.layers {
        return Err(ArchError::SlidingLayers {
            sliding: a.sliding_layers,
            layers: a.layers,
        });
    }
    if a.parameters() > MAX_PARAMETERS {
        return Err(ArchError::TooManyParameters {
            parameters: a.parameters(),
            max: MAX_PARAMETERS,
        });
    }
    if !a.heads.is_multiple_of(a.kv_heads) {
        return Err(ArchError::HeadsNotMultiple {
            heads: a.heads,
            kv_heads: a.kv_heads,
        });
    }
    Ok(())
}

fn family_of(model_type: &str, cfg: &Value) -> Result<Family, ArchError> {
    Ok(match model_type {
        "llama" | "mistral" | "granite" | "mixtral" => Family::Llama,
        "qwen2" | "qwen2_moe" => Family::Qwen2,
        "qwen3" | "qwen3_moe" => Family::Qwen3,
        "gpt_oss" => Family::GptOss,
        "gemma2" => Family::Gemma2,
        "gemma3" | "gemma3_text" => Family::Gemma3,
        "phi3" => Family::Phi3,
        "" => {
            return Err(ArchError::MissingModelType);
        }
        other if cfg.get("intermediate_size").is_some() => {
            // An unknown decoder-only model: its shapes are read the Llama way.
            let _ = other;
            Family::Llama
        }
        other => {
            return Err(ArchError::UnsupportedModelType {
                model_type: other.to_string(),
            });
        }
    })
}

fn uses_sliding_window(family: Family, cfg: &Value) -> bool {
    match family {
        Family::Gemma2 | Family::Gemma3 | Family::GptOss => true,
        _ => cfg
            .get("use_sliding_window")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

fn sliding_layers(family: Family, cfg: &Value, layers: u64) -> u64 {
    if let Some(types) = cfg.get("layer_types").and_then(Value::as_array) {
        return types
            .iter()
            .filter(|t| t.as_str() == Some("sliding_attention"))
            .count() as u64;
    }
    match family {
        Family::Gemma2 => layers / 2,
        Family::Gemma3 => {
            let every = cfg
                .get("sliding_window_pattern")
                .and_then(Value::as_u64)
                .unwrap_or(6)
                .max(1);
            layers - layers / every
        }
        _ => layers,
    }
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn opt_num(v: &Value, key: &str) -> Result<Option<u64>, ArchError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_u64()
            .filter(|&n| n < (1 << 40))
            .map(Some)
            .ok_or_else(|| ArchError::NotACount {
                key: key.to_string(),
                found: x.to_string(),
            }),
    }
}

fn num(v: &Value, key: &str) -> Result<u64, ArchError> {
    opt_num(v, key)?.ok_or_else(|| ArchError::Missing {
        key: key.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn head_dim_defaults_to_hidden_over_heads() {
        let a = parse(
            &json!({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
                    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                    "vocab_size": 128256, "tie_word_embeddings": false}),
            "x",
        )
        .unwrap();
        assert_eq!(a.head_dim, 128);
        assert_eq!(a.parameters(), 8_030_261_248);
    }

    #[test]
    fn multimodal_configs_nest_the_language_model() {
        let a = parse(
            &json!({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
                "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
                "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                "vocab_size": 262208, "sliding_window": 1024}}),
            "g",
        )
        .unwrap();
        assert_eq!(a.family, Family::Gemma3);
        assert!(a.tied_embeddings);
        assert_eq!(a.sliding_layers, 29);
    }

    #[test]
    fn phi3_has_fused_projections() {
        let a = parse(
            &json!({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
                    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                    "vocab_size": 32064, "tie_word_embeddings": false}),
            "p",
        )
        .unwrap();
        let names: Vec<_> = a.projections().iter().map(|p| p.name).collect();
        assert_eq!(names, ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]);
        assert_eq!(a.parameters(), 3_821_079_552);
    }

    #[test]
    fn zero_and_absurd_sizes_are_refused() {
        let base = json!({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256});
        for (field, value) in [
            ("num_hidden_layers", 0),
            ("vocab_size", 0),
            ("num_hidden_layers", 1_000_000),
            ("num_key_value_heads", 5),
        ] {
            let mut cfg = base.clone();
            cfg[field] = json!(value);
            let err = parse(&cfg, "x").unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
        assert!(parse(&base, "x").is_ok());
    }

    #[test]
    fn missing_fields_are_named() {
        let err = parse(&json!({"model_type": "llama", "hidden_size": 8}), "x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("num_attention_heads"), "{err}");
        let err = parse(&json!({"hidden_size": 8}), "x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("model_type"), "{err}");
        let err = parse(
            &json!({"model_type": "llama", "hidden_size": -3, "num_attention_heads": 2}),
            "x",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("hidden_size"), "{err}");
    }

    /// The mixtures' config.json files (their published fields) read as the catalog has them.
    #[test]
    fn mixtures_of_experts_match_the_catalog() {
        let qwen = parse(
            &json!({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                    "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
                    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
                    "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
                    "tie_word_embeddings": false, "decoder_sparse_step": 1, "mlp_only_layers": []}),
            "Qwen/Qwen3-30B-A3B",
        )
        .unwrap();
        let layer_types: Vec<&str> = (0..24)
            .map(|i| {
                if i % 2 == 0 {
                    "sliding_attention"
                } else {
                    "full_attention"
                }
            })
            .collect();
        let oss = parse(
            &json!({"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
                    "num_local_experts": 32, "experts_per_token": 4, "num_hidden_layers": 24,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                    "vocab_size": 201088, "sliding_window": 128, "layer_types": layer_types,
                    "max_position_embeddings": 131072, "tie_word_embeddings": false,
                    "quantization_config": {"quant_method": "mxfp4"}}),
            "openai/gpt-oss-20b",
        )
        .unwrap();
        for a in [qwen, oss] {
            let catalog = crate::arch::catalog::find(&a.name).unwrap().arch;
            assert_eq!(a, catalog, "{}", a.name);
        }
        // dense layers between expert layers are refused, not silently mis-sized
        let mixed = parse(
            &json!({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                    "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
                    "num_hidden_layers": 48, "num_attention_heads": 32, "vocab_size": 151936,
                    "mlp_only_layers": [0, 1]}),
            "x",
        );
        assert!(mixed.unwrap_err().to_string().contains("mlp_only_layers"));
    }

    /// Gemma 3 4B's config.json (its published fields): the SigLIP tower in `vision_config` is
    /// counted, so the whole checkpoint matches the catalog and its 4,300,079,472 parameters.
    #[test]
    fn a_siglip_vision_tower_is_counted() {
        let a = parse(
            &json!({"model_type": "gemma3",
                    "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                        "intermediate_size": 10240, "num_hidden_layers": 34,
                        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                        "vocab_size": 262208, "sliding_window": 1024,
                        "max_position_embeddings": 131072},
                    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                        "intermediate_size": 4304, "num_hidden_layers": 27, "patch_size": 14,
                        "image_size": 896}}),
            "google/gemma-3-4b-it",
        )
        .unwrap();
        assert_eq!(a.parameters(), 4_300_079_472);
        let other = parse(
            &json!({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256,
                    "vision_config": {"model_type": "clip_vision_model"}}),
            "x",
        )
        .unwrap();
        assert_eq!(other.vision, Vision::Uncounted("clip_vision_model".into()));
    }

    #[test]
    fn a_refused_config_carries_the_field_and_its_value() {
        let base = json!({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
            "num_hidden_layers": 0, "num_attention_heads": 32, "vocab_size": 128256});
        assert_eq!(
            parse(&base, "x"),
            Err(ArchError::OutOfRange {
                key: "num_hidden_layers".into(),
                value: 0,
                max: MAX_LAYERS
            })
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, base.to_string()).unwrap();
        let e = load(&path).unwrap_err();
        assert!(
            matches!(
                &e,
                ConfigJsonError::Fields {
                    error: ArchError::OutOfRange { value: 0, .. },
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}: field `num_hidden_layers` = 0: expected 1..=4096",
                path.display()
            )
        );
    }
}
