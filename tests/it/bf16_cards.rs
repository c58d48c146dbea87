//! A run computing in bf16 on a card without bf16 (compute capability under 8.0: the T4, the
//! V100) is warned about before launch, from the binary: TRL's GRPOConfig computes in bf16
//! unless `fp16` (trl 0.19.1 on), which transformers' TrainingArguments refuses where torch has
//! no bf16; Unsloth loads such a card's model in float16 and refuses a written `bf16 = true`,
//! but trains Gemma 3 and gpt-oss in float32 (`hardware::precision`, each check cited there).

#![allow(clippy::unwrap_used)]

use serde_json::Value;

const NOTEBOOK: &str = include_str!("../fixtures/journeys/unsloth-notebook.toml");
const TRL_RECIPE: &str = include_str!("../recipes/qwen2.5-1.5b-zero2.toml");

fn warnings(text: &str, card: &str) -> Vec<String> {
    let v: Value = crate::common::estimate_80gib(text, &["--gpu", card], card);
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

fn about_bf16(ws: &[String]) -> Vec<&String> {
    ws.iter().filter(|w| w.contains("has no bf16")).collect()
}

#[test]
fn trl_in_bf16_is_warned_about_on_a_v100_and_a_t4_not_on_an_a100() {
    // the recipe writes `bf16 = true`
    assert!(TRL_RECIPE.contains("\nbf16 = true"));
    for card in ["V100", "T4"] {
        let ws = warnings(TRL_RECIPE, card);
        let said = about_bf16(&ws);
        assert_eq!(said.len(), 1, "{card}: {ws:?}");
        assert!(
            said[0].starts_with("`[grpo] bf16 = true`, but the "),
            "{said:?}"
        );
        assert!(
            said[0].contains("Your setup doesn't support bf16/gpu"),
            "{said:?}"
        );
    }
    assert!(about_bf16(&warnings(TRL_RECIPE, "A100 80GB SXM")).is_empty());
    // bf16 left out: trl 1.15's GRPOConfig computes in bf16 unless fp16
    let unset = TRL_RECIPE.replace("\nbf16 = true", "");
    let ws = warnings(&unset, "T4");
    assert!(
        about_bf16(&ws)[0]
            .contains("trl 1.15.0's GRPOConfig computes in bf16 unless `fp16` is true"),
        "{ws:?}"
    );
    // fp16 = true, bf16 = false: what the card computes
    let fp16 = TRL_RECIPE.replace("\nbf16 = true", "\nbf16 = false\nfp16 = true");
    assert!(about_bf16(&warnings(&fp16, "T4")).is_empty());
}

#[test]
fn unsloth_is_warned_about_only_for_a_written_bf16() {
    // Unsloth's GRPOConfig defaults bf16 to False and loads the model in float16 on a T4
    assert!(about_bf16(&warnings(NOTEBOOK, "T4")).is_empty());
    let written = NOTEBOOK.replace("[grpo]\n", "[grpo]\nbf16 = true\n");
    let ws = warnings(&written, "T4");
    assert!(
        about_bf16(&ws)[0].contains("Unsloth: Model is in float16 precision"),
        "{ws:?}"
    );
    assert!(about_bf16(&warnings(&written, "L4")).is_empty());
}

/// Gemma 3 is on Unsloth's FORCE_FLOAT32 list: on a T4 it trains in float32, no TypeError,
/// bf16 written or not.
#[test]
fn unsloth_trains_gemma_3_in_float32_on_a_t4() {
    let gemma = NOTEBOOK.replace("unsloth/Qwen3-4B-Base", "google/gemma-3-4b-it");
    for text in [
        gemma.clone(),
        gemma.replace("[grpo]\n", "[grpo]\nbf16 = true\n"),
    ] {
        let ws = warnings(&text, "T4");
        let said = about_bf16(&ws);
        assert_eq!(said.len(), 1, "{ws:?}");
        assert!(
            said[0].contains("Unsloth trains Gemma 3 in float32 there"),
            "{said:?}"
        );
        assert!(!said[0].contains("refuses"), "{said:?}");
    }
}

/// Each family joins Unsloth's FORCE_FLOAT32 list in its own release (Gemma 3 in 2025.3.19,
/// Qwen3-MoE in 2026.7.1): before it, the card's float16 path and no warning for a run that
/// writes no bf16; from it, one warning that says what Unsloth casts (float16 weights) and what
/// the estimate undercounts (float32 activations).
#[test]
fn unsloth_forces_float32_from_the_release_that_lists_the_family() {
    for (model, before, from) in [
        ("google/gemma-3-1b-it", "2025.3.18", "2025.3.19"),
        ("Qwen/Qwen3-30B-A3B", "2025.10.4", "2026.10.9"),
    ] {
        let text = NOTEBOOK.replace("unsloth/Qwen3-4B-Base", model);
        let at = |version: &str| -> Vec<String> {
            let v: Value = crate::common::estimate_80gib(
                &text,
                &["--gpu", "T4", "--unsloth-version", version],
                model,
            );
            v["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap().to_string())
                .collect()
        };
        let ws = at(before);
        assert!(about_bf16(&ws).is_empty(), "{model} {before}: {ws:?}");
        let ws = at(from);
        let said = about_bf16(&ws);
        assert_eq!(said.len(), 1, "{model} {from}: {ws:?}");
        assert!(said[0].contains("weights are cast to float16"), "{said:?}");
        assert!(said[0].contains("counts in 16 bits"), "{said:?}");
    }
}

/// A TRL recipe's warning spells its keys as the recipe writes them (`bf16: true`).
#[test]
fn a_recipe_reads_its_own_keys_in_the_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("r.yaml"),
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nuse_vllm: false\nbf16: true\n",
    )
    .unwrap();
    let out = crate::common::run(crate::common::grpofit_in(dir.path()).args([
        "--offline",
        "estimate",
        "--config",
        "r.yaml",
        "--gpu",
        "T4",
        "--gpu-mem",
        "14GiB",
    ]));
    assert!(
        out.stdout.contains(
            "warning: `bf16: true`, but the T4 (compute capability 7.5) has no bf16: set `fp16: true` and `bf16: false`"
        ),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
}
