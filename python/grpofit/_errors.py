"""The errors the package raises: the binary's own messages, with their parts as attributes."""

from __future__ import annotations

import re
from typing import Mapping, Optional

# after the file: `:LINE: MESSAGE` or `: MESSAGE`, as `LoadError`'s Display
# (crates/grpofit-core/src/config/error.rs) and main.rs write it
_AFTER_FILE = re.compile(r"^(?::(?P<line>\d+))?: (?P<message>.*)$", re.S)
# `` `[table] key = value` `` or `` `[table] key` `` inside the message
_KEY = re.compile(r"`\[(?P<table>[A-Za-z_]+)\] (?P<key>[^`= ]+)(?: = (?P<value>[^`]*))?`")

# how to get the binary, named by every error that cannot find or run it
INSTALL = "`pip install grpofit`"


class GrpofitError(Exception):
    """Every error the package raises; itself: the binary failed with an exit status it never
    gives for an answer."""


class BinaryNotFound(GrpofitError, FileNotFoundError):
    """The grpofit binary is not installed where the package looks, or cannot be run; the
    message says how to install it."""


class ArgumentError(GrpofitError, ValueError):
    """An argument the package cannot pass on: the message names the argument and its value."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a type the package cannot read (also a ``TypeError``)."""


class LogNotFound(GrpofitError, FileNotFoundError):
    """The log named by path does not exist (``diagnose``, ``check``)."""


class NoRun(GrpofitError, ValueError):
    """The answer holds no run to write: a diagnosis, or a fit that found none."""


class FileExists(GrpofitError, FileExistsError):
    """``write(path)`` found `path` there and was not asked to replace it (``force=True``)."""


class ConfigError(GrpofitError, ValueError):
    """Bad input (exit 2): the message names the file, the line, the table, the key and the value.

    ``file``, ``line``, ``table``, ``key``, ``value`` and ``message`` are its parts, ``None`` where
    the message has none. ``file`` is a path the binary was given (the run file, a log, an
    output) and nothing else: ``None`` for a preset, for a message that names no file, and for
    the run the package wrote from the arguments, whose text is ``run_toml``.
    """

    def __init__(
        self,
        text: str,
        run_toml: Optional[str] = None,
        files: Optional[Mapping[str, Optional[str]]] = None,
    ):
        """`files`: how the binary may name each file it was given, and that file's path
        (``None``: a file that is not the user's, such as the package's temporary run)."""
        super().__init__(text)
        self.text = text
        self.run_toml = run_toml
        self.file: Optional[str] = None
        self.line: Optional[int] = None
        self.table: Optional[str] = None
        self.key: Optional[str] = None
        self.value: Optional[str] = None
        self.message = text
        first = text.strip().splitlines()[0] if text.strip() else ""
        # the longest name first: `run.toml` must not match `run.toml.bak`
        files = files or {}
        for name in sorted(files, key=len, reverse=True):
            if not name or not first.startswith(name):
                continue
            after = _AFTER_FILE.match(first[len(name) :])
            if after:
                self.file = files[name]
                self.line = int(after.group("line")) if after.group("line") else None
                self.message = after.group("message")
                break
            if first[len(name) : len(name) + 1] == " ":  # `run.toml exists: not overwritten`
                self.file = files[name]
                break
        key = _KEY.search(first)
        if key:
            self.table, self.key, self.value = key.group("table", "key", "value")


class GrpofitNote(UserWarning):
    """A note of the binary's on the run (its standard error's `grpofit: note:` lines: a trainer
    default the run leaves in force, a length it assumes), said as a Python warning."""


class DoesNotFit(GrpofitError):
    """The run does not fit (exit 3), raised only when the call asked for it (``check=True``).

    ``result`` is the answer (an ``Estimate`` or a ``Fit``), with its figures.
    """

    def __init__(self, result):
        super().__init__(str(result))
        self.result = result
