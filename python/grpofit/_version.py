"""The package's version: the workspace's (Cargo.toml `[workspace.package] version`, which
maturin gives the wheel), read from the checkout this package sits in, else from the installed
distribution's metadata."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

# `version = "X"` inside `[workspace.package]`, up to the next table
_WORKSPACE = re.compile(r"^\[workspace\.package\]\s*$(?P<body>.*?)(?=^\[|\Z)", re.M | re.S)
_VERSION = re.compile(r'^version\s*=\s*"(?P<version>[^"]+)"\s*$', re.M)


def from_checkout(root: Path) -> Optional[str]:
    """The workspace version of the checkout at `root`, if `root/Cargo.toml` is grpofit's."""
    try:
        text = (root / "Cargo.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    table = _WORKSPACE.search(text)
    found = _VERSION.search(table.group("body")) if table else None
    if not found or 'name = "grpofit"' not in text:
        return None
    return found.group("version")


def version() -> str:
    """The checkout's version when this package is imported from one (python/grpofit in a
    grpofit repository), else the installed distribution's."""
    checkout = from_checkout(Path(__file__).resolve().parents[2])
    if checkout:
        return checkout
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("grpofit")
    except PackageNotFoundError:
        from ._errors import GrpofitError

        raise GrpofitError(
            "grpofit's version: this package is neither in a grpofit checkout nor installed "
            "(`pip install grpofit`)"
        ) from None
