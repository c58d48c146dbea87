"""`grpofit.estimate(preset="24gb")` end to end from Python: one process start, the estimate,
its JSON and SVG read back. Prints the fastest, median and slowest call; exits 1 when the
fastest is above the budget ($GRPOFIT_BENCH_BUDGET_MS, default 20: the target for a notebook
call). The fastest, because on a shared machine the others measure the neighbours: as Python's
timeit says, the spread comes from other processes, and the minimum is what the code costs.

    python tools/wheel/bench.py [CALLS]
"""

import os
import statistics
import sys
import time

import grpofit


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    budget = float(os.environ.get("GRPOFIT_BENCH_BUDGET_MS", "20"))
    grpofit.estimate(preset="24gb")  # the binary found, its pages read: what a notebook's second call sees
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        grpofit.estimate(preset="24gb")
        times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times)
    print(
        f"grpofit.estimate(preset='24gb'): median {median:.1f} ms, fastest {min(times):.1f} ms, "
        f"slowest {max(times):.1f} ms over {calls} calls (budget {budget:g} ms)"
    )
    return 0 if min(times) <= budget else 1


if __name__ == "__main__":
    sys.exit(main())
