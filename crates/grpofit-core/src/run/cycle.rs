//! The settings a key cycles through: each setting's next value in the order the screen's keys
//! step them, declared here so that the screen holds no rule of its own.

use crate::contract::Stack;
use crate::run::spread::{Engine, Spread};
use crate::run::{Checkpointing, Generation, Optimizer, Quant, RunConfig, rules};

/// β when the reference pass is switched on: the default of `GRPOConfig.beta` in trl 0.14.0 to
/// 0.18.2 (`grpo_config.py`), the value the GRPO paper and the older notebooks run with. Later
/// TRL releases default to 0.0, which the screen's toggle switches back to.
pub const REFERENCE_BETA: f64 = 0.04;

impl Checkpointing {
    /// off → on → Unsloth's offloading (Unsloth only) → off.
    pub fn next(self, stack: Stack) -> Checkpointing {
        match (self, stack) {
            (Checkpointing::Off, _) => Checkpointing::On,
            (Checkpointing::On, Stack::Unsloth) => Checkpointing::UnslothOffload,
            _ => Checkpointing::Off,
        }
    }
}

impl Optimizer {
    /// The optimizers the screen steps through, in order of the memory their states take.
    pub const CYCLE: [Optimizer; 4] = [
        Optimizer::AdamW,
        Optimizer::AdamW8bit,
        Optimizer::PagedAdamW8bit,
        Optimizer::Sgd,
    ];

    /// The next of [`Optimizer::CYCLE`]; one outside it starts the cycle.
    pub fn next(self) -> Optimizer {
        let i = Self::CYCLE
            .iter()
            .position(|o| *o == self)
            .map_or(0, |i| (i + 1) % Self::CYCLE.len());
        Self::CYCLE[i]
    }
}

impl Quant {
    /// 4-bit weights switched on (from any other format) or off (to 16-bit).
    pub fn four_bit_toggled(self) -> Quant {
        if self == Quant::Nf4 {
            Quant::Bf16
        } else {
            Quant::Nf4
        }
    }
}

impl RunConfig {
    /// Whether the run uses more than one GPU in any way: several training processes, an engine
    /// that shards, or `trl vllm-serve` on GPUs of its own.
    pub fn is_spread(&self) -> bool {
        self.processes() > 1
            || self.spread.engine != Engine::Ddp
            || self.generation == Generation::VllmServer
    }

    /// The reference pass switched on (β = [`REFERENCE_BETA`]) or off (β = 0).
    pub fn toggle_reference(&mut self) {
        self.beta = if self.beta > 0.0 { 0.0 } else { REFERENCE_BETA };
    }

    /// The next engine this run can use: past one the rules refuse for it (Unsloth's vLLM under
    /// FSDP2, `raise_if_fast_inference_under_fsdp2`).
    pub fn next_engine(&self) -> Spread {
        let next = self.spread.next_engine();
        let mut trial = self.clone();
        trial.spread = next;
        if rules::validate(&trial).is_ok() {
            next
        } else {
            next.next_engine()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_optimizer_cycle_visits_each_once_and_comes_back() {
        let mut o = Optimizer::AdamW;
        let mut seen = Vec::new();
        for _ in 0..Optimizer::CYCLE.len() {
            seen.push(o);
            o = o.next();
        }
        assert_eq!(seen, Optimizer::CYCLE);
        assert_eq!(o, Optimizer::AdamW);
    }

    #[test]
    fn unsloths_offloading_is_in_the_cycle_only_on_unsloth() {
        let on = Checkpointing::On;
        assert_eq!(on.next(Stack::Unsloth), Checkpointing::UnslothOffload);
        assert_eq!(on.next(Stack::Trl), Checkpointing::Off);
        assert_eq!(
            Checkpointing::UnslothOffload.next(Stack::Unsloth),
            Checkpointing::Off
        );
    }

    #[test]
    fn the_reference_toggle_goes_to_the_old_default_and_back_to_zero() {
        let mut run = RunConfig::example(
            crate::arch::catalog::find("Qwen/Qwen2.5-1.5B")
                .expect("in the catalog")
                .arch,
        );
        run.beta = 0.0;
        run.toggle_reference();
        assert_eq!(run.beta, REFERENCE_BETA);
        run.toggle_reference();
        assert_eq!(run.beta, 0.0);
        assert_eq!(Quant::Fp8.four_bit_toggled(), Quant::Nf4);
        assert_eq!(Quant::Nf4.four_bit_toggled(), Quant::Bf16);
    }
}
