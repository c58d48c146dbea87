#!/usr/bin/env python3
"""grpofit's one version number: `[workspace.package] version` in Cargo.toml. Both crates take
it (`version.workspace = true`), the binary's dependency on the core pins it (`=X`), maturin
gives it to the wheel (pyproject.toml's `dynamic = ["version"]`), and the Python package reads it
from the checkout or the installed wheel.

    tools/release/version.py          # prints the version
    tools/release/version.py --check  # and checks every place agrees (exit 1 naming the one that does not)
    tools/release/version.py --set X  # sets it everywhere (Cargo.toml, Cargo.lock, CHANGELOG.md's section)
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python before 3.11
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
CARGO = ROOT / "Cargo.toml"
CORE = ROOT / "crates" / "grpofit-core" / "Cargo.toml"
LOCK = ROOT / "Cargo.lock"
PYPROJECT = ROOT / "pyproject.toml"
CHANGELOG = ROOT / "CHANGELOG.md"
# a version as both Cargo (SemVer) and PyPI (PEP 440) read it the same way
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
# the binary's dependency on the core, with its version
DEPENDENCY = re.compile(r'^(grpofit-core = \{ path = "crates/grpofit-core", version = "=)([^"]+)(" \})$', re.M)
# the version line inside [workspace.package]
WORKSPACE = re.compile(r'(\[workspace\.package\]\n(?:(?!\[).*\n)*?version = ")([^"]+)(")')


def version() -> str:
    return tomllib.loads(CARGO.read_text())["workspace"]["package"]["version"]


def problems(v: str, release: bool) -> list[str]:
    """Each place that disagrees with `v`, as a sentence."""
    found = []
    if not SEMVER.match(v):
        found.append(f"Cargo.toml: [workspace.package] version = {v!r}: not MAJOR.MINOR.PATCH")
    cargo = tomllib.loads(CARGO.read_text())
    dep = cargo["dependencies"]["grpofit-core"]
    if dep.get("version") != f"={v}":
        found.append(f'Cargo.toml: [dependencies] grpofit-core version = {dep.get("version")!r}, not "={v}"')
    for manifest in (CARGO, CORE):
        package = tomllib.loads(manifest.read_text())["package"]
        if package.get("version") != {"workspace": True}:
            found.append(f"{manifest.relative_to(ROOT)}: [package] version is not `version.workspace = true`")
    locked = {p["name"]: p["version"] for p in tomllib.loads(LOCK.read_text())["package"]}
    for name in ("grpofit", "grpofit-core"):
        if locked.get(name) != v:
            found.append(f"Cargo.lock: {name} {locked.get(name)}, not {v} (cargo update --workspace)")
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    if "version" in project or "version" not in project.get("dynamic", []):
        found.append('pyproject.toml: [project] must take its version from Cargo.toml (dynamic = ["version"])')
    if release and f"## [{v}]" not in CHANGELOG.read_text():
        found.append(f"CHANGELOG.md: no `## [{v}]` section (tools/release/version.py --set {v} makes one)")
    return found


def set_version(new: str) -> None:
    if not SEMVER.match(new):
        sys.exit(f"version.py: {new!r}: expected MAJOR.MINOR.PATCH")
    text = CARGO.read_text()
    text, n = WORKSPACE.subn(lambda m: m.group(1) + new + m.group(3), text, count=1)
    text, m = DEPENDENCY.subn(lambda g: g.group(1) + new + g.group(3), text, count=1)
    if (n, m) != (1, 1):
        sys.exit("version.py: Cargo.toml: the workspace version or the grpofit-core dependency is not where expected")
    CARGO.write_text(text)
    subprocess.run(["cargo", "update", "--workspace", "--offline"], cwd=ROOT, check=True)
    log = CHANGELOG.read_text()
    if f"## [{new}]" not in log:
        today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        log = log.replace("## [Unreleased]\n", f"## [Unreleased]\n\n## [{new}] - {today}\n", 1)
        CHANGELOG.write_text(log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check every place agrees")
    parser.add_argument("--release", action="store_true", help="with --check: CHANGELOG.md has the version's section")
    parser.add_argument("--set", metavar="X", help="set the version everywhere")
    args = parser.parse_args()
    if args.set:
        set_version(args.set)
    v = version()
    if args.check or args.set:
        found = problems(v, args.release)
        for p in found:
            print(f"version.py: {p}", file=sys.stderr)
        if found:
            return 1
    print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
