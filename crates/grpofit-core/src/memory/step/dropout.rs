//! The adapters' dropout in training mode (`lora_dropout`, `RunConfig::lora_dropout`): what it
//! saves for the backward, per token of one decoder layer.
//!
//! PEFT (peft 0.16.0 to 0.18.1 `tuners/lora/layer.py`): `LoraLayer.update_layer` makes
//! `nn.Dropout(p=lora_dropout)` where `lora_dropout > 0.0`, else `nn.Identity()`; `Linear.forward`
//! runs `x = self._cast_input_dtype(x, lora_A.weight.dtype)` and `result + lora_B(lora_A(
//! dropout(x))) * scaling`. In training mode (TRL's loss forward, and its no-grad scoring: the
//! trainer calls `model.train()` and scores under `torch.no_grad()`) each adapted projection
//! drops its own copy of its input. On CUDA torch's `dropout` runs the fused `native_dropout`
//! (torch 2.9 `aten/src/ATen/native/Dropout.cpp`: `is_fused_kernel_acceptable`, 0 < p < 1),
//! whose backward (`NativeDropoutBackward0`) keeps the bool mask: 1 byte an element of the
//! projection's input, beside what `lora_A` already saves of its (now dropped) input, autocast's
//! bf16 copy on the trainer's path (`shape::StepPath::lora_element`), the same bytes as without
//! dropout. The dropped fp32 output lives only until `lora_A`'s cast.
//!
//! Traced (`calibration/cpu-trace`, `dropout` / `dropout_no_gc` mixes, trl 0.19.1, 1.0.0 and
//! 1.16.0, qwen2 and llama, phi3 on 0.19.1 and 1.0.0; CPU's dropout stood in by
//! `native_dropout`, `tools/trace/kernels.py`):
//! `native_dropout`'s bool outputs, one per adapter, among the saved tensors. With checkpointing
//! the recomputed layer's masks are live at the backward's peak; without it every layer's.
//! To replay the same masks in the recompute, torch's checkpoint keeps the RNG states
//! (`preserve_rng_state=True`, torch 2.9 `utils/checkpoint.py` `CheckpointFunction.forward`:
//! `torch.get_rng_state()`, 5,056 bytes, and `get_device_states`' `torch.cuda.get_rng_state()`,
//! the generator's seed and offset), host tensors kept for every checkpointed layer whether or
//! not anything drops: no GPU bytes, and nothing the dropout adds.
//!
//! Unsloth (read from the wheels, not measured):
//! - 2025.2.4 to 2026.10.6 `FastLlamaModel.patch_peft_model` patches its fused LoRA kernels only
//!   `if lora_dropout == 0 and bias == "none"` ("Unsloth will patch all other layers, except
//!   LoRA matrices, causing a performance hit"): the projections run PEFT's `Linear.forward`, each
//!   adapter saving its own 16-bit dropped input (where the fused kernels keep one shared `X`
//!   for q, k and v, and for gate and up) and the mask;
//! - 2026.10.7 on (read in 2026.10.7 and 2026.10.9) runs the dropout inside the fused kernels (`kernels/fast_lora.py`
//!   `FUSED_LORA_DROPOUT`, on unless `UNSLOTH_FUSED_LORA_DROPOUT=0`; `_dropout_forward` ->
//!   `torch.native_dropout`, and `LoRA_MLP.forward` / `LoRA_QKV.forward` save the masks with
//!   `ctx.save_for_backward(..., *masks)` and replay the dropped input in the backward): the
//!   mask only.

use crate::arch::Arch;
use crate::run::{RunConfig, Stack};

/// How the step's adapters drop their inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AdapterDropout {
    /// no dropout (p = 0: `nn.Identity`), no adapter, or `disable_dropout`
    #[default]
    Off,
    /// each adapter's dropout saves its bool mask (PEFT on CUDA; Unsloth's fused kernels from
    /// 2026.10.7)
    Mask,
    /// Unsloth before 2026.10.7: PEFT's forward instead of the fused kernels, each adapter saving
    /// its 16-bit dropped input and its mask
    UnfusedPeft,
}

/// The 16-bit copy of its input each adapter's `lora_A` saves on Unsloth's unfused path.
const UNFUSED_INPUT_ELEMENT: u64 = 2;
/// `native_dropout`'s mask: torch.bool.
const MASK_ELEMENT: u64 = 1;

impl AdapterDropout {
    /// The run's: none without an adapter or at p = 0 (PEFT's `nn.Identity`), else by stack
    /// and, on Unsloth, by whether the release fuses the dropout into its LoRA kernels
    /// (`StackVersions::unsloth_fused_lora_dropout`).
    pub fn of(run: &RunConfig) -> AdapterDropout {
        if run.full_finetuning || run.lora_dropout <= 0.0 {
            return AdapterDropout::Off;
        }
        match run.stack {
            Stack::Unsloth if !run.versions.unsloth_fused_lora_dropout() => {
                AdapterDropout::UnfusedPeft
            }
            _ => AdapterDropout::Mask,
        }
    }

    /// Bytes a token one decoder layer's adapters save for their dropout, with LoRA on
    /// `targets` (each targeted projection's input width).
    pub fn saved_per_token(self, arch: &Arch, targets: &[bool]) -> u64 {
        self.element() * adapted_fan_in(arch, targets)
    }

    /// What the first decoder layer's q, k and v adapters' dropout does not save without
    /// checkpointing, a token: their input, the first input norm's output, requires no grad
    /// (`trl::frozen_input_norm`: nothing before it is trained, and only checkpointing hooks
    /// `enable_input_require_grads`), so `native_dropout` makes no autograd node and its mask
    /// goes (`lora_A` still saves the dropped input, for its weight's gradient). Traced (trl
    /// 0.19.1 qwen2 `dropout_no_gc`, at_peak backward: `native_dropout` 30,208 B x 9 of the 12
    /// the two layers' q, k, v, o, gate and up would keep).
    pub fn unsaved_in_first_layer(self, arch: &Arch, targets: &[bool]) -> u64 {
        match self {
            AdapterDropout::Off => 0,
            _ => MASK_ELEMENT * input_norm_readers(arch, targets).1,
        }
    }

    /// Bytes an element of an adapted projection's input that its dropout saves.
    pub fn element(self) -> u64 {
        match self {
            AdapterDropout::Off => 0,
            AdapterDropout::Mask => MASK_ELEMENT,
            AdapterDropout::UnfusedPeft => MASK_ELEMENT + UNFUSED_INPUT_ELEMENT,
        }
    }
}

/// The input widths of a layer's adapted projections (`targets`, as `target_mask` gives them)
/// summed: the elements a token's adapters drop in one layer.
pub fn adapted_fan_in(arch: &Arch, targets: &[bool]) -> u64 {
    arch.projections()
        .iter()
        .zip(targets)
        .filter(|(_, on)| **on)
        .map(|(p, _)| p.fan_in)
        .sum()
}

/// The adapted projections that read a layer's input norm (q, k and v; Phi-3's `qkv_proj`):
/// their number and their input widths summed. In the first layer, without checkpointing,
/// their input needs no gradient and their dropout has no backward
/// ([`AdapterDropout::unsaved_in_first_layer`]; `time::ops` skips their backward kernels).
pub fn input_norm_readers(arch: &Arch, targets: &[bool]) -> (u64, u64) {
    let reads = |name: &str| matches!(name, "q_proj" | "k_proj" | "v_proj" | "qkv_proj");
    arch.projections()
        .iter()
        .zip(targets)
        .filter(|(p, on)| **on && reads(p.name))
        .fold((0, 0), |(n, w), (p, _)| (n + 1, w + p.fan_in))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::memory::step::shape::StepPath;
    use crate::memory::step::{StepShape, trl_step};

    #[test]
    fn each_adapter_keeps_a_byte_of_its_input_width() {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch;
        let all = vec![true; arch.projections().len()];
        let widths: u64 = arch.projections().iter().map(|p| p.fan_in).sum();
        assert_eq!(AdapterDropout::Off.saved_per_token(&arch, &all), 0);
        assert_eq!(AdapterDropout::Mask.saved_per_token(&arch, &all), widths);
        assert_eq!(
            AdapterDropout::UnfusedPeft.saved_per_token(&arch, &all),
            3 * widths
        );
        // q and v only: q's and v's inputs, hidden wide each
        let qv: Vec<bool> = arch
            .projections()
            .iter()
            .map(|p| p.name == "q_proj" || p.name == "v_proj")
            .collect();
        assert_eq!(
            AdapterDropout::Mask.saved_per_token(&arch, &qv),
            2 * arch.hidden
        );
    }

    fn trainer_shape(checkpointing: bool, dropout: AdapterDropout) -> StepShape {
        StepShape {
            seqs: 8,
            path: StepPath::Trainer,
            prompt: 256,
            completion: 768,
            rank: 16,
            fused_logits: true,
            checkpointing,
            dropout,
            ..crate::memory::step::shape::test_shape()
        }
    }

    fn step_bytes(arch: &Arch, targets: &[bool], s: &StepShape) -> u64 {
        let p = trl_step(arch, targets, s);
        p.activations + p.logits
    }

    /// Without checkpointing every layer keeps its adapters' masks but the first layer's q, k
    /// and v (their input needs no gradient); with it the recomputed layer's masks, and the
    /// recompute peaks at `down_proj`'s `lora_A` with the dropped fp32 product beside it: 4 I
    /// more, less `lora_B`'s output and its scaled copy (2 H each).
    #[test]
    fn the_step_keeps_each_layer_s_masks() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch;
        let all = vec![true; arch.projections().len()];
        let tokens = 8 * 1024;
        let masks = AdapterDropout::Mask.saved_per_token(arch, &all);
        let first = AdapterDropout::Mask.unsaved_in_first_layer(arch, &all);
        assert_eq!(first, 3 * arch.hidden);
        let grows = |checkpointing| {
            step_bytes(
                arch,
                &all,
                &trainer_shape(checkpointing, AdapterDropout::Mask),
            ) - step_bytes(
                arch,
                &all,
                &trainer_shape(checkpointing, AdapterDropout::Off),
            )
        };
        assert_eq!(grows(false), tokens * (arch.layers * masks - first));
        let (h, i) = (arch.hidden, arch.intermediate);
        assert_eq!(grows(true), tokens * (masks + 4 * i - 4 * h));
    }

    /// TRL's run: masks from `lora_dropout > 0` with an adapter; none at 0, for full
    /// fine-tuning; Unsloth before 2026.10.7 takes PEFT's forward (input copies and masks).
    #[test]
    fn the_run_says_how_its_adapters_drop() {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch);
        assert_eq!(AdapterDropout::of(&run), AdapterDropout::Off);
        run.lora_dropout = 0.05;
        assert_eq!(AdapterDropout::of(&run), AdapterDropout::Mask);
        run.full_finetuning = true;
        assert_eq!(AdapterDropout::of(&run), AdapterDropout::Off);
        run.full_finetuning = false;
        run.stack = Stack::Unsloth;
        run.versions.unsloth = crate::contract::release::Release::new(2026, 10, 9);
        assert_eq!(AdapterDropout::of(&run), AdapterDropout::Mask);
        run.versions.unsloth = crate::contract::release::Release::new(2026, 10, 7);
        assert_eq!(AdapterDropout::of(&run), AdapterDropout::Mask);
        // 2026.10.1 to 2026.10.6 have no FUSED_LORA_DROPOUT yet: PEFT's forward, as before
        for patch in [1, 6] {
            run.versions.unsloth = crate::contract::release::Release::new(2026, 10, patch);
            assert_eq!(AdapterDropout::of(&run), AdapterDropout::UnfusedPeft);
        }
        run.versions.unsloth = crate::contract::release::Release::new(2026, 1, 4);
        assert_eq!(AdapterDropout::of(&run), AdapterDropout::UnfusedPeft);
    }
}
