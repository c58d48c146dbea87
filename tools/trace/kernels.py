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

trl 1.16.0 picks the path by device: `_use_triton(device)` (same file) is true on CUDA and XPU
only. Elsewhere `forward` / `backward` fold each tile with torch ops (`_forward_tile`,
`_backward_tile`: fp32 copies of the tile, vocabulary-wide `exp` and `mul` temporaries a GPU never
makes), and `trainer/utils.py` `_fused_forward` scores every position, prompt and padding included
(`compact = _use_triton(hidden_states.device)`; on CUDA only `hidden_states[mask]`, the
completion tokens, as 1.15.0 does on every device). The stand-in makes `_use_triton` answer as
on CUDA wherever the release imported it, so the trace follows the path users run on a GPU: the
compact tile and the kernel launches above.

Dropout (PEFT's `lora_dropout`, the `dropout` mixes): torch 2.9 `aten/src/ATen/native/Dropout.cpp`
`dropout` runs the fused `native_dropout` only where `is_fused_kernel_acceptable` (CUDA, XPU,
lazy or privateuse1 tensors, 0 < p < 1); elsewhere `_dropout_impl` draws `noise =
at::empty_like(input).bernoulli_(1 - p)`, divides it and multiplies, so on CPU each dropout
saves the noise in the input's dtype (fp32 for PEFT's fp32 adapters: 4 bytes an element) where
CUDA's `native_dropout` saves a bool mask (1 byte; `NativeDropoutBackward0` keeps `result1`).
The stand-in sends `torch.nn.functional.dropout` in training mode with 0 < p < 1 to
`torch.native_dropout`, whose CPU kernel returns the same bool mask, so the trace holds what the
CUDA path saves.
"""
import importlib

import torch

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


def _use_triton(device):
    return True


# the modules of trl 1.16.0 that import `_use_triton` by name (`from ..kernels.chunked_logprob import _use_triton`)
_USE_TRITON_IMPORTERS = ["trl.kernels.chunked_logprob", "trl.kernels.chunked_divergence", "trl.trainer.utils"]


def _patch_use_triton():
    done = []
    for name in _USE_TRITON_IMPORTERS:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        if hasattr(mod, "_use_triton"):
            mod._use_triton = _use_triton
            done.append(f"{name}._use_triton (true, as on CUDA)")
    return done


_DROPOUT = [None]


def _native_dropout(input, p=0.5, training=True, inplace=False):
    if training and 0.0 < p < 1.0 and not inplace and input.numel() > 0:
        return torch.native_dropout(input, p, True)[0]
    return _DROPOUT[0](input, p, training, inplace)


def install_dropout():
    if _DROPOUT[0] is None:
        _DROPOUT[0] = torch.nn.functional.dropout
        torch.nn.functional.dropout = _native_dropout
    return ["torch.nn.functional.dropout (native_dropout's bool mask, as on CUDA)"]


def install():
    """Replaces the kernels of the TRL release on the path; returns what was replaced."""
    return install_dropout() + _install_trl()


def _install_trl():
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
    patched = _patch_use_triton() if hasattr(mod, "_use_triton") else []
    if hasattr(mod, "_forward_tile") and not patched:
        # a torch fallback beside the kernels, picked by something other than `_use_triton`:
        # the trace would measure a path no GPU runs
        raise RuntimeError("trl.kernels.chunked_logprob has a torch fallback (_forward_tile) but "
                           "no _use_triton to stand in: read how this release picks its path")
    return done + patched
