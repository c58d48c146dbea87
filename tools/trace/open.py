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
    (r"^trl 0\.1[45]\.\S+ \S+ reward_model$", "the reward model in float32: 0.14 / 0.15 refuse "
     "model_init_kwargs beside a model object, so `AutoModelForSequenceClassification."
     "from_pretrained(reward_func, num_labels=1)` loads it in transformers' default float32 "
     "(static_at_train +1,973,312 B over base: twice the bf16 986,624 B the estimate counts); "
     "0.14 also misses the recompute moment below"),
    (r"^trl 0\.1[45]\.\S+ phi3 ", "Phi-3's fused qkv / gate_up saved set under "
     "the transformers of 0.14 / 0.15 (4.48 / 4.49; 0.16 on agree): not yet attributed"),
    (r"^trl 0\.14\.\S+ \S+ (base|beta|full|full_beta)$", "the checkpointed backward's "
     "recompute moment, shared with 0.15 to 1.14 (the model counts the harness's fp32 gradients, "
     "tokens x (I + H) x 4): 0.14's logits phase holds 2.5 copies, so its peak is the recomputed "
     "last layer (at_peak backward, trl 0.14.0 qwen2 base: `_to_copy` 675,840 fp32 I-wide, `add` "
     "337,920 x2, `silu`, `mul`, bf16 H-wide `_to_copy` x7 and `clone` x3; full fine-tuning adds "
     "the head's and the layer's weight gradients, `mm` 246,784 and 90,112 x4); later releases "
     "hide it behind the logits' backward"),
    (r"^trl 0\.1[45]\.\S+ qwen2 full_no_gc$", "full fine-tuning without checkpointing: the "
     "trainable norms' and linears' saved inputs, modelled from 0.16 on, are live at 0.14's "
     "in-step reference pass too (at_peak scoring, trl 0.14.0: bf16 norm casts "
     "`_to_copy` 122,880 x5, norm outputs `mul` 122,880 x4, the MLP product `mul` 337,920 x2); "
     "0.14's peak is its in-step reference pass, where every layer's saved set is live"),
    (r"^trl 0\.15\.\S+ \S+ no_gc$", "without checkpointing at fp32 logits: over by about 9 % as "
     "0.16.1 to 0.26.2, not yet attributed"),
    (r"^trl 0\.(1[6-9]|2\d)\.\S+ qwen2 steps_per_generation2$", "gradient accumulation: the "
     "adapters' fp32 gradients from the earlier micro-batches live through the later ones' "
     "steps (zeroed only after the optimizer step), not modelled (+149,504 B here); and as "
     "iterations2"),
    (r"^trl 0\.(1[6-9]|2\d)\.\S+ qwen2 iterations2$", "checkpointed "
     "LoRA at the trainer's path, 60-token batch at the peak: the attention mask (B x S x S, "
     "`where`) and autocast's bf16 copies of the recomputed layer's adapter weights are not "
     "modelled (about 65 kB, 1.5 % here; a few MB at 7B)"),
    (r"^trl (0\.|1\.([0-9]|1[0-4])\.)\S+ qwen2 reward_model$", "the reward model's forward "
     "(N9) under the trainer's path: not yet attributed"),
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
