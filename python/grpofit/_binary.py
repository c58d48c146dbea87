"""Finding the grpofit binary and running it: every answer comes from its ``--json``."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sysconfig
from typing import Dict, Optional, Sequence

from ._errors import INSTALL, BinaryNotFound, ConfigError, GrpofitError

# the binary's exit codes (src/output.rs)
FITS = 0
NO_GPU = 1
BAD_INPUT = 2
DOES_NOT_FIT = 3

_NAME = "grpofit.exe" if os.name == "nt" else "grpofit"


@functools.lru_cache(maxsize=None)
def binary() -> str:
    """The grpofit binary: $GRPOFIT_BINARY, else the one the wheel installed beside this
    interpreter's scripts (also the user scheme's, for `pip install --user`), else PATH's.
    BinaryNotFound, saying how to install it, when there is none."""
    named = os.environ.get("GRPOFIT_BINARY")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise BinaryNotFound(
                f"$GRPOFIT_BINARY is {named!r}, which is not an executable file: "
                f"unset it to use the installed one, or install grpofit: {INSTALL}"
            )
        return named
    schemes = [None, f"{os.name}_user"]
    for scheme in schemes:
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidate = os.path.join(scripts, _NAME)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(_NAME)
    if found:
        return found
    raise BinaryNotFound(
        "the grpofit binary was not found beside this Python's scripts nor on PATH: "
        f"{INSTALL} installs it with this package (or `cargo install --path .` in a checkout, "
        "or set $GRPOFIT_BINARY to its path)"
    )


# the flags whose value is a file the binary may name at the start of a message
_FILE_FLAGS = ("--config", "-o", "--output", "--export", "--export-dir", "--svg", "--launch")
# the commands whose first argument is a log file
_LOG_COMMANDS = ("diagnose", "check", "calibrate")
# the flags the package passes for its keyword arguments: an error that opens with one is said
# in the caller's words (`gpu_mem='24': add a unit`, not `--gpu-mem 24: add a unit`)
_ARGUMENTS = {"--gpu-mem": "gpu_mem", "--gpu": "gpu"}


def _in_callers_words(message: str, args: Sequence[str]) -> str:
    for flag, name in _ARGUMENTS.items():
        if flag in args[:-1]:
            value = args[list(args).index(flag) + 1]
            opening = f"{flag} {value}:"
            if message.startswith(opening):
                return f"{name}={value!r}:" + message[len(opening) :]
    return message


def _files(args: Sequence[str]) -> Dict[str, Optional[str]]:
    """The files `args` hand the binary, each as the binary names it: what a ConfigError's
    `file` may be."""
    files: Dict[str, Optional[str]] = {}
    for i, arg in enumerate(args[:-1]):
        value = args[i + 1]
        named_file = arg in _FILE_FLAGS or (arg == "--preset" and os.path.isfile(value))
        if named_file or (arg in _LOG_COMMANDS and i == 0 and value != "-"):
            files[value] = value
    return files


def run(
    args: Sequence[str],
    stdin: Optional[str] = None,
    answers: Sequence[int] = (FITS, DOES_NOT_FIT),
    written: Optional[tuple] = None,
) -> subprocess.CompletedProcess:
    """Runs the binary with `args`; exit 2 raises ConfigError, any status not in `answers` raises
    GrpofitError. `written`: (path, name, text) of the run file the caller wrote: the error names
    it `name` rather than by its temporary path, and carries its text."""
    command = binary()
    try:
        done = subprocess.run(
            [command, *args],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            check=False,
        )
    except OSError as e:  # removed, not executable, or not a program for this machine
        raise BinaryNotFound(f"{command} cannot be run ({e.strerror or e}): {INSTALL}") from e
    if done.returncode in answers:
        return done
    message = done.stderr.strip()
    message = message[len("grpofit: ") :] if message.startswith("grpofit: ") else message
    if done.returncode == BAD_INPUT:
        message = _in_callers_words(message, args)
        files = _files(args)
        if written:
            path, name, text = written
            files.pop(path, None)
            files[name] = None  # the package's temporary run: not a file of the user's
            raise ConfigError(message.replace(path, name), run_toml=text, files=files)
        raise ConfigError(message, files=files)
    raise GrpofitError(f"grpofit {' '.join(args)}: exit {done.returncode}: {message}")
