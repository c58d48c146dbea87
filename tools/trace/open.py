#!/usr/bin/env python3
"""Writes calibration/cpu-trace/open.json, the records the step model does not follow yet, from
`cargo test --test it cpu_trace -- --nocapture` (its `ERR` lines) and the traces' failures.
Each gets the term it is attributed to (TERMS: the first rule that matches); review the result.

  cargo test --test it cpu_trace -- --nocapture | python3 tools/trace/open.py
"""
import glob, json, os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOLERANCE = 3.0
# (label pattern, term): what the traces' `at_peak` and the wheels' code point at
TERMS = [
    (r"modules_to_save", "N10 is modelled (the copies, their gradient and AdamW moments, the "
     "head's transient gradient): what is left is the release's other terms, as its base record"),
    (r".", "not yet attributed"),
]


def term(label):
    return next(t for pat, t in TERMS if re.search(pat, label))


def main():
    records = {}
    for line in sys.stdin:
        if not line.startswith("ERR\t"):
            continue
        _, label, pct, *_ = line.rstrip("\n").split("\t")
        pct = float(pct)
        if abs(pct) > TOLERANCE:
            records[label] = {"term": term(label), "error_pct": pct}
    for f in glob.glob(os.path.join(ROOT, "calibration/cpu-trace/trl-*.jsonl")):
        for line in open(f):
            r = json.loads(line)
            if "error" in r:
                label = f"trl {r['versions']['trl']} {r['family']} {r['mix']}"
                records[label] = {"term": f"the trace fails: {r['error'][:200]}",
                                  "error_pct": 0.0}
    out = {"about": "Traced records the trl step model does not follow within 3 % yet, with "
           "the term each misses and its error now (estimate minus trace, %). "
           "tests/it/cpu_trace.rs fails when one moves or comes within 3 %, so this list only "
           "shrinks as terms are modelled. Written by tools/trace/open.py.",
           "records": dict(sorted(records.items()))}
    with open(os.path.join(ROOT, "calibration/cpu-trace/open.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{len(records)} open records", file=sys.stderr)


if __name__ == "__main__":
    main()
