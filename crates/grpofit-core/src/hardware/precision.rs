//! A run that computes in bf16 on a card without it (compute capability under 8.0: the T4, the
//! V100), said before launch, as each trainer meets it:
//!
//! - TRL: `GRPOConfig`'s `bf16` is True unless `fp16` from trl 0.19.1 on (`bf16: bool | None =
//!   None`, `__post_init__`: `self.bf16 = not (self.fp16) if self.bf16 is None`; False before,
//!   `trl_ladder.json`). transformers' `TrainingArguments.__post_init__` (5.17.0
//!   training_args.py) then raises `ValueError("Your setup doesn't support bf16/gpu. You need
//!   to assign use_cpu if you want to train the model on CPU. You need Ampere+ GPU with
//!   cuda>=11.0.")` where `is_torch_bf16_gpu_available()`, that is `torch.cuda.
//!   is_bf16_supported()`, is false; torch 2.9.1 answers true below 8.0 only by emulation (it
//!   makes a bf16 tensor, `_check_bf16_tensor_supported`), and the step then runs without bf16
//!   tensor cores.
//! - Unsloth: `from_pretrained` loads the model in float16 on such a card (unsloth 2026.10.9
//!   models/loader.py: `dtype = torch.float16 if not SUPPORTS_BFLOAT16`, and an asked bfloat16
//!   "Will change to float16."), and its GRPOTrainer refuses `bf16 = True` over a float16 model
//!   (models/rl.py: `TypeError('Unsloth: Model is in float16 precision but you want to use
//!   bfloat16 precision. Set fp16 to `True` and bf16 to `False`')`). Unsloth's GRPOConfig
//!   defaults `bf16` to False (rl.py's replacements), so only a written `bf16 = true` meets it.
//!   Gemma 3 (unsloth 2025.3.19 on), gpt-oss (2025.8.9 on) and Qwen3-MoE (`qwen3_moe`, in
//!   unsloth's own list from 2026.7.1; absent from 2025.10.4's) are on `loader.py`'s
//!   `FORCE_FLOAT32` list (read in 2025.3.19, 2025.4.7, 2025.8.9, 2025.10.4, 2026.1.4,
//!   2026.7.1 and 2026.10.9): on such a card `FastModel.from_pretrained` sets
//!   `UNSLOTH_FORCE_FLOAT32=1` and loads them in bfloat16, and the trainer's mixed-precision
//!   block then skips the TypeError (`if not force_float32 and ...`) and trains in float32,
//!   `args.bf16` and `args.fp16` both False ("Switching to float32 training since model cannot
//!   work with float16"), whatever the run writes (2026.10.9 keeps a load asked in bfloat16
//!   instead).
//!
//!   "Float32" there is not float32 weights: unsloth_zoo's `patch_model_and_tokenizer`
//!   (patching_utils.py, 2025.4.4, 2025.10.4, 2026.10.9: `if do_forced_float32: correct_dtype
//!   = torch.float16`) casts the projections, the head, the embedding, the norms and every
//!   remaining bfloat16 parameter to float16, and `FastBaseModel.from_pretrained` (vision.py)
//!   keeps a 4-bit load's compute dtype float16 (`bnb_compute_dtype = torch.float16`). The
//!   float32 is in the activations: unsloth_zoo's Gemma 3 patches (temporary_patches/gemma.py,
//!   under `UNSLOTH_FORCE_FLOAT32`) return the embedding in float32
//!   (`Gemma3TextScaledWordEmbedding.forward`: `input_embeds.to(torch.float32)`), so the
//!   residual stream is float32, run RMSNorm's variance, the MLP's gate and up product and
//!   attention in float32, and hand float16 to every Linear. LoRA adapters follow
//!   `UNSLOTH_MIXED_PRECISION` (float32). A full fine-tune upcasts its trained Linears to
//!   float32 (gemma.py `_linear_boundary_dtype`). So the estimate's 16-bit weights stand for
//!   an adapter run, and its 16-bit activations undercount: the warning says so.
use super::Card;
use crate::arch::Family;
use crate::contract::release::Release;
use crate::run::{RunConfig, Stack};

/// How the run's file writes a GRPOConfig key: a run file's `[grpo] key = value`, or a TRL
/// recipe's top-level `key: value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    RunFile,
    Recipe,
}

impl Spelling {
    fn key(self, key: &str, value: bool) -> String {
        match self {
            Spelling::RunFile => format!("`[grpo] {key} = {value}`"),
            Spelling::Recipe => format!("`{key}: {value}`"),
        }
    }
}

/// What is wrong with computing `run` in bf16 on `card`, when it does (`bf16`: `[grpo] bf16`
/// as the run writes it, None where it leaves it to the trainer's default), its keys spelled
/// as the run's file writes them.
pub fn bf16_warning(
    card: &Card,
    run: &RunConfig,
    bf16: Option<bool>,
    spelling: Spelling,
) -> Option<String> {
    if card.has_bf16() {
        return None;
    }
    let (major, minor) = card.compute_capability;
    let card = format!(
        "the {} (compute capability {major}.{minor}) has no bf16",
        card.name
    );
    if let (Stack::Unsloth, Some(family)) = (run.stack, unsloth_forces_float32(run)) {
        return Some(format!(
            "{card}: Unsloth trains {family} in float32 there, bf16 and fp16 off whatever the run \
             writes (its FORCE_FLOAT32 list: \"Switching to float32 training since model cannot \
             work with float16\"): the weights are cast to float16, but the residual stream, the \
             norms, the MLP's gate and up product and attention run in float32, which this \
             estimate counts in 16 bits, so the step can need more than it says"
        ));
    }
    if run.fp16 {
        return None;
    }
    let fix = format!(
        "set {} and {}",
        spelling.key("fp16", true),
        spelling.key("bf16", false)
    );
    let written = spelling.key("bf16", true);
    match run.stack {
        Stack::Unsloth if bf16 == Some(true) => Some(format!(
            "{written}, but {card}: {fix}; Unsloth loads the model in float16 there and its \
             GRPOTrainer refuses bf16 at launch (\"Unsloth: Model is in float16 precision but you \
             want to use bfloat16 precision. Set fp16 to `True` and bf16 to `False`\")"
        )),
        Stack::Trl if bf16.unwrap_or_else(|| trl_default_bf16(run)) => {
            let asked = match bf16 {
                Some(_) => written,
                None => format!(
                    "trl {}'s GRPOConfig computes in bf16 unless `fp16` is true",
                    run.versions.trl
                ),
            };
            Some(format!(
                "{asked}, but {card}: {fix}; transformers' TrainingArguments refuses bf16 where \
                 torch reports no bf16 (\"Your setup doesn't support bf16/gpu ... You need \
                 Ampere+ GPU with cuda>=11.0.\"), and a torch that emulates it trains without bf16 \
                 tensor cores"
            ))
        }
        _ => None,
    }
}

/// The run's family, named, where the run's Unsloth holds it on its `FORCE_FLOAT32` list (the
/// module's comment: the release each entry arrived in).
fn unsloth_forces_float32(run: &RunConfig) -> Option<&'static str> {
    let (name, from) = match run.arch.family {
        Family::Gemma3 => ("Gemma 3", Release::new(2025, 3, 19)),
        Family::GptOss => ("gpt-oss", Release::new(2025, 8, 9)),
        Family::Qwen3 if run.arch.moe.is_some() => ("Qwen3-MoE", Release::new(2026, 7, 1)),
        _ => return None,
    };
    (run.versions.unsloth >= from).then_some(name)
}

/// GRPOConfig's `bf16` when the run leaves it out: None (then `not fp16`) from trl 0.19.1,
/// False before (`trl_ladder.json`).
fn trl_default_bf16(run: &RunConfig) -> bool {
    match crate::contract::ladder::grpo_default(run.versions.trl, "bf16") {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::Null) => !run.fp16,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::lookup;

    fn run(stack: Stack, trl: &str) -> RunConfig {
        let arch = crate::arch::catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .unwrap()
            .arch;
        let mut run = RunConfig::example(arch);
        run.stack = stack;
        run.versions.trl = Release::parse(trl).unwrap();
        run
    }

    #[test]
    fn only_cards_below_ampere_lack_bf16() {
        let without: Vec<&str> = crate::hardware::CARDS
            .iter()
            .filter(|c| !c.has_bf16())
            .map(|c| c.name)
            .collect();
        assert_eq!(without, ["T4", "V100 SXM2", "V100 PCIe"]);
    }

    #[test]
    fn the_trl_default_and_a_written_bf16_are_said_on_a_t4() {
        let t4 = lookup("Tesla T4").unwrap();
        let h100 = lookup("H100").unwrap();
        let trl = run(Stack::Trl, "1.15.0");
        let said = bf16_warning(t4, &trl, None, Spelling::RunFile).unwrap();
        assert!(
            said.contains("trl 1.15.0's GRPOConfig computes in bf16"),
            "{said}"
        );
        assert!(said.contains("compute capability 7.5"), "{said}");
        assert!(
            bf16_warning(t4, &trl, Some(true), Spelling::RunFile)
                .unwrap()
                .starts_with("`[grpo] bf16 = true`")
        );
        assert_eq!(bf16_warning(t4, &trl, Some(false), Spelling::RunFile), None);
        assert_eq!(
            bf16_warning(h100, &trl, Some(true), Spelling::RunFile),
            None
        );
        // trl 0.18's GRPOConfig: bf16 False unless written
        assert_eq!(
            bf16_warning(t4, &run(Stack::Trl, "0.18.2"), None, Spelling::RunFile),
            None
        );
        let mut fp16 = trl.clone();
        fp16.fp16 = true;
        assert_eq!(bf16_warning(t4, &fp16, None, Spelling::RunFile), None);
    }

    #[test]
    fn unsloth_refuses_only_a_written_bf16() {
        let v100 = lookup("V100").unwrap();
        let unsloth = run(Stack::Unsloth, "1.15.0");
        assert_eq!(bf16_warning(v100, &unsloth, None, Spelling::RunFile), None);
        let said = bf16_warning(v100, &unsloth, Some(true), Spelling::Recipe).unwrap();
        assert!(
            said.contains("Unsloth: Model is in float16 precision"),
            "{said}"
        );
    }

    /// Gemma 3 and gpt-oss are on Unsloth's FORCE_FLOAT32 list: no TypeError, float32 training,
    /// whatever bf16 / fp16 say.
    #[test]
    fn unsloth_trains_gemma3_and_gpt_oss_in_float32_on_a_card_without_bf16() {
        let t4 = lookup("Tesla T4").unwrap();
        for name in ["google/gemma-3-4b-it", "openai/gpt-oss-20b"] {
            let arch = crate::arch::catalog::find(name).unwrap().arch;
            let mut unsloth = RunConfig::example(arch);
            unsloth.stack = Stack::Unsloth;
            for bf16 in [None, Some(true), Some(false)] {
                let said = bf16_warning(t4, &unsloth, bf16, Spelling::RunFile).unwrap();
                assert!(said.contains("float32"), "{name} {bf16:?}: {said}");
                assert!(!said.contains("refuses"), "{name}: {said}");
            }
            unsloth.fp16 = true;
            assert!(bf16_warning(t4, &unsloth, None, Spelling::RunFile).is_some());
            let h100 = lookup("H100").unwrap();
            assert_eq!(
                bf16_warning(h100, &unsloth, Some(true), Spelling::RunFile),
                None
            );
        }
    }

    /// Each family joins the list in its own release (the module's comment): before it, the
    /// card's float16 path applies; Qwen3 dense stays off the list.
    #[test]
    fn the_float32_list_follows_the_unsloth_release() {
        let t4 = lookup("Tesla T4").unwrap();
        let cases = [
            ("google/gemma-3-1b-it", "2025.3.18", "2025.3.19"),
            ("openai/gpt-oss-20b", "2025.8.8", "2025.8.9"),
            ("Qwen/Qwen3-30B-A3B", "2025.10.4", "2026.7.1"),
        ];
        for (name, before, from) in cases {
            let arch = crate::arch::catalog::find(name).unwrap().arch;
            let mut unsloth = RunConfig::example(arch);
            unsloth.stack = Stack::Unsloth;
            unsloth.versions.unsloth = Release::parse(before).unwrap();
            assert_eq!(
                bf16_warning(t4, &unsloth, None, Spelling::RunFile),
                None,
                "{name}"
            );
            unsloth.versions.unsloth = Release::parse(from).unwrap();
            let said = bf16_warning(t4, &unsloth, None, Spelling::RunFile).unwrap();
            assert!(said.contains("cast to float16"), "{name}: {said}");
            assert!(said.contains("residual stream"), "{name}: {said}");
        }
        let mut dense = run(Stack::Unsloth, "1.15.0");
        dense.arch = crate::arch::catalog::find("Qwen/Qwen3-8B").unwrap().arch;
        assert_eq!(bf16_warning(t4, &dense, None, Spelling::RunFile), None);
    }
}
