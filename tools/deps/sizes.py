#!/usr/bin/env python3
"""Files over 800 lines and functions over 100 lines in the Rust sources (exit 1 if any).

Counts a function from its `fn` line to its closing brace at the same indent; test modules
(`#[cfg(test)]` blocks, `tests.rs`, `tests/`) are measured as files only.

    python3 tools/deps/sizes.py
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE, MAX_FN = 800, 100
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?fn\s+(\w+)")


def main() -> int:
    bad = []
    files = list((ROOT / "src").rglob("*.rs")) + list((ROOT / "crates").rglob("src/**/*.rs"))
    for f in sorted(files):
        lines = f.read_text().split("\n")
        rel = f.relative_to(ROOT)
        if len(lines) > MAX_FILE and "tests" not in f.parts and f.name != "tests.rs":
            bad.append(f"{rel}: {len(lines)} lines")
        in_test = False
        for i, line in enumerate(lines):
            if line.startswith("#[cfg(test)]"):
                in_test = True
            m = FN.match(line)
            if not m or in_test or line.rstrip().endswith(";"):
                continue
            indent = m.group(1)
            for j in range(i + 1, len(lines)):
                if lines[j] == indent + "}":
                    if j - i + 1 > MAX_FN:
                        bad.append(f"{rel}:{i + 1}: fn {m.group(6)} is {j - i + 1} lines")
                    break
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
