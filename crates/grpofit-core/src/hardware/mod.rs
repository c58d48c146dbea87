//! The GPU's identity: what a card computes and moves a second, by the name NVML gives it or
//! the one a user writes. The table is `cards::CARDS`, each row citing its vendor sheet.

mod cards;
pub mod precision;

pub use cards::CARDS;
use serde::Serialize;

/// How a card reaches its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    NvLink,
    Pcie,
}

/// One card of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Card {
    /// the name grpofit prints: "H100 SXM"
    pub name: &'static str,
    /// NVML's names for it (`nvmlDeviceGetName`)
    pub nvml: &'static [&'static str],
    /// what a run file or `--gpu` may write, compared without case, spaces or dashes
    pub aliases: &'static [&'static str],
    /// dense bf16 (fp16 on the T4 and V100) tensor-core throughput, in 10^12 operations a second
    pub bf16_tflops: f64,
    /// memory bandwidth in GB/s
    pub memory_gb_s: f64,
    pub memory_gb: f64,
    pub link: Link,
    /// one direction of the link to the card's peers, in GB/s
    pub link_gb_s: f64,
    /// the vendor sheet each figure is read from
    pub sheet: &'static str,
    /// CUDA's compute capability (major, minor), from NVIDIA's CUDA GPUs table
    pub compute_capability: (u8, u8),
}

impl Card {
    /// Whether the card has bf16 tensor cores: compute capability 8.0 (Ampere) or later, the
    /// test Unsloth makes (unsloth 2026.10.9 models/_utils.py, `SUPPORTS_BFLOAT16 = ...
    /// _bf16_cap[0] >= 8`) and torch's fast path (torch 2.9.1 `torch.cuda.is_bf16_supported`,
    /// `get_device_properties(device).major >= 8`).
    pub fn has_bf16(&self) -> bool {
        self.compute_capability.0 >= 8
    }
}

/// The figures the step-time model uses: a card of the table, or what the user gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSpeed {
    pub name: String,
    pub bf16_tflops: f64,
    pub memory_gb_s: f64,
    /// one direction of the link among training GPUs, GB/s
    pub link_gb_s: f64,
    /// host to device (PCIe), GB/s: offloads, sleep mode
    pub pcie_gb_s: f64,
    /// where the figures come from: the card's sheet, or the user's keys
    pub source: String,
}

/// PCIe Gen4 x16, one direction (32 GB/s): the host link assumed for a card the user describes.
const HOST_LINK_GB_S: f64 = 32.0;

impl Card {
    pub fn speed(&self) -> GpuSpeed {
        GpuSpeed {
            name: self.name.to_string(),
            bf16_tflops: self.bf16_tflops,
            memory_gb_s: self.memory_gb_s,
            link_gb_s: self.link_gb_s,
            pcie_gb_s: match self.link {
                Link::Pcie => self.link_gb_s,
                // the SXM and superchip boards sit on PCIe Gen4 (A100) or Gen5 (Hopper on)
                Link::NvLink if self.name.starts_with("A100") => 32.0,
                Link::NvLink => 64.0,
            },
            source: self.sheet.to_string(),
        }
    }
}

impl GpuSpeed {
    /// A card the user describes (`gpu_tflops`, `gpu_bandwidth`): its links assumed PCIe Gen4.
    pub fn given(name: &str, bf16_tflops: f64, memory_gb_s: f64) -> GpuSpeed {
        GpuSpeed {
            name: name.to_string(),
            bf16_tflops,
            memory_gb_s,
            link_gb_s: HOST_LINK_GB_S,
            pcie_gb_s: HOST_LINK_GB_S,
            source: "your gpu_tflops and gpu_bandwidth".to_string(),
        }
    }
}

/// `name` without case, the vendor's words, spaces, dashes or underscores: "NVIDIA A100-SXM4-40GB"
/// → "a100sxm440gb", "H100 SXM" → "h100sxm".
fn folded(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut s = lower.as_str();
    for word in ["nvidia ", "geforce ", "tesla ", "rtx "] {
        s = s.trim_start().trim_start_matches(word);
    }
    s.chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}

/// The card NVML's name or a user's name means: an exact NVML name, else one of the aliases or
/// the table's own name (without case, spaces or dashes).
pub fn lookup(name: &str) -> Option<&'static Card> {
    let wanted = folded(name);
    if wanted.is_empty() {
        return None;
    }
    CARDS
        .iter()
        .find(|c| c.nvml.iter().any(|n| folded(n) == wanted))
        .or_else(|| {
            CARDS
                .iter()
                .find(|c| folded(c.name) == wanted || c.aliases.iter().any(|a| folded(a) == wanted))
        })
}

/// The table's names, for a message about a card it does not know.
pub fn names() -> Vec<&'static str> {
    CARDS.iter().map(|c| c.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_map_to_their_rows() {
        let cases = [
            ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
            ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
            ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
            ("Tesla T4", "T4"),
            ("NVIDIA H100 80GB HBM3", "H100 SXM"),
            ("NVIDIA H100 PCIe", "H100 PCIe"),
            ("NVIDIA H100 NVL", "H100 NVL"),
            ("NVIDIA H200", "H200"),
            ("NVIDIA H20", "H20"),
            ("NVIDIA GeForce RTX 4090", "RTX 4090"),
            ("NVIDIA A10G", "A10G"),
            ("NVIDIA A10", "A10"),
            ("NVIDIA L4", "L4"),
            ("NVIDIA B200", "B200"),
        ];
        for (nvml, row) in cases {
            assert_eq!(lookup(nvml).map(|c| c.name), Some(row), "{nvml}");
        }
    }

    #[test]
    fn short_names_pick_one_card_and_near_names_do_not_collide() {
        assert_eq!(lookup("H100").unwrap().name, "H100 SXM");
        assert_eq!(lookup("h200").unwrap().name, "H200");
        assert_eq!(lookup("H20").unwrap().name, "H20");
        assert_eq!(lookup("a10g").unwrap().name, "A10G");
        assert_eq!(lookup("A10").unwrap().name, "A10");
        assert_eq!(lookup("RTX 3090").unwrap().name, "RTX 3090");
        // the cards the presets name (presets/*.toml headers)
        for (written, row) in [
            ("L40S", "L40S"),
            ("A40", "A40"),
            ("V100", "V100 SXM2"),
            ("Tesla V100-PCIE-16GB", "V100 PCIe"),
            ("RTX 6000 Ada", "RTX 6000 Ada"),
            ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
            ("RTX A6000", "RTX A6000"),
            ("RTX 3080", "RTX 3080"),
            ("4070", "RTX 4070"),
            ("NVIDIA GeForce RTX 4060 Ti", "RTX 4060 Ti"),
            ("4060 Ti", "RTX 4060 Ti"),
        ] {
            assert_eq!(lookup(written).map(|c| c.name), Some(row), "{written}");
        }
        assert_eq!(lookup("A100 40GB PCIe").unwrap().name, "A100 40GB PCIe");
        assert!(lookup("MI300X").is_none());
        assert!(lookup("").is_none());
    }

    #[test]
    fn every_row_is_sane_and_names_its_sheet() {
        for c in CARDS {
            assert!(c.bf16_tflops > 10.0 && c.bf16_tflops < 5000.0, "{}", c.name);
            assert!(
                c.memory_gb_s > 100.0 && c.memory_gb_s < 10000.0,
                "{}",
                c.name
            );
            assert!(!c.sheet.is_empty() && !c.nvml.is_empty());
            assert_eq!(lookup(c.name).map(|x| x.name), Some(c.name));
            for n in c.nvml {
                assert_eq!(lookup(n).map(|x| x.name), Some(c.name), "{n}");
            }
        }
    }
}
