"""The user's run file with the tables given on top of it, edited as text: only the keys that
change are rewritten, added or removed, every comment and other line kept, so that writing the
run back (`write(path)`, which the binary does by editing the text it read) keeps them too.

Only what can be checked is done: a key whose value spans lines, a dotted key, a table written
twice or a header of another form leaves the edit undone (None), and the edited text must read
back (tomllib) as exactly the tables wanted, else None: the caller then writes the tables afresh.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from . import _runfile

_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=(.*)$")

Tables = Dict[str, Dict[str, Any]]


def _comment(rest: str, tomllib) -> str:
    """The trailing comment of a one-line value `rest` (`` # ...`` with its spacing), or ""."""
    for i in range(len(rest) - 1, -1, -1):
        if rest[i] != "#":
            continue
        try:
            tomllib.loads(f"x ={rest[:i]}")
        except ValueError:
            continue
        return " " * (len(rest[:i]) - len(rest[:i].rstrip())) + rest[i:]
    return ""


def _one_line(rest: str, tomllib) -> bool:
    try:
        tomllib.loads(f"x ={rest}")
    except ValueError:
        return False
    return True


def edited(text: str, wanted: Tables, tomllib) -> Optional[str]:
    """`text` (a run file) edited so that it reads as `wanted`, or None where it cannot be."""
    try:
        have = tomllib.loads(text)
    except ValueError:
        return None
    lines = text.splitlines()
    table: Optional[str] = None
    seen: List[str] = []
    last_key: Dict[str, int] = {}  # table -> index of its last key line (or its header)
    out: List[Optional[str]] = list(lines)
    for i, line in enumerate(lines):
        header = _HEADER.match(line)
        if header:
            table = header.group(1)
            if table in seen:
                return None
            seen.append(table)
            last_key[table] = i
            continue
        if _ANY_HEADER.match(line):
            return None  # [[array]] or a dotted header: not edited here
        key = _KEY.match(line)
        if table is None or not key:
            continue
        name, rest = key.group(1), key.group(2)
        last_key[table] = i
        if name in wanted.get(table, {}) and wanted[table][name] == have.get(table, {}).get(name):
            continue
        if not _one_line(rest, tomllib):
            return None
        if name not in wanted.get(table, {}):
            out[i] = None  # a key the trainer object no longer sets
        else:
            value = _runfile.to_toml({table: {name: wanted[table][name]}}).splitlines()[-1]
            out[i] = value + _comment(rest, tomllib)
    additions: Dict[int, List[str]] = {}
    tail: List[str] = []
    for table, keys in wanted.items():
        new = [
            _runfile.to_toml({table: {k: v}}).splitlines()[-1]
            for k, v in keys.items()
            if k not in have.get(table, {})
        ]
        if table in last_key:
            additions.setdefault(last_key[table], []).extend(new)
        elif keys:
            tail += ["", f"[{table}]"] + new
    result: List[str] = []
    for i, line in enumerate(out):
        if line is not None:
            result.append(line)
        result += additions.get(i, [])
    text_out = "\n".join(result + tail) + "\n"
    try:
        if tomllib.loads(text_out) != wanted:
            return None
    except ValueError:
        return None
    return text_out
