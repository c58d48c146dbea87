//! Whether the checkpoint Unsloth loads for `from_pretrained(model_name, load_in_4bit = True)` is
//! a pre-quantized 4-bit upload. `FastLanguageModel.from_pretrained` (unsloth 2025.2.4 to
//! 2025.8.9, unsloth/models/loader.py) loads `get_model_name(model_name, load_in_4bit)`
//! (loader_utils.py): a name of its `FLOAT_TO_INT_MAPPER` (mapper.py) becomes that model's
//! `-bnb-4bit` upload, a `-bnb-4bit` name stays (or, in `BAD_MAPPINGS`, goes back to its 16-bit
//! repository), and any other name, e.g. a fine-tune under its own owner, loads as given and is
//! quantized on the fly. `unsloth_4bit_swaps.json` holds the mapper's names per release, written
//! by tools/contract/unsloth_swaps.py from those wheels.

use crate::contract::release::Release;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const SWAPS_JSON: &str = include_str!("unsloth_4bit_swaps.json");

#[derive(Deserialize)]
struct Swaps {
    /// a 16-bit name and the first release whose mapper swaps it for a `-bnb-4bit` upload
    to_4bit: BTreeMap<String, String>,
    /// a `-bnb-4bit` name and the first release that loads its 16-bit repository instead
    to_16bit: BTreeMap<String, String>,
}

fn swaps() -> &'static Swaps {
    static SWAPS: OnceLock<Swaps> = OnceLock::new();
    SWAPS.get_or_init(|| {
        serde_json::from_str(SWAPS_JSON).expect("unsloth_4bit_swaps.json is generated valid")
    })
}

/// Whether `table` names `name` by the release `unsloth`: its first release is of `unsloth`'s
/// line or before (a release between the wheels read takes the newest of its line, as the TRL
/// ladder does).
fn listed_by(table: &BTreeMap<String, String>, name: &str, unsloth: Release) -> bool {
    table
        .get(name)
        .and_then(|first| Release::parse(first))
        .is_some_and(|first| first.line() <= unsloth.line())
}

/// Whether Unsloth `unsloth`, asked for `model_name` in 4-bit, loads a pre-quantized `-bnb-4bit`
/// upload (whose config.json carries a `quantization_config`), rather than quantizing a 16-bit
/// checkpoint on the fly.
pub(crate) fn loads_prequantized(model_name: &str, unsloth: Release) -> bool {
    let name = model_name.to_lowercase();
    if name.ends_with("-bnb-4bit") {
        !listed_by(&swaps().to_16bit, &name, unsloth)
    } else {
        listed_by(&swaps().to_4bit, &name, unsloth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsloths_mapper_swaps_the_names_it_lists() {
        let may_2025 = Release::new(2025, 5, 2);
        // Qwen3 came into the mapper with unsloth 2025.5 (mapper.py: "unsloth/Qwen3-8B-unsloth-bnb-4bit")
        assert!(loads_prequantized("Qwen/Qwen3-8B", may_2025));
        assert!(!loads_prequantized(
            "Qwen/Qwen3-8B",
            Release::new(2025, 3, 19)
        ));
        assert!(loads_prequantized(
            "unsloth/Qwen2.5-3B-Instruct",
            Release::new(2025, 2, 0)
        ));
        // a fine-tune under its own owner is no mapper name: loaded as given, in 16 bits
        assert!(!loads_prequantized(
            "Erland/DeepSeek-R1-0528-Qwen3-8B",
            may_2025
        ));
        // a 4-bit upload named as such stays, unless BAD_MAPPINGS sends it back (MoEs)
        assert!(loads_prequantized(
            "unsloth/mistral-7b-instruct-v0.3-bnb-4bit",
            may_2025
        ));
        assert!(!loads_prequantized(
            "unsloth/Qwen3-30B-A3B-bnb-4bit",
            may_2025
        ));
    }
}
