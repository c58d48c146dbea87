"""One decode step of transformers' `generate` through a mixture-of-experts block, counted as the
trainers call it (`ops.py` counts the dense layers; this file the experts).

The mode `generate` runs in decides the experts' path:
- TRL calls `unwrapped_model.generate(...)` under `torch.no_grad()` with the model in training
  mode (`Trainer.training_step` runs `model.train()`, then `_prepare_inputs` ->
  `_generate_and_score_completions`; `unwrap_model_for_generation` never calls `eval()`; trl
  0.27+ even restores `train()` after `generate_batch`, "as generate_batch forces eval mode");
- Unsloth's `unsloth_unwrap_model_for_generation` (unsloth `models/rl.py` `PatchRL`, patched into
  every `trl.trainer.*_trainer` module and imported from there by its compiled trainer) calls
  `FastLanguageModel.for_inference(model)`: `model.eval()`, `training = False` everywhere.

Counted for each MoE family and mode (`MODES`): the model at two and three layers (the difference
is a layer), `EXPERTS` experts, `ROWS` rows of `PROMPT` tokens, `DECODE` new tokens as ops.py.
Every call of a MoE block inside a decode step (one token a row) records its kernels, its host
syncs and the experts its tokens hit (from the router's indices, or from the loop's `index_add_`
where transformers routes inside the block); kernels and syncs are then `fixed + per_hit x hits`,
solved exactly over the calls (their hits differ), and the rest of the layer and of the step is
what the depth difference and the step's total leave.

A host sync is an operator whose result the host must read before it can dispatch the next one
(`SYNCS`: `nonzero`, which `torch.where(cond)` and `.nonzero()` run and which copies the count
back; `_local_scalar_dense`, which `.item()`, `bool(t)`, `int(t)` and a 1-element index tensor's
`__index__` run). It is counted apart and also stays in `kernel`: it launches a kernel or a copy.

With `--passes`, each block a call in the passes a trainer runs in training mode instead: a
micro-batch's forward and backward, and a no-grad scoring forward (`passes_record`).

    tools/trace/ops_moe.sh [RELEASE] [--family gpt_oss ...]  # -> calibration/ops/moe_decode-<transformers>.json
    tools/trace/ops_moe.sh [RELEASE] --passes  # -> calibration/ops/moe_pass-<transformers>.json
    (ops.sh puts 4.56.1's into ops.json `moe_decode`; 1.15.0 gives 5.17.0, 0.17.0 gives 4.51.3)
"""
import argparse
import inspect
import json
import sys
import textwrap
from collections import Counter

import torch

import ops
import tiny

SYNCS = ("nonzero", "_local_scalar_dense", "masked_select", "_unique2", "unique_dim",
         "unique_consecutive")
EXPERTS = 8
ROWS = 4
TOP_K = 2
MODES = ("training", "eval")

# family -> (config class, fields): transformers' own config classes, tiny.py's widths
FAMILIES = {
    "gpt_oss": ("GptOssConfig", {"num_local_experts": EXPERTS, "num_experts_per_tok": TOP_K,
                                 "intermediate_size": 352, "sliding_window": 16,
                                 "layer_types": None}),
    "qwen3_moe": ("Qwen3MoeConfig", {"num_experts": EXPERTS, "num_experts_per_tok": TOP_K,
                                     "moe_intermediate_size": 352, "decoder_sparse_step": 1,
                                     "mlp_only_layers": []}),
    "qwen2_moe": ("Qwen2MoeConfig", {"num_experts": EXPERTS, "num_experts_per_tok": TOP_K,
                                     "moe_intermediate_size": 352,
                                     "shared_expert_intermediate_size": 352,
                                     "decoder_sparse_step": 1, "mlp_only_layers": []}),
    "mixtral": ("MixtralConfig", {"num_local_experts": EXPERTS, "num_experts_per_tok": TOP_K,
                                  "sliding_window": None}),
}
# the MoE block each family's decoder layer calls as `layer.mlp` (or `block_sparse_moe`)
BLOCK_ATTRS = ("mlp", "block_sparse_moe")


class Counting(torch.utils._python_dispatch.TorchDispatchMode):
    """Kernels and syncs, split by whether a MoE block is running (`inside`)."""

    def __init__(self):
        super().__init__()
        self.inside = None  # the current block call's Counter, or None
        self.ignore = False
        self.total = Counter()

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        if not self.ignore and ops.kind(func) == "kernel":
            name = func.overloadpacket.__name__
            where = self.inside if self.inside is not None else self.total
            where["kernel"] += 1
            where["sync"] += name in SYNCS
            where["index_add_"] += name == "index_add_"
        return func(*args, **(kwargs or {}))


def blocks(model):
    for layer in model.model.layers:
        for attr in BLOCK_ATTRS:
            if hasattr(layer, attr):
                yield getattr(layer, attr)
                break


def experts_hit(args, kwargs):
    """The experts a block's tokens pick, where the experts module is handed the router's indices
    (gpt-oss `router_indices`; transformers 5's `top_k_index`)."""
    for key in ("router_indices", "top_k_index"):
        if key in kwargs:
            return int(torch.unique(kwargs[key]).numel())
    ints = [a for a in args if isinstance(a, torch.Tensor) and not a.is_floating_point()]
    return int(torch.unique(ints[0]).numel()) if ints else None


def watch_hits(block, mode_):
    """A dict whose "n" the block's experts set to the experts a call hits, read by their
    forward pre-hook outside the count (a module of stacked experts; a `ModuleList` loop counts
    its hits by `index_add_` instead)."""
    hits = {}
    experts = getattr(block, "experts", None)
    if isinstance(experts, torch.nn.Module) and not isinstance(experts, torch.nn.ModuleList):
        def pre(module, args, kwargs):
            mode_.ignore = True
            hits["n"] = experts_hit(args, kwargs)
            mode_.ignore = False
        experts.register_forward_pre_hook(pre, with_kwargs=True)
    return hits


def instrument(model, mode_):
    """Wraps each MoE block's forward: its kernels and syncs go to a Counter of their own, with
    the experts hit and the tokens it ran on."""
    calls = []

    def wrap(block):
        forward = block.forward
        hits = watch_hits(block, mode_)

        def counted(hidden_states, *args, **kwargs):
            hits.clear()
            mode_.inside = Counter()
            try:
                return forward(hidden_states, *args, **kwargs)
            finally:
                c, mode_.inside = mode_.inside, None
                n = hits.get("n")
                # transformers 4.x's loops add one `index_add_` an expert hit
                calls.append({"tokens": int(hidden_states.shape[0] * hidden_states.shape[1])
                              if hidden_states.dim() == 3 else int(hidden_states.shape[0]),
                              "query": int(hidden_states.shape[1]) if hidden_states.dim() == 3
                              else None,
                              "hits": n if n is not None else c["index_add_"],
                              "kernel": c["kernel"], "sync": c["sync"]})
        block.forward = counted

    for b in blocks(model):
        wrap(b)
    return calls


def gpt_oss_4_55_condition():
    """transformers 4.56 and 4.57 run gpt-oss's expert loop on CPU in every mode
    (`if hidden_states.device.type == "cpu" or self.training`); on a GPU the mode decides, as
    4.55's `if self.training:` does everywhere. The eval count takes 4.55's condition, so that
    the CPU runs the branch a GPU runs."""
    try:
        from transformers.models.gpt_oss import modeling_gpt_oss as m
    except ImportError:
        return None
    src = textwrap.dedent(inspect.getsource(m.GptOssExperts.forward))
    cpu = 'hidden_states.device.type == "cpu" or self.training'
    if cpu not in src:
        return None
    scope = dict(vars(m))
    exec(compile(src.replace(cpu, "self.training"), m.__file__, "exec"), scope)
    original = m.GptOssExperts.forward
    m.GptOssExperts.forward = scope["forward"]
    return lambda: setattr(m.GptOssExperts, "forward", original)


def cuda_one_hot():
    """`F.one_hot` as it runs on a GPU. ATen's `one_hot` (`Onehot.cpp`) checks the classes on the
    host only off CUDA ("for cuda, rely on device assert thrown by scatter"): on CPU it runs
    `min`, `max` and two `.item()` syncs that a GPU never does, then both build the result with
    `zeros` and `scatter_(-1, self.unsqueeze(-1), 1)`. The count takes the GPU's branch."""
    import torch.nn.functional as F

    original = F.one_hot

    def one_hot(tensor, num_classes=-1):
        if num_classes < 0:
            return original(tensor, num_classes)
        out = torch.zeros((*tensor.shape, num_classes), dtype=torch.long, device=tensor.device)
        return out.scatter_(-1, tensor.unsqueeze(-1), 1)

    F.one_hot = one_hot
    return lambda: setattr(F, "one_hot", original)


def build(family, layers, experts=EXPERTS):
    import transformers

    cls_name, extra = FAMILIES[family]
    cls = getattr(transformers, cls_name, None)
    if cls is None:
        return None
    key = "num_experts" if "num_experts" in extra else "num_local_experts"
    cfg = cls(**{**tiny.COMMON, **extra, key: experts, "num_hidden_layers": layers})
    # gpt-oss: eager attention (4.56 has no SDPA path for its sinks), the same at every depth
    cfg._attn_implementation = "eager" if family == "gpt_oss" else "sdpa"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    # random routers send every token to a few experts; spread them so calls hit 1 to 8 experts
    for b in blocks(model):
        for p in b.parameters():
            if p.dim() == 2 and p.shape[0] == experts:
                torch.nn.init.normal_(p, std=1.0)
    return model, cfg


def generate(family, layers, mode, new_tokens, experts=EXPERTS):
    built = build(family, layers, experts)
    if built is None:
        return None
    model, cfg = built
    model.train() if mode == "training" else model.eval()
    torch.manual_seed(2)
    ids = torch.randint(4, cfg.vocab_size, (ROWS, ops.PROMPT))
    counting = Counting()
    calls = instrument(model, counting)
    restore = gpt_oss_4_55_condition() if family == "gpt_oss" and mode == "eval" else None
    restore_one_hot = cuda_one_hot()
    try:
        with counting, torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 generation_config=ops.generation_config(new_tokens))
    finally:
        restore_one_hot()
        if restore:
            restore()
    if out.shape[1] != ops.PROMPT + new_tokens:
        raise SystemExit(f"{family}: generate stopped at {out.shape[1] - ops.PROMPT} tokens")
    return counting.total, calls


def solve(calls, key):
    """`fixed + per_hit x hits` through every decode call, exact or refused."""
    by_hits = {}
    for c in calls:
        by_hits.setdefault(c["hits"], set()).add(c[key])
    if any(len(v) != 1 for v in by_hits.values()):
        raise SystemExit(f"{key}: a block's count is not a function of its hits: {by_hits}")
    points = sorted((h, v.pop()) for h, v in by_hits.items())
    if len(points) == 1:
        return {"fixed": points[0][1], "per_hit": None, "hits_seen": [points[0][0]]}
    (h0, k0), (h1, k1) = points[0], points[-1]
    per_hit = (k1 - k0) / (h1 - h0)
    fixed = k0 - per_hit * h0
    if any(abs(fixed + per_hit * h - k) > 1e-9 for h, k in points):
        raise SystemExit(f"{key}: not linear in the hits: {points}")
    return {"fixed": fixed, "per_hit": per_hit, "hits_seen": [h for h, _ in points]}


def mode_record(family, mode, experts=EXPERTS):
    runs = {}
    for layers in ops.DEPTHS:
        for n in ops.DECODE:
            got = generate(family, layers, mode, n, experts)
            if got is None:
                return None
            runs[(layers, n)] = got
    lo, hi = ops.DEPTHS
    short, long = ops.DECODE
    # decode calls only (one query token a row), at every depth and length
    decode_calls = [c for got in runs.values() for c in got[1] if c["query"] == 1]
    block = {k: solve(decode_calls, k) for k in ("kernel", "sync")}
    # a decode step's kernels outside the MoE blocks: per layer (depth difference) and fixed
    outside = {}
    for layers in ops.DEPTHS:
        (t_s, _), (t_l, _) = runs[(layers, short)], runs[(layers, long)]
        # `total` holds what ran outside the blocks only
        step = t_l["kernel"] - t_s["kernel"]
        sync = t_l["sync"] - t_s["sync"]
        outside[layers] = (step / (long - short), sync / (long - short))
    per_layer = [(outside[hi][i] - outside[lo][i]) / (hi - lo) for i in (0, 1)]
    fixed = [outside[lo][i] - lo * per_layer[i] for i in (0, 1)]
    return {
        "block": block,
        "outside_blocks": {"per_layer": {"kernel": per_layer[0], "sync": per_layer[1]},
                           "fixed": {"kernel": fixed[0], "sync": fixed[1]}},
        "decode_calls": len(decode_calls),
    }


def every_expert(family, mode, counted):
    """Before transformers 4.52 (Mixtral, Qwen2-MoE) and 4.53 (Qwen3-MoE) the block loops over
    `range(self.num_experts)`: every expert is visited (its `index_add_` runs on no tokens too),
    so every call counts the same. Counted again at half the experts, the difference over the
    experts taken away is a visited expert's kernels and syncs (`per_expert`)."""
    block = counted["block"]
    if block["kernel"]["hits_seen"] != [EXPERTS]:
        return
    half = mode_record(family, mode, EXPERTS // 2)["block"]
    for key in ("kernel", "sync"):
        per = (block[key]["fixed"] - half[key]["fixed"]) / (EXPERTS - EXPERTS // 2)
        block[key] = {"fixed": block[key]["fixed"] - EXPERTS * per, "per_expert": per,
                      "visits": "every expert"}


def record(families=None):
    """Each family's counts in both modes, with the versions they were read in."""
    import transformers

    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "experts": EXPERTS, "top_k": TOP_K, "rows": ROWS, "prompt": ops.PROMPT,
           "decode_new_tokens": ops.DECODE, "depths": ops.DEPTHS, "families": {}}
    for family in families or list(FAMILIES):
        modes = {m: mode_record(family, m) for m in MODES}
        if any(v is None for v in modes.values()):
            print(family, "not in this transformers", file=sys.stderr)
            continue
        for m in MODES:
            every_expert(family, m, modes[m])
        out["families"][family] = modes
        print(family, json.dumps({m: modes[m]["block"] for m in MODES}), file=sys.stderr)
    return out


# A training micro-batch's and a scoring pass's tokens: one row each of these lengths, so that
# the blocks' calls hit from two experts to most (the router spread as `build` does); one token
# alone takes a backward of one kernel fewer (28 against 29 on 5.17.0 Qwen3-MoE), no micro-batch's
PASS_LENGTHS = (2, 3, 4, 6, 8, 16, 48)
# the passes TRL runs, each with the model in training mode (`Trainer.training_step`'s
# `model.train()`): `_compute_loss`'s forward and its backward, and
# `_generate_and_score_completions`'s old / reference log-probs under `torch.no_grad()`
PASSES = ("training", "scoring")


def instrument_passes(model, mode_):
    """Each MoE block's forward and backward kernels and syncs a call, with its experts hit: the
    forward from the block's own call, the backward between the block's full backward pre-hook
    (its outputs' gradients ready) and its full backward hook (its input's gradient computed).
    The autograd engine runs ready nodes latest-created first, so every node of the block's
    graph (its weights' casts included) runs between the two."""
    calls = []

    def wrap(block):
        forward = block.forward
        hits = watch_hits(block, mode_)

        def counted(hidden_states, *args, **kwargs):
            hits.clear()
            mode_.inside = Counter()
            try:
                return forward(hidden_states, *args, **kwargs)
            finally:
                c, mode_.inside = mode_.inside, None
                n = hits.get("n")
                calls.append({"hits": n if n is not None else c["index_add_"],
                              "forward": {"kernel": c["kernel"], "sync": c["sync"]}})
        block.forward = counted

        def backward_begins(module, grad_output):
            mode_.inside = Counter()

        def backward_ends(module, grad_input, grad_output):
            c, mode_.inside = mode_.inside, None
            # blocks run backward in the reverse of their forward order
            pending = [x for x in calls if "backward" not in x]
            pending[-1]["backward"] = {"kernel": c["kernel"], "sync": c["sync"]}

        block.register_full_backward_pre_hook(backward_begins)
        block.register_full_backward_hook(backward_ends)

    for b in blocks(model):
        wrap(b)
    return calls


def pass_calls(family, kind, experts=EXPERTS):
    """Every block call of a training micro-batch's forward and backward (`kind` "training") or of
    a no-grad scoring pass ("scoring"), the model in training mode, at each `PASS_LENGTHS`."""
    calls = []
    for length in PASS_LENGTHS:
        built = build(family, ops.DEPTHS[0], experts)
        if built is None:
            return None
        model, cfg = built
        model.requires_grad_(True)
        model.train()
        torch.manual_seed(length)
        ids = torch.randint(4, cfg.vocab_size, (1, length))
        counting = Counting()
        got = instrument_passes(model, counting)
        restore_one_hot = cuda_one_hot()
        try:
            with counting:
                if kind == "scoring":
                    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                        model(input_ids=ids, attention_mask=torch.ones_like(ids))
                else:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
                    logits.float().logsumexp(-1).mean().backward()
        finally:
            restore_one_hot()
        calls += got
    return calls


def pass_record(family, kind, experts=EXPERTS):
    calls = pass_calls(family, kind, experts)
    if calls is None:
        return None
    sides = ("forward", "backward") if kind == "training" else ("forward",)
    out = {}
    for side in sides:
        flat = [{"hits": c["hits"], **c[side]} for c in calls]
        out[side] = {k: solve(flat, k) for k in ("kernel", "sync")}
    out["calls"] = len(calls)
    return out


def pass_every_expert(family, kind, counted):
    """`every_expert` for a pass: where every call visits every expert, the count at half the
    experts gives a visited expert's kernels and syncs (`per_expert`)."""
    sides = [s for s in ("forward", "backward") if s in counted]
    if counted[sides[0]]["kernel"]["hits_seen"] != [EXPERTS]:
        return
    half = pass_record(family, kind, EXPERTS // 2)
    for side in sides:
        for key in ("kernel", "sync"):
            whole = counted[side][key]["fixed"]
            per = (whole - half[side][key]["fixed"]) / (EXPERTS - EXPERTS // 2)
            counted[side][key] = {"fixed": whole - EXPERTS * per, "per_expert": per,
                                  "visits": "every expert"}


def passes_record(families=None):
    """Each family's block a call in a training micro-batch (forward, backward) and a scoring
    pass, with the versions they were read in."""
    import transformers

    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "experts": EXPERTS, "top_k": TOP_K, "lengths": PASS_LENGTHS, "layers": ops.DEPTHS[0],
           "mode": "training", "families": {}}
    for family in families or list(FAMILIES):
        kinds = {k: pass_record(family, k) for k in PASSES}
        if any(v is None for v in kinds.values()):
            print(family, "not in this transformers", file=sys.stderr)
            continue
        for k in PASSES:
            pass_every_expert(family, k, kinds[k])
        out["families"][family] = kinds
        print(family, json.dumps(kinds), file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append")
    ap.add_argument("--passes", action="store_true",
                    help="count the training and scoring passes' blocks, not a decode step")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.out, "w") as f:
        json.dump((passes_record if args.passes else record)(args.family), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
