"""Stand-ins for TRL's Triton kernels, which cannot run on CPU.

trl 1.15.0 `kernels/chunked_logprob.py` `_ChunkedLogProbFunction` allocates every buffer with
torch (the running statistics, the `mm_buf` tile, the fp32 gradients) and launches
`_forward_kernel` / `_backward_kernel` only to fold a tile into those buffers in place: the
kernels allocate nothing. So the memory trace is the same with the launches replaced by in-place
fills that keep the numbers finite (log-probabilities 0, the tile left as the logits for the
backward). The loss values of such a run mean nothing; its allocations are the trainer's.

`_addmm_fp32` (same file) accumulates `a @ b` into an fp32 buffer: on CUDA with torch >= 2.8 by
`torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)`, which allocates nothing; elsewhere by
`acc.addmm_(a.float(), b.float())`, two fp32 copies a GPU never makes. The stand-in runs the CPU
path with the tracking paused, so the trace holds what the CUDA path allocates.
"""
import importlib

import memtrack


class _Launch:
    def __init__(self, fill):
        self.fill = fill

    def __getitem__(self, grid):
        return self.fill


def _forward(tile, stride, targets, running_max, sum_exp, x_sum_exp, sq_sum_exp, z_sum,
             max_before_target, target_logit, *rest, **kw):
    running_max.fill_(0.0)
    sum_exp.fill_(1.0)
    x_sum_exp.fill_(0.0)
    sq_sum_exp.fill_(1.0)
    z_sum.fill_(0.0)
    max_before_target.fill_(-1.0)
    target_logit.fill_(0.0)


def _backward(*args, **kw):
    pass


def _addmm_fp32(acc, a, b):
    memtrack.PAUSED[0] += 1
    try:
        acc.addmm_(a.float(), b.float())
    finally:
        memtrack.PAUSED[0] -= 1


def install():
    """Replaces the kernels of the TRL release on the path; returns what was replaced."""
    try:
        mod = importlib.import_module("trl.kernels.chunked_logprob")
    except Exception:
        return []
    done = []
    for name, fill in [("_forward_kernel", _forward), ("_backward_kernel", _backward)]:
        if hasattr(mod, name):
            setattr(mod, name, _Launch(fill))
            done.append(f"trl.kernels.chunked_logprob.{name}")
    if hasattr(mod, "_addmm_fp32"):
        mod._addmm_fp32 = _addmm_fp32
        done.append("trl.kernels.chunked_logprob._addmm_fp32 (the CUDA path's allocations)")
    return done
