"""How long your reward functions take on a completion, before launch: ``time_rewards`` calls
them as TRL's ``GRPOTrainer._calculate_rewards`` does on sample completions, and gives the
seconds a completion to put in ``[grpofit] reward_seconds`` (or writes them there through the
binary: ``grpofit calibrate --reward-seconds``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import os
import statistics
import time
import warnings
from typing import Any, Callable, List, Optional, Sequence, Union

from ._binary import FITS, run as _run
from ._errors import ArgumentError, ArgumentTypeError


def _log_extra(column: str, values: list) -> None:
    """Stands in for trl 1.16 `GRPOTrainer._log_completion_extra` (a completions-table column)."""


def _log_metric(name: str, value: float) -> None:
    """Stands in for trl 1.16 `GRPOTrainer._log_metric` (a scalar logged beside `kl`)."""


# what trl 1.0 to 1.16 `_calculate_rewards` hands every reward function beside the columns
# (`reward_kwargs["log_extra"]`, `["log_metric"]`): a function that logs through them runs here
# too, its logs dropped; `trainer_state` (`self.state`) is yours to give (None if not read)
_HOOKS = {"trainer_state": None, "log_extra": _log_extra, "log_metric": _log_metric}


def _is_model(func: Any) -> bool:
    # a `reward_funcs` entry TRL loads or runs as a model (trl 1.16 `GRPOTrainer.__init__`: a
    # str is `AutoModelForSequenceClassification.from_pretrained`; `_calculate_rewards` runs an
    # `nn.Module` as a model): told apart without importing torch
    if isinstance(func, str):
        return True
    return any(c.__name__ == "Module" and c.__module__.startswith("torch") for c in type(func).__mro__)


def _is_async(func: Any) -> bool:
    # trl 1.16 `is_async_callable`: a function, a partial, or an instance whose __call__ is async
    target = getattr(func, "func", func)
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)
    )


def _name(func: Any) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


def _checked_output(func: Any, output: Any, expected: int) -> None:
    # trl 1.16 `_calculate_rewards`: one reward per prompt-completion pair, else ValueError
    try:
        got = len(output)
    except TypeError:
        got = None
    if got != expected:
        raise ArgumentError(
            f"time_rewards: the reward function {_name(func)!r} returned "
            f"{got if got is not None else repr(output)} rewards, but {expected} were expected "
            "(one per prompt-completion pair), as TRL requires"
        )


def _takes(func: Any, kwargs: dict) -> None:
    """ArgumentError, before any call, when `func` cannot take what TRL passes it (a function
    without `**kwargs` that does not name every one): TRL's own call would fail the same way."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin or other callable without a signature
        return
    try:
        signature.bind(**kwargs)
    except TypeError as e:
        raise ArgumentError(
            f"time_rewards: the reward function {_name(func)!r} cannot take what TRL's "
            f"_calculate_rewards passes it ({e}): it passes {', '.join(kwargs)} by keyword; "
            "give the function `**kwargs`, as TRL's reward functions have"
        ) from None


def _gather(coroutines: List[Any]) -> List[Any]:
    async def together():
        return await asyncio.gather(*coroutines)

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop running here: run one
        return asyncio.run(together())
    # inside a running loop (a notebook): on a thread of its own, as TRL runs its own loop
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, together()).result()


def _one_round(funcs: Sequence[Callable], kwargs: dict, n: int) -> float:
    """The seconds one round of calls takes: the synchronous functions one after the other, the
    asynchronous ones together (trl 1.0 on: `asyncio.gather`)."""
    seconds = 0.0
    for func in funcs:
        if _is_async(func):
            continue
        started = time.perf_counter()
        output = func(**kwargs)
        seconds += time.perf_counter() - started
        _checked_output(func, output, n)
    asynchronous = [f for f in funcs if _is_async(f)]
    if asynchronous:
        started = time.perf_counter()
        outputs = _gather([f(**kwargs) for f in asynchronous])
        seconds += time.perf_counter() - started
        for func, output in zip(asynchronous, outputs):
            _checked_output(func, output, n)
    return seconds


def _column(name: str, values: Any, n: int) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ArgumentTypeError(
            f"time_rewards: {name}={values!r}: expected a list with one value per completion "
            "(TRL passes each dataset column so)"
        )
    if len(values) != n:
        raise ArgumentError(
            f"time_rewards: {name} has {len(values)} values for {n} completions: one per completion"
        )
    return list(values)


def time_rewards(
    reward_funcs: Any,
    completions: Sequence[Any],
    prompts: Optional[Sequence[Any]] = None,
    *,
    completion_ids: Optional[Sequence[Any]] = None,
    repeat: int = 3,
    config: Optional[Union[str, os.PathLike]] = None,
    **columns: Any,
) -> float:
    """Seconds a completion your reward functions take, all together: what `[grpofit]
    reward_seconds` holds. Each function is called as TRL's `GRPOTrainer._calculate_rewards`
    calls it (trl 1.16): `func(prompts=..., completions=..., completion_ids=..., **columns)`,
    the columns being your dataset's other columns, one value per completion (`trainer_state`
    None unless you give it), and TRL's `log_extra` / `log_metric`
    (trl 1.0 on), whose logs are dropped here; `completion_ids` only when given. The
    synchronous functions run one after the other, the `async` ones together (`asyncio.gather`,
    as trl 1.0 on runs them). A reward model (a model name, or a torch module) is left out with a
    warning: grpofit times its forward itself (`[grpofit] reward_models`).

    `prompts`: one per completion (empty ones when not given: "" or [] as the completions are
    text or messages). The round of calls is made `repeat` times; the median round, over the
    completions, is the answer. With `config` (a run file's path), the binary writes it there
    as `[grpofit] reward_seconds` (`grpofit calibrate --reward-seconds`: to three significant
    figures, every other key and comment kept)."""
    if config is not None and not isinstance(config, (str, os.PathLike)):
        # checked before the functions run: a run file's path, as `calibrate --config` takes
        raise ArgumentTypeError(
            f"time_rewards: config={config!r}: expected a run file's path (a str or a path)"
        )
    funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    models = [f for f in funcs if _is_model(f)]
    if models:
        warnings.warn(
            f"time_rewards: {len(models)} reward model(s) left out: grpofit times a reward "
            "model's forward itself ([grpofit] reward_models)",
            stacklevel=2,
        )
    funcs = [f for f in funcs if not _is_model(f)]
    not_callable = [f for f in funcs if not callable(f)]
    if not_callable:
        raise ArgumentTypeError(f"time_rewards: reward_funcs: {not_callable[0]!r} is not callable")
    if not funcs:
        raise ArgumentError("time_rewards: no reward function to time (reward models are left out)")
    if isinstance(completions, (str, bytes)) or not hasattr(completions, "__len__") or not len(completions):
        raise ArgumentTypeError(
            f"time_rewards: completions={completions!r}: expected a non-empty list of completions"
        )
    n = len(completions)
    if prompts is None:
        prompts = ["" if isinstance(c, str) else [] for c in completions]
    kwargs = {"prompts": _column("prompts", prompts, n), "completions": list(completions)}
    if completion_ids is not None:
        kwargs["completion_ids"] = _column("completion_ids", completion_ids, n)
    for name, values in columns.items():
        kwargs[name] = values if name in _HOOKS else _column(name, values, n)
    for name, hook in _HOOKS.items():
        kwargs.setdefault(name, hook)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ArgumentError(f"time_rewards: repeat={repeat!r}: expected a whole number from 1")
    for func in funcs:
        _takes(func, kwargs)
    rounds = [_one_round(funcs, kwargs, n) for _ in range(repeat)]
    seconds = statistics.median(rounds) / n
    if config is not None:
        path = os.fspath(config)
        done = _run(
            ["calibrate", "--reward-seconds", repr(seconds), "--config", path, "--json"],
            answers=(FITS,),
        )
        json.loads(done.stdout)
    return seconds
