"""Extends the calibration set (calibration/, whose first files are the original H200 measurements) with measurements the estimator is NOT fitted on.

Runs on the GPU machine, importing the shared `measure.py` (same step, same
accounting), and writes to $OUT:

- traces.jsonl   the caching allocator's event trace (allocations >= 1 MiB and
                 every segment event) of one step for a few configurations, to
                 see which tensors live at the peak and how blocks are reused;
- heldout.jsonl  peak allocated / reserved for architectures and knob mixes
                 absent from the shared file (each record carries its arch);
- expandable.jsonl a few of those again with expandable_segments:True.

- heldout-big.jsonl (with --big) larger catalog architectures and knob mixes only.

Usage: python3 extend.py MEASURE_DIR [--budget-s 420] [--big]
"""
import json, os, random, subprocess, sys, time

sys.path.insert(0, sys.argv[1])
import measure  # noqa: E402
import torch  # noqa: E402

OUT = os.environ.get("OUT", ".")
BUDGET = float(os.environ.get("EXT_LEFT") or
               (sys.argv[sys.argv.index("--budget-s") + 1] if "--budget-s" in sys.argv else 420.0))
T0 = time.time()

# Public config.json numbers of architectures that are not in the shared file.
NEW_ARCHS = {
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       tie_word_embeddings=True, max_position_embeddings=40960),
    "qwen3-1.7b": dict(model_type="qwen3", hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       tie_word_embeddings=True, max_position_embeddings=40960),
    "r1-distill-qwen-1.5b": dict(model_type="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                 num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                 tie_word_embeddings=False, max_position_embeddings=131072),
    "llama-3.2-3b": dict(model_type="llama", hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                         num_attention_heads=24, num_key_value_heads=8, head_dim=128, vocab_size=128256,
                         tie_word_embeddings=True, max_position_embeddings=131072),
    "mistral-7b-v0.3": dict(model_type="mistral", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                            num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=32768,
                            tie_word_embeddings=False, max_position_embeddings=32768),
    "phi-3-mini": dict(model_type="phi3", hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, vocab_size=32064,
                       tie_word_embeddings=False, max_position_embeddings=4096),
    "gemma-2-2b": dict(model_type="gemma2", hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                       num_attention_heads=8, num_key_value_heads=4, head_dim=256, vocab_size=256000,
                       tie_word_embeddings=True, sliding_window=4096, final_logit_softcapping=30.0,
                       attn_logit_softcapping=50.0, query_pre_attn_scalar=256, max_position_embeddings=8192),
    "qwen2.5-7b": dict(model_type="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                       tie_word_embeddings=False, max_position_embeddings=32768),
}
BIG_ARCHS = {
    "qwen3-8b": dict(model_type="qwen3", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                     tie_word_embeddings=False, max_position_embeddings=40960),
    "qwen2.5-14b": dict(model_type="qwen2", hidden_size=5120, intermediate_size=13824, num_hidden_layers=48,
                        num_attention_heads=40, num_key_value_heads=8, vocab_size=152064,
                        tie_word_embeddings=False, max_position_embeddings=32768),
    "phi-4": dict(model_type="phi3", hidden_size=5120, intermediate_size=17920, num_hidden_layers=40,
                  num_attention_heads=40, num_key_value_heads=10, vocab_size=100352,
                  tie_word_embeddings=False, max_position_embeddings=16384),
    "gemma-3-4b-text": dict(model_type="gemma3_text", hidden_size=2560, intermediate_size=10240,
                            num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                            vocab_size=262208, tie_word_embeddings=True, sliding_window=1024,
                            max_position_embeddings=131072),
}
BIG_ARCHS["llama-3.2-3b"] = NEW_ARCHS["llama-3.2-3b"]
PHI3_TARGETS = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
ALL7 = list(measure.TARGETS)


def left():
    return BUDGET - (time.time() - T0)


def run(name, arch, c, kind):
    measure.TARGETS = PHI3_TARGETS if arch["model_type"] == "phi3" else ALL7
    try:
        rec = measure.run_one(name, arch, c, "cuda")
        rec["nvml_after"] = measure.nvml_used().get("used")
    except torch.OutOfMemoryError as e:
        rec = dict(model=name, **c, oom=str(e)[:400])
    except Exception as e:  # noqa
        rec = dict(model=name, **c, error=repr(e)[:400])
    measure.cleanup("cuda")
    rec.update(kind=kind, arch=arch, targets=measure.TARGETS,
               alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    return rec


def frames_of(entry):
    out = []
    for f in entry.get("frames", []):
        fn = f.get("filename", "")
        if "/torch/" in fn and "checkpoint" not in fn:
            continue
        out.append(f"{os.path.basename(fn)}:{f.get('line')}:{f.get('name')}")
        if len(out) == 3:
            break
    return "|".join(out)


def trace(name, c, f):
    arch = measure.ARCHS[name]
    torch.cuda.memory._record_memory_history(max_entries=400000, stacks="python")
    rec = run(name, arch, c, "trace")
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = []
    for e in snap["device_traces"][0]:
        a = e["action"]
        if a.startswith("segment") or e.get("size", 0) >= (1 << 20):
            events.append([a, e.get("addr"), e.get("size"), frames_of(e) if a == "alloc" else ""])
    rec["events"] = events
    f.write(json.dumps(rec) + "\n"); f.flush()
    print("trace", name, c, len(events), rec.get("peak_alloc"), flush=True)


def mixes(models, n, seed):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        m = rnd.choice(models)
        out.append((m, dict(seqs=rnd.choice([1, 2, 4, 6, 8, 12]), prompt=rnd.choice([128, 256, 512]),
                            completion=rnd.choice([256, 512, 1024, 1536, 2048]), rank=rnd.choice([8, 16, 32, 64]),
                            gc=rnd.random() < 0.75, beta=rnd.choice([0.0, 0.0, 0.04]))))
    return out


def main_child():
    """Run in a subprocess with expandable segments."""
    cfgs = json.loads(os.environ["EXT_CFGS"])
    with open(os.path.join(OUT, "expandable.jsonl"), "a") as f:
        for name, c in cfgs:
            if left() < 5:
                break
            arch = NEW_ARCHS.get(name) or measure.ARCHS[name]
            rec = run(name, arch, c, "expandable")
            f.write(json.dumps(rec) + "\n"); f.flush()
            print("exp", name, c, rec.get("peak_alloc"), rec.get("peak_reserved"), flush=True)


def main():
    torch.zeros(1, device="cuda")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16); (a @ a).sum().item(); del a
    torch.cuda.empty_cache()
    base = dict(measure.BASE)
    with open(os.path.join(OUT, "traces.jsonl"), "w") as f:
        for name, c in [("llama-3.2-1b", base), ("llama-3.2-1b", dict(base, gc=False)),
                        ("llama-3.2-1b", dict(base, beta=0.04)), ("qwen2.5-0.5b", dict(base, completion=1792))]:
            try:
                trace(name, c, f)
            except Exception as e:  # noqa: a failed trace must not cost the held-out runs
                torch.cuda.memory._record_memory_history(enabled=None)
                print("trace failed", name, repr(e)[:300], flush=True)
    # the shared measure.py's own random mixes over its own archs (its seed), then new archs
    cfgs = [(m, c, "mix") for m, c, _ in measure.configs(list(measure.ARCHS)) if _ == "mix"]
    new = list(NEW_ARCHS)
    cfgs_new = [(m, dict(measure.BASE), "new-base") for m in new]
    cfgs_new += [(m, c, "new-mix") for m, c in mixes(new, 40, 7)]
    # interleave so both sets get coverage within the budget
    order = []
    for i in range(max(len(cfgs), len(cfgs_new))):
        if i < len(cfgs_new):
            order.append(cfgs_new[i])
        if i < len(cfgs):
            order.append(cfgs[i])
    ext = []
    with open(os.path.join(OUT, "heldout.jsonl"), "w") as f:
        for m, c, kind in order:
            if left() < 70:
                break
            arch = NEW_ARCHS.get(m) or measure.ARCHS[m]
            if not c["gc"] and c["seqs"] * (c["prompt"] + c["completion"]) > 16384 and m in ("qwen2.5-7b", "mistral-7b-v0.3"):
                c = dict(c, gc=True)
            rec = run(m, arch, c, kind)
            f.write(json.dumps(rec) + "\n"); f.flush()
            print(kind, m, c, rec.get("peak_alloc"), rec.get("peak_reserved"), rec.get("step_s"), flush=True)
            if kind != "mix" and "peak_alloc" in rec and len(ext) < 8:
                ext.append((m, c))
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True", EXT_CFGS=json.dumps(ext),
               EXT_CHILD="1", EXT_LEFT=str(left() - 5))
    subprocess.run([sys.executable, __file__] + sys.argv[1:], env=env, timeout=max(5, left()))


def main_big():
    torch.zeros(1, device="cuda")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16); (a @ a).sum().item(); del a
    torch.cuda.empty_cache()
    cfgs = [(m, dict(measure.BASE), "big-base") for m in BIG_ARCHS]
    cfgs += [(m, c, "big-mix") for m, c in mixes(list(BIG_ARCHS), 40, 11)]
    with open(os.path.join(OUT, "heldout-big.jsonl"), "w") as f:
        for m, c, kind in cfgs:
            if left() < 15:
                break
            if not c["gc"] and c["seqs"] * (c["prompt"] + c["completion"]) > 8192:
                c = dict(c, gc=True)
            rec = run(m, BIG_ARCHS[m], c, kind)
            f.write(json.dumps(rec) + "\n"); f.flush()
            print(kind, m, c, rec.get("peak_alloc"), rec.get("peak_reserved"), flush=True)


if __name__ == "__main__" and "--big" in sys.argv:
    main_big()
elif __name__ == "__main__":
    if os.environ.get("EXT_CHILD"):
        torch.zeros(1, device="cuda")
        main_child()
    else:
        main()
