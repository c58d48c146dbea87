"""grpofit from Python: fit a GRPO fine-tuning run (TRL or Unsloth, vLLM colocated) into a GPU
before launching it.

A thin layer over the ``grpofit`` binary the wheel installs: each call runs it once and reads
its ``--json``; the notebook view is the SVG bar it draws (``--svg``). No estimation here.

    import grpofit
    grpofit.estimate(preset="24gb")                       # an Estimate: .fits, .components, ...
    grpofit.estimate(model={"model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct"},
                     lora=peft_config, grpo=grpo_config, gpu_mem="24GiB")
    grpofit.fit(preset="16gb", gpu_mem="12GiB").write("fitted.toml")
    grpofit.time_rewards([accuracy_reward], completions, config="run.toml")  # reward_seconds
    from grpofit import GrpofitCallback                   # the measuring callback (needs torch)

Importing this package imports neither torch nor transformers (nor trl, nor peft).
"""

from ._api import check, diagnose, estimate, fit
from ._binary import binary
from ._errors import (
    ArgumentError,
    ArgumentTypeError,
    BinaryNotFound,
    ConfigError,
    DoesNotFit,
    FileExists,
    GrpofitError,
    GrpofitNote,
    LogNotFound,
    NoRun,
)
from ._results import Check, Diagnosis, Estimate, Fit
from ._rewards import time_rewards

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "BinaryNotFound",
    "Check",
    "ConfigError",
    "Diagnosis",
    "DoesNotFit",
    "Estimate",
    "FileExists",
    "Fit",
    "GrpofitCallback",
    "GrpofitError",
    "GrpofitNote",
    "LogNotFound",
    "NoRun",
    "binary",
    "check",
    "diagnose",
    "estimate",
    "fit",
    "time_rewards",
]


def __getattr__(name):
    # imported on first use: the callback needs torch and transformers, the package does not
    if name == "GrpofitCallback":
        from .callback import GrpofitCallback

        return GrpofitCallback
    if name == "__version__":
        from ._version import version

        return version()
    raise AttributeError(f"module 'grpofit' has no attribute {name!r}")
