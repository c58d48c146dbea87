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

Each step line carries the step's seconds (`on_step_begin` to `on_step_end`) and, where TRL
times its own phases, those timings (`trl_timings`: seconds a step by name, "vLLM.generate",
"transformers.generate", "sync_weights", each reward function...). TRL times them with
`trl.extras.profiling` (`profiling_context` from TRL 0.16, the `ProfilingContext` class from
1.0) but hands them only to Weights & Biases, MLflow or Trackio, never to the trainer's logs:
the callback wraps that module to read them as well, and changes nothing of what it reports.
TRL times each reward under its own name (`_calculate_rewards`: `profiling_context(self,
reward_func_name)`, trl 0.16 to 1.16; Unsloth's compiled trainer keeps that method): the step
line's `reward_funcs` says which of its timings are rewards and of what kind, "function" (the
user's Python function), "async" (TRL 1.0 on runs those together, `asyncio.gather`) or "model"
(a reward model's forward, on the GPU), read from the trainer's `reward_funcs` and
`reward_func_names` (trl 0.17 on; 0.16 names a model "reward NAME").

torch's counters (`max_memory_allocated`, `max_memory_reserved`) count every tensor of this
process: the weights, adapters and optimizer states as well as the step's activations, and a
colocated vLLM's tensors too. `mem_get_info` is the device's view (all processes, the CUDA
context included).
"""

import contextlib
import inspect
import json
import os
import sys
import time

import torch
from transformers import TrainerCallback


def _version(package):
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # not installed, or no metadata: left out
        return None


# the callbacks that read TRL's timings: the wrap is made once per process, and reads into each
_LISTENERS = []

# the rewards' names as TRL times them, and their kind ("function", "async", "model")
_REWARD_KINDS = {}


def _heard(name, seconds):
    # "GRPOTrainer.vLLM.generate": the trainer's class name first (UnslothGRPOTrainer...)
    short = name.split(".", 1)[1] if "." in name else name
    for listener in _LISTENERS:
        listener._timings[short] = listener._timings.get(short, 0.0) + seconds


def _reward_kind(func):
    module = getattr(getattr(sys.modules.get("torch"), "nn", None), "Module", None)
    if module is not None and isinstance(func, module):
        return "model"
    # trl 1.16 `is_async_callable`: a function, a partial, or a class whose __call__ is async
    target = getattr(func, "func", func)
    if inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)
    ):
        return "async"
    return "function"


def _reward_name(func):
    # trl 0.16 `_calculate_rewards`, before `reward_func_names`
    config = getattr(func, "config", None)
    if config is not None:
        return "reward " + str(getattr(config, "_name_or_path", "")).split("/")[-1]
    return getattr(func, "__name__", None)


def _note_rewards(trainer):
    """The trainer's rewards' names and kinds into `_REWARD_KINDS`."""
    funcs = getattr(trainer, "reward_funcs", None)
    if not isinstance(funcs, (list, tuple)):
        return
    names = getattr(trainer, "reward_func_names", None)
    for i, func in enumerate(funcs):
        name = names[i] if isinstance(names, (list, tuple)) and i < len(names) else None
        name = name or _reward_name(func)
        if name:
            _REWARD_KINDS[name] = _reward_kind(func)


def _replace_everywhere(profiling, original, replacement):
    # the trainer's module (and Unsloth's compiled one) holds its own name for the function;
    # read each module's own names, never `getattr`: a lazy module (transformers') would import
    # on the lookup, and fail where an optional package is missing
    profiling.profiling_context = replacement
    for module in list(sys.modules.values()):
        try:
            held = vars(module).get("profiling_context")
        except TypeError:  # no __dict__
            continue
        if module is not profiling and held is original:
            module.profiling_context = replacement


def _time_trl_phases():
    """Wraps TRL's profiling so that its timings reach `_heard` too; no-op without TRL."""
    profiling = sys.modules.get("trl.extras.profiling")
    if profiling is None:
        try:
            import trl.extras.profiling as profiling
        except Exception:  # no TRL, or one without profiling (before 0.16): step seconds only
            return
    if getattr(profiling, "_grpofit_timed", False):
        return
    profiling._grpofit_timed = True
    original = getattr(profiling, "profiling_context", None)
    context = getattr(profiling, "ProfilingContext", None)
    if context is not None:
        # TRL 1.0 on: every profiled block ends in `_log_metrics(duration)`
        log_metrics = context._log_metrics

        def _log_metrics(self, duration):
            _heard(self.name, duration)
            return log_metrics(self, duration)

        context._log_metrics = _log_metrics
        if original is not None:

            def profiling_context_class(trainer, name):
                _note_rewards(trainer)
                return original(trainer, name)

            _replace_everywhere(profiling, original, profiling_context_class)
        return
    if original is None:
        return

    # TRL 0.16 to 0.26: a generator context
    @contextlib.contextmanager
    def profiling_context(trainer, name):
        _note_rewards(trainer)
        started = time.perf_counter()
        with original(trainer, name):
            yield
        _heard(f"{trainer.__class__.__name__}.{name}", time.perf_counter() - started)

    _replace_everywhere(profiling, original, profiling_context)


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
        self._timings = {}

    def _write(self, record):
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def _is_main(self, state):
        # one line per step: only the main process writes (each rank would measure its own GPU)
        return getattr(state, "is_world_process_zero", True)

    def on_train_begin(self, args, state, control, **kwargs):
        if not self._is_main(state):
            return
        if not torch.cuda.is_available():
            # nothing to measure: said, not silent, so that an empty log is not a mystery
            sys.stderr.write(
                "GrpofitCallback: torch.cuda is not available: no memory is logged to "
                f"{self.log_path} (grpofit check needs a run on the GPU)\n"
            )
            return
        _time_trl_phases()
        if self not in _LISTENERS:
            _LISTENERS.append(self)
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
        self._timings = {}

    def on_step_end(self, args, state, control, **kwargs):
        if not self._is_main(state) or not torch.cuda.is_available():
            return
        # the step's kernels finished: the peaks and the free memory are the step's
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        seconds = None
        if self._started is not None:
            seconds = time.perf_counter() - self._started
        record = {
            "kind": "step",
            "step": state.global_step,
            "max_allocated": torch.cuda.max_memory_allocated(),
            "max_reserved": torch.cuda.max_memory_reserved(),
            "free": free,
            "total": total,
            "seconds": seconds,
        }
        if self._timings:
            record["trl_timings"] = dict(self._timings)
            rewards = {n: k for n, k in _REWARD_KINDS.items() if n in self._timings}
            if rewards:
                record["reward_funcs"] = rewards
        self._write(record)
