//! The knobs: each one's range, steps and trainer key, declared once. The sliders, the levers,
//! the loader, the export, the validation and the help text all read them from here.

use crate::contract::Table;
use crate::run::{Generation, RunConfig, Stack};

/// The longest prompt or completion (`max_prompt_length`, `max_completion_length`): the loader
/// reads both within it, and the screen cannot go past it.
pub const MAX_PART_LENGTH: u64 = 1 << 21;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Knob {
    VllmShare,
    Generations,
    MicroBatch,
    /// the context: Unsloth's `max_seq_length` (vLLM's too), TRL's `vllm_max_model_length`
    SequenceLength,
    /// the dataset's longest prompt, as grpofit assumes it (`[grpofit] max_prompt_length`)
    PromptLength,
    /// `[grpo] max_completion_length`
    CompletionLength,
    LoraRank,
    GradAccum,
    /// `[grpofit] gpus`: training processes per node (accelerate's `num_processes` / nodes)
    Gpus,
}

/// vLLM share values: 0.05 to 0.95 in steps of 0.05, kept as whole hundredths.
const SHARES: [u64; 19] = [
    5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95,
];
const GENERATIONS: [u64; 14] = [2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64];
const MICRO_BATCHES: [u64; 14] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64];
const SEQUENCE_LENGTHS: [u64; 19] = [
    128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
    49152, 65536, 131072,
];
/// Prompt and completion lengths: the sequence ladder's lower part, from 32 tokens.
const PART_LENGTHS: [u64; 20] = [
    32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576,
    32768, 65536, 131072,
];
/// LoRA ranks: powers of two plus 320, the ranks vLLM serves (Unsloth rounds `max_lora_rank` to them).
const RANKS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 320, 512];
const ACCUMULATIONS: [u64; 20] = [
    1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128, 256, 512, 1024,
];
/// Training GPUs per node: the counts nodes come in (1, 2, 4, 8, 16) and the same less one,
/// the GPU `trl vllm-serve` takes (open-r1's 7 + 1), then multiples of 8 for larger nodes.
const GPU_COUNTS: [u64; 16] = [1, 2, 3, 4, 6, 7, 8, 12, 14, 15, 16, 24, 31, 32, 48, 64];

impl Knob {
    pub const ALL: [Knob; 9] = [
        Knob::VllmShare,
        Knob::Generations,
        Knob::MicroBatch,
        Knob::SequenceLength,
        Knob::PromptLength,
        Knob::CompletionLength,
        Knob::LoraRank,
        Knob::GradAccum,
        Knob::Gpus,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Knob::VllmShare => "vLLM share",
            Knob::Generations => "generations",
            Knob::MicroBatch => "micro-batch",
            Knob::SequenceLength => "sequence",
            Knob::PromptLength => "prompt",
            Knob::CompletionLength => "completion",
            Knob::LoraRank => "LoRA rank",
            Knob::GradAccum => "grad accum",
            Knob::Gpus => "GPUs",
        }
    }

    /// The table and trainer keyword the knob is read from and exported as, on `stack`: the vLLM
    /// share is Unsloth's `from_pretrained(gpu_memory_utilization)` and TRL's
    /// `vllm_gpu_memory_utilization`; the sequence is Unsloth's `max_seq_length` (vLLM's context
    /// too) and TRL's `vllm_max_model_length`; the prompt length is no trainer key (TRL 1.x
    /// removed `max_prompt_length`) but grpofit's own assumption, in `[grpofit]` on both stacks.
    pub fn key(self, stack: Stack) -> (Table, &'static str) {
        match (self, stack) {
            (Knob::VllmShare, Stack::Unsloth) => (Table::Model, "gpu_memory_utilization"),
            (Knob::VllmShare, Stack::Trl) => (Table::Grpo, "vllm_gpu_memory_utilization"),
            (Knob::Generations, _) => (Table::Grpo, "num_generations"),
            (Knob::MicroBatch, _) => (Table::Grpo, "per_device_train_batch_size"),
            (Knob::SequenceLength, Stack::Unsloth) => (Table::Model, "max_seq_length"),
            (Knob::SequenceLength, Stack::Trl) => (Table::Grpo, "vllm_max_model_length"),
            (Knob::PromptLength, _) => (Table::Grpofit, "max_prompt_length"),
            (Knob::CompletionLength, _) => (Table::Grpo, "max_completion_length"),
            (Knob::LoraRank, _) => (Table::Lora, "r"),
            (Knob::GradAccum, _) => (Table::Grpo, "gradient_accumulation_steps"),
            (Knob::Gpus, _) => (Table::Grpofit, "gpus"),
        }
    }

    /// The table and key the knob is in for `run`: in server mode the sequence is `trl
    /// vllm-serve`'s own context (`[vllm_server] max_model_len`, its ScriptArguments), which
    /// the colocate key `vllm_max_model_length` does not reach.
    pub fn key_for(self, run: &RunConfig) -> (Table, &'static str) {
        match self {
            Knob::SequenceLength if run.generation == Generation::VllmServer => {
                (Table::VllmServer, "max_model_len")
            }
            _ => self.key(run.stack),
        }
    }

    /// The trainer keyword alone.
    pub fn trainer_key(self, stack: Stack) -> &'static str {
        self.key(stack).1
    }

    /// What one step down costs in training terms (shown beside each lever and in fit's changes).
    pub fn trade_off(self) -> &'static str {
        match self {
            Knob::VllmShare => {
                "smaller KV cache: fewer sequences generated at once, slower generation"
            }
            Knob::Generations => "fewer completions per prompt: noisier group-relative advantages",
            Knob::MicroBatch => {
                "more accumulation steps for the same effective batch: slower steps"
            }
            Knob::SequenceLength => {
                "shorter context: prompt + completion must still fit in it (vLLM stops there)"
            }
            Knob::PromptLength => {
                "the dataset's longest prompt, not a choice: longer prompts would be truncated"
            }
            Knob::CompletionLength => "shorter completions: long reasoning gets truncated",
            Knob::LoraRank => "smaller adapter: less capacity to learn",
            Knob::GradAccum => "smaller effective batch: noisier updates (no memory saved)",
            Knob::Gpus => {
                "fewer GPUs: less to shard the model states over, more accumulation per step"
            }
        }
    }

    /// The values the slider steps through, in the knob's own unit (hundredths for the share).
    pub fn ladder(self) -> &'static [u64] {
        match self {
            Knob::VllmShare => &SHARES,
            Knob::Generations => &GENERATIONS,
            Knob::MicroBatch => &MICRO_BATCHES,
            Knob::SequenceLength => &SEQUENCE_LENGTHS,
            Knob::PromptLength | Knob::CompletionLength => &PART_LENGTHS,
            Knob::LoraRank => &RANKS,
            Knob::GradAccum => &ACCUMULATIONS,
            Knob::Gpus => &GPU_COUNTS,
        }
    }

    /// The values a run may hold, in the knob's unit: what the loader accepts, typed values
    /// are checked against, the slider clamps to and `rules::validate` enforces.
    pub fn range(self) -> (u64, u64) {
        match self {
            Knob::VllmShare => (5, 95),
            Knob::Generations => (2, 1024),
            Knob::MicroBatch => (1, 4096),
            // up to the longest context a config.json declares (Llama 4 Scout: 10 M)
            Knob::SequenceLength => (16, 1 << 24),
            Knob::PromptLength | Knob::CompletionLength => (1, MAX_PART_LENGTH),
            Knob::LoraRank => (1, 4096),
            Knob::GradAccum => (1, 65536),
            // the loader's bound: past any node a run file describes
            Knob::Gpus => (1, 1024),
        }
    }

    /// Why the range ends where it does, when a trainer decides it.
    pub fn range_reason(self) -> &'static str {
        match self {
            Knob::Generations => {
                " (GRPO compares at least 2 completions per prompt: trl GRPOConfig.__post_init__)"
            }
            _ => "",
        }
    }

    /// The knob's value in `run`, in the knob's unit; `None` when it does not apply (no vLLM here).
    pub fn get(self, run: &RunConfig) -> Option<u64> {
        Some(match self {
            Knob::VllmShare => match run.generation {
                Generation::ColocatedVllm { share } => (share * 100.0).round() as u64,
                Generation::VllmServer | Generation::Transformers => return None,
            },
            Knob::Generations => run.num_generations,
            Knob::MicroBatch => run.micro_batch,
            // server mode: the server's context, unset the model's own (vllm-serve's default)
            Knob::SequenceLength if run.generation == Generation::VllmServer => run
                .vllm_server
                .max_model_len
                .unwrap_or(run.arch.max_position),
            Knob::SequenceLength => run.max_seq_len,
            Knob::PromptLength => run.prompt_len,
            Knob::CompletionLength => run.completion_len,
            Knob::LoraRank => run.lora_rank,
            Knob::GradAccum => run.grad_accum,
            Knob::Gpus => run.gpus,
        })
    }

    /// Sets the knob, clamped to its range; the others stay as they are (a sequence shorter
    /// than prompt + completion is the estimate's warning, not rewritten here).
    pub fn set(self, run: &mut RunConfig, value: u64) {
        let (lo, hi) = self.range();
        let v = value.clamp(lo, hi);
        match self {
            Knob::VllmShare => {
                if let Generation::ColocatedVllm { share } = &mut run.generation {
                    *share = v as f64 / 100.0;
                }
            }
            Knob::Generations => run.num_generations = v,
            Knob::MicroBatch => run.micro_batch = v,
            Knob::SequenceLength if run.generation == Generation::VllmServer => {
                run.vllm_server.max_model_len = Some(v)
            }
            Knob::SequenceLength => run.max_seq_len = v,
            Knob::PromptLength => run.prompt_len = v,
            Knob::CompletionLength => run.completion_len = v,
            Knob::LoraRank => {
                run.lora_rank = v;
                // keep vLLM able to load the adapter: Unsloth's max_lora_rank follows the rank up
                if let Some(m) = run.max_lora_rank.filter(|&m| v > m) {
                    run.max_lora_rank = Some(crate::run::vllm_max_lora_rank(v.max(m)));
                }
            }
            Knob::GradAccum => run.grad_accum = v,
            Knob::Gpus => run.gpus = v,
        }
    }

    /// The next value on the ladder up (`up`) or down from `current`; `coarse` skips three rungs.
    pub fn next(self, current: u64, up: bool, coarse: bool) -> u64 {
        step_along(self.ladder(), current, up, coarse)
    }

    /// Human text for a value: `0.60`, `1024`.
    pub fn show(self, value: u64) -> String {
        match self {
            Knob::VllmShare => format!("{:.2}", value as f64 / 100.0),
            _ => value.to_string(),
        }
    }

    /// How a typed value is written, for the entry's prompt.
    pub fn entry_hint(self) -> &'static str {
        match self {
            Knob::VllmShare => "0.15, 15 or 15% (5% to 95%)",
            _ => "a whole number",
        }
    }

    /// Parses a typed value, others as whole numbers and the share by one rule: a number below 1
    /// is a fraction (`0.15`), anything else a percentage, with or without `%` (`15`, `15%`).
    /// So `1` is 1 %, refused like `100` as outside 5 % to 95 %; a share is whole percent.
    pub fn parse(self, text: &str) -> Result<u64, KnobError> {
        let t = text.trim();
        let (lo, hi) = self.range();
        let value = if self == Knob::VllmShare {
            parse_share(t)?
        } else {
            t.parse::<u64>().map_err(|_| KnobError::NotWhole {
                text: t.to_string(),
            })?
        };
        if value < lo || value > hi {
            return Err(match self {
                Knob::VllmShare => KnobError::ShareOutOfRange { lo, hi },
                _ => KnobError::OutOfRange { knob: self, lo, hi },
            });
        }
        Ok(value)
    }
}

/// Why a typed value is not taken (see `Knob::parse`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobError {
    #[error("\"{text}\" is not a whole number")]
    NotWhole { text: String },
    #[error("\"{text}\" is not a share: write 0.15, 15 or 15%")]
    NotAShare { text: String },
    /// a share between two whole percents; `example` names the nearest ones taken
    #[error("\"{text}\": the share is set in whole percent ({lo}% to {hi}%), e.g. {example}")]
    ShareNotWhole {
        text: String,
        lo: u64,
        hi: u64,
        example: String,
    },
    #[error(
        "{} must be {lo}% to {hi}% ({} to {})",
        Knob::VllmShare.label(),
        Knob::VllmShare.show(*.lo),
        Knob::VllmShare.show(*.hi)
    )]
    ShareOutOfRange { lo: u64, hi: u64 },
    #[error("{} must be {lo} to {hi}", .knob.label())]
    OutOfRange { knob: Knob, lo: u64, hi: u64 },
}

impl std::fmt::Display for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The share in whole percent: `0.15`, `15`, `15%` are all 15.
fn parse_share(t: &str) -> Result<u64, KnobError> {
    let (number, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let not_a_share = || KnobError::NotAShare {
        text: t.to_string(),
    };
    let x: f64 = number.parse().map_err(|_| not_a_share())?;
    if !x.is_finite() || x <= 0.0 {
        return Err(not_a_share());
    }
    let pct = if percent || x >= 1.0 { x } else { x * 100.0 };
    let whole = pct.round();
    if (pct - whole).abs() > 1e-6 {
        // the nearest whole percents, kept inside the range so the example is one that is taken
        let (lo, hi) = Knob::VllmShare.range();
        let near = |p: f64| format!("{}%", (p as u64).clamp(lo, hi));
        let (below, above) = (near(pct.floor()), near(pct.ceil()));
        let example = if below == above {
            below
        } else {
            format!("{below} or {above}")
        };
        return Err(KnobError::ShareNotWhole {
            text: t.to_string(),
            lo,
            hi,
            example,
        });
    }
    Ok(whole as u64)
}

/// The next value of `values` (ascending) up (`up`) or down from `current`, three of them with
/// `coarse`; `current` itself at either end.
pub fn step_along(values: &[u64], current: u64, up: bool, coarse: bool) -> u64 {
    let rungs = if coarse { 3 } else { 1 };
    let mut v = current;
    for _ in 0..rungs {
        v = if up {
            values.iter().copied().find(|&x| x > v).unwrap_or(v)
        } else {
            values.iter().rev().copied().find(|&x| x < v).unwrap_or(v)
        };
    }
    v
}

/// Keeps the effective batch when the micro-batch changes: the accumulation that comes closest
/// to `target` completions per step, and how far off it lands.
pub fn accumulation_for(target: u64, micro_batch: u64, gpus: u64) -> (u64, i64) {
    let per_step = micro_batch.max(1) * gpus.max(1);
    let accum = ((target as f64 / per_step as f64).round() as u64).max(1);
    (accum, (accum * per_step) as i64 - target as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladders_step_and_stop_at_their_ends() {
        assert_eq!(Knob::LoraRank.next(16, true, false), 32);
        assert_eq!(Knob::LoraRank.next(256, true, false), 320);
        assert_eq!(Knob::LoraRank.next(512, true, false), 512);
        assert_eq!(Knob::LoraRank.next(12, false, false), 8);
        assert_eq!(Knob::MicroBatch.next(1, false, true), 1);
        assert_eq!(Knob::SequenceLength.next(1024, true, true), 3072);
        assert_eq!(Knob::VllmShare.next(60, false, false), 55);
    }

    #[test]
    fn in_server_mode_the_sequence_is_the_servers_context() {
        use crate::arch::catalog;
        let arch = catalog::find("Qwen/Qwen2.5-1.5B-Instruct").unwrap().arch;
        let context = arch.max_position;
        let mut run = RunConfig::example(arch);
        run.generation = Generation::VllmServer;
        run.vllm_server.max_model_len = None;
        assert_eq!(Knob::SequenceLength.get(&run), Some(context));
        let before = run.max_seq_len;
        Knob::SequenceLength.set(&mut run, 4096);
        assert_eq!(run.vllm_server.max_model_len, Some(4096));
        assert_eq!(run.max_seq_len, before);
        assert_eq!(
            Knob::SequenceLength.key_for(&run),
            (Table::VllmServer, "max_model_len")
        );
        run.generation = Generation::Transformers;
        assert_eq!(
            Knob::SequenceLength.key_for(&run),
            (Table::Grpo, "vllm_max_model_length")
        );
    }

    #[test]
    fn the_sequence_prompt_and_completion_are_set_apart() {
        use crate::arch::catalog;
        let arch = catalog::find("Qwen/Qwen2.5-1.5B-Instruct").unwrap().arch;
        let mut run = RunConfig::example(arch);
        run.generation = Generation::ColocatedVllm { share: 0.5 };
        let (prompt, completion) = (run.prompt_len, run.completion_len);
        for v in [100, 4096] {
            Knob::SequenceLength.set(&mut run, v);
            assert_eq!(run.max_seq_len, v);
            assert_eq!((run.prompt_len, run.completion_len), (prompt, completion));
        }
        Knob::PromptLength.set(&mut run, 300);
        Knob::CompletionLength.set(&mut run, 1 << 30);
        assert_eq!((run.prompt_len, run.completion_len), (300, MAX_PART_LENGTH));
        assert_eq!(run.max_seq_len, 4096);
        // the prompt is grpofit's assumption on both stacks; the completion GRPOConfig's
        for stack in [Stack::Unsloth, Stack::Trl] {
            assert_eq!(
                Knob::PromptLength.key(stack),
                (Table::Grpofit, "max_prompt_length")
            );
            assert_eq!(
                Knob::CompletionLength.key(stack),
                (Table::Grpo, "max_completion_length")
            );
        }
        for knob in [Knob::PromptLength, Knob::CompletionLength] {
            assert_eq!(knob.range(), (1, MAX_PART_LENGTH));
            assert!(knob.parse("0").is_err());
            assert_eq!(knob.parse("2097152"), Ok(MAX_PART_LENGTH));
            assert!(knob.parse("2097153").is_err());
            let ladder = knob.ladder();
            assert!(ladder.windows(2).all(|w| w[0] < w[1]));
            assert!(ladder.iter().all(|v| (1..=MAX_PART_LENGTH).contains(v)));
        }
    }

    #[test]
    fn accumulation_keeps_the_effective_batch() {
        assert_eq!(accumulation_for(16, 2, 1), (8, 0));
        assert_eq!(accumulation_for(16, 3, 1), (5, -1));
        assert_eq!(accumulation_for(16, 32, 1), (1, 16));
        assert_eq!(accumulation_for(64, 4, 2), (8, 0));
    }

    #[test]
    fn the_share_is_a_fraction_below_one_or_a_percent() {
        for text in ["0.15", "15", "15%", " 15 % ", "0.150"] {
            assert_eq!(Knob::VllmShare.parse(text), Ok(15), "{text}");
        }
        assert_eq!(Knob::VllmShare.parse("95%"), Ok(95));
        assert_eq!(Knob::VllmShare.parse("0.05"), Ok(5));
        // 1 is 1 %, not 100 %: below the range, as 100 is above it
        for text in [
            "1", "1%", "100", "100%", "0.01", "0.99", "4", "96", "0", "-15", "NaN",
        ] {
            let e = Knob::VllmShare.parse(text).unwrap_err().to_string();
            assert!(!e.is_empty(), "{text}");
        }
        let e = Knob::VllmShare.parse("1").unwrap_err().to_string();
        assert!(e.contains("5%") && e.contains("95%"), "{e}");
        // whole percent only: no silent rounding
        assert!(Knob::VllmShare.parse("15.5").is_err());
        assert!(Knob::VllmShare.parse("0.155").is_err());
        assert!(Knob::VllmShare.parse("%").is_err());
        assert!(Knob::VllmShare.parse("15%%").is_err());
    }

    #[test]
    fn typed_values_are_checked() {
        assert_eq!(Knob::VllmShare.parse("0.6"), Ok(60));
        assert_eq!(Knob::VllmShare.parse("60"), Ok(60));
        assert!(Knob::VllmShare.parse("NaN").is_err());
        assert!(Knob::VllmShare.parse("0.99").is_err());
        assert!(Knob::MicroBatch.parse("-1").is_err());
        assert!(Knob::MicroBatch.parse("0").is_err());
        assert_eq!(Knob::LoraRank.parse(" 64 "), Ok(64));
    }

    #[test]
    fn a_refused_value_carries_the_knob_and_its_range() {
        assert_eq!(
            Knob::MicroBatch.parse("0"),
            Err(KnobError::OutOfRange {
                knob: Knob::MicroBatch,
                lo: Knob::MicroBatch.range().0,
                hi: Knob::MicroBatch.range().1,
            })
        );
        assert_eq!(
            Knob::VllmShare.parse("x"),
            Err(KnobError::NotAShare { text: "x".into() })
        );
        assert_eq!(
            Knob::VllmShare.parse("1").unwrap_err().to_string(),
            "vLLM share must be 5% to 95% (0.05 to 0.95)"
        );
    }
}
