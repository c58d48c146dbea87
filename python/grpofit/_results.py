"""The answers: one dataclass per command, its fields the command's ``--json`` fields (the
JSON's shape is the API: README "estimate --json", src/commands.rs). ``json`` keeps the whole
object, fields added to it later included."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import os
from typing import Any, Callable, Dict, List, Optional

from ._errors import ArgumentTypeError, FileExists, NoRun


@dataclass
class _Rerun:
    """How to ask the binary again for what the JSON does not hold: the text report, the run
    file. `run(extra_args, json)` returns the binary's standard output."""

    run: Callable[..., str]
    cache: Dict[str, str] = field(default_factory=dict)
    # `write(path, force)`: the binary writes the run to `path` itself (`--export` / `-o`)
    write: Optional[Callable[[str, bool], None]] = None

    def text(self, key: str, args: List[str]) -> str:
        if key not in self.cache:
            self.cache[key] = self.run(args)
        return self.cache[key]


def _build(cls, data: Dict[str, Any], **extra):
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    values = {k: v for k, v in data.items() if k in names}
    values.update(extra)
    return cls(**values, json=data)


class _Answer:
    """What every answer does: its text report, its picture."""

    json: Dict[str, Any]
    svg: Optional[str]
    _rerun: Optional[_Rerun]

    def __getattr__(self, name: str) -> Any:
        # a `--json` field the dataclass does not name (a diagnosis's message figures, which
        # vary with the message's format; a field added later): the JSON's value. Only called
        # when normal lookup fails; `json` read from __dict__, so a half-built copy never loops
        data = self.__dict__.get("json")
        if isinstance(data, dict) and name in data and not name.startswith("_"):
            return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get("json") or {}))

    def __str__(self) -> str:
        """The same report as the command prints without ``--json``."""
        if self._rerun is None:
            return repr(self)
        return self._rerun.text("report", [])

    def _repr_html_(self) -> str:
        """The notebook's view: the stacked memory bar the binary draws (``--svg``)."""
        if self.svg:
            return f'<div class="grpofit">{self.svg}</div>'
        import html  # only here: its entity tables are the package's slowest import

        return f"<pre>{html.escape(str(self))}</pre>"


class _RunAnswer(_Answer):
    """An answer with a run the trainer can read: the run as TOML."""

    def to_toml(self) -> str:
        """The run as the trainer reads it (`--export` / `-o`), with grpofit's header."""
        if self._rerun is None:
            raise NoRun("this answer holds no run")
        return self._rerun.text("toml", ["toml"])

    def write(self, path, force: bool = False) -> None:
        """Writes the run to `path` as the binary's `--export` / `-o` does: the run file it came
        from edited in place (comments and other keys kept; a `.yaml` path: the recipe), into a
        temporary file beside `path`, then renamed over it, so `path` is never
        left empty or half written, even when it is the run file read. An existing `path` is
        refused (FileExists) unless `force=True`."""
        if self._rerun is None or self._rerun.write is None:
            raise NoRun("this answer holds no run")
        try:
            target = os.fspath(path)
        except TypeError:
            raise ArgumentTypeError(f"write: path: expected a str or a path, got {path!r}") from None
        if not force and os.path.lexists(target):
            raise FileExists(f"{target} exists: not overwritten (write(path, force=True) replaces it)")
        # a path the binary would read as a flag, or as `-` (standard output)
        if target.startswith("-"):
            target = os.path.join(os.curdir, target)
        self._rerun.write(target, force)


@dataclass(repr=False)
class Estimate(_RunAnswer):
    """`grpofit estimate --json`: where the GPU memory goes, and whether it fits."""

    capacity_bytes: int = 0
    total_bytes: int = 0
    fits: bool = False
    headroom_bytes: int = 0
    #: whether the run also keeps the headroom `fit` keeps (`headroom_kept_fraction`)
    fits_with_headroom: Optional[bool] = None
    headroom_kept_fraction: Optional[float] = None
    components: List[Dict[str, Any]] = field(default_factory=list)
    #: completions per optimizer step as the trainer runs them (Unsloth's raised micro-batch
    #: counted, unsloth#3572), and the prompts they are
    effective_batch: int = 0
    prompts_per_step: float = 0.0
    #: the run file's own two, only where Unsloth runs others (else None)
    effective_batch_as_written: Optional[int] = None
    prompts_per_step_as_written: Optional[float] = None
    running_micro_batch: int = 0
    training_peak_allocated_bytes: int = 0
    training_peak_reserved_bytes: int = 0
    vllm: Optional[Dict[str, Any]] = None
    peak_phase: str = ""
    phases: List[Dict[str, Any]] = field(default_factory=list)
    roles: List[Dict[str, Any]] = field(default_factory=list)
    host_memory_bytes: int = 0
    warnings: List[str] = field(default_factory=list)
    #: the attention the training step's memory assumed ("sdpa", "eager", "flash_attention_2"...),
    #: None on the unsloth stack
    attention: Optional[str] = None
    parameters: int = 0
    model_source: Any = None
    stored_weights: Any = None
    calibrated: Optional[str] = None
    versions: List[Dict[str, Any]] = field(default_factory=list)
    #: seconds per optimizer step by phase on the card (`gpu`), or None with `step_time_note`
    step_time: Optional[Dict[str, Any]] = None
    step_time_note: Optional[str] = None
    json: Dict[str, Any] = field(default_factory=dict)
    svg: Optional[str] = None
    _rerun: Optional[_Rerun] = field(default=None, compare=False)

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        step = ""
        if self.step_time:
            step = f", step ≈ {self.step_time['seconds']:.1f} s on {self.step_time['gpu']['name']}"
        return f"<grpofit.Estimate {verdict}: {_gib(self.total_bytes)} of {_gib(self.capacity_bytes)}{step}>"


@dataclass(repr=False)
class Fit(_RunAnswer):
    """`grpofit fit --json`: the nearest configuration that fits, or the floors hit."""

    outcome: str = ""
    changes: List[Dict[str, Any]] = field(default_factory=list)
    cost: Optional[float] = None
    floors: List[str] = field(default_factory=list)
    smallest_gpu_bytes: Optional[int] = None
    estimate: Optional[Estimate] = None
    #: `fastest=True`: the fastest run's step time, the nearest fit's seconds and the speed-up
    step_time: Optional[Dict[str, Any]] = None
    nearest_seconds: Optional[float] = None
    speedup: Optional[float] = None
    #: `fastest=True`: the nearest fit's own changes, and the calibration the times used
    nearest_changes: Optional[List[Dict[str, Any]]] = None
    step_time_calibrated: Optional[str] = None
    json: Dict[str, Any] = field(default_factory=dict)
    svg: Optional[str] = None
    _rerun: Optional[_Rerun] = field(default=None, compare=False)

    @property
    def fits(self) -> bool:
        """Whether a configuration that fits was found (it is the run of `to_toml()`)."""
        return self.outcome != "impossible"

    def to_toml(self) -> str:
        if not self.fits:
            raise NoRun("no configuration fits: there is no run to write")
        return super().to_toml()

    def write(self, path, force: bool = False) -> None:
        if not self.fits:
            raise NoRun("no configuration fits: there is no run to write")
        super().write(path, force)

    def __repr__(self) -> str:
        return f"<grpofit.Fit {self.outcome}: {len(self.changes)} change(s)>"


@dataclass(repr=False)
class Diagnosis(_Answer):
    """`grpofit diagnose --json`: the last out-of-memory message of a log, its cause, what to do."""

    format: str = ""
    verdict: str = ""
    causes: List[Dict[str, Any]] = field(default_factory=list)
    advice: List[str] = field(default_factory=list)
    likely_request: Optional[str] = None
    fit: Optional[Dict[str, Any]] = None
    requested_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    free_bytes: Optional[int] = None
    shortfall_bytes: Optional[int] = None
    message: str = ""
    json: Dict[str, Any] = field(default_factory=dict)
    svg: Optional[str] = None
    _rerun: Optional[_Rerun] = field(default=None, compare=False)

    @property
    def fits(self) -> Optional[bool]:
        """Whether the fit proposed for the failed run fits; None without a run (`config`/`preset`)."""
        if not self.fit:
            return None
        return self.fit.get("outcome") != "impossible"

    def __repr__(self) -> str:
        return f"<grpofit.Diagnosis {self.verdict}>"


@dataclass(repr=False)
class Check(_Answer):
    """`grpofit check --json`: a measured run (the callback's log) against its estimate."""

    run: str = ""
    log: str = ""
    steps: int = 0
    device: Optional[str] = None
    versions: Dict[str, str] = field(default_factory=dict)
    capacity_bytes: int = 0
    predicted: Dict[str, Any] = field(default_factory=dict)
    measured: Optional[Dict[str, Any]] = None
    nvml_peak: Optional[int] = None
    calibrated: Optional[str] = None
    rows: List[Dict[str, Any]] = field(default_factory=list)
    json: Dict[str, Any] = field(default_factory=dict)
    svg: Optional[str] = None
    _rerun: Optional[_Rerun] = field(default=None, compare=False)

    @property
    def fits(self) -> bool:
        """Whether the estimate of the run (its total, `predicted.used`) fits the log's GPU."""
        return int(self.predicted.get("used", 0)) <= self.capacity_bytes

    def __repr__(self) -> str:
        return f"<grpofit.Check {self.steps} step(s), {len(self.rows)} row(s)>"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"
