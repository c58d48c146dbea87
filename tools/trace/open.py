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
    (r"^trl 0\.14\.0 qwen2 modules_to_save$", "TRL 0.14: the LoRA adapters get no gradient "
     "(its other LoRA runs fail: does not require grad); only the head copy trains (the "
     "optimizer's states are its moments alone), so the record is not the LoRA step modelled"),
    (r"^trl 0\.14\.\S+ \S+ (base|beta|full|full_beta)$", "the checkpointed backward's "
     "recompute moment, shared with 0.15 to 1.14 (the model counts the harness's fp32 gradients, "
     "tokens x (I + H) x 4): 0.14's logits phase holds 2.5 copies, so its peak is the recomputed "
     "last layer (at_peak backward, trl 0.14.0 qwen2 base: `_to_copy` 675,840 fp32 I-wide, `add` "
     "337,920 x2, `silu`, `mul`, bf16 H-wide `_to_copy` x7 and `clone` x3; full fine-tuning adds "
     "the head's and the layer's weight gradients, `mm` 246,784 and 90,112 x4); later releases "
     "hide it behind the logits' backward"),
    (r"^trl 0\.(1[6-9]|2\d)\.\S+ qwen2 steps_per_generation2$", "as iterations2 below: "
     "the attention mask and autocast's bf16 copies of the recomputed layer's adapter weights "
     "(the first micro-batch's gradients, kept through the second, are modelled: "
     "by_version::gradients_live_through_step)"),
    (r"^trl 0\.(1[6-9]|2\d)\.\S+ qwen2 iterations2$", "checkpointed "
     "LoRA at the trainer's path, 60-token batch at the peak: the attention mask (B x S x S, "
     "`where`) and autocast's bf16 copies of the recomputed layer's adapter weights are not "
     "modelled (about 65 kB, 1.5 % here; a few MB at 7B)"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 reward_model$", "the reward model's forward "
     "(N9) under the trainer's path: not yet attributed"),
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
