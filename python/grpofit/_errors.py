"""The errors the package raises: the binary's own messages, with their parts as attributes."""

from __future__ import annotations

import re
from typing import Optional

# `grpofit: FILE[:LINE]: MESSAGE`, as `LoadError`'s Display (crates/grpofit-core/src/config/error.rs) and main.rs write it
_WHERE = re.compile(r"^(?P<file>.*?)(?::(?P<line>\d+))?: (?P<message>.*)$", re.S)
# `` `[table] key = value` `` or `` `[table] key` `` inside the message
_KEY = re.compile(r"`\[(?P<table>[A-Za-z_]+)\] (?P<key>[^`= ]+)(?: = (?P<value>[^`]*))?`")


class GrpofitError(Exception):
    """The binary failed: not found, or an exit status it never gives for an answer."""


class ConfigError(GrpofitError, ValueError):
    """Bad input (exit 2): the message names the file, the line, the table, the key and the value.

    ``file``, ``line``, ``table``, ``key``, ``value`` and ``message`` are its parts, ``None`` where
    the message has none; ``run_toml`` is the run file the package wrote, when it wrote one.
    """

    def __init__(self, text: str, run_toml: Optional[str] = None):
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
        # clap's own errors (`error: unexpected argument ...`) name no file
        where = None if first.startswith("error:") else _WHERE.match(first)
        if where:
            self.file = where.group("file")
            self.line = int(where.group("line")) if where.group("line") else None
            self.message = where.group("message")
        key = _KEY.search(first)
        if key:
            self.table, self.key, self.value = key.group("table", "key", "value")


class DoesNotFit(GrpofitError):
    """The run does not fit (exit 3), raised only when the call asked for it (``check=True``).

    ``result`` is the answer (an ``Estimate`` or a ``Fit``), with its figures.
    """

    def __init__(self, result):
        super().__init__(str(result))
        self.result = result
