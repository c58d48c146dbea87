//! One GRPO training step of the `trl` stack (transformers + PEFT + TRL), tensor by tensor:
//! which large tensors exist, in which order they come and go, and so what PyTorch's
//! `max_memory_allocated()` and `max_memory_reserved()` report.
//!
//! Evidence: allocator traces of the shared calibration step (`torch.cuda.memory._record_memory_history`,
//! recorded on the H200 on 2026-11-29, `tools/calibration/extend.py`), summarised in
//! `calibration/README.md`. The forward peak comes while the entropy of the logits is computed
//! in 128-row chunks; with checkpointing the backward peak comes while the last layer is recomputed.

use super::allocator::CachingAllocator;
use super::arch::Arch;

/// Shapes of one micro-batch step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepShape {
    /// sequences (completions) in the micro-batch
    pub seqs: u64,
    pub prompt: u64,
    pub completion: u64,
    pub rank: u64,
    pub checkpointing: bool,
    pub reference_pass: bool,
    /// the base weights are bitsandbytes-quantised: their matmul saves its input too
    pub quantised_base: bool,
    pub expandable_segments: bool,
    /// TRL 1.x's fused LM head (`add_fused_lm_head`): log-probabilities computed in tiles, the
    /// micro-batch's logits never materialised. Off: logits materialised in bf16, as TRL 0.x and
    /// the calibration harness (`measure.py`) do.
    pub fused_logits: bool,
    /// rows of the generation batch the trainer scores without gradients before training on
    /// them (old and reference log-probs); 0 when it does not
    pub scoring_rows: u64,
    /// free memory when the step runs (Unsloth sizes its mini-batches and logits blocks from it)
    pub free_at_step: u64,
    /// a card of at most 24.5 GiB (Unsloth's tiled log-prob kernel for every row count)
    pub small_card: bool,
}

/// Bytes per token of one decoder layer's tensors, split as the allocator sees them.
#[derive(Debug, Clone, Default)]
pub struct LayerTensors {
    /// each saved tensor's bytes per token (bf16 and fp32)
    pub saved: Vec<u64>,
}

impl LayerTensors {
    pub fn per_token(&self) -> u64 {
        self.saved.iter().sum()
    }
}

/// The tensors autograd keeps for one decoder layer, per token, with LoRA on `targets`.
///
/// - SDPA (efficient kernel) saves the rotated query, key, value and its output (bf16); a value
///   that is a view into a fused `qkv_proj` output keeps that whole output alive;
/// - the MLP saves gate, up and the activation output (bf16; a fused `gate_up_proj` output
///   holds gate and up in one tensor);
/// - each RMSNorm saves its input upcast to fp32 (and Qwen3/Gemma3's query/key norms too);
/// - PEFT keeps adapters in fp32 and casts each targeted projection's input to fp32, which
///   `lora_A` saves; `lora_A`'s output (rank wide, fp32) is saved by `lora_B`;
/// - a bitsandbytes 4/8-bit matmul saves its own bf16 input: the MLP product feeding `down_proj`.
pub fn layer_tensors(
    arch: &Arch,
    targets: &[bool],
    rank: u64,
    quantised_base: bool,
) -> LayerTensors {
    let (h, i, q, kv) = (arch.hidden, arch.intermediate, arch.q_dim(), arch.kv_dim());
    let mut saved = vec![2 * q, 2 * q, 2 * kv];
    saved.push(if arch.family.fused_projections() {
        2 * (q + 2 * kv)
    } else {
        2 * kv
    });
    if arch.family.fused_projections() {
        saved.extend([2 * 2 * i, 2 * i]);
    } else {
        saved.extend([2 * i, 2 * i, 2 * i]);
    }
    saved.extend(std::iter::repeat_n(
        4 * h,
        arch.family.norms_per_layer() as usize,
    ));
    if arch.family.has_qk_norm() {
        saved.extend([4 * q, 4 * kv]);
    }
    for (p, _) in arch
        .projections()
        .iter()
        .zip(targets)
        .filter(|(_, on)| **on)
    {
        saved.push(4 * p.fan_in);
        saved.push(4 * rank);
    }
    if quantised_base {
        saved.push(2 * i);
    }
    LayerTensors { saved }
}

/// What one step needs above the static memory (weights, adapters, optimizer states).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepPeak {
    /// activations and logits at the step's peak (allocated)
    pub activations: u64,
    pub logits: u64,
    /// reserved by the caching allocator for the step's tensors, at its peak
    pub reserved: u64,
}

/// Sizes of the logits-phase tensors.
struct Logits {
    /// `logits[:, -keep:] / temperature`: B x K x V bf16
    copy: u64,
    /// the lm_head output: B x (K+1) x V bf16
    head: u64,
    /// one completion's log_softmax: K x V bf16
    row: u64,
    /// one 128-row fp32 chunk of the entropy computation
    chunk: u64,
    /// fused head: the completion tokens' hidden states gathered (`hidden_states[mask]`), N x H bf16
    gathered: u64,
    /// fused head: one tile of logits, min(N, 4096) x 32768 in bf16
    tile: u64,
    /// fused head: seven fp32 running statistics per token (max, sums, log_z, entropy...)
    stats: u64,
}

/// `ChunkedLogProbFunction`'s tile: at most 4096 tokens (`TOKEN_CHUNK_SIZE`) by 32768 vocabulary
/// entries (`_CHUNKED_LOGPROB_CHUNK_SIZE`), trl 1.15.0.
const FUSED_TOKEN_CHUNK: u64 = 4096;
const FUSED_VOCAB_CHUNK: u64 = 32768;

impl Logits {
    fn new(arch: &Arch, s: &StepShape) -> Logits {
        let v = arch.vocab;
        // the fused head projects the completion tokens only (labels != -100)
        let tokens = s.seqs * s.completion;
        Logits {
            copy: s.seqs * s.completion * v * 2,
            head: s.seqs * (s.completion + 1) * v * 2,
            row: s.completion * v * 2,
            chunk: 128 * v * 4,
            gathered: tokens * arch.hidden * 2,
            tile: tokens.min(FUSED_TOKEN_CHUNK) * FUSED_VOCAB_CHUNK * 2,
            stats: tokens * 7 * 4,
        }
    }

    /// TRL 1.x's fused LM head (trl/trainer/utils.py `add_fused_lm_head`, the autograd function
    /// `ChunkedLogProbFunction` in trl/kernels/chunked_logprob.py): the forward keeps the gathered
    /// hidden states and fills one logits tile at a time; the backward holds an fp32 gradient of
    /// the gathered states, a tile again, and that gradient cast back to bf16. Not measured: read
    /// from the trl 1.15.0 wheel.
    fn fused_peak(&self) -> u64 {
        let forward = self.gathered + self.tile + self.stats;
        let backward = self.gathered + 2 * self.gathered + self.tile + self.gathered;
        forward.max(backward)
    }

    /// The logits phase's peak above what is live before it.
    /// - forward: lm_head output and its temperature-scaled copy; then the copy, every row's
    ///   saved log_softmax and three entropy chunks (plus the reference pass's copy when beta > 0,
    ///   which the step still holds, and Gemma 2's saved tanh output);
    /// - backward: the saved rows plus two row gradients (gather, log_softmax), or the rows'
    ///   gradients plus their stacked copy.
    fn peak(&self, s: &StepShape, softcap: bool) -> u64 {
        let reference = if s.reference_pass { self.copy } else { 0 };
        let forward = (self.head + self.copy).max(2 * self.copy + 3 * self.chunk + reference);
        let backward = self.copy + self.copy.max(2 * self.row);
        forward.max(backward) + if softcap { self.head } else { 0 }
    }
}

/// The step's peak, for the `trl` stack.
pub fn trl_step(arch: &Arch, targets: &[bool], s: &StepShape) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let hidden = tokens * arch.hidden * 2;
    let layer = layer_tensors(arch, targets, s.rank, s.quantised_base);
    let layer_bytes = layer.per_token() * tokens;
    let logits = Logits::new(arch, s);
    // The final norm keeps its fp32 input, and the normed bf16 output feeds the head.
    let final_norm = tokens * arch.hidden * 6;
    // With beta > 0, two hidden-state-sized bf16 tensors of the reference pass outlive it (trace).
    let residue = if s.reference_pass { 2 * hidden } else { 0 };
    let stored = if s.checkpointing {
        arch.layers * hidden
    } else {
        arch.layers * layer_bytes
    };
    let logits_peak = if s.fused_logits {
        logits.fused_peak()
    } else {
        logits.peak(s, arch.final_logit_softcapping)
    };
    let forward = stored + final_norm + logits_peak + residue;
    // Recomputing the last layer: all its saved tensors, plus the fp32 gradient of the down
    // projection's input and the fp32 incoming gradient (and a fused gate_up gradient).
    let backward = if s.checkpointing {
        let fused = if arch.family.fused_projections() {
            tokens * arch.intermediate * 4
        } else {
            0
        };
        stored + residue + layer_bytes + tokens * (arch.intermediate + arch.hidden) * 4 + fused
    } else {
        0
    };
    let activations = forward.max(backward) - if forward >= backward { logits_peak } else { 0 };
    let reserved = simulate_reserved(arch, targets, tokens, &logits, s);
    let step = StepPeak {
        activations,
        logits: if forward >= backward { logits_peak } else { 0 },
        reserved,
    };
    if s.scoring_rows == 0 {
        return step;
    }
    let scoring = trl_scoring_pass(arch, s, &logits);
    let reserved = step.reserved.max(scoring.activations + scoring.logits);
    if scoring.activations + scoring.logits > step.activations + step.logits {
        StepPeak {
            reserved,
            ..scoring
        }
    } else {
        StepPeak { reserved, ..step }
    }
}

/// The no-grad scoring before training (trl 1.15.0 `_generate_and_score_completions`): old
/// log-probs, and reference log-probs with the adapter disabled when `beta > 0`, in chunks of
/// `per_device_train_batch_size` rows, with gradient checkpointing switched off. Nothing is
/// saved for a backward, so the peak is one layer's working set (residual stream, normed input,
/// PEFT's fp32 copy of a projection's input, the MLP's gate, up and product), or the final
/// norm's output and the fused head's forward. Read from the wheel; not measured.
fn trl_scoring_pass(arch: &Arch, s: &StepShape, logits: &Logits) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let widest_input = arch.intermediate.max(arch.hidden);
    let layer = tokens * (2 * arch.hidden * 2 + widest_input * 4 + 3 * arch.intermediate * 2);
    let head = tokens * arch.hidden * 6;
    let scoring = logits.gathered + logits.tile + logits.stats;
    if layer >= head + scoring {
        StepPeak {
            activations: layer,
            logits: 0,
            reserved: 0,
        }
    } else {
        StepPeak {
            activations: head,
            logits: scoring,
            reserved: 0,
        }
    }
}

/// Replays the step's allocations through the caching-allocator model, twice (the second
/// step starts with the first one's cache), and returns the reserved peak.
fn simulate_reserved(
    arch: &Arch,
    targets: &[bool],
    tokens: u64,
    lg: &Logits,
    s: &StepShape,
) -> u64 {
    let mut sim = Sim::new(s.expandable_segments);
    let sh = Shapes::new(arch, targets, tokens, s);
    if arch.tied_embeddings {
        // transformers builds the output head, then ties it to the embedding: the dropped
        // V x H bf16 head stays cached (trace: a 501 MiB block freed during Llama-3.2-1B's init,
        // whose segment later holds checkpoints and log-softmax rows).
        let head = sim.alloc(arch.vocab * arch.hidden * 2);
        sim.free(head);
    }
    let mut residue = (0, 0);
    for _ in 0..2 {
        let mut reference_copy = None;
        if s.reference_pass {
            let mut x = sim.alloc(sh.hid);
            for _ in 0..arch.layers {
                let (out, _) = sim.layer_forward(&sh, false, false);
                sim.free(x);
                x = out;
            }
            sim.free(x);
            if s.fused_logits {
                // no-grad: the gathered states, one tile and the statistics, then gone
                let parts = vec![
                    sim.alloc(lg.gathered),
                    sim.alloc(lg.tile),
                    sim.alloc(lg.stats),
                ];
                sim.free_all(parts);
            } else {
                let (head, _) = sim.lm_head(arch, lg, false);
                let copy = sim.alloc(lg.copy);
                sim.free(head);
                // each row's log-softmax is dropped only when the next one replaces it
                let mut previous = 0;
                for _ in 0..s.seqs {
                    let row = sim.alloc(lg.row);
                    sim.free(previous);
                    previous = row;
                }
                sim.free(previous);
                reference_copy = Some(copy);
            }
            sim.free(residue.0);
            sim.free(residue.1);
            residue = (sim.alloc(sh.hid), sim.alloc(sh.hid));
        }
        sim.forward_and_backward(arch, s, &sh, lg, reference_copy);
    }
    sim.alloc.peak_reserved
}

/// Byte sizes of one micro-batch's per-layer tensors.
struct Shapes {
    hid: u64,
    hid32: u64,
    q: u64,
    kv: u64,
    ffn: u64,
    rank32: u64,
    /// targeted projections, in `Arch::projections` order, with their fp32 input-cast bytes
    casts: Vec<(bool, u64)>,
    fused: bool,
    extra_norms: u64,
    qk_norm: bool,
    quantised: bool,
    checkpointing: bool,
}

impl Shapes {
    fn new(arch: &Arch, targets: &[bool], tokens: u64, s: &StepShape) -> Shapes {
        let casts = arch
            .projections()
            .iter()
            .zip(targets)
            .map(|(p, on)| (*on, tokens * p.fan_in * 4))
            .collect();
        Shapes {
            hid: tokens * arch.hidden * 2,
            hid32: tokens * arch.hidden * 4,
            q: tokens * arch.q_dim() * 2,
            kv: tokens * arch.kv_dim() * 2,
            ffn: tokens * arch.intermediate * 2,
            rank32: tokens * s.rank * 4,
            casts,
            fused: arch.family.fused_projections(),
            extra_norms: arch.family.norms_per_layer() - 2,
            qk_norm: arch.family.has_qk_norm(),
            quantised: s.quantised_base,
            checkpointing: s.checkpointing,
        }
    }
}

struct Sim {
    alloc: CachingAllocator,
    next: u32,
}

/// Tensors of one layer's forward: those autograd saves, and those dropped at the layer's end.
struct LayerRun {
    saved: Vec<u32>,
    save: bool,
    /// false under PEFT's `disable_adapter()` (the reference pass)
    adapters: bool,
}

impl Sim {
    fn new(expandable: bool) -> Sim {
        let alloc = if expandable {
            CachingAllocator::expandable()
        } else {
            CachingAllocator::new()
        };
        Sim { alloc, next: 1 }
    }

    fn alloc(&mut self, bytes: u64) -> u32 {
        let id = self.next;
        self.next += 1;
        if bytes > 0 {
            self.alloc.alloc(id, bytes);
        }
        id
    }

    fn free(&mut self, id: u32) {
        self.alloc.free(id);
    }

    /// The lm_head output; with Gemma 2's soft-capping, logits / cap, tanh (its output saved
    /// when gradients are recorded, returned second) and * cap.
    fn lm_head(&mut self, arch: &Arch, lg: &Logits, grad: bool) -> (u32, u32) {
        if !arch.final_logit_softcapping {
            return (self.alloc(lg.head), 0);
        }
        let raw = self.alloc(lg.head);
        let divided = self.alloc(lg.head);
        self.free(raw);
        let tanh = self.alloc(lg.head);
        self.free(divided);
        let capped = self.alloc(lg.head);
        if grad {
            (capped, tanh)
        } else {
            self.free(tanh);
            (capped, 0)
        }
    }

    /// A tensor autograd keeps when gradients are recorded; without them it is dropped at once.
    fn keep(&mut self, run: &mut LayerRun, id: u32) {
        if run.save {
            run.saved.push(id);
        } else {
            self.free(id);
        }
    }

    fn free_all(&mut self, ids: Vec<u32>) {
        ids.into_iter().for_each(|t| self.free(t));
    }

    /// A projection as PEFT's LoRA forward runs it (trace): the frozen output (bf16); then, when
    /// targeted, the fp32 input cast and rank-wide `lora_A` output (both saved), `lora_B`'s fp32
    /// output, its scaled copy, their fp32 sum with the frozen output, and the sum cast to bf16.
    fn projection(&mut self, sh: &Shapes, run: &mut LayerRun, index: usize, out: u64) -> u32 {
        let (targeted, cast) = sh.casts[index];
        let frozen = self.alloc(out);
        if !targeted || !run.adapters {
            return frozen;
        }
        let c = self.alloc(cast);
        let a = self.alloc(sh.rank32);
        let lora_b = self.alloc(2 * out);
        let scaled = self.alloc(2 * out);
        self.free(lora_b);
        let sum = self.alloc(2 * out);
        self.free(scaled);
        self.free(frozen);
        let result = self.alloc(out);
        self.free(sum);
        self.keep(run, c);
        self.keep(run, a);
        result
    }

    /// RMSNorm in fp32 (trace): upcast (saved), square, normalised product, downcast, weight.
    fn rms_norm(&mut self, sh: &Shapes, run: &mut LayerRun, width32: u64) -> u32 {
        let x32 = self.alloc(width32);
        let square = self.alloc(width32);
        self.free(square);
        let normalised = self.alloc(width32);
        self.keep(run, x32);
        let down = self.alloc(width32 / 2);
        let weighted = self.alloc(width32 / 2);
        self.free(down);
        self.free(normalised);
        let _ = sh;
        weighted
    }

    /// Rotary embedding of a query or key of `bytes` (trace): x*cos, rotate_half's negated half
    /// and concatenation, its product with sin, and the sum.
    fn rotary(&mut self, bytes: u64) -> u32 {
        let cos = self.alloc(bytes);
        let half = self.alloc(bytes / 2);
        let rotated = self.alloc(bytes);
        self.free(half);
        let sin = self.alloc(bytes);
        self.free(rotated);
        let sum = self.alloc(bytes);
        self.free(cos);
        self.free(sin);
        sum
    }

    /// One decoder layer's forward in the order the trace shows. With `save` the tensors autograd
    /// keeps stay allocated and are returned; the layer's output is always returned.
    fn layer_forward(&mut self, sh: &Shapes, save: bool, adapters: bool) -> (u32, Vec<u32>) {
        let mut run = LayerRun {
            adapters,
            saved: Vec::new(),
            save,
        };
        let normed = self.rms_norm(sh, &mut run, sh.hid32);
        let (q, k, v);
        if sh.fused {
            let qkv = self.projection(sh, &mut run, 0, sh.q + 2 * sh.kv);
            (q, k, v) = (qkv, 0, qkv);
        } else {
            q = self.projection(sh, &mut run, 0, sh.q);
            k = self.projection(sh, &mut run, 1, sh.kv);
            v = self.projection(sh, &mut run, 2, sh.kv);
        }
        let (q, k) = if sh.qk_norm && !sh.fused {
            let qn = self.rms_norm(sh, &mut run, 2 * sh.q);
            self.free(q);
            let kn = self.rms_norm(sh, &mut run, 2 * sh.kv);
            self.free(k);
            (qn, kn)
        } else {
            (q, k)
        };
        let rot_q = self.rotary(sh.q);
        let rot_k = self.rotary(sh.kv);
        if !sh.fused {
            self.free(q);
            self.free(k);
        }
        let attn = self.alloc(sh.q);
        let o_index = if sh.fused { 1 } else { 3 };
        let o = self.projection(sh, &mut run, o_index, sh.hid);
        // SDPA's inputs and output stay referenced until the attention module returns
        for t in [attn, rot_q, rot_k, v] {
            self.keep(&mut run, t);
        }
        self.free(normed);
        let attn_out = if sh.extra_norms > 0 {
            self.rms_norm(sh, &mut run, sh.hid32)
        } else {
            o
        };
        let resid = self.alloc(sh.hid);
        self.free(o);
        self.free(attn_out);
        let normed = self.rms_norm(sh, &mut run, sh.hid32);
        let prod = if sh.fused {
            let gate_up = self.projection(sh, &mut run, 2, 2 * sh.ffn);
            let act = self.alloc(sh.ffn);
            let prod = self.alloc(sh.ffn);
            self.keep(&mut run, gate_up);
            self.keep(&mut run, act);
            prod
        } else {
            let gate = self.projection(sh, &mut run, 4, sh.ffn);
            let act = self.alloc(sh.ffn);
            self.keep(&mut run, gate);
            let up = self.projection(sh, &mut run, 5, sh.ffn);
            let prod = self.alloc(sh.ffn);
            self.keep(&mut run, act);
            self.keep(&mut run, up);
            prod
        };
        let down_index = if sh.fused { 3 } else { 6 };
        let down = self.projection(sh, &mut run, down_index, sh.hid);
        if sh.quantised {
            self.keep(&mut run, prod);
        } else {
            self.free(prod);
        }
        self.free(normed);
        let mlp_out = if sh.extra_norms > 0 {
            self.rms_norm(sh, &mut run, sh.hid32)
        } else {
            down
        };
        let out = self.alloc(sh.hid);
        self.free(down);
        self.free(mlp_out);
        self.free(resid);
        (out, run.saved)
    }

    /// One layer's backward once its saved tensors exist: the gradients of the MLP (fp32
    /// through the adapters), then of attention, then the gradient passed down.
    fn layer_backward(&mut self, sh: &Shapes, saved: Vec<u32>, grad: u32) -> u32 {
        let g32 = self.alloc(sh.hid32);
        let down_in32 = self.alloc(2 * sh.ffn);
        let down_in = self.alloc(sh.ffn);
        self.free(g32);
        self.free(down_in32);
        let (g_act, g_gate, g_up) = (self.alloc(sh.ffn), self.alloc(sh.ffn), self.alloc(sh.ffn));
        self.free(down_in);
        self.free(g_act);
        let g_normed = self.alloc(sh.hid);
        self.free(g_gate);
        self.free(g_up);
        let g_norm32 = self.alloc(sh.hid32);
        self.free(g_normed);
        let g_mid = self.alloc(sh.hid);
        self.free(g_norm32);
        let g_attn = self.alloc(sh.q);
        let (g_q, g_k, g_v) = (self.alloc(sh.q), self.alloc(sh.kv), self.alloc(sh.kv));
        self.free(g_attn);
        let g_x = self.alloc(sh.hid32);
        self.free_all(vec![g_q, g_k, g_v]);
        self.free_all(saved);
        let next = self.alloc(sh.hid);
        self.free_all(vec![g_x, g_mid, grad]);
        next
    }

    /// The logits phase as measured (TRL's bf16 logits): forward, entropy, backward; returns the
    /// last gradient still alive (the lm_head input's), for the caller to free.
    fn logits_phase(
        &mut self,
        arch: &Arch,
        s: &StepShape,
        lg: &Logits,
        reference_copy: Option<u32>,
    ) -> u32 {
        let (head, softcap) = self.lm_head(arch, lg, true);
        let copy = self.alloc(lg.copy);
        self.free(head);
        let rows: Vec<u32> = (0..s.seqs).map(|_| self.alloc(lg.row)).collect();
        let carried = self.alloc(lg.chunk);
        let (a, b) = (self.alloc(lg.chunk), self.alloc(lg.chunk));
        self.free(a);
        self.free(b);
        self.free(carried);
        if let Some(r) = reference_copy {
            self.free(r);
        }
        self.free(copy);
        // backward through the logits: each row's gradient replaces its saved log-softmax
        let mut grads = Vec::with_capacity(rows.len());
        for row in rows.into_iter().rev() {
            let gather = self.alloc(lg.row);
            grads.push(self.alloc(lg.row));
            self.free(gather);
            self.free(row);
        }
        // unbind's backward stacks them; the temperature division and the two slices
        // (`[:, -keep:]`, then `[:, :-1]`) each make a new gradient of their input's shape
        let stacked = self.alloc(lg.copy);
        self.free_all(grads);
        let scaled = self.alloc(lg.copy);
        self.free(stacked);
        let kept_slice = self.alloc(lg.copy);
        self.free(scaled);
        let sliced = self.alloc(lg.head);
        self.free(kept_slice);
        if !arch.final_logit_softcapping {
            return sliced;
        }
        let through_mul = self.alloc(lg.head);
        self.free(sliced);
        let through_tanh = self.alloc(lg.head);
        self.free(through_mul);
        self.free(softcap);
        let through_div = self.alloc(lg.head);
        self.free(through_tanh);
        through_div
    }

    /// TRL 1.x's fused head, forward then backward (see `Logits::fused_peak`); returns the
    /// bf16 gradient of the gathered hidden states, for the caller to free.
    fn fused_head(&mut self, lg: &Logits, reference_copy: Option<u32>) -> u32 {
        let gathered = self.alloc(lg.gathered);
        let (tile, stats) = (self.alloc(lg.tile), self.alloc(lg.stats));
        self.free(tile);
        self.free(stats);
        if let Some(r) = reference_copy {
            self.free(r);
        }
        let grad32 = self.alloc(2 * lg.gathered);
        let tile = self.alloc(lg.tile);
        self.free(tile);
        let grad = self.alloc(lg.gathered);
        self.free(grad32);
        self.free(gathered);
        grad
    }

    fn forward_and_backward(
        &mut self,
        arch: &Arch,
        s: &StepShape,
        sh: &Shapes,
        lg: &Logits,
        reference_copy: Option<u32>,
    ) {
        // forward through the layers: with checkpointing only each layer's input stays
        let mut kept: Vec<Vec<u32>> = Vec::with_capacity(arch.layers as usize);
        let mut input = self.alloc(sh.hid);
        for _ in 0..arch.layers {
            let (out, saved) = self.layer_forward(sh, !sh.checkpointing, true);
            if sh.checkpointing {
                kept.push(vec![input]);
            } else {
                self.free(input);
                kept.push(saved);
            }
            input = out;
        }
        let norm_in = self.alloc(sh.hid32);
        let normed = self.alloc(sh.hid);
        self.free(input);
        let sliced = if s.fused_logits {
            self.fused_head(lg, reference_copy)
        } else {
            self.logits_phase(arch, s, lg, reference_copy)
        };
        let mut grad = self.alloc(sh.hid);
        self.free_all(vec![sliced, norm_in, normed]);
        // backward through the layers, last first (recomputed when checkpointing)
        // Every layer's backward repeats the same requests while memory only gets freed, so
        // after the first two layers the cache already holds every block they need: the rest
        // release their stored tensors without changing the reserved peak.
        for (done, stored) in kept.into_iter().rev().enumerate() {
            if done >= 2 {
                self.free_all(stored);
                continue;
            }
            let saved = if sh.checkpointing {
                let (out, saved) = self.layer_forward(sh, true, true);
                self.free(out);
                saved
            } else {
                Vec::new()
            };
            grad = self.layer_backward(sh, saved, grad);
            self.free_all(stored);
        }
        self.free(grad);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalog;

    fn shape(scoring_rows: u64) -> StepShape {
        StepShape {
            seqs: 8,
            prompt: 256,
            completion: 768,
            rank: 16,
            checkpointing: true,
            reference_pass: false,
            quantised_base: false,
            expandable_segments: false,
            fused_logits: true,
            scoring_rows,
            free_at_step: 0,
            small_card: false,
        }
    }

    /// The scoring pass goes a micro-batch at a time with nothing saved, so it neither grows
    /// with the generation batch nor, for the catalog's models, outgrows a checkpointed step.
    #[test]
    fn trl_scoring_pass_stays_below_a_checkpointed_step() {
        for id in catalog::ids() {
            let arch = &catalog::find(id).expect("catalog id").arch;
            let targets = vec![true; arch.projections().len()];
            let s = shape(8);
            let logits = Logits::new(arch, &s);
            let pass = trl_scoring_pass(arch, &s, &logits);
            let scored = trl_step(arch, &targets, &s);
            let quiet = trl_step(arch, &targets, &shape(0));
            assert_eq!(pass, trl_scoring_pass(arch, &shape(64), &logits));
            assert!(pass.activations + pass.logits > 0);
            assert!(
                pass.activations + pass.logits < quiet.activations + quiet.logits,
                "{}",
                arch.name
            );
            assert_eq!(scored, quiet, "{}", arch.name);
        }
    }
}
