"""Finding the grpofit binary and running it: every answer comes from its ``--json``."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sysconfig
from typing import Optional, Sequence

from ._errors import ConfigError, GrpofitError

# the binary's exit codes (src/output.rs)
FITS = 0
NO_GPU = 1
BAD_INPUT = 2
DOES_NOT_FIT = 3

_NAME = "grpofit.exe" if os.name == "nt" else "grpofit"


@functools.lru_cache(maxsize=None)
def binary() -> str:
    """The grpofit binary: $GRPOFIT_BINARY, else the one the wheel installed beside this
    interpreter's scripts (also the user scheme's, for `pip install --user`), else PATH's."""
    named = os.environ.get("GRPOFIT_BINARY")
    if named:
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
    raise GrpofitError(
        "the grpofit binary was not found beside this Python's scripts nor on PATH: "
        "`pip install grpofit` (or a built wheel), `cargo install --path .`, or set $GRPOFIT_BINARY"
    )


def run(
    args: Sequence[str],
    stdin: Optional[str] = None,
    answers: Sequence[int] = (FITS, DOES_NOT_FIT),
    written: Optional[tuple] = None,
) -> subprocess.CompletedProcess:
    """Runs the binary with `args`; exit 2 raises ConfigError, any status not in `answers` raises
    GrpofitError. `written`: (path, name, text) of the run file the caller wrote: the error names
    it `name` rather than by its temporary path, and carries its text."""
    done = subprocess.run(
        [binary(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        check=False,
    )
    if done.returncode in answers:
        return done
    message = done.stderr.strip()
    message = message[len("grpofit: ") :] if message.startswith("grpofit: ") else message
    if done.returncode == BAD_INPUT:
        if written:
            path, name, text = written
            raise ConfigError(message.replace(path, name), run_toml=text)
        raise ConfigError(message)
    raise GrpofitError(f"grpofit {' '.join(args)}: exit {done.returncode}: {message}")
