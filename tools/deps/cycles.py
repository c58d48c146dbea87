#!/usr/bin/env python3
"""Import circles between the modules of each crate: fails (exit 1) when one exists.

A module is a source file. Module A uses module B when A's code names a path into B
(`crate::b::...`, `super::b`, `self::b`, or `grpofit_core::b` for the binary's view of the core
is not counted: crates cannot form circles with each other). Test modules (`#[cfg(test)]` blocks
and `tests.rs` files) are left out: a test may use anything.

    python3 tools/deps/cycles.py            # list circles per crate, exit 1 if any
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CRATES = {"grpofit": ROOT / "src", "grpofit-core": ROOT / "crates" / "grpofit-core" / "src"}
GROUP = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)*)::\{([^{}]*)\}")
PATH = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)+)")


def module_of(src: Path, f: Path) -> tuple:
    rel = f.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(text: str) -> str:
    """The text without `#[cfg(test)] mod ... { ... }` blocks."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def graph(src: Path) -> dict:
    files = [f for f in src.rglob("*.rs") if f.name != "tests.rs" and "tests" not in f.parts]
    mods = {module_of(src, f): f for f in files}
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        text = strip_tests(f.read_text())
        text = re.sub(r"//[^\n]*", "", text)
        # `super` from a mod.rs is the parent of the folder's module
        base = m if f.name in ("mod.rs", "lib.rs", "main.rs") else m[:-1] + (m[-1],)
        # `use super::{a, b::c}`: each item a path of its own
        text = GROUP.sub(
            lambda g: " ".join(
                f"{g.group(1)}{g.group(2) or ''}::{item.strip()}"
                for item in g.group(3).split(",")
                if item.strip()
            ),
            text,
        )
        for root, rest in PATH.findall(text):
            segs = rest.strip(":").split("::")
            if root == "crate":
                start = ()
            elif root == "self":
                start = base
            else:
                start = base[:-1]
            path = start + tuple(segs)
            target = max(
                (path[:k] for k in range(len(path), -1, -1) if path[:k] in mods),
                key=len,
                default=None,
            )
            if target is not None and target != m:
                edges[m].add(target)
        # a child module named bare (`replay::run(...)` in the parent that declares it)
        for child in (c for c in mods if len(c) == len(m) + 1 and c[: len(m)] == m):
            if re.search(r"(?<![:\w])" + child[-1] + r"::", text):
                edges[m].add(child)
    return edges


def circles(edges: dict) -> list:
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def main() -> int:
    bad = 0
    for name, src in CRATES.items():
        for comp in circles(graph(src)):
            bad += 1
            print(f"{name}: circle: " + " <-> ".join("::".join(m) or "crate" for m in comp))
    if not bad:
        print("no import circles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
