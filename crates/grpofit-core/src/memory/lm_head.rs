//! GRPOConfig's `cast_lm_head_to_fp32`: the LM head kept in fp32 on the trainer.

use crate::run::spread::Engine;
use crate::run::{Quant, RunConfig, Stack};

/// What an fp32 head adds on a training GPU, bytes: (weights, gradients, optimizer states).
/// trl 1.15.0 `GRPOTrainer.__init__` `_cast_lm_head_to_fp32` runs `lm_head.float()` on the
/// policy (and the reference model); with tied embeddings that is the embedding's own tensor,
/// so either way one V x H tensor goes from 2 to 4 bytes: +2 V H. In full fine-tuning under
/// DDP its gradient is fp32 too (+2 V H) and torch AdamW's moments follow the parameter's dtype
/// (+4 V H). DeepSpeed casts the whole module back to bf16 when the trainer prepares it
/// (`_configure_distributed_model`), and FSDP2 upcasts everything to fp32 anyway
/// (`fsdp2_prepare_model`): no change there. An fp32 model already has an fp32 head.
pub fn fp32_head_bytes(run: &RunConfig) -> (u64, u64, u64) {
    let vh = run.arch.vocab * run.arch.hidden;
    let applies = run.cast_lm_head_to_fp32
        && run.stack == Stack::Trl
        && run.quant != Quant::Fp32
        && run.spread.engine == Engine::Ddp;
    match (applies, run.full_finetuning) {
        (false, _) => (0, 0, 0),
        (true, false) => (2 * vh, 0, 0),
        (true, true) => (2 * vh, 2 * vh, 4 * vh),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    #[test]
    fn an_fp32_head_adds_two_bytes_a_head_weight() {
        // Qwen2.5-7B: V x H = 152,064 x 3,584 = 544,997,376; LoRA: +1,089,994,752 B (1.02 GiB);
        // full fine-tuning under DDP: weights +1,089,994,752, gradients +1,089,994,752, AdamW
        // moments +2,179,989,504
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("in the catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        assert_eq!(fp32_head_bytes(&run), (0, 0, 0));
        run.cast_lm_head_to_fp32 = true;
        assert_eq!(fp32_head_bytes(&run), (1_089_994_752, 0, 0));
        run.full_finetuning = true;
        assert_eq!(
            fp32_head_bytes(&run),
            (1_089_994_752, 1_089_994_752, 2_179_989_504)
        );
        run.quant = Quant::Fp32;
        assert_eq!(fp32_head_bytes(&run), (0, 0, 0));
    }
}
