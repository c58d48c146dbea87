//! The built-in catalog of popular GRPO models, with their exact `config.json` numbers.

use crate::arch::{Arch, Family, Moe, Vision, siglip_parameters};

/// One catalog row: the Hugging Face id people type, and the architecture numbers.
struct Entry {
    id: &'static str,
    family: Family,
    /// hidden, intermediate, layers, heads, kv_heads, head_dim, vocab
    dims: [u64; 7],
    tied: bool,
    /// (window, sliding layers)
    sliding: Option<(u64, u64)>,
    max_position: u64,
    /// a mixture of experts: (experts, active per token, shared expert width); the
    /// intermediate of `dims` is then one expert's width
    moe: Option<(u64, u64, u64)>,
}

const fn e(
    id: &'static str,
    family: Family,
    dims: [u64; 7],
    tied: bool,
    sliding: Option<(u64, u64)>,
    max_position: u64,
) -> Entry {
    Entry {
        id,
        family,
        dims,
        tied,
        sliding,
        max_position,
        moe: None,
    }
}

/// A mixture-of-experts entry: `dims` holds one expert's width as the intermediate.
const fn m(
    id: &'static str,
    family: Family,
    dims: [u64; 7],
    sliding: Option<(u64, u64)>,
    max_position: u64,
    moe: (u64, u64, u64),
) -> Entry {
    Entry {
        id,
        family,
        dims,
        tied: false,
        sliding,
        max_position,
        moe: Some(moe),
    }
}

use Family::*;

// Numbers from each model's public config.json on the Hugging Face hub.
const ENTRIES: &[Entry] = &[
    e(
        "Qwen/Qwen2.5-0.5B-Instruct",
        Qwen2,
        [896, 4864, 24, 14, 2, 64, 151936],
        true,
        None,
        32768,
    ),
    e(
        "Qwen/Qwen2.5-1.5B-Instruct",
        Qwen2,
        [1536, 8960, 28, 12, 2, 128, 151936],
        true,
        None,
        32768,
    ),
    e(
        "Qwen/Qwen2.5-3B-Instruct",
        Qwen2,
        [2048, 11008, 36, 16, 2, 128, 151936],
        true,
        None,
        32768,
    ),
    e(
        "Qwen/Qwen2.5-7B-Instruct",
        Qwen2,
        [3584, 18944, 28, 28, 4, 128, 152064],
        false,
        None,
        32768,
    ),
    e(
        "Qwen/Qwen2.5-14B-Instruct",
        Qwen2,
        [5120, 13824, 48, 40, 8, 128, 152064],
        false,
        None,
        32768,
    ),
    e(
        "Qwen/Qwen2.5-32B-Instruct",
        Qwen2,
        [5120, 27648, 64, 40, 8, 128, 152064],
        false,
        None,
        32768,
    ),
    e(
        "Qwen/Qwen3-0.6B",
        Qwen3,
        [1024, 3072, 28, 16, 8, 128, 151936],
        true,
        None,
        40960,
    ),
    e(
        "Qwen/Qwen3-1.7B",
        Qwen3,
        [2048, 6144, 28, 16, 8, 128, 151936],
        true,
        None,
        40960,
    ),
    e(
        "Qwen/Qwen3-4B",
        Qwen3,
        [2560, 9728, 36, 32, 8, 128, 151936],
        true,
        None,
        40960,
    ),
    e(
        "Qwen/Qwen3-8B",
        Qwen3,
        [4096, 12288, 36, 32, 8, 128, 151936],
        false,
        None,
        40960,
    ),
    e(
        "Qwen/Qwen3-14B",
        Qwen3,
        [5120, 17408, 40, 40, 8, 128, 151936],
        false,
        None,
        40960,
    ),
    e(
        "Qwen/Qwen3-32B",
        Qwen3,
        [5120, 25600, 64, 64, 8, 128, 151936],
        false,
        None,
        40960,
    ),
    e(
        "meta-llama/Llama-3.2-1B-Instruct",
        Llama,
        [2048, 8192, 16, 32, 8, 64, 128256],
        true,
        None,
        131072,
    ),
    e(
        "meta-llama/Llama-3.2-3B-Instruct",
        Llama,
        [3072, 8192, 28, 24, 8, 128, 128256],
        true,
        None,
        131072,
    ),
    e(
        "meta-llama/Llama-3.1-8B-Instruct",
        Llama,
        [4096, 14336, 32, 32, 8, 128, 128256],
        false,
        None,
        131072,
    ),
    e(
        "google/gemma-3-1b-it",
        Gemma3,
        [1152, 6912, 26, 4, 1, 256, 262144],
        true,
        Some((512, 22)),
        32768,
    ),
    e(
        "google/gemma-3-4b-it",
        Gemma3,
        [2560, 10240, 34, 8, 4, 256, 262208],
        true,
        Some((1024, 29)),
        131072,
    ),
    e(
        "google/gemma-3-12b-it",
        Gemma3,
        [3840, 15360, 48, 16, 8, 256, 262208],
        true,
        Some((1024, 40)),
        131072,
    ),
    e(
        "google/gemma-2-2b-it",
        Gemma2,
        [2304, 9216, 26, 8, 4, 256, 256000],
        true,
        Some((4096, 13)),
        8192,
    ),
    e(
        "google/gemma-2-9b-it",
        Gemma2,
        [3584, 14336, 42, 16, 8, 256, 256000],
        true,
        Some((4096, 21)),
        8192,
    ),
    e(
        "mistralai/Mistral-7B-Instruct-v0.3",
        Llama,
        [4096, 14336, 32, 32, 8, 128, 32768],
        false,
        None,
        32768,
    ),
    e(
        "microsoft/Phi-3-mini-4k-instruct",
        Phi3,
        [3072, 8192, 32, 32, 32, 96, 32064],
        false,
        None,
        4096,
    ),
    e(
        "microsoft/Phi-3.5-mini-instruct",
        Phi3,
        [3072, 8192, 32, 32, 32, 96, 32064],
        false,
        None,
        131072,
    ),
    e(
        "microsoft/phi-4",
        Phi3,
        [5120, 17920, 40, 40, 10, 128, 100352],
        false,
        None,
        16384,
    ),
    e(
        "microsoft/Phi-4-mini-instruct",
        Phi3,
        [3072, 8192, 32, 24, 8, 128, 200064],
        true,
        None,
        131072,
    ),
    e(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        Qwen2,
        [1536, 8960, 28, 12, 2, 128, 151936],
        false,
        None,
        131072,
    ),
    e(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        Qwen2,
        [3584, 18944, 28, 28, 4, 128, 152064],
        false,
        None,
        131072,
    ),
    e(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
        Qwen2,
        [5120, 13824, 48, 40, 8, 128, 152064],
        false,
        None,
        131072,
    ),
    e(
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        Llama,
        [4096, 14336, 32, 32, 8, 128, 128256],
        false,
        None,
        131072,
    ),
    // mixtures of experts: experts, active per token, shared expert width
    m(
        "Qwen/Qwen3-30B-A3B",
        Qwen3,
        [2048, 768, 48, 32, 4, 128, 151936],
        None,
        40960,
        (128, 8, 0),
    ),
    m(
        "openai/gpt-oss-20b",
        GptOss,
        [2880, 2880, 24, 64, 8, 64, 201088],
        Some((128, 12)),
        131072,
        (32, 4, 0),
    ),
    m(
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        Llama,
        [4096, 14336, 32, 32, 8, 128, 32000],
        None,
        32768,
        (8, 2, 0),
    ),
];

impl Entry {
    fn arch(&self) -> Arch {
        let [
            hidden,
            intermediate,
            layers,
            heads,
            kv_heads,
            head_dim,
            vocab,
        ] = self.dims;
        let moe = self.moe.map(|(experts, active, shared)| Moe {
            experts,
            active,
            expert_intermediate: intermediate,
            shared_intermediate: shared,
            // openai/gpt-oss-20b's config.json: quantization_config {"quant_method": "mxfp4"}
            mxfp4_experts: self.family == Family::GptOss,
        });
        Arch {
            name: self.id.to_string(),
            family: self.family,
            hidden,
            intermediate: moe.map_or(intermediate, |m| {
                m.active * m.expert_intermediate + m.shared_intermediate
            }),
            layers,
            heads,
            kv_heads,
            head_dim,
            vocab,
            tied_embeddings: self.tied,
            final_logit_softcapping: self.family == Family::Gemma2,
            sliding_window: self.sliding.map(|(w, _)| w),
            sliding_layers: self.sliding.map_or(0, |(_, n)| n),
            max_position: self.max_position,
            moe,
            vision: match self.family {
                // every Gemma 3 but the text-only 1B (hidden 1152) is multimodal: SigLIP
                // so400m at 896 px in 14 px patches (the checkpoints' vision_config)
                Family::Gemma3 if hidden > 1152 => {
                    Vision::Counted(siglip_parameters(1152, 4304, 27, 14, 896, hidden))
                }
                _ => Vision::None,
            },
        }
    }
}

/// Quantisation a model id implies (Unsloth's re-uploads say it in the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpliedQuant {
    None,
    FourBit,
}

/// What a name resolved to.
pub struct Found {
    /// the catalog entry's Hugging Face id
    pub id: &'static str,
    pub arch: Arch,
    pub quant: ImpliedQuant,
}

/// Words that re-uploads and chat variants add to a base model's name without changing its shape.
const NOISE: &[&str] = &[
    "unsloth", "bnb", "4bit", "8bit", "instruct", "it", "chat", "base", "pt", "dynamic", "gguf",
    "awq", "gptq", "fp8", "meta",
];

/// A name reduced to the words that identify the architecture: `unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit`
/// and `Qwen/Qwen2.5-1.5B` both become `qwen2.5-1.5b`.
fn key(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    base.split(['-', '_'])
        .filter(|w| !w.is_empty() && !NOISE.contains(w))
        .collect::<Vec<_>>()
        .join("-")
}

/// Looks a model up by Hugging Face id, case-insensitively, Unsloth's re-uploads included.
pub fn find(name: &str) -> Option<Found> {
    let wanted = key(name);
    let entry = ENTRIES.iter().find(|e| key(e.id) == wanted)?;
    Some(Found {
        id: entry.id,
        arch: entry.arch(),
        quant: implied_quant(name),
    })
}

/// A 4-bit upload says so in its name (`-bnb-4bit`, `-unsloth-bnb-4bit`).
pub fn implied_quant(name: &str) -> ImpliedQuant {
    if name.to_ascii_lowercase().contains("4bit") {
        ImpliedQuant::FourBit
    } else {
        ImpliedQuant::None
    }
}

/// Every catalog id, for listings and suggestions.
pub fn ids() -> impl Iterator<Item = &'static str> {
    ENTRIES.iter().map(|e| e.id)
}

/// The catalog ids closest to a name that was not found, best first.
pub fn closest(name: &str, n: usize) -> Vec<&'static str> {
    // a name far longer than any id (a Hub id is at most 96 characters) is near none: not
    // measured, so a 10 MB name costs nothing
    if name.len() > 4 * 96 {
        return Vec::new();
    }
    let wanted = key(name);
    let mut scored: Vec<(usize, &'static str)> = ENTRIES
        .iter()
        .map(|e| (edit_distance(&wanted, &key(e.id)), e.id))
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, id)| id).collect()
}

/// Levenshtein distance, for "did you mean" suggestions.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_are_exact() {
        let count = |id: &str| find(id).unwrap().arch.parameters();
        assert_eq!(count("Qwen/Qwen2.5-1.5B-Instruct"), 1_543_714_304);
        assert_eq!(count("meta-llama/Llama-3.1-8B-Instruct"), 8_030_261_248);
        assert_eq!(count("google/gemma-3-1b-it"), 999_885_952);
        // measured n_params in calibration/h200-hf-peft.jsonl
        assert_eq!(count("Qwen/Qwen2.5-0.5B"), 494_032_768);
        assert_eq!(count("Qwen/Qwen2.5-3B"), 3_085_938_688);
        assert_eq!(count("meta-llama/Llama-3.2-1B"), 1_235_814_400);
        assert_eq!(count("Qwen/Qwen3-4B"), 4_022_468_096);
        // mixtures of experts: every expert resident (safetensors totals on the Hub)
        assert_eq!(count("Qwen/Qwen3-30B-A3B"), 30_532_122_624);
        // multimodal Gemma 3: the language model plus the SigLIP tower and its projector
        assert_eq!(count("google/gemma-3-4b-it"), 4_300_079_472);
        assert_eq!(count("google/gemma-3-12b-it"), 12_187_325_040);
        assert_eq!(count("openai/gpt-oss-20b"), 20_914_757_184);
        assert_eq!(
            count("mistralai/Mixtral-8x7B-Instruct-v0.1"),
            46_702_792_704
        );
    }

    #[test]
    fn unsloth_reuploads_resolve_with_their_quantisation() {
        let f = find("unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit").unwrap();
        assert_eq!(f.arch.parameters(), 1_543_714_304);
        assert_eq!(f.quant, ImpliedQuant::FourBit);
        let g = find("UNSLOTH/gemma-3-1b-it").unwrap();
        assert_eq!(g.arch.vocab, 262_144);
        assert_eq!(g.quant, ImpliedQuant::None);
        assert!(find("unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit").is_some());
    }

    #[test]
    fn unknown_names_get_close_suggestions() {
        assert!(find("Qwen/Qwen2.5-2B").is_none());
        let near = closest("Qwen2.5-2B", 3);
        assert!(near.iter().any(|id| id.contains("Qwen2.5")), "{near:?}");
    }

    #[test]
    fn catalog_is_large_and_unambiguous() {
        let keys: Vec<String> = ENTRIES.iter().map(|e| key(e.id)).collect();
        assert!(keys.len() >= 20);
        for (i, k) in keys.iter().enumerate() {
            assert!(!keys[i + 1..].contains(k), "duplicate catalog key {k}");
        }
    }
}
