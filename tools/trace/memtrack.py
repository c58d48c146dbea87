"""Live tensor bytes on CPU, by phase of the GRPO step (tools/trace/README.md).

`LiveBytes` is a `TorchDispatchMode`: every op's output storages are recorded once (keyed by
`data_ptr`) with a weakref finalizer on the untyped storage, which fires when the storage is
released (torch keeps one Python object per storage while it lives). Storages made outside the
mode (weights loaded from safetensors, tensors built from Python lists) are added with
`register`. `Phases` names the phase each allocation lands in and keeps each phase's high-water
mark; `SavedBytes` counts what autograd saves for the backward (`saved_tensors_hooks`), by dtype.
"""
import collections
import os
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


# how many of the latest ops `at_peak` lists (`ops`, newest last: the last one made the peak)
RECENT_OPS = 30

# > 0 while a stand-in does on CPU what a CUDA kernel does without allocating (kernels.py)
PAUSED = [0]


def dtype_name(dt):
    return str(dt).replace("torch.", "")


class LiveBytes(TorchDispatchMode):
    def __init__(self, vocab):
        super().__init__()
        self.live = {}  # data_ptr -> bytes
        self.total = 0
        self.vocab = vocab
        self.phases = None
        self.vocab_dtypes = {}  # phase -> {dtype: largest bytes of one vocab-wide tensor}
        # the latest ops with the bytes their outputs added, newest last: which op made a peak
        self.recent = collections.deque(maxlen=RECENT_OPS)

    def register(self, t, op="registered"):
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        st = t.untyped_storage()
        ptr, n = st.data_ptr(), st.nbytes()
        if ptr == 0 or n == 0:
            return
        old = self.live.get(ptr)
        if old is not None:
            if old[1]() is st:
                return
            # the same address reused before the finalizer ran: replace the record
            self._free(ptr, old[2])
        token = object()
        self.live[ptr] = (n, weakref.ref(st), token, op)
        self.total += n
        weakref.finalize(st, self._free, ptr, token)
        if self.phases is not None:
            self.phases.on_alloc(self.total)

    def _free(self, ptr, token):
        rec = self.live.get(ptr)
        if rec is None or rec[2] is not token:
            return
        del self.live[ptr]
        self.total -= rec[0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if PAUSED[0]:
            return out
        flat, _ = tree_flatten(out)
        name = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else str(func)
        before = self.total
        # listed before its outputs are registered, so a peak it makes lists it last (bytes unknown yet)
        self.recent.append(name)
        for t in flat:
            if isinstance(t, torch.Tensor):
                self.register(t, name)
                if t.dim() >= 2 and t.shape[-1] == self.vocab and self.phases is not None:
                    per = self.vocab_dtypes.setdefault(self.phases.current, {})
                    dt = dtype_name(t.dtype)
                    per[dt] = max(per.get(dt, 0), t.numel() * t.element_size())
        # bytes the op's outputs added (0 for views and in-place ops)
        self.recent[-1] = f"{name} {self.total - before}"
        return out


class Phases:
    """The phase in force and each phase's high-water mark of live bytes."""

    # the run's phases while it runs (trace.py reads which phase a warning came in)
    ACTIVE = [None]

    def __init__(self, live):
        self.live = live
        live.phases = self
        Phases.ACTIVE[0] = self
        self.current = "setup"
        self.peaks = {}
        self.at_peak = {}
        self.segments = []  # [phase, step, live at start, peak, live at end]
        self.step = 0
        self._open("setup")

    def _open(self, phase):
        self.current = phase
        self.segments.append([phase, self.step, self.live.total, self.live.total, None])
        self.peaks[phase] = max(self.peaks.get(phase, 0), self.live.total)

    def enter(self, phase):
        if phase == self.current:
            return
        self.segments[-1][4] = self.live.total
        self._open(phase)

    def on_alloc(self, total):
        seg = self.segments[-1]
        if total > seg[3]:
            seg[3] = total
        if total > self.peaks.get(self.current, 0):
            self.peaks[self.current] = total
            if self.current in self.SNAPSHOT:
                self.at_peak[self.current] = self.large()

    # the phases whose peak's live set is kept: the storages of at least LARGE bytes, by the op
    # that made them (the rest summed), to see which tensors make a step's peak;
    # TRACE_AT_PEAK_MIN=1 lists every storage (to attribute a record's small bytes; not committed)
    SNAPSHOT = ("scoring", "reward", "loss_forward", "backward")
    LARGE = int(os.environ.get("TRACE_AT_PEAK_MIN", "16384"))

    def large(self):
        out, rest = {}, 0
        for n, _, _, op in self.live.live.values():
            if n >= self.LARGE:
                key = f"{op} {n}"
                out[key] = out.get(key, 0) + 1
            else:
                rest += n
        items = sorted(out.items(), key=lambda kv: -int(kv[0].rsplit(" ", 1)[1]) * kv[1])
        return {"large": [[k, c] for k, c in items], "small_bytes": rest,
                "ops": list(self.live.recent)}

    def close(self):
        self.segments[-1][4] = self.live.total


class SavedBytes:
    """Bytes autograd saves for the backward, by dtype: each storage counted once per backward."""

    def __init__(self, phases):
        self.phases = phases
        self.seen = set()
        self.current = {}
        self.largest = {}  # the largest set saved before one backward, by dtype

    def pack(self, t):
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr and ptr not in self.seen and not isinstance(t, torch.nn.Parameter):
                self.seen.add(ptr)
                name = dtype_name(t.dtype)
                self.current[name] = self.current.get(name, 0) + st.nbytes()
        return t

    @staticmethod
    def unpack(t):
        return t

    def backward_done(self):
        total = sum(self.current.values())
        if total > sum(self.largest.values()):
            self.largest = dict(self.current)
        self.seen = set()
        self.current = {}
