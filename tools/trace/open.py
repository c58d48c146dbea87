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
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 modules_to_save$", "N1 remainder, as the "
     "release's base record: the modules_to_save terms agree where the base does (trl 0.19.1, "
     "1.0.0, 1.14.2, 1.15.0 within 3 %)"),
    (r"^trl 1\.16\.", "TRL 1.16's fused head (not modelled: the model follows 1.15): its tile "
     "spans every position, prompt included (at_peak: empty 15,466,496 B = 236 x 32768 x 2), "
     "beside fp32 vocabulary-wide temporaries (exp, mul: 236 x 964 x 4)"),
    (r"^trl 0\.19\.1 qwen2 full_beta", "the reference model in float32: TRL 0.19 refuses "
     "model_init_kwargs beside a model object and loads the reference model from its path in "
     "transformers' default dtype; the estimate takes the policy's dtype"),
    (r"^trl 0\.1[45]\.", "TRL 0.14 / 0.15: the step inside compute_loss (reference pass in the step, "
     "prompts counted in the batch) at the trainer's fp32 logits, not yet followed"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ \S+ (base|beta|loss_\w+)$", "N1 remainder: the fp32 "
     "logits' backward, modelled as four copies beside the saved one (traced 3.8, trl 0.19.1)"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 no_gc$", "without checkpointing at fp32 "
     "logits: over by about 9 %, not yet attributed"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 reward_model$", "N1 remainder, as the "
     "release's base record: the reward model (bf16, 986,624 B) and its forward over the "
     "generation batch (the reward phase, -1.3 %) agree"),
    (r"full", "full fine-tuning with the reference model or without checkpointing: not yet "
     "attributed (the 1.15.0 records predate at_peak; retrace to see the peak's tensors)"),
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
