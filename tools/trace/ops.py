"""The eager operators a GRPO step dispatches, counted on CPU from the trainers' own code.

Each (aten) operator PyTorch dispatches costs the host its dispatch and launch whatever its size
(`EAGER_OP_SECONDS` in crates/grpofit-core/src/time/efficiency.rs). A `TorchDispatchMode` sees
every operator below autograd and autocast, forward and backward, and sorts it into:

- `view`: its outputs alias an input and nothing is written (`view`, `transpose`, `slice`,
  `expand`, `_unsafe_view`, `detach`...): no kernel is launched, only metadata changes;
- `alloc`: `empty*` / `new_empty*`: an allocation from the caching allocator, no kernel;
- `kernel`: everything else, which launches at least one kernel on a GPU. The step model
  charges these (the 10 us is a kernel launch through the eager dispatcher); views and
  allocations are recorded beside them.

A tiny random model of each family (`tiny.py`'s dimensions, transformers' own config class) is
counted at two and three layers (`DEPTHS`: the difference is a layer's operators, the rest is the fixed
part: embedding, final norm, LM head, TRL's log-prob code, generate's per-step work), full and
with LoRA (PEFT, r=8) on every linear layer and on `o_proj` + `down_proj` only (the difference
over the adapters' number is one adapter's operators). Everything runs under
`torch.autocast(bfloat16)` as accelerate's `mixed_precision="bf16"` wraps the model's forward.

- `train`: TRL 0.23 `GRPOTrainer._get_per_token_logps_and_entropies` (called as the trainer
  calls it from `_compute_loss`: `compute_entropy=True`) over a micro-batch of `ROWS` sequences of
  `LENGTH` tokens, a loss over its log-probs and the backward; with transformers'
  `gradient_checkpointing_enable()` (TRL 0.23 `enable_gradient_checkpointing`: the reentrant
  default, `enable_input_require_grads`) and without. `forward` / `backward` are the operators
  dispatched before / during `loss.backward()`; checkpointing's recompute is the backward's
  excess with checkpointing on.
- `score`: the same function under `torch.no_grad()` (the old and reference log-probs).
- `decode`: transformers' `generate` with the `GenerationConfig` TRL 0.23 builds (`do_sample`,
  temperature 1, top_p 1, top_k None, min_p None, repetition_penalty 1) and its dynamic KV
  cache, over `ROWS` prompts: the operators of `max_new_tokens = 16` minus those of 8, over 8,
  are one decode step (the model's forward over one token a row, the logits processors, the
  sampling, the stopping criteria, the cache update); what is left at 8 is the call's fixed
  part (the prefill and generate's setup). `decode_step_training`: the same with the model in
  training mode, as TRL calls `generate`; `decode_step_training_dropout` with PEFT's
  `lora_dropout` 0.05 too (`F.dropout` counted as CUDA runs it, one fused kernel).

- `moe_decode`: one decode step through each MoE block as TRL (training mode) and Unsloth
  (eval) call `generate`: the block's kernels and host syncs, fixed and per expert hit, and the
  rest of the layer and step (`ops_moe.py`).

- `lora_dropout_per_adapter`: what PEFT's adapter dropout (`lora_dropout` 0.05, TRL
  ModelConfig's default) adds to each adapter, at every linear layer and `DEPTHS[1]` layers:
  the training forward, the backward, checkpointing's recompute, and the scoring pass, which
  TRL runs in training mode (transformers `Trainer.training_step` calls `model.train()` before
  `_prepare_inputs`, where GRPO scores under `torch.no_grad()`). CPU's dropout stood in by
  `native_dropout` as on CUDA (`kernels.py`: CPU's `_dropout_impl` dispatches `bernoulli_`,
  `div_` and `mul` where CUDA runs the one fused kernel), per adapter over the `adapters`
  of the model. Generation's dropout is not counted here.

- `moe_training_loop`: gpt-oss's and Qwen3-MoE's training forward and backward at 4 and 8
  experts, all hit: the difference is the expert loop's operators an expert hit.

    tools/trace/ops.sh [--family qwen3 ...] [--moe gpt_oss ...]  # writes calibration/ops/ops.json
"""
import argparse
import json
import sys
import types
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import kernels
import tiny

ALLOCS = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided")
# reshapes that alias their input although their schema does not say so (traffic.py's list)
ALIASES = ("_unsafe_view", "_reshape_alias", "lift_fresh", "detach")

ROWS = 2
LENGTH = 48
PROMPT = 12
DECODE = (8, 16)
SUBSET = ["o_proj", "down_proj"]
# two and three layers, not one and two: with LoRA and no checkpointing the first layer's input
# needs no gradient (the frozen embedding's output), so its backward skips the input gradients
# every later layer computes; a first layer at both depths cancels it from the per-layer count
DEPTHS = (2, 3)

# families the step model names beyond tiny.py's (grpofit's `Family::Gemma2`)
FAMILIES = {**tiny.FAMILIES,
            "gemma2": ("Gemma2Config", {"sliding_window": 16, "query_pre_attn_scalar": 32})}


def kind(func):
    name = func.overloadpacket.__name__
    if name in ALLOCS:
        return "alloc"
    if name in ALIASES:
        return "view"
    returns = func._schema.returns
    if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
        return "view"
    return "kernel"


class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.phase = "forward"
        self.count = Counter()
        self.names = Counter()

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        k = kind(func)
        self.count[(self.phase, k)] += 1
        if k == "kernel":
            self.names[(self.phase, func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))

    def of(self, phase):
        return {k: self.count[(phase, k)] for k in ("kernel", "view", "alloc")}


def build(family, layers, lora, checkpointing=False, dropout=0.0):
    import transformers

    cls_name, extra = FAMILIES[family]
    cfg = getattr(transformers, cls_name)(**{**tiny.COMMON, **extra, "num_hidden_layers": layers})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    if checkpointing:
        # transformers' default when TRL passes no kwargs: {"use_reentrant": True}
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    if lora:
        import peft

        targets = "all-linear" if lora == "all" else SUBSET
        model = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16,
                                                           target_modules=targets,
                                                           lora_dropout=dropout))
    else:
        model.requires_grad_(True)
    return model, cfg


def adapters(model):
    import peft

    return sum(isinstance(m, peft.tuners.lora.LoraLayer) for m in model.modules())


def logps_fn():
    from trl import GRPOTrainer

    fn = GRPOTrainer._get_per_token_logps_and_entropies
    # under trl's `profiling_decorator` (host timing only, no operators)
    return getattr(fn, "__wrapped__", fn)


def inputs(cfg):
    torch.manual_seed(1)
    ids = torch.randint(4, cfg.vocab_size, (ROWS, LENGTH))
    return ids, torch.ones_like(ids)


def fake_trainer(model):
    import inspect

    keys = set(inspect.signature(model.forward).parameters)
    if hasattr(model, "get_base_model"):
        keys |= set(inspect.signature(model.get_base_model().forward).parameters)
    return types.SimpleNamespace(model_kwarg_keys=keys, temperature=1.0)


def train(family, layers, lora, checkpointing, dropout=0.0):
    model, cfg = build(family, layers, lora, checkpointing, dropout)
    model.train()
    ids, mask = inputs(cfg)
    fn, me = logps_fn(), fake_trainer(model)
    mode = Ops()
    with mode:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logps, _ = fn(me, model, ids, mask, LENGTH - PROMPT, compute_entropy=True)
        loss = -logps.mean()
        mode.phase = "backward"
        loss.backward()
    return {"forward": mode.of("forward"), "backward": mode.of("backward"),
            "adapters": adapters(model) if lora else 0}, mode.names


def score(family, layers, lora, dropout=0.0, training=False):
    model, cfg = build(family, layers, lora, dropout=dropout)
    model.train(training)
    ids, mask = inputs(cfg)
    fn, me = logps_fn(), fake_trainer(model)
    mode = Ops()
    with mode, torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        fn(me, model, ids, mask, LENGTH - PROMPT)
    return mode.of("forward"), mode.names


def generation_config(new_tokens):
    from transformers import GenerationConfig

    tok = tiny.COMMON
    return GenerationConfig(max_new_tokens=new_tokens, do_sample=True,
                            pad_token_id=tok["pad_token_id"], bos_token_id=tok["bos_token_id"],
                            eos_token_id=tok["eos_token_id"], temperature=1.0, top_p=1.0,
                            top_k=None, min_p=None, repetition_penalty=1.0,
                            cache_implementation=None)


def cuda_dropout():
    """`F.dropout` as it runs on a GPU: ATen's `dropout` (`Dropout.cpp`) takes the fused
    `native_dropout` kernel when `is_fused_kernel_acceptable` (a CUDA input, 0 < p < 1), one
    kernel; on CPU it builds the mask in three (`bernoulli_`, `div_`, `mul`). The count takes
    the GPU's."""
    import torch.nn.functional as F

    original = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0.0 < p < 1.0 and input.numel() > 0 and not inplace:
            return torch.native_dropout(input, p, True)[0]
        return original(input, p, training, inplace)

    F.dropout = dropout
    return lambda: setattr(F, "dropout", original)


def generate(family, layers, lora, new_tokens, training=False, dropout=0.0):
    model, cfg = build(family, layers, lora, dropout=dropout)
    # TRL generates with the model in training mode (`Trainer.training_step`'s `model.train()`;
    # trl 0.22+ `unwrap_model_for_generation` turns checkpointing off around it, as here)
    model.train() if training else model.eval()
    torch.manual_seed(2)
    ids = torch.randint(4, cfg.vocab_size, (ROWS, PROMPT))
    mode = Ops()
    restore = cuda_dropout()
    try:
        with mode, torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 generation_config=generation_config(new_tokens))
    finally:
        restore()
    if out.shape[1] != PROMPT + new_tokens:
        raise SystemExit(f"{family}: generate stopped at {out.shape[1] - PROMPT} tokens")
    return mode.of("forward"), mode.names


def minus(a, b, scale=1.0):
    return {k: (a[k] - b[k]) / scale for k in a}


def decode(family, layers, lora, training=False, dropout=0.0):
    (short, _), (long, names) = (generate(family, layers, lora, n, training, dropout)
                                 for n in DECODE)
    step = minus(long, short, DECODE[1] - DECODE[0])
    fixed = {k: short[k] - DECODE[0] * step[k] for k in short}
    return {"step": step, "call": fixed}, names


def measure(family, layers, lora):
    gc, _ = train(family, layers, lora, True)
    plain, _ = train(family, layers, lora, False)
    sc, _ = score(family, layers, lora)
    dec, _ = decode(family, layers, lora)
    dec_training, _ = decode(family, layers, lora, training=True)
    # PEFT's `lora_dropout` (0.05 here; at its default 0 an identity) drops in training mode
    dec_dropout, _ = decode(family, layers, lora, training=True, dropout=0.05)
    return {
        "adapters": gc["adapters"],
        "train_forward": gc["forward"],
        "train_forward_no_checkpointing": plain["forward"],
        "backward": plain["backward"],
        "recompute": minus(gc["backward"], plain["backward"]),
        "score": sc,
        "decode_step": dec["step"],
        "generate_call": dec["call"],
        "decode_step_training": dec_training["step"],
        "decode_step_training_dropout": dec_dropout["step"],
    }


DROPOUT = 0.05


def dropout_per_adapter(family):
    """Kernels PEFT's adapter dropout adds to each adapter (module docstring)."""
    layers = DEPTHS[1]
    adapters_n = adapters(build(family, layers, "all")[0])
    out = {}
    for key, run in [
        ("train_forward", lambda p: train(family, layers, "all", True, p)[0]["forward"]),
        ("train_forward_no_checkpointing",
         lambda p: train(family, layers, "all", False, p)[0]["forward"]),
        ("backward", lambda p: train(family, layers, "all", False, p)[0]["backward"]),
        ("backward_checkpointed", lambda p: train(family, layers, "all", True, p)[0]["backward"]),
        ("score_training_mode", lambda p: score(family, layers, "all", p, training=True)[0]),
    ]:
        out[key] = minus(run(DROPOUT), run(0.0), adapters_n)
    # without checkpointing the first layer's q, k and v read an input that needs no gradient
    # (nothing before it is trained, and only checkpointing calls enable_input_require_grads):
    # their dropout has no backward, so `backward` is short of one a adapter by those
    out["adapters"] = adapters_n
    return out


def split(low, high):
    """(per layer, fixed) of every counted quantity, from the two `DEPTHS`."""
    out = {}
    for key, v in low.items():
        if key == "adapters":
            continue
        layer = minus(high[key], v, DEPTHS[1] - DEPTHS[0])
        out[key] = {"per_layer": layer, "fixed": {k: v[k] - DEPTHS[0] * layer[k] for k in v}}
    return out


def family_record(family):
    lo, hi = DEPTHS
    runs = {(lora, n): measure(family, n, lora) for lora in (None, "all", "subset") for n in DEPTHS}
    full = split(runs[(None, lo)], runs[(None, hi)])
    lora_all = split(runs[("all", lo)], runs[("all", hi)])
    lora_sub = split(runs[("subset", lo)], runs[("subset", hi)])
    # adapters a layer
    n_all, n_sub = (runs[(m, hi)]["adapters"] - runs[(m, lo)]["adapters"] for m in ("all", "subset"))
    per_adapter, frozen = {}, {}
    for key in lora_all:
        a, s = lora_all[key]["per_layer"], lora_sub[key]["per_layer"]
        per_adapter[key] = minus(a, s, n_all - n_sub)
        frozen[key] = {k: a[k] - n_all * per_adapter[key][k] for k in a}
    return {
        "adapters_per_layer": {"all-linear": n_all, "+".join(SUBSET): n_sub},
        "full": full,
        "lora_all_linear": lora_all,
        "lora_subset": lora_sub,
        "lora_per_adapter": per_adapter,
        "lora_frozen_layer": frozen,
        "lora_dropout_per_adapter": dropout_per_adapter(family),
        "top_kernels_decode_2_layers": top(family),
    }


# MoE families: (config class, fields at each expert count); every expert is hit (ROWS x LENGTH
# tokens each pick `num_experts_per_tok`), so the difference of the two counts, over the experts
# added and the layers, is one expert's operators
MOE = {
    "gpt_oss": ("GptOssConfig", {"num_experts_per_tok": 2, "intermediate_size": 352,
                                 "sliding_window": 16, "layer_types": None}),
    "qwen3_moe": ("Qwen3MoeConfig", {"num_experts_per_tok": 2, "moe_intermediate_size": 352}),
}
EXPERTS = (4, 8)
MOE_LAYERS = 2


def moe_model(family, experts):
    import transformers

    cls_name, extra = MOE[family]
    key = "num_local_experts" if family == "gpt_oss" else "num_experts"
    cfg = getattr(transformers, cls_name)(**{**tiny.COMMON, **extra, key: experts,
                                             "num_hidden_layers": MOE_LAYERS})
    # gpt-oss has no SDPA path in 4.56 (its sinks): eager attention, the same in both counts
    cfg._attn_implementation = "eager" if family == "gpt_oss" else "sdpa"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    model.requires_grad_(True)
    return model.train(), cfg


def moe_record(family):
    """Kernels a training-mode forward and its backward add for each expert hit, a layer: the
    expert loop transformers runs in training (`GptOssExperts.forward`: `self.training` or on
    CPU; `Qwen3MoeSparseMoeBlock.forward` always)."""
    counts = []
    for experts in EXPERTS:
        model, cfg = moe_model(family, experts)
        ids, mask = inputs(cfg)
        fn, me = logps_fn(), fake_trainer(model)
        mode = Ops()
        with mode:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logps, _ = fn(me, model, ids, mask, LENGTH - PROMPT, compute_entropy=True)
            loss = -logps.mean()
            mode.phase = "backward"
            loss.backward()
        counts.append({"forward": mode.of("forward"), "backward": mode.of("backward")})
    added = (EXPERTS[1] - EXPERTS[0]) * MOE_LAYERS
    return {"experts": EXPERTS, "layers": MOE_LAYERS, "counts": counts,
            "per_expert": {side: minus(counts[1][side], counts[0][side], added)
                           for side in ("forward", "backward")}}


def top(family):
    _, names = generate(family, 2, None, DECODE[1])
    return [[n, c] for (_, n), c in names.most_common(12)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append")
    ap.add_argument("--moe", action="append", help="an MoE family (gpt_oss, qwen3_moe)")
    ap.add_argument("--moe-decode", action="append",
                    help="an MoE family whose decode step is counted (ops_moe.py: gpt_oss, "
                         "qwen3_moe, qwen2_moe, mixtral)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import peft
    import transformers
    import trl

    kernels.install_dropout()  # the adapters' dropout as on CUDA: `native_dropout`
    record = {"transformers": transformers.__version__, "trl": trl.__version__,
              "peft": peft.__version__, "torch": torch.__version__, "rows": ROWS,
              "length": LENGTH, "prompt": PROMPT, "decode_new_tokens": DECODE,
              "lora_subset": SUBSET, "depths": DEPTHS, "families": {}}
    for family in args.family or list(FAMILIES):
        record["families"][family] = family_record(family)
        f = record["families"][family]["full"]
        print(family, json.dumps({k: f[k]["per_layer"]["kernel"] for k in f}), file=sys.stderr)
    record["moe_training_loop"] = {}
    for family in args.moe if args.moe is not None else list(MOE):
        record["moe_training_loop"][family] = moe_record(family)
        print(family, json.dumps(record["moe_training_loop"][family]["per_expert"]),
              file=sys.stderr)
    import ops_moe

    # a decode step through each MoE block, as TRL (training mode) and Unsloth (eval) generate
    record["moe_decode"] = ops_moe.record(args.moe_decode)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
