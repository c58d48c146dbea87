//! PEFT's `modules_to_save` (`[lora] modules_to_save`): modules trained whole beside the
//! adapters.
//!
//! peft 0.21.2 `utils/other.py`: `_set_trainable` wraps every module whose name ends with a
//! listed name (`key.endswith(target_key)`) in a `ModulesToSaveWrapper`, whose `update` keeps
//! the `original_module` frozen and trains `copy.deepcopy(self.original_module)`. So each listed
//! module is held twice: the frozen original (already in the base weights) and a trainable copy
//! in the original's dtype. The copy has a gradient in that dtype and the optimizer's states
//! (torch AdamW `_init_group`: `exp_avg`, `exp_avg_sq` = `torch.zeros_like(p)`, the parameter's
//! dtype, bf16 for a bf16 model).
//!
//! Traced (calibration/cpu-trace, qwen2 `modules_to_save` = ["lm_head"], trl 0.19.1 and 1.15.0):
//! the static memory grows by one bf16 V x H copy and two bf16 V x H moments (+ a 4-byte step);
//! the step by the head's gradient (`memory::step::trl`).

use super::packing::{Packing, block_bytes, optimizer_bytes};
use crate::arch::Arch;
use crate::run::{Quant, RunConfig};

/// A module of the model that `modules_to_save` can name: its name, its weight's elements and
/// how many there are (a projection, one per decoder layer). Biases and norms are left out.
pub fn modules(arch: &Arch) -> Vec<(&'static str, u64, u64)> {
    let vh = arch.vocab * arch.hidden;
    let mut v = vec![("lm_head", vh, 1), ("embed_tokens", vh, 1)];
    v.extend(
        arch.projections()
            .iter()
            .map(|p| (p.name, p.fan_in * p.fan_out, arch.layers)),
    );
    v
}

/// The modules a listed name selects: PEFT's `key.endswith(target_key)` on the module's full
/// name (`model.layers.0.self_attn.q_proj`), read on its last segment.
pub fn matches(module: &str, name: &str) -> bool {
    let leaf = name.rsplit('.').next().unwrap_or(name);
    !leaf.is_empty() && module.ends_with(leaf)
}

/// What the trainable copies hold on a training GPU, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SavedModules {
    /// the copies' weights, each in its block
    pub copies: u64,
    /// their gradients, in the copies' dtype
    pub gradients: u64,
    /// the optimizer's states for them
    pub optimizer: u64,
    /// the LM head is one of them: its gradient is made in the step (`StepShape::head_copy`)
    pub head: bool,
}

/// The trainable copies `run.modules_to_save` makes, packed into `packing`. The head and the
/// embedding are never quantised (bitsandbytes packs the decoder's linear layers only), so a copy
/// is 16-bit, or fp32 in an fp32 model; the reader refuses a quantised projection.
pub(crate) fn saved_modules(run: &RunConfig, packing: &mut Packing) -> SavedModules {
    if run.full_finetuning {
        return SavedModules::default();
    }
    let per = if run.quant == Quant::Fp32 { 4 } else { 2 };
    let mut s = SavedModules::default();
    for (module, elements, count) in modules(&run.arch) {
        if !run.modules_to_save.iter().any(|n| matches(module, n)) {
            continue;
        }
        let copy = block_bytes(per * elements) * count;
        let states = optimizer_bytes(run.optimizer, elements, per) * count;
        s.copies += copy;
        s.gradients += copy;
        s.optimizer += states;
        s.head |= module == "lm_head";
        // the copy, its gradient and the optimizer's states
        packing.add(per * elements, 2 * count);
        packing.add(optimizer_bytes(run.optimizer, elements, per), count);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn run_7b(saved: &[&str]) -> RunConfig {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("in the catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.modules_to_save = saved.iter().map(|s| s.to_string()).collect();
        run
    }

    /// The N10 run: Qwen2.5-7B, lm_head and embed_tokens. Each is V x H = 152,064 x
    /// 3,584 = 544,997,376 elements, 1,089,994,752 B in bf16, in a block of 520 x 2 MiB =
    /// 1,090,519,040 B (`block_bytes`): copies 2,181,038,080 B, gradients the same, AdamW
    /// moments 2 x 2,181,038,080 + 2 x 512.
    #[test]
    fn modules_to_save_adds_its_copies() {
        let run = run_7b(&["lm_head", "embed_tokens"]);
        let s = saved_modules(&run, &mut Packing::default());
        assert_eq!(s.copies, 2_181_038_080);
        assert_eq!(s.gradients, 2_181_038_080);
        assert_eq!(s.optimizer, 4_362_076_160 + 1024);
        assert!(s.head);
        // PEFT's suffix match: "model.embed_tokens" names the same module; nothing listed, none
        let s = saved_modules(&run_7b(&["model.embed_tokens"]), &mut Packing::default());
        assert_eq!((s.copies, s.head), (1_090_519_040, false));
        assert_eq!(
            saved_modules(&run_7b(&[]), &mut Packing::default()),
            SavedModules::default()
        );
        // full fine-tuning trains the modules themselves: no copy
        let mut full = run_7b(&["lm_head"]);
        full.full_finetuning = true;
        assert_eq!(
            saved_modules(&full, &mut Packing::default()),
            SavedModules::default()
        );
    }

    #[test]
    fn a_projection_name_selects_it_in_every_layer() {
        // q_proj: 3,584 x 3,584 = 12,845,056 elements, 25,690,112 B in bf16 (a 2 MiB multiple),
        // in each of 28 layers: 719,323,136 B
        let run = run_7b(&["q_proj"]);
        let s = saved_modules(&run, &mut Packing::default());
        assert_eq!(s.copies, 719_323_136);
        assert!(matches("gate_proj", "proj") && !matches("lm_head", "head_"));
    }
}
