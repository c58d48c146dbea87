"""Stand-ins for TRL's Triton kernels, which cannot run on CPU.

trl 1.15.0 `kernels/chunked_logprob.py` `_ChunkedLogProbFunction` allocates every buffer with
torch (the running statistics, the `mm_buf` tile, the fp32 gradients) and launches
`_forward_kernel` / `_backward_kernel` only to fold a tile into those buffers in place: the
kernels allocate nothing. So the memory trace is the same with the launches replaced by in-place
fills that keep the numbers finite (log-probabilities 0, the tile left as the logits for the
backward). The loss values of such a run mean nothing; its allocations are the trainer's.
"""
import importlib


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
    return done
