"""grpofit's measuring callback: one JSON line per training step with the GPU memory the step
took, for `grpofit check LOG --config run.toml` to set against the estimate.

    from grpofit_callback import GrpofitCallback
    trainer = GRPOTrainer(..., callbacks=[GrpofitCallback()])

The log goes to `log_path`, else $GRPOFIT_RUN_LOG (set by `grpofit run`, so that these lines
land in its run log beside its NVML samples), else $GRPOFIT_LOG, else grpofit-run.jsonl
(appended to). Needs only torch and transformers.

GRPO's two phases: TRL's GRPOTrainer generates the completions inside `training_step` (its
`_prepare_inputs`), between `on_step_begin` and `on_step_end`, so one step's peak covers both
the generation and the training on them; the counters cannot tell the two apart.

torch's counters (`max_memory_allocated`, `max_memory_reserved`) count every tensor of this
process: the weights, adapters and optimizer states as well as the step's activations, and a
colocated vLLM's tensors too. `mem_get_info` is the device's view (all processes, the CUDA
context included).
"""

import json
import os
import time

import torch
from transformers import TrainerCallback


def _version(package):
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # not installed, or no metadata: left out
        return None


class GrpofitCallback(TrainerCallback):
    """Appends a `start` line when training begins and a `step` line after every step."""

    def __init__(self, log_path=None):
        self.log_path = (
            log_path
            or os.environ.get("GRPOFIT_RUN_LOG")
            or os.environ.get("GRPOFIT_LOG")
            or "grpofit-run.jsonl"
        )
        self._started = None

    def _write(self, record):
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def _is_main(self, state):
        # one line per step: only the main process writes (each rank would measure its own GPU)
        return getattr(state, "is_world_process_zero", True)

    def on_train_begin(self, args, state, control, **kwargs):
        if not self._is_main(state) or not torch.cuda.is_available():
            return
        free, total = torch.cuda.mem_get_info()
        record = {
            "kind": "start",
            "device": torch.cuda.get_device_name(),
            "total": total,
            "free": free,
            "torch": torch.__version__,
        }
        for package in ("trl", "transformers", "peft", "vllm", "unsloth"):
            found = _version(package)
            if found is not None:
                record[package] = found
        self._write(record)

    def on_step_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self._started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if not self._is_main(state) or not torch.cuda.is_available():
            return
        # the step's kernels finished: the peaks and the free memory are the step's
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        seconds = None
        if self._started is not None:
            seconds = time.perf_counter() - self._started
        self._write(
            {
                "kind": "step",
                "step": state.global_step,
                "max_allocated": torch.cuda.max_memory_allocated(),
                "max_reserved": torch.cuda.max_memory_reserved(),
                "free": free,
                "total": total,
                "seconds": seconds,
            }
        )
