//! The `trl` step replayed tensor by tensor through the caching-allocator model, for what
//! `max_memory_reserved()` reports: the analytic step (`step.rs`) gives the allocated peak, the
//! replay the blocks PyTorch keeps around it. Evidence: the allocator traces summarised in
//! `calibration/README.md`.

use crate::arch::Arch;
use crate::memory::step::allocator::CachingAllocator;
use crate::memory::step::shape::{Logits, StepShape};
use crate::run::attention::Attention;

/// Replays the step's allocations through the caching-allocator model, twice (the second
/// step starts with the first one's cache), and returns the allocator with its peaks.
pub(super) fn replay(
    arch: &Arch,
    targets: &[bool],
    tokens: u64,
    lg: &Logits,
    s: &StepShape,
) -> CachingAllocator {
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
    sim.alloc
}

/// Byte sizes of one micro-batch's per-layer tensors.
struct Shapes {
    hid: u64,
    hid32: u64,
    q: u64,
    kv: u64,
    ffn: u64,
    /// `lora_A`'s output (fp32, bf16 under autocast: `shape::StepPath`)
    rank32: u64,
    /// targeted projections, in `Arch::projections` order, with the bytes `lora_A` saves of
    /// their input (fp32, bf16 under autocast)
    casts: Vec<(bool, u64)>,
    /// each projection's dropout mask (`dropout::AdapterDropout`), 0 without dropout
    masks: Vec<u64>,
    fused: bool,
    /// SDPA gets K and V repeated to the query's heads (`shape::StepPath::repeats_kv`)
    repeat_kv: bool,
    /// eager attention's scores, `B x heads x S x S` (0 for SDPA and flash attention)
    eager_scores: u64,
    extra_norms: u64,
    qk_norm: bool,
    quantised: bool,
    checkpointing: bool,
    /// a mixture of experts: the experts' gathered input rows and the router's fp32 probabilities
    moe_saved: u64,
}

impl Shapes {
    fn new(arch: &Arch, targets: &[bool], tokens: u64, s: &StepShape) -> Shapes {
        let casts = arch
            .projections()
            .iter()
            .zip(targets)
            .map(|(p, on)| (*on, tokens * p.fan_in * s.path.lora_element()))
            .collect();
        let masks = arch
            .projections()
            .iter()
            .zip(targets)
            .map(|(p, on)| {
                if *on {
                    tokens * p.fan_in * s.dropout.element()
                } else {
                    0
                }
            })
            .collect();
        Shapes {
            hid: tokens * arch.hidden * 2,
            hid32: tokens * arch.hidden * 4,
            q: tokens * arch.q_dim() * 2,
            kv: tokens * arch.kv_dim() * 2,
            ffn: tokens * arch.intermediate * 2,
            rank32: tokens * s.rank * s.path.lora_element(),
            casts,
            masks,
            fused: arch.family.fused_projections(),
            repeat_kv: s.path.repeats_kv() && s.attention.repeats_kv_with_mask(),
            eager_scores: if s.attention == Attention::Eager {
                let seq = s.prompt + s.completion;
                s.seqs * arch.heads * seq * seq
            } else {
                0
            },
            extra_norms: arch.family.norms_per_layer() - 2,
            qk_norm: arch.family.has_qk_norm(),
            quantised: s.quantised_base,
            checkpointing: s.checkpointing,
            moe_saved: arch
                .moe
                .map_or(0, |m| tokens * (2 * arch.hidden * m.active + 4 * m.experts)),
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
        if !arch.final_logit_softcapping && lg.cast_from > 0 {
            // accelerate's `convert_outputs_to_fp32`: the bf16 output, then its fp32 cast
            let bf16 = self.alloc(lg.cast_from);
            let fp32 = self.alloc(lg.head);
            self.free(bf16);
            return (fp32, 0);
        }
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

    /// A quantised projection's input, which bitsandbytes' 8-bit matmul keeps for the backward
    /// (`shape::int8_matmul_inputs`); freed otherwise.
    fn keep_if_quantised(&mut self, sh: &Shapes, run: &mut LayerRun, id: u32) {
        if sh.quantised {
            self.keep(run, id);
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
        // a mixture's experts are no linear layers: no adapter, the output alone
        let (targeted, cast) = sh.casts.get(index).copied().unwrap_or((false, 0));
        let frozen = self.alloc(out);
        if !targeted || !run.adapters {
            return frozen;
        }
        let c = self.alloc(cast);
        let mask = sh.masks.get(index).copied().unwrap_or(0);
        if mask > 0 {
            // the dropout's mask, made before `lora_A`'s cast and saved with it
            let m = self.alloc(mask);
            self.keep(run, m);
        }
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

    /// Eager attention (`recompute::eager_weights`): the scaled, masked bf16 scores, their fp32
    /// cast and the softmax's fp32 output, which it keeps with its bf16 copy.
    fn eager_scores(&mut self, sh: &Shapes, run: &mut LayerRun) {
        if sh.eager_scores == 0 {
            return;
        }
        let scores = self.alloc(2 * sh.eager_scores);
        let cast = self.alloc(4 * sh.eager_scores);
        let probs = self.alloc(4 * sh.eager_scores);
        self.free(scores);
        self.free(cast);
        let copy = self.alloc(2 * sh.eager_scores);
        self.keep(run, probs);
        self.keep(run, copy);
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
        // `repeat_kv` copies the key and value to the query's heads; the originals go
        let (rot_k, v) = if sh.repeat_kv {
            let (rk, rv) = (self.alloc(sh.q), self.alloc(sh.q));
            self.free(rot_k);
            self.free(v);
            (rk, rv)
        } else {
            (rot_k, v)
        };
        self.eager_scores(sh, &mut run);
        let attn = self.alloc(sh.q);
        let o_index = if sh.fused { 1 } else { 3 };
        let o = self.projection(sh, &mut run, o_index, sh.hid);
        // SDPA's inputs and output stay referenced until the attention module returns
        for t in [attn, rot_q, rot_k, v] {
            self.keep(&mut run, t);
        }
        // bitsandbytes' 8-bit matmul keeps its input (`shape::int8_matmul_inputs`)
        self.keep_if_quantised(sh, &mut run, normed);
        let attn_out = if sh.extra_norms > 0 {
            self.rms_norm(sh, &mut run, sh.hid32)
        } else {
            o
        };
        let resid = self.alloc(sh.hid);
        self.free(o);
        self.free(attn_out);
        let normed = self.rms_norm(sh, &mut run, sh.hid32);
        if sh.moe_saved > 0 {
            let routed = self.alloc(sh.moe_saved);
            self.keep(&mut run, routed);
        }
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
        self.keep_if_quantised(sh, &mut run, prod);
        self.keep_if_quantised(sh, &mut run, normed);
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

    /// TRL 1.x's fused head, forward then backward (see `Logits::fused_moments`); returns the
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
