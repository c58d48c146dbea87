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
    (r"modules_to_save", "N10: PEFT modules_to_save (trainable copies, their AdamW moments, a "
     "transient head gradient) is not modelled"),
    (r"^trl 1\.16\.0 qwen2 full_no_gc$", "full fine-tuning without checkpointing: trainable "
     "weights make autograd keep each linear's input and each RMSNorm's bf16 cast, which "
     "layer_tensors counts for frozen weights only: per layer and token 2 I (down_proj's input, "
     "at_peak `mul 166144` x2 = 236 x 352 x 2) + 2 norms x (2 H `_to_copy`, saved by `mul` for "
     "the norm weight's gradient, + 2 H normed `mul` output, the q/k/v and gate/up input; "
     "at_peak `_to_copy 60416` x5, `mul 60416` x4), and the final norm's `_to_copy`: 876,032 B "
     "against the 863,526 B missing (the step peaks are trl 1.15.0's to the byte)"),
    (r"^trl 0\.19\.1 qwen2 full_beta", "the reference model in float32: TRL 0.19 refuses "
     "model_init_kwargs beside a model object and loads the reference model from its path in "
     "transformers' default dtype; the estimate takes the policy's dtype"),
    (r"^trl 0\.1[45]\.", "TRL 0.14 / 0.15: the step inside compute_loss (reference pass in the step, "
     "prompts counted in the batch) at the trainer's fp32 logits, not yet followed"),
    (r"^trl 0\.\S+ qwen2 full_steps_per_generation2$", "N1 remainder, bared by the "
     "accumulation: at the backward's peak (at_peak, trl 0.19.1) every weight's gradient is live "
     "(`mm`, `embedding_dense_backward`: 1,230,848 B, as modelled) beside the fp32 logits' "
     "backward, which holds the saved copy and three more (`div`; `stack`, `new_zeros`, "
     "`scatter_add`: 493,568 B each) where shape.rs counts the saved one and four: +493,568 B. Without accumulation max(step, gradients) "
     "hides it"),
    (r"^trl 0\.\S+ qwen2 (iterations2|steps_per_generation2)$", "N1 remainder, as the "
     "release's base record: the fp32 logits' backward, modelled as four copies beside the saved "
     "one. The mix adds nothing else unmodelled: num_iterations 2 trains twice on one generation "
     "(its old log-probs, rows x completion fp32: 1 KiB at_peak here), "
     "steps_per_generation 2 keeps the first micro-batch's gradients through the second "
     "(modelled: by_version::gradients_live_through_step)"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ \S+ (base|beta|loss_\w+)$", "N1 remainder: the fp32 "
     "logits' backward, modelled as four copies beside the saved one (traced 3.8, trl 0.19.1)"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 no_gc$", "without checkpointing at fp32 "
     "logits: over by about 9 %, not yet attributed"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 reward_model$", "the reward model's forward "
     "(N9) under the trainer's path: not yet attributed"),
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
