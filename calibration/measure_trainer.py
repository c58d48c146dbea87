"""`measure.py --trainer`: the real `GRPOTrainer` step instead of the harness's own.

The harness (`measure.py`) runs a bf16 PEFT model outside accelerate, with no autocast and an
all-ones mask. TRL prepares the model with accelerate (bf16 autocast, `convert_outputs_to_fp32`)
and pads its batches. This mode runs `GRPOTrainer.train()` for two optimizer steps at
`measure.py`'s architectures (random weights, built from their config fields; `--cpu-smoke`: the
tiny ones, on CPU), through the tracer of `tools/trace/` (its phase hooks and live-bytes
accounting), and adds what the GPU's allocator reports: `torch.cuda.max_memory_allocated()` and
`max_memory_reserved()` over the training. One JSON line per (architecture, mix) in
$OUT/trainer.jsonl (or ./trainer.jsonl).

TRL, transformers, peft and accelerate must be importable (the device cannot reach a registry:
carry the wheels with the tree, e.g. `PYTHONPATH=wheels/trl-1.15.0.whl:...`).
"""
import json, os, sys, tempfile, time, traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "trace"))
import kernels  # noqa: E402
import trace as tracer  # noqa: E402

# the knob mixes measured per architecture (tools/trace/trace.py MIXES)
MIXES = ["base", "no_gc", "beta", "full"]


def gpu_peaks(dev):
    if dev != "cuda":
        return {}
    return {"max_memory_allocated": torch.cuda.max_memory_allocated(),
            "max_memory_reserved": torch.cuda.max_memory_reserved()}


def measure(name, fields, mix, dev, work):
    if dev == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    rec = {"model": name, "arch": fields, "mix": mix, "device": dev, "versions": tracer.versions()}
    t0 = time.time()
    try:
        rec.update(tracer.run_one(name, mix, work, fields=fields, use_cpu=dev == "cpu"))
        rec.update(gpu_peaks(dev))
    except Exception as e:  # recorded: an OOM on the GPU is a result too
        rec["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def main(archs, cpu_smoke, out_dir):
    dev = "cpu" if cpu_smoke or not torch.cuda.is_available() else "cuda"
    if dev == "cpu":
        # trl 1.15's Triton kernels cannot run on CPU (tools/trace/kernels.py)
        kernels.install()
    path = os.path.join(out_dir, "trainer.jsonl")
    with open(path, "a") as out:
        for name, fields in archs.items():
            with tempfile.TemporaryDirectory() as work:
                for mix in MIXES:
                    rec = measure(name, fields, mix, dev, work)
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    print(f"{name} {mix}: {rec.get('error') or rec.get('peaks')}", file=sys.stderr)
    return path
