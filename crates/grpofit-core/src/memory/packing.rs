//! How the caching allocator holds the trainer's static tensors: a tensor's block, the
//! segments a group of them packs into, and an optimizer's states for one tensor.

use crate::run::Optimizer;
use crate::units::MIB;

/// Bytes a tensor's block takes when allocated fresh: a tensor over 10 MiB gets its own
/// segment rounded to 2 MiB, and a left-over of 1 MiB or less is not split off (measured:
/// Qwen2.5-3B's 43 MiB MLP weights take 44 MiB each; weights_bytes exceeds 2 x n_params by 104.5 MiB).
pub(crate) fn block_bytes(bytes: u64) -> u64 {
    let rounded = crate::memory::step::allocator::round_request(bytes);
    let segment = rounded.div_ceil(2 * MIB) * 2 * MIB;
    if rounded > 10 * MIB && segment - rounded <= MIB {
        segment
    } else {
        rounded
    }
}

/// Segments a group of tensors occupies: small ones packed into 2 MiB segments, 1-10 MiB ones
/// into 20 MiB segments, larger ones in their own.
#[derive(Default)]
pub(crate) struct Packing {
    small: u64,
    mid: u64,
    large: u64,
}

impl Packing {
    pub(crate) fn add(&mut self, bytes: u64, copies: u64) {
        let b = block_bytes(bytes) * copies;
        if bytes <= MIB {
            self.small += b;
        } else if bytes < 10 * MIB {
            self.mid += b;
        } else {
            self.large += b;
        }
    }
    pub(crate) fn reserved(&self) -> u64 {
        self.small.div_ceil(2 * MIB) * 2 * MIB + self.mid.div_ceil(20 * MIB) * 20 * MIB + self.large
    }
}

/// Optimizer state bytes for one adapter tensor of `elements`.
/// AdamW: exp_avg and exp_avg_sq in fp32 plus a 4-byte step (measured: opt_state_bytes = 2 x lora_bytes).
/// bitsandbytes 8-bit: two uint8 states with an fp32 absmax per 256-element block; tensors under
/// 4096 elements stay fp32 (bnb's `min_8bit_size`).
/// `param_bytes`: torch AdamW's moments follow the parameter's dtype (torch optim/adam.py
/// `_init_group`, `torch.zeros_like(p)`); bitsandbytes' states keep their own (`init_state`).
pub(crate) fn optimizer_bytes(opt: Optimizer, elements: u64, param_bytes: u64) -> u64 {
    let eight_bit = |n: u64| {
        if n < 4096 {
            8 * n
        } else {
            2 * (n + n.div_ceil(256) * 4)
        }
    };
    match opt {
        Optimizer::AdamW => block_bytes(param_bytes * elements) * 2 + 512,
        Optimizer::PagedAdamW => block_bytes(4 * elements) * 2 + 512,
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => block_bytes(eight_bit(elements)),
        Optimizer::Sgd => 0,
    }
}
