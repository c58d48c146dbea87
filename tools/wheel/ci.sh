#!/usr/bin/env bash
# The wheel, as a user gets it: built once (release, manylinux2014 through zig), installed into
# a fresh virtual environment with pytest, then python/tests run against the installed package
# and binary, and the startup benchmark (tools/wheel/bench.py).
#
#   tools/wheel/ci.sh                        # build, install, test
#   GRPOFIT_WHEEL=target/wheels/x.whl tools/wheel/ci.sh   # reuse a wheel built earlier
#
# Needs python3 (3.9+) and the package registry (maturin, ziglang, pytest).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
python=${PYTHON:-python3}
work=${GRPOFIT_WHEEL_WORK:-$root/target/wheel-ci}
mkdir -p "$work"

wheel=${GRPOFIT_WHEEL:-}
if [ -z "$wheel" ]; then
    # the build tools in their own environment, kept from one run to the next
    if [ ! -x "$work/build/bin/maturin" ]; then
        "$python" -m venv "$work/build"
        "$work/build/bin/pip" install -q "maturin>=1.16,<2" ziglang
    fi
    out="$work/wheels"
    rm -rf "$out"
    start=$(date +%s)
    PATH="$work/build/bin:$PATH" maturin build --release --zig --compatibility manylinux2014 --out "$out"
    wheel=$(ls "$out"/grpofit-*.whl)
    echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB, built in $(( $(date +%s) - start )) s)"
fi

# a fresh environment: nothing but the wheel and pytest
rm -rf "$work/venv"
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel" pytest
export PATH="$work/venv/bin:$PATH" GRPOFIT_WHEEL="$wheel"
unset GRPOFIT_BINARY
# run from python/tests' parent's parent, importing the installed package (python/ is not on
# sys.path: pytest adds only python/tests, for conftest.py)
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
# the startup figure, reported: a benchmark, not a timed test (a loaded CI machine is slower
# than a notebook's; set GRPOFIT_BENCH_BUDGET_MS to make it fail past a budget)
GRPOFIT_BENCH_BUDGET_MS=${GRPOFIT_BENCH_BUDGET_MS:-1e9} "$work/venv/bin/python" tools/wheel/bench.py
