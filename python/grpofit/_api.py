"""The four calls: each runs the binary once with ``--json`` (and ``--svg`` for the picture) on
a run named by ``config`` / ``preset``, or on a run file written from the given tables."""

from __future__ import annotations

import json
import os
import contextlib
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _edit, _runfile
from ._binary import DOES_NOT_FIT, FITS, run
from ._errors import (
    ArgumentError,
    ArgumentTypeError,
    ConfigError,
    DoesNotFit,
    GrpofitNote,
    LogNotFound,
)
from ._results import Check, Diagnosis, Estimate, Fit, _build, _Rerun

PathLike = Union[str, "os.PathLike[str]"]

# what the error calls the run file the package writes, instead of its temporary path
_WRITTEN = "the run grpofit wrote from the arguments"


@dataclass
class _Source:
    """The run: `--preset NAME`, `--config FILE`, or the text of a run file to write."""

    flag: Optional[Tuple[str, str]] = None
    text: Optional[str] = None
    #: the folder of the user's run file whose text `text` is, edited: the run is written
    #: there (a hidden file, removed after), so its relative `model_config` still resolves
    folder: Optional[str] = None
    #: what the written run's header calls the run file read (never its temporary path)
    label: str = _WRITTEN
    #: the run written afresh (absolute `model_config`), where `folder` cannot be written
    fresh: Optional[str] = None

    @contextlib.contextmanager
    def files(self) -> Iterator[Tuple[List[str], Optional[tuple]]]:
        if self.text is None:
            yield (list(self.flag) if self.flag else []), None
            return
        with tempfile.TemporaryDirectory(prefix="grpofit-") as tmp:
            path, text = os.path.join(tmp, "run.toml"), self.text
            if self.folder is not None:
                try:
                    fd, path = tempfile.mkstemp(prefix=".grpofit-", suffix=".toml", dir=self.folder)
                    os.close(fd)
                except OSError:  # a folder it may not write: the run written afresh
                    path, text = os.path.join(tmp, "run.toml"), self.fresh or self.text
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                yield ["--config", path], (path, _WRITTEN, text)
            finally:
                if os.path.dirname(path) != tmp and os.path.exists(path):
                    os.remove(path)


# the packages whose version changes the estimate (`[grpofit] trl_version`...; the binary's
# `run::versions::Package`)
VERSIONED = ("trl", "unsloth", "transformers", "vllm")


STACKS = ("trl", "unsloth")


def _a_path(value: Any, what: str) -> str:
    """`value` as a path, or ArgumentTypeError naming `what`."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise ArgumentTypeError(f"{what}: expected a str or a path, got {type(value).__name__} {value!r}")


def _checked(config, preset, versions, stack) -> None:
    """The arguments' types and values the binary cannot be asked about: ArgumentError."""
    if config is not None and not isinstance(config, Mapping):
        _a_path(config, "config")
    if preset is not None:
        _a_path(preset, "preset")
    if versions is not None and not isinstance(versions, Mapping):
        raise ArgumentTypeError(f'versions: expected a dict such as {{"trl": "0.15.2"}}, got {versions!r}')
    if stack is not None and stack not in STACKS:
        raise ArgumentError(f"stack: {stack!r}: expected one of {', '.join(map(repr, STACKS))}")


def _source(config, preset, model, lora, grpo, versions, stack, common) -> _Source:
    """The run the arguments describe: a file or a preset as they are, or, when tables are
    given, a run file: the file's or the preset's tables (from the binary's `--export`), with
    each trainer object replacing its table, each dict updating it."""
    _checked(config, preset, versions, stack)
    if isinstance(config, Mapping):
        base = {str(k): dict(v) for k, v in config.items()}
        config = None
    elif not any(x is not None for x in (model, lora, grpo, versions, stack)):
        if config is not None:
            return _Source(flag=("--config", os.fspath(config)))
        if preset is not None:
            return _Source(flag=("--preset", str(preset)))
        return _Source()
    else:
        base = _base_tables(config, preset, common)
    tables = {name: dict(values) for name, values in base.items()}
    if _runfile.is_model_config(model):  # its adapter fields: the [lora] TRL builds from them
        model_kwargs, adapter = _runfile.split_model_config(model, lora is not None)
        tables["model"] = _runfile.table_of(model_kwargs, "model")
        if adapter is not None:
            tables["lora"] = _runfile.table_of(adapter, "lora")
    objects = (("model", None if _runfile.is_model_config(model) else model), ("lora", lora), ("grpo", grpo))
    for name, given in objects:
        if given is None:
            continue
        kwargs = _runfile.table_of(_runfile.keyword_arguments(given, name), name)
        if isinstance(given, Mapping):
            tables.setdefault(name, {}).update(kwargs)
        else:
            tables[name] = kwargs
    stack = stack or _runfile.infer_stack(model, lora)
    if stack:
        tables.setdefault("grpofit", {})["stack"] = stack
    for package, version in (versions or {}).items():
        if package not in VERSIONED:
            raise ConfigError(
                f"versions: `{package}`: grpofit takes the versions of {', '.join(VERSIONED)} "
                "(`[grpofit] <package>_version`; `grpofit env` shows what it detects)"
            )
        tables.setdefault("grpofit", {})[f"{package}_version"] = str(version)
    if config is not None:  # the user's file, its comments and other lines kept
        text = _edited_file(os.fspath(config), tables)
        if text is not None:
            folder = os.path.dirname(os.path.abspath(os.fspath(config)))
            fresh = _runfile.to_toml(tables)
            return _Source(text=text, folder=folder, label=os.fspath(config), fresh=fresh)
    return _Source(text=_runfile.to_toml(tables))


def _edited_file(path: str, tables: dict) -> Optional[str]:
    """The run file `path` edited to read as `tables` (`_edit.edited`), its own relative
    `model_config` kept as written; None where that cannot be done (then written afresh)."""
    tomllib = _tomllib()
    with open(path, encoding="utf-8") as f:  # read once already (_read_run_file)
        text = f.read()
    own = tomllib.loads(text).get("grpofit", {})
    wanted = {name: dict(values) for name, values in tables.items()}
    written = own.get("model_config")
    if isinstance(written, str) and not os.path.isabs(written):
        absolute = os.path.join(os.path.dirname(os.path.abspath(path)), written)
        if wanted.get("grpofit", {}).get("model_config") == absolute:
            wanted["grpofit"]["model_config"] = written  # resolved beside the file, as before
    return _edit.edited(text, wanted, tomllib)


def _tomllib():
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ConfigError(
                "tables on top of a run file or a preset need Python 3.11 (tomllib) or the tomli package"
            ) from None
    return tomllib


def _base_tables(config, preset, common) -> dict:
    if config is None and preset is None:
        return {}
    tomllib = _tomllib()
    if config is not None:
        tables = _read_run_file(os.fspath(config), tomllib, common)
        # `model_config` is read beside the run file: the written one lives elsewhere
        own = tables.get("grpofit", {})
        if isinstance(own.get("model_config"), str) and not os.path.isabs(own["model_config"]):
            folder = os.path.dirname(os.path.abspath(os.fspath(config)))
            own["model_config"] = os.path.join(folder, own["model_config"])
        return tables
    # the preset as the binary exports it (`estimate --export -` prints the run, not the table)
    no_gpu = [] if "--no-gpu" in common else ["--no-gpu"]
    done = run(["estimate", "--preset", str(preset), "--export", "-", *no_gpu, *common])
    return tomllib.loads(done.stdout)


def _read_run_file(path: str, tomllib, common) -> dict:
    """The tables of the run file `path`, under the model/lora/grpo given on top of it. A TRL
    recipe (`.yaml`) holds flat keys, not these tables: ArgumentError. A file the binary cannot
    read, or that is not TOML: the binary's own ConfigError (file, line), not Python's error."""
    if path.lower().endswith((".yaml", ".yml")):
        raise ArgumentError(
            f"config={path!r}: a TRL recipe holds flat keys, not the model/lora/grpo tables: "
            "edit the recipe and pass it alone (`estimate(config=...)`), or pass a run file"
        )
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):  # missing, unreadable, not UTF-8, not TOML (TOMLDecodeError)
        # the binary reads it and says why it cannot, naming the file and the line
        no_gpu = [] if "--no-gpu" in common else ["--no-gpu"]
        run(["estimate", "--config", path, "--export", "-", *no_gpu, *common])
        raise ConfigError(f"{path}: cannot read the run file") from None


def _common(gpu_mem, no_gpu: bool, offline: bool) -> List[str]:
    args = []
    if isinstance(gpu_mem, bool) or not isinstance(gpu_mem, (int, str, type(None))):
        raise ArgumentTypeError(f'gpu_mem: expected bytes (an int) or a size such as "24GiB", got {gpu_mem!r}')
    if gpu_mem is not None:
        args += ["--gpu-mem", f"{gpu_mem}B" if isinstance(gpu_mem, int) else str(gpu_mem)]
    if no_gpu:
        args.append("--no-gpu")
    if offline:
        args.append("--offline")
    return args


def _gpu(gpu: Optional[str]) -> List[str]:
    return ["--gpu", str(gpu)] if gpu is not None else []


def _relabel(path: str, temporary: str, label: str) -> None:
    """The run the binary wrote to `path`, its header naming `label` instead of the temporary
    run file it read: rewritten beside `path` and renamed over it, once it reads back as the
    same tables (only a comment changes), else left as the binary wrote it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if temporary not in text or not path.endswith(".toml"):
        return
    fixed = text.replace(temporary, label)
    tomllib = _tomllib()
    if tomllib.loads(fixed) != tomllib.loads(text):
        return
    fd, tmp = tempfile.mkstemp(prefix=".grpofit-", suffix=".toml", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(fixed)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


_NOTE = "grpofit: note: "


def _say_notes(stderr: str, written: Optional[tuple]) -> None:
    """The binary's notes on standard error (`grpofit: note: ...`: TRL's `lora_dropout` default
    a recipe leaves in force, the prompt length it assumes), which the JSON does not hold: a
    notebook shows nothing of a subprocess's standard error, so each becomes a warning."""
    for line in stderr.splitlines():
        if line.startswith(_NOTE):
            note = line[len(_NOTE) :]
            if written:
                note = note.replace(written[0], written[1])
            warnings.warn(f"grpofit: {note}", GrpofitNote, stacklevel=5)


def _call(
    command: Sequence[str],
    source: _Source,
    common: List[str],
    json_args: Sequence[str] = ("--json",),
    stdin: Optional[str] = None,
    answers: Sequence[int] = (FITS, DOES_NOT_FIT),
    svg: bool = True,
    run_flag: Optional[str] = None,
):
    """Runs `command` with `--json` (and `--svg`), returning (JSON, SVG, exit status, rerun).
    The rerun asks again without `--json`: the text report, or (key "toml") the run, written
    with `run_flag` (`--export` / `-o`) to a file."""

    def once(extra: Sequence[str], with_svg: bool):
        with source.files() as (args, written), tempfile.TemporaryDirectory(prefix="grpofit-") as tmp:
            picture = os.path.join(tmp, "bar.svg")
            out = os.path.join(tmp, "out.toml")
            if extra == ["toml"]:
                tail = [run_flag or "--export", out, "--force"]
            else:
                tail = list(extra) + (["--svg", picture] if with_svg else [])
            done = run([*command, *args, *common, *tail], stdin=stdin, answers=answers, written=written)
            stdout = done.stdout
            if written:  # the temporary run file, named for what it is
                stdout = stdout.replace(written[0], written[1])
            if extra == list(json_args):
                _say_notes(done.stderr, written)
            drawn = None
            if with_svg and os.path.exists(picture):
                with open(picture, encoding="utf-8") as f:
                    drawn = f.read()
            if extra == ["toml"]:
                with open(out, encoding="utf-8") as f:
                    text = f.read()
                return text.replace(written[0], source.label) if written else text, None, done.returncode
            return stdout, drawn, done.returncode

    def write(path: str, force: bool) -> None:
        """The binary writes the run to `path` itself: its atomic write, its refusal of an
        existing file without `--force`, the run file it read edited in place."""
        with source.files() as (args, written):
            force_flag = ["--force"] if force else []
            tail = [run_flag or "--export", path, *force_flag]
            run([*command, *args, *common, *tail], stdin=stdin, answers=answers, written=written)
            if written:
                _relabel(path, written[0], source.label)

    stdout, drawn, code = once(list(json_args), svg)

    def again(extra: List[str]) -> str:
        return once(extra, False)[0]

    return json.loads(stdout), drawn, code, _Rerun(again, write=write)


def estimate(
    config: Optional[Union[PathLike, Mapping[str, Any]]] = None,
    preset: Optional[str] = None,
    *,
    gpu_mem: Optional[Union[str, int]] = None,
    model: Any = None,
    lora: Any = None,
    grpo: Any = None,
    versions: Optional[Mapping[str, str]] = None,
    stack: Optional[str] = None,
    no_gpu: bool = False,
    offline: bool = False,
    check: bool = False,
    gpu: Optional[str] = None,
) -> Estimate:
    """Where the GPU memory of a run goes (`grpofit estimate --json`).

    The run: `config` (a run file's path, or its tables as a dict) or `preset` (`"24gb"`), and
    on top of it `model` / `lora` / `grpo`: dicts update the table, trainer objects (a TRL
    `ModelConfig`, a PEFT `LoraConfig`, a `GRPOConfig`) replace it with what they set.
    `versions={"trl": "0.15.2", "vllm": "0.8.5"}`: the trainer versions the run uses (else the
    ones installed where the binary runs, else grpofit's targets). `stack`: "trl" or "unsloth" (else the
    file's, or what the objects are). `gpu_mem`: the capacity (`"24GiB"`, or bytes), else the
    GPU NVML detects (unless `no_gpu`), else the file's. `offline`: never ask the Hugging Face
    Hub. `check=True` raises DoesNotFit when the run does not fit. Bad input raises ConfigError.
    `gpu`: the card the step is timed on (`"H100"`, `"A10G"`; `--gpu`), else the detected one,
    else the file's `[grpofit] gpu`; `step_time` holds the seconds per step by phase.
    """
    common = _common(gpu_mem, no_gpu, offline) + _gpu(gpu)
    source = _source(config, preset, model, lora, grpo, versions, stack, common)
    data, drawn, code, rerun = _call(["estimate"], source, common, run_flag="--export")
    result = _build(Estimate, data, svg=drawn, _rerun=rerun)
    if check and code == DOES_NOT_FIT:
        raise DoesNotFit(result)
    return result


def fit(
    config: Optional[Union[PathLike, Mapping[str, Any]]] = None,
    preset: Optional[str] = None,
    *,
    headroom: Optional[float] = None,
    gpu_mem: Optional[Union[str, int]] = None,
    model: Any = None,
    lora: Any = None,
    grpo: Any = None,
    versions: Optional[Mapping[str, str]] = None,
    stack: Optional[str] = None,
    no_gpu: bool = False,
    offline: bool = False,
    check: bool = False,
    gpu: Optional[str] = None,
    fastest: bool = False,
) -> Fit:
    """The nearest configuration that fits (`grpofit fit --json`), keeping `headroom` percent
    of the capacity free (the binary's default when None). The run and the other arguments as
    in `estimate`. `to_toml()` / `write(path)`: the fitted run. `check=True` raises DoesNotFit
    when nothing fits. `fastest=True` (`fit --fastest`): of the runs that fit, the one with the
    least predicted seconds a step, moving only throughput knobs (`outcome` "fastest", each
    change with its `seconds_saved` and `bytes_saved`, `step_time`, `speedup`); `gpu` as in
    `estimate`."""
    common = _common(gpu_mem, no_gpu, offline) + _gpu(gpu)
    source = _source(config, preset, model, lora, grpo, versions, stack, common)
    if headroom is not None and (isinstance(headroom, bool) or not isinstance(headroom, (int, float))):
        raise ArgumentTypeError(f"headroom: expected a percentage (a number), got {headroom!r}")
    command = ["fit"] + (["--headroom", str(headroom)] if headroom is not None else [])
    if fastest:
        command.append("--fastest")
    data, drawn, code, rerun = _call(command, source, common, run_flag="-o")
    inner = data.get("estimate")
    result = _build(
        Fit,
        data,
        estimate=_build(Estimate, inner) if inner is not None else None,
        svg=drawn,
        _rerun=rerun,
    )
    if check and code == DOES_NOT_FIT:
        raise DoesNotFit(result)
    return result


# a single word, or a name ending as a log file's does: a path, never an out-of-memory message
# (PyTorch's and vLLM's are sentences that end in a period or a number)
_LOG_NAME = re.compile(r"\S+|.*\.(log|txt|out|err|jsonl|json)", re.I | re.S)


def _existing(path: str, what: str) -> str:
    if not os.path.exists(path):
        raise LogNotFound(f"{what}: {path}: no such file")
    return path


def _log_argument(text_or_path: Any) -> Tuple[str, Optional[str]]:
    """(path, None) for a file, else ("-", text) for the text itself. A path object, or a
    one-line str that is a single word or ends in .log/.txt/.out/.err/.jsonl/.json, is a path:
    LogNotFound when there is no such file, rather than a text without an OOM message."""
    if isinstance(text_or_path, os.PathLike):
        return _existing(os.fspath(text_or_path), "diagnose"), None
    if not isinstance(text_or_path, str):
        raise ArgumentTypeError(f"diagnose: expected a log's path or its text, got {text_or_path!r}")
    text = text_or_path.strip()
    if "\n" not in text and len(text) < 4096 and os.path.isfile(text):
        return text, None
    if "\n" not in text and _LOG_NAME.fullmatch(text):
        return _existing(text, "diagnose"), None
    return "-", text_or_path


def diagnose(
    text_or_path: Any,
    config: Optional[Union[PathLike, Mapping[str, Any]]] = None,
    preset: Optional[str] = None,
    *,
    gpu_mem: Optional[Union[str, int]] = None,
    model: Any = None,
    lora: Any = None,
    grpo: Any = None,
    versions: Optional[Mapping[str, str]] = None,
    stack: Optional[str] = None,
    offline: bool = False,
) -> Diagnosis:
    """The last out-of-memory message of a log (its path, or its text): the cause and what to
    do (`grpofit diagnose --json`). With the run that failed (`config`, `preset`, tables as in
    `estimate`): the tensor that made the request and the nearest configuration that fits."""
    common = _common(gpu_mem, False, offline)
    source = _source(config, preset, model, lora, grpo, versions, stack, common)
    log, stdin = _log_argument(text_or_path)
    data, drawn, _, rerun = _call(["diagnose", log], source, common, stdin=stdin, answers=(FITS,))
    # the picture: the fit proposed for the failed run, when one is
    return _build(Diagnosis, data, svg=drawn, _rerun=rerun)


def check(
    log: Any,
    config: Optional[Union[PathLike, Mapping[str, Any]]] = None,
    preset: Optional[str] = None,
    *,
    gpu_mem: Optional[Union[str, int]] = None,
    model: Any = None,
    lora: Any = None,
    grpo: Any = None,
    versions: Optional[Mapping[str, str]] = None,
    stack: Optional[str] = None,
    offline: bool = False,
) -> Check:
    """A measured run against its estimate (`grpofit check --json`): `log` is the JSON-lines
    log the callback (or `grpofit run`) wrote: its path, or its records (a list of dicts). The
    run as in `estimate`; the GPU's memory is the log's unless `gpu_mem`."""
    common = _common(gpu_mem, False, offline)
    source = _source(config, preset, model, lora, grpo, versions, stack, common)
    if not isinstance(log, (list, tuple)):
        path = _existing(_a_path(log, "check: log"), "check")
        data, drawn, _, rerun = _call(["check", path], source, common, answers=(FITS,))
        return _build(Check, data, svg=drawn, _rerun=rerun)
    with tempfile.TemporaryDirectory(prefix="grpofit-log-") as tmp:
        path = os.path.join(tmp, "grpofit-run.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(record) + "\n" for record in log)
        try:
            data, drawn, _, rerun = _call(["check", path], source, common, answers=(FITS,))
        except ConfigError as e:
            if path not in e.text:
                raise
            # the package's temporary file: named for what it is, and no `file`
            raise ConfigError(e.text.replace(path, "the log records given"), run_toml=e.run_toml) from None
        result = _build(Check, data, svg=drawn, _rerun=rerun)
        # the text report now, while the records' file is there
        str(result)
    return result
